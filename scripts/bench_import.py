"""A huge paste into MEMORY.md, imported (docs/BENCHMARKS.md, "A huge
MEMORY.md import"): how long the import of ``--lines`` pasted log lines
takes, and how long a reply's write waits behind it meanwhile (a fact
saved through the engine's single writer every ``--every`` seconds, as
the gateway would while the file sync imports).

    .venv/bin/python scripts/bench_import.py [--lines 60000] [--every 0.05] [--leased]

``--leased``: through ``migrate_leased`` under the ``file_sync`` lease, as
the file sync and ``myclaw memory migrate`` import (renewed between
batches, each write fenced), not ``migrate_files`` bare.

``--unclosed``: the same paste ending in a ``<!--`` never closed (the save
is skipped as a typo): the longest the event loop is held meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import Category, MemoryEngine, NewMemory, Source  # noqa: E402
from memory.filesync import migrate_leased  # noqa: E402
from memory.migrate import migrate_files  # noqa: E402


async def main(lines: int, every: float, leased: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as d:
        ws = Path(d)
        (ws / "memory").mkdir()
        text = "- The user's name is Mira\n" + "".join(
            f"- 2026-03-01T12:{i // 60 % 60:02d}:{i % 60:02d} worker-{i % 7} GET /api/items/{i} 200 {i % 97} ms "
            f"request_id={i:08x} upstream=ok cache=miss\n" for i in range(lines))
        (ws / "memory" / "MEMORY.md").write_text(text, encoding="utf-8")
        engine = await MemoryEngine.open(ws / "memory.db")
        waits: list[float] = []
        done = asyncio.Event()

        async def replies() -> None:
            n = 0
            while not done.is_set():
                t = time.perf_counter()
                await engine.add(NewMemory(owner="alice", content=f"reply fact {n}", tier=2,
                                           category=Category.DECISION, importance=0.5, source=Source.MANUAL))
                waits.append(time.perf_counter() - t)
                n += 1
                await asyncio.sleep(every)

        task = asyncio.create_task(replies())
        t0 = time.perf_counter()
        r = await (migrate_leased(ws, engine) if leased else migrate_files(ws, engine))
        took = time.perf_counter() - t0
        done.set()
        await task
        tier1 = len(await engine.list_memories("_global", tier=1, limit=1_000_000))
        tier2 = len(await engine.list_memories("_global", tier=2, limit=1_000_000))
        await engine.close()
    waits.sort()
    print(f"lines={lines} leased={leased} bytes={len(text.encode())} import_s={took:.1f} added={r.memories_added} "
          f"tier1={tier1} tier2={tier2}")
    print(f"reply writes during import: n={len(waits)} p50_ms={1000 * waits[len(waits) // 2]:.1f} "
          f"max_ms={1000 * waits[-1]:.1f}")


async def unclosed(lines: int) -> None:
    """The longest event-loop stall while a save with an unclosed comment is read and skipped."""
    with tempfile.TemporaryDirectory(prefix="bench-import-") as d:
        ws = Path(d)
        (ws / "memory").mkdir()
        text = "".join(f"- 用户喜欢在周末去爬山，经常和朋友讨论项目 Atlas 的进度 {i} <!-- 2026-01-05 -->\n"
                       for i in range(lines)) + "- the last line <!-- never closed\n"
        (ws / "memory" / "MEMORY.md").write_text(text, encoding="utf-8")
        engine = await MemoryEngine.open(ws / "memory.db")
        worst, done = 0.0, False

        async def ticks() -> None:
            nonlocal worst
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                worst, last = max(worst, now - last), now

        task = asyncio.create_task(ticks())
        await asyncio.sleep(0.01)
        r = await migrate_files(ws, engine, log_problems=False)
        done = True
        await task
        await engine.close()
    print(f"lines={lines} bytes={len(text.encode())} skipped={len(r.problems)} loop_stall_max_ms={1000 * worst:.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=60_000)
    ap.add_argument("--every", type=float, default=0.05)
    ap.add_argument("--unclosed", action="store_true", help="the loop's longest stall over a skipped save")
    ap.add_argument("--leased", action="store_true", help="through migrate_leased, as the file sync imports")
    a = ap.parse_args()
    asyncio.run(unclosed(a.lines) if a.unclosed else main(a.lines, a.every, a.leased))
