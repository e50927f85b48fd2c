"""Deleting buffered lines, which live in a file of their own.

The extraction buffer is ``memory.buffer.db`` (memory/schema.py; why:
memory/db.py). A transaction that deletes buffered lines *and* writes
memory.db (an extraction batch: its facts; an erasure: the fact the lines
said) is atomic per file only, and SQLite commits memory.db first. A crash
between the two commits would leave lines that were already extracted
(written twice) or that an erasure meant to drop (the forgotten fact
learned again from them).

So every delete also records the ids in memory.db's ``buffer_gone``, in the
same transaction: a line counts as gone once memory.db has committed.
Extraction reads only lines not in it (:data:`NOT_GONE`); :func:`reconcile`,
run when the database opens, deletes what a crash left behind. In the
normal case the buffer file's delete commits a moment later and the
tombstones are cleared by the next delete.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiosqlite

from .db import Database

__all__ = ["NOT_GONE", "continue_ids", "drop_lines", "drop_owner_lines", "reconcile"]

NOT_GONE = "id NOT IN (SELECT id FROM buffer_gone)"
"""SQL condition on ``extraction_buffer``: the line was not deleted by a
transaction whose buffer-file half a crash lost."""

_CLEAR = "DELETE FROM buffer_gone WHERE id NOT IN (SELECT id FROM extraction_buffer)"


async def drop_lines(conn: aiosqlite.Connection, ids: Sequence[int]) -> None:
    """Delete buffered lines ``ids`` inside the caller's transaction."""
    if not ids:
        return
    await conn.execute(_CLEAR)  # tombstones of earlier deletes that reached the file
    await conn.executemany("INSERT OR IGNORE INTO buffer_gone (id) VALUES (?)", [(i,) for i in ids])
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        await conn.execute(f"DELETE FROM extraction_buffer WHERE id IN ({','.join('?' * len(chunk))})", chunk)


async def drop_owner_lines(conn: aiosqlite.Connection, owner: str) -> int:
    """Delete every buffered line of ``owner`` inside the caller's
    transaction; returns how many."""
    async with conn.execute("SELECT id FROM extraction_buffer WHERE owner = ?", (owner,)) as cur:
        ids = [r[0] for r in await cur.fetchall()]
    await drop_lines(conn, ids)
    return len(ids)


async def reconcile(db: Database) -> int:
    """Delete the lines a crash left in the buffer file after memory.db
    had recorded them gone, then the tombstones; returns how many lines.
    Two transactions, the buffer file's first: a crash between them only
    leaves tombstones for the next call. Reads only, in the normal case."""
    if await db.fetchone("SELECT 1 FROM extraction_buffer WHERE id IN (SELECT id FROM buffer_gone) LIMIT 1") is None:
        return 0
    async with db.transaction() as conn:
        cur = await conn.execute("DELETE FROM extraction_buffer WHERE id IN (SELECT id FROM buffer_gone)")
        left = cur.rowcount
    async with db.transaction() as conn:
        await conn.execute(_CLEAR)
    return left


_CITED = """SELECT MAX(n) FROM (
    SELECT CAST(substr(j.value, 5) AS INTEGER) AS n FROM memories t, json_each(t.provenance, '$.refs') j
     WHERE json_valid(t.provenance) AND j.value LIKE 'buf:%'
    UNION ALL
    SELECT CAST(substr(j.value, 5) AS INTEGER) FROM daily_events t, json_each(t.provenance, '$.refs') j
     WHERE json_valid(t.provenance) AND j.value LIKE 'buf:%'
    UNION ALL
    SELECT MAX(id) FROM buffer_gone)"""


async def continue_ids(db: Database) -> int:
    """A buffer file that starts over (deleted, or memory.db restored from
    a backup without it) would hand out ids that stored facts and events
    cite as ``buf:<id>``, tying a new batch to an old one (what forgetting
    follows). With no id sequence in the file, start it after the highest
    id cited; returns that id (0: nothing cited, as in a new install). A
    full read of the provenance, only when the sequence is missing."""
    if await db.fetchone("SELECT 1 FROM buffer.sqlite_sequence WHERE name = 'extraction_buffer'") is not None:
        return 0
    row = await db.fetchone(_CITED)
    top = int(row[0]) if row is not None and row[0] is not None else 0
    if top <= 0:
        return 0
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO buffer.sqlite_sequence (name, seq) SELECT 'extraction_buffer', "
            "MAX(?, IFNULL((SELECT MAX(id) FROM buffer.extraction_buffer), 0)) "
            "WHERE NOT EXISTS (SELECT 1 FROM buffer.sqlite_sequence WHERE name = 'extraction_buffer')",
            (top,),
        )
    return top
