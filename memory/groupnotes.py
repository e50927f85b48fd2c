"""A group's own memory: its notes, owned by the group, not by any member.

What members say to the bot in a group is learnt twice: as each member's
own facts, read back to them there (memory/scope.py), and as the group's
notes, under the owner :func:`group_owner` (``group:<channel>:<chat_id>``):
what the group decided, planned, assigned, and facts members stated about
shared matters, each naming who said it. The loop's buffered group lines
are copied under that owner with their speaker (memory/service.py
``buffer``); extraction learns the group's batch with the notes' prompt
(memory/extraction.py, memory/llm.py), each note keeping the owner ids and
names of the members whose lines it came from (``Provenance.speakers`` /
``said_by``).

Read only in that group (:func:`readers`): recall, ``memory_search`` and a
group's cron job read the asker's own rows as before plus these; never
another group, never a private chat, never Core Memory (Tier 1), never a
member's ``/memory`` or export. Erased when a member erases everything
(:func:`forget_speaker`: the notes and events citing any of their lines,
and their lines waiting under the group) and when the bot is removed from
the group (:func:`forget_group`). The shape of the owner id cannot be a
user's: an unmapped sender is ``<channel>:<sender_id>`` and no channel is
called ``group``; the config refuses an identity named so
(gateway/config.py).
"""

from __future__ import annotations

import structlog

from .buffer import NOT_GONE, drop_lines
from .engine import MemoryEngine, row_to_event, row_to_memory
from .forgetting import erase_planned, plan_erasure
from .groupowner import GROUP_PREFIX, chat_of, group_owner, is_group_owner, readers
from .types import GLOBAL_OWNER

__all__ = ["GROUP_PREFIX", "chat_of", "citing", "forget_group", "forget_speaker", "group_owner", "is_group_owner", "move_group",
           "readers"]
# (the owner helpers live in memory/groupowner.py, which the config imports without the engine)

log = structlog.get_logger(component="memory")

_CITING = (f"owner LIKE '{GROUP_PREFIX}%' AND json_valid(provenance)"
           " AND EXISTS (SELECT 1 FROM json_each(provenance, '$.speakers') s WHERE s.value = ?)")
"""SQL condition on ``memories`` / ``daily_events``: a group's row drawn
from (or saved by) the member ``?``."""


async def forget_speaker(engine: MemoryEngine, user: str) -> dict[str, int]:
    """Erase, for good, every group's notes and events that cite any line
    of ``user`` (conservative: a note drawn from their line and another
    member's goes too), with what goes with them (older versions, the
    events' hold; memory/forgetting.py), and their lines waiting under a
    group owner (the bot's replies to them included: the row's speaker is
    the member it answered). One transaction; the caller purges
    (:meth:`MemoryEngine.purge_erased`, which ``forget_owner`` runs)."""
    counts = {"notes": 0, "events": 0, "buffered": 0}
    if not user or is_group_owner(user) or user == GLOBAL_OWNER:
        return counts
    async with engine.db.transaction() as conn:
        async with conn.execute(f"SELECT * FROM memories WHERE {_CITING} ORDER BY id", (user,)) as cur:
            notes = [row_to_memory(r) for r in await cur.fetchall()]
        async with conn.execute(f"SELECT * FROM daily_events WHERE {_CITING} ORDER BY id", (user,)) as cur:
            events = [row_to_event(r) for r in await cur.fetchall()]
        for owner in sorted({m.owner for m in notes} | {e.owner for e in events}):
            plan = await plan_erasure(conn, owner, [m for m in notes if m.owner == owner],
                                      [e for e in events if e.owner == owner])
            await erase_planned(engine, conn, plan, job="chat", action="forget-speaker")
            counts["notes"] += len(plan.memory_ids)
            counts["events"] += len(plan.events)
        async with conn.execute(
            f"SELECT id FROM extraction_buffer WHERE owner LIKE '{GROUP_PREFIX}%' AND speaker = ? AND {NOT_GONE}",
            (user,),
        ) as cur:
            lines = [r[0] for r in await cur.fetchall()]
        await drop_lines(conn, lines)
        counts["buffered"] = len(lines)
    if any(counts.values()):
        log.info("group notes of a member erased", **counts)
    return counts


async def citing(engine: MemoryEngine, user: str) -> int:
    """How many groups' notes and days :func:`forget_speaker` would take
    for ``user`` (what ``/forget all`` tells them it erases; their lines
    waiting under a group are copies of messages counted as theirs)."""
    if not user or is_group_owner(user) or user == GLOBAL_OWNER:
        return 0
    row = await engine.db.fetchone(
        f"SELECT (SELECT COUNT(*) FROM memories WHERE {_CITING}) + (SELECT COUNT(*) FROM daily_events WHERE {_CITING})",
        (user, user))
    return int(row[0]) if row is not None else 0


async def forget_group(engine: MemoryEngine, channel: str, chat_id: str) -> dict[str, int]:
    """The bot was removed from the group: its notes, events and waiting
    lines go, for good (:meth:`MemoryEngine.forget_owner`)."""
    return await engine.forget_owner(group_owner(channel, chat_id))


async def move_group(engine: MemoryEngine, channel: str, old_chat: str, new_chat: str) -> int:
    """The group got a new id (a Telegram group upgraded to a supergroup):
    its own memory follows, under the new id's owner (after
    :meth:`MemoryEngine.move_chat` moved the rows' chat). How many rows."""
    from .merge import move_owner  # merge reads the engine's tables wholesale: only when a group moves

    old, new = group_owner(channel, old_chat), group_owner(channel, new_chat)
    if old == new:
        return 0
    return sum((await move_owner(engine, old, new, job="move")).values())
