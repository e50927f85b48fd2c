"""An OpenAI-compatible chat completions server on 127.0.0.1.

Replies come from a script (``queue_reply`` / ``queue_error``) or from a
``responder`` callable; with neither, it answers ``"ok"``. Every request body
is recorded in ``requests`` so tests can assert on the exact prompt the LLM
received; ``chat_requests()`` / ``last_chat()`` are the gateway's chat
requests alone and ``memory_requests(kind)`` the memory model's
(:func:`request_kind`), which background work can interleave with them.

A message's ``content`` is a string or, as the real API takes it, a list of
content parts: ``{"type": "text", "text"}`` and, in user messages only,
``{"type": "image_url", "image_url": {"url", "detail"?}}`` whose URL is
``http(s)`` or a base64 ``data:image/...`` URL of a PNG, JPEG, GIF or WebP
picture (checked by its bytes). Anything else is a 400 with OpenAI's
wording. :func:`images` decodes a request's pictures.

``POST /v1/audio/transcriptions`` (multipart ``file`` and ``model``, as
Whisper's endpoint takes them) answers a deterministic transcript: the text
after ``SAY:`` in the recording's bytes (tests put it there), else
``"(N bytes of audio)"``; ``response_format`` ``json`` (default) or ``text``.
Each call is recorded in ``transcriptions``; ``queue_transcription_error``
scripts a failure.

``blind_models`` names models that cannot read pictures: a chat request for
one of them with an ``image_url`` part is refused with a 400 in the words
of the server it plays (:data:`BLIND_WORDINGS`: OpenAI, vLLM, Ollama),
recorded in ``refused`` like any content refusal.

``POST /v1/embeddings`` answers with deterministic vectors (see
:func:`fake_embedding`): words and CJK character bigrams, each mapped through
``embedding_concepts`` (so a test can declare "car" and "automobile" one
concept) and feature-hashed with a sign into ``embedding_dim`` buckets. Each
request's inputs are recorded in ``embedding_requests``, the
``encoding_format`` it asked for in ``embedding_formats``. As OpenAI does, it
answers ``"base64"`` with the little-endian float32 bytes in base64;
``embedding_base64`` plays servers that do not: ``"refuse"`` (a 400, as
some OpenAI-compatible servers do) or ``"ignore"`` (floats all the
same, as Ollama). ``embedding_serial`` plays a server with one worker
(Ollama's default): requests are answered one at a time, first come first
served, each taking ``embedding_per_text`` seconds per input; how many
inputs of other requests were answered while each one waited is recorded
in ``embedding_waited``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import math
import re
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from gateway.http import stop_listening

__all__ = [
    "BLIND_WORDINGS", "MEMORY_KINDS", "FakeOpenAI", "Reply", "RequestKind", "embedding_tokens", "fake_embedding", "images",
    "request_kind", "said", "split_user_content", "text_of",
]

_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")


def embedding_tokens(text: str) -> list[str]:
    """Lowercase words; a run of CJK characters gives its character bigrams
    (the character alone when the run is one long)."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        pos = 0
        for m in _CJK.finditer(word):
            if m.start() > pos:
                out.append(word[pos : m.start()])
            run = m.group()
            out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            pos = m.end()
        if pos < len(word):
            out.append(word[pos:])
    return out


def fake_embedding(text: str, dim: int = 64, concepts: dict[str, str] | None = None) -> list[float]:
    """A unit vector from the text's tokens, feature-hashed with a sign
    (sha256, so it is the same in every process); no tokens: a fixed vector."""
    vec = [0.0] * dim
    for token in embedding_tokens(text):
        token = (concepts or {}).get(token, token)
        h = hashlib.sha256(token.encode("utf-8")).digest()
        vec[int.from_bytes(h[:4], "little") % dim] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        return [1.0 / math.sqrt(dim)] * dim
    return [x / norm for x in vec]


