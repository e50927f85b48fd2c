"""The OpenAI-compatible fake takes content parts as the real API does and
refuses malformed ones with its wording; checked with plain httpx."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, images, said

PNG = b"\x89PNG\r\n\x1a\n" + bytes(40)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=lambda body: Reply(content=said(body))) as server:
        yield server


async def chat(fake: FakeOpenAI, messages: list[dict[str, Any]]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(fake.url + "/chat/completions", json={"model": "m", "messages": messages})


def picture(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


async def test_content_parts_are_taken_and_their_text_is_what_was_said(fake: FakeOpenAI) -> None:
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    r = await chat(fake, [{"role": "system", "content": "be brief"},
                          {"role": "user", "content": [{"type": "text", "text": "<time>09:00</time>\nwhat is it?"},
                                                       picture(data_url), picture("https://example.com/a.png")]}])
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "what is it?"
    assert images(fake.requests[0]) == [("image/png", PNG)]


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([{"role": "user", "content": [picture("data:image/png;base64,%%%")]}], "invalid format"),
        ([{"role": "user", "content": [picture("data:image/png;base64," + base64.b64encode(b"text").decode())]}],
         "unsupported image"),
        ([{"role": "system", "content": [picture("https://example.com/a.png")]}], "only allowed for messages with role 'user'"),
        ([{"role": "user", "content": [{"type": "audio", "x": 1}]}], "Supported values are"),
        ([{"role": "user", "content": 42}], "expected one of a string or array"),
    ],
)
async def test_malformed_content_is_refused_as_the_real_api_does(
    fake: FakeOpenAI, messages: list[dict[str, Any]], says: str
) -> None:
    r = await chat(fake, messages)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert says in r.json()["error"]["message"] and fake.requests == [] and len(fake.refused) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stop_ends_a_delayed_reply_as_it_does_a_held_one(stream: bool) -> None:
    # A test that gave up on a late reply (tests/memory/test_extraction.py,
    # test_provider_errors_e2e.py's stalled stream) waited the delay out at
    # the fake's stop, in its teardown.
    fake = await FakeOpenAI().start()
    if stream:
        fake.queue_stream(["too ", "late"], delay=600.0)
    else:
        fake.queue_delay(600.0, "too late")

    async def ask() -> None:
        async with httpx.AsyncClient(timeout=None) as client:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
            async with client.stream("POST", fake.url + "/chat/completions", json=body) as r:
                async for _ in r.aiter_bytes():
                    pass

    asking = asyncio.create_task(ask())
    try:
        for _ in range(1000):  # the request in, within 10 s
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        assert not asking.done()
        await asyncio.wait_for(fake.stop(), 30)  # a guard against waiting the 600 s out, not a speed bound
    finally:
        asking.cancel()
        await fake.stop()


async def test_an_extraction_requests_user_lines_are_read_as_the_memory_model_reads_them() -> None:
    """``extraction_lines``: the numbered user lines of a real extraction
    request (memory/llm.py numbers what memory/extraction.py writes), what
    a scripted memory model answers facts from; a chat turn has none."""
    from memory.llm import MemoryLLM
    from tests.fakes.openai_server import extraction_lines

    async with FakeOpenAI(responder=lambda body: Reply(content='{"facts": [], "summary": "tea"}')) as fake:
        llm = MemoryLLM(base_url=fake.url, model="mem", api_key=fake.api_key or "sk-test-000000", timeout=5.0, retries=0)
        try:
            await llm.extract(["[2026-03-02 Mon 10:00] user: I like green tea", "[10:01] assistant: Noted.",
                               "[10:02] user: and oolong [p1-2]"])
        finally:
            await llm.aclose()
        await chat(fake, [{"role": "user", "content": "L1 [10:00] user: not an extraction"}])
    assert extraction_lines(fake.requests[0]) == [(1, "I like green tea"), (3, "and oolong [p1-2]")]
    assert extraction_lines(fake.requests[1]) == []


async def test_requests_are_told_apart_by_kind_as_the_product_sends_them() -> None:
    """``request_kind``: the gateway's chat requests (plain, with tools,
    streamed) and each memory model call, as memory/llm.py and
    gateway/llm.py build them; ``chat_requests`` / ``last_chat`` read the
    turn's request whatever background call came after it."""
    from gateway.llm import LLMClient
    from memory.llm import Candidate, MemoryLLM
    from tests.fakes.openai_server import request_kind

    def answer(body: dict[str, Any]) -> Reply:
        if not body.get("response_format"):
            return Reply(content="hello")
        system = body["messages"][0]["content"]
        return Reply(content='{"entries": []}' if "core profile" in system
                     else '{"facts": []}' if "consolidate" in system else '{"facts": [], "summary": ""}')

    tool = {"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}
    async with FakeOpenAI(responder=answer) as fake:
        memory = MemoryLLM(base_url=fake.url, model="mem", api_key="sk-test-000000", timeout=5.0, retries=0)
        async with LLMClient(base_url=fake.url, model="m", max_retries=0) as chat_llm:
            try:
                await chat_llm.chat([{"role": "user", "content": "first"}])
                await memory.extract(["[2026-03-02 Mon 10:00] user: I like green tea"])
                await chat_llm.chat([{"role": "user", "content": "second"}], tools=[tool], on_text=lambda _: None)
                await memory.extract(["[10:00] summary"], source="events")
                await memory.merge([Candidate(1, "likes tea", "preference", 1.0)], partition="_general")
                await memory.profile(["likes tea"], [Candidate(1, "likes green tea", "preference", 1.5)])
                await memory.complete_json("Answer in JSON.", "{}")
            finally:
                await memory.aclose()
    kinds = [request_kind(r) for r in fake.requests]
    assert kinds == ["chat", "extract", "chat", "extract", "merge", "profile", "json"]
    assert [said(r) for r in fake.chat_requests()] == ["first", "second"]
    assert said(fake.last_chat()) == "second" and fake.last_messages() == fake.last_chat()["messages"]
    assert fake.memory_requests() == fake.requests[1:2] + fake.requests[3:]
    assert fake.memory_requests("extract") == [fake.requests[1], fake.requests[3]]
    assert fake.memory_requests("profile") == [fake.requests[5]]


async def test_last_chat_before_any_chat_request_fails_naming_what_came() -> None:
    async with FakeOpenAI() as fake:
        async with httpx.AsyncClient(timeout=10) as client:
            await client.post(fake.url + "/chat/completions", json={
                "model": "m", "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": "You are a memory extraction engine. From..."},
                             {"role": "user", "content": "L1 [10:00] user: hi"}]})
    assert fake.last_messages() == []
    with pytest.raises(AssertionError, match=r"no chat request yet \(requests: \['extract'\]\)"):
        fake.last_chat()


async def test_a_reply_scripted_for_chat_is_passed_by_a_memory_request() -> None:
    """``queue_reply(kind="chat")``: an extraction that comes first (as one
    a clock step set off does) gets the responder's answer, and the turn
    still gets its scripted one; unmarked scripts answer whatever comes."""
    from memory.llm import MemoryLLM

    async with FakeOpenAI(responder=lambda body: Reply(content='{"facts": [], "summary": "s"}')) as fake:
        fake.queue_reply("the turn's answer", kind="chat")
        memory = MemoryLLM(base_url=fake.url, model="mem", api_key="sk-test-000000", timeout=5.0, retries=0)
        try:
            extraction = await memory.extract(["[2026-03-02 Mon 10:00] user: I like green tea"])
            turn = await chat(fake, [{"role": "user", "content": "hello"}])
            fake.queue_reply('{"facts": [], "summary": "scripted"}')
            assert (await memory.extract(["[10:01] user: and oolong"])).summary == "scripted"
        finally:
            await memory.aclose()
    assert extraction.summary == "s"
    assert turn.json()["choices"][0]["message"]["content"] == "the turn's answer"
