"""The chat model with fallbacks, against three real fake OpenAI servers on
127.0.0.1 and a manual clock: what each fake was asked is counted, nothing
is timed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.agent import Agent, apology
from gateway.config import FallbackConfig, ProviderConfig
from gateway.failover import FailoverLLM
from gateway.llm import LLMBadRequest, LLMUnavailable
from gateway.tools import ToolContext
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, images
from tests.gateway.test_llm import Sleeps

KEYS = ["sk-primary-secret-0123456789", "sk-backup1-secret-0123456789", "sk-backup2-secret-0123456789"]
HELLO = [{"role": "user", "content": "a private question about my cat Miso"}]
ALICE = ToolContext(user="alice", channel="telegram", chat_id="42", private=True, message_id="7", sender_id="100")




@pytest.fixture
async def fakes() -> AsyncIterator[list[FakeOpenAI]]:
    servers = [FakeOpenAI(api_key=k) for k in KEYS]
    for s in servers:
        await s.start()
    try:
        yield servers
    finally:
        for s in servers:
            await s.stop()


def provider(fake: FakeOpenAI, key: str | None = None, **kw: Any) -> ProviderConfig:
    return ProviderConfig.model_validate(
        {"baseUrl": fake.url, "apiKey": fake.api_key if key is None else key, "maxRetries": 2, "timeout": "5s", **kw}
    )


def failover(fakes: Sequence[FakeOpenAI], clock: ManualClock, **kw: Any) -> FailoverLLM:
    """primary: model "main" on fakes[0]; fallbacks: "backup-1" on fakes[1], "backup-2" on fakes[2]."""
    fallbacks = [FallbackConfig(model=f"backup-{i}", provider=provider(f)) for i, f in enumerate(fakes[1:], start=1)]
    return FailoverLLM.from_config(provider(fakes[0], **kw), "main", fallbacks, clock, sleep=Sleeps(), backoff_base=0.01)


def asked(fakes: Sequence[FakeOpenAI]) -> list[int]:
    return [len(f.requests) for f in fakes]


async def test_primary_down_the_fallback_answers_within_the_same_call(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].down = Reply(status=500)
    fakes[1].queue_reply("from backup")
    async with failover(fakes, clock) as llm:
        res = await llm.chat(HELLO)
    assert (res.content, res.model, res.candidate) == ("from backup", "backup-1", "agent.fallbacks[0]")
    # The primary had a fallback behind it: one retry, not its configured two.
    assert asked(fakes) == [2, 1, 0]
    assert fakes[1].requests[0]["model"] == "backup-1" and fakes[1].requests[0]["messages"] == HELLO


async def test_cooldown_skips_the_primary_then_it_is_tried_again_and_recovers(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    fakes[0].down = Reply(status=503)
    async with failover(fakes, clock) as llm:
        with capture_logs() as logs:
            assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[0]"
            assert asked(fakes) == [2, 1, 0]
            # The next messages do not each pay for the primary's failure.
            for _ in range(3):
                clock.advance(5)
                assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[0]"
            assert asked(fakes) == [2, 4, 0]
            # 30 s after its failure the primary is asked again; still down, it cools for 60 s.
            clock.advance(16)
            assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[0]"
            assert asked(fakes) == [4, 5, 0]
            clock.advance(59)
            await llm.chat(HELLO)
            assert asked(fakes) == [4, 6, 0]
            # Back up: after the cooldown the primary answers and is used from then on.
            fakes[0].down = None
            clock.advance(2)
            res = await llm.chat(HELLO)
            assert (res.candidate, res.model) == ("agent", "main")
            await llm.chat(HELLO)
            assert asked(fakes) == [6, 6, 0]
    failed = [e for e in logs if e["event"] == "model endpoint failed; cooling down"]
    assert [(e["candidate"], e["reason"], e["cooldown_s"]) for e in failed] == [
        ("agent", "LLMUnavailable 503", 30), ("agent", "LLMUnavailable 503", 60)
    ]
    [recovered] = [e for e in logs if e["event"] == "model endpoint recovered"]
    assert recovered["candidate"] == "agent" and recovered["primary"] is True and recovered["after_failures"] == 2
    # A success resets the doubling: the next failure cools for 30 s again.
    fakes[0].down = Reply(status=500)
    async with failover(fakes, clock) as llm2:
        assert llm2.cooldowns.failed(0, "test") == timedelta(seconds=30)


async def test_a_rate_limit_is_not_retried_before_failing_over_and_its_retry_after_is_kept(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    fakes[0].queue_error(429, retry_after=120, code="rate_limit_exceeded")
    async with failover(fakes, clock) as llm:
        assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[0]"
        assert asked(fakes) == [1, 1, 0]  # no wait for the 429: the fallback answered instead
        clock.advance(90)  # past the 30 s base, within the 120 s asked for
        assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[0]"
        clock.advance(31)
        assert (await llm.chat(HELLO)).candidate == "agent"
    assert asked(fakes) == [2, 2, 0]


async def test_a_hanging_primary_times_out_once_then_is_skipped(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].down = Reply(content="too late", delay=3.0)
    async with failover(fakes, clock, timeout="0.3s") as llm:
        res = await llm.chat(HELLO)
        assert res.candidate == "agent.fallbacks[0]"
        assert asked(fakes) == [1, 1, 0]  # a timeout is not retried when a fallback waits
        for _ in range(5):
            await llm.chat(HELLO)
    # Five more messages, not one of them waited for the primary's timeout.
    assert asked(fakes) == [1, 6, 0]


async def test_a_refused_key_and_an_unknown_model_fail_over(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].served_models = {"another-model"}  # 404 model_not_found for "main"
    fallbacks = [
        FallbackConfig(model="backup-1", provider=provider(fakes[1], key="sk-revoked-key-0123456789")),
        FallbackConfig(model="backup-2", provider=provider(fakes[2])),
    ]
    with capture_logs() as logs:
        async with FailoverLLM.from_config(provider(fakes[0]), "main", fallbacks, clock, sleep=Sleeps()) as llm:
            res = await llm.chat(HELLO)
    assert (res.candidate, res.model) == ("agent.fallbacks[1]", "backup-2")
    assert asked(fakes) == [1, 0, 1]  # neither is retried: a 404 or 401 would come again; the 401 is refused before recording
    reasons = [(e["candidate"], e["reason"]) for e in logs if e["event"] == "model endpoint failed; cooling down"]
    assert reasons == [("agent", "LLMBadRequest 404"), ("agent.fallbacks[0]", "LLMAuthError 401")]


async def test_a_bad_request_is_not_sent_elsewhere(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].queue_error(
        400, code="context_length_exceeded",
        body="This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
    )
    async with failover(fakes, clock) as llm:
        with pytest.raises(LLMBadRequest) as err:
            await llm.chat(HELLO)
        assert err.value.status == 400
        assert asked(fakes) == [1, 0, 0]
        # Not the primary's fault: it is not cooling, the next message goes to it.
        assert not llm.cooldowns.cooling(0)
        assert (await llm.chat(HELLO)).candidate == "agent"


async def test_all_down_gives_the_usual_apology_and_then_asks_one_candidate_a_message(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    for f in fakes:
        f.down = Reply(status=502)
    async with failover(fakes, clock) as llm:
        agent = Agent(llm, max_tokens=64)
        reply = await agent.run(HELLO, ALICE, user_text="hello")
        assert not reply.ok and reply.text == apology("hello", LLMUnavailable("x"))
        # fail-fast for the first two (one retry each), the last one its full two retries
        assert asked(fakes) == [2, 2, 3]
        # All cooling: the one that failed longest ago is still asked (never refused
        # outright), and only it: the message does not wait for every endpoint in turn.
        clock.advance(1)
        reply = await agent.run(HELLO, ALICE, user_text="你好")
        assert not reply.ok and reply.text == apology("你好", LLMUnavailable("x"))
        assert asked(fakes) == [5, 2, 3]
        fakes[1].down = None
        clock.advance(1)
        reply = await agent.run(HELLO, ALICE, user_text="hello")  # fallbacks[0] failed longest ago now
        assert reply.ok and reply.candidate == "agent.fallbacks[0]" and reply.model == "backup-1"
        assert asked(fakes) == [5, 3, 3]


async def test_tool_calls_work_across_the_switch(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    """A tool round answered by the fallback is sent back to the fallback."""
    from gateway.tools import Tool

    async def lookup(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return "Miso is a cat"

    tool = Tool("lookup", "look it up", {"type": "object", "properties": {}}, lookup)
    fakes[0].down = Reply(status=500)
    fakes[1].queue_reply(None, tool_calls=[{"name": "lookup", "arguments": {}}])
    fakes[1].queue_reply("Miso is your cat.")
    async with failover(fakes, clock) as llm:
        reply = await Agent(llm, tools=[tool]).run(HELLO, ALICE)
    assert reply.ok and reply.text == "Miso is your cat." and reply.tools_used == ("lookup",)
    assert asked(fakes) == [2, 2, 0]  # the second round skipped the cooling primary
    assert fakes[1].requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "Miso is a cat"}


async def test_logs_name_the_candidate_and_never_a_key_or_the_prompt(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].down = Reply(status=500, error_body=f"upstream said: {HELLO[0]['content']}")  # a provider echoing the prompt
    fakes[1].down = Reply(status=401)
    with capture_logs() as logs:
        async with failover(fakes, clock) as llm:
            assert (await llm.chat(HELLO)).candidate == "agent.fallbacks[1]"
    text = repr(logs)
    assert "model endpoint failed; cooling down" in text
    assert not any(k in text for k in KEYS)
    assert "Miso" not in text


async def test_a_lone_model_behaves_as_without_failover(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].down = Reply(status=500)
    with capture_logs() as logs:
        async with FailoverLLM.from_config(provider(fakes[0]), "main", [], clock, sleep=Sleeps()) as llm:
            for _ in range(2):
                with pytest.raises(LLMUnavailable):
                    await llm.chat(HELLO)
    assert asked(fakes) == [6, 0, 0]  # every call, all its retries: there is nothing to switch to
    assert not [e for e in logs if e["event"] == "model endpoint failed; cooling down"]


async def test_a_fallback_on_the_primary_provider_shares_its_client(fakes: list[FakeOpenAI], clock: ManualClock) -> None:
    fakes[0].served_models = {"small"}
    llm = FailoverLLM.from_config(provider(fakes[0]), "main", [FallbackConfig(model="small")], clock, sleep=Sleeps())
    async with llm:
        res = await llm.chat(HELLO)
    assert (res.candidate, res.model) == ("agent.fallbacks[0]", "small")
    assert [r["model"] for r in fakes[0].requests] == ["main", "small"]
    await llm.aclose()  # twice is safe


# -- a candidate that cannot see ---------------------------------------------------------

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(300)


def photo(caption: str = "what is on this receipt?") -> list[dict[str, Any]]:
    from gateway.bus import Image
    from gateway.prompt import user_parts

    return [{"role": "user", "content": user_parts(f"[photo] {caption}", [Image(JPEG, "image/jpeg")])}]


def refused(fakes: Sequence[FakeOpenAI]) -> list[int]:
    return [len(f.refused) for f in fakes]


async def test_a_primary_that_cannot_see_hands_the_photo_to_a_fallback_that_can_and_is_not_cooled(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    fakes[0].blind_models = {"main": "openai"}
    fakes[1].responder = lambda body: Reply(content=f"I see {len(images(body))} picture(s)")
    with capture_logs() as logs:
        async with failover(fakes, clock) as llm:
            agent = Agent(llm)
            reply = await agent.run(photo(), ALICE, user_text="what is on this receipt?")
            assert (reply.ok, reply.text, reply.candidate) == (True, "I see 1 picture(s)", "agent.fallbacks[0]")
            assert refused(fakes) == [1, 0, 0] and asked(fakes) == [0, 1, 0]
            # Not an outage: no cooldown, words still go to the primary at once.
            assert not llm.cooldowns.cooling(0)
            assert (await agent.run(HELLO, ALICE)).candidate == "agent"
            # The next photo goes straight to the fallback: the primary's refusal is remembered.
            assert (await agent.run(photo("and this?"), ALICE)).candidate == "agent.fallbacks[0]"
            assert refused(fakes) == [1, 0, 0] and asked(fakes) == [1, 2, 0]
    assert not [e for e in logs if e["event"] == "model endpoint failed; cooling down"]
    assert len([e for e in logs if e["event"].startswith("model does not read pictures")]) == 1


async def test_when_no_candidate_can_see_the_primary_answers_the_words(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    from gateway.prompt import UNSEEN_NOTE

    for f, wording in zip(fakes, ["openai", "vllm", "ollama"], strict=True):
        f.blind_models = {m: wording for m in ("main", "backup-1", "backup-2")}
    async with failover(fakes, clock) as llm:
        agent = Agent(llm)
        reply = await agent.run(photo(), ALICE, user_text="what is on this receipt?")
        assert reply.ok and reply.candidate == "agent"
        assert refused(fakes) == [1, 1, 1] and asked(fakes) == [1, 0, 0]
        assert fakes[0].requests[0]["messages"][-1]["content"] == (
            "[photo] what is on this receipt?\n\n" + UNSEEN_NOTE.format(what="photo"))
        # Known now: the next photo is a single request, with the note.
        assert (await agent.run(photo("and this?"), ALICE)).candidate == "agent"
        assert refused(fakes) == [1, 1, 1] and asked(fakes) == [2, 0, 0]
        assert not any(llm.cooldowns.cooling(i) for i in range(3))


async def test_a_cooling_fallback_is_not_waited_for_when_the_primary_can_answer_the_words(
    fakes: list[FakeOpenAI], clock: ManualClock
) -> None:
    """The primary cannot see and the only other candidate is cooling (down):
    the photo's words are answered by the primary at once, not after the
    cooling one's timeouts and retries."""
    fakes = fakes[:2]
    fallbacks = [FallbackConfig(model="backup-1", provider=provider(fakes[1]))]
    fakes[0].blind_models = {"main": "vllm"}
    fakes[1].down = Reply(status=503)
    async with FailoverLLM.from_config(provider(fakes[0]), "main", fallbacks, clock, sleep=Sleeps()) as llm:
        agent = Agent(llm)
        assert (await agent.run(HELLO, ALICE)).candidate == "agent"
        llm.cooldowns.failed(1, "test")  # as an earlier message found it
        reply = await agent.run(photo(), ALICE)
        assert reply.ok and reply.candidate == "agent"
        assert refused(fakes) == [1, 0] and asked(fakes) == [2, 0]
