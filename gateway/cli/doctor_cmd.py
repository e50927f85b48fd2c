"""``myclaw doctor``: check a setup the way the gateway would use it and
say what is wrong, one line a check (ok / warning / error, and what to do).
Exit code 0 when nothing is an error, 1 otherwise; ``--json`` for machines.

What it reads, in order: the config (the same file and ``MYCLAW_*``
overrides as the gateway, with the same error text), the secrets the
enabled parts need (set or not and where from, masked, never printed), a
few settings that are valid but risky (an empty ``allowFrom``), the data
files, the endpoints (``agent.transcription``'s too, when on; Feishu's
group information, which group titles need; skipped with
``--offline``) and whether a gateway
runs on this home (its lock) and its port is free.

Safe while the gateway runs, and changes nothing: data files are opened
read-only (``mode=ro``), only long enough for ``PRAGMA quick_check``, and
never migrated. A WAL database opened even read-only makes SQLite create
its ``-wal``/``-shm`` files when they are missing, so a file without them
(no process has it open) is opened ``immutable`` instead: no lock, no new
file. Every line passes through a redaction of all configured secrets
before it is printed: an endpoint's error text cannot leak a key either.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Coroutine, Mapping
from contextlib import closing
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import click
import httpx

from gateway.config import (
    ENV_OVERRIDES,
    env_name,
    fallback_env_path,
    Config,
    ConfigError,
    FeishuConfig,
    Paths,
    ProviderConfig,
    TelegramConfig,
    load_config,
    unknown_env,
)
from gateway.credentials import (
    EXAMPLE_PLACEHOLDERS,
    Credential,
    config_secrets,
    credentials_in_use,
    example_allow_from,
    example_identities,
)
from gateway.logging import Redactor

from . import main
from ._common import LOG_LEVELS, echo_json

__all__ = ["Check", "Report", "doctor", "inspect_database", "run_doctor"]

Status = Literal["ok", "warning", "error", "skipped"]


# A config error's line: a dotted field (its source after it, "(from MYCLAW_...)"), then ": ".
_FIELD = re.compile(r"(?m)^(\s*[A-Za-z_]\w*(?:\.\w+|\[\d+\])+(?: \([^)\n]*\))?):(?= )")
_HELD = "\x00"


@dataclass
class Check:
    name: str
    status: Status
    message: str
    fix: str = ""  # what to do about it; empty when nothing is to be done
    data: dict[str, Any] = field(default_factory=dict)  # figures for --json (latency, size, version)


@dataclass
class Report:
    home: Path
    config_file: Path
    checks: list[Check] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)  # values to redact from every line

    def add(self, name: str, status: Status, message: str, fix: str = "", **data: Any) -> Check:
        check = Check(name, status, message, fix, data)
        self.checks.append(check)
        return check

    @property
    def ok(self) -> bool:
        return not any(c.status == "error" for c in self.checks)

    def redact(self, text: str) -> str:
        # The logs' redaction: the configured values, and anything shaped
        # like a key or token (an endpoint's error body may echo one). A
        # config error's field ("gateway.admin.token: must be ...") is a
        # setting's name, not a token written down: its colon is kept from
        # the "token: <value>" rule, which took the message's first word.
        held = _FIELD.sub(lambda m: m.group(1) + _HELD, text)
        return Redactor(self.secrets).scrub(held).replace(_HELD, ":")

    def to_json(self) -> dict[str, Any]:
        checks = [{k: (self.redact(v) if isinstance(v, str) else v) for k, v in asdict(c).items()} for c in self.checks]
        return {"ok": self.ok, "home": str(self.home), "configFile": str(self.config_file), "checks": checks}

    def render(self) -> str:
        lines = []
        width = max([18, *(len(c.name) for c in self.checks)])
        for c in self.checks:
            text = f"{c.status:<8} {c.name:<{width}} {c.message}" + (f" -> {c.fix}" if c.fix else "")
            # A config error names one field a line (gateway.config's text); keep them under the message.
            lines.append(self.redact(text).replace("\n", "\n" + " " * (width + 10)))
        errors = sum(c.status == "error" for c in self.checks)
        warnings = sum(c.status == "warning" for c in self.checks)
        lines.append(f"{errors} error(s), {warnings} warning(s)")
        return "\n".join(lines)


# -- config, secrets, settings -----------------------------------------------------


def _check_config(report: Report, env: Mapping[str, str]) -> Config | None:
    for name in unknown_env(env):
        report.add("environment", "warning", f"{name} is not a myclaw setting and is ignored", "rename or unset it")
    level = env.get("MYCLAW_LOG_LEVEL")
    if level is not None and level.strip().upper() not in LOG_LEVELS:
        report.add("environment", "error", f"MYCLAW_LOG_LEVEL: unknown level {level!r}", f"use {', '.join(LOG_LEVELS)}")
    try:
        cfg = load_config(report.config_file, env)
    except ConfigError as exc:  # the gateway's own message: names the field and the value
        report.add("config", "error", str(exc), f"fix {report.config_file} or the MYCLAW_* variable named")
        return None
    overrides = sorted(n for n in env if n in ENV_OVERRIDES or fallback_env_path(n) is not None)
    where = f"home {report.home}" + (f"; from the environment: {', '.join(overrides)}" if overrides else "")
    if report.config_file.exists():
        report.add("config", "ok", f"{report.config_file} loaded ({where})", overrides=overrides)
    else:
        report.add(
            "config", "warning", f"no config file at {report.config_file} ({where}): `myclaw gateway` refuses to "
            "start without one; `myclaw chat` and the memory commands run on defaults and the environment",
            "copy config.example.json there and fill it in", overrides=overrides,
        )
    return cfg


_TELEGRAM_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]+")
_NOT_SECRET = frozenset({"channels.feishu.appId"})  # an app id names the app; its secret is the key


def _source(path: tuple[str | int, ...], env: Mapping[str, str]) -> str:
    name = env_name(path, env)
    return f"env {name}" if name else "config file"


def _mask(value: str) -> str:
    """Enough to tell two keys apart, never enough to use one."""
    return f"{value[:3]}…{value[-2:]}, {len(value)} chars" if len(value) >= 16 else f"{len(value)} chars"


def _secret_checks(report: Report, cfg: Config, env: Mapping[str, str]) -> None:
    # With the ones sent somewhere, the one the memory page asks for (its
    # length the config checks already; spaces around it would be part of it).
    found = credentials_in_use(cfg)
    if cfg.gateway.admin.enabled and cfg.memory.enabled:
        found.append(Credential("gateway.admin.token", ("gateway", "admin", "token"), cfg.gateway.admin.token, "error"))
    in_file = [c.setting for c in found if c.value.get_secret_value() and c.setting not in _NOT_SECRET
               and _source(c.path, env) == "config file"]
    if in_file:
        report.checks.append(_check_config_mode(report.config_file, in_file))
    for c in found:
        name = setting = c.setting
        value, source, if_empty = c.value.get_secret_value(), _source(c.path, env), c.if_empty
        if not value:
            # A local endpoint may need no key; a channel cannot run without its credentials.
            hint = " (fine for an endpoint that needs none)" if if_empty == "warning" else ""
            report.add(name, if_empty, f"not set{hint}", f"set {setting} or its MYCLAW_* variable", source=None)
        elif value in EXAMPLE_PLACEHOLDERS:
            report.add(name, "error", f"still the placeholder from config.example.json ({source})",
                       f"put the real value in {setting}", source=source)
        elif value != value.strip():
            report.add(name, "warning", f"set ({source}), but with spaces or a newline around it",
                       "remove them: they are sent as part of the credential", source=source)
        elif setting == "channels.telegram.token" and not _TELEGRAM_TOKEN.fullmatch(value):
            report.add(name, "warning", f"set ({source}), but not shaped like a bot token (digits:letters)",
                       "copy the token BotFather gave", source=source)
        else:
            shown = value if setting in _NOT_SECRET else _mask(value)
            report.add(name, "ok", f"set ({source}): {shown}", source=source)


def _check_config_mode(path: Path, settings: list[str]) -> Check:
    """A config file holding keys that other accounts can read. An editor
    or `cp` makes it 0644 under the usual umask; myclaw never changes a mode
    the operator chose (as with the data files), so it names the command."""
    try:
        exposed = path.stat().st_mode & 0o077
    except OSError:  # gone since it was read: nothing to say about its mode
        exposed = 0
    if not exposed:
        return Check("config.json permissions", "ok", f"{path} (with its keys) readable by you only")
    return Check("config.json permissions", "warning",
                 f"{path} holds {', '.join(settings)} and other accounts on this machine can read it",
                 f"chmod 600 {path} (or move the keys to their MYCLAW_* variables)", {"settings": settings})


def _setting_checks(report: Report, cfg: Config) -> None:
    tz = ZoneInfo(cfg.gateway.timezone)  # validated by the config already
    report.add("timezone", "ok", f"{cfg.gateway.timezone}, now {datetime.now(tz):%Y-%m-%d %H:%M} there")
    channels: dict[str, TelegramConfig | FeishuConfig] = {
        "telegram": cfg.channels.telegram, "feishu": cfg.channels.feishu,
    }
    enabled = [n for n, c in channels.items() if c.enabled]
    if not enabled:
        report.add("channels", "warning",
                   "no channel is enabled: `myclaw gateway` refuses to start (`myclaw chat` works)",
                   "set channels.telegram.enabled or channels.feishu.enabled")
    for name in enabled:
        if not channels[name].allow_from:
            report.add(f"{name} allowFrom", "warning",
                       "empty: anyone who finds the bot can talk to it and fill its memory",
                       f"list user ids or names in channels.{name}.allowFrom")
    if left := example_allow_from(cfg):
        report.add("telegram allowFrom", "error",
                   "still lists config.example.json's " + ", ".join(f'"{e}"' for e in left)
                   + ": whoever has that name or id can talk to the bot",
                   "put your users' ids or names in channels.telegram.allowFrom")
    if left := example_identities(cfg):
        report.add("memory.identities", "warning",
                   "still maps config.example.json's " + ", ".join(left)
                   + ": someone with that id would share the memory of the user it is mapped to",
                   "remove them, or map your users' own channel:sender_id handles")
    fs = cfg.channels.feishu
    if fs.enabled and fs.mode == "webhook" and not (
        fs.verification_token.get_secret_value() or fs.encrypt_key.get_secret_value()
    ):
        report.add("feishu webhook", "error",
                   "mode=webhook without verificationToken or encryptKey: the channel refuses "
                   "to start (anyone who found the URL could post events)",
                   "set channels.feishu.verificationToken or encryptKey (from the app's event settings)")
    elif fs.enabled and fs.mode == "webhook" and not fs.encrypt_key.get_secret_value():
        report.add("feishu webhook", "warning",
                   "verificationToken without encryptKey: Feishu's events are not signed and the token rides in "
                   "every body, so whoever reads one delivery can post events as any user",
                   "set an Encrypt Key in the app's event settings and channels.feishu.encryptKey")
    admin = cfg.gateway.admin
    if admin.enabled and not cfg.memory.enabled:
        report.add("memory page", "warning",
                   "gateway.admin.enabled is set but memory.enabled is false: the page is not served",
                   "enable memory or the page's setting, not one without the other")
    elif admin.enabled and cfg.gateway.host not in ("127.0.0.1", "localhost", "::1"):
        report.add("memory page", "warning", f"served over plain HTTP on {cfg.gateway.host}, not loopback",
                   "keep gateway.host at 127.0.0.1 and put a TLS reverse proxy or an SSH tunnel in front")
    if cfg.memory.embedding.enabled and not cfg.memory.enabled:
        report.add("embedding", "warning", "memory.embedding.enabled is set but memory is off: nothing is embedded")


# -- data files --------------------------------------------------------------------


@dataclass(frozen=True)
class DataFile:
    name: str
    path: Path
    expected: int  # the schema version this build writes (its number of migrations)
    set_aside_since: int | None = None  # the buffer file: the version from which lines can be set aside


def data_files(cfg: Config | None, paths: Paths) -> list[DataFile]:
    """Every SQLite file the gateway opens, where it opens it
    (:meth:`Paths.data_files`), with the schema version this build writes."""
    from gateway.backup import schema_versions
    from memory.schema import SET_ASIDE_SINCE

    versions = schema_versions()
    files = paths.data_files(cfg)
    # Checked in the order people read them: memory.db before its buffer file.
    order = [r for r in ("memory", "buffer", "gateway", "cron") if r in files]
    return [DataFile("memory.db" if r == "memory" else files[r].name, files[r], versions[r],
                     SET_ASIDE_SINCE if r == "buffer" else None) for r in order]


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def inspect_database(f: DataFile) -> Check:
    """Open ``f`` read-only, ``quick_check`` it and compare its schema
    version with this build's. Creates, migrates and locks nothing (see the
    module docstring)."""
    if not f.path.exists():
        return Check(f.name, "ok", f"{f.path} not created yet (made at first start)", data={"path": str(f.path)})
    if not f.path.is_file():  # a directory (or a device) where the file goes: SQLite would say "disk I/O error"
        kind = "a directory" if f.path.is_dir() else "not a regular file"
        return Check(f.name, "error", f"{f.path}: is {kind}, not a database file: the gateway cannot open it",
                     "move it aside (the gateway makes a new one at its next start) or restore a backup",
                     {"path": str(f.path)})
    wal, shm = Path(f"{f.path}-wal"), Path(f"{f.path}-shm")
    size = f.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    data: dict[str, Any] = {"path": str(f.path), "bytes": size, "expected_version": f.expected}
    # Open by someone (both files there): an ordinary read-only connection
    # sees their latest commit. Otherwise the file alone, immutable.
    live = wal.exists() and shm.exists()
    uri = f.path.absolute().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    started = time.perf_counter()
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=2.0)) as conn:
            problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if f.set_aside_since is not None and f.expected >= version >= f.set_aside_since:
                # Counts only (never the lines' words); a v1 buffer has no such column.
                # A group's own lines (owner group:..., memory/groupnotes.py) are no user's: counted apart.
                lines, users, groups = conn.execute(
                    "SELECT COUNT(*), COUNT(DISTINCT CASE WHEN owner NOT LIKE 'group:%' THEN owner END),"
                    " COUNT(DISTINCT CASE WHEN owner LIKE 'group:%' THEN owner END)"
                    " FROM extraction_buffer WHERE set_aside_at IS NOT NULL"
                ).fetchone()
                data["set_aside"] = {"lines": int(lines), "users": int(users)} | (
                    {"groups": int(groups)} if groups else {})
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        return Check(f.name, "error", f"{f.path}: cannot open it as a myclaw database ({exc})",
                     "stop the gateway, then restore it from a backup or move it aside", data)
    data.update(version=version, check_ms=round((time.perf_counter() - started) * 1000, 1))
    if problems != ["ok"]:
        return Check(f.name, "error", f"{f.path}: PRAGMA quick_check found damage: {'; '.join(problems)}",
                     "stop the gateway, keep a copy, then restore a backup (or try `sqlite3 FILE .recover`)", data)
    if version > f.expected:
        return Check(f.name, "error", f"{f.path}: schema version {version} is newer than this myclaw ({f.expected}): "
                     "it was written by a newer myclaw, and this one refuses to open it",
                     "run the newer myclaw again (a downgrade is not supported) or restore a backup from this version",
                     data)
    note = f"schema v{version}" + (f", migrated to v{f.expected} at the next start" if version < f.expected else "")
    if wal.exists() and not shm.exists():
        note += "; a -wal file without -shm: not closed cleanly, its last changes are not checked here"
    elif live:
        note += "; open in another process (the gateway?)"
    return Check(f.name, "ok", f"{f.path}: {_size(size)}, quick_check ok, {note}", data=data)


def _set_aside_check(lines: int, users: int, groups: int = 0) -> Check:
    whose = ", ".join([f"{users} user{'s' if users != 1 else ''}"] * bool(users or not groups)
                      + [f"{groups} group{'s' if groups != 1 else ''}"] * bool(groups))
    return Check(
        "set aside", "warning",
        f"{lines} line{'s' if lines != 1 else ''} set aside ({whose}): "
        "the memory model could not take them even one at a time; kept, never retried",
        "use a memory.model with a larger context, or a higher memory.maxTokens, then run `myclaw memory retry-set-aside` "
        "(`myclaw memory log --action set-aside` lists them, by size)",
        {"lines": lines, "users": users} | ({"groups": groups} if groups else {}),
    )


def inspect_vectors(path: Path, model: str | None, dimension: int | None) -> Check | None:
    """How far hybrid recall's embedding got (``model``: the name vectors
    are stored under, ``None`` when ``memory.embedding`` is off): counts
    only, read-only. ``None`` when there is nothing to say."""
    if not path.is_file():
        return None
    live = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    uri = path.absolute().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    size = "" if dimension is None else " AND length(v.vector) = ?"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=2.0)) as conn:
            active, embedded, total = conn.execute(
                f"""SELECT (SELECT COUNT(*) FROM memories WHERE status = 'active'),
                           (SELECT COUNT(*) FROM memory_vectors v JOIN memories m ON m.id = v.memory_id
                             WHERE m.status = 'active' AND v.model = ? AND v.content_hash = m.content_hash{size}),
                           (SELECT COUNT(*) FROM memory_vectors)""",
                (model or "", *(() if dimension is None else (4 * dimension,))),
            ).fetchone()
            current = conn.execute("SELECT COUNT(*) FROM memory_vectors WHERE model = ?", (model or "",)).fetchone()[0]
    except sqlite3.DatabaseError:  # no such table (before schema 4), damage: memory.db's own check says
        return None
    other = int(total) - int(current)
    if model is None:
        if not total:
            return None
        return Check("memory vectors", "ok", f"{total} vector{'s' if total != 1 else ''} kept while memory.embedding "
                     "is off: unused, deleted with their memories, reused if it is turned on again with the same model",
                     data={"model": None, "active": active, "embedded": 0, "other": total})
    todo = int(active) - int(embedded)
    msg = f"{embedded} of {active} active memories embedded with {model}"
    if todo:
        msg += (f"; {todo} still to embed (a running gateway embeds them in the background, a batch at a time;"
                " found by their words meanwhile)")
    if other:
        msg += (f"; {other} vector{'s' if other != 1 else ''} of another model or size"
                " (unused; each replaced when its memory is embedded again)")
    return Check("memory vectors", "ok", msg, data={"model": model, "active": active, "embedded": embedded,
                                                     "other": other})


def inspect_held_files(path: Path) -> Check | None:
    """MEMORY.md saves whose import is held (memory/migrate.py: most facts
    gone in one save), from the import ledger; read-only, counts and file
    names only. ``None`` when there are none."""
    rows = _ledger_rows(path, "held")
    held: list[dict[str, Any]] = []
    for (value,) in rows:
        try:
            h = json.loads(value).get("held")
        except (ValueError, AttributeError):
            continue
        if isinstance(h, dict):
            held.append({k: h.get(k) for k in ("file", "removed", "facts", "since")})
    if not held:
        return None
    from memory.migrate import SHRINK_HOLD

    said = "; ".join(f"{h['file']} lost {h['removed']} of {h['facts']} facts in one save at {h['since']}" for h in held)
    return Check("memory files", "warning", f"import held, nothing archived: {said}",
                 "if the file was damaged, put its lines back (an editor's backup, `git`); if the lines were "
                 "removed on purpose, leave it: they are archived "
                 f"{SHRINK_HOLD.total_seconds() / 60:g} minutes after the save (restorable from the memory page)",
                 {"held": held})


# What the operator does about each kind of skipped save (memory/migrate.py).
_SKIP_FIXES = {
    "unclosed_comment": ("an unclosed <!-- comment", "end the comment with --> on its line"),
    "not_utf8": ("not UTF-8", "save it as UTF-8"),
}


def inspect_skipped_files(path: Path, memory_dir: Path | None = None) -> Check | None:
    """Memory files whose latest save was skipped for a problem of the file
    (memory/migrate.py: an unclosed ``<!--``, not UTF-8), from the import
    ledger; read-only, kind, path and line, never the lines. ``None`` when
    there are none. ``memory_dir``: ``<workspace>/memory``, where a file
    deleted since is not listed (the next full import drops its record)."""
    rows = _ledger_rows(path, "skipped")
    skipped: list[dict[str, Any]] = []
    for (value,) in rows:
        try:
            s = json.loads(value).get("skipped")
        except (ValueError, AttributeError):
            continue
        if isinstance(s, dict) and s.get("kind") in _SKIP_FIXES:
            if memory_dir is not None and not (memory_dir / str(s.get("file"))).is_file():
                continue
            skipped.append({k: s.get(k) for k in ("file", "kind", "line", "since")})
    if not skipped:
        return None
    skipped.sort(key=lambda s: str(s["file"]))
    said = "; ".join(f"{s['file']}: {_SKIP_FIXES[s['kind']][0]} at line {s['line']} (saved {s['since']})"
                     for s in skipped)
    fixes = "; ".join(dict.fromkeys(_SKIP_FIXES[s["kind"]][1] for s in skipped))
    return Check("skipped memory files", "warning", f"a save skipped, nothing imported or archived: {said}",
                 f"{fixes}; the next save is imported (what was imported before stays)", {"skipped": skipped})


def _ledger_rows(path: Path, word: str) -> list[tuple[str]]:
    """The import ledger's entries (memory.db's ``meta``) that name
    ``word``, read-only; none if memory.db is missing or damaged."""
    if not path.is_file():
        return []
    live = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    uri = path.absolute().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=2.0)) as conn:
            return conn.execute("SELECT value FROM meta WHERE key >= 'migrated:' AND key < 'migrated;' "
                                "AND value LIKE ?", (f'%"{word}"%',)).fetchall()
    except sqlite3.DatabaseError:  # damage: memory.db's own check says
        return []


def _writable_dir(report: Report, name: str, d: Path) -> None:
    existing = d
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK) or not existing.is_dir():
        report.add(name, "error", f"{d}: {existing} is not a writable directory", "fix its permissions or MYCLAW_HOME",
                   path=str(d))
        return
    free = shutil.disk_usage(existing).free
    state = "writable" if existing == d else f"does not exist yet (created at first start under {existing})"
    status: Status = "warning" if free < 200 * 1024 * 1024 else "ok"
    report.add(name, status, f"{d}: {state}, {_size(free)} free", "free some disk space" if status == "warning" else "",
               path=str(d), free_bytes=free)


def _data_checks(report: Report, cfg: Config | None, paths: Paths) -> None:
    _writable_dir(report, "data dir", paths.data_dir)
    if cfg is not None and paths.memory_db(cfg).parent != paths.data_dir:
        _writable_dir(report, "memory.dbPath dir", paths.memory_db(cfg).parent)
    files = data_files(cfg, paths)
    for f in files:
        check = inspect_database(f)
        report.checks.append(check)
        if (aside := check.data.get("set_aside")) and aside["lines"]:
            report.checks.append(_set_aside_check(aside["lines"], aside["users"], aside.get("groups", 0)))
        if f.name == "memory.db" and cfg is not None and cfg.memory.enabled and check.status == "ok":
            e = cfg.memory.embedding
            model = None
            if e.enabled:
                from memory.embedding import vector_model  # numpy comes with it: only with hybrid recall on

                model = vector_model(e.model, e.dimensions)
            vectors = inspect_vectors(f.path, model, e.dimensions)
            if vectors is not None:
                report.checks.append(vectors)
            if (held := inspect_held_files(f.path)) is not None:
                report.checks.append(held)
            if (skipped := inspect_skipped_files(f.path, paths.workspace(cfg) / "memory")) is not None:
                report.checks.append(skipped)
    report.checks.append(_check_permissions(files))


def _check_permissions(files: list[DataFile]) -> Check:
    """Data files other accounts can read or write. New ones are made 0600
    (memory.db.private_file), but an install from before keeps its 0644:
    myclaw never changes a mode the operator may have chosen, so this names
    them and the command instead of fixing them silently."""
    exposed = [
        p for f in files for p in (f.path, Path(f"{f.path}-wal"), Path(f"{f.path}-shm"))
        if p.exists() and p.stat().st_mode & 0o077
    ]
    if not exposed and not any(f.path.exists() for f in files):
        return Check("data permissions", "ok", "no data files yet (each is made owner-only at first start)")
    if not exposed:
        return Check("data permissions", "ok", "data files readable by you only")
    names = " ".join(str(p) for p in exposed)
    return Check("data permissions", "warning",
                 f"other accounts on this machine can read (or write) {names}: every user's memories and conversations",
                 f"chmod go-rwx {names}", {"files": [str(p) for p in exposed]})


# -- endpoints ---------------------------------------------------------------------


@dataclass
class _Answer:
    """One HTTP exchange: a status and body, or why there was none."""

    status: int | None
    body: Any
    ms: float
    failure: str = ""  # what went wrong, to follow the URL: "is unreachable (...)", "did not answer within ..."


async def _call(
    client: httpx.AsyncClient, method: str, url: str, *, headers: Mapping[str, str] | None = None,
    json: Any = None, data: Mapping[str, str] | None = None,
) -> _Answer:
    started = time.perf_counter()
    try:
        resp = await client.request(method, url, headers=headers, json=json, data=data)
    except httpx.TimeoutException:
        timeout = client.timeout.read
        return _Answer(None, None, 0.0, f"did not answer within {timeout:g} s")
    except (httpx.ConnectError, httpx.NetworkError) as exc:
        return _Answer(None, None, 0.0, f"is unreachable ({_reason(exc)})")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # a bad scheme, a broken server, TLS trouble
        return _Answer(None, None, 0.0, f"failed ({type(exc).__name__}: {exc})")
    ms = round((time.perf_counter() - started) * 1000, 1)
    try:
        body = resp.json()
    except ValueError:  # an HTML page: often a baseUrl without /v1
        body = None
    return _Answer(resp.status_code, body, ms)


def _reason(exc: BaseException) -> str:
    """The OS's words for a failed connection ("Connection refused", "Name
    or service not known"): httpx's async client says only "All connection
    attempts failed" and keeps the cause in the chain."""
    reason = str(exc) or type(exc).__name__
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and (seen.errno or seen.strerror):
            reason = os.strerror(seen.errno) if isinstance(seen.errno, int) and seen.errno > 0 else str(seen.strerror)
        seen = seen.__cause__ or seen.__context__
    return reason


