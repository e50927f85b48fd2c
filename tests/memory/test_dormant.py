"""The work events of a project nobody has said anything about for
DORMANT_DAYS fade below the live ones (seed 000 §8: events decay to a
floor, never archived; memory/dormant.py). The year's walk had ~130
"worked on Atlas task N" lines of a project shipped in May recalled in
December beside the current project's."""

from __future__ import annotations

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.dormant import DORMANT_DAYS
from memory.retrieval import Retriever
from memory.service import SqliteMemory


def ev(project: str, content: str, category: Category = Category.EVENT) -> NewMemory:
    return NewMemory(owner="alice", content=content, category=category, importance=0.5, project=project, topic="work")


async def _year(engine: MemoryEngine, clock: ManualClock) -> tuple[int, int, int]:
    clock.set("2026-03-10T18:00:00Z")
    old = await engine.add(ev("atlas", "Alice worked on the export screen"))
    decided = await engine.add(NewMemory(owner="alice", content="For the export screen Alice picked CSV over Excel",
                                         category=Category.DECISION, importance=0.8, project="atlas"))
    clock.set("2026-12-20T18:00:00Z")
    new = await engine.add(ev("cirrus", "Alice worked on the export screen of the mobile app, offline mode"))
    clock.set("2027-01-01T12:00:00Z")
    return old.id, decided.id, new.id


async def test_a_dormant_projects_event_ranks_below_a_live_projects(engine: MemoryEngine, clock: ManualClock) -> None:
    old, decided, new = await _year(engine, clock)
    ranked = [h.id for h in await Retriever(engine).retrieve("alice", "How is the export screen work going?", limit=5)]
    assert ranked.index(new) < ranked.index(old), ranked
    assert decided in ranked  # a decision does not fade with its project's work


async def test_naming_the_project_or_saying_something_of_it_again_brings_its_events_back(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    old, _, new = await _year(engine, clock)
    named = [h.id for h in await Retriever(engine).retrieve("alice", "How did the Atlas export screen work go?")]
    assert named.index(old) < named.index(new), named
    clock.set("2026-12-30T18:00:00Z")  # a bug in the shipped Atlas: live again
    await engine.add(ev("atlas", "Alice fixed a crash in Atlas billing"))
    clock.set("2027-01-01T12:00:00Z")
    again = [h.id for h in await Retriever(engine).retrieve("alice", "How is the export screen work going?")]
    assert again.index(old) < again.index(new), again


async def test_a_fact_of_the_project_said_again_is_activity_too(engine: MemoryEngine, clock: ManualClock) -> None:
    # No new memory under Atlas, but the user restated its decision in
    # December (a 'reinforce' in the memory log): the project is live.
    old, decided, new = await _year(engine, clock)
    clock.set("2026-12-30T18:00:00Z")
    said = await SqliteMemory(engine).remember("alice", "For the export screen Alice picked CSV over Excel",
                                               provenance=Provenance(), category="decision", importance=0.8)
    assert said.id == decided  # reinforced, not a new memory
    clock.set("2027-01-01T12:00:00Z")
    again = [h.id for h in await Retriever(engine).retrieve("alice", "How is the export screen work going?")]
    assert again.index(old) < again.index(new), again


async def test_an_edit_or_an_old_reinforce_is_no_activity(engine: MemoryEngine, clock: ManualClock) -> None:
    # updated_at moves on any update (an edit, a relabel): not the user
    # speaking of the project. A reinforce older than DORMANT_DAYS is none either.
    old, decided, new = await _year(engine, clock)
    clock.set("2026-04-01T18:00:00Z")
    await SqliteMemory(engine).remember("alice", "For the export screen Alice picked CSV over Excel",
                                        provenance=Provenance(), category="decision", importance=0.8)
    clock.set("2026-12-30T18:00:00Z")
    await engine.update(decided, importance=0.9)
    clock.set("2027-01-01T12:00:00Z")
    ranked = [h.id for h in await Retriever(engine).retrieve("alice", "How is the export screen work going?")]
    assert ranked.index(new) < ranked.index(old), ranked


async def test_a_project_is_dormant_only_after_dormant_days_and_global_never(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    clock.set("2026-03-10T18:00:00Z")
    glob = await engine.add(ev("_global", "Alice worked on the export screen"))
    clock.set("2026-12-20T18:00:00Z")
    new = await engine.add(ev("cirrus", "Alice worked on the export screen of the mobile app, offline mode"))
    clock.set("2027-01-01T12:00:00Z")
    ranked = [h.id for h in await Retriever(engine).retrieve("alice", "How is the export screen work going?")]
    assert ranked.index(glob.id) < ranked.index(new.id), ranked  # no project: only the words and their age
    assert DORMANT_DAYS >= 30
