"""Streamed completions (``on_text``) against the fake's real SSE answers,
and the event parser on the edge cases servers produce."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from gateway.llm import LLMBadResponse, LLMClient, LLMUnavailable
from gateway.llm_stream import Accumulator, StreamError, sse_data
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.test_llm import KEY, Sleeps, client


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


async def _events(*parts: bytes) -> list[str]:
    return [e async for e in sse_data(_chunks(*parts))]


async def test_sse_events_split_anywhere_with_comments_crlf_and_multiline_data() -> None:
    body = (b": keep-alive\r\n\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
            b"data: second\n\n: OPENROUTER PROCESSING\n\ndata: [DONE]\n\ndata: after\n\n")
    whole = await _events(body)
    assert whole == ['{"a":\n1}', "second", "[DONE]"]
    # The same body cut into single bytes reads the same.
    assert await _events(*(body[i:i + 1] for i in range(len(body)))) == whole


async def test_sse_last_event_without_blank_line_is_kept() -> None:
    assert await _events(b"data: one\n\ndata: two") == ["one", "two"]


async def test_sse_closes_the_body_it_reads_when_it_stops_early() -> None:
    """The body's generator is closed with the events' (the reader stops at
    [DONE], before the body's end), not left for the loop to close in a task
    when it is collected."""
    closed: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"data: one\n\ndata: [DONE]\n\n"
            yield b": the body's end, never read\n\n"
        finally:
            closed.append("body")

    assert await _events_of(body()) == ["one", "[DONE]"] and closed == ["body"]  # ends at [DONE]
    events = sse_data(body())
    assert [await anext(events), await anext(events)] == ["one", "[DONE]"]
    await events.aclose()  # a reader that stops at [DONE], as LLMClient does
    assert closed == ["body", "body"]


async def _events_of(chunks: AsyncIterator[bytes]) -> list[str]:
    return [e async for e in sse_data(chunks)]


def test_accumulator_joins_text_and_tool_call_pieces_by_index() -> None:
    acc = Accumulator()
    assert acc.feed('{"model":"m","choices":[{"delta":{"role":"assistant","content":""}}]}') is False
    assert acc.feed('{"choices":[{"delta":{"content":"Hel"}}]}') is True
    assert acc.feed('{"choices":[{"delta":{"content":"lo"}}]}') is True
    acc.feed('{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}')
    acc.feed('{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\\"x\\""}}]}}]}')
    acc.feed('{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":": 1}"}}]}}]}')
    acc.feed('{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}')
    acc.feed('{"choices":[],"usage":{"total_tokens":7}}')
    assert acc.text == "Hello" and acc.model == "m" and acc.finish_reason == "tool_calls"
    assert acc.tool_calls() == [("a", "f", '{"x": 1}'), ("b", "g", "{}")]
    assert acc.usage == {"total_tokens": 7}


def test_accumulator_refuses_an_error_object_and_garbage() -> None:
    with pytest.raises(StreamError) as err:
        Accumulator().feed('{"error":{"message":"overloaded","code":503}}')
    assert err.value.error and err.value.status == 503
    with pytest.raises(StreamError) as err:
        Accumulator().feed("not json")
    assert not err.value.error


async def test_streamed_reply_reaches_on_text_as_it_grows(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_stream(["The ", "answer ", "is ", "42."])
    seen: list[str] = []
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}], on_text=seen.append)
    assert res.content == "The answer is 42." and res.finish_reason == "stop" and res.model == "m1"
    assert seen == ["The ", "The answer ", "The answer is ", "The answer is 42."]
    assert fake_llm.requests[0]["stream"] is True


async def test_without_on_text_nothing_is_streamed(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("whole")
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}])
    assert res.content == "whole" and "stream" not in fake_llm.requests[0]


async def test_streamed_tool_calls_come_back_whole(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "咖啡 beans"}},
                                           {"name": "cron_list", "arguments": {}}])
    seen: list[str] = []
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "x"}], tools=[{"type": "function"}], on_text=seen.append)
    assert seen == [] and res.finish_reason == "tool_calls"
    assert [(c.name, c.parsed_arguments()) for c in res.tool_calls] == [
        ("memory_search", {"query": "咖啡 beans"}), ("cron_list", {})]
    assert all(c.id.startswith("call_") for c in res.tool_calls)


async def test_a_stream_cut_short_is_asked_again_and_the_text_starts_over(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_stream(["Half ", "an ", "answer"], cut_after=2)
    fake_llm.queue_stream(["Whole ", "answer"])
    seen: list[str] = []
    sleeps = Sleeps()
    async with client(fake_llm, sleep=sleeps) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}], on_text=seen.append)
    assert res.content == "Whole answer" and res.attempts == 2 and len(sleeps.delays) == 1
    assert seen == ["Half ", "Half an ", "Whole ", "Whole answer"]


async def test_a_stream_that_keeps_breaking_fails_as_unavailable(fake_llm: FakeOpenAI) -> None:
    for _ in range(3):
        fake_llm.queue_stream(["a", "b"], cut_after=1)
    async with client(fake_llm, sleep=Sleeps()) as llm:
        with pytest.raises(LLMUnavailable, match="ended before"):
            await llm.chat([{"role": "user", "content": "q"}], on_text=lambda _t: None)
    assert len(fake_llm.requests) == 3  # max_retries 2


async def test_an_error_reported_mid_stream_is_retried_and_scrubbed(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_stream(["Part"], error=f"upstream overloaded (key {KEY})")
    fake_llm.queue_stream(["Fine"])
    async with client(fake_llm, sleep=Sleeps()) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}], on_text=lambda _t: None)
    assert res.content == "Fine" and res.attempts == 2
    for _ in range(3):
        fake_llm.queue_stream(["Part"], error=f"upstream overloaded (key {KEY})")
    async with client(fake_llm, sleep=Sleeps()) as llm:
        with pytest.raises(LLMUnavailable) as err:
            await llm.chat([{"role": "user", "content": "q"}], on_text=lambda _t: None)
    assert "overloaded" in str(err.value) and KEY not in str(err.value) and KEY not in err.value.body


async def test_a_server_that_answers_whole_is_read_whole(fake_llm: FakeOpenAI) -> None:
    fake_llm._script.append(Reply(content="all at once", whole=True))
    seen: list[str] = []
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}], on_text=seen.append)
    assert res.content == "all at once" and seen == []


async def test_an_error_status_on_a_streamed_request_is_the_usual_error(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(500, times=1)
    fake_llm.queue_stream(["after ", "retry"])
    async with client(fake_llm, sleep=Sleeps()) as llm:
        res = await llm.chat([{"role": "user", "content": "q"}], on_text=lambda _t: None)
    assert res.content == "after retry" and res.attempts == 2
    fake_llm.queue_error(400, body="bad thing")
    async with client(fake_llm) as llm:
        with pytest.raises(Exception, match="400: invalid_request_error - bad thing"):
            await llm.chat([{"role": "user", "content": "q"}], on_text=lambda _t: None)


async def test_a_broken_event_is_a_bad_response_not_retried() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"}}]}\n\ndata: {oops\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    calls = 0

    def count(_t: str) -> None:
        nonlocal calls
        calls += 1

    try:
        async with LLMClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", sleep=Sleeps()) as llm:
            with pytest.raises(LLMBadResponse, match="broken stream"):
                await llm.chat([{"role": "user", "content": "q"}], on_text=count)
    finally:
        await runner.cleanup()
    assert calls == 1


async def test_an_endpoint_that_refuses_to_stream_is_asked_for_whole_answers(fake_llm: FakeOpenAI) -> None:
    fake_llm.refuse_stream = True
    fake_llm.queue_reply("first")
    fake_llm.queue_reply("second")
    seen: list[str] = []
    async with client(fake_llm) as llm:
        assert (await llm.chat([{"role": "user", "content": "q"}], on_text=seen.append)).content == "first"
        assert (await llm.chat([{"role": "user", "content": "q"}], on_text=seen.append)).content == "second"
    assert len(fake_llm.refused) == 1  # asked to stream once, remembered
    assert [r.get("stream") for r in fake_llm.requests] == [None, None] and seen == []
