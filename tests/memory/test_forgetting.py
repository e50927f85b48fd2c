"""memory/forgetting.py: which stored lines go with an erased fact."""

from __future__ import annotations

from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.changelog import read_log
from memory.forgetting import erase_planned, plan_erasure, repeats_forgotten

FACT = "Alice's door code is 4711"
SOURCE = "remember that my door code is 4711 please"


def test_the_lines_a_fact_came_from_and_lines_repeating_it_go() -> None:
    texts = [SOURCE, FACT]
    assert repeats_forgotten("remember that  my door code is 4711 please", texts)  # whitespace aside
    assert repeats_forgotten("Saved: Alice's door code is 4711.", texts)  # repeats the fact word for word
    assert repeats_forgotten("remember that my door code", texts)  # a long part of the source


def test_short_or_unrelated_lines_stay() -> None:
    texts = [SOURCE, FACT]
    assert not repeats_forgotten("please", texts)  # inside the source, but a short line is not it
    assert not repeats_forgotten("what's the weather today?", texts)
    assert not repeats_forgotten("   ", texts)
    assert not repeats_forgotten("Alice's door code is", [])


async def test_a_plan_changes_nothing_and_its_erasure_logs_every_row(engine: MemoryEngine) -> None:
    old = await engine.add(NewMemory(owner="alice", content="Alice lives in Berlin", category=Category.IDENTITY))
    now = await engine.add(NewMemory(owner="alice", content="Alice lives in Munich", category=Category.IDENTITY))
    await engine.set_status(old.id, "superseded", superseded_by=now.id)
    entry = await engine.add(NewMemory(owner="alice", tier=1, content="Lives in Munich", category=Category.IDENTITY,
                                       provenance=Provenance(refs=("weekly", f"m:{now.id}"))))
    async with engine.db.transaction() as conn:
        plan = await plan_erasure(conn, "alice", [now])
    assert [m.id for m in plan.versions] == [old.id] and [m.id for m in plan.entries] == [entry.id]
    assert plan.memory_ids == [old.id, now.id, entry.id] and len(await engine.list_memories("alice", status=None)) == 3
    assert plan.texts() == ["Alice lives in Munich", "Alice lives in Berlin", "Lives in Munich"]

    async with engine.db.transaction() as conn:
        await erase_planned(engine, conn, plan, job="test", action="erase")
    assert await engine.list_memories("alice", status=None) == [] and await engine.profile("alice") == []
    logged = {x.memory_id: x.detail for x in await read_log(engine.db, job="test")}
    assert logged == {now.id: "", old.id: f'{{"with":[{now.id}]}}', entry.id: f'{{"with":[{now.id}]}}'}
