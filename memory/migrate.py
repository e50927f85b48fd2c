"""Files -> SQLite (seed 000 §12.2): what the file store wrote comes into the
engine, so switching ``memory.enabled`` off and on again loses nothing.

* ``MEMORY.md`` facts -> Tier 1 memories (``identity``, importance 1.0,
  source ``migration``), one per list item, line, quote or table row, as
  :mod:`memory.mdfacts` reads Markdown; a code block -> one Tier 2
  ``config`` memory; headings, comments and blank lines skipped. A fact
  whose line ends in ``<!-- YYYY-MM-DD -->`` is dated that day
  (:func:`line_time`), else at its import; a day after today or before
  1970 is not believed (dated now, counted in the log).
* ``YYYY-MM-DD.md`` -> one Tier 3 event per file (several for a file over
  ``EVENT_MAX_TOKENS``, cut between lines).
* A file that is not UTF-8 is skipped and reported (a leading byte-order
  mark is fine), as is any other ``.md`` file: nothing is left out silently.
* Owners follow the file store's layout (:mod:`memory.filestore`): the
  top-level files are ``_global``'s, ``users/<slug>/`` belongs to the user
  named in its ``.owner`` file. A directory whose ``.owner`` is missing or
  does not match its slug is skipped and reported, never guessed.

Idempotence. A ledger in the ``meta`` table records, per file, its size,
mtime, ctime, inode and SHA-256 and what was imported from it, written in
the same transaction as the imported rows (the ctime and inode catch a save
that keeps the size and puts the mtime back, ``touch -d``). So:

* an unchanged file costs one ``stat`` (the gateway runs this at every
  start), once its mtime is older than the import that read it by more
  than a filesystem tick (:data:`RACY_NS`). One that was not ("racy", as
  git calls it: saved again within that tick, it keeps its size and mtime)
  is marked so in the ledger and read and compared by hash at the next run;
* a MEMORY.md line is imported once, ever: a fact later archived or purged in
  SQLite does not come back while the line stays in the file;
* a line whose wording already exists as an active memory of that owner is
  not duplicated;
* a daily file that *grew* (the file store appended more turns of the same
  day) adds one more event holding only the new part, so the day's events
  together equal the file and an already compressed event is not redone;
  a daily file that was *edited* otherwise replaces that day's migrated
  events with one event of the whole file.

A MEMORY.md line removed from the file (forgotten while the file store
ran, or deleted by hand: the file is the truth, seed 004) archives the
memory imported from it, if that is still active in the words imported
and cites this file; logged (``file_removed``), undone from the memory
page. A file left with no facts at all archives nothing (an editor crash
or a bad sync is likelier than a wish to forget everything): reported.
Lines removed from a daily file are not removed from SQLite.

A save with an unclosed ``<!--`` (:func:`memory.mdfacts.unclosed_comment`:
as Markdown renders it, it hides every line after it, or makes a terms
comment's words the fact's) is a typo, not a wish to forget the lines it
hides: the save is skipped as the file's problem, nothing imported or
archived, until a save closes it. That skip, and a file's that is not
UTF-8, is recorded in the file's ledger entry (``skipped``: kind, path,
line), which ``myclaw doctor`` lists; the next import drops it. A file imported before this rule with
such a comment is not read again for it (its ledger stamp still matches).

A paste is not a profile: an owner's Tier 1 entries from files stop at
:data:`PROFILE_IMPORT_LIMIT` (with those imported before), the facts after
that are imported as Tier 2 (searchable, not in every prompt;
``memories_filed``); new rows are written :data:`IMPORT_BATCH` per
transaction, the ledger with the last, so the single writer is not held
for the whole of a 60,000-line paste. Run under a job lease (``lease``:
:func:`memory.filesync.migrate_leased`), each of those transactions first
proves the lease still ours (:meth:`~memory.lease.Lease.fence`) and the
lease is renewed between them, so an import that outlives it and is taken
over writes nothing more. A fact longer than a memory
(``MAX_CONTENT_CHARS``) is imported cut, counted (``memories_cut``) and
warned by count.

A drastic shrink is held: a save that removes at least :data:`SHRINK_MIN`
facts, more than half of those imported from the file, and adds fewer than
it removes (a file cut short by an editor crash, or by ``> MEMORY.md`` and a
partial write; a rewrite in other words is not a shrink) imports nothing,
archives nothing, is logged, recorded in the ledger entry (``held``, which
``myclaw doctor`` reports) and in :attr:`MigrationReport.held`. Put back,
the file imports as usual; left byte for byte as it is for
:data:`SHRINK_HOLD`, the removal is taken as meant and done then (each
archived entry restorable from the memory page, as for any removed line).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import asdict, dataclass, field
from dataclasses import replace as changed
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite
import structlog

from .clock import format_ts, parse_ts
from .lease import Lease
from .cues import clean_terms, safe_terms
from .engine import MAX_CONTENT_CHARS, MemoryEngine, MemoryNotFound, content_hash
from .filestore import (
    LONG_TERM,
    OWNER_FILE,
    USERS_DIR,
    MemoryFile,
    clean_text,
    is_daily_name,
    read_owner,
    user_slug,
)
from .mdfacts import MdFact
from .mdfacts import facts as md_facts
from .mdfacts import unclosed_comment
from .erasedlines import drop_erased, erased_hashes
from .tokens import estimate_tokens
from .changelog import write_log
from .types import GLOBAL_OWNER, Category, NewMemory, Provenance, Source, Status

__all__ = ["IMPORT_BATCH", "PROFILE_IMPORT_LIMIT", "RACY_NS", "SHRINK_HOLD", "SHRINK_MIN", "MigrationReport", "carry_ledger", "discover", "drop_ledger", "is_racy", "log_name", "memory_files",
           "migrate_files"]

# Lazy: a logger bound at import would ignore configure_logging (and its redaction).
log = structlog.get_logger(component="memory")

_LEDGER_PREFIX = "migrated:"
# At most this many tokens (estimated) per migrated event: a daily file of
# a busy year is megabytes, and one event of it would be a prompt no memory
# model takes, so the daily compression would fail on that day for ever.
EVENT_MAX_TOKENS = 2000
# A file whose mtime is within this of the moment it was looked at may be
# saved again without its mtime moving: 2 s is FAT's timestamp step, the
# coarsest in use; others (ext4, APFS) are finer but stamp from a clock
# that lags by a scheduler tick.
RACY_NS = 2_000_000_000
# A drastic shrink of MEMORY.md is held (see the module docstring): at
# least this many facts removed, more than half, fewer added...
SHRINK_MIN = 3
# ...until the file stayed so this long: time to notice a damaged file,
# and not so long that a deliberate cut lingers in every prompt for days.
SHRINK_HOLD = timedelta(hours=1)
# Core Memory (Tier 1, read whole by every prompt's render, the memory page,
# /memory and the weekly refresh) holds at most this many of an owner's
# entries from files (those learnt or refreshed are not counted: a line
# added by hand to a full profile is still Core Memory, as before): the profile's own size, the weekly refresh's
# ``profile_limit`` (memory/compression.py). A fact beyond it is a Tier 2
# fact, recalled when asked about (a pasted log is not a profile).
PROFILE_IMPORT_LIMIT = 100
# New memories written per transaction: a 60,000-line paste in one held the
# single writer (seed 002) and so every reply's write for a minute and more.
IMPORT_BATCH = 200


@contextlib.asynccontextmanager
async def _write(engine: MemoryEngine, lease: Lease | None) -> AsyncIterator[aiosqlite.Connection]:
    """A write transaction that, under a lease, first proves it still ours
    (in the transaction itself: no takeover in between), as compression's."""
    async with engine.db.transaction() as conn:
        if lease is not None:
            await lease.fence(conn)
        yield conn


