"""A model provider that misbehaves, end to end: the gateway on the fakes of
Telegram and an OpenAI-compatible API, the fake answering as real providers
and proxies do when things go wrong (rate limits, overload, an HTML error
page, a completion without choices, a cut or filtered reply, a stream that
breaks, stalls or reports an error, a request over the context, tools
called wrongly or forever). Each time the user gets one reply, honest and
in their language, and no key reaches a log line or the chat."""

from __future__ import annotations

import asyncio
import email.utils
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

KEY = "sk-provider-errors-e2e-0123456789"

# Whole answers (no streaming), and streamed ones shown from the first piece.
WHOLE: dict[str, Any] = {"agent": {"model": "test-model", "streaming": {"enabled": False}}}
STREAM: dict[str, Any] = {"agent": {"model": "test-model", "streaming": {"delay": "0s", "interval": "0.2s"}}}


@contextlib.asynccontextmanager
async def _telegram_app(
    tmp_path: Path, clock: ManualClock, *, retries: int = 0, timeout: str = "5s", **more: Any
) -> AsyncIterator[tuple[FakeOpenAI, FakeTelegram, App]]:
    """The gateway on Telegram's and the LLM's fakes, started; closed after."""
    async with FakeOpenAI(api_key=KEY) as llm, FakeTelegram() as tg:
        provider = {"baseUrl": llm.url, "apiKey": KEY, "maxRetries": retries, "timeout": timeout}
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, provider=provider, **more)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            yield llm, tg, app
        finally:
            await asyncio.wait_for(app.close(), 15)


def _texts(tg: Any) -> list[str]:
    return [m.text for m in tg.sent]


async def _one_reply(tg: Any, app: Any) -> str:
    """The chat's only reply, once the turn is over."""
    await tg.wait_sent(1, timeout=15)
    assert app.loop is not None and await app.loop.drain(10)
    [text] = _texts(tg)
    return text


async def test_a_rate_limit_is_the_busy_apology_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.queue_error(429, retry_after=30)
        tg.push_text(42, 42, "明天的会议几点开始？")
        text = await _one_reply(tg, app)
    assert "太忙" in text and len(llm.requests) == 1


async def test_an_overloaded_model_is_asked_again_and_answers(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, retries=2, **WHOLE) as (llm, tg, app):
        llm.queue(Reply(content=None, status=503, error_body="The engine is currently overloaded",
                                 headers={"Retry-After": "0"}))
        llm.queue_reply("The meeting starts at ten.")
        tg.push_text(42, 42, "when does the meeting start?")
        text = await _one_reply(tg, app)
    assert text == "The meeting starts at ten." and len(llm.requests) == 2


async def test_a_proxys_html_error_page_is_an_apology_and_leaves_no_key_in_the_log(
    tmp_path: Path, clock: ManualClock
) -> None:
    page = (f"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1>"
            f"<p>upstream refused Authorization: Bearer {KEY}</p></body></html>")
    with capture_logs() as logs:
        async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
            llm.queue(Reply(status=502, raw=page, content_type="text/html"))
            tg.push_text(42, 42, "hello there")
            text = await _one_reply(tg, app)
    assert text.startswith("Sorry") and KEY not in text
    assert KEY not in repr(logs) and KEY[-12:] not in repr(logs)


async def test_completions_without_an_answer_are_an_apology_not_an_empty_message(
    tmp_path: Path, clock: ManualClock
) -> None:
    bodies = [{"id": "x", "object": "chat.completion", "model": "test-model"},  # no choices
              {"id": "x", "object": "chat.completion", "model": "test-model", "choices": []},
              {"id": "x", "object": "chat.completion", "model": "test-model",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]}]
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        for n, body in enumerate(bodies, start=1):
            llm.queue(Reply(raw=json.dumps(body)))
            tg.push_text(42, 42, f"question {n}")
            await tg.wait_sent(n, timeout=15)
        assert app.loop is not None and await app.loop.drain(10)
    assert len(tg.sent) == 3 and all(t.startswith("Sorry, I could not produce an answer") for t in _texts(tg))


