"""Turning hybrid recall on for a gateway that already holds memories: how
fast the vectorizer embeds them (the backfill), and what it costs the
replies meanwhile (docs/BENCHMARKS.md, "Hybrid recall: the backfill").

A fresh SQLite file gets ``--memories`` memories (bench_latency.py's
generator: one user's, plus 20% spread over 50 others), the real
``Vectorizer`` embeds them through ``CachedEmbedder`` and ``HttpEmbedder``
against the fake OpenAI server's ``/v1/embeddings`` in a process of its
own (hashed words, ``--dim`` dimensions: the JSON an endpoint of that size
sends, not a model's speed), and while it runs, and after, a hybrid
retrieve of the user is timed every ``--every`` seconds, with the event
loop's lag (how late a timer fires: what every reply waits behind).
``parse_ms``: how long the client's reading of one answer of ``--batch``
vectors holds the loop (``HttpEmbedder.vectors_of``), in the encoding the
client asks for (``--encoding``: base64, its default, or float).
``--serial-ms`` plays an endpoint with one worker that takes that long per
text (Ollama's default; all-MiniLM-L6-v2 on scripts/embed_server.py: 11 ms),
where a query vector waits for the batch being embedded; ``--busy-batch``
is the vectorizer's batch while users ask (64: as before session 25).
``--busy-for 0`` turns that "users are asking" mode off, so every query is
timed as the first after a silence (session 26); ``--batch-seconds`` is how
long a batch may hold the endpoint (the default: the vectorizer's).

    .venv/bin/python scripts/bench_backfill.py [--memories 5000] [--dim 1536] [--batch 64] [--encoding float]
        [--serial-ms 11 --busy-batch 64] [--busy-for 0] [--batch-seconds 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import structlog  # noqa: E402

from memory.clock import ManualClock  # noqa: E402
from memory.embedding import CachedEmbedder, HttpEmbedder  # noqa: E402
from memory.engine import MemoryEngine  # noqa: E402
from memory.hybrid import HybridRetriever  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402
from memory.vectorize import Vectorizer  # noqa: E402
from memory.vectors import VectorIndex  # noqa: E402
from bench_latency import USER, Gen, build, pct  # noqa: E402  (scripts/ is sys.path[0])

_SERVER = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from tests.fakes.openai_server import FakeOpenAI
async def main():
    async with FakeOpenAI() as f:
        per_text = float(sys.argv[2])
        if per_text:  # one worker, as Ollama by default and scripts/embed_server.py
            f.embedding_serial, f.embedding_per_text = True, per_text
        print(f.url, flush=True)
        await asyncio.Event().wait()
asyncio.run(main())
"""


def parse_ms(raw: HttpEmbedder, dim: int, n: int, encoding: str, runs: int = 30) -> dict[str, float]:
    """Milliseconds the client's reading of one answer of ``n`` vectors
    (the fake's JSON, as sent over the wire) holds the event loop."""
    rng = random.Random(0)
    data = []
    for i in range(n):
        vec = [rng.uniform(-1, 1) for _ in range(dim)]
        emb: object = vec if encoding == "float" else base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    body = json.dumps({"object": "list", "data": data, "model": "bench"}).encode()
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        raw.vectors_of(httpx.Response(200, content=body), n)
        took.append((time.perf_counter() - t) * 1000)
    return {"answer_kb": round(len(body) / 1024), "p50": round(pct(took, 50), 2), "max": round(max(took), 2)}


def summary(lat: list[float], lag: list[float], fallbacks: int) -> dict[str, float]:
    return {
        "retrieves": len(lat), "lexical_only": fallbacks,
        "retrieve_p50_ms": round(pct(lat, 50), 1), "retrieve_p95_ms": round(pct(lat, 95), 1),
        "retrieve_max_ms": round(max(lat), 1),
        "loop_lag_p95_ms": round(pct(lag, 95), 1), "loop_lag_max_ms": round(max(lag), 1),
    }


async def probe(h: HybridRetriever, queries: list[str], every: float, until: asyncio.Event) -> tuple[list[float], list[float]]:
    lat: list[float] = []
    lag: list[float] = []
    i = 0
    while not until.is_set():
        t = time.perf_counter()
        await asyncio.sleep(every)
        lag.append((time.perf_counter() - t - every) * 1000)
        t = time.perf_counter()
        await h.retrieve(USER, queries[i % len(queries)])
        lat.append((time.perf_counter() - t) * 1000)
        i += 1
    return lat, lag


