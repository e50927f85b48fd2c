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
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta

import aiosqlite

from .clock import format_ts, parse_ts
from .db import Database
from .engine import content_hash
from .types import GLOBAL_OWNER

__all__ = ["ERASED_HOLD", "ERASED_KEPT", "drop_erased", "erased_hashes", "remember_erased"]

# Long enough for a laptop left with the editor open over a holiday; not
# so long that the same words typed again months later are refused.
ERASED_HOLD = timedelta(days=30)
# Hashes kept per owner, the newest: an erasure of thousands at once (a
# cascade of a pasted log) does not make this one huge meta row.
ERASED_KEPT = 5000

_PREFIX = "erased_lines:"


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


async def remember_erased(conn: aiosqlite.Connection, owner: str, texts: Iterable[str], now: datetime) -> None:
    """Record ``texts`` (erased memories of ``owner``) by hash, in the
    caller's transaction."""
    if owner == GLOBAL_OWNER:
        return
    hashes = {content_hash(t) for t in texts if t.strip()}
    if not hashes:
        return
    async with conn.execute("SELECT value FROM meta WHERE key = ?", (_key(owner),)) as cur:
        row = await cur.fetchone()
    kept = _live(row[0] if row else None, now) | dict.fromkeys(hashes, format_ts(now))
    newest = dict(sorted(kept.items(), key=lambda kv: kv[1])[-ERASED_KEPT:])
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_key(owner), json.dumps(newest, separators=(",", ":"))),
    )


async def erased_hashes(db: Database, owner: str, now: datetime) -> set[str]:
    """The wordings (by hash) of ``owner``'s memories erased within the hold."""
    row = await db.fetchone("SELECT value FROM meta WHERE key = ?", (_key(owner),))
    return set(_live(row["value"] if row else None, now))


async def drop_erased(conn: aiosqlite.Connection, owner: str) -> None:
    """Forget the record of ``owner`` (erased whole, folder and all)."""
    await conn.execute("DELETE FROM meta WHERE key = ?", (_key(owner),))
