"""Moving a handle's rows to the user ``memory.identities`` maps it to.

A handle (``telegram:777``) that talked to the bot before it was mapped to a
user (``alice``) still owns what it stored; recall, Tier 1 and the tools
read ``alice``'s rows, so the bot seems to have forgotten the person.
:func:`move_owner` hands every row of memory.db and the extraction buffer
to the user; ``myclaw memory merge-identities`` runs it with the other
files' moves (gateway.db, cron.db, the file store's folder).

Tables that name an owner (every one; a test pins the list against the
schema): ``memories`` and the ``owner`` token of its FTS rows,
``daily_events`` and ``events_fts``, ``memory_vectors``, ``memory_log``,
``project_aliases`` (an alias the user already has wins), and the buffer
file's ``extraction_buffer``. ``buffer_gone`` and
``embedding_cache`` hold ids and hashes, no owner; ``meta``'s migration
ledger is keyed by owner too, and moves with the files it describes
(:func:`memory.migrate.carry_ledger`).

What the user already has. No unique constraint covers memories, but
consolidation expects one active row per wording and tier: ``find_same``
reinforces the first, recall would show both, and the weekly profile
refresh keys Tier 1 by wording, so a second copy would never be demoted.
So a moved *active* memory whose tier and wording (``content_hash``) match
one of the user's active memories is superseded by it, as a restatement
would have reinforced it: the kept row takes the higher importance and the
summed access counts, the moved one stays as its older version
(``superseded_by``; forgetting the kept one takes it along). Everything
else is kept: different wordings of the same thing are for consolidation
and the weekly merge to judge, not for a rename, and Tier 1 entries of both
stay until the next weekly refresh rebuilds the profile from the merged
facts (demoting at most a quarter at a time, as always). The same message
buffered under both owners (the unique index on the buffer would refuse
the rename) is the same line: the handle's copy is dropped.

One transaction over memory.db and the attached buffer file, atomic per
file (SQLite commits memory.db first). Every statement selects by owner,
so a run interrupted anywhere is finished by running it again, and a run
with no rows left to move writes no log entry: a handle's zone record
(memory/zonehistory.py) follows it even then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .buffer import drop_lines
from .changelog import write_log
from .cues import clean_terms, join_terms, split_terms
from .engine import MemoryEngine, memory_index_text, owner_key, replaced_words, row_cues
from .zonehistory import move_zones

__all__ = ["OWNED_TABLES", "move_owner", "survey"]

OWNED_TABLES = (
    "memories", "memories_fts", "daily_events", "events_fts", "memory_vectors", "memory_log", "extraction_buffer",
    "project_aliases",
)  # fmt: skip
"""Every table of memory.db and its buffer file with an owner column."""

Fetch = Callable[[str, Sequence[Any]], Awaitable[Any]]

# The handle's active memories whose tier and wording one of the user's
# active memories already has, with the oldest such row of the user's (the
# one consolidation's find_same would reinforce).
_DUPLICATES = """SELECT m.id, MIN(t.id) AS keep, m.importance, m.access_count, m.last_accessed
    FROM memories m JOIN memories t
      ON t.owner = ? AND t.status = 'active' AND t.tier = m.tier AND t.content_hash = m.content_hash
   WHERE m.owner = ? AND m.status = 'active'
   GROUP BY m.id ORDER BY m.id"""

# The handle's buffered lines that the user has buffered too (same message).
_SAME_LINES = """SELECT b.id FROM extraction_buffer b
   WHERE b.owner = ? AND b.message_id != '' AND EXISTS (
         SELECT 1 FROM extraction_buffer t
          WHERE t.owner = ? AND t.channel = b.channel AND t.chat_id = b.chat_id
            AND t.message_id = b.message_id AND t.role = b.role)"""


async def _count(fetch: Fetch, table: str, owner: str) -> int:
    rows = await fetch(f"SELECT COUNT(*) FROM {table} WHERE owner = ?", (owner,))
    return int(next(iter(rows))[0])


async def _survey(fetch: Fetch, old: str, new: str) -> dict[str, int]:
    counts = {
        "memories": await _count(fetch, "memories", old),
        "duplicates": len(await fetch(_DUPLICATES, (new, old))),
        "events": await _count(fetch, "daily_events", old),
        "vectors": await _count(fetch, "memory_vectors", old),
        "log entries": await _count(fetch, "memory_log", old),
        "project aliases": await _count(fetch, "project_aliases", old),
        "buffered": await _count(fetch, "extraction_buffer", old),
        "buffered duplicates": len(await fetch(_SAME_LINES, (old, new))),
    }
    return counts


async def survey(engine: MemoryEngine, old: str, new: str) -> dict[str, int]:
    """What :func:`move_owner` would move (``--dry-run``): reads only, on
    the reader connection, so it may run beside a live gateway."""
    return await _survey(engine.db.fetchall, old, new)


async def move_owner(engine: MemoryEngine, old: str, new: str, *, job: str) -> dict[str, int]:
    """Hand every row ``old`` owns in memory.db and the buffer file to
    ``new`` (see the module docstring); returns the counts moved, as
    :func:`survey` reports them. Logged as ``merge_identity`` (and one
    ``supersede`` per duplicate) under ``job``."""
    if old == new or not old or not new:
        raise ValueError(f"cannot move {old!r}'s rows to {new!r}")
    async with engine.db.transaction() as conn:
        counts = await _survey(conn.execute_fetchall, old, new)
        if not any(counts.values()):
            # No rows, but where the handle was (/timezone) still follows it,
            # and the groups' notes and lines of what it said name the user now.
            renamed = await _rename_speaker(conn, old, new)
            if await move_zones(conn, old, new) or renamed:
                engine.owners_changed(old, new)
            return counts
        at = engine.now()
        engine.owners_changed(old, new)
        for d in await conn.execute_fetchall(_DUPLICATES, (new, old)):
            await conn.execute(
                "UPDATE memories SET status = 'superseded', superseded_by = ?, updated_at = ? WHERE id = ?",
                (d["keep"], at, d["id"]),
            )
            await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (d["id"],))  # only active rows are indexed
            await conn.execute(
                "UPDATE memories SET importance = MAX(importance, ?), access_count = access_count + ?, "
                "last_accessed = MAX(last_accessed, ?) WHERE id = ?",
                (d["importance"], d["access_count"], d["last_accessed"], d["keep"]),
            )
            await _carry_terms(conn, d["id"], d["keep"])
            await write_log(conn, at=at, job=job, owner=old, action="supersede", memory_id=d["id"],
                            detail={"by": d["keep"], "why": f"same wording as a memory of {new}, merged from {old}"})
        # The FTS rows scope a MATCH to one owner by a token of their own.
        await conn.execute(
            "UPDATE memories_fts SET owner = ? WHERE rowid IN (SELECT id FROM memories WHERE owner = ?)",
            (owner_key(new), old),
        )
        await conn.execute(
            "UPDATE events_fts SET owner = ? WHERE rowid IN (SELECT id FROM daily_events WHERE owner = ?)",
            (owner_key(new), old),
        )
        for table in ("memories", "daily_events", "memory_vectors", "memory_log"):
            await conn.execute(f"UPDATE {table} SET owner = ? WHERE owner = ?", (new, old))
        # One alias per name and owner: the user's own stays.
        await conn.execute("UPDATE OR IGNORE project_aliases SET owner = ? WHERE owner = ?", (new, old))
        await conn.execute("DELETE FROM project_aliases WHERE owner = ?", (old,))
        same = [r[0] for r in await conn.execute_fetchall(_SAME_LINES, (old, new))]
        await drop_lines(conn, same)  # tombstoned in memory.db first, as every buffer delete
        await conn.execute("UPDATE extraction_buffer SET owner = ? WHERE owner = ?", (new, old))
        await _rename_speaker(conn, old, new)
        await move_zones(conn, old, new)  # where the handle's words were said (memory/zonehistory.py)
        moved = {k: v for k, v in counts.items() if v}
        await write_log(conn, at=at, job=job, owner=new, action="merge_identity", detail={"from": old, **moved})
    return counts


_RENAME_SPEAKER = """UPDATE {table} SET provenance = json_set(provenance, '$.speakers', json((
    SELECT json_group_array(DISTINCT CASE WHEN s.value = ?2 THEN ?1 ELSE s.value END)
      FROM json_each({table}.provenance, '$.speakers') s)))
  WHERE owner LIKE 'group:%' AND json_valid(provenance)
    AND EXISTS (SELECT 1 FROM json_each({table}.provenance, '$.speakers') s WHERE s.value = ?3)"""


async def _rename_speaker(conn: Any, old: str, new: str) -> int:
    """The groups' notes and lines name who spoke them (memory/groupnotes.py):
    the user's erasure finds them by the name they have now. How many rows."""
    n = (await conn.execute("UPDATE extraction_buffer SET speaker = ? WHERE speaker = ?", (new, old))).rowcount
    for table in ("memories", "daily_events"):
        n += (await conn.execute(_RENAME_SPEAKER.format(table=table), (new, old, old))).rowcount
    return int(n)


async def _carry_terms(conn: Any, moved: int, keep: int) -> None:
    """The kept row is found by the moved copy's search terms too
    (memory/cues.py), as a restatement adds its own; its FTS row follows."""
    rows = {r["id"]: r for r in await conn.execute_fetchall("SELECT * FROM memories WHERE id IN (?, ?)", (moved, keep))}
    have = split_terms(rows[keep]["search_terms"])
    terms = clean_terms([*have, *split_terms(rows[moved]["search_terms"])])
    if terms == have:
        return
    await conn.execute("UPDATE memories SET search_terms = ? WHERE id = ?", (join_terms(terms), keep))
    [k] = await conn.execute_fetchall("SELECT * FROM memories WHERE id = ?", (keep,))
    text = memory_index_text(k["content"], k["source_text"], await replaced_words(conn, k["owner"], keep), row_cues(k))
    await conn.execute("UPDATE memories_fts SET text = ? WHERE rowid = ?", (text, keep))
