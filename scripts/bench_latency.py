"""Read-path latency: ``should_retrieve`` and ``Retriever.retrieve``.

For each size (default 1k, 10k, 100k memories of one user, plus 20% more
rows spread over 50 other users) a fresh SQLite file is built with
deterministic, mixed Chinese/English memories of realistic length, then
timed with realistic queries (words of a target memory wrapped in zh/en
question phrasing, half with two turns of context).

    python scripts/bench_latency.py [--sizes 1000,10000,100000] [--queries 300] [--source-text] [--hybrid DIM]
                                    [--buffer-writes] [--recall N] [--json FILE]

``--hybrid DIM`` times the hybrid retriever instead (memory/hybrid.py):
every memory gets a random unit vector of DIM dimensions, and the message's
vector comes from an in-process stand-in that answers at once, so the figure
is myclaw's own cost (the lexical search, the vector scan of the user's
matrix, the fusion); the endpoint's round trip runs alongside the lexical
search and is capped by ``memory.embedding.queryTimeout``.

``--buffer-writes`` appends one message to the extraction buffer before
each query, as the gateway does for every message it handles: another
connection's commit makes SQLite drop the reader's page cache (WAL), so
this times retrieval with the cache the gateway really has.

``--recall N`` times ``SqliteMemory.recall`` instead, what the gateway
calls for a message: the asking user has N Core Memory (Tier 1) entries,
drawn like the other memories, and recall leaves out those the prompt's
profile shows (the profile cached, as after the first message).

``--source-text`` gives every memory the words it was drawn from, as the
write path does (``NewMemory.source_text``): the memory's text and another
memory's worth of words, indexed with it.

``--cues`` indexes every memory with its cues as the engine does
(memory/cues.py): its project's name, a topic, and six search terms drawn
from another memory's words, after the cue mark.

Prints a table; ``--json`` writes the same figures. Results go to
docs/BENCHMARKS.md with the command that produced them.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.clock import ManualClock, format_ts  # noqa: E402
from memory.cues import cue_text  # noqa: E402
from memory.engine import MemoryEngine, clean_source_text, content_hash, memory_index_text, owner_key  # noqa: E402
from memory.prefilter import should_retrieve  # noqa: E402
from memory.hybrid import HybridRetriever  # noqa: E402
from memory.backend import Turn  # noqa: E402
from memory.types import NewMemory  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402
from memory.service import SqliteMemory  # noqa: E402
from memory.vectors import VectorIndex  # noqa: E402

# After memory (its __init__ sets one BLAS thread, as in the gateway).
import numpy as np  # noqa: E402

USER = "telegram:1001"
CATEGORIES = ["identity", "config", "credential", "decision", "solution", "event", "conversation", "temp", "debug"]
_HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后"
    "多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还"
    "因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结"
    "解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级"
    "少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领"
    "七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每"
    "目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影"
)
_SYL = ["ka", "ro", "ten", "vi", "sa", "lo", "mer", "din", "qu", "ar", "bel", "tor", "ix", "an", "sel", "po", "nu", "gra"]
EN_STOP = "the a to of and in for with on my is was we I it that at from about".split()
ZH_GLUE = list("的了在是和把给跟")


def _vocab(rng: random.Random) -> tuple[list[str], list[str]]:
    zh = sorted({rng.choice(_HAN) + rng.choice(_HAN) for _ in range(6000)})
    en = sorted({"".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3))) for _ in range(8000)})
    rng.shuffle(zh)
    rng.shuffle(en)
    return zh, en


def _zipf_weights(n: int) -> list[float]:
    # Zipf over content words; the head (function words) is added apart, so
    # the curve starts at rank 30 rather than 1.
    return [1.0 / (i + 30) ** 1.05 for i in range(n)]


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.zh, self.en = _vocab(self.rng)
        self.wz = _zipf_weights(len(self.zh))
        self.we = _zipf_weights(len(self.en))

    def words(self, lang: str, k: int) -> list[str]:
        pool, w = (self.zh, self.wz) if lang == "zh" else (self.en, self.we)
        return self.rng.choices(pool, weights=w, k=k)

    def memory(self) -> tuple[str, list[str]]:
        """A fact of 8-30 words, mostly one language, sometimes mixed."""
        rng = self.rng
        lang = rng.choice(["zh", "zh", "en", "en", "mix"])
        n = rng.randint(8, 30)
        if lang == "en":
            ws = self.words("en", n)
            out = []
            for w in ws:
                out.append(w)
                if rng.random() < 0.4:
                    out.append(rng.choice(EN_STOP))
            return " ".join(out).capitalize() + ".", ws
        ws = self.words("zh", n) if lang == "zh" else [
            (self.words("en", 1)[0] if rng.random() < 0.3 else self.words("zh", 1)[0]) for _ in range(n)
        ]
        out = []
        for w in ws:
            out.append(w if w[0] >= "\u3400" else f" {w} ")
            if rng.random() < 0.35:
                out.append(rng.choice(ZH_GLUE))
        return "".join(out).strip() + "。", ws

    def query(self, words: list[str]) -> str:
        rng = self.rng
        picked = rng.sample(words, k=min(len(words), rng.randint(2, 4)))
        if picked[0][0] >= "\u3400":
            return rng.choice(["我之前说过{}吗？", "{}是什么来着", "还记得{}的事情吗", "上次聊的{}怎么样了"]).format(
                "".join(picked)
            )
        return rng.choice(
            ["what did I say about {}?", "do you remember the {} thing", "how was {} set up last time?"]
        ).format(" ".join(picked))


async def build(
    path: Path, size: int, gen: Gen, clock: ManualClock, *, source_text: bool = False, cues: bool = False
) -> tuple[float, list[list[str]]]:
    # The same vocabulary, its own random stream: the memories and queries
    # stay those of a run without source text.
    said_gen = copy.copy(gen)
    said_gen.rng = random.Random(1)
    cue_gen = copy.copy(gen)
    cue_gen.rng = random.Random(2)
    """Fill a fresh DB with direct SQL in one transaction (engine.add is
    row-at-a-time and would make the 100k build slow)."""
    t0 = time.perf_counter()
    eng = await MemoryEngine.open(path, clock)
    samples: list[list[str]] = []
    try:
        base = clock.now().timestamp()
        others = [f"feishu:ou_{i}" for i in range(50)]
        mem_rows = []
        cue_texts: list[str] = []
        for i in range(int(size * 1.2)):
            owner = USER if i < size else gen.rng.choice(others)
            text, ws = gen.memory()
            # A message says the fact with more words around it.
            said = clean_source_text(f"{text} {said_gen.memory()[0]}") if source_text else ""
            if owner == USER and len(samples) < 2000 and gen.rng.random() < 0.05:
                samples.append(ws)
            ts = format_ts(clock.now().fromtimestamp(base - gen.rng.uniform(0, 365 * 86400), clock.now().tzinfo))
            mem_rows.append(
                (
                    i + 1,
                    owner,
                    gen.rng.choice([1, 2, 2, 2, 2]),
                    gen.rng.choice(["_global", "myclaw", "webshop", "infra"]),
                    gen.rng.choice(CATEGORIES),
                    text,
                    content_hash(text),
                    round(gen.rng.uniform(0.2, 1.0), 2),
                    said,
                    ts,
                )
            )
            if cues:
                words = cue_gen.memory()[1]
                cue_texts.append(cue_text(mem_rows[-1][3], cue_gen.rng.choice(["deploy", "database", "家庭", "_general"]),
                                          words[:6]))
            else:
                cue_texts.append("")
        async with eng.db.transaction() as conn:
            await conn.executemany(
                """INSERT INTO memories (id, owner, tier, project, category, content, content_hash, importance,
                       source_text, created_at, updated_at, last_accessed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [(*r, r[-1], r[-1]) for r in mem_rows],
            )
            await conn.executemany(
                "INSERT INTO memories_fts(rowid, owner, text) VALUES (?, ?, ?)",
                [(r[0], owner_key(r[1]), memory_index_text(r[5], r[8], cues=c)) for r, c in zip(mem_rows, cue_texts)],
            )
    finally:
        await eng.close()
    return time.perf_counter() - t0, samples


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


