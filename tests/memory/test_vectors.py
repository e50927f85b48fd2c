"""memory/vectors.py and memory/vectorize.py on a real SQLite file, with
vectors from the fake OpenAI server's /v1/embeddings over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest

from memory.clock import ManualClock
from memory.embedding import CachedEmbedder, EmbeddingError, HttpEmbedder
from memory.engine import MemoryEngine
from memory.types import Category, NewMemory, Provenance
from memory.vectorize import Vectorizer
from memory.vectors import VectorIndex
from tests.fakes.openai_server import FakeOpenAI

CONCEPTS = {"automobile": "car", "vehicle": "car", "kitten": "cat"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_concepts=CONCEPTS) as server:
        yield server


@pytest.fixture
async def embedder(fake: FakeOpenAI, engine: MemoryEngine, clock: ManualClock) -> AsyncIterator[CachedEmbedder]:
    raw = HttpEmbedder(base_url=fake.url, api_key="", model="m1", timeout=2.0)
    try:
        yield CachedEmbedder(raw, engine.db, clock)
    finally:
        await raw.aclose()


async def add(engine: MemoryEngine, owner: str, content: str, **kw: object) -> int:
    return (await engine.add(NewMemory(owner=owner, content=content, **kw))).id  # type: ignore[arg-type]


async def vector_of(embedder: CachedEmbedder, text: str) -> np.ndarray:
    return (await embedder.embed([text], persist=False))[0]


async def test_pending_store_and_search_best_first(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    car = await add(engine, "alice", "alice drives a blue automobile")
    cat = await add(engine, "alice", "alice adopted a kitten in may")
    index = VectorIndex(engine.db, "m1")
    assert {p.memory_id for p in await index.pending()} == {car, cat}

    assert await Vectorizer(index, embedder).drain() == 2
    assert await index.pending() == []
    assert await index.count("alice") == 2

    hits = await index.search(["alice"], await vector_of(embedder, "what car do I have"), 5)
    assert [i for i, _ in hits] == [car, cat]
    assert hits[0][1] > hits[1][1]
    hits = await index.search(["alice"], await vector_of(embedder, "tell me about my cat"), 5)
    assert hits[0][0] == cat


async def test_one_users_vectors_never_answer_another(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    shared = await add(engine, "_global", "the office car park opens at seven")
    bob = await add(engine, "bob", "bob rides a bicycle")
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()
    hits = await index.search(["bob", "_global"], await vector_of(embedder, "which car do I drive"), 5)
    assert {i for i, _ in hits} == {bob, shared}


async def test_an_edited_memory_is_embedded_again(engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI) -> None:
    mid = await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder)
    await vz.drain()
    before = await index.search(["alice"], await vector_of(embedder, "my kitten"), 1)

    await engine.update(mid, content="alice adopted a kitten")
    assert [p.memory_id for p in await index.pending()] == [mid]
    await vz.drain()
    after = await index.search(["alice"], await vector_of(embedder, "my kitten"), 1)
    assert after[0][1] > before[0][1] + 0.3  # the cached matrix was rebuilt from the new vector
    assert fake.embedding_requests[-1] == ["alice adopted a kitten"]


async def test_archived_and_deleted_memories_leave_the_results_at_once(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    a = await add(engine, "alice", "alice drives a blue automobile")
    b = await add(engine, "alice", "alice sold her old vehicle")
    c = await add(engine, "alice", "alice rents a car on holidays")
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()
    q = await vector_of(embedder, "car")
    assert {i for i, _ in await index.search(["alice"], q, 5)} == {a, b, c}  # matrix now cached

    await engine.set_status(a, "archived")
    await engine.delete(b)
    assert [i for i, _ in await index.search(["alice"], q, 5)] == [c]
    assert await index.pending() == []  # nothing to embed for an archived memory
    assert await index.count() == 2  # the deleted memory's vector went with it


async def test_credentials_and_the_private_profile_stay_out_of_group_chats(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    group = Provenance(channel="telegram", chat_id="-5")
    secret = await add(engine, "alice", "the garage automobile code is 4711", category=Category.CREDENTIAL,
                       provenance=group)
    plain = await add(engine, "alice", "alice drives a blue automobile", provenance=group)
    told = await add(engine, "alice", "alice told me privately her automobile loan is late",
                     provenance=Provenance(channel="telegram", chat_id="100"))
    profile = await add(engine, "alice", "alice is selling her automobile quietly", tier=1)
    shared = await add(engine, "_global", "the office automobile pool", tier=1)
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()
    q = await vector_of(embedder, "automobile")
    owners = ["alice", "_global"]
    assert {i for i, _ in await index.search(owners, q, 5)} == {secret, plain, told, profile, shared}
    # A group reads what alice said there and the shared rows only (memory/scope.py).
    assert {i for i, _ in await index.search(owners, q, 5, private=False, chat=("telegram", "-5"))} == {plain, shared}
    assert {i for i, _ in await index.search(owners, q, 5, private=False)} == {shared}


async def test_min_similarity_and_k(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    ids = [await add(engine, "alice", f"alice automobile note {i}") for i in range(6)]
    other = await add(engine, "alice", "zebra quantum marmalade")
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()
    q = await vector_of(embedder, "automobile note")
    assert len(await index.search(["alice"], q, 3)) == 3
    found = {i for i, _ in await index.search(["alice"], q, 10, min_similarity=0.3)}
    assert found == set(ids) and other not in found


async def test_a_new_model_embeds_everything_again(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    await Vectorizer(VectorIndex(engine.db, "m1"), embedder).drain()
    other = VectorIndex(engine.db, "m2")
    assert len(await other.pending()) == 1
    assert await other.search(["alice"], await vector_of(embedder, "car"), 5) == []


async def test_a_failing_endpoint_writes_nothing_and_is_retried(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    mid = await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, interval=0.01, max_backoff=0.05)
    fake.queue_embedding_error(503, times=2)
    with pytest.raises(EmbeddingError):
        await vz.run_once()
    assert await index.count() == 0 and [p.memory_id for p in await index.pending()] == [mid]

    # The service keeps going: one more failure, then the retry succeeds.
    await vz.start()
    try:  # a bound for a loaded machine, not a timing: it ends once the vector is stored and
        # the service has taken the batch as a success (the store commits before run_once
        # returns, so the row can be seen while the failure count is not yet reset)
        for _ in range(3000):
            if await index.count() == 1 and vz.failures == 0:
                break
            await asyncio.sleep(0.01)
    finally:
        await vz.stop()
    assert await index.count() == 1
    assert vz.failures == 0 and vz.last_error == ""


async def test_a_memory_edited_while_embedding_is_not_stored_stale(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    mid = await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    todo = await index.pending()
    vectors = await embedder.embed([p.content for p in todo])
    await engine.update(mid, content="alice adopted a kitten")
    assert await index.store(list(zip(todo, vectors, strict=True))) == 0
    assert [p.content for p in await index.pending()] == ["alice adopted a kitten"]


async def test_the_matrix_cache_is_bounded_by_bytes(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    for owner in ("alice", "bob", "carol"):
        await add(engine, owner, f"{owner} drives a blue automobile")
    index = VectorIndex(engine.db, "m1", max_cached_mb=64 * 4 * 2 / 1e6)  # two owners' one 64-dim vector
    await Vectorizer(index, embedder).drain()
    q = await vector_of(embedder, "car")
    for owner in ("alice", "bob", "carol"):
        assert len(await index.search([owner], q, 5)) == 1
    assert index.cached_bytes == 2 * 64 * 4
    index.forget_cached()
    assert index.cached_bytes == 0


async def test_the_cache_keeps_what_is_written_lately(
    engine: MemoryEngine, embedder: CachedEmbedder, clock: ManualClock
) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, keep_days=90)
    await vz.drain()
    clock.advance(60 * 86400)
    await add(engine, "alice", "alice adopted a kitten")
    await vz.drain()
    clock.advance(40 * 86400)
    assert await vz.prune_cache() == 1  # the first text, 100 days unused
    rows = await engine.db.fetchall("SELECT count(*) FROM embedding_cache")
    assert rows[0][0] == 1
    assert await index.count() == 2  # the memories keep their vectors


async def test_the_service_prunes_after_a_good_pass(
    engine: MemoryEngine, embedder: CachedEmbedder, clock: ManualClock
) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()
    clock.advance(200 * 86400)
    vz = Vectorizer(index, embedder, interval=3600)
    await vz.start()
    try:
        for _ in range(200):
            if (await engine.db.fetchall("SELECT count(*) FROM embedding_cache"))[0][0] == 0:
                break
            await asyncio.sleep(0.01)
    finally:
        await vz.stop()
    assert (await engine.db.fetchall("SELECT count(*) FROM embedding_cache"))[0][0] == 0


async def test_a_text_the_endpoint_refuses_does_not_hold_back_the_others(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    ok1 = await add(engine, "alice", "alice drives a blue automobile")
    bad = await add(engine, "alice", "REFUSE this text")
    ok2 = await add(engine, "alice", "alice adopted a kitten")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder)
    original = embedder.inner.embed

    async def refusing(texts):  # type: ignore[no-untyped-def]
        if any("REFUSE" in t for t in texts):
            raise EmbeddingError("embeddings: HTTP 400: input rejected")
        return await original(texts)

    embedder.inner.embed = refusing  # type: ignore[method-assign]
    assert await vz.drain() == 2
    assert {p.memory_id for p in await index.pending()} == {bad}
    assert vz.refused[bad][1] == "embeddings: HTTP 400: input rejected"
    assert await vz.run_once() == 0  # skipped, not retried every pass

    await engine.update(bad, content="a text the endpoint takes")  # an edit tries again
    assert await vz.drain() == 1
    assert await index.count() == 3 and ok1 != ok2


async def test_a_down_endpoint_refuses_nothing_for_good(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    await add(engine, "alice", "alice adopted a kitten")
    vz = Vectorizer(VectorIndex(engine.db, "m1"), embedder)
    fake.queue_embedding_error(503)
    with pytest.raises(EmbeddingError):
        await vz.run_once()
    assert vz.refused == {}
    assert await vz.drain() == 2


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_a_down_or_limiting_endpoint_gets_one_request_per_try_not_one_per_memory(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI, status: int
) -> None:
    """Asking each memory alone is for a text the endpoint refuses; a 429
    or a 5xx is the endpoint's trouble, and 64 more requests (or 64
    timeouts) only deepen it."""
    for i in range(10):
        await add(engine, "alice", f"alice note number {i}")
    vz = Vectorizer(VectorIndex(engine.db, "m1"), embedder)
    fake.queue_embedding_error(status, times=50)
    with pytest.raises(EmbeddingError):
        await vz.run_once()
    assert len(fake.embedding_requests) == 1 and vz.refused == {}


async def test_a_hung_endpoint_costs_one_timeout_per_try(engine: MemoryEngine, fake: FakeOpenAI, clock: ManualClock) -> None:
    for i in range(5):
        await add(engine, "alice", f"alice note number {i}")
    async with HttpEmbedder(base_url=fake.url, api_key="", model="m1", timeout=0.2) as raw:
        vz = Vectorizer(VectorIndex(engine.db, "m1"), CachedEmbedder(raw, engine.db, clock))
        fake.embedding_delay = 1.0
        with pytest.raises(EmbeddingError, match="timeout"):
            await vz.run_once()
    assert len(fake.embedding_requests) == 1


async def test_the_sweep_reads_in_short_windows_and_misses_nothing(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    ids = [await add(engine, "alice", f"alice note number {i}") for i in range(7)]
    await engine.set_status(ids[1], "archived")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=3, window=2)
    assert await vz.run_once() == 3  # ids 1, 3, 4: across windows, skipping the archived one
    assert await vz.drain() == 3
    assert await index.pending() == [] and await index.count() == 6

    # An edit behind the sweep's position is found on the next pass (it wraps around).
    await engine.update(ids[0], content="alice note zero, edited")
    await add(engine, "alice", "alice note seven")
    assert await vz.drain() == 2
    assert await index.pending() == []
    assert sorted(fake.embedding_requests[-1]) == ["alice note seven", "alice note zero, edited"]
    assert await vz.run_once() == 0  # a whole sweep, each id read once


async def test_new_vectors_patch_the_cached_matrix_instead_of_a_reload(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    first = await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder)
    await vz.drain()
    q = await vector_of(embedder, "kitten")
    await index.search(["alice"], q, 5)
    cached = index._matrices["alice"]
    kittens = [await add(engine, "alice", f"alice adopted kitten number {i}") for i in range(40)]  # past the room
    await vz.drain()
    await engine.update(first, content="alice adopted a kitten today")
    await vz.drain()
    hits = await index.search(["alice"], q, 50)
    assert index._matrices["alice"] is cached  # patched, not read again
    assert {i for i, _ in hits} == {first, *kittens}
    assert cached.n == 41 and index.cached_bytes == cached.nbytes
    # What it holds is what a reload would read.
    index.forget_cached()
    again = await index.search(["alice"], q, 50)
    assert [(i, round(s, 5)) for i, s in again] == [(i, round(s, 5)) for i, s in hits]


async def test_warm_loads_the_most_recent_users_while_there_is_room(
    engine: MemoryEngine, embedder: CachedEmbedder, clock: ManualClock
) -> None:
    await add(engine, "alice", "alice drives a blue automobile")
    clock.advance(3600)
    await add(engine, "bob", "bob adopted a kitten")
    await Vectorizer(VectorIndex(engine.db, "m1"), embedder).drain()

    index = VectorIndex(engine.db, "m1")
    assert await index.warm() == 2 and index.cached_bytes == 2 * 64 * 4
    small = VectorIndex(engine.db, "m1", max_cached_mb=64 * 4 / 1e6)  # room for one
    assert await small.warm() == 1
    assert list(small._matrices) == ["bob"]  # the one active last
    assert [i for i, _ in await small.search(["alice"], await vector_of(embedder, "car"), 1)]  # the other loads on demand


async def test_a_large_users_matrix_loads_in_chunks(engine: MemoryEngine, embedder: CachedEmbedder) -> None:
    ids = [await add(engine, "alice", f"alice note {i}") for i in range(1203)]
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder, batch_size=512).drain()
    hits = await index.search(["alice"], await vector_of(embedder, "alice note 1202"), 1)
    assert hits[0][0] == ids[-1] and index._matrices["alice"].n == 1203


async def test_erased_and_overwritten_words_leave_the_embedding_cache(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    """The cache keeps a vector per text for up to 90 days; a vector can be
    inverted back to much of its text, so erasing a memory, editing its
    words away or forgetting a user takes the cached vectors too."""
    deleted = await add(engine, "alice", "alice's door code is 4711")
    edited = await add(engine, "alice", "alice's bank pin is 1234")
    await add(engine, "bob", "drives a blue automobile to work")
    await add(engine, "bob", "adopted a kitten in may")
    await add(engine, "carol", "drives a blue automobile to work")  # the same words as one of bob's
    index = VectorIndex(engine.db, "m1")
    await Vectorizer(index, embedder).drain()

    async def cached() -> set[str]:
        return {r[0] for r in await engine.db.reader.execute_fetchall("SELECT text_hash FROM embedding_cache")}

    from memory.embedding import text_hash

    assert len(await cached()) == 4  # bob's and carol's car share one row
    await engine.delete(deleted)
    await engine.update(edited, content="alice's bank pin is stored in her password manager")
    assert text_hash("alice's door code is 4711") not in await cached()
    assert text_hash("alice's bank pin is 1234") not in await cached()
    await engine.update(edited, importance=0.9)  # no new words: nothing else goes
    assert len(await cached()) == 2

    await Vectorizer(index, embedder).drain()  # the edited words get their vector
    await engine.forget_owner("bob")
    assert await cached() == {text_hash("alice's bank pin is stored in her password manager")}
    assert await index.pending() == []
    # carol's memory keeps its own vector and is still found by meaning.
    hits = await index.search(["carol"], await vector_of(embedder, "which car"), 5)
    assert len(hits) == 1 and await index.count("carol") == 1


async def _until(check: Callable[[], Awaitable[bool]], tries: int = 300) -> bool:
    for _ in range(tries):
        if await check():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_wake_embeds_new_memories_now_not_at_the_next_interval(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, interval=3600)

    async def one_embedded() -> bool:
        return await index.count() == 1

    async def failed() -> bool:
        return vz.failures == 1

    await vz.start()
    try:
        await asyncio.sleep(0.1)  # the first pass ran, found nothing, and waits an hour
        await add(engine, "alice", "alice drives a blue automobile")
        await asyncio.sleep(0.1)
        assert await index.count() == 0
        vz.wake()
        assert await _until(one_embedded)

        # After a failure the backoff holds: a wake does not hammer a down endpoint.
        fake.queue_embedding_error(503, times=1)
        await add(engine, "alice", "alice adopted a kitten")
        vz.wake()
        assert await _until(failed)
        sent = len(fake.embedding_requests)
        vz.wake()
        await asyncio.sleep(0.2)
        assert len(fake.embedding_requests) == sent and await index.count() == 1
    finally:
        await vz.stop()


async def test_a_memory_erased_while_it_is_embedded_leaves_no_vector_in_the_cache(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """The erasure dropped the cached vector before the vectorizer's answer
    came; the answer then wrote it to the cache (kept up to 90 days, and
    invertible to much of the erased text)."""
    from memory.embedding import text_hash

    secret = await add(engine, "alice", "alice's door code is 4711")
    kept = await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    fake.embedding_delay = 0.5
    embedding = asyncio.create_task(Vectorizer(index, embedder).run_once())
    async with asyncio.timeout(5):
        while not fake.embedding_requests:
            await asyncio.sleep(0.01)
    await engine.delete(secret)
    await engine.purge_erased()
    assert await asyncio.wait_for(embedding, 5) == 2
    cached = {r[0] for r in await engine.db.reader.execute_fetchall("SELECT text_hash FROM embedding_cache")}
    assert text_hash("alice's door code is 4711") not in cached
    assert text_hash("alice drives a blue automobile") in cached and await index.count("alice") == 1
    assert await index.pending() == [] and kept


async def test_an_erased_or_reworded_memorys_vector_leaves_the_cached_matrix_at_once(
    engine: MemoryEngine, embedder: CachedEmbedder, clock: ManualClock, tmp_path: Path
) -> None:
    texts = ["alice drives a blue automobile", "alice sold her old vehicle", "alice rents a car on holidays",
             "alice adopted a kitten"]
    ids = [await add(engine, "alice", t) for t in texts]
    index = VectorIndex(engine.db, "m1")
    engine.on_erased(index.drop)  # as HybridRetriever wires it
    await Vectorizer(index, embedder).drain()
    q = await vector_of(embedder, "car")
    await index.search(["alice"], q, 5)
    cached = index._matrices["alice"]
    erased = cached.vectors[cached.ids.tolist().index(ids[0])].copy()

    await engine.delete(ids[0])
    await engine.purge_erased()
    assert index._matrices["alice"] is cached and sorted(cached.ids.tolist()) == ids[1:]
    # Not in the buffer at all, not even past the rows in use.
    assert not any(np.allclose(row, erased) for row in cached._vectors)
    hits = await index.search(["alice"], q, 5)
    index.forget_cached()
    assert [(i, round(s, 5)) for i, s in await index.search(["alice"], q, 5)] == [(i, round(s, 5)) for i, s in hits]

    # Reworded (an edit can be a redaction): the old words' vector leaves RAM and the file; the new one follows.
    cached = index._matrices["alice"]
    await engine.update(ids[1], content="alice adopted a second kitten")
    await engine.purge_erased()
    assert ids[1] not in cached.ids.tolist() and await index.count("alice") == 2
    assert [p.memory_id for p in await index.pending()] == [ids[1]]

    # Erased by another process (the CLI), which cannot reach this one's matrices: dropped when next met.
    other = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        await other.delete(ids[2])
        await other.purge_erased()
    finally:
        await other.close()
    assert ids[2] in cached.ids.tolist()
    assert ids[2] not in [i for i, _ in await index.search(["alice"], q, 5)]
    assert cached.ids.tolist() == [ids[3]]


class _PausedLoad(VectorIndex):
    """The real index, its load held at the start until told to go on, so a
    store can land while it is under way."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.hold = asyncio.Event()
        self.loading = asyncio.Event()
        self.hold.set()

    async def _load(self, owner: str):  # type: ignore[no-untyped-def]
        self.loading.set()
        await self.hold.wait()
        return await super()._load(owner)


