"""memory/sharing.py: what a member let into groups stays what they chose."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.retrieval import Retriever
from memory.sharing import share, shared

GROUP = ("telegram", "-100123")
PRIVATE = Provenance(channel="telegram", chat_id="42", group=False)


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


@pytest.mark.parametrize("candidates", [30, 1])
async def test_a_shared_fact_is_found_in_a_group_by_its_own_words_only(engine: MemoryEngine, candidates: int) -> None:
    """Indexed with the words it was drawn from (docs/RETRIEVAL.md §6a) and
    those of the fact it replaced, a shared fact matched a group's
    "sertraline" by the private message it came from: the group learnt
    that the member who is moving takes it. Elsewhere than its own chat
    it is found by what it says only. ``candidates=1``: the path that
    ranks by MATCH rather than reading the user's few rows whole."""
    old = await engine.add(NewMemory(owner="alice", content="alice lives in Shanghai", provenance=PRIVATE))
    moving = await engine.add(NewMemory(
        owner="alice", content="alice is moving to Berlin", provenance=PRIVATE,
        source_text="I take sertraline and I'm moving to Berlin, I'm scared"))
    await engine.set_status(old.id, "superseded", superseded_by=moving.id)
    for i in range(3):  # more rows than candidates
        await engine.add(NewMemory(owner="alice", content=f"alice note {i}", provenance=PRIVATE))
    here = await engine.add(NewMemory(
        owner="alice", content="alice brings the cake", source_text="I'll bake a lemon cake for friday",
        provenance=Provenance(channel=GROUP[0], chat_id=GROUP[1], group=True)))
    await share(engine, "alice", [moving.id], None)
    r = Retriever(engine, candidates=candidates)

    async def group(text: str) -> list[int]:
        return [h.id for h in await r.retrieve("alice", text, private=False, chat=GROUP)]

    assert await group("Berlin") == [moving.id]
    assert await group("sertraline") == []
    assert await group("Shanghai") == []
    assert await group("I'm so scared") == []  # the mood the source words named
    assert await group("lemon") == [here.id]  # a group's own fact keeps its source words there
    assert moving.id in [h.id for h in await r.retrieve("alice", "sertraline")]  # the owner's private chat


async def test_a_share_with_a_group_follows_it_to_its_new_id(engine: MemoryEngine) -> None:
    """Telegram upgrades a group to a supergroup (a new chat id): what was
    said there moves (MemoryEngine.move_chat), and so must what its members
    shared with it and where a group's newer fact stands for a shared one,
    or the shared fact is no longer read there, and the outdated one is."""
    old, new = ("telegram", "-500"), ("telegram", "-100500")
    only_there = await engine.add(NewMemory(owner="alice", content="alice bakes sourdough on Sundays",
                                            provenance=PRIVATE))
    everywhere = await engine.add(NewMemory(owner="alice", content="alice's team standup is at 9", provenance=PRIVATE))
    await share(engine, "alice", [only_there.id], old)
    await share(engine, "alice", [everywhere.id], None)
    newer = await engine.add(NewMemory(owner="alice", content="alice's team standup is at 10 now",
                                       provenance=Provenance(channel="telegram", chat_id="-500", group=True)))
    prov = (await engine.get_many([everywhere.id]))[everywhere.id].provenance
    async with engine.db.transaction() as conn:  # as consolidation records it (Consolidator._replace_in_group)
        await conn.execute("UPDATE memories SET provenance = ? WHERE id = ?",
                           (replace(prov, replaced_in=(("telegram:-500", newer.id),)).to_json(), everywhere.id))

    async def reads(chat: tuple[str, str], text: str) -> list[int]:
        return [h.id for h in await Retriever(engine).retrieve("alice", text, private=False, chat=chat)]

    assert only_there.id in await reads(old, "sourdough")
    assert (await reads(old, "team standup")) == [newer.id]
    await engine.move_chat("telegram", "-500", "-100500")
    assert only_there.id in await reads(new, "sourdough")
    assert (await reads(new, "team standup")) == [newer.id]
    moved = await engine.get_many([only_there.id, everywhere.id])
    assert moved[only_there.id].provenance.shared == ("telegram:-100500",)
    assert moved[everywhere.id].provenance.replaced_in == (("telegram:-100500", newer.id),)
