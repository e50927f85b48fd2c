"""Backups of everything myclaw keeps, and putting one back.

A backup is a folder: each SQLite file copied with SQLite's online backup
(a consistent copy while the gateway runs and writes), the workspace
(AGENTS.md, SOUL.md, the file store) copied as files, and ``manifest.json``
naming each file with its size, SHA-256 and schema version. The folder and
its files are readable by their owner only: they hold everything people
told the bot. The config file is left out (it holds the secrets; keep it
apart).

The extraction buffer is copied *before* memory.db. A transaction over both
commits memory.db first, and memory.db records every buffered line it
deleted (``buffer_gone``), so a buffer copy older than the memory.db copy
is the case opening the database already mends (memory/buffer.py); the
other order could bring back lines a batch had already extracted.

A backup that fails (a full disk, most often) removes what it made: the
folder, when it created it (and the folders above it it created), else
what it wrote into the empty folder it was given; never anything else.

Restore checks the backup first (checksums, ``PRAGMA quick_check``, and
that this myclaw can open every file: none of a schema newer than its own,
none it does not know of; a file of an older schema is migrated at the
next start, as an old install's would be), then
moves the current files aside into ``data/before-restore-<time>/`` (nothing
is deleted) and copies the backup's files in. It needs the gateway and
``myclaw chat`` stopped: it holds the data lock exclusively
(gateway/datalock.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .config import Config, Paths

__all__ = ["BackupError", "BackupFile", "Manifest", "backup", "myclaw_version", "restore", "returning_users", "schema_versions", "verify"]

MANIFEST = "manifest.json"
FORMAT = 1
WORKSPACE = "workspace"


class BackupError(Exception):
    """A backup cannot be made, read or put back; the message says why."""


@dataclass(frozen=True)
class BackupFile:
    role: str  # buffer | memory | gateway | cron
    name: str  # file name inside the backup folder
    bytes: int
    sha256: str
    schema_version: int


@dataclass
class Manifest:
    created_at: str
    myclaw_version: str
    files: list[BackupFile] = field(default_factory=list)
    workspace_files: int = 0
    format: int = FORMAT


def schema_versions() -> dict[str, int]:
    """Role (as :meth:`Paths.data_files` names them) -> the schema version
    this myclaw writes: its number of migrations."""
    from memory.schema import BUFFER_MIGRATIONS, MIGRATIONS

    from .cron import CRON_MIGRATIONS
    from .sessions import MIGRATIONS as SESSION_MIGRATIONS

    return {"buffer": len(BUFFER_MIGRATIONS), "memory": len(MIGRATIONS), "gateway": len(SESSION_MIGRATIONS),
            "cron": len(CRON_MIGRATIONS)}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check(path: Path) -> int:
    """``quick_check`` of a copy; its schema version."""
    # A copy is a rollback-journal file (no WAL), so read-only opens it
    # without creating anything beside it.
    conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    try:
        (result,) = conn.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            raise BackupError(f"{path.name} is damaged: {result}")
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path.name} is not a readable SQLite database: {exc}") from None
    finally:
        conn.close()


def _copy_sqlite(src: Path, dst: Path) -> None:
    # The online backup reads one consistent snapshot, even with a gateway
    # writing; the copy is a plain (rollback-journal) file, no -wal beside it.
    # An ordinary connection (it only reads): read-only, SQLite would leave
    # -wal and -shm files beside a database no one else has open.
    source = sqlite3.connect(src, timeout=30)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"cannot copy {src}: {exc}") from None
    finally:
        target.close()
        source.close()


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def myclaw_version() -> str:
    """This build's version (the manifest's, the gateway's start line)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("myclaw")
    except PackageNotFoundError:
        return "unknown"