async def test_per_owner_store_counts_are_kept_only_while_a_load_races_them(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    # A count per owner ever embedded was kept for good: thousands over months.
    for i in range(12):
        await add(engine, f"user{i}", f"user{i} drives a blue automobile")
    index = _PausedLoad(engine.db, "m1")
    assert await Vectorizer(index, embedder).drain() == 12
    for i in range(12):
        assert len(await index.search([f"user{i}"], await vector_of(embedder, "car"), 5)) == 1
    assert index._generation == {}

    # A store while alice's matrix loads: that load answers its search but is not kept.
    await add(engine, "alice", "alice adopted a kitten in may")
    await Vectorizer(index, embedder).drain()
    index.forget_cached()
    index.hold.clear()
    index.loading.clear()
    search = asyncio.create_task(index.search(["alice"], await vector_of(embedder, "cat"), 5))
    await index.loading.wait()
    car = await add(engine, "alice", "alice drives a red automobile")
    assert await Vectorizer(index, embedder).drain() == 1
    index.hold.set()
    await search
    assert "alice" not in index._matrices  # raced a store: not cached
    hits = await index.search(["alice"], await vector_of(embedder, "car"), 5)
    assert hits[0][0] == car and "alice" in index._matrices
    assert index._generation == {}


async def test_vectors_of_another_size_under_the_same_name_are_redone(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """A database where vectors of the old size were stored under the new
    size's name (before the cache was keyed by size) is repaired: the
    index knows the size asked for, and the vectorizer the size served."""
    car = await add(engine, "alice", "alice drives a blue automobile")
    await Vectorizer(VectorIndex(engine.db, "m1@32"), embedder).drain()  # 64 stored as "@32"
    index = VectorIndex(engine.db, "m1@32", dimension=32)
    assert [p.memory_id for p in await index.pending()] == [car]
    # Without a size configured, the endpoint's answer tells it.
    fake.embedding_dim = 16
    plain = VectorIndex(engine.db, "m1@32")
    vz = Vectorizer(plain, embedder)
    assert await plain.pending() == []
    await vector_of(embedder, "a question the endpoint answers at 16")
    assert await vz.drain() == 1
    hits = await plain.search(["alice"], await vector_of(embedder, "which vehicle"), 3)
    assert [i for i, _ in hits] == [car]


async def test_a_backfill_says_in_the_log_when_it_starts_and_when_it_is_done(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    """Hybrid recall turned on for a gateway with many memories: the log
    says the backfill started, and when every memory has its vector."""
    from structlog.testing import capture_logs

    for i in range(150):
        await add(engine, "alice", f"alice note number {i}")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=64, interval=3600)
    with capture_logs() as logs:
        await vz.start()
        try:
            assert await _until(lambda: _said(logs, "memories embedded"))
            await add(engine, "alice", "one more note")  # an ordinary write later: no backfill lines
            vz.wake()
            assert await _until(lambda: _count(index, 151))
        finally:
            await vz.stop()
    said = [(e["event"], e.get("memories")) for e in logs if e["log_level"] == "info"]
    assert said == [("embedding memories in the background", None), ("memories embedded", 150)]


async def _said(logs: list[dict[str, object]], event: str) -> bool:
    return any(e["event"] == event for e in logs)


async def _count(index: VectorIndex, n: int) -> bool:
    return await index.count() == n


async def test_a_stray_vector_row_never_shows_another_users_memory(
    engine: MemoryEngine, embedder: CachedEmbedder
) -> None:
    """Defence in depth: if ``memory_vectors`` held a row filed under alice
    whose memory is bob's (a hand edit, a merge another process made while
    this one's matrices were cached), alice's search must not return it, in
    a private chat nor in a group both of them are in."""
    group = Provenance(channel="telegram", chat_id="-5")
    mine = await add(engine, "alice", "alice drives a blue automobile", provenance=group)
    bobs = await add(engine, "bob", "bob hides his automobile key under the mat", provenance=group)
    elsewhere = await add(engine, "alice", "alice's automobile loan is late",
                          provenance=Provenance(channel="telegram", chat_id="-9"))
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder)
    await vz.drain()
    await engine.db.write("UPDATE memory_vectors SET owner = 'alice' WHERE memory_id = ?", (bobs,))
    index.forget_cached()
    q = await vector_of(embedder, "automobile key")
    owners = ["alice", "_global"]
    assert {i for i, _ in await index.search(owners, q, 5)} == {mine, elsewhere}
    assert {i for i, _ in await index.search(owners, q, 5, private=False, chat=("telegram", "-5"))} == {mine}
    # The stray row is not searched again from the cache, and the
    # vectorizer files it under its owner again.
    assert bobs not in {int(i) for i in index._matrices["alice"].ids}
    assert [p.memory_id for p in await index.pending()] == [bobs]
    assert await vz.drain() == 1
    assert {i for i, _ in await index.search(["bob"], q, 5)} == {bobs}
    assert {i for i, _ in await index.search(owners, q, 5)} == {mine, elsewhere}


async def test_a_users_query_waits_behind_a_few_memories_not_a_backfill_batch(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """On a one-worker endpoint (Ollama's default, scripts/embed_server.py)
    a query vector waits for the batch being embedded: 64 memories are
    0.7 s of a small local model, past the 500 ms queryTimeout. Once a
    query has reached the endpoint, the backfill's batches are small
    (whatever the endpoint's time per memory allows: ``batch_seconds`` is
    left out of it here)."""
    fake.embedding_serial = True
    fake.embedding_per_text = 0.01
    for i in range(120):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=64, busy_batch_size=8, batch_seconds=60.0)

    async def three_requests() -> bool:
        return len(fake.embedding_requests) >= 3

    async def all_embedded() -> bool:
        return await index.count() == 120

    await vz.start()
    try:
        assert await _until(three_requests)  # the third batch, 32 memories, is being embedded
        await asyncio.wait_for(embedder.embed(["which car do I drive"], persist=False), 10)
        asked = len(fake.embedding_requests)

        async def next_batch() -> bool:
            return len(fake.embedding_requests) > asked

        assert await _until(next_batch)  # the backfill goes on
        await asyncio.wait_for(embedder.embed(["and my kitten?"], persist=False), 10)
        assert await _until(all_embedded, tries=1000)
    finally:
        await vz.stop()
    first_q = fake.embedding_requests.index(["which car do I drive"])
    second_q = fake.embedding_requests.index(["and my kitten?"])
    # No user was asking: batches grow (from 8, doubling) toward 64.
    assert [len(r) for r in fake.embedding_requests[:3]] == [8, 16, 32]
    assert fake.embedding_waited[first_q] <= 64  # that batch was already out
    assert fake.embedding_waited[second_q] <= 8
    assert all(len(r) <= 8 for r in fake.embedding_requests[first_q + 1:])


async def test_the_first_query_after_silence_waits_behind_a_few_memories_not_a_full_batch(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """No one has asked for a while, so the backfill is not in its "busy"
    mode: a user's first query still must not queue behind 64 memories on
    a one-worker endpoint (0.7 s of a small local model). The backfill's
    batches are sized by how long the endpoint takes per memory, so each
    holds it about ``batch_seconds`` (10 ms a text, 0.2 s: ~20)."""
    fake.embedding_serial = True
    fake.embedding_per_text = 0.01
    for i in range(200):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=64, busy_batch_size=8, batch_seconds=0.2)

    async def some_batches() -> bool:
        return len(fake.embedding_requests) >= 3

    async def all_embedded() -> bool:
        return await index.count() == 200

    await vz.start()
    try:
        assert await _until(some_batches, tries=1000)
        await asyncio.wait_for(embedder.embed(["which car do I drive"], persist=False), 10)
        assert await _until(all_embedded, tries=2000)
    finally:
        await vz.stop()
    q = fake.embedding_requests.index(["which car do I drive"])
    assert fake.embedding_waited[q] <= 32  # ~20, with room for a loaded box's noise
    assert max(len(r) for r in fake.embedding_requests[:q]) <= 32  # never a 64 in flight


async def test_a_fast_endpoint_still_gets_full_batches(engine: MemoryEngine, embedder: CachedEmbedder,
                                                       fake: FakeOpenAI) -> None:
    """Sizing batches by time costs a fast (or parallel, remote) endpoint
    nothing: the batches grow to ``batch_size``."""
    for i in range(300):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=64, batch_seconds=30.0)
    assert await vz.drain() == 300
    assert max(len(r) for r in fake.embedding_requests) == 64


