"""What a forget erased, so a stale copy of a memory file does not bring it
back (seed 004, "memory sync: file to database").

A forget of a user's fact also erases its line from their ``MEMORY.md``
(:meth:`memory.filestore.FileMemory.forget_words`). An editor that had the
file open still holds the old copy, and its next save puts the line back;
the import would read it as a new line and the fact would return. So each
erasure of a user's memories records their wordings' hashes
(:func:`~memory.engine.content_hash`, never the words) in the ``meta``
table, and the import (memory/migrate.py) takes a line with such a hash,
within :data:`ERASED_HOLD` of the erasure, for that stale copy: not
imported, counted (``memories_erased``) and noted in the file's ledger as
read, so it is not looked at again while it stays.

Written anew: a save's mtime cannot tell a stale buffer from new typing
(both are a save after the erasure), so the hold is by time. A line with
the same words written back after :data:`ERASED_HOLD` (or removed and
written back then) is imported; within it, the user says it to the bot,
or adds it on the memory page, which are not file lines. The ``_global``
owner's erasures are not recorded: its file is the operator's, which a
forget never rewrites.

Keyed: a short secret's line ("my PIN is 4821") was one plain SHA-256
among ten thousand guesses. Each entry is now an HMAC-SHA-256 of the
line's hash under a random key made on first use and kept in
:data:`KEY_FILE` beside memory.db, owner-only: not in the database, so a
copy of memory.db alone (a backup, a file sent with a bug report) gives
nothing to guess with. Entries written before (plain hashes, no ``k:``
prefix) still match until their hold ends; they cannot be turned into
keyed ones (the words are gone), so no migration.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

import aiosqlite
import structlog

from .clock import format_ts, parse_ts
from .db import Database
from .engine import content_hash
from .types import GLOBAL_OWNER

__all__ = ["ERASED_HOLD", "ERASED_KEPT", "KEY_FILE", "ErasedLines", "drop_erased", "erased_hashes", "remember_erased"]

log = structlog.get_logger(component="memory")

# Long enough for a laptop left with the editor open over a holiday; not
# so long that the same words typed again months later are refused.
ERASED_HOLD = timedelta(days=30)
# Hashes kept per owner, the newest: an erasure of thousands at once (a
# cascade of a pasted log) does not make this one huge meta row.
ERASED_KEPT = 5000

_PREFIX = "erased_lines:"
KEY_FILE = "erased-lines.key"  # beside memory.db: 32 random bytes, hex
_KEYED = "k:"  # a keyed entry; one without it is a plain hash from before
_KEYS: dict[str, bytes] = {}  # memory.db's path -> its key, read once a process


def _key_file(db: Database) -> Path | None:
    return None if str(db.path) == ":memory:" else Path(db.path).parent / KEY_FILE


def _ledger_key(db: Database, *, create: bool) -> bytes | None:
    """The key of ``db``'s ledger; made (owner-only, never written over: two
    processes making it at once keep the first) when ``create``. None when
    there is none yet, or it cannot be read or made."""
    where = _key_file(db)
    name = str(db.path)
    if name in _KEYS:
        return _KEYS[name]
    if where is None:  # a database in memory: a key for this process
        return _KEYS.setdefault(name, secrets.token_bytes(32)) if create else None
    try:
        key = bytes.fromhex(where.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        if not create:
            return None
        made = secrets.token_bytes(32)
        try:
            _make_key_file(where, made)
        except FileExistsError:  # another process made it meanwhile: theirs
            return _ledger_key(db, create=False)
        except OSError as exc:
            log.warning("erased-lines key cannot be made; this erasure's lines are not held", why=type(exc).__name__)
            return None
        key = made
    except (OSError, ValueError) as exc:
        log.warning("erased-lines key cannot be read; erased lines are not held", why=type(exc).__name__)
        return None
    if len(key) < 16:
        log.warning("erased-lines key is too short; erased lines are not held")
        return None
    _KEYS[name] = key
    return key


def _make_key_file(where: Path, key: bytes) -> None:
    """Write ``key`` whole to a private file beside ``where``, then link it
    there: a crash mid-write leaves no half key, and a key another process
    linked first is kept (FileExistsError)."""
    tmp = where.with_name(f".{where.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.write(fd, key.hex().encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, where)
    finally:
        tmp.unlink(missing_ok=True)


async def _key_of(db: Database, *, create: bool) -> bytes | None:
    """:func:`_ledger_key`, its file read (or made and synced) off the loop the first time."""
    if (known := _KEYS.get(str(db.path))) is not None:
        return known
    return await asyncio.to_thread(_ledger_key, db, create=create)


def _keyed(key: bytes, line_hash: str) -> str:
    return _KEYED + hmac.new(key, line_hash.encode("ascii"), hashlib.sha256).hexdigest()


class ErasedLines:
    """The wordings of an owner's memories erased within the hold: ``h in
    erased`` for a line's :func:`~memory.engine.content_hash` ``h``."""

    def __init__(self, entries: Iterable[str], key: bytes | None) -> None:
        self._entries = frozenset(entries)
        self._key = key

    def __contains__(self, line_hash: object) -> bool:
        if not isinstance(line_hash, str) or not self._entries:
            return False
        if line_hash in self._entries:  # written the old way (plain), within its hold
            return True
        return self._key is not None and _keyed(self._key, line_hash) in self._entries

    def __bool__(self) -> bool:
        return bool(self._entries)


def _key(owner: str) -> str:
    return _PREFIX + json.dumps(owner, ensure_ascii=False)


def _live(value: str | None, now: datetime) -> dict[str, str]:
    """The recorded hash -> erased-at pairs still within the hold."""
    try:
        got = json.loads(value) if value else {}
    except ValueError:
        return {}
    if not isinstance(got, dict):
        return {}
    since = now - ERASED_HOLD
    out: dict[str, str] = {}
    for h, at in got.items():
        try:
            if parse_ts(str(at)) > since:
                out[str(h)] = str(at)
        except ValueError:
            continue
    return out


async def remember_erased(db: Database, conn: aiosqlite.Connection, owner: str, texts: Iterable[str],
                          now: datetime) -> None:
    """Record ``texts`` (erased memories of ``owner``) by keyed hash, in the
    caller's transaction on ``db``."""
    if owner == GLOBAL_OWNER:
        return
    plain = {content_hash(t) for t in texts if t.strip()}
    if not plain:
        return
    key = await _key_of(db, create=True)
    if key is None:
        return  # said in the log: a plain hash would be guessable
    hashes = {_keyed(key, h) for h in plain}
    async with conn.execute("SELECT value FROM meta WHERE key = ?", (_key(owner),)) as cur:
        row = await cur.fetchone()
    kept = _live(row[0] if row else None, now) | dict.fromkeys(hashes, format_ts(now))
    newest = dict(sorted(kept.items(), key=lambda kv: kv[1])[-ERASED_KEPT:])
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_key(owner), json.dumps(newest, separators=(",", ":"))),
    )


async def erased_hashes(db: Database, owner: str, now: datetime) -> ErasedLines:
    """The wordings of ``owner``'s memories erased within the hold."""
    row = await db.fetchone("SELECT value FROM meta WHERE key = ?", (_key(owner),))
    live = _live(row["value"] if row else None, now)
    return ErasedLines(live, await _key_of(db, create=False) if live else None)


async def drop_erased(conn: aiosqlite.Connection, owner: str) -> None:
    """Forget the record of ``owner`` (erased whole, folder and all)."""
    await conn.execute("DELETE FROM meta WHERE key = ?", (_key(owner),))
