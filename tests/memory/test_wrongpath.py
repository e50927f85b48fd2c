"""A baseUrl without /v1: the chat-completions path answers 404. Each
model's client says so once per provider, as an error naming the setting,
the path tried and the fix (memory/wrongpath.py); each call still fails as
before. Real loopback servers: the fake's routes are under /v1 only."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.config import validate
from gateway.failover import FailoverLLM
from gateway.llm import LLMBadRequest, LLMClient
from memory import ManualClock
from memory.llm import LLMUnavailable, MemoryLLM
from tests.fakes.openai_server import FakeOpenAI

from ._writepath import fake  # noqa: F401


def _wrong(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["log_level"] == "error" and "baseUrl" in e["event"]]


async def test_the_chat_models_wrong_path_is_said_once_naming_the_setting_and_the_fix(fake: FakeOpenAI) -> None:
    base = fake.url.removesuffix("/v1")
    with capture_logs() as logs:
        async with LLMClient(base_url=base, api_key="sk-test-secret-key-123456", model="m", max_retries=0) as llm:
            for _ in range(3):
                with pytest.raises(LLMBadRequest) as err:  # the usual failure: the user gets the usual reply
                    await llm.chat([{"role": "user", "content": "hi"}])
                assert err.value.status == 404
    [said] = _wrong(logs)
    assert said["setting"] == "provider.baseUrl" and said["path"] == "/chat/completions" and said["status"] == 404
    assert "/v1" in said["event"] and "chat model" in said["event"] and "myclaw doctor" in said["event"]
    assert "sk-test" not in str(logs)
    # A right URL never says it, whatever else fails.
    fake.queue_reply("hello")
    with capture_logs() as logs:
        async with LLMClient(base_url=fake.url, model="m", max_retries=0) as llm:
            assert (await llm.chat([{"role": "user", "content": "hi"}])).content == "hello"
    assert _wrong(logs) == []


async def test_a_fallbacks_own_provider_is_named_by_its_path(fake: FakeOpenAI) -> None:
    cfg = validate({
        "provider": {"apiKey": "sk-main-xxxxxx", "baseUrl": fake.url},
        "agent": {"model": "chat", "fallbacks": [
            {"model": "other", "provider": {"baseUrl": fake.url.removesuffix("/v1"), "maxRetries": 0}}]},
    })
    async with FailoverLLM.from_config(cfg.provider, cfg.agent.model, cfg.agent.fallbacks, ManualClock()) as llm:
        fallback = llm._candidates[1].client
        with capture_logs() as logs:
            for _ in range(2):
                with pytest.raises(LLMBadRequest):
                    await fallback.chat([{"role": "user", "content": "hi"}])
    [said] = _wrong(logs)
    assert said["setting"] == "agent.fallbacks[0].provider.baseUrl"


async def test_the_memory_models_wrong_path_is_said_once_naming_its_provider(fake: FakeOpenAI) -> None:
    cfg = validate({"provider": {"apiKey": "sk-main-xxxxxx", "baseUrl": fake.url},
                    "memory": {"model": "small", "provider": {"baseUrl": fake.url.removesuffix("/v1"),
                                                               "maxRetries": 0}}})
    with capture_logs() as logs:
        async with MemoryLLM.from_config(cfg, retries=0) as llm:
            for _ in range(3):
                with pytest.raises(LLMUnavailable) as err:
                    await llm.complete_json("system", "user words")
                assert err.value.status == 404
    [said] = _wrong(logs)
    assert said["setting"] == "memory.provider.baseUrl" and said["path"] == "/chat/completions"
    assert "memory model" in said["event"] and "user words" not in str(logs)
    # Without a provider of its own, the memory model runs on the chat model's: that is the one to fix.
    cfg = validate({"provider": {"baseUrl": fake.url.removesuffix("/v1")}, "memory": {"model": "small"}})
    with capture_logs() as logs:
        async with MemoryLLM.from_config(cfg, retries=0) as llm:
            with pytest.raises(LLMUnavailable):
                await llm.complete_json("system", "user words")
    assert [e["setting"] for e in _wrong(logs)] == ["provider.baseUrl"]