async def test_the_write_paths_query_vectors_do_not_slow_the_backfill(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """Extraction's candidate search (``HybridRetriever.prepare``) asks for
    vectors on the read path's terms (never persisted), but no user waits
    for them: the backfill keeps its full batches."""
    from memory.hybrid import HybridRetriever
    from memory.retrieval import Retriever

    for i in range(300):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    index = VectorIndex(engine.db, "m1")
    h = HybridRetriever(Retriever(engine), index, embedder)
    vz = Vectorizer(index, embedder, batch_size=64, busy_batch_size=8, batch_seconds=30.0)
    await h.prepare(["I got my car washed", "my kitten is ill"])
    assert len(fake.embedding_requests) == 1  # the write path's one request
    assert await vz.drain() == 300
    assert max(len(r) for r in fake.embedding_requests[1:]) == 64
    # A user's query does make them small.
    for i in range(300, 400):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    await h.retrieve("alice", "which car do I drive")
    asked = len(fake.embedding_requests)
    assert await vz.drain() == 100
    assert max(len(r) for r in fake.embedding_requests[asked:]) == 8


_OTHER_PROCESS = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from memory.clock import ManualClock
from memory.engine import MemoryEngine
from memory.types import NewMemory
async def main():
    eng = await MemoryEngine.open(sys.argv[2], ManualClock("2026-03-01T12:00:00Z"))
    try:
        await eng.add(NewMemory(owner="alice", content="alice keeps bees on the roof"))
    finally:
        await eng.close()
asyncio.run(main())
"""


async def test_a_memory_another_process_adds_is_embedded_promptly(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """`myclaw memory add` runs in a process of its own and cannot wake the
    gateway's vectorizer: its commit is noticed on the vectorizer's cheap
    tick (``PRAGMA data_version``), not an interval later."""
    import subprocess
    import sys

    await add(engine, "alice", "alice drives a blue automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, interval=3600, tick=0.05)

    async def embedded(n: int) -> bool:
        return await index.count() == n

    await vz.start()
    try:
        assert await _until(lambda: embedded(1))
        await asyncio.sleep(0.2)  # idle now, for an hour
        root = str(Path(__file__).resolve().parents[2])
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _OTHER_PROCESS, root, str(engine.db.path),
                                                    stderr=subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert await _until(lambda: embedded(2), tries=500)
        # Nothing else written: the ticks send nothing.
        sent = len(fake.embedding_requests)
        await asyncio.sleep(0.3)
        assert len(fake.embedding_requests) == sent
    finally:
        await vz.stop()


async def test_a_remote_endpoints_round_trip_does_not_make_the_batches_small(
    engine: MemoryEngine, embedder: CachedEmbedder, fake: FakeOpenAI
) -> None:
    """A remote endpoint takes 300 ms whatever the batch (its round trip),
    and serves requests in parallel: the round trip is not time per memory,
    and the batches still grow to ``batch_size``."""
    fake.embedding_delay = 0.3
    for i in range(300):
        await add(engine, "alice", f"alice's note number {i} about her automobile")
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, embedder, batch_size=64, batch_seconds=0.2)
    assert await asyncio.wait_for(vz.drain(), 60) == 300
    assert max(len(r) for r in fake.embedding_requests) == 64
