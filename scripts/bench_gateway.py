"""Gateway throughput (docs/BENCHMARKS.md, "Gateway throughput").

1,000 private chats x 10 messages through the whole gateway: the real
``App`` (memory on: a SQLite file in a temp dir with memories seeded for
every user; sessions, prompts, agent, write-path buffering, cron) and the
real ``TelegramChannel`` (python-telegram-bot, long polling), against the
fake Telegram Bot API (``record=False``) and an instant fake LLM, over HTTP
on 127.0.0.1.

The fakes run in a separate process (``multiprocessing``, spawn), so the
gateway process measured here has one core to itself and its RSS is its
own. That child queues every update at once (round-robin over the chats:
message 1 of every chat, then message 2, ...), times from the first push
to the last ``sendMessage`` it serves, and checks that every message was
answered exactly once, in order within its chat (each text carries a tag
the fake LLM echoes back).

Reported:

* messages per second, end to end (first push -> last reply delivered);
* the gateway's added latency p50/p95 without the LLM call
  (``ProcessLoop.stats.added_ms``: from a message's turn to its reply on
  the outbound queue), and the wait before a message's turn;
* end-to-end latency p50/p95 as the fake Telegram sees it (an update
  queued -> its reply's ``sendMessage`` served: long-poll pickup, the
  gateway, the fake LLM over HTTP, the send), which no bookkeeping inside
  the gateway can shift between "added" and "LLM";
* nothing lost: answered / duplicated / missing / out of order;
* RSS of the gateway process: before the run, at 25/50/75/100% of the
  replies, peak (VmHWM).

    .venv/bin/python scripts/bench_gateway.py                # 1,000 x 10
    .venv/bin/python scripts/bench_gateway.py --chats 100 --messages 5

``--with-file KB``: every message is a text file of that size (words that
compress as prose does, different per message) with the message as its
caption, so ``added_ms`` includes what a turn carrying a document costs the
gateway after it was read (keeping it for ``file_read``: gateway/recent_files.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.openai_server import FakeOpenAI, Reply  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, SentMessage  # noqa: E402

API_KEY = "sk-bench-0123456789abcdef"
FIRST_USER = 100_000
ZH = [
    "你好", "今天天气不错，适合出去走走", "我之前说过我喜欢什么咖啡？", "帮我想想周末去哪里玩", "好的",
    "还记得我们用的是哪个数据库吗？", "谢谢", "我最近在学做菜", "你记得我的项目叫什么吗", "晚安",
]
EN = [
    "hi there", "what's a good name for a cat?", "do you remember which coffee I like?", "can you help me plan a trip",
    "ok", "remind me which database we chose for the project", "thanks!", "I'm learning to cook lately",
    "what did I say about my project last time?", "good night",
]
SEED_ZH = ["我喜欢喝燕麦拿铁咖啡", "项目 {p} 的数据库选了 Postgres", "我的项目叫 {p}", "周末常去西湖边散步", "我养了一只猫叫年糕"]
SEED_EN = ["I like oat milk flat white coffee", "For {p} we chose Postgres as the database", "My project is called {p}",
           "I go hiking most weekends", "I have a cat named Mochi"]
_TAG = re.compile(r"\(c(\d+)-(\d+)\)$")


def message_text(chat: int, i: int) -> str:
    lines = ZH if chat % 2 == 0 else EN
    return f"{lines[i % len(lines)]} (c{chat}-{i})"


# -- the fakes' process -----------------------------------------------------------------
def _instant_llm(body: dict[str, Any]) -> Reply:
    if body.get("response_format"):  # the write path's extraction: one fact and a summary per batch
        conv = str(body["messages"][-1]["content"])
        user = re.search(r"\(c(\d+)-", conv)
        who = f"user {user.group(1)}" if user else "the user"
        return Reply(content=json.dumps({
            "facts": [{"content": f"{who} talked about coffee, cats and their project", "category": "preference",
                       "importance": 0.5, "same_as": None, "updates": None}],
            "summary": f"{who} chatted with the assistant",
        }))
    m = _TAG.search(str(body["messages"][-1]["content"]))
    return Reply(content=f"ok ({m.group(0)[1:-1]})" if m else "ok")


def document_text(chat: int, i: int, kib: int) -> bytes:
    """``kib`` KB of words, pseudo-random per message: zlib gets prose's
    ratio from it, not a repeated line's."""
    rng = random.Random(chat * 100_003 + i)
    words = ["budget", "revenue", "region", "quarter", "launch", "server", "licence", "plan", "team", "risk",
             "Friday", "customer", "contract", "migration", "database", "latency", "invoice", "supplier"]
    out: list[str] = []
    size = 0
    while size < kib * 1024:
        line = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(12)) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out).encode()


