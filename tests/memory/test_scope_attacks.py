"""Another user's rows never reach the asking user's recall, whatever the
retriever's caches say (an adversarial review: one user's memories never
reach another user's prompt)."""

from __future__ import annotations

import pytest

from memory import ManualClock, MemoryEngine, NewMemory, retrieval
from memory.retrieval import Retriever


async def test_a_stale_count_of_the_users_rows_never_lets_another_users_rows_in(
    engine: MemoryEngine, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A personal gateway: Alice's rows are the whole index, and in a large
    # collection the document counts (her owner token's too) are cached
    # until it grows or shrinks by 2 %. Then a second user arrives while
    # Alice's facts are replaced: the size stays, the cached count says
    # every row is still hers.
    monkeypatch.setattr(retrieval, "DF_CACHE_MIN_ROWS", 10)  # the cache a 5,000-row index gets
    alice = await engine.add_many(
        (NewMemory(owner="telegram:7", content=f"garden diary entry {i}: tomatoes need water"), None) for i in range(40))
    r = Retriever(engine, candidates=5)
    assert (await r.retrieve("telegram:7", "what about the garden?", limit=5))
    await engine.set_status(alice[0], "archived")
    bob = await engine.add(NewMemory(owner="telegram:8", content="Bob's garden shed code is 4417"))
    hits = await r.retrieve("telegram:7", "what about the garden shed code?", limit=10)
    assert bob.id not in {h.id for h in hits}
    assert {h.id for h in hits} <= set(alice[1:]) and len(hits) == 5  # hers, as many as asked
    events = await r.search_events("telegram:7", "garden shed code", limit=10)
    assert all(h.id != bob.id for h in events)


async def test_a_stale_count_never_lets_another_users_summaries_into_an_event_search(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same for Tier 3 (memory_search and /memory read them in a private chat).
    monkeypatch.setattr(retrieval, "DF_CACHE_MIN_ROWS", 10)
    alice = [(await engine.add_event("telegram:7", f"2026-02-{1 + i % 28:02d}", f"talked about the garden, day {i}")).id
             for i in range(40)]
    r = Retriever(engine, candidates=5)
    assert await r.search_events("telegram:7", "garden", limit=5)
    await engine.delete_event(alice[0])
    bob = await engine.add_event("telegram:8", "2026-02-27", "Bob told the garden shed code 4417")
    hits = await r.search_events("telegram:7", "garden shed code", limit=10)
    assert bob.id not in {h.id for h in hits}
    assert {h.id for h in hits} <= set(alice[1:]) and len(hits) == 5