def backup(cfg: Config, paths: Paths, dest: Path, *, now: Callable[[], datetime] | None = None) -> Manifest:
    """Copy every data file and the workspace into ``dest`` (a new folder)."""
    if dest.exists() and any(dest.iterdir()):
        raise BackupError(f"{dest} is not empty; give a new folder")
    if not paths.workspace(cfg).is_dir() and not any(p.exists() for p in paths.data_files(cfg).values()):
        # An empty backup would pass for one until the day it is needed.
        raise BackupError(f"nothing to back up in {paths.home}: no data files and no workspace (wrong MYCLAW_HOME?)")
    stamp = (now or (lambda: datetime.now(UTC)))().strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest = Manifest(created_at=stamp, myclaw_version=myclaw_version())
    made = _missing(dest)
    old_umask = os.umask(0o077)  # every file below: owner only
    try:
        _private_dir(dest)
        for role, src in paths.data_files(cfg).items():
            if not src.exists():
                continue
            name = f"{role}.db"
            _copy_sqlite(src, dest / name)
            version = _check(dest / name)
            manifest.files.append(
                BackupFile(role, name, (dest / name).stat().st_size, _sha256(dest / name), version)
            )
        workspace = paths.workspace(cfg)
        if workspace.is_dir():
            shutil.copytree(workspace, dest / WORKSPACE, ignore=shutil.ignore_patterns("*.tmp", ".*.tmp"))
            for p in (dest / WORKSPACE).rglob("*"):  # copytree keeps the source's modes
                os.chmod(p, 0o700 if p.is_dir() else 0o600)
            os.chmod(dest / WORKSPACE, 0o700)
            manifest.workspace_files = sum(1 for p in (dest / WORKSPACE).rglob("*") if p.is_file())
        (dest / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n", encoding="utf-8")
    except BaseException as exc:
        # A partial backup is no backup, and on a full disk its space is
        # wanted back: what this call made goes, nothing else.
        _remove_partial(dest, made)
        if isinstance(exc, OSError):
            raise BackupError(f"cannot write the backup in {dest}: {exc.strerror or exc}") from None
        raise
    finally:
        os.umask(old_umask)
    return manifest


def _missing(dest: Path) -> list[Path]:
    """The folders from ``dest`` up that do not exist yet, innermost first."""
    made = []
    for p in (dest, *dest.parents):
        if p.exists():
            break
        made.append(p)
    return made


def _remove_partial(dest: Path, made: list[Path]) -> None:
    """Remove a failed backup: ``dest`` when it made it (with the folders
    above it it made), else only what it wrote into ``dest`` (which was
    empty before)."""
    if not dest.is_dir():
        return
    if made:
        shutil.rmtree(dest, ignore_errors=True)
        for p in made[1:]:  # rmdir: only while still empty (another process may have written there since)
            with contextlib.suppress(OSError):
                p.rmdir()
        return
    for p in dest.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()


def verify(src: Path) -> Manifest:
    """Read ``src``'s manifest and check every file against it."""
    try:
        raw = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
        files = [BackupFile(**f) for f in raw.pop("files")]
        manifest = Manifest(files=files, **raw)
    except FileNotFoundError:
        raise BackupError(f"{src} is not a myclaw backup (no {MANIFEST})") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise BackupError(f"{src / MANIFEST} is not a backup manifest this myclaw reads: {exc}") from None
    if manifest.format != FORMAT:
        raise BackupError(f"{src} is a backup of format {manifest.format}; this myclaw reads format {FORMAT}")
    ours = schema_versions()
    newer = "it was made by a newer myclaw: restore it with that version or a later one (a downgrade is not supported)"
    for f in manifest.files:
        path = src / f.name
        if f.role not in ours:  # restoring the rest would leave its data behind
            raise BackupError(f"{f.name} in {src} holds '{f.role}', a file this myclaw does not keep; {newer}")
        if not path.is_file():
            raise BackupError(f"{f.name} is missing from {src}")
        if _sha256(path) != f.sha256:
            raise BackupError(f"{f.name} in {src} has changed since the backup was made (checksum differs)")
        # The file's own version, not the manifest's: the gateway would
        # refuse to start on a newer one (memory/db.py, SchemaTooNew).
        version = _check(path)
        if version > ours[f.role]:
            raise BackupError(
                f"{f.name} in {src} is at schema version {version}, newer than this myclaw's ({ours[f.role]}); {newer}"
            )
    return manifest


# Where a user's rows are, per file role: enough to tell who is stored.
_OWNERS = {
    "memory": ("SELECT owner FROM memories UNION SELECT owner FROM daily_events",),
    "gateway": ("SELECT owner FROM session_messages",),
}


def _owners(path: Path, role: str) -> set[str]:
    """The users ``path`` holds rows of (read-only; a file that cannot be
    read, or of a schema without these tables, names none)."""
    if not path.is_file():
        return set()
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return set()
    try:
        return {str(r[0]) for q in _OWNERS.get(role, ()) for r in conn.execute(q)}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()


def returning_users(cfg: Config, paths: Paths, src: Path, manifest: Manifest) -> list[str]:
    """Users the backup in ``src`` holds and the current data does not:
    erased (``myclaw memory forget``, /forget all) or merged since it was
    made. Restoring it brings them back, so the operator is told. A file
    the home has not (a new machine's) erased nobody: not compared."""
    targets = paths.data_files(cfg)
    then: set[str] = set()
    now: set[str] = set()
    for f in manifest.files:
        if f.role in _OWNERS and f.role in targets and targets[f.role].exists():
            then |= _owners(src / f.name, f.role)
            now |= _owners(targets[f.role], f.role)
    return sorted(then - now - {"_global"})


def restore(cfg: Config, paths: Paths, src: Path, *, now: Callable[[], datetime] | None = None) -> Path:
    """Put the backup in ``src`` in place; returns the folder the replaced
    files were moved to. The caller holds the data lock exclusively."""
    manifest = verify(src)
    stamp = (now or (lambda: datetime.now(UTC)))().strftime("%Y%m%dT%H%M%SZ")
    aside = paths.data_dir / f"before-restore-{stamp}"
    targets = paths.data_files(cfg)
    _private_dir(aside)
    # Every current file goes aside, also one the backup has no copy of: a
    # gateway.db newer than the backup's memory.db would otherwise replay
    # history the restored memory never saw.
    for role, dst in targets.items():
        for suffix in ("", "-wal", "-shm", "-journal"):
            cur = dst.with_name(dst.name + suffix)
            if cur.exists():
                os.replace(cur, aside / f"{role}.db{suffix}")
    workspace = paths.workspace(cfg)
    if (src / WORKSPACE).is_dir() and workspace.exists():
        shutil.move(str(workspace), str(aside / WORKSPACE))
    old_umask = os.umask(0o077)
    try:
        for f in manifest.files:
            dst = targets[f.role]
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.restoring")
            shutil.copyfile(src / f.name, tmp)
            os.replace(tmp, dst)
        if (src / WORKSPACE).is_dir():
            shutil.copytree(src / WORKSPACE, workspace)
    except OSError as exc:
        raise BackupError(
            f"restoring stopped: {exc.strerror or exc}; the files it was replacing are in {aside} "
            "(move them back, or run restore again)"
        ) from None
    finally:
        os.umask(old_umask)
    return aside
