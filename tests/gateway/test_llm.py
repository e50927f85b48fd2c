from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest
from structlog.testing import capture_logs

from gateway.llm import (
    LLMAuthError,
    LLMBadRequest,
    LLMBadResponse,
    LLMClient,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
    _retry_after,
    map_transport_error,
    parse_completion,
)
from tests.fakes.openai_server import FakeOpenAI, Reply

KEY = "sk-test-secret-key-123456"


class Sleeps:
    """Records backoff delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def client(fake: FakeOpenAI, **kw: object) -> LLMClient:
    opts: dict[str, object] = {"base_url": fake.url, "api_key": KEY, "model": "m1", "timeout": 5.0, "max_retries": 2}
    opts.update(kw)
    return LLMClient(**opts)  # type: ignore[arg-type]


async def test_reply_is_parsed_and_request_is_openai_shaped(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("你好")
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "hi"}], max_tokens=50, temperature=0.2)
    assert res.content == "你好" and res.tool_calls == () and res.finish_reason == "stop"
    assert res.model == "m1" and res.attempts == 1 and res.usage.total_tokens >= 0
    body = fake_llm.requests[0]
    assert body["model"] == "m1" and body["max_tokens"] == 50 and body["temperature"] == 0.2
    assert "tools" not in body
    assert fake_llm.headers[0]["Authorization"] == f"Bearer {KEY}"


async def test_tool_calls_are_parsed(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "咖啡"}}])
    async with client(fake_llm) as llm:
        res = await llm.chat([{"role": "user", "content": "x"}], tools=[{"type": "function", "function": {"name": "memory_search"}}])
    assert res.content == "" and res.finish_reason == "tool_calls"
    (call,) = res.tool_calls
    assert call.name == "memory_search" and call.parsed_arguments() == {"query": "咖啡"}
    assert res.assistant_message()["tool_calls"][0]["id"] == call.id
    assert fake_llm.requests[0]["tools"][0]["function"]["name"] == "memory_search"


async def test_5xx_and_429_are_retried_with_growing_backoff(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(500)
    fake_llm.queue_error(429)
    fake_llm.queue_reply("finally")
    sleeps = Sleeps()
    async with client(fake_llm, sleep=sleeps, backoff_base=1.0) as llm:
        res = await llm.chat([{"role": "user", "content": "x"}])
    assert res.content == "finally" and res.attempts == 3 and len(fake_llm.requests) == 3
    # jittered exponential: attempt 0 in [0.5, 1], attempt 1 in [1, 2]
    assert 0.5 <= sleeps.delays[0] <= 1.0 and 1.0 <= sleeps.delays[1] <= 2.0


async def test_gives_up_after_max_retries(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(503, times=3)
    async with client(fake_llm, sleep=Sleeps()) as llm:
        with pytest.raises(LLMUnavailable) as err:
            await llm.chat([{"role": "user", "content": "x"}])
    assert err.value.status == 503 and len(fake_llm.requests) == 3
    fake_llm.queue_error(429, times=3)
    async with client(fake_llm, sleep=Sleeps()) as llm:
        with pytest.raises(LLMRateLimited):
            await llm.chat([{"role": "user", "content": "x"}])


async def test_auth_error_is_not_retried_and_never_shows_the_key(fake_llm: FakeOpenAI) -> None:
    with capture_logs() as logs:
        async with client(fake_llm, api_key="sk-wrong-key-abcdef", sleep=Sleeps()) as llm:
            with pytest.raises(LLMAuthError) as err:
                await llm.chat([{"role": "user", "content": "x"}])
    assert err.value.status == 401 and len(fake_llm.requests) == 0  # rejected before recording
    assert "sk-wrong-key-abcdef" not in str(err.value) and "sk-wrong-key-abcdef" not in repr(logs)


async def test_retry_logs_do_not_contain_the_key(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(500)
    with capture_logs() as logs:
        async with client(fake_llm, sleep=Sleeps()) as llm:
            await llm.chat([{"role": "user", "content": "x"}])
    assert any(e["event"] == "LLM provider error, retrying" for e in logs)
    assert KEY not in repr(logs)


async def test_timeout_is_mapped(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_delay(2.0)
    async with client(fake_llm, timeout=0.2, max_retries=0) as llm:
        with pytest.raises(LLMTimeout) as err:
            await asyncio.wait_for(llm.chat([{"role": "user", "content": "x"}]), 5)
    assert isinstance(err.value, LLMUnavailable)
    assert isinstance(err.value.__cause__, httpx.TimeoutException)


async def test_connection_refused_is_retried_then_unavailable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    async with LLMClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, sleep=sleeps) as llm:
        with pytest.raises(LLMUnavailable) as err:
            await llm.chat([{"role": "user", "content": "x"}])
    assert len(sleeps.delays) == 2 and isinstance(err.value.__cause__, httpx.ConnectError)


async def test_bad_request_mentioning_tools_is_recognised(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(400, body="tools is not supported by this model")
    fake_llm.queue_error(404, body="The model `nope` does not exist")
    async with client(fake_llm) as llm:
        with pytest.raises(LLMBadRequest) as first:
            await llm.chat([{"role": "user", "content": "x"}])
        with pytest.raises(LLMBadRequest) as second:
            await llm.chat([{"role": "user", "content": "x"}])
    assert first.value.mentions_tools and not second.value.mentions_tools
    assert len(fake_llm.requests) == 2  # 4xx is not retried


def test_retry_after_header_is_honoured_and_capped() -> None:
    llm = LLMClient(base_url="http://127.0.0.1:9/v1", model="m", max_retry_after=10.0)
    assert llm._backoff(0, httpx.Response(429, headers={"Retry-After": "3"})) == 3.0
    assert llm._backoff(0, httpx.Response(429, headers={"retry-after-ms": "250"})) == 0.25
    assert llm._backoff(0, httpx.Response(429, headers={"Retry-After": "120"})) == 10.0
    assert llm._backoff(0, httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


def test_malformed_completions_raise_bad_response() -> None:
    for body in ({}, {"choices": []}, {"choices": [{"message": {"content": 3}}]}, {"choices": [{"message": {"tool_calls": [{}]}}]}, []):
        with pytest.raises(LLMBadResponse):
            parse_completion(body)
    # content as a list of parts, arguments as an object: accepted
    res = parse_completion(
        {
            "choices": [
                {
                    "message": {
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "tool_calls": [{"id": "c1", "function": {"name": "t", "arguments": {"q": 1}}}],
                    }
                }
            ]
        }
    )
    assert res.content == "ab" and res.tool_calls[0].parsed_arguments() == {"q": 1}


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


def test_every_httpx_error_is_mapped() -> None:
    """A new httpx error class fails here until it is mapped on purpose."""
    generic = {httpx.HTTPError, httpx.RequestError, httpx.TooManyRedirects, httpx.HTTPStatusError, httpx.TransportError}
    for cls in [httpx.HTTPError, *_all_subclasses(httpx.HTTPError)]:
        if cls is httpx.HTTPStatusError:
            exc = cls("x", request=httpx.Request("GET", "http://x"), response=httpx.Response(500))
        else:
            exc = cls("x")
        mapped = map_transport_error(exc)
        assert isinstance(mapped, LLMError)
        if cls not in generic:
            assert type(mapped) is not LLMError, f"{cls.__name__} is not mapped to a specific LLMError"


async def test_requests_and_responses_leave_no_reference_cycle(fake_llm: FakeOpenAI) -> None:
    # The gateway collects cycles rarely (gateway/runtime.py): a request and
    # response kept alive by a cycle held the prompt's JSON until then.
    import gc

    fake_llm.queue_error(500)
    fake_llm.queue_reply("ok")
    async with client(fake_llm, sleep=Sleeps()) as llm:
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            res = await llm.chat([{"role": "user", "content": "hi " * 1000}])
            gc.collect()
            cyclic = [o for o in gc.garbage if isinstance(o, httpx.Request | httpx.Response)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert res.content == "ok" and res.attempts == 2
    assert cyclic == []


@pytest.mark.parametrize(
    ("status", "body", "too_long"),
    [
        (400, '{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, your messages '
              'resulted in 9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}', True),
        (400, '{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",'
              ' "type": "exceed_context_size_error"}}', True),  # llama.cpp
        (400, '{"object": "error", "message": "This model\'s maximum context length is 4096 tokens. However, you '
              'requested 5000 tokens (4000 in the messages, 1000 in the completion)."}', True),  # vLLM
        (400, '{"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}}', True),
        (400, '{"error": {"message": "Invalid content type. image_url is only supported by certain models."}}', False),
        (500, '{"error": {"message": "maximum context length"}}', False),  # a server error is not about the request
    ],
)
def test_a_request_over_the_models_context_is_recognised(status: int, body: str, too_long: bool) -> None:
    assert LLMBadRequest("refused", status=status, body=body).context_too_long is too_long


@pytest.mark.parametrize(
    ("status", "body", "filtered"),
    [
        (400, "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.", True),
        (400, "Input flagged by content_filter", True),
        (400, "Invalid value for 'temperature'", False),
        (500, "content management policy service down", False),  # a server error, not a refusal
    ],
)
def test_a_prompt_refused_by_a_content_filter_is_recognised(status: int, body: str, filtered: bool) -> None:
    assert LLMBadRequest("refused", status=status, body=body).filtered is filtered


def test_openai_rate_limit_resets_are_read_on_a_429() -> None:
    llm = LLMClient(base_url="http://127.0.0.1:9/v1", model="m", max_retry_after=10.0)
    exhausted = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s",
                 "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}
    assert _retry_after(httpx.Response(429, headers=exhausted)) == 360.0  # both at 0: the later reset
    requests = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms",
                "x-ratelimit-remaining-tokens": "149000", "x-ratelimit-reset-tokens": "1h2m3.5s"}
    assert llm._backoff(0, httpx.Response(429, headers=requests)) == pytest.approx(0.02)
    assert _retry_after(httpx.Response(429, headers={**exhausted, "Retry-After": "2"})) == 2.0  # Retry-After first
    assert _retry_after(httpx.Response(200, headers=exhausted)) is None  # only a 429 is about them
    garbled = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "soon"}
    assert _retry_after(httpx.Response(429, headers=garbled)) is None


async def test_a_wait_longer_than_we_retry_is_not_slept_but_raised_with_it(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(429, retry_after=3600)
    sleeps = Sleeps()
    async with client(fake_llm, sleep=sleeps, max_retries=3) as llm:
        with pytest.raises(LLMRateLimited) as err:
            await llm.chat([{"role": "user", "content": "x"}])
    assert sleeps.delays == [] and len(fake_llm.requests) == 1 and err.value.retry_after == 3600
    fake_llm.queue_error(503, retry_after=2)  # a short wait is still waited
    async with client(fake_llm, sleep=sleeps, max_retries=3) as llm:
        assert (await llm.chat([{"role": "user", "content": "x"}])).content == "ok"
    assert sleeps.delays == [2.0]


async def test_an_html_error_page_is_read_as_its_words(fake_llm: FakeOpenAI) -> None:
    page = ("<html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head>"
            "<body><h1>Bad Gateway</h1><p>cloudflare</p></body></html>")
    fake_llm.queue(Reply(status=502, raw=page, content_type="text/html"))
    async with client(fake_llm, max_retries=0) as llm:
        with pytest.raises(LLMUnavailable) as err:
            await llm.chat([{"role": "user", "content": "x"}])
    assert err.value.body == "502 Bad Gateway Bad Gateway cloudflare" and "<" not in str(err.value)


SECRET_WORDS = "my sister Hannelore owes 4823 euros to the Zürich clinic"


def _echoing(body: dict[str, object]) -> Reply:
    """A provider that quotes what it was sent back in its error, as many do."""
    sent = json.dumps(body["messages"], ensure_ascii=False)
    return Reply(content=None, status=400, error_type="invalid_request_error", error_code="invalid_value",
                 error_body=f"Invalid 'messages[1].content': {sent[:400]} is not valid. Also got {SECRET_WORDS}")


async def test_an_error_that_echoes_the_prompt_carries_no_user_words(fake_llm: FakeOpenAI) -> None:
    """The error's text and the logs say the status, the error's type and
    code and the shape of its message (length, hash), never the words the
    provider quoted back from the prompt."""
    fake_llm.responder = _echoing
    with capture_logs() as logs:
        async with client(fake_llm, max_retries=0) as llm:
            with pytest.raises(LLMBadRequest) as err:
                await llm.chat([{"role": "system", "content": "You are a helper."},
                                {"role": "user", "content": SECRET_WORDS}])
    text = str(err.value) + repr(logs)
    for word in ("Hannelore", "4823", "Zürich", "clinic", "sister"):
        assert word not in text
    assert "400" in text and "invalid_request_error" in text and "invalid_value" in text
    assert "sha256" in text  # the same error is still told apart from another
    assert "Hannelore" in err.value.body  # kept, unlogged, to tell refusals apart
