"""The pre-compaction flush's cost on the event loop (docs/BENCHMARKS.md,
"Pre-compaction flush", its "Paced" part).

The real ``App`` (memory on, a SQLite file in a temp dir, memories seeded
as ``scripts/bench_gateway.py`` seeds them) against the instant fake LLM of
``bench_gateway`` in a process of its own, so the event loop's thread CPU
measured here is the gateway's alone. Each of ``--chats`` users has
``--turns`` turns buffered (a message and its reply each, the gateway's
words), then the window of every chat moves past its first line at once, as
under load at 100 messages/s, and one extraction tick flushes them all.

Reported: the tick's wall time, the event loop's thread CPU per flush (what
a reply waits behind; independent of other processes' load, unlike a
latency), extraction calls, how many flushes ran at once, how long after
the windows moved each flush ended (how long the lines were in neither the
prompt's window nor recall), and the event loop's lag meanwhile.

    .venv/bin/python scripts/bench_flush.py                   # 100 chats x 11 turns
    .venv/bin/python scripts/bench_flush.py --chats 50 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import tempfile
import time
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_gateway import API_KEY, EN, FIRST_USER, ZH, _instant_llm, _pct, seed  # noqa: E402  (scripts/ is sys.path[0])
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402


def run_llm(conn: Connection) -> None:
    asyncio.run(_llm(conn))


async def _llm(conn: Connection) -> None:
    async with FakeOpenAI(api_key=API_KEY, responder=_instant_llm) as llm:
        conn.send(llm.url)
        await asyncio.to_thread(conn.recv)  # "stop"
        conn.send(sum(1 for r in llm.requests if r.get("response_format")))


async def lag_probe(lags: list[float], every: float = 0.005) -> None:
    while True:
        at = time.perf_counter()
        await asyncio.sleep(every)
        lags.append((time.perf_counter() - at - every) * 1000)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.app import App
    from gateway.config import Paths, load_config
    from gateway.logging import configure_logging
    from memory.backend import Turn
    from memory.clock import format_ts
    from memory.extraction import ExtractionService

    configure_logging(level="WARNING")
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=run_llm, args=(child,), daemon=True)
    proc.start()
    try:
        url = await asyncio.to_thread(parent.recv)
        with tempfile.TemporaryDirectory(prefix="myclaw-bench-flush-") as tmp:
            doc = {"provider": {"baseUrl": url, "apiKey": API_KEY, "maxRetries": 0, "timeout": "30s"},
                   "agent": {"model": "bench-model"},
                   # never started: App.open() wants a channel configured
                   "channels": {"telegram": {"enabled": True, "token": "123:bench", "baseUrl": url}}}
            (Path(tmp) / "config.json").write_text(json.dumps(doc), encoding="utf-8")
            cfg = load_config(Path(tmp) / "config.json", env={"MYCLAW_HOME": tmp}, require=True)
            app = App(cfg, Paths(Path(tmp)))
            await app.open()
            try:
                await seed(app, args.chats)
                svc = app.extraction
                assert isinstance(svc, ExtractionService) and app.backend is not None
                engine = app.backend.engine  # type: ignore[attr-defined]
                running = {"now": 0, "max": 0}
                wave = [0.0]  # when the round's windows moved
                done_ms: list[float] = []  # each flush's end, from then: how long its lines waited

                async def on_step(name: str, owner: str) -> None:
                    if name == "read":
                        running["now"] += 1
                        running["max"] = max(running["max"], running["now"])
                    elif name == "delete":
                        running["now"] -= 1
                        done_ms.append((time.perf_counter() - wave[0]) * 1000)

                svc.on_step = on_step
                if args.pace is not None:
                    svc.window_pace = args.pace  # type: ignore[attr-defined,unused-ignore]  # absent before it was added
                ticks: list[float] = []
                lags: list[float] = []
                cpu_ms: list[float] = []
                flushes = 0
                for rnd in range(args.rounds):
                    start = engine.clock.now()
                    for chat in range(args.chats):
                        lines = ZH if chat % 2 == 0 else EN
                        user = str(FIRST_USER + chat)
                        turns = []
                        for i in range(args.turns):
                            at = start + timedelta(seconds=i)
                            said = f"{lines[i % len(lines)]} (c{chat}-{rnd * args.turns + i})"
                            turns += [Turn(owner=f"telegram:{user}", channel="telegram", chat_id=user, role="user",
                                           content=said, sender_id=user, message_id=f"{rnd}-{i}", at=at),
                                      Turn(owner=f"telegram:{user}", channel="telegram", chat_id=user,
                                           role="assistant", content=f"ok (c{chat}-{i})", at=at)]
                        await app.backend.buffer(turns)
                    since = format_ts(start + timedelta(seconds=1))  # the first turn left every window
                    for chat in range(args.chats):
                        svc.left_window("telegram", str(FIRST_USER + chat), since)
                    cpu0, wall0 = time.thread_time(), time.perf_counter()
                    wave[0] = wall0
                    probe = asyncio.create_task(lag_probe(lags))
                    reports = await svc.tick()
                    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
                    probe.cancel()
                    assert all(r.ok for r in reports), [r.error for r in reports if not r.ok][:3]
                    flushes += len(reports)
                    ticks.append(wall * 1000)
                    cpu_ms.append(cpu * 1000 / max(1, len(reports)))
            finally:
                await app.close()
        parent.send("stop")
        calls = await asyncio.to_thread(parent.recv)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
    return {
        "chats": args.chats, "turns": args.turns, "rounds": args.rounds, "flushes": flushes,
        "extraction_requests": calls,
        "tick_ms": [round(t, 1) for t in ticks],
        "loop_cpu_ms_per_flush": [round(c, 2) for c in cpu_ms],
        "loop_cpu_ms_per_flush_p50": _pct(cpu_ms, 0.5),
        "window_pace": getattr(svc, "window_pace", None),
        "flushes_at_once_max": running["max"],
        "flushed_after_p50_ms": _pct(done_ms, 0.5), "flushed_after_p95_ms": _pct(done_ms, 0.95),
        # a task waking every 5 ms during the ticks: how late it woke (what
        # a reply's next step waits for the loop)
        "loop_lag_p50_ms": _pct(lags, 0.5), "loop_lag_p95_ms": _pct(lags, 0.95), "loop_lag_max_ms": _pct(lags, 1.0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="The pre-compaction flush's event-loop CPU, one tick of many chats.")
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--turns", type=int, default=11, help="turns buffered per chat before its window moves")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pace", type=float, default=None,
                    help="ExtractionService.window_pace (default: the service's own)")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    result = asyncio.run(bench(args))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
