"""An OpenAI-compatible chat completions client over ``httpx.AsyncClient``.

One request per :meth:`LLMClient.chat`, retried with exponential backoff
(honouring ``Retry-After``, and on a 429 OpenAI's ``x-ratelimit-reset-*``)
on 408/409/429/5xx and on network errors, up to ``max_retries`` extra
attempts; a provider asking for a wait longer than ``max_retry_after`` (a
quota reset in an hour) is not waited for: the error is raised at once,
with that wait in ``retry_after``. The result is typed (:class:`ChatResult`).

Exception tree (every httpx error is mapped with ``raise ... from``)::

    LLMError
    ├── LLMAuthError        401 / 403: the key is wrong; retrying cannot help
    ├── LLMRateLimited      429 after the last retry
    ├── LLMUnavailable      5xx or network failure after the last retry
    │   └── LLMTimeout      no answer within ``timeout`` (last retry)
    ├── LLMBadRequest       other 4xx (unknown model, tools not supported,
    │                       pictures not read: ``refuses_images``, the
    │                       prompt refused by a content filter: ``filtered``)
    └── LLMBadResponse      2xx whose body is not a chat completion
        └── LLMFiltered     a completion the provider's content filter
                            withheld (raised by the agent, which reads it)

:func:`fails_over` says which of them another endpoint could fix
(``gateway/failover.py``). ``chat(fail_fast=True)`` is for an endpoint with
a fallback behind it: at most one retry, and none after a timeout or a 429,
whose wait the fallback can spend answering instead.

The API key is sent as a header and never appears in a log line or in an
exception message: a provider's error text is kept scrubbed of it (and of
the ``redact`` keys, and of anything shaped like a key) and cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import httpx
import structlog
from pydantic import SecretStr

from memory.failover import context_exceeded, endpoint_scopes, model_missing
from memory.llm import unbound
from memory.redact import error_summary, provider_error_text, scrub_provider_text, sent_text, summarize_error
from memory.wrongpath import WrongPath

from .aiohttp_transport import AiohttpTransport
from .config import ProviderConfig
from .llm_stream import Accumulator, StreamError, sse_data

__all__ = [
    "ChatResult",
    "LLMAuthError",
    "LLMBadRequest",
    "LLMBadResponse",
    "LLMClient",
    "LLMError",
    "LLMFiltered",
    "LLMRateLimited",
    "LLMTimeout",
    "LLMUnavailable",
    "ToolCall",
    "Usage",
    "fails_over",
    "has_images",
    "map_transport_error",
]

# Lazy: resolved at each call, so it follows configure_logging (and its
# redaction) even though this module is imported before logging is set up.
log = structlog.get_logger(component="llm")

_RETRY_STATUS = frozenset({408, 409, 429})
_TOOLS_WORDS = re.compile(r"tool|function", re.IGNORECASE)
# How providers say their content filter refused the prompt: Azure OpenAI's
# 400 "The response was filtered due to the prompt triggering Azure
# OpenAI's content management policy" (code "content_filter").
_FILTERED = re.compile(r"content management policy|content[_ ]filter", re.IGNORECASE)
# How providers say a model does not read pictures: OpenAI's "Invalid
# content type. image_url is only supported by certain models.", vLLM's
# "<model> is not a multimodal model", Ollama's "this model is missing data
# required for image input", LM Studio's "Model does not support images",
# DeepSeek's "unknown variant `image_url`", Groq's "content must be a
# string" (list content refused), and "image input is not supported".
_IMAGES_REFUSED = re.compile(
    r"image_url\W{0,3}(?:is )?only supported by certain models"
    r"|not a multi-?modal model"
    r"|missing data required for image input"
    r"|(?:does not|doesn't|cannot|can't|do not|don't) (?:support|accept|handle|process)\s+"
    r"(?:image|images|image input|image_url|vision|multi-?modal)"
    r"|(?:image|images|image input|image_url|vision|multi-?modal(?: input)?)(?: content| parts?| inputs?)?"
    r" (?:is|are) not supported"
    r"|unknown variant\W{0,2}image_url"
    r"|content\W{0,3}(?:\W{0,3}\w+){0,2}\W{0,3}must be a string"
    r"|at most 0 image",
    re.IGNORECASE,
)


class LLMError(Exception):
    """The provider could not give an answer. ``status`` is the HTTP status
    when there was a response."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after  # seconds the provider asked for (429/503), if it said


class LLMAuthError(LLMError):
    pass


class LLMRateLimited(LLMError):
    pass


class LLMUnavailable(LLMError):
    pass


class LLMTimeout(LLMUnavailable):
    pass


