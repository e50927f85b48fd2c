"""memory/embedding.py over real HTTP (the fake OpenAI server) and a real
SQLite file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

from memory.clock import ManualClock
from memory.db import Database
from memory.embedding import (
    MAX_TEXT_CHARS,
    CachedEmbedder,
    EmbeddingError,
    HttpEmbedder,
    blob_to_vector,
    text_hash,
    vector_to_blob,
)
from memory.schema import MIGRATIONS
from aiohttp import web

from tests.fakes.openai_server import FakeOpenAI, embedding_tokens, fake_embedding

KEY = "sk-test-embed-0123456789"
CONCEPTS = {"automobile": "car", "vehicle": "car", "汽车": "car"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY, embedding_concepts=CONCEPTS) as server:
        yield server


@pytest.fixture
async def embedder(fake: FakeOpenAI) -> AsyncIterator[HttpEmbedder]:
    emb = HttpEmbedder(base_url=fake.url, api_key=KEY, model="embed-model", timeout=2.0, batch_size=4)
    try:
        yield emb
    finally:
        await emb.aclose()


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    d = await Database.open(tmp_path / "memory.db", MIGRATIONS)
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
def cached(embedder: HttpEmbedder, db: Database, clock: ManualClock) -> CachedEmbedder:
    return CachedEmbedder(embedder, db, clock)


def files(db: Database) -> list[bytes]:
    """The database file and its WAL, byte for byte: any write changes the WAL."""
    return [p.read_bytes() for p in (db.path, db.path.with_name(db.path.name + "-wal")) if p.exists()]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))  # both unit length


async def rows(db: Database) -> list[tuple[str, str, int, str, str]]:
    return [
        (r["text_hash"], r["model"], r["dimension"], r["created_at"], r["last_used_at"])
        for r in await db.fetchall("SELECT * FROM embedding_cache ORDER BY text_hash")
    ]


@pytest.fixture
async def canned() -> AsyncIterator[Canned]:
    server = Canned()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Canned:
    """A loopback server answering every request with one set response, for
    answers the fake OpenAI server never gives (out of order, broken)."""

    def __init__(self) -> None:
        self.status = 200
        self.body: bytes = b"{}"
        self._runner: web.AppRunner | None = None
        self.port = 0

    def json(self, obj: object, status: int = 200) -> None:
        self.status, self.body = status, json.dumps(obj).encode()

    async def _handle(self, request: web.Request) -> web.Response:
        return web.Response(status=self.status, body=self.body, content_type="application/json")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def embedder(self, api_key: str = "") -> HttpEmbedder:
        return HttpEmbedder(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=api_key, model="m")


# -- helpers -----------------------------------------------------------------


def test_blob_round_trip_is_float32_little_endian() -> None:
    v = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    blob = vector_to_blob(v)
    assert blob == np.array([1.5, -2.0, 0.25], dtype="<f4").tobytes() and len(blob) == 12
    back = blob_to_vector(blob)
    assert back.dtype == np.float32 and back.flags.writeable and np.array_equal(back, v)
    assert vector_to_blob(np.array([1.0, 2.0])) == np.array([1.0, 2.0], dtype="<f4").tobytes()  # float64 in
    with pytest.raises(ValueError):
        blob_to_vector(b"abc")
    with pytest.raises(ValueError):
        vector_to_blob(np.zeros((2, 2)))


def test_text_hash_is_sha256_of_exact_text() -> None:
    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_hash("用户") != text_hash("用户 ") and len(text_hash("")) == 64


def test_fake_tokens_words_and_cjk_bigrams() -> None:
    assert embedding_tokens("Hello, World!") == ["hello", "world"]
    assert embedding_tokens("我喜欢咖啡 ok") == ["我喜", "喜欢", "欢咖", "咖啡", "ok"]
    assert embedding_tokens("用pnpm管理") == ["用", "pnpm", "管理"]
    assert embedding_tokens("  ...  ") == []
    assert fake_embedding("...", 16) == fake_embedding("", 16)


# -- HttpEmbedder ------------------------------------------------------------


async def test_embeds_in_order_normalised_with_auth(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    texts = ["the car", "a banana", "我喜欢咖啡"]
    vectors = await embedder.embed(texts)
    assert fake.embedding_requests == [texts]
    assert len(vectors) == 3
    for text, v in zip(texts, vectors, strict=True):
        assert v.dtype == np.float32 and v.shape == (64,)
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
        assert np.allclose(v, fake_embedding(text, 64, CONCEPTS), atol=1e-6)
    assert await embedder.embed([]) == [] and len(fake.embedding_requests) == 1


async def test_batches_into_several_requests(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    texts = [f"text number {i}" for i in range(10)]
    vectors = await embedder.embed(texts)
    assert [len(r) for r in fake.embedding_requests] == [4, 4, 2]
    assert sum(fake.embedding_requests, []) == texts
    assert all(np.allclose(v, fake_embedding(t, 64)) for t, v in zip(texts, vectors, strict=True))


async def test_results_are_ordered_by_index_not_position(canned: Canned) -> None:
    # A server may answer out of order; the index says which input is which.
    data = [{"object": "embedding", "index": i, "embedding": [0.0] * i + [2.0] + [0.0] * (2 - i)} for i in (2, 0, 1)]
    canned.json({"object": "list", "data": data, "model": "m"})
    async with canned.embedder() as emb:
        vectors = await emb.embed(["a", "b", "c"])
    assert [int(np.argmax(v)) for v in vectors] == [0, 1, 2]
    assert all(float(v.max()) == 1.0 for v in vectors)


async def test_paraphrases_through_concepts_are_close(embedder: HttpEmbedder) -> None:
    car, auto, banana, zh = await embedder.embed(["car", "automobile", "banana", "汽车"])
    assert cos(car, auto) > cos(car, banana)
    assert cos(car, auto) == pytest.approx(1.0) and cos(car, zh) == pytest.approx(1.0)
    mine, theirs, fruit = await embedder.embed(["I drive my car daily", "I drive an automobile", "I eat a banana daily"])
    assert cos(mine, theirs) > cos(mine, fruit)


async def test_wrong_key_is_an_error_without_the_key(fake: FakeOpenAI) -> None:
    bad = "sk-wrong-key-999999"
    async with HttpEmbedder(base_url=fake.url, api_key=bad, model="m") as emb:
        with pytest.raises(EmbeddingError, match="HTTP 401") as exc:
            await emb.embed(["x"])
    assert bad not in str(exc.value)


async def test_server_error_is_an_embedding_error(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    fake.queue_embedding_error(500)
    with pytest.raises(EmbeddingError, match="HTTP 500") as exc:
        await embedder.embed(["hello"])
    assert KEY not in str(exc.value) and "server had an error" in str(exc.value)
    assert len(await embedder.embed(["hello"])) == 1  # only once


async def test_key_echoed_in_error_body_is_masked(canned: Canned) -> None:
    canned.json({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status=401)
    async with canned.embedder(KEY) as emb:
        with pytest.raises(EmbeddingError) as exc:
            await emb.embed(["x"])
    assert KEY not in str(exc.value) and "***" in str(exc.value)


async def test_timeout_and_connection_errors(fake: FakeOpenAI) -> None:
    fake.embedding_delay = 1.0
    async with HttpEmbedder(base_url=fake.url, api_key=KEY, model="m", timeout=0.1) as emb:
        with pytest.raises(EmbeddingError, match="timeout"):
            await emb.embed(["slow"])
    port = fake.port
    await fake.stop()
    async with HttpEmbedder(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, model="m") as emb:
        with pytest.raises(EmbeddingError, match="transport"):
            await emb.embed(["nobody home"])


async def test_dimensions_are_sent_and_checked(fake: FakeOpenAI) -> None:
    async with HttpEmbedder(base_url=fake.url, api_key=KEY, model="m", dimensions=32) as emb:
        (v,) = await emb.embed(["short"])
    assert v.shape == (32,)
    assert fake.embedding_requests == [["short"]]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([{"index": 0, "embedding": [1.0, 0.0]}], "indexes"),  # one vector for two inputs
        ([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0]}], "different dimensions"),
        ([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [0.0, 0.0]}], "zero vector"),
        ([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": []}], "non-empty"),
        ([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": "AAAA"}], "not float32"),  # base64 of 3 bytes
        ([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [0.0, 1.0]}], "indexes"),
        ("nope", "not an embeddings response"),
    ],
)
async def test_unusable_answers_are_errors(canned: Canned, data: object, match: str) -> None:
    canned.json({"object": "list", "data": data})
    async with canned.embedder() as emb:
        with pytest.raises(EmbeddingError, match=match):
            await emb.embed(["a", "b"])


async def test_nan_in_answer_is_an_error(canned: Canned) -> None:
    canned.body = b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}'
    async with canned.embedder() as emb:
        with pytest.raises(EmbeddingError, match="non-finite"):
            await emb.embed(["a"])


async def test_long_texts_are_cut_and_passed_client_is_left_open(fake: FakeOpenAI) -> None:
    async with httpx.AsyncClient() as client:
        emb = HttpEmbedder(base_url=fake.url + "/", api_key=KEY, model="m", client=client)
        await emb.embed(["word " * 5000])
        await emb.aclose()
        assert not client.is_closed
    assert len(fake.embedding_requests[0][0]) == MAX_TEXT_CHARS


# -- the fake endpoint ---------------------------------------------------------


async def test_fake_endpoint_speaks_openai_format(fake: FakeOpenAI) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=fake.url, headers=headers) as client:
        r = await client.post("/embeddings", json={"model": "m", "input": "one string"})
        body = r.json()
        assert r.status_code == 200 and body["object"] == "list" and body["model"] == "m"
        assert body["data"][0]["object"] == "embedding" and body["data"][0]["index"] == 0
        assert body["usage"] == {"prompt_tokens": 2, "total_tokens": 2}
        assert fake.embedding_requests == [["one string"]]
        for bad in ({"model": "m", "input": []}, {"model": "m", "input": [1, 2]}, {"input": ["x"]}):
            r = await client.post("/embeddings", json=bad)
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        r = await client.post("/embeddings", json={"model": "m", "input": ["x"]}, headers={"Authorization": "Bearer no"})
        assert r.status_code == 401
    assert len(fake.embedding_requests) == 1


# -- CachedEmbedder ----------------------------------------------------------------


async def test_second_call_sends_nothing(fake: FakeOpenAI, cached: CachedEmbedder, db: Database) -> None:
    first = await cached.embed(["alpha", "beta", "alpha"])
    assert fake.embedding_requests == [["alpha", "beta"]]  # deduped
    assert np.array_equal(first[0], first[2])
    assert len(await rows(db)) == 2
    second = await cached.embed(["beta", "alpha"])
    assert len(fake.embedding_requests) == 1
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[1], first[0])
    # Only the misses go out, in one call.
    await cached.embed(["alpha", "gamma", "delta", "beta"])
    assert fake.embedding_requests[1:] == [["gamma", "delta"]]


async def test_cache_survives_a_new_embedder(fake: FakeOpenAI, embedder: HttpEmbedder, db: Database, clock: ManualClock) -> None:
    a = await CachedEmbedder(embedder, db, clock).embed(["persisted text"])
    b = await CachedEmbedder(embedder, db, clock).embed(["persisted text"])
    assert len(fake.embedding_requests) == 1 and np.array_equal(a[0], b[0])


async def test_hits_bump_last_used(fake: FakeOpenAI, cached: CachedEmbedder, db: Database, clock: ManualClock) -> None:
    await cached.embed(["one", "two"])
    clock.advance(timedelta(days=3))
    await cached.embed(["one", "three"])
    by_hash = {r[0]: r for r in await rows(db)}
    assert by_hash[text_hash("one")][3:] == ("2026-03-01T12:00:00Z", "2026-03-04T12:00:00Z")
    assert by_hash[text_hash("two")][3:] == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z")
    assert by_hash[text_hash("three")][3:] == ("2026-03-04T12:00:00Z", "2026-03-04T12:00:00Z")


async def test_read_path_writes_nothing(fake: FakeOpenAI, cached: CachedEmbedder, db: Database, clock: ManualClock) -> None:
    await cached.embed(["stored"])
    clock.advance(timedelta(days=1))
    before = files(db)
    q = await cached.embed(["what did I say?", "stored"], persist=False)
    assert files(db) == before
    assert [r[0] for r in await rows(db)] == [text_hash("stored")]
    assert (await rows(db))[0][4] == "2026-03-01T12:00:00Z"  # not bumped either
    # The query's vector is kept in process: asked again, nothing is sent.
    again = await cached.embed(["what did I say?"], persist=False)
    assert len(fake.embedding_requests) == 2 and np.array_equal(again[0], q[0])
    # The write path later finds it in the LRU and stores it then.
    await cached.embed(["what did I say?"])
    assert len(fake.embedding_requests) == 2 and len(await rows(db)) == 2


async def test_lru_is_bounded(fake: FakeOpenAI, embedder: HttpEmbedder, db: Database, clock: ManualClock) -> None:
    cached = CachedEmbedder(embedder, db, clock, memory_items=2)
    await cached.embed(["a"], persist=False)
    await cached.embed(["b"], persist=False)
    await cached.embed(["a"], persist=False)  # a is now the most recent
    await cached.embed(["c"], persist=False)  # evicts b
    await cached.embed(["a"], persist=False)
    assert len(fake.embedding_requests) == 3
    await cached.embed(["b"], persist=False)
    assert fake.embedding_requests[-1] == ["b"]


async def test_failing_inner_writes_nothing_and_raises(fake: FakeOpenAI, cached: CachedEmbedder, db: Database) -> None:
    await cached.embed(["known"])
    fake.queue_embedding_error(500)
    with pytest.raises(EmbeddingError):
        await cached.embed(["known", "new one"])
    assert [r[0] for r in await rows(db)] == [text_hash("known")]
    fake.queue_embedding_error(503)
    with pytest.raises(EmbeddingError):
        await cached.embed(["query"], persist=False)
    assert await cached.embed(["query"], persist=False)  # the failure was not cached
    assert fake.embedding_requests[-1] == ["query"]


async def test_dimension_change_ignores_old_rows(fake: FakeOpenAI, cached: CachedEmbedder, db: Database) -> None:
    await cached.embed(["old text"])
    assert cached.dimension == 64
    fake.embedding_dim = 32  # the endpoint now serves another size under the same model name
    (new,) = await cached.embed(["fresh text"])
    assert new.shape == (32,) and cached.dimension == 32
    (v,) = await cached.embed(["old text"])
    assert v.shape == (32,) and fake.embedding_requests[-1] == ["old text"]
    assert {r[2] for r in await rows(db)} == {32}  # replaced


async def test_unknown_dimension_trusts_rows_until_the_api_disagrees(
    fake: FakeOpenAI, embedder: HttpEmbedder, db: Database, clock: ManualClock
) -> None:
    await CachedEmbedder(embedder, db, clock).embed(["cached at 64"])
    fake.embedding_dim = 16
    fresh = CachedEmbedder(embedder, db, clock)
    (v,) = await fresh.embed(["cached at 64"])  # no answer yet to say otherwise
    assert v.shape == (64,) and len(fake.embedding_requests) == 1
    # A call with a miss learns 16; the hit of 64 in the same call is re-asked.
    a, b = await fresh.embed(["cached at 64", "new"])
    assert a.shape == b.shape == (16,)
    assert fake.embedding_requests[1:] == [["new"], ["cached at 64"]]


async def test_many_texts_chunk_the_lookup(fake: FakeOpenAI, cached: CachedEmbedder, db: Database) -> None:
    texts = [f"memory {i}" for i in range(1200)]
    await cached.embed(texts)
    sent = len(fake.embedding_requests)
    out = await cached.embed(list(reversed(texts)))
    assert len(fake.embedding_requests) == sent and len(out) == 1200
    assert np.allclose(out[0], fake_embedding("memory 1199", 64))


async def test_prune_deletes_unused_rows(fake: FakeOpenAI, cached: CachedEmbedder, db: Database, clock: ManualClock) -> None:
    await cached.embed(["old", "kept"])
    clock.advance(timedelta(days=20))
    await cached.embed(["kept", "recent"])
    clock.advance(timedelta(days=20))
    assert await cached.prune(unused_days=30) == 1
    assert {r[0] for r in await rows(db)} == {text_hash("kept"), text_hash("recent")}
    assert await cached.prune(unused_days=30) == 0
    assert await cached.prune(unused_days=10) == 2


async def test_closed_database_still_embeds(fake: FakeOpenAI, cached: CachedEmbedder, db: Database) -> None:
    await db.close()
    (v,) = await cached.embed(["during shutdown"], persist=False)
    assert v.shape == (64,)


class _Counting:
    """An inner embedder that counts its calls (for concurrency checks)."""

    model = "count-model"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.calls.append(list(texts))
        await asyncio.sleep(0)
        return [np.asarray(fake_embedding(t, 8), dtype=np.float32) for t in texts]


async def test_any_embedder_can_be_wrapped(db: Database, clock: ManualClock) -> None:
    inner = _Counting()
    cached = CachedEmbedder(inner, db, clock)
    assert cached.model == "count-model"
    await asyncio.gather(cached.embed(["x", "y"]), cached.embed(["y", "z"]))
    assert len(await rows(db)) == 3
    await cached.embed(["x", "y", "z"])
    assert len(inner.calls) == 2


async def test_the_cache_is_keyed_by_the_dimensions_asked_for_too(
    fake: FakeOpenAI, db: Database, clock: ManualClock
) -> None:
    async with HttpEmbedder(base_url=fake.url, api_key=KEY, model="m", dimensions=32) as emb:
        await CachedEmbedder(emb, db, clock).embed(["same words"])
    async with HttpEmbedder(base_url=fake.url, api_key=KEY, model="m", dimensions=16) as emb:
        fresh = CachedEmbedder(emb, db, clock)  # a restart: nothing learnt yet
        (v,) = await fresh.embed(["same words"])
    assert v.shape == (16,) and len(fake.embedding_requests) == 2
    assert sorted((r[1], r[2]) for r in await rows(db)) == [("m@16", 16), ("m@32", 32)]


@pytest.mark.parametrize(
    ("status", "body", "endpoint"),
    [
        (400, b'{"error": {"message": "input too long"}}', False),  # may be one text's fault
        (413, b"too large", False),
        (401, b'{"error": {"message": "bad key"}}', True),
        (429, b'{"error": {"message": "Rate limit reached"}}', True),
        (502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", True),
        (200, b"<html><body>Please sign in to the proxy</body></html>", True),  # an HTML page with 200
    ],
)
async def test_errors_say_whether_the_endpoint_or_the_texts_are_at_fault(
    canned: Canned, status: int, body: bytes, endpoint: bool
) -> None:
    canned.status, canned.body = status, body
    async with canned.embedder() as emb:
        with pytest.raises(EmbeddingError) as err:
            await emb.embed(["a"])
    assert err.value.endpoint is endpoint


async def test_a_refused_connection_is_the_endpoints_fault() -> None:
    async with HttpEmbedder(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m", timeout=2.0) as emb:
        with pytest.raises(EmbeddingError, match="transport") as err:
            await emb.embed(["a"])
    assert err.value.endpoint and KEY not in str(err.value)


async def test_a_size_other_than_asked_is_the_endpoints_fault(canned: Canned) -> None:
    canned.json({"object": "list", "data": [{"index": 0, "embedding": [1.0, 0.0]}]})
    async with HttpEmbedder(base_url=f"http://127.0.0.1:{canned.port}/v1", api_key="", model="m", dimensions=4) as emb:
        with pytest.raises(EmbeddingError, match="asked for 4 dimensions, got 2") as err:
            await emb.embed(["a"])
    assert err.value.endpoint


# -- encoding_format: base64 ------------------------------------------------------


def _unit_of(text: str, dim: int = 64) -> np.ndarray:
    v = np.asarray(fake_embedding(text, dim, CONCEPTS), dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


async def test_vectors_are_asked_for_in_base64_and_decoded(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    """base64 of float32 parses in about a millisecond where 64 vectors of
    1536 floats in JSON hold the event loop 25-70 ms (docs/BENCHMARKS.md)."""
    got = await embedder.embed(["my automobile", "a kitten"])
    assert fake.embedding_formats == ["base64"]
    for v, text in zip(got, ["my automobile", "a kitten"], strict=True):
        assert v.dtype == np.float32 and np.allclose(v, _unit_of(text), atol=1e-6)


async def test_a_server_that_refuses_base64_gets_floats_from_then_on(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    fake.embedding_base64 = "refuse"  # as some OpenAI-compatible servers do
    [v] = await embedder.embed(["my automobile"])
    assert np.allclose(v, _unit_of("my automobile"), atol=1e-6)
    assert fake.embedding_formats == ["base64", "float"]
    await embedder.embed(["a kitten"])
    assert fake.embedding_formats == ["base64", "float", "float"]  # asked once, not on every request


async def test_a_server_that_ignores_base64_answers_floats_and_that_is_fine(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    fake.embedding_base64 = "ignore"  # Ollama
    [v] = await embedder.embed(["my automobile"])
    assert np.allclose(v, _unit_of("my automobile"), atol=1e-6)
    assert fake.embedding_formats == ["base64"]


async def test_a_text_refused_either_way_is_the_texts_fault_and_base64_stays(fake: FakeOpenAI, embedder: HttpEmbedder) -> None:
    fake.queue_embedding_error(400, times=2)
    with pytest.raises(EmbeddingError, match="HTTP 400") as err:
        await embedder.embed(["a text the server will not take"])
    assert not err.value.endpoint and fake.embedding_formats == ["base64", "float"]
    await embedder.embed(["my automobile"])
    assert fake.embedding_formats[-1] == "base64"


@pytest.mark.parametrize(
    ("embedding", "match"),
    [("AAAA", "float32"), ("not base64!", "base64"), ("AAAAAAAAAAA=", "zero vector"), ("AADAfwAAgD8=", "non-finite")],
)
async def test_unusable_base64_answers_are_errors(canned: Canned, embedding: str, match: str) -> None:
    canned.json({"object": "list", "data": [{"index": 0, "embedding": embedding}]})
    async with canned.embedder() as emb:
        with pytest.raises(EmbeddingError, match=match):
            await emb.embed(["a"])


async def test_an_error_that_echoes_the_inputs_carries_no_memory_words(canned: Canned) -> None:
    """The inputs are people's memories: an error quoting them back says
    its type and shape, not their words."""
    memory = "Hannelore owes 4823 euros to the Zürich clinic"
    canned.json({"error": {"message": f"input[0] ({memory}) is too long", "type": "invalid_request_error"}},
                status=400)
    async with canned.embedder(KEY) as emb:
        with pytest.raises(EmbeddingError) as exc:
            await emb.embed([memory])
    for word in ("Hannelore", "4823", "Zürich", "clinic"):
        assert word not in str(exc.value)
    assert "HTTP 400" in str(exc.value) and "invalid_request_error" in str(exc.value)
