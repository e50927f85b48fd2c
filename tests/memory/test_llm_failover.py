"""The memory model with fallbacks (``memory.fallbacks``): real fake OpenAI
servers on 127.0.0.1, a manual clock, requests counted per server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from memory import ManualClock
from memory.llm import LLMBadOutput, LLMOverflow, LLMUnavailable, MemoryEndpoint, MemoryLLM
from tests.fakes.openai_server import FakeOpenAI, Reply

FACTS = json.dumps({"facts": [{"content": "The user's cat is called Miso", "category": "identity"}], "summary": "cat"})
KEYS = ("sk-mem-primary-0123456789", "sk-mem-backup-0123456789")


@pytest.fixture
async def pair() -> AsyncIterator[tuple[FakeOpenAI, FakeOpenAI]]:
    async with FakeOpenAI(api_key=KEYS[0]) as a, FakeOpenAI(api_key=KEYS[1]) as b:
        yield a, b


def client(a: FakeOpenAI, b: FakeOpenAI, clock: ManualClock, *, retries: int = 2) -> MemoryLLM:
    return MemoryLLM(
        base_url=a.url, api_key=KEYS[0], model="mem-main", retries=retries, retry_delay=0.0, clock=clock,
        fallbacks=[MemoryEndpoint(b.url, "mem-backup", KEYS[1], retries=2)],
    )


async def test_extraction_is_answered_by_the_fallback_and_the_primary_cools(
    pair: tuple[FakeOpenAI, FakeOpenAI], clock: ManualClock
) -> None:
    a, b = pair
    a.down = Reply(status=503)
    b.responder = lambda body: Reply(content=FACTS)
    with capture_logs() as logs:
        async with client(a, b, clock) as llm:
            out = await llm.extract("[10:00] alice: my cat is called Miso")
            assert [f.content for f in out.facts] == ["The user's cat is called Miso"]
            # The primary had a fallback behind it: not retried, failed over at once.
            assert (len(a.requests), len(b.requests)) == (1, 1)
            assert b.requests[0]["model"] == "mem-backup"
            clock.advance(10)
            await llm.extract("[10:01] alice: and my dog Bruno")
            assert (len(a.requests), len(b.requests)) == (1, 2)  # cooling: skipped
            a.down = None
            a.responder = lambda body: Reply(content=FACTS)
            clock.advance(25)
            await llm.extract("[10:02] alice: hi")
            assert (len(a.requests), len(b.requests)) == (2, 2)  # recovered
    events = [(e["event"], e.get("candidate")) for e in logs]
    assert ("model endpoint failed; cooling down", "memory") in events
    assert ("model endpoint recovered", "memory") in events
    assert not any(k in repr(logs) for k in KEYS) and "Miso" not in repr(
        [e for e in logs if "model endpoint" in e["event"]]
    )


async def test_all_down_raises_unavailable_so_the_buffer_is_kept(
    pair: tuple[FakeOpenAI, FakeOpenAI], clock: ManualClock
) -> None:
    a, b = pair
    a.down = b.down = Reply(status=500)
    async with client(a, b, clock) as llm:
        with pytest.raises(LLMUnavailable, match="HTTP 500"):
            await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (1, 3)  # the last one asked gets its retries
        clock.advance(1)
        with pytest.raises(LLMUnavailable):
            await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (4, 3)  # all cooling: only the oldest failure


async def test_a_bad_request_or_a_bad_reply_is_not_failed_over(
    pair: tuple[FakeOpenAI, FakeOpenAI], clock: ManualClock
) -> None:
    a, b = pair
    async with client(a, b, clock, retries=0) as llm:
        a.queue_error(400, code="context_length_exceeded", body="This model's maximum context length is 8192 tokens.")
        with pytest.raises(LLMOverflow, match="HTTP 400"):  # the caller asks with less instead
            await llm.extract("hi")
        a.queue_error(400, body="'messages' must not be empty")
        with pytest.raises(LLMUnavailable, match="HTTP 400"):
            await llm.extract("hi")
        a.queue_reply("I would rather not answer in JSON.")
        with pytest.raises(LLMBadOutput):
            await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (3, 0)
        assert not llm.cooldowns.cooling(0)


async def test_an_unknown_model_and_a_rate_limit_fail_over(pair: tuple[FakeOpenAI, FakeOpenAI], clock: ManualClock) -> None:
    a, b = pair
    b.responder = lambda body: Reply(content=FACTS)
    async with client(a, b, clock) as llm:
        a.served_models = {"other"}
        await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (1, 1)
        a.served_models = None
        clock.advance(31)
        a.queue_error(429, retry_after=300)
        await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (2, 2)
        clock.advance(200)  # within the 300 s the provider asked for
        await llm.extract("hi")
        assert (len(a.requests), len(b.requests)) == (2, 3)


async def test_from_config_builds_the_fallbacks(pair: tuple[FakeOpenAI, FakeOpenAI], clock: ManualClock) -> None:
    from gateway.config import validate

    a, b = pair
    cfg = validate({
        "provider": {"apiKey": KEYS[0], "baseUrl": a.url},
        "agent": {"model": "chat", "fallbacks": [
            {"model": "chat-small"},
            {"model": "elsewhere", "provider": {"baseUrl": b.url, "apiKey": KEYS[1], "maxRetries": 0}},
        ]},
    })
    a.served_models = {"chat-small"}
    # No memory.model, memory.provider nor memory.fallbacks: the chat model's fallbacks are the memory model's.
    async with MemoryLLM.from_config(cfg, clock=clock) as llm:
        b.responder = lambda body: Reply(content=FACTS)
        a.responder = lambda body: Reply(content=FACTS)
        await llm.extract("hi")
        assert [r["model"] for r in a.requests] == ["chat", "chat-small"] and b.requests == []
    cfg = validate({"provider": {"apiKey": KEYS[0], "baseUrl": a.url}, "agent": {"fallbacks": [{"model": "x"}]},
                    "memory": {"model": "own"}})
    assert cfg.memory_fallbacks() == []  # its own model: not the chat model's fallbacks
    cfg = validate({"agent": {"fallbacks": [{"model": "x"}]}, "memory": {"fallbacks": []}})
    assert cfg.memory_fallbacks() == []  # [] turns them off