PREFILTER_MESSAGES = [
    "好的", "继续", "ok", "thanks!", "我之前说过我的服务器密码是什么吗？", "do you remember which editor I use?",
    "帮我写个函数，把列表去重", "translate this paragraph into English please", "上周部署 myclaw 的时候遇到什么问题了",
    "what's my wife's birthday again", "```python\nprint('hi')\nfor i in range(3):\n    pass\n```",
    "今天天气不错，我们下午去公园散步，顺便买点水果回来吧", "lol", "can you explain how TCP handshakes work",
    "webshop 的数据库迁移做完了吗", "I prefer pnpm over npm for the frontend", "嗯嗯", "收到，谢谢",
    "Remind me what we decided about the cache TTL", "帮忙润色一下这段文字：今天的会议很成功",
] * 5


def bench_prefilter() -> dict[str, float]:
    projects = ["myclaw", "webshop", "infra"]
    for m in PREFILTER_MESSAGES:  # warm the regex caches
        should_retrieve(m, projects)
    samples: list[float] = []
    for _ in range(50):
        for m in PREFILTER_MESSAGES:
            t = time.perf_counter_ns()
            should_retrieve(m, projects)
            samples.append((time.perf_counter_ns() - t) / 1000)
    return {"p50_us": pct(samples, 50), "p95_us": pct(samples, 95), "mean_us": statistics.fmean(samples)}


class InstantEmbedder:
    """The message's vector at once: a random unit vector seeded by the text."""

    model = "bench"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    async def embed(self, texts: Sequence[str], *, persist: bool = True,
                    waiting: bool | None = None) -> list[np.ndarray]:
        out = []
        for t in texts:
            v = np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(self.dim).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return out


