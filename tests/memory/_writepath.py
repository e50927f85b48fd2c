"""Shared pieces of the write-path tests: the fake OpenAI server and a memory
LLM client pointed at it over real HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memory.backend import Turn
from memory.llm import MemoryLLM
from tests.fakes.openai_server import FakeOpenAI


def reply(facts: list[dict[str, Any]] | None = None, summary: str = "a chat", **extra: Any) -> str:
    return json.dumps({"facts": facts or [], "summary": summary, **extra}, ensure_ascii=False)


def user_prompt(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def turns(owner: str, *pairs: tuple[str, str], chat: str = "1", start: int = 1) -> list[Turn]:
    out = []
    for i, (u, a) in enumerate(pairs, start=start):
        out.append(Turn(owner=owner, channel="telegram", chat_id=chat, role="user", content=u, message_id=str(i)))
        out.append(Turn(owner=owner, channel="telegram", chat_id=chat, role="assistant", content=a, message_id=str(i)))
    return out


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[MemoryLLM]:
    client = MemoryLLM(base_url=fake.url, model="mem-model", api_key="sk-test-000000", timeout=2.0, retries=0)
    try:
        yield client
    finally:
        await client.aclose()