class LLMBadRequest(LLMError):
    @property
    def context_too_long(self) -> bool:
        """The request is over the model's context window: the same request
        with less in it (a shorter file, fewer old messages) may be answered."""
        return context_exceeded(self.status, self.body or str(self))

    @property
    def filtered(self) -> bool:
        """The provider's content filter refused the prompt: asking again
        the same way cannot help."""
        return self.status in (400, 403, 422) and bool(_FILTERED.search(self.body or str(self)))

    @property
    def mentions_tools(self) -> bool:
        """The provider refused the ``tools`` parameter (no function calling)."""
        if self.refuses_images:  # "... only supported by certain models" is about the pictures
            return False
        return self.status in (400, 404, 422) and bool(_TOOLS_WORDS.search(self.body or str(self)))

    @property
    def refuses_images(self) -> bool:
        """The model cannot read pictures (image content parts refused):
        the same request without them may be answered. Not a picture the
        model could read but found broken ("unsupported image", too large):
        that one says nothing of the model."""
        return self.status in (400, 415, 422) and bool(_IMAGES_REFUSED.search(self.body or str(self)))


class LLMBadResponse(LLMError):
    pass


class LLMFiltered(LLMBadResponse):
    """The provider withheld the answer (``finish_reason: content_filter``)
    and said nothing else."""


def fails_over(exc: LLMError) -> bool:
    """Whether another endpoint or model could answer where this one failed.

    Yes: unreachable, 5xx, timeout, rate limited, key refused, a 2xx that is
    not a completion, and the model unknown there (404, or a 400/422 saying
    so). No: any other bad request (context too long, invalid messages,
    tools refused): it is about the request, and every model would refuse
    it the same way (the agent handles a tools refusal by itself). Nor
    pictures refused: the endpoint is fine, that model only cannot see
    (:class:`gateway.failover.FailoverLLM` asks the next one with them).
    """
    if isinstance(exc, LLMBadRequest):
        if exc.status is None:  # the URL itself is wrong (UnsupportedProtocol): that endpoint's fault
            return True
        if exc.mentions_tools or exc.refuses_images:  # the failover and the agent handle these themselves
            return False
        return model_missing(exc.status, exc.body or str(exc))
    return True


def map_transport_error(exc: httpx.HTTPError) -> LLMError:
    """An httpx error (no HTTP response) as an :class:`LLMError`."""
    if isinstance(exc, httpx.TimeoutException):
        return LLMTimeout(f"LLM provider timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return LLMBadRequest(f"bad provider URL or request ({type(exc).__name__})")
    if isinstance(exc, httpx.NetworkError | httpx.ProtocolError | httpx.ProxyError):
        return LLMUnavailable(f"LLM provider unreachable ({type(exc).__name__})")
    if isinstance(exc, httpx.DecodingError):
        return LLMBadResponse(f"undecodable response from LLM provider ({type(exc).__name__})")
    # TooManyRedirects, HTTPStatusError and anything httpx adds later.
    return LLMError(f"LLM request failed ({type(exc).__name__})")


def _retryable_transport(exc: httpx.HTTPError) -> bool:
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the provider sent it

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments object; raises ``ValueError`` if it is not one."""
        if not self.arguments.strip():
            return {}
        value = json.loads(self.arguments)
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class ChatResult:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    model: str = ""
    attempts: int = 1
    elapsed_ms: float = 0.0
    # Which configured endpoint answered ("agent", "agent.fallbacks[0]");
    # empty from a bare LLMClient. Set by gateway/failover.py.
    candidate: str = ""

    def assistant_message(self) -> dict[str, Any]:
        """This reply as a message to send back in a tool-calling round."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                for tc in self.tool_calls
            ]
        return msg


def _text(content: Any) -> str:
    # Some providers send content as a list of parts.
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise LLMBadResponse(f"unexpected message content of type {type(content).__name__}")


def parse_completion(data: Any) -> ChatResult:
    """A chat completion body as a :class:`ChatResult`."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        calls = []
        for i, tc in enumerate(message.get("tool_calls") or []):
            fn = tc["function"]
            args = fn.get("arguments", "")
            if not isinstance(args, str):  # a few servers send the object itself
                args = json.dumps(args, ensure_ascii=False)
            calls.append(ToolCall(id=str(tc.get("id") or f"call_{i}"), name=str(fn["name"]), arguments=args))
        raw_usage = data.get("usage") or {}
        usage = Usage(
            prompt_tokens=int(raw_usage.get("prompt_tokens") or 0),
            completion_tokens=int(raw_usage.get("completion_tokens") or 0),
            total_tokens=int(raw_usage.get("total_tokens") or 0),
        )
        return ChatResult(
            content=_text(message.get("content")),
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason=str(choice.get("finish_reason") or ""),
            model=str(data.get("model") or ""),
        )
    except LLMBadResponse:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise LLMBadResponse(f"not a chat completion: {type(exc).__name__} {exc}") from exc


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(text: str) -> float | None:
    """Seconds in a rate-limit reset as providers write it: Go's durations
    ("6m0s", "1h2m3.5s", "20ms") or a bare number of seconds."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _DURATION_UNIT[m.group(2)]
        pos = m.end()
    return total if text and pos == len(text) else None