_TIME = re.compile(r"^<time>\d\d:\d\d</time>\n")
_QUOTED = re.compile(r"^<quoted from=\"[^\"]*\">\n.*?\n</quoted>\n\(Above: [^\n]*\)\n\n", re.S)
# A file the user sent (gateway/prompt.py ``file_block``): its block and the
# note after it, left out of what the user said.
_FILE = re.compile(r'<file name="[^"\n]*"(?: pages="\d+")?>\n.*?\n</file>\n\(Above: the [^\n]*\)\n\n', re.DOTALL)


_SAID = re.compile(r'<said by="[^"\n]*">\n(.*)\n</said>', re.DOTALL)


def split_user_content(content: str) -> tuple[str, str]:
    """The gateway's latest user message (gateway/prompt.py ``user_content``)
    as (its <memories> block or "", the user's own words); the time put
    first, a quoted message and the files sent are left out, and in a group
    the ``<said by="...">`` mark around the words."""
    content = _TIME.sub("", content, count=1)
    block = ""
    if content.startswith("<memories>\n") and "</memories>\n\n" in content:
        block, content = content.split("</memories>\n\n", 1)
    words = _FILE.sub("", _QUOTED.sub("", content, count=1))
    said_by = _SAID.fullmatch(words)  # a group member's words, marked with who said them
    return block, said_by.group(1) if said_by else words


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


def said(body: dict[str, Any]) -> str:
    """What the user said in a chat request's latest message, as a model
    would answer it: without the time and recalled memories before it."""
    return split_user_content(text_of(body["messages"][-1].get("content")))[1]


# A user's line in an extraction request: memory/llm.py numbers the lines
# memory/extraction.py writes ("[10:02] user: words").
_USER_LINE = re.compile(r"^L(\d+) \[[^\]]*\] user: (.*)$", re.M)


def extraction_lines(body: dict[str, Any]) -> list[tuple[int, str]]:
    """The user's lines a memory-model request numbers, as (number,
    words): what a scripted extraction answers facts from, citing them.
    None in a chat request (no ``response_format``), nor in a merge's or
    profile refresh's (their facts are not user lines)."""
    if not body.get("response_format"):
        return []
    return [(int(n), words) for n, words in _USER_LINE.findall(text_of(body["messages"][-1].get("content")))]


# The memory model's calls by the opening of their system prompt
# (memory/llm.py EXTRACT_SYSTEM, MERGE_SYSTEM, PROFILE_SYSTEM), each sent in
# JSON mode (``complete_json``); the gateway's chat requests never set
# ``response_format``. tests/fakes/test_openai_server.py sends each kind
# with the product's own clients, so a prompt reworded fails there first.
MEMORY_KINDS = {
    "extract": "You are a memory extraction engine.",
    "merge": "You consolidate a user's stored memories",
    "profile": "You maintain a user's core profile",
}
RequestKind = Literal["chat", "extract", "merge", "profile", "json"]


def request_kind(body: dict[str, Any]) -> RequestKind:
    """What a chat-completions request is: ``"chat"`` (a turn's or a cron
    job's model call, the agent's: no ``response_format``), a memory model
    call by its system prompt (``"extract"``: a day's or a window's batch,
    a group's notes, compression's events; ``"merge"``: the weekly
    consolidation; ``"profile"``: the Core Memory refresh), or ``"json"``
    (another JSON-mode call)."""
    if not body.get("response_format"):
        return "chat"
    messages = body.get("messages") or [{}]
    system = text_of(messages[0].get("content")) if messages[0].get("role") == "system" else ""
    for kind, opening in MEMORY_KINDS.items():
        if system.startswith(opening):
            return kind  # type: ignore[return-value]
    return "json"


_DATA_URL = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.*)$", re.DOTALL)