async def _keep(engine: MemoryEngine, lease: Lease | None) -> None:
    """Between files: renew ``lease`` once half its time is gone (a renewal
    per file would double a first import's transactions of daily files)."""
    if lease is None or lease.ttl is None:
        return
    if engine.clock.now() >= parse_ts(lease.expires_at) - lease.ttl / 2:
        await lease.renew()


def is_racy(mtime_ns: int, looked_ns: int) -> bool:
    """Whether a stat taken at ``looked_ns`` (wall clock) with this mtime
    cannot tell a later save in the same tick from no save (git's "racily
    clean"). An mtime in the future (a clock ahead) is racy too."""
    return mtime_ns >= looked_ns - RACY_NS


@dataclass
class MigrationReport:
    memories_added: int = 0
    memories_skipped: int = 0  # already imported, or already stored with that wording
    memories_archived: int = 0  # imported from a MEMORY.md line no longer in the file
    memories_filed: int = 0  # MEMORY.md facts beyond PROFILE_IMPORT_LIMIT, imported as Tier 2
    memories_cut: int = 0  # MEMORY.md facts longer than a memory (MAX_CONTENT_CHARS), imported cut
    memories_erased: int = 0  # MEMORY.md lines a forget erased lately (memory/erasedlines.py), not imported again
    events_added: int = 0
    events_replaced: int = 0  # daily files edited since their last import
    events_skipped: int = 0  # empty, or identical event already stored
    files_seen: int = 0
    files_unchanged: int = 0
    owners: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)  # MEMORY.md path -> when its held removal is done

    @property
    def changed(self) -> bool:
        return bool(self.memories_added or self.memories_archived or self.events_added or self.events_replaced)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def log_fields(self) -> dict[str, Any]:
        """The report for a log line: its counts. The owners are users'
        names and the problems and held files name their files."""
        return {k: len(v) if isinstance(v, list | dict) else v for k, v in asdict(self).items()}


