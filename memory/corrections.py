"""The facts a correction corrects, offered to the extraction by provenance.

An edited message already extracted is buffered again as ``(edited) <new
words>`` (memory/service.py, ``revise``), and the extraction prompt asks the
model to set ``updates`` on the fact it replaces. The model can name only
the facts it is shown, and candidates are found by the batch's words, a few
a line: among the user's facts sharing more of the correction's words than
the old fact does, the old fact was not shown and both stayed current
(found by scripts/walk_chaos.py). The fact drawn from the edited message is
known exactly, by the message id its provenance names, so it is shown first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .consolidate import CandidateSet
from .engine import MemoryEngine
from .service import EDITED_SUFFIX, original_message_id

__all__ = ["with_corrected"]

# The owner's current Tier 2 facts citing one platform message of one chat.
_CITING = """SELECT id FROM memories
    WHERE owner = ? AND status = 'active' AND tier = 2 AND json_valid(provenance)
      AND json_extract(provenance, '$.channel') = ? AND json_extract(provenance, '$.chat_id') = ?
      AND EXISTS (SELECT 1 FROM json_each(provenance, '$.message_ids') j WHERE j.value = ?)
    ORDER BY id"""


class Line(Protocol):
    @property
    def channel(self) -> str: ...
    @property
    def chat_id(self) -> str: ...
    @property
    def message_id(self) -> str: ...
    @property
    def role(self) -> str: ...


async def with_corrected(engine: MemoryEngine, owner: str, rows: Sequence[Line], cands: CandidateSet) -> CandidateSet:
    """``cands`` with the facts the batch's corrections correct first (each
    once); ``cands`` itself when the batch holds no correction."""
    ids: list[int] = []
    for r in rows:
        if r.role != "user" or not r.message_id.endswith(EDITED_SUFFIX):
            continue
        found = await engine.db.fetchall(_CITING, (owner, r.channel, r.chat_id, original_message_id(r.message_id)))
        ids += [int(row["id"]) for row in found if int(row["id"]) not in ids]
    if not ids:
        return cands
    mems = await engine.get_many(ids)
    first = [mems[i] for i in ids if i in mems]
    return CandidateSet((*first, *(m for m in cands.memories if m.id not in mems)))
