"""In a group, a recalled decision that replaced one said in that same
group shows it under it, dated and marked as no longer true, as the private
chat does: "what did we decide about the date?" is answered with the new
date and what it replaced (the group heard both). A replaced fact the group
may not read (said in private, in another group) stays out (memory/scope.py)."""

from __future__ import annotations

import pytest

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.service import SqliteMemory

FAMILY = ("telegram", "-100900")
ASKED = "what did we decide about the trip date?"


def _said(content: str, chat: tuple[str, str], group: bool = True) -> NewMemory:
    return NewMemory(owner="telegram:11", content=content, category=Category.DECISION, importance=0.8,
                     topic="trip", source_text=content,
                     provenance=Provenance(channel=chat[0], chat_id=chat[1], group=group))


async def _moved(engine: MemoryEngine, clock: ManualClock, first_in: tuple[str, str], group: bool) -> int:
    clock.set("2026-03-01T12:00:00Z")
    old = await engine.add(_said("The trip date is March 20 to 27", first_in, group))
    clock.set("2026-03-08T12:00:00Z")
    new = await engine.add(_said("The trip date is now March 28 to April 4", FAMILY))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    clock.set("2026-03-15T12:00:00Z")
    return new.id


async def test_a_group_reads_the_decision_it_heard_replaced_under_the_new_one(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    new = await _moved(engine, clock, FAMILY, True)
    hits = await SqliteMemory(engine).recall("telegram:11", ASKED, private=False, chat=FAMILY)
    assert hits and hits[0].id == new
    assert hits[0].replaced == ("2026-03-01", "The trip date is March 20 to 27")


@pytest.mark.parametrize("where, group", [(("telegram", "11"), False), (("telegram", "-100777"), True)],
                         ids=["private", "another-group"])
async def test_a_replaced_fact_said_elsewhere_stays_out_of_the_group(
    engine: MemoryEngine, clock: ManualClock, where: tuple[str, str], group: bool
) -> None:
    new = await _moved(engine, clock, where, group)
    hits = await SqliteMemory(engine).recall("telegram:11", ASKED, private=False, chat=FAMILY)
    assert hits and hits[0].id == new and hits[0].replaced is None
    # The private chat shows it, as before.
    mine = await SqliteMemory(engine).recall("telegram:11", ASKED)
    assert mine[0].id == new and mine[0].replaced == ("2026-03-01", "The trip date is March 20 to 27")
