"""Sending to Feishu: the Open API over httpx, with our own tenant token cache.

Why not lark-oapi's ``Client`` here: its calls (async ones included) fetch
the tenant token with blocking ``requests``, without our timeouts, and it
does not retry on rate limits. Running each call in a thread would work but
costs a thread per in-flight send; six endpoints (token, send, reply,
edit, delete, file upload), a bot-info lookup and two reads (a message by id, a
user's name) are simple enough to call directly, fully async, with the
retry rules we need (a picture a user sent is downloaded the same way,
streamed, and cut off past the caller's limit):

* token-invalid codes (99991663, 99991668, 99991661): drop the cached token,
  fetch a new one and retry once;
* rate limit (code 99991400 or HTTP 429, the platform's; 230020, the
  message API's own "This operation triggers the frequency limit.", which
  Feishu answers with HTTP 400 when one chat or message is sent to or
  edited too often) and 5xx / transport errors: back off and retry, a bounded number of times. Each message carries a ``uuid``
  so Feishu drops a retried send that had in fact gone through (it keeps
  one message per uuid for an hour and answers a repeat with it). With a
  ``key`` (the reply's ``send_key``, kept in the outbox) the uuid is the
  same on every later attempt too, after a restart included (see
  :func:`part_uuids`);
* anything else: ``FeishuApiError`` with the code, for the caller to log.

The tenant token and app secret are never logged.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

import httpx
import structlog

from channels.base import DeliveryError, NotPermitted, rest_of
from channels.markdown import feishu_md, part_openers

__all__ = [
    "CHAT_SCOPE", "EDIT_LIMIT", "LOGIN_HINT", "LOGIN_HINTS", "MESSAGE_RATE_LIMIT_CODE", "SCOPE_DENIED_CODES", "FeishuApiError", "FeishuClient", "Resource", "ResourceTooLarge",
    "Withdrawal", "draft_uuid", "is_retryable", "part_uuids", "render", "split_text",
]

_T = TypeVar("_T")

TOKEN_INVALID_CODES = frozenset({99991661, 99991663, 99991668})
RATE_LIMIT_CODE = 99991400
# The message API's own limit (HTTP 400): too many sends to, or edits of,
# one chat or message. Transient like the platform's.
MESSAGE_RATE_LIMIT_CODE = 230020
# DELETE refusals that only say the message cannot be withdrawn (any more):
# past the tenant's recall window (24 h by default), already withdrawn, not
# the bot's to recall, invisible to it, of a type that cannot be recalled.
# Nothing to retry, nothing wrong with the setup.
RECALL_REFUSED_CODES = frozenset({230009, 230011, 230026, 230050, 230054})
RECALL_TOO_LATE_CODE = 230009  # of those: past the recall window, which a tenant's admin may set to minutes
# The app lacks a scope the call needs ("Access denied. One of the following
# scopes is required: [...]"; 99991679 for a user token's): the app's,
# not one chat's or user's, and the same answer until an admin grants it.
SCOPE_DENIED_CODES = frozenset({99991672, 99991679})
# The tenant token refused (tenant_access_token/internal): what the operator
# is told to check, by code, in our words (Feishu's ``msg`` may echo input).
LOGIN_HINTS = {10003: "check appId (Feishu knows no app by it)", 10014: "check appSecret"}
LOGIN_HINT = "check appId / appSecret, and that the app is enabled"
CHAT_SCOPE = "im:chat:readonly"  # what a group's information needs (im:chat or im:chat:read do too)
TEXT_CHUNK = 4000  # Feishu accepts ~150 KB, but long walls of text read badly in a chat
# Feishu's edit (PUT .../messages/:id): text and post messages only, at most
# 20 edits each; the 21st is refused with 230072.
EDIT_LIMIT = 20


class FeishuApiError(DeliveryError):
    """Feishu refused or did not answer. ``retryable`` (see
    :func:`is_retryable`) tells the gateway whether a reply is worth
    sending again later; from :meth:`FeishuClient.send_text`,
    ``remaining`` is the text not yet sent (its ``on_sent`` has heard of
    the chunks that went out).

    Its text, which logs and the outbox keep, says ``msg`` only when
    ``own`` (our words: "transport error: ConnectError"): Feishu's own
    ``msg`` may echo what was sent, so only its code and status are said."""

    def __init__(self, code: int, msg: str, *, status: int = 200, endpoint: str = "", own: bool = False) -> None:
        super().__init__(
            f"Feishu API error {code} on {endpoint or '?'} (HTTP {status})" + (f": {msg}" if own else ""),
            retryable=code in (RATE_LIMIT_CODE, MESSAGE_RATE_LIMIT_CODE) or status == 429 or status >= 500
            or code == -2,
        )
        self.code = code
        self.msg = msg
        self.status = status
        self.endpoint = endpoint

    @property
    def rate_limited(self) -> bool:
        """Feishu asked us to slow down (not down, not refusing)."""
        return self.code in (RATE_LIMIT_CODE, MESSAGE_RATE_LIMIT_CODE) or self.status == 429


class ResourceTooLarge(Exception):
    """A message's file is over the size the caller takes; not downloaded
    (or cut off as soon as it was)."""


@dataclass(frozen=True)
class Resource:
    """A file from a user's message: its bytes and the type Feishu gave."""

    data: bytes = field(repr=False)
    content_type: str


