"""A year of one user, judged by what the prompt holds (docs/BENCHMARKS.md,
"A year of one user").

Alice chats three evenings a week for a year about her job, two projects
that start and end (and a third that starts), a move from Berlin to Munich,
a diet and an editor theme that change; Bob chats beside her, the privacy
control. Through the real ``App`` on the loopback fake model, a moved clock,
the nightly daily compression and Monday's weekly one (decay, merges, the
profile refresh) run as in production: the story and the scripted memory
model are tests/gateway/yearwalk.py's, whose first seven months are the
test tests/gateway/test_year_e2e.py.

At months 1, 3, 6 and 12 Alice asks six questions in a new conversation;
printed for each: the Core Memory the system prompt holds, the recalled
block's lines, the turn's wall time; then memory.db's size and row counts,
``SqliteMemory.recall``'s median over the six questions (95 calls, on a
copy of memory.db: a recall counts as an access, which decay reads), and
at the end the longest background tick (a night's jobs), the memory-model
calls and whether any of Bob's words reached a request made for Alice.

    .venv/bin/python scripts/walk_year.py              # the year, ~20 s
    .venv/bin/python scripts/walk_year.py --days 120   # the first four months
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Imported by name: the walk lives with the tests, which mypy does not check
# ([tool.mypy] files), and a plain import would have it follow them.
_walk: Any = importlib.import_module("tests.gateway.yearwalk")
BOB_WORDS, core_memory, memories_block, walk = _walk.BOB_WORDS, _walk.core_memory, _walk.memories_block, _walk.walk


async def main(days: int, keep: Path | None) -> None:
    from gateway.logging import configure_logging

    configure_logging(level="WARNING")
    with tempfile.TemporaryDirectory(prefix="yearwalk-") as tmp:
        home = keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        points = {d: label for d, label in ((27, "month 1"), (86, "month 3"), (178, "month 6"), (361, "month 12"))
                  if d < days}
        t = time.perf_counter()
        year = await walk(home, days=days, checkpoints=points)
        took = time.perf_counter() - t
    for cp in year.checkpoints:
        print(f"\n===== {cp.label} ({cp.day}): recall median {cp.recall_ms:.2f} ms")
        print("sizes: " + ", ".join(f"{k} {v}" for k, v in cp.sizes.items()))
        first = next(iter(cp.asked.values()))
        print("Core Memory:\n" + core_memory(first))
        for q, body in cp.asked.items():
            block = [line for line in memories_block(body).splitlines() if line.startswith(("- [", "  ("))]
            print(f"--- {q}  ({cp.seconds[q] * 1000:.0f} ms turn)")
            print("\n".join(block) or "(no block)")
    leaks = sum(any(w in json.dumps(b, ensure_ascii=False) for w in BOB_WORDS) for b in year.alice_requests)
    print(f"\nwalk {took:.1f} s; longest night's tick {year.longest_job[1] * 1000:.0f} ms at {year.longest_job[0]}")
    print("memory-model calls: " + ", ".join(f"{k} {v}" for k, v in sorted(year.model_calls.items())))
    print(f"requests for Alice: {len(year.alice_requests)}, with Bob's words: {leaks}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=364)
    ap.add_argument("--keep", type=Path, help="a directory to keep the year's files in (memory.db, gateway.db)")
    args = ap.parse_args()
    asyncio.run(main(args.days, args.keep))
