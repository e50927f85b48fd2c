"""memory/sharing.py: what a member let into groups stays what they chose."""

from __future__ import annotations

from memory import Category, MemoryEngine, NewMemory
from memory.retrieval import Retriever
from memory.sharing import share, shared

GROUP = ("telegram", "-100123")


async def _group_reads(engine: MemoryEngine, text: str) -> bool:
    hits = await Retriever(engine).retrieve("alice", text, private=False, chat=GROUP)
    return any(text in h.content for h in hits)


async def test_a_shared_fact_made_a_credential_or_core_memory_is_no_longer_shared(engine: MemoryEngine) -> None:
    """Never read in a group as a credential or a profile entry, it kept
    ``provenance.shared`` all the same, and an edit back to an ordinary
    fact shared it again without anyone asking: the edit takes it back."""
    pin = await engine.add(NewMemory(owner="alice", content="alice's locker code is 4471"))
    nurse = await engine.add(NewMemory(owner="alice", content="alice works night shifts"))
    assert (await share(engine, "alice", [pin.id, nurse.id], None)).changed == [pin.id, nurse.id]
    assert await _group_reads(engine, "locker code")

    await engine.update(pin.id, category=Category.CREDENTIAL)
    await engine.update(nurse.id, tier=1)
    assert await shared(engine, "alice") == []
    await engine.update(pin.id, category=Category.EVENT)
    await engine.update(nurse.id, tier=2)
    assert await shared(engine, "alice") == []
    assert not await _group_reads(engine, "locker code") and not await _group_reads(engine, "night shifts")


async def test_an_ordinary_edit_keeps_what_is_shared(engine: MemoryEngine) -> None:
    m = await engine.add(NewMemory(owner="alice", content="alice is vegetarian"))
    await share(engine, "alice", [m.id], None)
    await engine.update(m.id, content="alice is vegan", importance=0.7, category=Category.IDENTITY)
    assert [s.id for s in await shared(engine, "alice")] == [m.id]
    assert await _group_reads(engine, "vegan")
