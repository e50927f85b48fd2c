"""What a group's flush pays to know which names two of its members have
gone by (memory/samenames.py; docs/BENCHMARKS.md, "Same names a flush").

A real memory.db with one group's own notes (owner ``group:telegram:<id>``,
each said by one of eight members, a few tagged ``Dad #3f9a`` as two Dads
were) and a tenth as many days, beside other groups' and users' rows; then
``--flushes`` flushes, each writing three new notes of the group (as its
batch would) and reading the names before its prompt. Prints the read's
time a flush, p50 / p95 / max (ms), cold (``shared_names``: every note and
day read again, what every flush did before) or through the cache the
extraction keeps (``SameNames``: the rows written since).

    .venv/bin/python scripts/bench_samenames.py [--notes 5000] [--flushes 60] [--mode cold|cached|both]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from memory import ManualClock, MemoryEngine, Provenance  # noqa: E402
from memory.extraction import _speaker_label  # noqa: E402
from memory.groupowner import group_owner, member_tag  # noqa: E402
from memory.samenames import SameNames, shared_names  # noqa: E402
from memory.types import Category, NewMemory  # noqa: E402

MEMBERS = tuple((f"telegram:{20 + i}", name) for i, name in
                enumerate(("Dad", "Mom", "Leo", "Ana", "Dad", "Sam", "Kim", "Max")))


def _note(owner: str, i: int) -> NewMemory:
    member, name = MEMBERS[i % len(MEMBERS)]
    said = f"{name} #{member_tag(member.split(':')[1])}" if name == "Dad" and i % 3 == 0 else name
    return NewMemory(owner=owner, content=f"The group planned outing number {i} at the lake",
                     category=Category.DECISION,
                     provenance=Provenance(channel="telegram", chat_id=owner.rsplit(":", 1)[1], group=True,
                                           speakers=(member,), said_by=(said,)))


async def _seed(engine: MemoryEngine, owner: str, notes: int) -> None:
    others = [group_owner("telegram", f"-200{g}") for g in range(3)] + [m for m, _ in MEMBERS[:4]]
    batch: list[tuple[NewMemory, str | None]] = []
    for i in range(notes):
        batch.append((_note(owner, i), None))
        if i % 5 == 0:  # the rest of the store: other groups' notes, the members' own facts
            o = others[i % len(others)]
            batch.append((NewMemory(owner=o, content=f"Other row number {i}"), None))
        if len(batch) >= 1000:
            await engine.add_many(batch)
            batch = []
    if batch:
        await engine.add_many(batch)
    for d in range(notes // 10):
        member, name = MEMBERS[d % len(MEMBERS)]
        await engine.add_event(owner, f"2026-02-{1 + d % 28:02d}", f"The group talked, batch {d}",
                               channel="telegram", chat_id=owner.rsplit(":", 1)[1],
                               provenance=Provenance(channel="telegram", chat_id=owner.rsplit(":", 1)[1],
                                                     group=True, speakers=(member,), said_by=(name,)))


async def run(notes: int, flushes: int, mode: str) -> list[float]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    clock = ManualClock("2026-03-01T12:00:00Z")
    owner = group_owner("telegram", "-1009")
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = await MemoryEngine.open(Path(tmp) / "memory.db", clock)
        try:
            await _seed(engine, owner, notes)
            names = SameNames()
            expected = await shared_names(engine.db, owner, _speaker_label)
            if mode == "cached":
                await names.read(engine.db, owner, _speaker_label)  # warm: the gateway's first flush of the group
            for f in range(flushes + 1):
                await engine.add_many([(_note(owner, notes + 3 * f + k), None) for k in range(3)])
                t0 = time.perf_counter()
                if mode == "cold":
                    got = await shared_names(engine.db, owner, _speaker_label)
                else:
                    got = await names.read(engine.db, owner, _speaker_label)
                if f:  # the first is a warm-up
                    times.append((time.perf_counter() - t0) * 1000)
                if got != expected:
                    raise SystemExit(f"{mode}: {sorted(got)} != {sorted(expected)}")
        finally:
            await engine.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=5000)
    ap.add_argument("--flushes", type=int, default=60)
    ap.add_argument("--mode", choices=("cold", "cached", "both"), default="both")
    args = ap.parse_args()
    for mode in (("cold", "cached") if args.mode == "both" else (args.mode,)):
        t = sorted(asyncio.run(run(args.notes, args.flushes, mode)))
        print(f"{mode:6} notes={args.notes} flushes={len(t)} p50={statistics.median(t):.2f} ms "
              f"p95={t[int(0.95 * (len(t) - 1))]:.2f} ms max={t[-1]:.2f} ms")


if __name__ == "__main__":
    main()