def _image_kind(data: bytes) -> str | None:
    # The fake's own reading of the signatures, not channels.media's: a
    # fake that shares the product's check would agree with its bugs.
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Every inline picture of a chat request, in order: (type, bytes)."""
    out: list[tuple[str, bytes]] = []
    for m in body.get("messages", []):
        content = m.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "image_url":
                found = _DATA_URL.match(str(part["image_url"]["url"]))
                if found:
                    out.append((found.group(1), base64.b64decode(found.group(2))))
    return out


def content_error(messages: list[Any]) -> tuple[str, str | None, str | None] | None:
    """What the real API says of messages whose content it refuses:
    (message, param, code); None when all are well formed."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"Invalid type for 'messages[{i}]': expected an object.", f"messages[{i}]", "invalid_type"
        content = m.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return (f"Invalid type for 'messages[{i}].content': expected one of a string or array of objects.",
                    f"messages[{i}].content", "invalid_type")
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind != "image_url":
                return f"Invalid value: '{kind}'. Supported values are: 'text' and 'image_url'.", f"{where}.type", "invalid_value"
            if m.get("role") != "user":
                return (f"Image URLs are only allowed for messages with role 'user', but this message with role "
                        f"'{m.get('role')}' contains an image URL.", f"messages[{i}].content[{j}].type", "invalid_value")
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str) or image.get("detail", "auto") not in ("auto", "low", "high"):
                return f"Invalid '{where}.image_url'.", f"{where}.image_url", "invalid_value"
            if url.startswith(("http://", "https://")):
                continue
            found = _DATA_URL.match(url)
            try:
                data = base64.b64decode(found.group(2), validate=True) if found else b""
            except ValueError:
                data = b""
            if not found or not data:
                return (f"Invalid '{where}.image_url.url'. Expected a base64-encoded data URL with an image MIME type "
                        "(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value with an invalid format.",
                        f"{where}.image_url.url", "invalid_value")
            if _image_kind(data) is None:
                return "You uploaded an unsupported image. Please make sure your image is valid.", None, "invalid_image_format"
    return None


def _tokens(text: str) -> int:
    # The fake's own estimate (not memory/tokens.py's): Han one each, the rest four a token.
    han = sum(1 for c in text if "\u4e00" <= c <= "\u9fff")
    return han + (len(text) - han) // 4


# How servers refuse pictures for a model without vision (HTTP 400 each).
BLIND_WORDINGS = {
    "openai": "Invalid content type. image_url is only supported by certain models.",
    "vllm": "{model} is not a multimodal model None",
    "ollama": "this model is missing data required for image input",
}


@dataclass
class Reply:
    content: str | None = "ok"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name":..., "arguments": {...}}]
    status: int = 200  # != 200: an error response with this status
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    error_body: str = ""
    finish_reason: str | None = None
    # An error's "type" and "code" as OpenAI sends them (e.g. "invalid_request_error",
    # "context_length_exceeded"), and response headers (e.g. Retry-After on a 429).
    error_type: str = "server_error"
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # A streamed request (``"stream": true``) gets the reply as server-sent
    # events: ``pieces`` (None: the content cut into words, a Han character
    # pair each), ``piece_delay`` seconds apart; ``cut_after`` N pieces the
    # connection closes without [DONE] (a stream broken off); ``stream_error``
    # after the pieces an error object instead of the end, as servers report
    # a failure mid-answer; ``whole``: answered as one JSON body anyway, as
    # a server that does not stream.
    pieces: list[str] | None = None
    piece_delay: float = 0.0
    cut_after: int | None = None
    stream_error: str = ""
    whole: bool = False
    # Set: the answer waits until this is set (a model call under way when
    # the gateway stops); the fake sets every hold when it stops. With
    # ``hold_after`` N, a streamed answer sends its first N pieces before it
    # waits (a reply shown half written while the model is still at it).
    hold: asyncio.Event | None = None
    hold_after: int | None = None
    # Set: the answer is this text as it is, with ``status`` and
    # ``content_type``, whatever was asked (a proxy's HTML error page, a
    # 200 whose JSON is no completion, ...).
    raw: str | None = None
    content_type: str = "application/json"
    # A streamed reply as some providers and proxies send it: a
    # ``: keep-alive`` comment before each event, and each event written
    # in two sends cut inside its ``data:`` line.
    ragged: bool = False
    # Set: a scripted reply that answers only a request of this kind
    # (:func:`request_kind`); requests of other kinds pass it by. A turn's
    # scripted answer is then not taken by an extraction a clock step set
    # off in the background.
    for_kind: RequestKind | None = None


Responder = Callable[[dict[str, Any]], "Reply | Awaitable[Reply]"]