def _said(body: Any) -> str:
    """The error text of an OpenAI-, Telegram- or Feishu-shaped body."""
    if isinstance(body, dict):
        err = body.get("error")
        text = err.get("message") if isinstance(err, dict) else err
        text = text or body.get("description") or body.get("msg")
        if text:
            return f": {str(text)[:200]}"
    return ""


def _auth(provider: ProviderConfig) -> dict[str, str]:
    key = provider.api_key.get_secret_value()
    return {"Authorization": f"Bearer {key}"} if key else {}


@dataclass(frozen=True)
class _Endpoint:
    name: str  # "llm", "memory llm", "embedding"
    provider: ProviderConfig
    setting: str  # where its URL and key are set, for the fix text
    models: tuple[str, ...]  # the chat models used on it, or the embedding model
    fallback: bool = False  # only fallbacks use it: the gateway runs without it, but fails over to nothing there
    model_settings: tuple[str, ...] = ()  # where each of ``models`` is set ("agent.fallbacks[0].model"), in order


def _endpoints(cfg: Config) -> list[_Endpoint]:
    """The OpenAI-compatible endpoints the gateway calls; one that several
    models share (the memory model's, a fallback's) is asked once, for all
    of them."""
    main = _Endpoint("llm", cfg.provider, "provider", (cfg.agent.model,), model_settings=("agent.model",))
    chat = [main]

    def add(name: str, provider: ProviderConfig, setting: str, model: str) -> None:
        # A missing model's warning names the setting that asks for it (the
        # example's fallback, kept with another provider, is not agent.model).
        model_setting = "memory.model" if name == "memory llm" else f"{name}.model"
        for n, e in enumerate(chat):
            if (e.provider.base_url, e.provider.api_key) == (provider.base_url, provider.api_key):
                known = model in e.models
                chat[n] = replace(e, models=e.models if known else (*e.models, model),
                                  model_settings=e.model_settings if known else (*e.model_settings, model_setting),
                                  fallback=e.fallback and "fallbacks[" in name)
                return
        chat.append(_Endpoint(name, provider, setting, (model,), fallback="fallbacks[" in name,
                              model_settings=(model_setting,)))

    for i, fb in enumerate(cfg.agent.fallbacks):
        add(f"agent.fallbacks[{i}]", fb.provider or cfg.provider, f"agent.fallbacks[{i}].provider", fb.model)
    out = []
    m = cfg.memory
    if m.enabled:
        add("memory llm", cfg.memory_provider(), "memory.provider", cfg.memory_model())
        if m.fallbacks is not None:  # otherwise the agent's, checked above
            for i, fb in enumerate(m.fallbacks):
                setting = f"memory.fallbacks[{i}].provider" if fb.provider else (
                    "memory.provider" if m.provider else "provider")
                add(f"memory.fallbacks[{i}]", fb.provider or cfg.memory_provider(), setting, fb.model)
        if m.embedding.enabled:
            where = "memory.embedding.provider" if m.embedding.provider else (
                "memory.provider" if m.provider else "provider")
            out.append(_Endpoint("embedding", cfg.embedding_provider(), where, (m.embedding.model,)))
    return [*chat, *out]