async def test_a_ragged_stream_with_keep_alives_reads_whole(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue(Reply(content="The launch moved to Thursday.", ragged=True,
                                 pieces=["The ", "launch ", "moved ", "to ", "Thursday."]))
        tg.push_text(42, 42, "when is the launch?")
        text = await _one_reply(tg, app)
    assert text == "The launch moved to Thursday."


async def test_a_stream_that_stalls_past_the_timeout_is_the_timeout_apology(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, timeout="1s", **STREAM) as (llm, tg, app):
        llm.queue_stream(["Half ", "an ", "answer"], delay=4)
        tg.push_text(42, 42, "tell me everything")
        text = await _one_reply(tg, app)
    assert "took too long" in text


async def test_an_error_inside_a_stream_echoing_the_key_is_an_apology(tmp_path: Path, clock: ManualClock) -> None:
    with capture_logs() as logs:
        async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
            llm.queue_stream(["Let ", "me "], error=f"upstream overloaded (key {KEY})")
            tg.push_text(42, 42, "hello")
            text = await _one_reply(tg, app)
    assert text.startswith("Sorry") and KEY not in text and KEY not in repr(logs)
    assert all(KEY not in d.text for d in tg.drafts)


async def test_a_model_calling_tools_forever_is_stopped_and_the_user_answered(
    tmp_path: Path, clock: ManualClock
) -> None:
    def forever(body: dict[str, Any]) -> Reply:
        if body.get("tool_choice") == "none":  # as OpenAI's: no tools when told so
            return Reply(content="I searched several times and found nothing about it.")
        return Reply(content=None, tool_calls=[{"name": "memory_search", "arguments": {"query": said(body) or "x"}}])

    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.responder = forever
        tg.push_text(42, 42, "what did I say about the launch?")
        text = await _one_reply(tg, app)
    assert text == "I searched several times and found nothing about it." and len(llm.requests) == 5


async def test_parallel_malformed_and_unknown_tool_calls_each_get_an_answer(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "launch"}},
                                          {"name": "memory_search", "arguments": '{"query": "launch'},
                                          {"name": "web_browse", "arguments": {"url": "http://x"}}])
        llm.queue_reply("Nothing saved about the launch.")
        tg.push_text(42, 42, "what did I say about the launch?")
        text = await _one_reply(tg, app)
    assert text == "Nothing saved about the launch."
    results = [m for m in llm.chat_requests()[1]["messages"] if m["role"] == "tool"]
    calls = llm.chat_requests()[1]["messages"][-4]["tool_calls"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert not results[0]["content"].startswith("error")
    assert results[1]["content"].startswith("error: arguments are not a JSON object")
    assert results[2]["content"] == "error: there is no tool named 'web_browse'"

async def test_a_message_over_the_models_context_is_told_so_after_one_smaller_try(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.context_windows["test-model"] = 2000
        tg.push_text(42, 42, "summarise this: " + "lorem ipsum dolor sit amet " * 800)
        text = await _one_reply(tg, app)
    assert "too long" in text and "try again in a moment" not in text
    assert len(llm.refused) <= 2 and llm.requests == []

async def test_a_reply_cut_at_the_length_limit_says_so(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.queue(Reply(content="The three steps are: first, back up the", finish_reason="length"))
        tg.push_text(42, 42, "how do I migrate the database?")
        text = await _one_reply(tg, app)
    assert text.startswith("The three steps are: first, back up the")
    assert "cut off" in text

async def test_a_streamed_reply_cut_at_the_length_limit_says_so_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue(Reply(content="迁移分三步：第一，备份", pieces=["迁移", "分三步：", "第一，备份"],
                                 finish_reason="length"))
        tg.push_text(42, 42, "数据库怎么迁移？")
        text = await _one_reply(tg, app)
    assert text.startswith("迁移分三步：第一，备份") and "截断" in text

async def test_a_filtered_reply_says_the_provider_withheld_it(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.queue(Reply(content=None, finish_reason="content_filter"))
        tg.push_text(42, 42, "tell me a story")
        text = await _one_reply(tg, app)
        llm.queue(Reply(content="Once upon a time", finish_reason="content_filter"))
        tg.push_text(42, 42, "another story")
        await tg.wait_sent(2, timeout=15)
    assert "filter" in text and "try again in a moment" not in text
    assert tg.sent[1].text.startswith("Once upon a time") and "filter" in tg.sent[1].text


async def test_a_prompt_the_providers_filter_refuses_is_told_so(tmp_path: Path, clock: ManualClock) -> None:
    """Azure OpenAI refuses a prompt its content filter flags with a 400."""
    async with _telegram_app(tmp_path, clock, **WHOLE) as (llm, tg, app):
        llm.queue(Reply(content=None, status=400, error_type="invalid_request_error", error_code="content_filter",
                        error_body="The response was filtered due to the prompt triggering Azure OpenAI's content "
                        "management policy. Please modify your prompt and retry."))
        tg.push_text(42, 42, "给我讲个故事")
        text = await _one_reply(tg, app)
    assert "过滤" in text and "稍后再试" not in text


async def test_a_quota_reset_far_off_is_not_waited_for_and_the_user_told_when(
    tmp_path: Path, clock: ManualClock
) -> None:
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(minutes=30), usegmt=True)
    async with _telegram_app(tmp_path, clock, retries=3, **WHOLE) as (llm, tg, app):
        llm.queue(Reply(content=None, status=429, error_body="You exceeded your current quota",
                        headers={"Retry-After": when}))
        tg.push_text(42, 42, "what's on today?")
        await tg.wait_sent(1, timeout=15)
        llm.queue(Reply(content=None, status=429, error_body="Rate limit reached for requests",
                        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2h0m0s",
                                 "x-ratelimit-remaining-tokens": "39000", "x-ratelimit-reset-tokens": "1s"}))
        tg.push_text(42, 42, "今天有什么安排？")
        await tg.wait_sent(2, timeout=15)
        assert app.loop is not None and await app.loop.drain(10)
    first, second = _texts(tg)
    assert "in about 30 minutes" in first and "约 2 小时后" in second
    assert len(llm.requests) == 2  # one each: nothing slept and asked again
