"""Write-path figures (docs/BENCHMARKS.md, "Write path").

1. LLM calls and prompt tokens per 1,000 conversation messages: users chat in
   sessions (mixed Chinese and English) that the extraction service batches by
   quiet gap, through the fake OpenAI-compatible server over HTTP with a
   deterministic responder. Compared with mem0's ~2 LLM calls per ``add``.
2. Wall time of a weekly compression of 5,000 facts (100 partitions of 50)
   with an instant fake LLM (real HTTP, real SQLite file).

    .venv/bin/python scripts/bench_writepath.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from memory import Category, ManualClock, MemoryEngine, NewMemory  # noqa: E402
from memory.backend import Turn  # noqa: E402
from memory.compression import Compressor  # noqa: E402
from memory.extraction import ExtractionService  # noqa: E402
from memory.llm import MemoryLLM  # noqa: E402
from memory.service import SqliteMemory  # noqa: E402
from memory.tokens import estimate_tokens  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply  # noqa: E402

ZH = ["我最近在做 {p} 项目，部署用 pnpm", "{p} 的数据库选了 Postgres", "明天要给 {p} 写周报", "我更喜欢用中文交流"]
EN = ["I'm working on {p} and we deploy with pnpm", "{p} uses Postgres now", "Remind me to write the {p} report",
      "I prefer short answers"]


def extraction_responder(body: dict[str, Any]) -> Reply:
    convo = body["messages"][-1]["content"].split("Conversation:", 1)[-1]
    users = re.findall(r"\] user: (.*)", convo)
    facts = [{"content": u[:80], "category": "decision", "importance": 0.6, "project": "bench"} for u in users[:2]]
    return Reply(json.dumps({"facts": facts, "summary": (users[0] if users else "chat")[:100]}, ensure_ascii=False))


async def bench_extraction(tmp: Path, messages: int, users: int, sessions: int) -> dict[str, Any]:
    clock = ManualClock("2026-03-02T08:00:00Z")
    async with FakeOpenAI(responder=extraction_responder) as fake:
        engine = await MemoryEngine.open(tmp / "extract.db", clock)
        llm = MemoryLLM(base_url=fake.url, model="bench", retries=0)
        try:
            mem = SqliteMemory(engine)
            svc = ExtractionService(engine, llm)
            per_session = messages // (users * sessions) // 2  # pairs
            sent = 0
            for s in range(sessions):
                for u in range(users):
                    owner = f"user{u}"
                    lines = ZH if u % 2 == 0 else EN
                    pairs = []
                    for i in range(per_session):
                        text = lines[(s + i) % len(lines)].format(p=f"proj{u % 7}")
                        pairs += [
                            Turn(owner, "telegram", str(u), "user", text, message_id=f"{s}-{i}", at=clock.now()),
                            Turn(owner, "telegram", str(u), "assistant", "好的 / OK, noted.", message_id=f"{s}-{i}",
                                 at=clock.now()),
                        ]
                    await mem.buffer(pairs)
                    sent += len(pairs)
                clock.advance(timedelta(minutes=30))  # the quiet gap ends every session
                await svc.tick()
            left = (await engine.db.fetchall("SELECT COUNT(*) FROM extraction_buffer"))[0][0]
            facts = (await engine.db.fetchall("SELECT COUNT(*) FROM memories"))[0][0]
            prompt_tokens = sum(estimate_tokens(m["content"]) for r in fake.requests for m in r["messages"])
            calls = len(fake.requests)
            return {
                "messages": sent,
                "calls": calls,
                "calls_per_1000": round(calls * 1000 / sent, 1),
                "prompt_tokens_per_1000": round(prompt_tokens * 1000 / sent),
                "prompt_tokens_per_call": round(prompt_tokens / calls),
                "facts": facts,
                "left_in_buffer": left,
                # mem0: one add per user/assistant exchange, ~2 calls per add.
                "mem0_calls_per_1000": 1000,
            }
        finally:
            await llm.aclose()
            await engine.close()


def merge_responder(body: dict[str, Any]) -> Reply:
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"]
    if system.startswith("You maintain"):
        facts = re.findall(r"^\d+\. \[[^\]]*\] (.*)$", user, re.M)[:30]
        return Reply(json.dumps({"entries": [{"content": f, "category": "identity"} for f in facts]}))
    nums = [int(n) for n in re.findall(r"^(\d+)\. ", user, re.M)]
    out = [{"content": f"merged {a}+{b}", "category": "decision", "importance": 0.6, "from": [a, b]}
           for a, b in zip(nums[::2], nums[1::2])]
    return Reply(json.dumps({"facts": out, "drop": []}))


async def bench_weekly(tmp: Path, facts: int, partitions: int, users: int) -> dict[str, Any]:
    clock = ManualClock("2026-03-02T04:00:00Z")
    async with FakeOpenAI(responder=merge_responder) as fake:
        engine = await MemoryEngine.open(tmp / "weekly.db", clock)
        llm = MemoryLLM(base_url=fake.url, model="bench", retries=0)
        try:
            per = facts // partitions
            await engine.add_many(
                (NewMemory(owner=f"user{p % users}", content=f"fact {i} of partition {p}: 用户在项目 p{p} 里的决定",
                           project=f"p{p}", topic="deploy", category=Category.DECISION,
                           importance=0.8 if i % 10 == 0 else 0.5), None)
                for p in range(partitions) for i in range(per)
            )
            t0 = time.perf_counter()
            report = await Compressor(engine, llm).weekly()
            elapsed = time.perf_counter() - t0
            active = (await engine.db.fetchall("SELECT COUNT(*) FROM memories WHERE status='active' AND tier=2"))[0][0]
            return {
                "facts": facts, "partitions": report.partitions, "llm_calls": len(fake.requests),
                "merged": report.merged, "created": report.created, "promoted": report.promoted,
                "active_after": active, "seconds": round(elapsed, 2),
            }
        finally:
            await llm.aclose()
            await engine.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--users", type=int, default=25)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--facts", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=100)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    with tempfile.TemporaryDirectory() as d:
        ex = await bench_extraction(Path(d), args.messages, args.users, args.sessions)
        wk = await bench_weekly(Path(d), args.facts, args.partitions, 10)
    print(json.dumps({"extraction": ex, "weekly": wk}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