def _refused(e: _Endpoint, a: _Answer, url: str) -> Check:
    return Check(e.name, "error", f"{url}: the key was refused (HTTP {a.status}{_said(a.body)})",
                 f"check {e.setting}.apiKey", {"latency_ms": a.ms})


async def _check_chat_endpoint(client: httpx.AsyncClient, e: _Endpoint) -> Check:
    """``GET /models``: it proves the URL and the key without spending a
    token, and its list shows a misspelt model name. Where it is missing
    (404/405, some proxies), a 1-token completion with the first model."""
    base = e.provider.base_url
    a = await _call(client, "GET", f"{base}/models", headers=_auth(e.provider))
    if a.failure and e.fallback:
        # Most often a local server (Ollama, LM Studio) not running: the
        # gateway starts without it, so say what is lost and every way out.
        return Check(e.name, "error",
                     f"fallback model {', '.join(e.models)}: {base} {a.failure}: when the "
                     f"{'memory' if e.name.startswith('memory') else 'chat'} model fails, replies cannot fall back to it",
                     f"start the server at {base}, correct {e.setting}.baseUrl, or remove {e.name}")
    if a.failure:
        return Check(e.name, "error", f"{base} {a.failure}", f"check {e.setting}.baseUrl and that the server runs")
    if a.status in (401, 403):
        return _refused(e, a, base)
    if a.status == 200 and isinstance(a.body, dict) and isinstance(a.body.get("data"), list):
        listed = {str(m.get("id")) for m in a.body["data"] if isinstance(m, dict)}
        missing = [m for m in e.models if listed and m not in listed]
        if missing:
            where = dict(zip(e.models, e.model_settings))
            fix = " / ".join(where.get(m, "agent.model") for m in missing)
            return Check(e.name, "warning", f"{base} answers in {a.ms:g} ms, but does not list the model "
                         f"{', '.join(missing)} ({len(listed)} listed)", f"check {fix}",
                         {"latency_ms": a.ms, "via": "models"})
        return Check(e.name, "ok", f"{base} answers in {a.ms:g} ms; model {', '.join(e.models)} listed",
                     data={"latency_ms": a.ms, "via": "models"})
    if a.status not in (404, 405):
        return Check(e.name, "error", f"{base}/models answered HTTP {a.status}{_said(a.body)}",
                     f"check {e.setting}.baseUrl (an OpenAI-compatible URL usually ends in /v1)", {"latency_ms": a.ms})
    body = {"model": e.models[0], "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    a = await _call(client, "POST", f"{base}/chat/completions", headers=_auth(e.provider), json=body)
    if a.failure:
        return Check(e.name, "error", f"{base} {a.failure}", f"check {e.setting}.baseUrl")
    if a.status in (401, 403):
        return _refused(e, a, base)
    if a.status == 200:
        return Check(e.name, "ok", f"{base} answered a 1-token completion with {e.models[0]} in {a.ms:g} ms "
                     "(it has no /models)", data={"latency_ms": a.ms, "via": "completion"})
    return Check(e.name, "error", f"{base}/chat/completions answered HTTP {a.status}{_said(a.body)}",
                 f"check {e.setting}.baseUrl (usually ending in /v1) and the model name", {"latency_ms": a.ms})


async def _check_embedding_endpoint(client: httpx.AsyncClient, e: _Endpoint, dimensions: int | None) -> Check:
    """One short ``/embeddings`` request: the model must exist there too."""
    base = e.provider.base_url
    body: dict[str, Any] = {"model": e.models[0], "input": ["myclaw doctor"]}
    if dimensions is not None:
        body["dimensions"] = dimensions
    a = await _call(client, "POST", f"{base}/embeddings", headers=_auth(e.provider), json=body)
    if a.failure:
        return Check(e.name, "error", f"{base} {a.failure}", f"check {e.setting}.baseUrl and that the server runs")
    if a.status in (401, 403):
        return _refused(e, a, base)
    try:
        size = len(a.body["data"][0]["embedding"])
    except (TypeError, KeyError, IndexError):
        return Check(e.name, "error", f"{base}/embeddings answered HTTP {a.status}{_said(a.body)}",
                     f"check {e.setting}.baseUrl and memory.embedding.model", {"latency_ms": a.ms})
    # base64 vectors come as a string; their length is not the dimension
    shape = f"{size} dimensions, " if isinstance(a.body["data"][0]["embedding"], list) else ""
    return Check(e.name, "ok", f"{base} embeds with {e.models[0]} ({shape}{a.ms:g} ms)", data={"latency_ms": a.ms})


async def _check_transcription(client: httpx.AsyncClient, cfg: Config) -> Check:
    """``agent.transcription``'s endpoint, without sending audio (each
    recording is a paid call): ``GET /models`` proves the URL and the key
    and lists the model. Where there is no such list, a transcription
    request without a file: the endpoint refuses it (400) once it took the
    key, a wrong URL answers 404, a wrong key 401."""
    t = cfg.agent.transcription
    provider = t.provider or cfg.provider
    setting = "agent.transcription.provider" if t.provider else "provider"
    # Without a provider of its own it uses the chat provider's: say so where the fix points there.
    shared = "" if t.provider else " (agent.transcription has no provider of its own: it uses this one)"
    base, name = provider.base_url, "transcription"
    e = _Endpoint(name, provider, setting, (t.model,))
    a = await _call(client, "GET", f"{base}/models", headers=_auth(provider))
    if a.failure:
        return Check(name, "error", f"{base} {a.failure}", f"check {setting}.baseUrl and that the server runs{shared}")
    if a.status in (401, 403):
        return _with_fix(_refused(e, a, base), shared)
    if a.status == 200 and isinstance(a.body, dict) and isinstance(a.body.get("data"), list):
        listed = {str(m.get("id")) for m in a.body["data"] if isinstance(m, dict)}
        if listed and t.model not in listed:
            return Check(name, "warning", f"{base} answers in {a.ms:g} ms, but does not list the transcription "
                         f"model {t.model} ({len(listed)} listed)", "check agent.transcription.model",
                         {"latency_ms": a.ms, "via": "models"})
        return Check(name, "ok", f"{base} answers in {a.ms:g} ms; transcription model {t.model} listed",
                     data={"latency_ms": a.ms, "via": "models"})
    if a.status not in (404, 405):
        return Check(name, "error", f"{base}/models answered HTTP {a.status}{_said(a.body)}",
                     f"check {setting}.baseUrl (an OpenAI-compatible URL usually ends in /v1){shared}",
                     {"latency_ms": a.ms})
    url = f"{base}/audio/transcriptions"
    b = await _call(client, "POST", url, headers=_auth(provider), data={"model": t.model})
    if b.failure:
        return Check(name, "error", f"{url} {b.failure}", f"check {setting}.baseUrl and that the server runs{shared}")
    if b.status in (401, 403):
        return _with_fix(_refused(e, b, base), shared)
    if b.status in (400, 415, 422):  # the request without audio refused, after the key was taken
        return Check(name, "ok", f"{url} answers in {b.ms:g} ms (no /models there: the model "
                     f"{t.model} is checked by the first voice message)", data={"latency_ms": b.ms, "via": "probe"})
    return Check(name, "error", f"{url} answered HTTP {b.status}{_said(b.body)}",
                 f"check {setting}.baseUrl (usually ending in /v1) and that it transcribes audio{shared}",
                 {"latency_ms": b.ms})


def _with_fix(check: Check, note: str) -> Check:
    return replace(check, fix=check.fix + note)


async def _check_telegram(client: httpx.AsyncClient, cfg: Config) -> Check:
    tg = cfg.channels.telegram
    shown = f"{tg.base_url}<token>/getMe"  # the token is part of the URL: never shown
    a = await _call(client, "GET", f"{tg.base_url}{tg.token.get_secret_value()}/getMe")
    if a.failure:
        return Check("telegram", "error", f"{shown} {a.failure}", "check channels.telegram.baseUrl and the network")
    data: dict[str, Any] = {"latency_ms": a.ms}
    if a.status == 401:
        return Check("telegram", "error", f"Telegram refused the bot token (HTTP 401{_said(a.body)})",
                     "check channels.telegram.token (BotFather's /token)", data)
    if a.status == 404:
        return Check("telegram", "error", f"{shown} answered HTTP 404: a malformed token or a wrong baseUrl",
                     "check channels.telegram.token and baseUrl (ends in /bot)", data)
    result = a.body.get("result") if isinstance(a.body, dict) and a.status == 200 else None
    if not isinstance(result, dict):
        return Check("telegram", "error", f"{shown} answered HTTP {a.status}{_said(a.body)}",
                     "check channels.telegram.baseUrl", data)
    data["username"] = result.get("username")
    return Check("telegram", "ok", f"bot @{result.get('username')} (getMe in {a.ms:g} ms)", data=data)


async def _check_feishu(client: httpx.AsyncClient, cfg: Config) -> tuple[Check, str | None]:
    """The credentials and the bot; with them, the tenant token (for the
    next checks, never shown)."""
    fs = cfg.channels.feishu
    base = fs.domain.rstrip("/")
    a = await _call(client, "POST", f"{base}/open-apis/auth/v3/tenant_access_token/internal",
                    json={"app_id": fs.app_id, "app_secret": fs.app_secret.get_secret_value()})
    if a.failure:
        return Check("feishu", "error", f"{base} {a.failure}", "check channels.feishu.domain and the network"), None
    data: dict[str, Any] = {"latency_ms": a.ms}
    body = a.body if isinstance(a.body, dict) else {}
    token = body.get("tenant_access_token")
    if body.get("code") != 0 or not isinstance(token, str):
        what = f"code {body.get('code')}{_said(body)}" if "code" in body else f"HTTP {a.status}"
        return Check("feishu", "error", f"Feishu refused the app credentials ({what})",
                     "check channels.feishu.appId and appSecret (the app's Credentials page)", data), None
    b = await _call(client, "GET", f"{base}/open-apis/bot/v3/info", headers={"Authorization": f"Bearer {token}"})
    bot = b.body.get("bot") if isinstance(b.body, dict) and b.body.get("code") == 0 else None
    if not isinstance(bot, dict):
        # The channel reads its own open_id there to tell mentions of it apart.
        detail = b.failure or f"answered HTTP {b.status}{_said(b.body)}"
        return Check("feishu", "error", f"tenant token ok ({a.ms:g} ms), but bot/v3/info {detail}",
                     "enable the app's bot capability", data), None
    data["bot"] = bot.get("app_name")
    return Check("feishu", "ok", f"tenant token in {a.ms:g} ms; bot {bot.get('app_name')!r} ({bot.get('open_id')})",
                 data=data), token


_CHAT_SCOPE_DENIED = frozenset({99991672, 99991679})  # channels/feishu/client.py: SCOPE_DENIED_CODES


async def _check_feishu_groups(client: httpx.AsyncClient, cfg: Config, token: str) -> Check:
    """Whether the app may read group information (im:chat:readonly), which
    the gateway asks for groups' titles (Feishu's events carry none): the
    list of the bot's groups, one of them, needs the same scope as one
    group's information and no group id."""
    base = cfg.channels.feishu.domain.rstrip("/")
    a = await _call(client, "GET", f"{base}/open-apis/im/v1/chats?page_size=1",
                    headers={"Authorization": f"Bearer {token}"})
    name = "feishu-groups"
    body = a.body if isinstance(a.body, dict) else {}
    if not a.failure and a.status == 200 and body.get("code") == 0:
        return Check(name, "ok", "the app may read group information (group titles)", data={"latency_ms": a.ms})
    code = body.get("code")
    data: dict[str, Any] = {"code": code}
    if code in _CHAT_SCOPE_DENIED:
        return Check(name, "warning", f"the app may not read group information (code {code}{_said(body)}): groups "
                     "are shown by id in /share, the memory page and exports",
                     "grant im:chat:readonly in the Feishu developer console (Permissions & Scopes) and publish "
                     "a version", data)
    detail = a.failure or f"answered HTTP {a.status}{_said(body)}"
    return Check(name, "warning", f"im/v1/chats {detail}: group titles may not be found",
                 "see the gateway's log for 'group title lookup'", data)


# lark-oapi's ws client (lark_oapi/ws/const.py): where the long connection
# asks for its websocket URL, and the codes it treats as "try again later".
_WS_ENDPOINT = "/callback/ws/endpoint"
_WS_BUSY_CODES = frozenset({1, 1000040343})  # SYSTEM_BUSY, INTERNAL_ERROR: the SDK retries
_WS_NO_CREDENTIAL = 1000040344
_WS_CONN_LIMIT = 1000040350
_WS_ENABLE = ("in the Feishu developer console, the app's Events & Callbacks > event configuration: "
              "enable 'Use long connection to receive events' (使用长连接接收事件), add im.message.receive_v1 "
              "and im.message.recalled_v1, and publish a version; or set channels.feishu.mode to webhook")


async def _check_feishu_longconn(client: httpx.AsyncClient, cfg: Config) -> Check:
    """The long connection's first step, as lark-oapi takes it: POST the
    app id and secret to ``/callback/ws/endpoint`` for a websocket URL. An
    app without long-connection events enabled is refused here, while its
    tenant token works. The URL carries a ticket: never shown."""
    fs = cfg.channels.feishu
    url = fs.domain.rstrip("/") + _WS_ENDPOINT
    a = await _call(client, "POST", url, headers={"locale": "zh"},
                    json={"AppID": fs.app_id, "AppSecret": fs.app_secret.get_secret_value()})
    name = "feishu-ws"
    if a.failure:
        return Check(name, "error", f"{url} {a.failure}", "check channels.feishu.domain and the network")
    data: dict[str, Any] = {"latency_ms": a.ms}
    body = a.body if isinstance(a.body, dict) else {}
    inner = body.get("data")
    if a.status == 200 and body.get("code") == 0 and isinstance(inner, dict) and inner.get("URL"):
        return Check(name, "ok", f"long connection endpoint hands out a websocket URL in {a.ms:g} ms", data=data)
    code = body.get("code")
    data["code"] = code
    if a.status != 200 or not isinstance(code, int):
        return Check(name, "error", f"{url} answered HTTP {a.status}{_said(body)}",
                     "check channels.feishu.domain (https://open.feishu.cn, or https://open.larksuite.com for Lark)",
                     data)
    said = f"code {code}{_said(body)}"
    if code in _WS_BUSY_CODES:
        return Check(name, "warning", f"the long connection endpoint is busy ({said}); the gateway retries",
                     "run doctor again in a minute", data)
    if code == _WS_NO_CREDENTIAL:
        return Check(name, "error", f"the long connection endpoint wants credentials ({said})",
                     "set channels.feishu.appId and appSecret", data)
    if code == _WS_CONN_LIMIT:
        return Check(name, "error", f"the app has too many long connections open ({said})",
                     "stop the other gateways or SDK clients using this app", data)
    return Check(name, "error", f"the long connection endpoint refused the app ({said})", _WS_ENABLE, data)


async def _endpoint_checks(client: httpx.AsyncClient, cfg: Config) -> list[Check]:
    """All at once: the slowest endpoint sets the wait, not their sum."""
    checks: list[Coroutine[Any, Any, Check | list[Check]]] = []
    for e in _endpoints(cfg):
        if e.name == "embedding":
            checks.append(_check_embedding_endpoint(client, e, cfg.memory.embedding.dimensions))
        else:
            checks.append(_check_chat_endpoint(client, e))
    if cfg.agent.transcription.enabled:
        checks.append(_check_transcription(client, cfg))
    if cfg.channels.telegram.enabled and cfg.channels.telegram.token.get_secret_value():
        checks.append(_check_telegram(client, cfg))
    fs = cfg.channels.feishu
    if fs.enabled and fs.app_id and fs.app_secret.get_secret_value():
        checks.append(_feishu_checks(client, cfg))
    done: list[Check] = []
    for result in await asyncio.gather(*checks):
        done.extend(result if isinstance(result, list) else [result])
    return done


async def _feishu_checks(client: httpx.AsyncClient, cfg: Config) -> list[Check]:
    """The tenant token first; the long connection's endpoint (websocket
    mode) only with credentials that work, so that its refusal can only
    mean the app's event settings."""
    first, token = await _check_feishu(client, cfg)
    groups = (Check("feishu-groups", "skipped", "group information is asked once the feishu check passes")
              if token is None else await _check_feishu_groups(client, cfg, token))
    if cfg.channels.feishu.mode != "websocket":
        return [first, groups]
    if first.status == "error":
        return [first, groups,
                Check("feishu-ws", "skipped", "the long connection endpoint is asked once the feishu check passes")]
    return [first, groups, await _check_feishu_longconn(client, cfg)]


def recorded_refusals(cfg: Config, paths: Paths) -> list[Check]:
    """Offline, the platforms are not asked: what the gateway recorded of a
    permission refused it (gateway.db, until an ask works) says what the
    live check would, for the channels the config still runs."""
    from gateway.chattitles import read_refusals

    try:
        refusals = read_refusals(paths.gateway_db())
    except sqlite3.DatabaseError:  # damage: gateway.db's own check says
        return []
    enabled = {"feishu": cfg.channels.feishu.enabled, "telegram": cfg.channels.telegram.enabled}
    return [
        Check(f"{channel}-groups", "warning",
              f"{channel.capitalize()} refused the gateway {scope} (last asked {at}): groups are shown by id in "
              "/share, the memory page and exports",
              f"grant {scope} to the app (and publish a version); the gateway clears this once an ask works",
              {"scope": scope, "refused_at": at})
        for channel, (scope, at) in sorted(refusals.items()) if enabled.get(channel)
    ]


# -- a running gateway ---------------------------------------------------------------


def _config_changed_since_start(paths: Paths) -> bool:
    """Was config.json written after the running gateway started? It read
    the file once, at its start (``data/gateway.lock`` is written then), so
    a change is not in effect until a restart."""
    from gateway.datalock import GATEWAY_LOCK_FILE

    try:
        return paths.config_file.stat().st_mtime > (paths.data_dir / GATEWAY_LOCK_FILE).stat().st_mtime
    except OSError:
        return False


async def _check_running(client: httpx.AsyncClient, cfg: Config, paths: Paths) -> Check:
    check = await _check_gateway(client, cfg, paths)
    if not check.data.get("running") or not _config_changed_since_start(paths):
        return check
    check.data["config_changed"] = True
    fix = "restart the gateway to apply it"
    return Check("gateway", "error" if check.status == "error" else "warning",
                 f"{check.message}; config.json changed after it started",
                 # A /healthz it does not serve yet is the change's doing, not a failure.
                 fix if "may have failed" in check.fix else "; ".join(x for x in (fix, check.fix) if x),
                 check.data)


async def _check_gateway(client: httpx.AsyncClient, cfg: Config, paths: Paths) -> Check:
    """Whether a gateway runs on this home: its lock (``data/gateway.lock``,
    :func:`gateway.datalock.running_pid`) says so for certain. Where the
    gateway serves HTTP (the memory page, a Feishu webhook), ``GET /healthz``
    on its port says too whether it answers, and whether something else
    holds the port, so that a gateway started now could not listen."""
    from gateway.datalock import running_pid

    g = cfg.gateway
    pid = running_pid(paths.data_dir)
    running = "no gateway is running on this home" if pid is None else (
        f"a gateway is running on this home (pid {pid})" if pid else "a gateway is running on this home")
    data: dict[str, Any] = {"running": pid is not None, "pid": pid or None}
    serves = g.metrics or (g.admin.enabled and cfg.memory.enabled) or (
        cfg.channels.feishu.enabled and cfg.channels.feishu.mode == "webhook")
    if not serves or g.port == 0:  # no HTTP, or a random port: nothing to look at
        return Check("gateway", "ok", running, data=data)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(g.host, g.host)
    url = f"http://{host}:{g.port}/healthz" if ":" not in host else f"http://[{host}]:{g.port}/healthz"
    a = await _call(client, "GET", url)
    status = a.body.get("status") if isinstance(a.body, dict) else None
    # A myclaw gateway's /healthz (gateway/health.py): ok, degraded (200) or down (503).
    ours = status in ("ok", "degraded", "down")
    healthy = a.status == 200 and status == "ok"
    data["healthz"] = healthy
    if pid is not None:
        if healthy:
            return Check("gateway", "ok", f"{running}; {url} answers in {a.ms:g} ms", data=data)
        if ours:
            problems = a.body.get("problems") if isinstance(a.body, dict) else None
            said = "; ".join(str(p) for p in problems) if isinstance(problems, list) and problems else status
            data["problems"] = problems or []
            return Check("gateway", "error" if status == "down" else "warning", f"{running}, but it is {status}: {said}",
                         "see the gateway's log", data)
        what = a.failure or f"answered HTTP {a.status}"
        return Check("gateway", "warning", f"{running}, but {url} {what}",
                     "see the gateway's log: its HTTP server (memory page / Feishu webhook) may have failed", data)
    if a.failure:
        # Nothing answers HTTP there; something that speaks no HTTP may
        # still hold the port, or the host may not be this machine's.
        from gateway.listen import bind_error, cannot_listen

        exc = bind_error(g.host, g.port)
        if exc is None:
            return Check("gateway", "ok", f"{running}; {host}:{g.port} is free", data=data)
        what, fix = cannot_listen(g.host, exc)
        what = f"{host}:{g.port} is taken" if what == "the port is taken" else what
        return Check("gateway", "error", f"{running}, but {what}: `myclaw gateway` could not listen there", fix, data)
    whose = "another myclaw gateway (another MYCLAW_HOME?)" if ours else f"something else (HTTP {a.status})"
    return Check("gateway", "error", f"{running}, but {host}:{g.port} is taken by {whose}: `myclaw gateway` "
                 "could not listen there", "change gateway.port or stop what uses it", data)


# -- the command -------------------------------------------------------------------


async def run_doctor(
    env: Mapping[str, str], *, offline: bool = False, timeout: float = 5.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Report:
    """Every check, in the order printed. ``transport``: for tests that
    must not reach the network (the CLI uses httpx's own)."""
    paths = Paths.from_env(env)
    report = Report(paths.home, paths.config_file)
    cfg = _check_config(report, env)
    if cfg is not None:
        report.secrets = config_secrets(cfg)
        _secret_checks(report, cfg, env)
        _setting_checks(report, cfg)
    _data_checks(report, cfg, paths)
    if cfg is None:
        report.add("endpoints", "skipped", "need a valid config")
        return report
    # Short timeouts: a doctor that hangs for a minute on a dead host helps nobody.
    limits = httpx.Timeout(timeout, connect=min(timeout, 3.0))
    async with httpx.AsyncClient(timeout=limits, transport=transport) as client:
        if offline:
            report.add("endpoints", "skipped", "--offline")
            report.checks.extend(recorded_refusals(cfg, paths))
        else:
            report.checks.extend(await _endpoint_checks(client, cfg))
        report.checks.append(await _check_running(client, cfg, paths))
    return report


@main.command()
@click.option("--offline", is_flag=True, help="Skip the checks that call the LLM, Telegram or Feishu.")
@click.option("--timeout", type=click.FloatRange(0.1, 60), default=5.0, show_default=True,
              help="Seconds to wait for each endpoint.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
def doctor(offline: bool, timeout: float, as_json: bool) -> None:
    """Check the config, secrets, data files and endpoints, and say what is
    wrong. Exit code 0: no errors (warnings allowed); 1: errors. Changes
    nothing, and is safe while the gateway runs."""
    report = asyncio.run(run_doctor(os.environ, offline=offline, timeout=timeout))
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(report.render())
    raise SystemExit(0 if report.ok else 1)