def run_fakes(conn: Connection, chats: int, messages: int, timeout: float, rate: float, burst: int,
              file_kib: int = 0) -> None:
    asyncio.run(_fakes(conn, chats, messages, timeout, rate, burst, file_kib))


async def _fakes(conn: Connection, chats: int, messages: int, timeout: float, rate: float, burst: int,
                 file_kib: int = 0) -> None:
    total = chats * messages
    answered: dict[int, list[int]] = defaultdict(list)
    strays = 0
    done = asyncio.Event()
    last = 0.0
    pushed_at: dict[tuple[int, int], float] = {}
    e2e_ms: list[float] = []  # update queued here -> its reply's sendMessage served here

    def on_send(m: SentMessage) -> None:
        nonlocal strays, last
        tag = re.search(r"\(c(\d+)-(\d+)\)", m.text)
        if tag is None or int(tag.group(1)) != m.chat_id - FIRST_USER:
            strays += 1
        else:
            answered[int(tag.group(1))].append(int(tag.group(2)))
            at = pushed_at.pop((int(tag.group(1)), int(tag.group(2))), None)
            if at is not None:
                e2e_ms.append((time.perf_counter() - at) * 1000)
        last = time.perf_counter()
        if tg.sent_count >= total:
            done.set()

    async with FakeTelegram(record=False) as tg, FakeOpenAI(api_key=API_KEY, responder=_instant_llm) as llm:
        tg.on_send = on_send
        conn.send({"telegram": tg.base_url, "token": tg.token, "openai": llm.url})
        files = {(chat, i): document_text(chat, i, file_kib) for i in range(messages) for chat in range(chats)} \
            if file_kib else {}
        await asyncio.to_thread(conn.recv)  # "go": the gateway is up
        first, cpu0 = time.perf_counter(), _cpu_seconds()
        pushed = 0
        for i in range(messages):
            for chat in range(chats):
                if rate and pushed % burst == 0:  # paced: `burst` messages at a time, on schedule
                    await asyncio.sleep(max(0.0, first + pushed / rate - time.perf_counter()))
                user = FIRST_USER + chat
                pushed_at[(chat, i)] = time.perf_counter()
                if file_kib:
                    tg.push_document(user, user, files[(chat, i)], mime_type="text/plain",
                                     file_name=f"notes-{chat}-{i}.txt", caption=message_text(chat, i))
                else:
                    tg.push_text(user, user, message_text(chat, i), username=f"user{chat}")
                pushed += 1
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except TimeoutError:
            pass
        elapsed = last - first
        fakes_cpu = (_cpu_seconds() - cpu0) / max(1e-9, time.perf_counter() - first)
        await asyncio.sleep(1.0)  # a late duplicate would show up now
        counts = [len(v) for v in answered.values()]
        conn.send(
            {
                "pushed": total,
                "sent": tg.sent_count,
                "seconds": round(elapsed, 3),
                "messages_per_second": round(total / elapsed, 1) if elapsed > 0 and tg.sent_count >= total else 0.0,
                "answered_once": sum(1 for v in answered.values() for _ in set(v)),
                "duplicates": sum(counts) - sum(len(set(v)) for v in answered.values()),
                "missing": total - sum(len(set(v)) for v in answered.values()),
                "out_of_order_chats": sum(1 for v in answered.values() if v != sorted(v)),
                "strays": strays,
                # the whole round: long-poll pickup, gateway, LLM call, sendMessage
                "end_to_end_p50_ms": _pct(e2e_ms, 0.5),
                "end_to_end_p95_ms": _pct(e2e_ms, 0.95),
                "llm_requests": len(llm.requests),
                "embedding_requests": len(llm.embedding_requests),
                "extraction_requests": sum(1 for r in llm.requests if r.get("response_format")),
                "telegram_calls": dict(tg.counts),
                "fakes_cpu_share": round(fakes_cpu, 2),
            }
        )
        await asyncio.to_thread(conn.recv)  # "stop"


# -- the gateway's process ------------------------------------------------------------
def rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _pct(values: Any, q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2) if s else 0.0


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