@dataclass(frozen=True)
class Withdrawal:
    """What became of one ``delete_message``: done, or why not."""

    message_id: str
    deleted: bool
    code: int = 0  # Feishu's code when refused
    reason: str = ""


class FeishuClient:
    def __init__(
        self,
        app_id: str,
        app_secret: str,
        domain: str = "https://open.feishu.cn",
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 15.0,
        max_attempts: int = 4,
        backoff: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        refresh_margin: float = 300.0,
    ) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._base = domain.rstrip("/")
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._max_attempts = max(1, max_attempts)
        self._backoff = backoff
        self._clock = clock
        # Feishu hands out a new token only when the old one has < 30 min
        # left, so the margin must stay below that or we would refetch the
        # same token on every call.
        self._refresh_margin = min(refresh_margin, 1500.0)
        self._token: str | None = None
        self._token_expires_at = 0.0
        self._token_lock = asyncio.Lock()
        self._log = structlog.get_logger(channel="feishu")
        self.token_fetches = 0  # observable in tests and debug output

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    # -- tenant token ------------------------------------------------------------
    async def tenant_token(self) -> str:
        async with self._token_lock:
            # Another task may have refreshed while we waited for the lock.
            if self._token and self._clock() < self._token_expires_at:
                return self._token
            data = await self._post_json(
                "/open-apis/auth/v3/tenant_access_token/internal",
                {"app_id": self._app_id, "app_secret": self._app_secret},
                token=None,
            )
            token, expire = data.get("tenant_access_token"), data.get("expire")
            if not isinstance(token, str) or not token or not isinstance(expire, int | float):
                raise FeishuApiError(-1, "token response without tenant_access_token/expire", endpoint="tenant_access_token",
                                     own=True)
            self.token_fetches += 1
            self._token = token
            # Never cache for less than half its life, however small `expire` is.
            self._token_expires_at = self._clock() + max(expire - self._refresh_margin, expire / 2)
            return token

    def invalidate_token(self) -> None:
        self._token = None
        self._token_expires_at = 0.0

    # -- API calls -----------------------------------------------------------------
    async def bot_info(self) -> dict[str, Any]:
        """``{"open_id": ..., "app_name": ...}`` of this app's bot."""
        data = await self._call("GET", "/open-apis/bot/v3/info")
        bot = data.get("bot")
        return dict(bot) if isinstance(bot, dict) else {}

    async def send_text(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str = "",
        on_sent: Callable[[str], None] | None = None,
        key: str = "",
        first: Callable[[str, str], Awaitable[str]] | None = None,
    ) -> list[str]:
        """Send ``text`` (split into readable chunks) and return the new
        message ids. With ``reply_to`` every chunk replies to that message,
        so the answer stays attached to the question (and its thread).
        ``on_sent`` hears of each id as soon as its chunk is out, so a caller
        knows the parts that went out even when a later one fails. A failing
        chunk raises :class:`FeishuApiError` with ``remaining`` set when
        chunks before it went out. ``key``: the reply's idempotency key
        (:func:`part_uuids`); "" sends each chunk under a fresh uuid.
        ``first(content, msg_type)``, when given, delivers the first chunk
        instead (a draft message edited into it) and returns its message id."""
        ids: list[str] = []
        chunks = split_text(text)
        uuids = part_uuids(key, chunks) if key else [str(uuid.uuid4()) for _ in chunks]
        for i, (chunk, opener) in enumerate(zip(chunks, part_openers(chunks))):
            content, msg_type = render(chunk, opener=opener)
            try:
                if i == 0 and first is not None:
                    got = [await first(content, msg_type)]
                else:
                    got = await self._send_chunk(chat_id, content, reply_to, uuids[i], msg_type=msg_type)
            except FeishuApiError as exc:
                if i:  # never send a chunk twice: only the rest is left
                    exc.remaining = rest_of(text, chunks, i)
                raise
            ids.extend(got)
            if on_sent is not None:
                for message_id in got:
                    on_sent(message_id)
        return ids

    async def send_one(
        self, chat_id: str, content: str, *, msg_type: str, reply_to: str = "", part_uuid: str, attempts: int = 0
    ) -> str:
        """Send one message of ready ``content`` (as :func:`render` gives it)
        and return its id. ``attempts``: at most this many tries (0: the
        client's own number), for a message not worth waiting on (a draft)."""
        got = await self._send_chunk(chat_id, content, reply_to, part_uuid, msg_type=msg_type, attempts=attempts)
        if not got:
            raise FeishuApiError(-1, "send answer without data.message_id", endpoint="/open-apis/im/v1/messages", own=True)
        return got[0]

    async def edit_message(self, message_id: str, content: str, *, msg_type: str, attempts: int = 0) -> None:
        """Replace the content of a text or post message the bot sent:
        ``PUT /open-apis/im/v1/messages/:message_id`` with ``msg_type``
        (text or post) and ``content`` (as :func:`render` gives it). Feishu
        allows :data:`EDIT_LIMIT` edits per message and none of a message
        withdrawn or past the tenant's edit window; a refusal raises
        :class:`FeishuApiError` with its code. ``attempts`` as for :meth:`send_one`."""
        await self._call(
            "PUT", f"/open-apis/im/v1/messages/{urllib.parse.quote(message_id, safe='')}",
            json_body={"msg_type": msg_type, "content": _wire(content, msg_type)}, attempts=attempts,
        )

    async def upload_file(self, file_name: str, data: bytes | Callable[[], BinaryIO]) -> str:
        """Upload a file for a file message: ``POST /open-apis/im/v1/files``
        (multipart, ``file_type=stream``: any file). Returns its ``file_key``.
        ``data``: the bytes, or what opens the file from its start (each try
        streams it again: a large export is not read into memory)."""
        path = "/open-apis/im/v1/files"
        form = {"file_type": "stream", "file_name": file_name}
        if isinstance(data, bytes):
            got = await self._call("POST", path, form=form, files={"file": (file_name, data, "application/octet-stream")})
        else:
            opener = data

            async def upload(token: str) -> dict[str, Any]:
                with opener() as content:
                    return await self._request("POST", path, form=form, token=token,
                                               files={"file": (file_name, content, "application/octet-stream")})

            got = await self._with_token(path, upload)
        inner = got.get("data")
        key = inner.get("file_key") if isinstance(inner, dict) else None
        if not isinstance(key, str) or not key:
            raise FeishuApiError(-1, "upload answer without data.file_key", endpoint="/open-apis/im/v1/files", own=True)
        return key

    async def send_file(self, chat_id: str, file_key: str, *, reply_to: str = "", key: str = "") -> list[str]:
        """Send an uploaded file (``msg_type=file``); returns the new message
        id. ``key``: the reply's idempotency key, as for :meth:`send_text`."""
        part_uuid = str(uuid.uuid5(_UUID_SPACE, f"{key}:file")) if key else str(uuid.uuid4())
        return await self._send_chunk(chat_id, json.dumps({"file_key": file_key}), reply_to, part_uuid, msg_type="file")

    async def _send_chunk(
        self, chat_id: str, chunk: str, reply_to: str, part_uuid: str, *, msg_type: str = "text", attempts: int = 0
    ) -> list[str]:
        body: dict[str, Any] = {"msg_type": msg_type, "content": _wire(chunk, msg_type), "uuid": part_uuid}
        if reply_to:
            data = await self._call("POST", f"/open-apis/im/v1/messages/{reply_to}/reply", json_body=body,
                                    attempts=attempts)
        else:
            body["receive_id"] = chat_id
            data = await self._call(
                "POST", "/open-apis/im/v1/messages", params={"receive_id_type": "chat_id"}, json_body=body,
                attempts=attempts,
            )
        inner = data.get("data")
        return [str(inner["message_id"])] if isinstance(inner, dict) and inner.get("message_id") else []

    async def get_message(self, message_id: str) -> dict[str, Any] | None:
        """One message of a chat the bot is in (``GET
        /open-apis/im/v1/messages/:message_id``): ``data.items[0]``, with
        ``msg_type``, ``body.content``, ``sender`` and ``mentions``; None
        when the answer holds none."""
        items = await self.get_message_items(message_id)
        return items[0] if items else None

    async def get_message_items(self, message_id: str) -> list[dict[str, Any]]:
        """Every item ``GET /open-apis/im/v1/messages/:message_id`` answers
        with: the message itself first, and for a chat record
        (``merge_forward``) each message in it after, naming its parent in
        ``upper_message_id`` (a record inside the record nests the same way)."""
        got = await self._call("GET", f"/open-apis/im/v1/messages/{urllib.parse.quote(message_id, safe='')}")
        inner = got.get("data")
        items = inner.get("items") if isinstance(inner, dict) else None
        return [dict(i) for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    async def user_name(self, user_id: str, id_type: str = "open_id") -> str:
        """A user's display name from the contact directory: ``GET
        /open-apis/contact/v3/users/:user_id?user_id_type=...`` (``open_id``,
        ``union_id`` or ``user_id``: events.contact_id), which needs a
        contact permission (``contact:user.base:readonly``) and the user
        within the app's contact range; "" when the answer has no name (a
        field the app may not read). Raises :class:`FeishuApiError`."""
        got = await self._call(
            "GET", f"/open-apis/contact/v3/users/{urllib.parse.quote(user_id, safe='')}",
            params={"user_id_type": id_type},
        )
        inner = got.get("data")
        user = inner.get("user") if isinstance(inner, dict) else None
        return str(user.get("name") or "").strip() if isinstance(user, dict) else ""

    async def chat_title(self, chat_id: str) -> str:
        """A group's name: ``GET /open-apis/im/v1/chats/:chat_id``
        (``data.name``; needs im:chat:readonly and the bot in the chat);
        "" when it has none. Raises :class:`NotPermitted` when the app
        lacks the scope, :class:`FeishuApiError` otherwise."""
        try:
            got = await self._call("GET", f"/open-apis/im/v1/chats/{urllib.parse.quote(chat_id, safe='')}")
        except FeishuApiError as exc:
            if exc.code in SCOPE_DENIED_CODES:
                raise NotPermitted(CHAT_SCOPE, str(exc)) from exc
            raise
        inner = got.get("data")
        return str(inner.get("name") or "").strip() if isinstance(inner, dict) else ""

    async def delete_message(self, message_id: str) -> Withdrawal:
        """Withdraw ("recall") a message the bot sent:
        ``DELETE /open-apis/im/v1/messages/:message_id``. A refusal that
        only says it cannot be withdrawn (too old, not the bot's: see
        ``RECALL_REFUSED_CODES``) comes back as ``deleted=False`` with the
        code; anything else (no permission, transport trouble after the
        retries) raises ``FeishuApiError`` like every call."""
        try:
            await self._call("DELETE", f"/open-apis/im/v1/messages/{urllib.parse.quote(message_id, safe='')}")
        except FeishuApiError as exc:
            if exc.code not in RECALL_REFUSED_CODES:
                raise
            return Withdrawal(message_id, False, exc.code, exc.msg)
        return Withdrawal(message_id, True)

    async def message_resource(self, message_id: str, file_key: str, *, kind: str, max_bytes: int) -> Resource:
        """A file of a user's message (an image's ``image_key``, a file's
        ``file_key``): ``GET /open-apis/im/v1/messages/:message_id/resources/:file_key?type=image|file``.
        The key must be one of that message's. Raises
        :class:`ResourceTooLarge` past ``max_bytes`` (read no further),
        :class:`FeishuApiError` as every call does."""
        path = (
            f"/open-apis/im/v1/messages/{urllib.parse.quote(message_id, safe='')}"
            f"/resources/{urllib.parse.quote(file_key, safe='')}"
        )
        return await self._with_token(path, lambda token: self._download(path, {"type": kind}, token, max_bytes))

    # -- plumbing ------------------------------------------------------------------
    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        form: dict[str, str] | None = None,
        files: dict[str, tuple[str, bytes | BinaryIO, str]] | None = None,
        attempts: int = 0,
    ) -> dict[str, Any]:
        return await self._with_token(
            path,
            lambda token: self._request(
                method, path, params=params, json_body=json_body, form=form, files=files, token=token
            ),
            attempts=attempts,
        )

    async def _with_token(self, path: str, request: Callable[[str], Awaitable[_T]], *, attempts: int = 0) -> _T:
        """``request(token)`` with the retry rules of the module docstring;
        ``attempts`` (> 0) bounds the tries below the client's own number."""
        max_attempts = min(attempts, self._max_attempts) if attempts > 0 else self._max_attempts
        retried_token = False
        attempt = 0
        while True:
            attempt += 1
            token = ""
            try:
                token = await self.tenant_token()
                return await request(token)
            except FeishuApiError as exc:
                if exc.code in TOKEN_INVALID_CODES and not retried_token:
                    self._log.info("tenant token rejected, refreshing", code=exc.code, endpoint=path)
                    retried_token = True
                    if token and self._token == token:  # not already replaced by another task
                        self.invalidate_token()
                    continue
                if not is_retryable(exc) or attempt >= max_attempts:
                    raise
                delay = self._backoff * 2 ** (attempt - 1)
                self._log.warning("feishu call retried", code=exc.code, status=exc.status, endpoint=path, delay=delay)
                await asyncio.sleep(delay)

    async def _download(self, path: str, params: dict[str, str], token: str, max_bytes: int) -> Resource:
        """A binary answer, streamed; a JSON one is Feishu's error."""
        try:
            async with self._http.stream(
                "GET", self._base + path, params=params, headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                content_type = resp.headers.get("content-type", "")
                if not resp.is_success or content_type.startswith("application/json"):
                    await resp.aread()
                    raise _api_error(resp, path)
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise ResourceTooLarge(f"{declared} bytes, over the {max_bytes} byte limit")
                buf = bytearray()
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    if len(buf) > max_bytes:
                        raise ResourceTooLarge(f"over the {max_bytes} byte limit")
                return Resource(bytes(buf), content_type)
        except httpx.TransportError as exc:
            raise FeishuApiError(-2, f"transport error: {type(exc).__name__}", status=0, endpoint=path,
                                  own=True) from exc

    async def _post_json(self, path: str, body: dict[str, Any], *, token: str | None) -> dict[str, Any]:
        return await self._request("POST", path, json_body=body, token=token)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        form: dict[str, str] | None = None,
        files: dict[str, tuple[str, bytes | BinaryIO, str]] | None = None,
        token: str | None,
    ) -> dict[str, Any]:
        # A multipart body (``files``) sets its own Content-Type, with the boundary.
        headers = {} if files else {"Content-Type": "application/json; charset=utf-8"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            resp = await self._http.request(
                method, self._base + path, params=params, json=json_body, data=form, files=files, headers=headers
            )
        except httpx.TransportError as exc:
            # -2: our code for "no answer"; retried like a 5xx.
            raise FeishuApiError(-2, f"transport error: {type(exc).__name__}", status=0, endpoint=path,
                                  own=True) from exc
        try:
            data = resp.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise FeishuApiError(-1, "non-JSON answer", status=resp.status_code, endpoint=path, own=True)
        code = data.get("code", 0 if resp.is_success else -1)
        if code != 0 or not resp.is_success:
            raise FeishuApiError(int(code or -1), str(data.get("msg") or ""), status=resp.status_code, endpoint=path)
        return data


def _api_error(resp: httpx.Response, path: str) -> FeishuApiError:
    """Feishu's JSON error (``{"code", "msg"}``) of a read response."""
    try:
        data = resp.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return FeishuApiError(-1, "non-JSON answer", status=resp.status_code, endpoint=path, own=True)
    return FeishuApiError(int(data.get("code") or -1), str(data.get("msg") or ""), status=resp.status_code, endpoint=path)


def is_retryable(exc: FeishuApiError) -> bool:
    """Rate limits, server errors and no answer at all: worth another try."""
    return exc.retryable


def part_uuids(key: str, chunks: list[str]) -> list[str]:
    """One ``uuid`` per chunk, the same whenever this reply is sent again:
    derived from ``key`` and the chunk's place counted from the end. A
    resend after a cut sends only the rest of the text
    (``DeliveryError.remaining``, which starts where a chunk started, so it
    splits into the same last chunks); counted from the start, every chunk
    would get a new name, counted from the end each keeps its own, and
    Feishu answers a repeat with the message it already has."""
    return [str(uuid.uuid5(_UUID_SPACE, f"{key}:{len(chunks) - i}")) for i in range(len(chunks))]


def draft_uuid(key: str) -> str:
    """The ``uuid`` of the message showing reply ``key``'s drafts: its own,
    never one of :func:`part_uuids` (Feishu would answer the reply's first
    part with the draft message), and the same on a retry of that send."""
    return str(uuid.uuid5(_UUID_SPACE, f"{key}:draft"))


# Any fixed namespace: names only need to differ per key and part.
_UUID_SPACE = uuid.UUID("6f3c1a52-0d7e-4c59-9a38-4b1f7f0e2d11")


def render(chunk: str, *, opener: str = "") -> tuple[str, str]:
    """One chunk of a reply as Feishu takes it: ``(content, msg_type)``.
    Markdown goes as a post's md element, which Feishu renders; plain words
    as a text message (``content`` is then the words, wrapped when sent)."""
    md = feishu_md(chunk, opener=opener)
    return (chunk, "text") if md is None else (_post(md), "post")


def _wire(content: str, msg_type: str) -> str:
    """A message body's ``content``: a text message's words wrapped as Feishu wants them."""
    return json.dumps({"text": content}, ensure_ascii=False) if msg_type == "text" else content


def _post(md: str) -> str:
    """A ``post`` message's content: one ``md`` element (it must stand alone in its paragraph)."""
    return json.dumps({"zh_cn": {"content": [[{"tag": "md", "text": md}]]}}, ensure_ascii=False)


def split_text(text: str, limit: int = TEXT_CHUNK) -> list[str]:
    """Split at paragraph, then line, then word boundaries; hard-cut only
    what has none (a URL or a CJK run longer than ``limit``)."""
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    while len(text) > limit:
        window = text[: limit + 1]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = window.rfind(sep)
            if cut > limit // 4:  # a cut near the start would leave a tiny chunk
                break
        else:
            cut = -1
        if cut <= 0:
            cut = limit
        chunks.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        chunks.append(text)
    return chunks
