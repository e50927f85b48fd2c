"""What a week of group traffic costs the nightly compression
(docs/BENCHMARKS.md, "A group's days compressed").

A real memory.db with three groups' own days (memory/groupnotes.py: owner
``group:telegram:<id>``, four extraction batches a day, each naming the
members who spoke) and two users' private days, for seven days; the daily
compression (memory/compression.py) then runs each night, on a clock moved
a day at a time, against the fake OpenAI-compatible server, which answers
one note a call. Prints, per run: the memory model calls it made, the
events it compressed, and how many of the groups' days are still
uncompressed (read again by no run, or by every one).

    .venv/bin/python scripts/bench_group_days.py [--groups 3] [--batches 4] [--days 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from memory import ManualClock, MemoryEngine, Provenance  # noqa: E402
from memory.compression import Compressor  # noqa: E402
from memory.groupowner import group_owner  # noqa: E402
from memory.llm import MemoryLLM  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply  # noqa: E402

MEMBERS = (("telegram:11", "Dad"), ("telegram:12", "Mom"), ("telegram:13", "Leo"))


def _answer(body: dict[str, Any]) -> Reply:
    return Reply(json.dumps({"facts": [{"content": "The group planned a thing", "category": "decision",
                                        "lines": [1]}], "summary": "x"}))


async def run(groups: int, batches: int, days: int) -> list[dict[str, int]]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    first = date(2026, 3, 1)
    clock = ManualClock(f"{first.isoformat()}T12:00:00Z")
    out: list[dict[str, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = await MemoryEngine.open(Path(tmp) / "memory.db", clock)
        async with FakeOpenAI(responder=_answer) as fake:
            llm = MemoryLLM(base_url=fake.url, model="mem-model", api_key="sk-bench-000000", timeout=5.0, retries=0)
            try:
                for d in range(days + 1):
                    day = (first + timedelta(days=d)).isoformat()
                    if d < days:
                        for g in range(groups):
                            chat = ("telegram", f"-100{g}")
                            for b in range(batches):
                                who = MEMBERS[b % len(MEMBERS)]
                                await engine.add_event(
                                    group_owner(*chat), day, f"{who[1]} planned item {b} of day {d}",
                                    channel=chat[0], chat_id=chat[1],
                                    provenance=Provenance(channel=chat[0], chat_id=chat[1], group=True,
                                                          speakers=(who[0],), said_by=(who[1],)))
                        for user in ("alice", "bob"):
                            await engine.add_event(user, day, f"{user} talked about day {d}",
                                                   channel="telegram", chat_id="1")
                    if d:  # the night after each day
                        before = len(fake.requests)
                        rep = await Compressor(engine, llm).daily()
                        row = await engine.db.fetchone(
                            "SELECT COUNT(*) FROM daily_events WHERE owner LIKE 'group:%' AND is_compressed = 0 "
                            "AND event_date < ?", (day,))
                        out.append({"night": d, "calls": len(fake.requests) - before, "events": rep.events,
                                    "group_days_left": int(row[0]) if row else 0})
                    clock.advance(86400)
            finally:
                await llm.aclose()
                await engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--days", type=int, default=7)
    a = ap.parse_args()
    rows = asyncio.run(run(a.groups, a.batches, a.days))
    for r in rows:
        print(f"night {r['night']}: {r['calls']} model calls, {r['events']} events compressed, "
              f"{r['group_days_left']} group events of earlier days left uncompressed")
    print(f"week: {sum(r['calls'] for r in rows)} model calls, {sum(r['events'] for r in rows)} events")


if __name__ == "__main__":
    main()
