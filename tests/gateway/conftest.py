from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.agent import Agent
from gateway.bus import Forwarded, InboundMessage, MessageBus, OutboundMessage
from gateway.commands import UserCommands
from gateway.incognito import Incognito
from gateway.llm import LLMClient
from gateway.loop import ProcessLoop
from gateway.memory_tools import memory_tools
from gateway.prompt import PromptBuilder
from gateway.ratelimit import RateLimiter
from gateway.sessions import SessionStore
from memory import IdentityMap, ManualClock, MemoryEngine
from memory.backend import Turn
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``MYCLAW_HOME`` for a CLI test: a folder not made yet, and no other
    ``MYCLAW_*`` setting leaking in from the environment running the tests."""
    import os

    for name in [n for n in os.environ if n.startswith("MYCLAW_")]:
        monkeypatch.delenv(name)
    h = tmp_path / "home"
    monkeypatch.setenv("MYCLAW_HOME", str(h))
    return h


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-test-secret-key-123456") as fake:
        yield fake


# -- a process loop on the real bus, real SQLite files and the fake LLM ---------


class FlakyBuffer(SqliteMemory):
    """The real SQLite backend whose ``buffer`` can be told to fail, to
    check that nothing unbuffered is ever dropped."""

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__(engine)
        self.fail_next = 0

    async def buffer(self, turns: Sequence[Turn]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("disk full (injected)")
        await super().buffer(turns)


_RIG_IDS = itertools.count(1)


@dataclass
class Rig:
    bus: MessageBus
    loop: ProcessLoop
    sessions: SessionStore
    engine: MemoryEngine
    backend: FlakyBuffer
    fake: FakeOpenAI
    # Message ids are unique across rigs, as a platform's are across a
    # restart (the loop ignores a redelivered id that was answered).
    counter: list[int] = field(default_factory=lambda: [next(_RIG_IDS) * 10_000])

    async def send(
        self,
        text: str,
        *,
        chat: str = "1",
        sender: str = "100",
        channel: str = "telegram",
        group: bool = False,
        mentioned: bool = False,
        reply_to_bot: bool = False,
        forwarded: tuple[Forwarded, ...] = (),
    ) -> InboundMessage:
        self.counter[0] += 1
        msg = InboundMessage(
            channel=channel,
            chat_id=chat,
            sender_id=sender,
            text=text,
            message_id=str(self.counter[0]),
            is_group=group,
            mentioned=mentioned,
            reply_to_bot=reply_to_bot,
            forwarded=forwarded,
        )
        await self.bus.publish_inbound(msg)
        return msg

    async def reply(self, channel: str = "telegram", timeout: float = 5.0) -> OutboundMessage:
        return await asyncio.wait_for(self.bus.outbound_queue(channel).get(), timeout)

    async def ask(self, text: str, **kw: Any) -> OutboundMessage:
        await self.send(text, **kw)
        return await self.reply(kw.get("channel", "telegram"))

    async def settle(self) -> None:
        assert await self.loop.drain(5.0)


@asynccontextmanager
async def make_rig(
    tmp_path: Path,
    clock: ManualClock,
    fake: FakeOpenAI,
    *,
    history: int = 20,
    max_concurrent: int = 64,
    retries: int = 0,
    timeout: float = 5.0,
    identities: dict[str, list[str]] | None = None,
    limiter: RateLimiter | None = None,
    chats_kept: int | None = None,
    busy_ms: int = 5000,
) -> Any:
    kept = {} if chats_kept is None else {"chats_kept": chats_kept}  # the defaults' caps, unless a test asks
    engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
    sessions = await SessionStore.open(tmp_path / "gateway.db", clock, window=history, busy_ms=busy_ms, **kept)
    llm = LLMClient(
        base_url=fake.url, api_key=fake.api_key or "", model="test-model", timeout=timeout, max_retries=retries, backoff_base=0.01
    )
    task: asyncio.Task[None] | None = None
    try:
        backend = FlakyBuffer(engine)
        incognito = Incognito(sessions.db)
        agent = Agent(llm, max_tokens=256, tools=memory_tools(backend))
        bus = MessageBus(100)
        loop = ProcessLoop(
            bus=bus,
            sessions=sessions,
            backend=backend,
            agent=agent,
            prompts=PromptBuilder(tmp_path / "workspace", backend, clock=clock),
            identities=IdentityMap(identities),
            known_projects=engine.known_projects,
            max_concurrent_chats=max_concurrent,
            limiter=limiter,
            commands=UserCommands(backend, clock=clock, incognito=incognito, projects=engine),
            incognito=incognito,
            **kept,
        )
        task = asyncio.create_task(loop.run())
        yield Rig(bus, loop, sessions, engine, backend, fake)
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await loop.close(5.0)
        await llm.aclose()
        await sessions.close()
        await engine.close()
