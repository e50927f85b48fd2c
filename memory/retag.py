"""A group's notes written before a namesake came, tagged once one did.

A member's notes name them bare ("Dad") while no other member of the group
has their name; once another "Dad" speaks, every new note tags each of them
(``Dad #3f9a``, memory/samenames.py) and so does the chat prompt
(memory/namesakes.py). The old bare notes would then be cited "said by Dad"
beside two tagged Dads, read as either one's. So the batch that first finds
a name shared also tags that name's older notes and days of one member's
lines with that member's tag (a note of several members' lines names them
in no order the tag could follow: left as it is).

The tag is of the member's platform sender id (memory/groupowner.py
``member_tag``), which a note does not keep: it is the batch's own line's
for a member who speaks in it, else read from the owner id of a member the
gateway knows by no other name (``<channel>:<sender id>``); a member mapped
to a name of their own (``memory.identities``) and not in the batch keeps
the bare name until a batch of theirs tags it.

Cheap: a group's names are looked at once per process each (a name done is
not read again), one read of the group's one-member rows when a name is new
(again at the next batch only for a member mapped to a name of their own)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Set

import structlog

from .changelog import write_log
from .engine import INDEX, MemoryEngine
from .groupowner import chat_of, member_tag
from .lru import LRU

__all__ = ["Retagger"]

log = structlog.get_logger(component="memory")

_TAGGED = re.compile(r" #[0-9a-f]{4}$")
_ONE_MEMBER = ("json_valid(provenance) AND json_array_length(provenance, '$.speakers') = 1 "
               "AND json_array_length(provenance, '$.said_by') = 1")


class Retagger:
    def __init__(self, *, kept: int = 4096) -> None:
        self._done: LRU[str, frozenset[str]] = LRU(kept)  # group owner -> the shared names already tagged

    async def run(self, engine: MemoryEngine, owner: str, shared: Set[str], senders: Mapping[str, str]) -> int:
        """Tag the group ``owner``'s bare notes and days of a name in
        ``shared`` (casefolded) not done yet. ``senders``: the batch's
        members, owner id -> platform sender id. How many rows changed."""
        done = self._done.get(owner, frozenset())
        due = {n for n in shared if n not in done}
        chat = chat_of(owner)
        if not due or chat is None:
            return 0
        prefix = f"{chat[0]}:"
        n = 0
        waiting: set[str] = set()  # names with a row no sender was found for: looked at again next batch
        async with engine.db.transaction() as conn:
            at = engine.now()
            for table in ("memories", "daily_events"):
                async with conn.execute(f"SELECT id, provenance FROM {table} WHERE owner = ? AND {_ONE_MEMBER}",
                                        (owner,)) as cur:
                    rows = list(await cur.fetchall())
                for row_id, raw in rows:
                    prov = json.loads(raw)
                    name, member = str(prov["said_by"][0]), str(prov["speakers"][0])
                    if _TAGGED.search(name) or name.casefold() not in due:
                        continue
                    sender = senders.get(member) or (member[len(prefix):] if member.startswith(prefix) else "")
                    if not sender:
                        waiting.add(name.casefold())  # known by another name only: a batch of theirs tags it
                        continue
                    await conn.execute(
                        f"UPDATE {table} SET provenance = json_set(provenance, '$.said_by[0]', ?) WHERE id = ?",
                        (f"{name} #{member_tag(sender)}", row_id))
                    if table == "memories":
                        await write_log(conn, at=at, job="extraction", owner=owner, action="retag", memory_id=row_id,
                                        detail={"field": "said_by", "why": "another member of the group has the name"})
                    n += 1
            if n:
                engine.db.bump(INDEX)  # recall reads the rows' provenance for its citations
        self._done[owner] = done | (due - waiting)
        if n:
            log.info("group notes tagged apart from a namesake", rows=n)
        return n