def _ledger_key(f: MemoryFile) -> str:
    return _LEDGER_PREFIX + json.dumps([f.owner, f.name], ensure_ascii=False)


def _ledger_prefix(owner: str) -> str:
    return _LEDGER_PREFIX + json.dumps([owner, ""], ensure_ascii=False)[:-2]  # 'migrated:["owner", "'


async def has_ledger(conn: aiosqlite.Connection, owner: str, *, imported: bool = False) -> bool:
    """Whether the ledger holds entries of ``owner``'s files (what
    :func:`drop_ledger` would delete); ``imported``: entries of an import
    (with a stamp), not one holding only a skipped save's record
    (:func:`_skipped`, for doctor), which imported nothing."""
    prefix = _ledger_prefix(owner)
    stamped = " AND json_extract(value, '$.size') IS NOT NULL" if imported else ""
    async with conn.execute(f"SELECT 1 FROM meta WHERE substr(key, 1, ?) = ?{stamped} LIMIT 1",
                            (len(prefix), prefix)) as cur:
        return await cur.fetchone() is not None


async def drop_ledger(conn: aiosqlite.Connection, owner: str) -> int:
    """Delete the ledger entries of ``owner``'s files (their lines' hashes,
    data about them too), in the caller's transaction; how many. For an
    erasure of the owner whose folder goes with it: nothing is left there
    to be read back."""
    prefix = _ledger_prefix(owner)
    cur = await conn.execute("DELETE FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
    await drop_erased(conn, owner)  # the erased lines' hashes: no file of theirs is left to hold them
    return cur.rowcount


def _ref(root: Path, f: MemoryFile) -> str:
    return f.path.relative_to(root).as_posix()


_SLUG_DIGEST = re.compile(r"-([0-9a-f]{12})")
# Each problem's kind for the log, by the words this module writes it with.
_PROBLEM_KINDS = (
    (f"no {OWNER_FILE} file", "no_owner"),
    (f"{OWNER_FILE} names", "owner_mismatch"),
    ("not imported (only", "not_a_memory_file"),
    ("not UTF-8", "not_utf8"),
    ("holds no facts now", "no_facts"),
    ("a save removed", "shrink_held"),
    ("an unclosed <!-- comment", "unclosed_comment"),
)


def log_name(ref: str) -> str:
    """A memory file's path (from the memory directory) for the log: a
    user's directory is named by its slug's hash, as a glob that finds it
    (``users/*-d7c9856dd68f``: the slug's readable part is the user's
    name), any other directory and a file not named as the file store
    names them (``MEMORY.md``, ``YYYY-MM-DD.md``) by a hash of their name
    (``users/#<hash>``, ``file-<hash>.md``)."""
    parts = ref.split("/")
    if len(parts) > 1 and parts[0] == USERS_DIR:
        found = _SLUG_DIGEST.search(parts[1])
        parts[1] = f"*-{found.group(1)}" if found and found.end() == len(parts[1]) else f"#{_name_hash(parts[1])}"
    if len(parts) > 2 or parts[0] != USERS_DIR:
        name = parts[-1]
        if name != LONG_TERM and not is_daily_name(name):
            parts[-1] = f"file-{_name_hash(name)}.md"
    return "/".join(parts)


def _name_hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _log_problem(problem: str) -> None:
    ref, _, why = problem.partition(": ")
    kind = next((k for words, k in _PROBLEM_KINDS if words in why), "other")
    log.warning("migration left a file or directory out", problem=kind, file=log_name(ref))


def discover(root: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """``(owner, directory)`` pairs under ``<workspace>/memory``, and problems."""
    found: list[tuple[str, Path]] = []
    problems: list[str] = []
    if root.is_dir():
        found.append((GLOBAL_OWNER, root))
    users = root / USERS_DIR
    if users.is_dir():
        for d in sorted(p for p in users.iterdir() if p.is_dir()):
            try:
                owner = read_owner((d / OWNER_FILE).read_text(encoding="utf-8"))
            except (FileNotFoundError, UnicodeDecodeError):
                owner = ""
            if not owner:
                problems.append(f"{USERS_DIR}/{d.name}: no {OWNER_FILE} file naming its user; skipped")
            elif user_slug(owner) != d.name or owner == GLOBAL_OWNER:
                problems.append(
                    f"{USERS_DIR}/{d.name}: {OWNER_FILE} names {owner!r}, whose directory would be "
                    f"{USERS_DIR}/{user_slug(owner)}; skipped"
                )
            else:
                found.append((owner, d))
    return found, problems


def _files(owner: str, d: Path, root: Path, problems: list[str]) -> list[MemoryFile]:
    out = []
    if (d / LONG_TERM).is_file():
        out.append(MemoryFile(owner, d / LONG_TERM, None))
    for p in sorted(d.iterdir()):
        day = is_daily_name(p.name)
        if day and p.is_file():
            out.append(MemoryFile(owner, p, day))
        elif p.is_file() and p.suffix.lower() == ".md" and p.name != LONG_TERM:
            # Said, not skipped in silence: "notes.md" or "2026-02-30.md"
            # may hold what the user expects to find after migrating.
            problems.append(
                f"{p.relative_to(root).as_posix()}: not imported (only {LONG_TERM} and YYYY-MM-DD.md files "
                "with a real date are)"
            )
    return out


def _decode(data: bytes) -> tuple[str | None, str]:
    """(the text, '') or (None, why): a file that is not UTF-8 is not
    imported with replacement characters, since after migration the
    database is the record and the mangled words would be all that is left."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), ""
    except UnicodeDecodeError:
        return None, f"not UTF-8 text (line {_bad_line(data)})"


def _bad_line(data: bytes) -> int:
    """The line of ``data``'s first byte that is not UTF-8 (0: none)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data[: exc.start].count(b"\n") + 1
    return 0


async def _skipped(
    engine: MemoryEngine, key: str, recorded: dict[str, Any] | None, kind: str, ref: str, data: bytes, line: int,
    lease: Lease | None = None,
) -> None:
    """Record in ``key``'s ledger entry that this save was skipped for a
    problem of ``kind`` (``myclaw doctor`` lists them; the log has only a
    hashed name). Written once per save, not at every run that reads it
    again; dropped by the next import or put-back (the entry is rewritten
    without it)."""
    sha = _sha(data)
    old = (recorded or {}).get("skipped")
    if isinstance(old, dict) and old.get("sha256") == sha:
        return
    skipped = {"kind": kind, "file": ref, "line": line, "since": format_ts(engine.clock.now()), "sha256": sha}
    async with _write(engine, lease) as conn:
        await _save_ledger(conn, key, {**(recorded or {}), "skipped": skipped})


async def _drop_skips_of_gone(
    engine: MemoryEngine, gone: dict[str, dict[str, Any]], lease: Lease | None = None
) -> None:
    """A skipped save's record (:func:`_skipped`) of a file no longer there
    (deleted, or its folder's no longer the owner's): ``myclaw doctor``
    would list it for good. Dropped; an entry that held only it goes whole,
    an imported file's keeps what its import recorded."""
    stale = {k: v for k, v in gone.items() if isinstance(v, dict) and "skipped" in v}
    if not stale:
        return
    async with _write(engine, lease) as conn:
        for key, value in stale.items():
            rest = {k: v for k, v in value.items() if k != "skipped"}
            if rest:
                await _save_ledger(conn, key, rest)
            else:
                await conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    log.info("skipped saves of memory files no longer there dropped", files=len(stale))


def _chunks(text: str, max_tokens: int) -> list[str]:
    """``text`` in pieces of at most ``max_tokens`` (estimated), cut between
    lines (inside a line only when one line alone is longer), so a large
    old log becomes several events the memory model can each read."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for line in text.splitlines():
        n = estimate_tokens(line) + 1
        while n > max_tokens:  # one line longer than a whole piece
            if cur:
                out.append("\n".join(cur).strip())
                cur, size = [], 0
            cut = max(1, len(line) * max_tokens // n)
            out.append(line[:cut].strip())
            line = line[cut:]
            n = estimate_tokens(line) + 1
        if size + n > max_tokens and cur:
            out.append("\n".join(cur).strip())
            cur, size = [], 0
        cur.append(line)
        size += n
    if cur:
        out.append("\n".join(cur).strip())
    return [c for c in out if c]


async def _save_ledger(conn: aiosqlite.Connection, key: str, value: dict[str, Any]) -> None:
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value, separators=(",", ":"))),
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def memory_files(root: Path) -> list[MemoryFile]:
    """The files :func:`migrate_files` imports under ``root`` (problems aside)."""
    sources, problems = discover(root)
    return [f for owner, d in sources for f in _files(owner, d, root, problems)]


async def migrate_files(
    workspace: Path | str,
    engine: MemoryEngine,
    *,
    only: Collection[Path] | None = None,
    wall_ns: Callable[[], int] = time.time_ns,
    log_problems: bool = True,
    lease: Lease | None = None,
) -> MigrationReport:
    """Import ``<workspace>/memory`` into ``engine``; safe to run any number of times.
    ``only``: just these files (memory/filesync.py's changed ones); the
    directories' problems are then left to the full runs that report them.
    ``wall_ns``: the wall clock the filesystem stamps mtimes by (not the
    engine's clock, which tests and replays set), for :func:`is_racy`.
    ``log_problems``: False where the caller shows :attr:`MigrationReport.problems`
    itself (``myclaw memory migrate`` prints them in full).
    ``lease``: the job lease this import runs under, fenced and renewed
    (raises :class:`~memory.lease.LeaseLost` once another took it over)."""
    root = Path(workspace) / "memory"
    report = MigrationReport()
    sources, problems = discover(root)
    wanted = None if only is None else set(only)
    if wanted is None:
        rows = await engine.db.fetchall(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ?", (_LEDGER_PREFIX, "migrated;"))
    else:  # only their entries: a long MEMORY.md's holds every line's hash
        keys = [_ledger_key(f) for f in memory_files(root) if f.path in wanted]
        rows = await engine.db.fetchall(
            f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})", keys) if keys else []
    ledger: dict[str, dict[str, Any]] = {r["key"]: json.loads(r["value"]) for r in rows}
    found: set[str] = set()  # the ledger keys of the files there now
    for owner, d in sources:
        if wanted is None:
            report.owners.append(owner)
        for f in _files(owner, d, root, problems):
            if wanted is not None and f.path not in wanted:
                continue
            if wanted is not None and owner not in report.owners:
                report.owners.append(owner)
            report.files_seen += 1
            await _keep(engine, lease)
            key = _ledger_key(f)
            found.add(key)
            recorded = ledger.get(key)
            # The last skipped save (see _skipped) is doctor's, not the import's.
            entry = ({k: v for k, v in recorded.items() if k != "skipped"} or None) if recorded else None
            looked = wall_ns()  # before the stat: a save after it must count as racy
            st = f.path.stat()
            if (
                entry
                and entry.get("size") == st.st_size
                and entry.get("mtime_ns") == st.st_mtime_ns
                # A save that keeps the size and puts the mtime back (touch -d)
                # still moves the ctime, and a save by rename the inode. An entry
                # from before they were kept has neither: read once, then kept.
                and entry.get("ctime_ns") == st.st_ctime_ns
                and entry.get("ino") == st.st_ino
                and not entry.get("racy")
            ):
                report.files_unchanged += 1
                continue
            data = f.path.read_bytes()
            text, why = _decode(data)
            if text is None:
                # Not imported: once saved as UTF-8, the next run imports it.
                report.problems.append(f"{_ref(root, f)}: {why}; skipped (save it as UTF-8 and migrate again)")
                await _skipped(engine, key, recorded, "not_utf8", _ref(root, f), data, _bad_line(data), lease)
                continue
            stamp: dict[str, Any] = {"size": len(data), "sha256": _sha(data), "mtime_ns": st.st_mtime_ns,
                                     "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}
            if is_racy(st.st_mtime_ns, looked):
                stamp["racy"] = True
            if entry and entry.get("sha256") == stamp["sha256"]:
                report.files_unchanged += 1  # touched, not changed: remember the new mtime
                if "held" in entry:
                    log.info("memory file put back; its held removal is dropped", file=log_name(_ref(root, f)))
                kept = {k: v for k, v in entry.items() if k not in ("racy", "held")} | stamp
                if kept != recorded:
                    async with _write(engine, lease) as conn:
                        await _save_ledger(conn, key, kept)
            elif f.day is None and (line := await asyncio.to_thread(unclosed_comment, text)):
                # A typo, not a wish to forget what it hides: the save is
                # skipped (what was imported stays), as a file that is not
                # UTF-8 (scanned in a thread: 8 MB is ~0.1 s of the loop); the ledger's stamp stays the last import's, so the
                # save that closes it is imported. (After the put-back above:
                # a file imported before this rule is not read again for it.)
                report.problems.append(
                    f"{_ref(root, f)}: an unclosed <!-- comment (line {line}) hides what follows it; skipped, "
                    "nothing imported or archived (end it with --> on its line)")
                await _skipped(engine, key, recorded, "unclosed_comment", _ref(root, f), data, line, lease)
            elif f.day is None:
                await _long_term(engine, root, f, data, stamp, entry, report, lease)
            else:
                await _daily(engine, root, f, data, stamp, entry, report, lease)
    if wanted is None:
        report.problems[:0] = problems
        await _drop_skips_of_gone(engine, {k: v for k, v in ledger.items() if k not in found}, lease)
    for p in report.problems if log_problems else ():
        _log_problem(p)  # its kind and a hashed name: the text names a user and a file
    if report.changed:
        log.info(
            "files migrated",
            memories=report.memories_added,
            events=report.events_added,
            replaced=report.events_replaced,
        )
    return report


async def _long_term(
    engine: MemoryEngine,
    root: Path,
    f: MemoryFile,
    data: bytes,
    stamp: dict[str, Any],
    entry: dict[str, Any] | None,
    report: MigrationReport,
    lease: Lease | None = None,
) -> None:
    known: set[str] = set((entry or {}).get("lines", []))
    new: list[NewMemory] = []
    text = data.decode("utf-8")  # checked by the caller, with its comments
    # Off the event loop: a 5 MB paste is seconds of parsing and hashing.
    mds, hashes, present = await asyncio.to_thread(_read_facts, text)
    removed = known - present
    if removed and not mds:
        report.problems.append(f"{_ref(root, f)}: holds no facts now; nothing archived (myclaw memory delete does that)")
        removed = set()
    added = sum(1 for md in mds if content_hash(md.text) not in known)
    if (
        len(removed) >= SHRINK_MIN
        and 2 * len(removed) > len(known)
        and added < len(removed)
        and await _held(engine, root, f, stamp, entry or {}, len(removed), len(known), report, lease)
    ):
        return
    known -= removed  # a line written back later is imported again
    now = engine.clock.now()
    untrusted = 0
    # One look each instead of a query per line: a paste is thousands.
    stated = {r["content_hash"] for r in await engine.db.fetchall(
        "SELECT content_hash FROM memories WHERE owner = ? AND status = 'active'", (f.owner,))}
    row = await engine.db.fetchone(
        "SELECT COUNT(*) AS n FROM memories WHERE owner = ? AND tier = 1 AND status = 'active' AND source = ?",
        (f.owner, Source.MIGRATION.value))
    room = max(0, PROFILE_IMPORT_LIMIT - int(row["n"] if row else 0))
    filed = cut = stale = 0
    erased = await erased_hashes(engine.db, f.owner, now)
    new_at: list[str | None] = []  # each new memory's time: its line's day, else now
    retermed: dict[int, tuple[str, ...]] = {}  # memory id -> its terms with those its line gained
    for k, (md, h) in enumerate(zip(mds, hashes, strict=True)):
        if k and not k % IMPORT_BATCH:
            await asyncio.sleep(0)  # thousands of lines: the loop's other tasks go between
        # An import before facts were read as Markdown blocks recorded each
        # line on its own: a block all of whose lines it took is imported.
        if h in known or (len(md.lines) > 1 and all(content_hash(x) in known for x in md.lines)):
            report.memories_skipped += 1
            await _more_terms(engine, f.owner, md, retermed)
            continue
        known.add(h)
        if h in erased:
            stale += 1  # a stale copy's line: read, and not imported while it stays
            continue
        if h in stated:
            report.memories_skipped += 1
            await _more_terms(engine, f.owner, md, retermed)
            continue
        m = _long_term_memory(f.owner, md, _ref(root, f))
        if m.tier == 1:
            if room:
                room -= 1
            else:
                m = _filed(m)
                filed += 1
        if len(m.content.strip()) > MAX_CONTENT_CHARS:
            cut += 1
        new.append(m)
        at = line_time(md.day, now)
        if md.day and at is None:
            untrusted += 1
        new_at.append(at)
    if untrusted:
        # The count only: the lines are the user's words.
        log.warning("memory file lines dated after today or before 1970; dated now", file=log_name(_ref(root, f)),
                    untrusted=untrusted)
    if cut:  # the count only: the lines are the user's words
        log.warning("memory file lines longer than a memory; imported cut", file=log_name(_ref(root, f)),
                    cut=cut, max_chars=MAX_CONTENT_CHARS)
    if stale:
        log.warning("memory file lines erased by a forget saved back; not imported again",
                    file=log_name(_ref(root, f)), erased=stale)
    if filed:
        log.warning("memory file holds more facts than Core Memory; the rest imported as Tier 2 facts",
                    file=log_name(_ref(root, f)), filed=filed, limit=PROFILE_IMPORT_LIMIT)
    # In transactions of IMPORT_BATCH rows, the ledger with the last: a
    # crash between them leaves rows the next run finds stated (above) and
    # does not add again, and nothing archived twice (only active rows are).
    for start in range(0, max(1, len(new)), IMPORT_BATCH):
        last = start + IMPORT_BATCH >= len(new)
        async with _write(engine, lease) as conn:
            if start == 0:
                report.memories_archived += await _archive_removed(engine, conn, f.owner, _ref(root, f), removed)
                for memory_id, terms in retermed.items():
                    await engine.update(memory_id, search_terms=terms, conn=conn)
            for m, at in zip(new[start : start + IMPORT_BATCH], new_at[start : start + IMPORT_BATCH], strict=True):
                await engine.add(m, conn=conn, at=at)
            if last:
                await _save_ledger(conn, _ledger_key(f), {**stamp, "lines": sorted(known)})
        if not last:
            if lease is not None:
                await lease.renew()  # a long paste outlives no lease (and a lost one stops here)
            await asyncio.sleep(0)  # the writer's other callers (a reply) go between
    report.memories_added += len(new)
    report.memories_filed += filed
    report.memories_cut += cut
    report.memories_erased += stale


def _read_facts(text: str) -> tuple[list[MdFact], list[str], set[str]]:
    """A MEMORY.md's facts, the hash of each and of each of their lines."""
    mds = md_facts(text)
    hashes = [content_hash(md.text) for md in mds]
    return mds, hashes, {*hashes, *(content_hash(x) for md in mds for x in md.lines)}


async def _held(
    engine: MemoryEngine,
    root: Path,
    f: MemoryFile,
    stamp: dict[str, Any],
    entry: dict[str, Any],
    removed: int,
    facts: int,
    report: MigrationReport,
    lease: Lease | None = None,
) -> bool:
    """Whether this drastic shrink of ``f`` waits (see the module
    docstring); records the hold when it is new. The ledger keeps the
    stamp of the last import, so each later run reads the file again."""
    ref = _ref(root, f)
    now = engine.clock.now()
    held = entry.get("held")
    if isinstance(held, dict) and held.get("sha256") == stamp["sha256"]:
        since = parse_ts(str(held.get("since")))
    else:
        since = now
        held = {"sha256": stamp["sha256"], "since": format_ts(now), "removed": removed, "facts": facts,
                "file": ref}
        async with _write(engine, lease) as conn:
            await _save_ledger(conn, _ledger_key(f), {**entry, "held": held})
        log.warning("memory file lost most of its facts in one save; held, nothing archived", file=log_name(ref),
                    removed=removed, facts=facts, until=format_ts(now + SHRINK_HOLD))
    due = since + SHRINK_HOLD
    if now >= due:
        log.info("held removal left in place; done", file=log_name(ref), removed=removed)
        return False
    report.held[ref] = format_ts(due)
    report.problems.append(
        f"{ref}: a save removed {removed} of its {facts} facts; held, nothing archived: put the lines back, "
        f"or leave the file as it is and they are archived at {format_ts(due)}"
    )
    return True


async def _archive_removed(
    engine: MemoryEngine, conn: aiosqlite.Connection, owner: str, ref: str, removed: set[str]
) -> int:
    """Archive ``owner``'s active memories imported from ``ref`` whose
    wording (by hash) left the file; one edited or learnt since is the
    database's own and stays."""
    if not removed:
        return 0
    marks = ",".join("?" * len(removed))
    async with conn.execute(
        f"""SELECT id, content, provenance FROM memories WHERE owner = ? AND source = ? AND status = 'active'
              AND content_hash IN ({marks})""",
        (owner, Source.MIGRATION.value, *sorted(removed)),
    ) as cur:
        rows = await cur.fetchall()
    n = 0
    for r in rows:
        if ref not in Provenance.from_json(r["provenance"]).refs:
            continue
        await engine.set_status(r["id"], Status.ARCHIVED, conn=conn)
        await write_log(conn, at=engine.now(), job="migration", owner=owner, action="file_removed",
                        memory_id=r["id"], detail={"file": ref})
        n += 1
    return n


# No memory file predates the epoch its mtime counts from: an earlier day is a typo.
_FIRST_DAY = date(1970, 1, 1)
# A calendar day starts up to 14 hours before UTC's (UTC+14): a line dated
# tomorrow by UTC may be today where it was written.
_AHEAD = timedelta(hours=14)


def line_time(day: str, now: datetime) -> str | None:
    """The stored time of a line dated ``day`` (mdfacts' ``YYYY-MM-DD``):
    its noon UTC, which is that same day on the clocks of UTC-12 to UTC+11
    (the owner's zone is not known here; "when did I say that" reads it in
    theirs), never later than ``now``. None when the day is not believed:
    none, after today anywhere, or before :data:`_FIRST_DAY`."""
    if not day:
        return None
    try:
        d = date.fromisoformat(day)
    except ValueError:
        return None
    if d < _FIRST_DAY or d > (now + _AHEAD).date():
        return None
    return format_ts(min(datetime(d.year, d.month, d.day, 12, tzinfo=UTC), now))


async def _more_terms(engine: MemoryEngine, owner: str, md: MdFact, out: dict[int, tuple[str, ...]]) -> None:
    """Terms written on a line already imported (or stated by an active
    memory) find that memory too: added to its own, none taken away (it
    may have more from what was said since)."""
    more = safe_terms(md.terms)
    if not more or md.kind == "code":
        return
    m = await engine.find_same(owner, md.text)
    if m is None or m.category is Category.CREDENTIAL:
        return
    have = out.get(m.id, m.search_terms)
    terms = clean_terms([*have, *more])
    if terms != m.search_terms:
        out[m.id] = terms


def _long_term_memory(owner: str, md: MdFact, ref: str) -> NewMemory:
    """A MEMORY.md fact as a memory: a line is profile (Tier 1, in every
    prompt); a code block is reference (Tier 2, ``config``), recalled when
    a message asks about it rather than costing every prompt its length."""
    prov = Provenance(refs=(ref,))
    if md.kind == "code":
        return NewMemory(
            owner=owner, content=md.text, tier=2, category=Category.CONFIG, importance=0.8,
            source=Source.MIGRATION, provenance=prov,
        )
    return NewMemory(
        owner=owner, content=md.text, tier=1, category=Category.IDENTITY, importance=1.0, topic="_profile",
        source=Source.MIGRATION, provenance=prov, search_terms=safe_terms(md.terms),  # its line's terms comment
    )


def _filed(m: NewMemory) -> NewMemory:
    """A profile line beyond :data:`PROFILE_IMPORT_LIMIT` as a Tier 2 fact:
    searchable as any, not in every prompt."""
    return changed(m, tier=2, importance=0.8, topic="")


def _summary(text: str, day: str) -> str:
    lines = clean_text(text).strip().splitlines()
    if lines and lines[0].strip() == f"# {day}":
        lines = lines[1:]  # the file store's own heading repeats the date
    return "\n".join(lines).strip()


async def _daily(
    engine: MemoryEngine,
    root: Path,
    f: MemoryFile,
    data: bytes,
    stamp: dict[str, Any],
    entry: dict[str, Any] | None,
    report: MigrationReport,
    lease: Lease | None = None,
) -> None:
    day = f.day or ""
    ids: list[int] = list((entry or {}).get("events", []))
    grew = (
        entry is not None
        and len(data) > int(entry.get("size", 0))
        and _sha(data[: int(entry.get("size", 0))]) == entry.get("sha256")
    )
    if grew:
        assert entry is not None
        # The old size ended a complete, valid file, so this cut is whole.
        text, replace = data[int(entry["size"]) :].decode("utf-8", "replace"), False
    else:
        text, replace = data.decode("utf-8").removeprefix("\ufeff"), entry is not None
    summary = _summary(text, day)
    prov = Provenance(refs=(_ref(root, f),), date_from=day, date_to=day)
    async with _write(engine, lease) as conn:
        if replace:
            for eid in ids:
                try:
                    await engine.delete_event(eid, conn=conn)
                except MemoryNotFound:
                    pass  # already gone (deleted by hand or by retention)
            ids = []
        same = None
        if summary and entry is None:
            # First sight of this file: an identical event may exist from an
            # older import that left no ledger.
            same = next(
                (e for e in await engine.events(f.owner, date_from=day, date_to=day) if e.summary == summary), None
            )
        if not summary or same is not None:
            report.events_skipped += 1
            if same is not None:
                ids.append(same.id)
        else:
            for piece in _chunks(summary, EVENT_MAX_TOKENS):
                ev = await engine.add_event(
                    f.owner,
                    day,
                    piece,
                    channel="migration",
                    raw_tokens=estimate_tokens(piece),
                    provenance=prov,
                    conn=conn,
                )
                ids.append(ev.id)
                if replace:
                    report.events_replaced += 1
                else:
                    report.events_added += 1
        await _save_ledger(conn, _ledger_key(f), {**stamp, "events": ids})


async def carry_ledger(
    engine: MemoryEngine, old: str, new: str, name: str, *, source: bytes, before: bytes | None, after: bytes
) -> None:
    """The file ``name`` of ``old``'s folder is moving into ``new``'s
    (``myclaw memory merge-identities``), where it becomes ``after``
    (``before``: what ``new``'s file held, None if it had none). The ledger
    follows, so the next import neither adds the moved lines again nor
    loses any: ``new``'s entry cites what both imported (``lines`` /
    ``events``, whose rows move to ``new`` with the rest of ``old``'s), and
    holds ``after``'s stamp only when both files had been imported whole;
    otherwise a stamp no file matches, and the next import redoes the day
    from the merged file, replacing the events cited. Call before writing
    ``after``: run again on a destination already written, it changes
    nothing."""
    rows = await engine.db.fetchall(
        "SELECT key, value FROM meta WHERE key IN (?, ?)",
        (_ledger_key(MemoryFile(old, Path(name), None)), _ledger_key(MemoryFile(new, Path(name), None))),
    )
    got = {r["key"]: json.loads(r["value"]) for r in rows}
    old_key, new_key = _ledger_key(MemoryFile(old, Path(name), None)), _ledger_key(MemoryFile(new, Path(name), None))
    h, a = got.get(old_key), got.get(new_key)
    if h is None and a is None:
        return  # neither file was imported: the next import reads the merged file whole
    stamp = {"size": len(after), "sha256": _sha(after), "mtime_ns": 0}
    async with engine.db.transaction() as conn:
        if a is None or a.get("sha256") != stamp["sha256"]:  # not carried yet
            whole = (
                h is not None
                and h.get("sha256") == _sha(source)
                and (a.get("sha256") == _sha(before) if a is not None and before is not None else before is None)
            )
            entry: dict[str, Any] = dict(stamp) if whole else {"size": 0, "sha256": "", "mtime_ns": 0}
            for field_ in ("lines", "events"):
                cited = [*(a or {}).get(field_, []), *(h or {}).get(field_, [])]
                if cited:
                    entry[field_] = sorted(set(cited)) if field_ == "lines" else list(dict.fromkeys(cited))
            await _save_ledger(conn, new_key, entry)
        await conn.execute("DELETE FROM meta WHERE key = ?", (old_key,))