async def run(args: argparse.Namespace, url: str) -> dict[str, object]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings only
    clock = ManualClock("2026-03-01T12:00:00Z")
    gen = Gen(0)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.db"
        _, samples = await build(path, args.memories, gen, clock)
        queries = [gen.query(gen.rng.choice(samples)) for _ in range(200)]
        eng = await MemoryEngine.open(path, clock)
        try:
            raw = HttpEmbedder(base_url=url, api_key="", model="bench", dimensions=args.dim, batch_size=args.batch)
            raw.encoding = args.encoding
            parse = parse_ms(raw, args.dim, args.batch, args.encoding)
            cached = CachedEmbedder(raw, eng.db, clock)
            index = VectorIndex(eng.db, f"bench@{args.dim}", dimension=args.dim)
            h = HybridRetriever(Retriever(eng), index, cached)
            # Only what is asked for: the same script measures a tree from before either option.
            extra = {k: v for k, v in (("busy_for", args.busy_for), ("batch_seconds", args.batch_seconds)) if v is not None}
            vz = Vectorizer(index, cached, batch_size=args.batch, busy_batch_size=args.busy_batch, **extra)
            sizes: list[int] = []
            embed = cached.embed

            async def counted(texts: Any, **kw: Any) -> Any:
                if kw.get("persist", True):
                    sizes.append(len(texts))
                return await embed(texts, **kw)

            cached.embed = counted  # type: ignore[method-assign]  # the batch sizes the vectorizer asks for
            total = int(args.memories * 1.2)
            for q in queries[:10]:  # warm the lexical side's caches
                await h.retrieve(USER, q)
            done = asyncio.Event()
            probing = asyncio.create_task(probe(h, queries, args.every, done))
            t0 = time.perf_counter()
            await vz.start()
            while await index.count() < total:
                await asyncio.sleep(0.2)
            backfill_s = time.perf_counter() - t0
            done.set()
            during = (*await probing, h.fallbacks)
            before = h.fallbacks
            done = asyncio.Event()
            probing = asyncio.create_task(probe(h, queries, args.every, done))
            await asyncio.sleep(max(5.0, len(during[0]) * args.every / 2))
            done.set()
            after = (*await probing, h.fallbacks - before)
            await vz.stop()
            await h.aclose()
            await raw.aclose()
        finally:
            await eng.close()
    return {
        "memories": total, "dim": args.dim, "batch": args.batch, "encoding": args.encoding, "parse_ms": parse,
        "serial_ms": args.serial_ms, "busy_batch": args.busy_batch, "busy_for": args.busy_for,
        "batch_seconds": args.batch_seconds,
        "batches": len(sizes), "batch_p50": pct([float(n) for n in sizes], 50) if sizes else 0,
        "batch_max": max(sizes, default=0),
        "backfill_s": round(backfill_s, 1),
        "memories_per_s": round(total / backfill_s), "during": summary(*during), "after": summary(*after),
        "cpu_s": round(time.process_time(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=5000, help="the user's memories (20%% more over 50 others)")
    ap.add_argument("--dim", type=int, default=1536)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--every", type=float, default=0.05, help="seconds between timed retrieves")
    ap.add_argument("--serial-ms", type=float, default=0.0, help="one worker, this many ms per text (0: parallel, instant)")
    ap.add_argument("--busy-batch", type=int, default=8, help="the vectorizer's batch while users ask")
    ap.add_argument("--busy-for", type=float, help="seconds of small batches after a query (0: every query after a silence)")
    ap.add_argument("--batch-seconds", type=float, help="how long a batch may hold the endpoint")
    ap.add_argument("--encoding", choices=("base64", "float"), default="base64", help="what the client asks for")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    root = str(Path(__file__).resolve().parents[1])
    server = subprocess.Popen([sys.executable, "-c", _SERVER, root, str(args.serial_ms / 1000)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": root})
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        out = asyncio.run(run(args, url))
    finally:
        server.terminate()
        server.wait(10)
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