def _ratelimit_reset(resp: httpx.Response) -> float | None:
    """When an exhausted rate limit frees up, from OpenAI's (and Groq's,
    DeepSeek's ...) ``x-ratelimit-remaining-*`` / ``x-ratelimit-reset-*``
    headers: the latest reset of the limits at 0, None when no limit says
    it is at 0 (the 429 is about something else)."""
    waits = []
    for limit in ("requests", "tokens"):
        if resp.headers.get(f"x-ratelimit-remaining-{limit}", "").strip() == "0":
            wait = _duration(resp.headers.get(f"x-ratelimit-reset-{limit}", ""))
            if wait is not None:
                waits.append(wait)
    return max(waits, default=None)


def _retry_after(resp: httpx.Response, now: datetime | None = None) -> float | None:
    """Seconds the provider asked us to wait, if it said."""
    ms = resp.headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    raw = resp.headers.get("retry-after")
    if not raw:
        return _ratelimit_reset(resp) if resp.status_code == 429 else None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class LLMClient:
    """Chat completions against one OpenAI-compatible endpoint.

    Pass ``client`` to share a connection pool (or to point at a test
    server); otherwise the client owns one and closes it in :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: SecretStr | str = "",
        model: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        client: httpx.AsyncClient | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        redact: Sequence[str] = (),
        setting: str = "provider",
    ) -> None:
        """``setting``: the config path of this endpoint's provider, named
        when its chat-completions path is not there (:mod:`memory.wrongpath`)."""
        self.base_url = base_url.rstrip("/")
        self.setting = setting
        self._wrong_path = WrongPath("chat model")
        # Other keys never to repeat from this provider's text (a failover's
        # other candidates'); its own is never repeated either.
        self.redact = tuple(redact)
        self._key = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._owns_client = client is None
        # The default sends through aiohttp: a third of httpcore's event-loop
        # CPU per request (gateway/aiohttp_transport.py).
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=AiohttpTransport(max_connections=100),
        )
        self._closed = False
        self._url = httpx.URL(f"{self.base_url}/chat/completions")
        self._timeout = {"timeout": httpx.Timeout(timeout).as_dict()}
        self._built_headers: tuple[str, list[tuple[str, str]]] | None = None
        # Models here that refused pictures: (status, the provider's words).
        # A later request with pictures to one of them is refused without a
        # call (``LLMBadRequest.refuses_images``), one warning in the log.
        self._blind: dict[str, tuple[int, str]] = {}
        # Models here whose endpoint refused "stream": true: asked for whole answers.
        self._whole: set[str] = set()

    @classmethod
    def from_config(
        cls, provider: ProviderConfig, *, model: str, client: httpx.AsyncClient | None = None, **kw: Any
    ) -> LLMClient:
        return cls(
            base_url=provider.base_url,
            api_key=provider.api_key,
            model=model,
            timeout=provider.timeout.total_seconds(),
            max_retries=provider.max_retries,
            client=client,
            **kw,
        )

    async def aclose(self) -> None:
        """Safe to call twice; leaves an injected client open."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def scopes(self, model: str) -> tuple[str, str, str]:
        """This endpoint with ``model`` as ``memory.failover`` keys its cooldowns."""
        return endpoint_scopes(self.base_url, model, self._key.get_secret_value())

    def _secrets(self) -> list[str]:
        return [self._key.get_secret_value(), *self.redact]

    def _headers(self) -> dict[str, str]:
        key = self._key.get_secret_value()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _request(self, body: Mapping[str, Any]) -> httpx.Request:
        """What ``client.post(url, json=body, headers=..., timeout=...)``
        builds, made directly: httpx's ``build_request`` (merging URL,
        headers, cookies and timeout per call) cost ~0.04 ms of event-loop
        CPU per request (micro-benchmark against the local fake)."""
        key = self._key.get_secret_value()
        if self._built_headers is None or self._built_headers[0] != key:
            headers = httpx.Headers(self._client.headers)
            headers.update(self._headers())
            headers["Content-Type"] = "application/json"
            self._built_headers = (key, list(headers.multi_items()))
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return httpx.Request("POST", self._url, headers=self._built_headers[1], content=content, extensions=self._timeout)

    def _backoff(self, attempt: int, resp: httpx.Response | None) -> float:
        asked = _retry_after(resp) if resp is not None else None
        if asked is not None:
            return min(asked, self.max_retry_after)
        base = min(self.backoff_max, self.backoff_base * (2.0**attempt))
        return base * (0.5 + random.random() / 2)  # jitter: many chats must not retry in lockstep

    async def _read_stream(self, resp: httpx.Response, on_text: Callable[[str], None], sent: str) -> ChatResult:
        """A streamed completion, put together as it arrives
        (gateway/llm_stream.py); ``on_text`` hears the text so far. Raises
        :class:`_StreamFailed` for a stream that broke off (a read error,
        or its end before ``[DONE]`` or a finish reason), or carried an
        error object, or a chunk that is not one."""
        acc = Accumulator()
        done = False
        events = sse_data(resp.aiter_raw())
        try:
            async with contextlib.aclosing(events):  # closed here, not by a task when collected
                async for payload in events:
                    if payload.strip() == "[DONE]":
                        done = True
                        break
                    if acc.feed(payload):
                        on_text(acc.text)
        except httpx.HTTPError as exc:
            raise _StreamFailed(map_transport_error(exc), retryable=_retryable_transport(exc)) from exc
        except StreamError as exc:
            message = scrub_provider_text(str(exc), self._secrets(), limit=500)
            said = summarize_error(str(exc), sent, self._secrets())
            if not exc.error:
                raise _StreamFailed(LLMBadResponse(f"LLM provider sent a broken stream: {said}"),
                                    retryable=False) from exc
            # A failure the server reported mid-answer (overloaded, cut by a
            # moderation layer): as the status it names, else a server error.
            error = _status_error(exc.status or 502, message, said=said)
            raise _StreamFailed(error, retryable=isinstance(error, LLMUnavailable | LLMRateLimited)) from exc
        if not done and not acc.finish_reason:
            error = LLMUnavailable("LLM provider's stream ended before the answer did")
            raise _StreamFailed(error, retryable=True)
        try:
            calls = tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in acc.tool_calls())
        except StreamError as exc:
            raise _StreamFailed(LLMBadResponse(f"LLM provider sent a broken stream: {exc}"), retryable=False) from exc
        usage = acc.usage
        return ChatResult(
            content=acc.text,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                total_tokens=int(usage.get("total_tokens") or 0),
            ),
            finish_reason=acc.finish_reason,
            model=acc.model,
        )

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        fail_fast: bool = False,
        on_text: Callable[[str], None] | None = None,
    ) -> ChatResult:
        """One completion. ``on_text``: the reply is streamed
        (``"stream": true``) and ``on_text`` hears the reply's text so far
        each time it grows; an attempt that fails and is made again starts
        from "" (so whatever showed the text replaces it). A server that
        answers a streamed request whole is read as a whole answer."""
        if self._closed:
            raise RuntimeError("LLMClient is closed")
        body: dict[str, Any] = {"model": model or self.model, "messages": list(messages)}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        if tools:
            body["tools"] = list(tools)
        if response_format is not None:
            body["response_format"] = dict(response_format)
        if extra:
            body.update(extra)
        if body["model"] in self._whole:
            on_text = None
        streaming = on_text is not None
        if streaming:
            body["stream"] = True
        pictures = has_images(messages)
        refused = self._blind.get(body["model"]) if pictures else None
        if refused is not None:  # known not to see: no request to pay for its refusal again
            raise LLMBadRequest(f"model {body['model']} does not read pictures (refused before)", status=refused[0],
                                body=refused[1])
        request = self._request(body)
        started = time.perf_counter()
        retries = min(self.max_retries, 1) if fail_fast else self.max_retries
        attempt = 0
        while True:
            try:
                if on_text is None:
                    resp = unbound(await self._client.send(request))
                else:
                    resp = await self._client.send(request, stream=True)
                    try:
                        if resp.status_code < 300 and _event_stream(resp):
                            streamed = await self._read_stream(resp, on_text, sent_text(body.get("messages")))
                            return replace(streamed, attempts=attempt + 1,
                                           elapsed_ms=(time.perf_counter() - started) * 1000)
                        await resp.aread()
                    finally:
                        await resp.aclose()
                        # As ``unbound``: no cycle back to the response.
                        resp.stream = httpx.ByteStream(b"")  # what was read stays in resp.content
            except _StreamFailed as failed:
                exc_ = failed.error
                if failed.retryable and attempt < retries and not fail_fast:
                    delay = self._backoff(attempt, None)
                    log.warning("LLM stream failed, retrying", error=type(exc_).__name__, attempt=attempt + 1,
                                delay_s=round(delay, 2))
                    attempt += 1
                    await self._sleep(delay)
                    continue
                raise exc_ from failed.__cause__
            except httpx.HTTPError as exc:
                slow = fail_fast and isinstance(exc, httpx.TimeoutException)
                if _retryable_transport(exc) and attempt < retries and not slow:
                    delay = self._backoff(attempt, None)
                    log.warning("LLM request failed, retrying", error=type(exc).__name__, attempt=attempt + 1, delay_s=round(delay, 2))
                    attempt += 1
                    await self._sleep(delay)
                    continue
                raise map_transport_error(exc) from exc
            status = resp.status_code
            if status < 300:
                try:
                    data = resp.json()
                except ValueError as exc:
                    raise LLMBadResponse("LLM provider returned a body that is not JSON", status=status) from exc
                result = parse_completion(data)
                return ChatResult(
                    content=result.content,
                    tool_calls=result.tool_calls,
                    usage=result.usage,
                    finish_reason=result.finish_reason,
                    model=result.model,
                    attempts=attempt + 1,
                    elapsed_ms=(time.perf_counter() - started) * 1000,
                )
            # Providers echo the key they refused, or parts of the request.
            message = scrub_provider_text(provider_error_text(resp), self._secrets(), limit=500)
            # What is logged: never the words it may quote back (memory/redact.py).
            said = error_summary(resp, sent_text(body.get("messages")), self._secrets())
            asked = _retry_after(resp)
            # A 429 with a fallback behind it, or a wait longer than we would
            # sleep (a quota reset in an hour): no retry could be answered.
            slow = (fail_fast and status == 429) or (asked is not None and asked > self.max_retry_after)
            if (status in _RETRY_STATUS or status >= 500) and attempt < retries and not slow:
                delay = self._backoff(attempt, resp)
                log.warning("LLM provider error, retrying", status=status, attempt=attempt + 1, delay_s=round(delay, 2))
                attempt += 1
                await self._sleep(delay)
                continue
            if asked is not None and asked > self.max_retry_after and attempt < retries:
                log.warning("LLM provider asked to wait longer than we retry", status=status,
                            retry_after_s=round(asked))
            self._wrong_path.answered(status, self._url.path, self.setting)  # a baseUrl without /v1: said once
            error = _status_error(status, message, asked, said=said)
            if streaming and isinstance(error, LLMBadRequest) and "stream" in message.lower():
                # A proxy or server that does not stream: whole answers from
                # it from now on, the reply shown when it is done.
                self._whole.add(body["model"])
                log.warning("model endpoint refused a streamed request; asking for whole answers from now on",
                            model=body["model"], status=status)
                return await self.chat(messages, tools=tools, model=model, max_tokens=max_tokens,
                                       temperature=temperature, response_format=response_format, extra=extra,
                                       fail_fast=fail_fast)
            if pictures and isinstance(error, LLMBadRequest) and error.refuses_images:
                self._blind[body["model"]] = (status, message)
                log.warning("model does not read pictures; photos go to it as a note from now on",
                            model=body["model"], status=status)
            raise error


class _StreamFailed(Exception):
    """A streamed answer that broke off or said it failed, as the error
    to raise and whether another attempt may get a whole one."""

    def __init__(self, error: LLMError, *, retryable: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.retryable = retryable


def _event_stream(resp: httpx.Response) -> bool:
    kind: str = resp.headers.get("content-type", "")
    return kind.split(";")[0].strip().lower() == "text/event-stream"


def has_images(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message carries a picture (an ``image_url`` content part)."""
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, Mapping) and p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )


def _status_error(status: int, message: str, retry_after: float | None = None, *, said: str) -> LLMError:
    # ``message`` (scrubbed of keys) is kept for telling refusals apart and
    # never logged; the exception's text, which is, says only ``said``
    # (memory.redact.error_summary: no words of the prompt).
    text = f"LLM provider answered {status}: {said}"
    if status in (401, 403):
        return LLMAuthError(text, status=status, body=message)
    if status == 429:
        return LLMRateLimited(text, status=status, body=message, retry_after=retry_after)
    if status >= 500 or status in _RETRY_STATUS:
        return LLMUnavailable(text, status=status, body=message, retry_after=retry_after)
    return LLMBadRequest(text, status=status, body=message)
