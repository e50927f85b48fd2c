"""Interpreter settings for the long-running gateway process.

Applied by ``myclaw gateway`` (and ``scripts/bench_gateway.py``) once the
app has started, not by :class:`~gateway.app.App` itself, so tests and
library users keep the interpreter's defaults.

Garbage collection: by default CPython runs a young-generation collection
every 700 net allocations and, every 100 of those, a full one over every
tracked object, startup ones included (python-telegram-bot, aiohttp, httpx,
pydantic: a heap of ~70 MB). The gateway allocates a few thousand objects
per message (rows, JSON, Telegram objects), so collections ran inside
nearly every message and a full one stalled every chat for tens of
milliseconds. Measured with ``scripts/bench_gateway.py --chats 1000
--messages 3 --rate 100``: added latency p95 84-94 -> 40-45 ms (see
docs/BENCHMARKS.md, "Gateway throughput"). Here the startup heap is frozen
(never scanned again) and the young generation is collected every 20,000
allocations; reference cycles are still collected.

The GIL switch interval (5 ms) is left alone: 1, 0.5 and 0.2 ms changed
neither throughput nor the latency of an aiosqlite round trip measurably.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_runtime"]

GC_THRESHOLDS = (20_000, 50, 100)


def tune_runtime() -> None:
    """Freeze what exists now (call it after startup) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