async def add_vectors(eng: MemoryEngine, dim: int) -> None:
    rows = await eng.db.fetchall("SELECT id, owner, content_hash FROM memories")
    rng = np.random.default_rng(7)
    m = rng.standard_normal((len(rows), dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    async with eng.db.transaction() as conn:
        await conn.executemany(
            "INSERT INTO memory_vectors (memory_id, owner, model, content_hash, vector) VALUES (?, ?, 'bench', ?, ?)",
            [(r[0], r[1], r[2], m[i].astype("<f4").tobytes()) for i, r in enumerate(rows)],
        )


async def bench_size(
    size: int, queries: int, seed: int, *, source_text: bool = False, hybrid: int = 0, buffer_writes: bool = False,
    recall: int = -1, cues: bool = False,
) -> dict[str, float]:
    gen = Gen(seed)
    clock = ManualClock("2026-03-01T12:00:00Z")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.db"
        build_s, samples = await build(path, size, gen, clock, source_text=source_text, cues=cues)
        eng = await MemoryEngine.open(path, clock)
        try:
            lexical = Retriever(eng)
            r: Retriever | HybridRetriever = lexical
            if hybrid:
                await add_vectors(eng, hybrid)
                r = HybridRetriever(lexical, VectorIndex(eng.db, "bench"), InstantEmbedder(hybrid), min_similarity=-1.0)
            qs = [gen.query(gen.rng.choice(samples)) for _ in range(queries)]
            ctx = [gen.memory()[0], gen.memory()[0]]
            mem = SqliteMemory(eng, r)
            for _ in range(max(recall, 0)):  # Core Memory entries, in the index like the rest
                await eng.add(NewMemory(owner=USER, tier=1, content=gen.memory()[0], importance=0.9))
            # What is timed: the retriever, or the backend's recall (the gateway's call).
            run = r.retrieve if recall < 0 else mem.recall
            for q in qs[:20]:  # warm page cache and statement cache
                await run(USER, q)
            times: list[float] = []
            found = 0
            cpu0 = time.process_time()
            writes = SqliteMemory(eng, r) if buffer_writes else None
            cpu_writes = 0.0
            for i, q in enumerate(qs):
                if writes is not None:
                    c = time.process_time()
                    await writes.buffer([Turn(owner=USER, channel="bench", chat_id="1", role="user", content=q, message_id=str(i))])
                    cpu_writes += time.process_time() - c  # not the read path's
                t = time.perf_counter()
                hits = await run(USER, q, context=ctx if i % 2 else ())
                times.append((time.perf_counter() - t) * 1000)
                found += bool(hits)
            # CPU time of all threads: a figure other processes on a shared
            # box do not inflate the way they inflate wall-clock percentiles.
            cpu_ms = (time.process_time() - cpu0 - cpu_writes) * 1000 / len(qs)
        finally:
            await eng.close()
        db_mb = path.stat().st_size / 1e6
    return {
        "memories": size,
        "rows_total": int(size * 1.2),
        "build_s": round(build_s, 1),
        "db_mb": round(db_mb, 1),
        "p50_ms": round(pct(times, 50), 2),
        "p95_ms": round(pct(times, 95), 2),
        "max_ms": round(max(times), 2),
        "cpu_ms_mean": round(cpu_ms, 2),
        "with_hits": round(found / len(qs), 3),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", dest="json_path")
    ap.add_argument("--source-text", action="store_true", help="give every memory the words it was drawn from")
    ap.add_argument("--cues", action="store_true", help="index every memory with a project, a topic and search terms")
    ap.add_argument("--hybrid", type=int, default=0, metavar="DIM", help="time hybrid recall with DIM-dimensional vectors")
    ap.add_argument("--buffer-writes", action="store_true", help="buffer one message before each query, as the gateway does")
    ap.add_argument("--recall", type=int, default=-1, metavar="N",
                    help="time SqliteMemory.recall, the user having N Core Memory entries")
    a = ap.parse_args()
    pre = bench_prefilter()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"should_retrieve: p50 {pre['p50_us']:.1f} us  p95 {pre['p95_us']:.1f} us  mean {pre['mean_us']:.1f} us")
    rows = []
    print(f"{'memories':>9} {'rows':>8} {'build s':>8} {'db MB':>7} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'cpu ms':>7} {'hits':>5}")
    for size in (int(s) for s in a.sizes.split(",")):
        res = await bench_size(
            size, a.queries, a.seed, source_text=a.source_text, hybrid=a.hybrid, buffer_writes=a.buffer_writes,
            recall=a.recall, cues=a.cues,
        )
        rows.append(res)
        print(
            f"{res['memories']:>9} {res['rows_total']:>8} {res['build_s']:>8} {res['db_mb']:>7} "
            f"{res['p50_ms']:>7} {res['p95_ms']:>7} {res['max_ms']:>7} {res['cpu_ms_mean']:>7} {res['with_hits']:>5}",
            flush=True,
        )
    if a.json_path:
        out = {"load_avg_1m": os.getloadavg()[0], "should_retrieve": pre, "retrieve": rows}
        Path(a.json_path).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