class FakeOpenAI:
    def __init__(
        self,
        *,
        api_key: str | None = None,
        responder: Responder | None = None,
        embedding_dim: int = 64,
        embedding_concepts: dict[str, str] | None = None,
    ) -> None:
        self.api_key = api_key
        self.embedding_dim = embedding_dim
        self.embedding_concepts = dict(embedding_concepts or {})
        self.embedding_requests: list[list[str]] = []
        self.embedding_delay = 0.0  # seconds before each embeddings answer (timeouts)
        self.embedding_formats: list[str] = []  # the encoding_format of each request
        self.embedding_base64: Literal["answer", "refuse", "ignore"] = "answer"
        self.embedding_serial = False  # one worker: requests answered one at a time, in order
        self.embedding_per_text = 0.0  # seconds of "model time" per input (with embedding_serial)
        self.embedding_waited: list[int] = []  # per request: inputs of others answered while it waited
        self._worker = asyncio.Lock()
        self._answered = 0  # inputs answered so far (embedding_serial)
        # What ``GET /v1/models`` lists; None: no such route (404), as on
        # some OpenAI-compatible servers.
        self.models: list[str] | None = ["fake-model"]
        self._embedding_errors: list[int] = []
        self.transcriptions: list[dict[str, Any]] = []  # {"model", "filename", "content_type", "data"}
        self._transcription_errors: list[tuple[int, str]] = []
        self._transcription_holds: list[asyncio.Event] = []
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []  # chat requests answered 400 for their content
        self.headers: list[dict[str, str]] = []
        self._script: list[Reply] = []
        self._holds: list[asyncio.Event] = []
        self._stopping = asyncio.Event()  # set by stop(): a delayed reply waits no longer
        # Set: every chat request is answered with this (an outage, until
        # set back to None); scripted replies wait behind it.
        self.down: Reply | None = None
        # Set: a chat request for another model is refused with 404
        # model_not_found, as OpenAI refuses a model it does not serve.
        self.served_models: set[str] | None = None
        # model -> a key of BLIND_WORDINGS: that model refuses pictures.
        self.blind_models: dict[str, str] = {}
        # model -> its context window in estimated tokens (a character in
        # four, a Han character one): a longer request is refused with
        # OpenAI's context_length_exceeded, as a small local model refuses it.
        self.context_windows: dict[str, int] = {}
        # True: a streamed request is refused with a 400, as by a proxy
        # that does not stream (recorded in ``refused``).
        self.refuse_stream = False
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- scripting ------------------------------------------------------------
    def queue(self, reply: Reply) -> None:
        """The next chat request is answered with ``reply``, as scripted."""
        self._script.append(reply)

    def queue_reply(self, content: str | None = "ok", tool_calls: list[dict[str, Any]] | None = None, *,
                    kind: RequestKind | None = None) -> None:
        """``kind``: only a request of that kind takes it (``"chat"``: a
        turn's, whatever memory model call comes first)."""
        self._script.append(Reply(content=content, tool_calls=tool_calls or [], for_kind=kind))

    def _scripted(self, body: dict[str, Any]) -> Reply | None:
        kind = request_kind(body)
        for i, reply in enumerate(self._script):
            if reply.for_kind in (None, kind):
                return self._script.pop(i)
        return None

    def queue_error(
        self,
        status: int = 500,
        *,
        times: int = 1,
        body: str = "",
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        kind = "invalid_request_error" if 400 <= status < 500 and status != 429 else "server_error"
        for _ in range(times):
            self._script.append(
                Reply(content=None, status=status, error_body=body, error_type=kind, error_code=code, headers=headers)
            )

    def queue_embedding_error(self, status: int = 500, *, times: int = 1) -> None:
        self._embedding_errors.extend([status] * times)

    def queue_transcription_error(self, status: int = 500, *, times: int = 1, body: str = "") -> None:
        """``body``: the error's message (a provider echoing what it was sent)."""
        self._transcription_errors.extend([(status, body)] * times)

    def queue_transcription_hold(self) -> asyncio.Event:
        """The next transcription waits until the returned event is set (or the fake stops)."""
        hold = asyncio.Event()
        self._holds.append(hold)
        self._transcription_holds.append(hold)
        return hold

    def queue_stream(
        self,
        pieces: list[str],
        *,
        delay: float = 0.0,
        cut_after: int | None = None,
        error: str = "",
        tool_calls: list[dict[str, Any]] | None = None,
        hold_after: int | None = None,
    ) -> asyncio.Event | None:
        """A reply whose text comes in ``pieces``, ``delay`` seconds apart,
        when the request streams (whole otherwise). ``hold_after`` N: the
        rest waits after N pieces until the returned event is set (or the
        fake stops)."""
        hold = None
        if hold_after is not None:
            hold = asyncio.Event()
            self._holds.append(hold)
        self._script.append(Reply(content="".join(pieces), pieces=list(pieces), piece_delay=delay, cut_after=cut_after,
                                  stream_error=error, tool_calls=tool_calls or [], hold=hold, hold_after=hold_after))
        return hold

    def queue_hold(self, content: str = "held") -> asyncio.Event:
        """The next chat request is answered only once the returned event
        is set (or the fake stops)."""
        hold = asyncio.Event()
        self._holds.append(hold)
        self._script.append(Reply(content=content, hold=hold))
        return hold

    def queue_delay(self, seconds: float, content: str = "late") -> None:
        self._script.append(Reply(content=content, delay=seconds))

    @property
    def url(self) -> str:
        """Base URL to put in ``provider.baseUrl``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat requests (:func:`request_kind` ``"chat"``), in arrival
        order: what a turn's assertions read. ``requests[-1]`` is whatever
        came last, and an extraction, merge or profile refresh the turn (or
        a clock step) set off can land after the reply's request."""
        return [r for r in self.requests if request_kind(r) == "chat"]

    def last_chat(self) -> dict[str, Any]:
        """The latest chat request; none yet is a failed assertion naming
        what did come."""
        chats = self.chat_requests()
        assert chats, f"no chat request yet (requests: {[request_kind(r) for r in self.requests]})"
        return chats[-1]

    def memory_requests(self, kind: RequestKind | None = None) -> list[dict[str, Any]]:
        """The memory model's requests (every one that is not a chat
        request), or those of one ``kind``, in arrival order."""
        return [r for r in self.requests if (k := request_kind(r)) != "chat" and kind in (None, k)]

    def last_messages(self) -> list[dict[str, Any]]:
        """The latest chat request's messages ([] before any)."""
        chats = self.chat_requests()
        return chats[-1]["messages"] if chats else []

    def prompts_text(self) -> str:
        """Every message of every request, joined: for "never contains" checks."""
        return "\n".join(
            json.dumps(m.get("content"), ensure_ascii=False) for r in self.requests for m in r.get("messages", [])
        )

    # -- server -----------------------------------------------------------------
    async def start(self, port: int = 0) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._stopping.clear()
        return self

    async def _pause(self, seconds: float) -> None:
        """A reply's delay, over at once when the fake stops: the runner's
        cleanup waits for every request in flight, and a test that gave
        up on a late reply waited the delay out in its teardown."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def stop(self) -> None:
        for hold in self._holds:  # a held request ends, whoever still waits for it
            hold.set()
        self._stopping.set()  # and a delayed one (_pause)
        if self._runner is not None:
            await stop_listening(self._runner)
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _auth_ok(self, request: web.Request) -> bool:
        if not self.api_key:
            return True
        return request.headers.get("Authorization") == f"Bearer {self.api_key}"

    async def _models(self, request: web.Request) -> web.Response:
        if self.models is None:
            return web.json_response({"error": {"message": "Not found", "type": "invalid_request_error"}}, status=404)
        if not self._auth_ok(request):  # as OpenAI's: a wrong key is refused here too
            return self._unauthorized()
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

    @staticmethod
    def _unauthorized() -> web.Response:
        return web.json_response(
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}},
            status=401,
        )

    @staticmethod
    def _bad_request(message: str, param: str | None = None) -> web.Response:
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}, status=400
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        if not self._auth_ok(request):
            return self._unauthorized()
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return self._bad_request("invalid JSON body")
        if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
            return self._bad_request("'model' is required", "model")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._bad_request("'input' must be a string or a non-empty array of strings", "input")
        dim = body.get("dimensions", self.embedding_dim)
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            return self._bad_request("'dimensions' must be a positive integer", "dimensions")
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            return self._bad_request("'encoding_format' must be 'float' or 'base64'", "encoding_format")
        self.embedding_requests.append(list(texts))
        self.embedding_formats.append(fmt)
        if fmt == "base64" and self.embedding_base64 == "refuse":
            return self._bad_request("only encoding_format 'float' is supported", "encoding_format")
        if fmt == "base64" and self.embedding_base64 == "ignore":
            fmt = "float"
        if self.embedding_serial:
            arrived = self._answered
            async with self._worker:  # asyncio.Lock wakes its waiters first come, first served
                self.embedding_waited.append(self._answered - arrived)
                await asyncio.sleep(self.embedding_per_text * len(texts))
                self._answered += len(texts)
        if self.embedding_delay:
            await self._pause(self.embedding_delay)
        if self._embedding_errors:
            status = self._embedding_errors.pop(0)
            msg = {429: "Rate limit reached", 500: "The server had an error"}.get(status, "error")
            return web.json_response({"error": {"message": msg, "type": "server_error"}}, status=status)
        data: list[dict[str, Any]] = []
        for i, text in enumerate(texts):
            vec = fake_embedding(text, dim, self.embedding_concepts)
            emb: Any = vec if fmt == "float" else base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(max(1, len(embedding_tokens(t))) for t in texts)
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        )

    async def _transcribe(self, request: web.Request) -> web.Response:
        if not self._auth_ok(request):
            return self._unauthorized()
        if request.content_type != "multipart/form-data":
            return self._bad_request("Invalid Content-Type header; expected multipart/form-data.")
        form = await request.post()
        file, model = form.get("file"), form.get("model")
        if not isinstance(file, web.FileField):
            return self._bad_request("Missing required parameter: 'file'.", "file")
        if not isinstance(model, str) or not model:
            return self._bad_request("Missing required parameter: 'model'.", "model")
        fmt = str(form.get("response_format", "json"))
        if fmt not in ("json", "text"):
            return self._bad_request(f"Invalid value: '{fmt}'. Supported values are: 'json' and 'text'.", "response_format")
        data = file.file.read()
        self.transcriptions.append(
            {"model": model, "filename": file.filename, "content_type": file.content_type, "data": data}
        )
        if self._transcription_holds:
            await self._transcription_holds.pop(0).wait()
        if self._transcription_errors:
            status, said = self._transcription_errors.pop(0)
            return web.json_response({"error": {"message": said or "The server had an error", "type": "server_error"}},
                                     status=status)
        marker = data.find(b"SAY:")
        text = data[marker + 4 :].decode("utf-8", "replace") if marker >= 0 else f"({len(data)} bytes of audio)"
        return web.Response(text=text) if fmt == "text" else web.json_response({"text": text})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._auth_ok(request):
            return self._unauthorized()
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "invalid JSON body", "type": "invalid_request_error"}}, status=400)
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            return web.json_response(
                {"error": {"message": "'model' and 'messages' are required", "type": "invalid_request_error"}}, status=400
            )
        refused = content_error(body["messages"])
        wording = self.blind_models.get(body["model"])
        pictures = any(isinstance(m.get("content"), list) and any(p.get("type") == "image_url" for p in m["content"])
                       for m in body["messages"])
        if refused is None and wording is not None and pictures:
            refused = (BLIND_WORDINGS[wording].format(model=body["model"]), None, None)
        window = self.context_windows.get(body["model"])
        if refused is None and self.refuse_stream and body.get("stream"):
            refused = ("stream is not supported by this endpoint", "stream", "unsupported_parameter")
        if refused is None and window is not None:
            used = sum(_tokens(text_of(m.get("content"))) for m in body["messages"]) + int(body.get("max_tokens") or 0)
            if used > window:
                refused = (f"This model's maximum context length is {window} tokens. However, you requested {used} "
                           "tokens. Please reduce the length of the messages or completion.", "messages",
                           "context_length_exceeded")
        if refused is not None:
            self.refused.append(body)
            message, param, code = refused
            return web.json_response(
                {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, status=400
            )
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.served_models is not None and body["model"] not in self.served_models:
            return web.json_response(
                {"error": {"message": f"The model `{body['model']}` does not exist or you do not have access to it.",
                           "type": "invalid_request_error", "param": None, "code": "model_not_found"}},
                status=404,
            )
        if self.down is not None:
            reply = self.down
        elif (scripted := self._scripted(body)) is not None:
            reply = scripted
        elif self.responder is not None:
            r = self.responder(body)
            reply = await r if asyncio.iscoroutine(r) else r  # type: ignore[assignment]
        else:
            reply = Reply()
        if reply.delay:
            await self._pause(reply.delay)
        if reply.hold is not None and reply.hold_after is None:
            await reply.hold.wait()
        if reply.raw is not None:
            return web.Response(text=reply.raw, status=reply.status, content_type=reply.content_type,
                                headers=reply.headers)
        if reply.status == 401:
            return self._unauthorized()
        if reply.status != 200:
            msg = reply.error_body or {429: "Rate limit reached", 500: "The server had an error"}.get(reply.status, "error")
            error = {"message": msg, "type": reply.error_type, "param": None, "code": reply.error_code}
            return web.json_response({"error": error}, status=reply.status, headers=reply.headers)
        if body.get("stream") is True and not reply.whole:
            return await self._stream(request, body, reply)
        return web.json_response(self._completion(body, reply))

    async def _stream(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        """The reply as OpenAI streams it: ``chat.completion.chunk`` events,
        the role first, then the text's pieces, then each tool call (its id
        and name, then its arguments in two halves), then the finish reason
        and ``data: [DONE]``; usage in a last chunk when
        ``stream_options.include_usage`` asks for it."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        ident, created = f"chatcmpl-{next(self._ids)}", int(time.time())

        async def event(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
            chunk: dict[str, Any] = {"id": ident, "object": "chat.completion.chunk", "created": created,
                                     "model": body["model"], **extra}
            if delta is not None:
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            data = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
            if reply.ragged:
                await resp.write(b": keep-alive\n\n")
                await resp.write(data[:9])  # "data: {\"i": the event goes on in the next send
                await asyncio.sleep(0)
                data = data[9:]
            await resp.write(data)

        await event({"role": "assistant", "content": ""})
        content = reply.content or ""
        pieces = reply.pieces if reply.pieces is not None else re.findall(
            r"[\u4e00-\u9fff]{1,2}|[^\s\u4e00-\u9fff]+\s*|\s+", content)
        for n, piece in enumerate(pieces):
            if reply.cut_after is not None and n >= reply.cut_after:
                await resp.write_eof()  # no [DONE]: the answer broke off
                return resp
            if reply.piece_delay and n:
                await self._pause(reply.piece_delay)
            if reply.hold is not None and n == reply.hold_after:
                await reply.hold.wait()
            await event({"content": piece})
        if reply.stream_error:
            error = {"message": reply.stream_error, "type": "server_error", "code": None}
            await resp.write(f"data: {json.dumps({'error': error})}\n\n".encode())
            await resp.write_eof()
            return resp
        for i, tc in enumerate(reply.tool_calls):
            args = tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"], ensure_ascii=False)
            half = len(args) // 2
            await event({"tool_calls": [{"index": i, "id": f"call_{next(self._ids)}", "type": "function",
                                         "function": {"name": tc["name"], "arguments": ""}}]})
            for part in (args[:half], args[half:]):
                await event({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        await event({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = self._completion(body, reply)["usage"]
            await event(None, choices=[], usage=usage)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish = reply.finish_reason or "stop"
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": tc["name"],
                        "arguments": tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"], ensure_ascii=False),
                    },
                }
                for tc in reply.tool_calls
            ]
            finish = reply.finish_reason or "tool_calls"
        prompt_chars = sum(len(json.dumps(m.get("content"), ensure_ascii=False)) for m in body["messages"])
        completion_chars = len(reply.content or "")
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": completion_chars // 4,
                "total_tokens": (prompt_chars + completion_chars) // 4,
            },
        }
