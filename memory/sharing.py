"""A member's own facts let into groups: ``/share`` and ``/unshare``.

A group reads of a member only what they said in it (memory/scope.py).
The member may let one of their facts be read in groups too: in every
group where they ask the bot (shared from the private chat, ``*``) or in
one group (shared from it, ``channel:chat_id``). It is still read only
when THEY ask there, as any of their group facts. What is shared is kept
on the row (``provenance.shared``), so it goes with the row: erased with
it, and not carried to a fact that replaces it (a new fact starts
private). Credentials and the profile (Tier 1) are never shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .engine import MemoryEngine, row_to_memory
from .scope import EVERY_GROUP, Chat, place
from .types import Memory

__all__ = ["EVERY_GROUP", "Shared", "place_key", "share", "shared", "shared_places", "unshare"]


def place_key(chat: Chat | None) -> str:
    """How ``provenance.shared`` names ``chat`` (None: every group)."""
    return EVERY_GROUP if chat is None else place(chat)


@dataclass
class Shared:
    """What a ``/share`` or ``/unshare`` did, by memory id."""

    changed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)  # already so
    refused: list[int] = field(default_factory=list)  # a credential or a profile entry: never shared
    unknown: list[int] = field(default_factory=list)  # not the user's, or no such active fact
    elsewhere: list[int] = field(default_factory=list)  # /unshare in a group of one shared with every group


async def _change(engine: MemoryEngine, owner: str, ids: Sequence[int], chat: Chat | None, *, on: bool) -> Shared:
    out = Shared()
    key = place_key(chat)
    async with engine.db.transaction() as conn:
        for memory_id in dict.fromkeys(ids):
            # The owner's own rows only: another user's id is just unknown.
            async with conn.execute(
                "SELECT * FROM memories WHERE id = ? AND owner = ? AND status = 'active'", (memory_id, owner)
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                out.unknown.append(memory_id)
                continue
            m = row_to_memory(row)
            if m.tier != 2 or m.category == "credential":
                out.refused.append(memory_id)
                continue
            have = m.provenance.shared
            if on:
                more = have if key in have or EVERY_GROUP in have else (*have, key)
            else:
                # From a private chat: every group; from a group: that one.
                more = tuple(s for s in have if s != key) if chat is not None else ()
            if not on and EVERY_GROUP in more:
                # Taken back from one group, it is still shared with all of them.
                out.elsewhere.append(memory_id)
            else:
                (out.changed if more != have else out.unchanged).append(memory_id)
            if more != have:
                await conn.execute("UPDATE memories SET provenance = ? WHERE id = ?",
                                   (replace(m.provenance, shared=more).to_json(), memory_id))
    return out


async def share(engine: MemoryEngine, owner: str, ids: Sequence[int], chat: Chat | None) -> Shared:
    """Let ``owner``'s facts ``ids`` be read in ``chat`` (None: every group they ask in)."""
    return await _change(engine, owner, ids, chat, on=True)


async def unshare(engine: MemoryEngine, owner: str, ids: Sequence[int], chat: Chat | None) -> Shared:
    """Take back ``ids`` from ``chat`` (None: from every group)."""
    return await _change(engine, owner, ids, chat, on=False)


async def shared(engine: MemoryEngine, owner: str) -> list[Memory]:
    """``owner``'s active facts shared with any group, oldest first."""
    rows = await engine.db.fetchall(
        "SELECT * FROM memories WHERE owner = ? AND status = 'active' AND tier = 2 AND json_valid(provenance) "
        "AND json_array_length(provenance, '$.shared') > 0 ORDER BY id",
        (owner,),
    )
    return [row_to_memory(r) for r in rows]



async def shared_places(engine: MemoryEngine, owner: str) -> list[str]:
    """Every group (``channel:chat_id``) any of ``owner``'s rows, of any
    status, was shared with (for their names in an export)."""
    rows = await engine.db.fetchall(
        "SELECT DISTINCT s.value FROM memories m, json_each(CASE WHEN json_valid(m.provenance) THEN m.provenance "
        "ELSE '{}' END, '$.shared') s WHERE m.owner = ? AND s.value != ? ORDER BY 1",
        (owner, EVERY_GROUP),
    )
    return [str(r[0]) for r in rows]
