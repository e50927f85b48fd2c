"""What streaming a reply costs the gateway, in two parts.

**The beat** (gateway/drafts.py): compares the beat as it is (a timer on the loop: ``Drafts.start`` /
``stop``) with the task per turn it replaced (a coroutine sleeping until
the next beat, cancelled when the turn ends), and with no beat at all, for
turns that end within the delay (most replies). Each turn yields to the
loop twice, as a real turn does at least.

**A streamed chat** (gateway/llm.py, llm_stream.py, aiohttp_transport.py):
``LLMClient.chat(on_text=)`` against the fake OpenAI server in the same
process (so the CPU is the client's and the fake's together), and how many
async generators per chat were left suspended for the event loop to close
in a task of its own when collected.

    .venv/bin/python scripts/bench_stream.py [--turns 20000] [--chats 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from gateway.aiohttp_transport import AiohttpTransport  # noqa: E402
from gateway.bus import InboundMessage, MessageBus  # noqa: E402
from gateway.drafts import Drafts  # noqa: E402
from gateway.llm import LLMClient  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

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


class _Finalized:
    """Counts the async generators the loop had to close (by qualname)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._hook = asyncio.BaseEventLoop._asyncgen_finalizer_hook  # type: ignore[attr-defined]

    def install(self) -> None:
        counts, hook = self.counts, self._hook

        def counting(loop: asyncio.BaseEventLoop, agen: object) -> None:
            counts[getattr(agen, "__qualname__", "?")] += 1
            hook(loop, agen)

        asyncio.BaseEventLoop._asyncgen_finalizer_hook = counting  # type: ignore[attr-defined]


async def _chats(n: int, finalized: _Finalized) -> tuple[float, float]:
    """CPU µs a streamed chat and generators finalized a chat."""
    async with FakeOpenAI(api_key="k") as llm:
        client = httpx.AsyncClient(transport=AiohttpTransport(max_connections=10))
        chat = LLMClient(base_url=llm.url, api_key="k", model="m", client=client)
        try:
            for _ in range(20):  # connections made, caches warm
                await chat.chat([{"role": "user", "content": "hi"}], on_text=lambda _: None)
            finalized.counts.clear()
            start = time.process_time()
            for _ in range(n):
                await chat.chat([{"role": "user", "content": "hi there"}], on_text=lambda _: None)
            cpu = time.process_time() - start
        finally:
            await client.aclose()
    return cpu / n * 1e6, sum(finalized.counts.values()) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    parser.add_argument("--chats", type=int, default=1000)
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
        print(f"round {n + 1}: beat: " + ", ".join(row))
    finalized = _Finalized()
    finalized.install()
    for n in range(args.rounds):
        cpu, left = asyncio.run(_chats(args.chats, finalized))
        print(f"round {n + 1}: streamed chat {cpu:.0f} µs CPU (client and fake), {left:.2f} generators closed by the loop")


if __name__ == "__main__":
    main()
