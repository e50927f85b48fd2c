"""Feishu facts and Tier 3 events from before the chat kind was kept,
labelled private where the gateway knows the chat was a private (p2p) one.

A Feishu chat id (``oc_``) does not say whether it is a group; facts learnt
before ``provenance.group`` was recorded are taken for a group's (fail
closed, memory/scope.py ``in_group``): a private restatement then adds no
words to them, a weekly merge keeps them apart. The gateway's Tier 0 keeps
with each message whether it came in a group (gateway/sessions.py
``chat_kind``); where it knows a chat was private, the gateway hands those
chat ids to :func:`label_private` at start. A chat it does not know stays
as it is. An event is labelled for the same reason: its day's summary would
be written as one the chat's group reads. Once no such row is left, nothing
is looked for again (every row written since says its kind).
"""

from __future__ import annotations

from collections.abc import Sequence

from .changelog import write_log
from .engine import MemoryEngine

__all__ = ["label_private", "unlabelled_chats"]

# meta key: no unlabelled row is left ("chatkinds", before events were
# labelled too, said it of memories alone, so events are looked at once more)
DONE = "chatkinds.events"
_TABLES = ("memories", "daily_events")

_UNLABELLED = ("json_valid(provenance) AND json_extract(provenance, '$.channel') = 'feishu'"
               " AND coalesce(json_extract(provenance, '$.chat_id'), '') != ''"
               " AND json_type(provenance, '$.group') IS NULL")


async def unlabelled_chats(engine: MemoryEngine) -> list[str]:
    """Feishu chat ids of memories and events that do not say whether they were said in a group."""
    if await engine.db.fetchone("SELECT 1 FROM meta WHERE key = ?", (DONE,)) is not None:
        return []
    rows = await engine.db.fetchall(
        " UNION ".join(f"SELECT json_extract(provenance, '$.chat_id') FROM {t} WHERE {_UNLABELLED}" for t in _TABLES)
        + " ORDER BY 1")
    if not rows:
        async with engine.db.transaction() as conn:
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, 'done')", (DONE,))
    return [str(r[0]) for r in rows]


async def label_private(engine: MemoryEngine, chat_ids: Sequence[str]) -> int:
    """Label the unlabelled memories and events of these Feishu chats
    (known private) as not a group's; a memory's is logged as ``relabel``.
    How many rows were."""
    if not chat_ids:
        return 0
    marks = ",".join("?" * len(chat_ids))
    where = f"{_UNLABELLED} AND json_extract(provenance, '$.chat_id') IN ({marks})"
    async with engine.db.transaction() as conn:
        async with conn.execute(f"SELECT id, owner FROM memories WHERE {where} ORDER BY id", tuple(chat_ids)) as cur:
            rows = list(await cur.fetchall())
        at = engine.now()
        for r in rows:
            await write_log(conn, at=at, job="start", owner=r[1], action="relabel", memory_id=r[0],
                            detail={"group": False, "why": "the gateway knows the chat was private"})
        events = 0
        for table in _TABLES:
            cur = await conn.execute(
                f"UPDATE {table} SET provenance = json_set(provenance, '$.group', json('false')) WHERE {where}",
                tuple(chat_ids),
            )
            events = cur.rowcount if table == "daily_events" else events
    return len(rows) + events
