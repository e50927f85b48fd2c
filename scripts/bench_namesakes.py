"""What the chat prompt's same-name tags cost a group's reply
(docs/BENCHMARKS.md, "A group's names for the prompt").

A real memory.db with one group's own notes (memory/groupnotes.py), each of
one member's lines, 40 members (two of them "Dad"), and a few lines
waiting in the buffer. Times ``SqliteMemory.shared_names`` (memory/namesakes.py)
as the loop calls it before each group reply: warm (nothing changed since
the last reply: no read), after another owner's write (the index stamp
moved: the group's rows counted by their indexes, no read), and after the
group's own write (a note: one read of the group's names,
``samenames.shared_names`` and who went by each name).

    .venv/bin/python scripts/bench_namesakes.py [--notes 500 5000] [--replies 2000]
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

from memory import ManualClock, MemoryEngine, NewMemory, Provenance  # noqa: E402
from memory.backend import Turn  # noqa: E402
from memory.groupowner import group_owner, member_label  # noqa: E402
from memory.samenames import shared_names  # noqa: E402
from memory.service import SqliteMemory  # noqa: E402

CHAT = ("telegram", "-100500")
OWNER = group_owner(*CHAT)
MEMBERS = [(f"telegram:{100 + i}", "Dad" if i < 2 else f"Member {i}") for i in range(40)]


def _ms(samples: list[float]) -> str:
    s = sorted(samples)
    return f"p50 {statistics.median(s) * 1000:.3f} ms, p95 {s[int(len(s) * 0.95)] * 1000:.3f} ms"


async def run(notes: int, replies: int) -> dict[str, str]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    clock = ManualClock("2026-03-01T12:00:00Z")
    with tempfile.TemporaryDirectory() as tmp:
        engine = await MemoryEngine.open(Path(tmp) / "memory.db", clock)
        memory = SqliteMemory(engine)
        try:
            for i in range(notes):
                member, name = MEMBERS[i % len(MEMBERS)]
                await engine.add(NewMemory(owner=OWNER, content=f"note {i} of the group about plan {i % 97}",
                                           provenance=Provenance(channel=CHAT[0], chat_id=CHAT[1], group=True,
                                                                 speakers=(member,), said_by=(name,))))
            await memory.buffer([Turn(owner=m, channel=CHAT[0], chat_id=CHAT[1], role="user", content="hi",
                                      sender_id=m.split(":")[1], message_id=f"b{j}", group=True, speaker_name=n)
                                 for j, (m, n) in enumerate(MEMBERS[:10])])
            await memory.shared_names(*CHAT)
            warm: list[float] = []
            for _ in range(replies):
                t0 = time.perf_counter()
                await memory.shared_names(*CHAT)
                warm.append(time.perf_counter() - t0)
            elsewhere: list[float] = []
            for i in range(200):
                await engine.add(NewMemory(owner="alice", content=f"alice's fact {i}"))
                t0 = time.perf_counter()
                await memory.shared_names(*CHAT)
                elsewhere.append(time.perf_counter() - t0)
            alone: list[float] = []
            for _ in range(20):
                t0 = time.perf_counter()
                await shared_names(engine.db, OWNER, member_label)
                alone.append(time.perf_counter() - t0)
            changed: list[float] = []
            for i in range(50):
                member, name = MEMBERS[i % len(MEMBERS)]
                await engine.add(NewMemory(owner=OWNER, content=f"a new note {i}", provenance=Provenance(
                    channel=CHAT[0], chat_id=CHAT[1], group=True, speakers=(member,), said_by=(name,))))
                t0 = time.perf_counter()
                known = await memory.shared_names(*CHAT)
                changed.append(time.perf_counter() - t0)
            assert known.shared == {"dad"}
            return {"notes": str(notes), "warm (no change)": _ms(warm),
                    "another owner's write (the group's rows counted)": _ms(elsewhere),
                    "the group's write (one read)": _ms(changed), "of which samenames.shared_names": _ms(alone),
                    "reads": str(memory.namesakes.reads)}
        finally:
            await engine.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, nargs="+", default=[500, 5000])
    ap.add_argument("--replies", type=int, default=2000)
    args = ap.parse_args()
    for n in args.notes:
        print(asyncio.run(run(n, args.replies)))


if __name__ == "__main__":
    main()