async def seed(app: Any, chats: int) -> int:
    from memory import NewMemory, Provenance
    from memory.types import Category

    items = []
    for chat in range(chats):
        user = f"telegram:{FIRST_USER + chat}"
        lines = SEED_ZH if chat % 2 == 0 else SEED_EN
        for text in lines:
            items.append(
                (
                    NewMemory(
                        owner=user,
                        content=text.format(p=f"proj{chat % 50}"),
                        category=Category.IDENTITY if "喜欢" in text or "like" in text else Category.EVENT,
                        provenance=Provenance(channel="telegram", chat_id=str(FIRST_USER + chat)),
                    ),
                    None,
                )
            )
    await app.backend.engine.add_many(items)
    return len(items)


@contextmanager
def fakes_process(chats: int, messages: int, timeout: float, rate: float, burst: int,
                  with_file: int) -> Iterator[Connection]:
    """The fakes (:func:`run_fakes`) in a process of their own, and the
    pipe to it; the process is waited for, then ended, on the way out."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=run_fakes, args=(child, chats, messages, timeout, rate, burst, with_file), daemon=True)
    proc.start()
    try:
        yield parent
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.app import App
    from gateway.config import Paths, load_config
    from gateway.logging import configure_logging
    from gateway.runtime import tune_runtime

    configure_logging(level="WARNING")
    total = args.chats * args.messages
    with fakes_process(args.chats, args.messages, args.timeout, args.rate, args.burst, args.with_file) as parent:
        urls = await asyncio.to_thread(parent.recv)
        with tempfile.TemporaryDirectory(prefix="myclaw-bench-") as tmp:
            doc = {
                "provider": {"baseUrl": urls["openai"], "apiKey": API_KEY, "maxRetries": 0, "timeout": "30s"},
                "agent": {"model": "bench-model", "streaming": {"enabled": not args.no_streaming}},
                "channels": {"telegram": {"enabled": True, "token": urls["token"], "baseUrl": urls["telegram"]}},
                # Each chat sends its messages within seconds: limits far above
                # that, so every message is answered and the limiter still runs.
                "gateway": {"maxConcurrentChats": args.concurrency, "rateLimit": {"perMinute": 10_000, "perHour": 100_000}}
                | ({"historyCacheRows": args.history_cache_rows} if args.history_cache_rows is not None else {}),
            }
            if args.extract_after:  # the write path drains the buffer during the run, as in steady use
                doc["memory"] = {"extraction": {"quietGap": f"{args.extract_after}s"}}
            if args.hybrid:  # hybrid recall against the fake's /v1/embeddings (64-dim hashed words)
                doc.setdefault("memory", {})["embedding"] = {"enabled": True, "model": "bench-embed"}
            (Path(tmp) / "config.json").write_text(json.dumps(doc), encoding="utf-8")
            cfg = load_config(Path(tmp) / "config.json", env={"MYCLAW_HOME": tmp}, require=True)
            app = App(cfg, Paths(Path(tmp)))
            try:
                await app.open()
                seeded = await seed(app, args.chats)
                if args.hybrid:
                    assert app.vectorizer is not None
                    await app.vectorizer.drain()  # every seeded memory has its vector before the run
                if args.no_extraction:  # diagnosis: the write path's background loop left out
                    app.extraction = None
                elif args.window_pace is not None:
                    from memory.extraction import ExtractionService
                    assert isinstance(app.extraction, ExtractionService)
                    app.extraction.window_pace = args.window_pace
                await app.start()
                assert app.loop is not None and "telegram" in app.channels, app.failed_channels
                rss = {"before": rss_kib()}
                marks = [(f"{q}%", total * q // 100) for q in (25, 50, 75, 100)]
                depth = {"inbound": 0, "outbound": 0}
                db_kib: dict[str, int] = {}  # SQLite files (with WAL): their page caches grow with them
                outbound = app.bus.outbound_queue("telegram")

                async def sample() -> None:
                    while marks:
                        replied = app.loop.stats.replied if app.loop else 0
                        while marks and replied >= marks[0][1]:
                            mark = marks.pop(0)[0]
                            rss[mark] = rss_kib()
                            db_kib[mark] = sum(f.stat().st_size for f in (Path(tmp) / "data").glob("*.db*")) // 1024
                        depth["inbound"] = max(depth["inbound"], app.bus.inbound.qsize())
                        depth["outbound"] = max(depth["outbound"], outbound.qsize())
                        await asyncio.sleep(0.05)

                sampler = asyncio.create_task(sample())
                if not args.default_runtime:
                    tune_runtime()  # as `myclaw gateway` does once started
                cpu0, wall0, loop_cpu0 = _cpu_seconds(), time.perf_counter(), time.thread_time()
                parent.send("go")
                result: dict[str, Any] = await asyncio.to_thread(parent.recv)
                cpu, wall = _cpu_seconds() - cpu0, time.perf_counter() - wall0
                loop_cpu = time.thread_time() - loop_cpu0  # this thread runs the event loop
                sampler.cancel()
                stats = app.loop.stats
                summary = stats.summary()
                result.update(
                    chats=args.chats,
                    messages_per_chat=args.messages,
                    offered_rate=args.rate or "all at once",
                    file_kib=args.with_file or None,
                    burst=args.burst if args.rate else None,
                    seeded_memories=seeded,
                    retrievals=stats.retrievals,
                    retrieval_share=round(stats.retrievals / max(1, stats.received), 3),
                    buffered_rows=stats.buffered,
                    loop_failed=stats.failed,
                    loop_errors=stats.errors,
                    added_p50_ms=summary["added_p50_ms"],
                    added_p95_ms=summary["added_p95_ms"],
                    added_max_ms=summary["added_max_ms"],
                    wait_p95_ms=summary["wait_p95_ms"],
                    max_queue_depth=depth,
                    retrieval_p50_ms=_pct(stats.retrieval_ms, 0.5),
                    llm_p50_ms=_pct(stats.llm_ms, 0.5),
                    rss_mib={k: round(v / 1024, 1) for k, v in rss.items()},
                    rss_peak_mib=round(rss_kib("VmHWM") / 1024, 1),
                    sqlite_files_mib={k: round(v / 1024, 1) for k, v in db_kib.items()},
                    # includes the ~1 s the fakes wait for late duplicates
                    gateway_cpu_share=round(cpu / wall, 2),
                    gc_tuned=not args.default_runtime,
                    # per message: the whole process (SQLite threads included),
                    # and the event loop's thread alone (it holds the GIL for
                    # all the Python work, so it bounds throughput on its own)
                    gateway_cpu_ms_per_message=round(cpu * 1000 / total, 2),
                    loop_thread_cpu_ms_per_message=round(loop_cpu * 1000 / total, 2),
                    load_average=[round(x, 2) for x in os.getloadavg()],
                )
                if args.hybrid:
                    hybrid = app.backend.retriever  # type: ignore[union-attr]
                    result.update(hybrid_fallbacks=hybrid.fallbacks)
            finally:
                await app.close()
                parent.send("stop")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description="Gateway throughput: N chats x M messages through the real Telegram channel.")
    ap.add_argument("--chats", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=10, help="messages per chat")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the last reply")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="offered load in messages/s (default 0: every message queued at once, which measures capacity)")
    ap.add_argument("--burst", type=int, default=1,
                    help="with --rate: queue this many messages at a time (default 1: evenly spaced; "
                         "10 was the fixed behaviour before, a burst every 100 ms at 100/s)")
    ap.add_argument("--concurrency", type=int, default=64, help="gateway.maxConcurrentChats (default: the config default)")
    ap.add_argument("--history-cache-rows", type=int, default=None, metavar="N",
                    help="gateway.historyCacheRows (default: the config's 2,048; 20,000 holds every window of 1,000 chats)")
    ap.add_argument("--extract-after", type=int, default=0, metavar="SECONDS",
                    help="memory.extraction.quietGap for the run (default: the config's 3 minutes, so a short run "
                         "never extracts and the extraction buffer only grows); the fake LLM answers extraction calls")
    ap.add_argument("--no-streaming", action="store_true",
                    help="agent.streaming off: whole completions, no drafts (streaming is the default)")
    ap.add_argument("--no-extraction", action="store_true", help="do not start the extraction service (diagnosis)")
    ap.add_argument("--window-pace", type=float, default=None, metavar="X",
                    help="ExtractionService.window_pace: a window flush's pause before the next, times its duration "
                         "(diagnosis; default: the service's own)")
    ap.add_argument("--default-runtime", action="store_true",
                    help="keep the interpreter's GC settings (diagnosis; see gateway/runtime.py)")
    ap.add_argument("--hybrid", action="store_true",
                    help="hybrid recall on (memory.embedding), against the fake's /v1/embeddings")
    ap.add_argument("--with-file", type=int, default=0, metavar="KB",
                    help="every message is a text file of KB kilobytes with the message as its caption")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    result = asyncio.run(bench(args))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    ok = result["missing"] == 0 and result["duplicates"] == 0 and result["strays"] == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
