"""CPU a streamed turn pays for its drafts' beat (gateway/drafts.py).

Compares the beat as it is (a timer on the loop: ``Drafts.start`` /
``stop``) with the task per turn it replaced (a coroutine sleeping until
the next beat, cancelled when the turn ends), and with no beat at all, for
turns that end within the delay (most replies). Each turn yields to the
loop twice, as a real turn does at least.

    .venv/bin/python scripts/bench_beat.py [--turns 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.bus import InboundMessage, MessageBus  # noqa: E402
from gateway.drafts import Drafts  # noqa: E402

MSG = InboundMessage(channel="telegram", sender_id="7", chat_id="7", text="q", message_id="1")


def _drafts(bus: MessageBus) -> Drafts:
    return Drafts(bus, MSG, owner="telegram:7", delay=1.0, interval=1.0)


async def _task_per_turn(bus: MessageBus, turns: int) -> None:
    async def beat(drafts: Drafts) -> None:  # the replaced Drafts.run, in short
        while True:
            await asyncio.sleep(1.0)

    for _ in range(turns):
        task = asyncio.create_task(beat(_drafts(bus)))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)


async def _timer(bus: MessageBus, turns: int) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(turns):
        drafts = _drafts(bus)
        drafts.start(loop.call_later)
        await asyncio.sleep(0)
        drafts.stop()
        await asyncio.sleep(0)


async def _none(bus: MessageBus, turns: int) -> None:
    for _ in range(turns):
        _drafts(bus)
        await asyncio.sleep(0)
        await asyncio.sleep(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ways: dict[str, Callable[[MessageBus, int], Coroutine[Any, Any, None]]] = {
        "task per turn": _task_per_turn, "timer": _timer, "no beat": _none,
    }
    for n in range(args.rounds):
        row = []
        for name, way in ways.items():
            start = time.process_time()
            asyncio.run(way(MessageBus(), args.turns))
            row.append(f"{name} {(time.process_time() - start) / args.turns * 1e6:.1f} µs")
        print(f"round {n + 1}: " + ", ".join(row))


if __name__ == "__main__":
    main()
