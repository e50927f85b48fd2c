"""What the Feishu event-id dedup costs when full (docs/BENCHMARKS.md,
"Feishu event dedup").

``RecentIds`` keeps up to ``maxsize`` event ids (32 hex characters, as
Feishu's are) for 7 h, written behind to gateway.db's ``seen_ids``. This
fills one to ``maxsize`` and reports the process's RSS growth, then seeds
a real gateway.db with as many rows and times ``open()`` (what a restart
of a busy bot loads before it takes an event) and a write with its sweep.

    .venv/bin/python scripts/bench_dedup.py [--sizes 10000 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from channels.feishu.dedup import EVENT_IDS, RecentIds  # noqa: E402
from gateway.seenids import SeenIds  # noqa: E402
from gateway.sessions import SessionStore  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def memory(n: int) -> float:
    """MB of RSS a set of ``n`` ids adds (the peak grows, so the first run counts)."""
    before = _rss_mb()
    ids = RecentIds(maxsize=n, clock=lambda: 1000.0)
    for _ in range(n):
        ids.seen_before(uuid.uuid4().hex)
    return _rss_mb() - before


async def load(n: int) -> tuple[float, float]:
    """Seconds ``open()`` takes to load ``n`` ids from gateway.db, and a write with its sweep."""
    with tempfile.TemporaryDirectory() as d:
        sessions = await SessionStore.open(Path(d) / "gateway.db")
        try:
            store = SeenIds(sessions.db, "feishu", "event")
            now = time.time()
            span = 6 * 3600 / n  # seen over the last 6 h: all within the TTL
            await store.write([(uuid.uuid4().hex, now - 6 * 3600 + i * span) for i in range(n)],
                              expired_before=None, keep=n)
            ids = RecentIds(maxsize=n, store=store)
            t0 = time.perf_counter()
            await ids.open()
            opened = time.perf_counter() - t0
            assert len(ids) == n
            ids.seen_before("one more")
            t0 = time.perf_counter()
            await ids.flush(sweep=True)
            swept = time.perf_counter() - t0
            await ids.close()
        finally:
            await sessions.close()
    return opened, swept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, EVENT_IDS])
    args = ap.parse_args()
    print("| ids | RSS growth | open() from gateway.db | a write with the sweep |")
    print("|---|---|---|---|")
    for n in sorted(args.sizes):
        mb = memory(n)
        opened, swept = asyncio.run(load(n))
        print(f"| {n:,} | {mb:.1f} MB | {opened * 1000:.0f} ms | {swept * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
