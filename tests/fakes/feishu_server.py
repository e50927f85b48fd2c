"""A Feishu Open API fake on 127.0.0.1: what the Feishu channel talks to.

Serves, with the real paths and response shapes:

* ``POST /open-apis/auth/v3/tenant_access_token/internal`` (checks app id
  and secret; a wrong secret gets code 10014),
* ``GET /open-apis/bot/v3/info``,
* ``POST /open-apis/im/v1/messages?receive_id_type=chat_id`` and
  ``POST /open-apis/im/v1/messages/{message_id}/reply`` (Bearer tenant token
  checked: 99991661 missing, 99991663 invalid), recorded in ``sent``; a
  send whose ``uuid`` an accepted one had within the hour is answered with
  that message and sends nothing (Feishu: "requests with the same uuid
  send at most one message within 1 hour"),
* ``POST /open-apis/im/v1/files`` (multipart: ``file_type``, ``file_name``,
  ``file``; a ``file_type`` not in Feishu's list or no file: 234001, an
  empty file: 234010, one over ``max_upload_bytes``, 30 MB: 234006), kept in ``files`` by the ``file_key`` it answers;
  a ``msg_type=file`` message must name one (else 230001), and its record
  in ``sent`` carries the file's name and bytes; a ``post`` must be one
  locale's paragraphs of known elements, an ``md`` element alone in its
  paragraph (else 230001), and its record's ``text`` is its words,
* ``GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file``:
  the bytes of a picture a user's message carries (``add_image``, then an
  ``image`` message or a ``post`` with ``img`` elements naming its key),
  with its ``Content-Type``; a ``type`` other than image/file, or a key
  that is not that message's: 234001 "Invalid request param." (Feishu: the
  key and the message must match); counted in ``resource_downloads``
  once served (``resource_requests`` as asked for); ``hold_resource(key)``
  returns an ``asyncio.Event`` that key's downloads wait for (a slow
  download, released by the test),
* ``GET /open-apis/im/v1/messages/{message_id}``: the message as
  ``data.items[0]``; for a chat record (``chat_record_event``: a
  ``merge_forward`` whose content is the stand-in ``{"content": "Merged and
  Forwarded Message"}``) the record first, then every message in it, each
  naming its parent in ``upper_message_id`` (a record inside the record:
  its messages after it, naming it); ``fail_next(on="read")`` scripts a
  refusal; counted in ``message_reads``,
* ``GET /open-apis/contact/v3/users/{user_id}?user_id_type=...``: a
  user's ``name`` from ``contacts`` (by open_id), the id read as its
  ``user_id_type`` says: ``open_id`` (the default), ``union_id`` (``on_X``
  is the union_id of ``ou_X``) or ``user_id`` (``contact_user_ids``: the
  app's tenant's user_ids); another type is refused (99992402). With
  ``contact_permission`` off the app lacks the scope (99991672, as Feishu
  names a missing scope), and a user not found is out of its range (41050
  "no user authority error"); asked ids in ``contact_requests``, with
  their types in ``contact_lookups``,
* ``GET /open-apis/im/v1/chats/{chat_id}``: a group's information, its
  ``name`` from ``chats`` (and the other fields of the real answer's
  ``data``); a chat not in ``chats`` is one the bot is not in (232011
  "Operator can NOT be out of the chat."); with ``chat_permission`` off
  the app lacks im:chat:readonly (99991672); asked ids in
  ``chat_requests``; ``chat_gate`` holds answers (a slow lookup),
* ``GET /open-apis/im/v1/chats?page_size=N``: the groups the bot is in
  (``chats``, the first ``page_size``; no paging past them), refused alike
  without ``chat_permission``,
* ``DELETE /open-apis/im/v1/messages/{message_id}`` (withdraw: only a
  message the bot sent, else 230026; an unknown id 230001, one already
  withdrawn 230011), recorded in ``deleted``,
* ``PUT /open-apis/im/v1/messages/{message_id}`` (edit: ``msg_type`` text
  or post and a ``content`` valid for it, else 230001; an unknown id
  230001, one withdrawn 230011; at most 20 edits per message, the 21st
  refused with 230072 "The message has reached the number of times it can
  be edited."; a body over Feishu's size limits, 150 KB for text and 30 KB
  for a post, 230025): the message's record in ``sent`` takes the new
  ``msg_type`` and ``text`` (so ``texts()`` and ``visible()`` show the
  edited words) and each edit is appended to ``edits``. The docs name no
  rule against changing a text into a post or back, so the fake allows
  it. A message that is not the bot's (230071) or not a text or post
  (230054) is refused with codes assumed here, not documented ones,
* the long connection: ``POST /callback/ws/endpoint`` hands out a ws URL on
  this server, whose handler speaks lark-oapi's protobuf ``Frame`` protocol
  (ping -> pong with client config, event data frames, ACK frames back).
  The frame codec is written here from the .proto, independent of the SDK.

And it pushes events by webhook like Feishu does (``push_event``): schema
2.0 ``im.message.receive_v1`` (``message_event``) and
``im.message.recalled_v1`` (``recall_event``), optionally AES-encrypted and
signed; or over the long connection (``push_ws_event``).

Scripting: ``fail_next`` (e.g. rate limit 99991400; ``on="delete"`` for
withdrawals, e.g. 230009 "can only be recalled within one day";
``on="edit"`` for edits; ``fail_edits`` for edits only of given words,
by default Feishu's rate limit of the message API, HTTP 400 with code
230020 "This operation triggers the frequency limit.", which its error
code lists give for sends and edits coming too often to one chat);
``accepted=True``: the message is sent but the answer is the error, as
when the answer is lost on its way back), ``cut_next`` (a send or edit
held unanswered until the fake stops: a gateway killed mid-send),
``revoke_tokens``, ``send_delay``, ``send_gate`` (set: sends wait for
it, a Feishu slow to answer for as long as a test needs). Error codes for the token and message
endpoints are the documented ones (230011 for an id already withdrawn is
the reply endpoint's, assumed here too); the long-connection endpoint's error code for bad
credentials (here 514, as the SDK's AUTH_FAILED) is a guess.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import WSMsgType, web

from gateway.http import stop_listening

__all__ = ["FakeFeishu", "Frame", "RecordMessage", "ToFake", "decode_frame", "encode_frame"]


class ToFake(httpx.AsyncBaseTransport):
    """Sends every request to ``base`` (the fake's URL), its path and query
    kept: what a hosts-file entry would do, without root."""

    def __init__(self, base: str) -> None:
        self._base = httpx.URL(base)
        self._http = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme=self._base.scheme, host=self._base.host, port=self._base.port)
        request.headers["Host"] = self._base.netloc.decode()
        return await self._http.handle_async_request(request)

    async def aclose(self) -> None:
        await self._http.aclose()


# -- lark-oapi's pbbp2.Frame, hand-coded (proto2) ---------------------------------
@dataclass
class Frame:
    SeqID: int = 0
    LogID: int = 0
    service: int = 0
    method: int = 0  # 0 control (ping/pong), 1 data (event, ACK)
    headers: dict[str, str] = field(default_factory=dict)
    payload_encoding: str = ""
    payload_type: str = ""
    payload: bytes = b""
    LogIDNew: str = ""


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    return _varint(num << 3 | 2) + _varint(len(value)) + value


def encode_frame(f: Frame) -> bytes:
    out = _field(1, f.SeqID) + _field(2, f.LogID) + _field(3, f.service) + _field(4, f.method)
    for k, v in f.headers.items():
        out += _field(5, _field(1, k.encode()) + _field(2, v.encode()))
    for num, text in ((6, f.payload_encoding), (7, f.payload_type)):
        if text:
            out += _field(num, text.encode())
    if f.payload:
        out += _field(8, f.payload)
    if f.LogIDNew:
        out += _field(9, f.LogIDNew.encode())
    return out


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    pos = 0
    out: list[tuple[int, int | bytes]] = []
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _read_varint(data, pos)
            out.append((num, val))
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            out.append((num, data[pos : pos + n]))
            pos += n
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def decode_frame(data: bytes) -> Frame:
    f = Frame()
    for num, val in _fields(data):
        if num == 5 and isinstance(val, bytes):
            kv = {n: v for n, v in _fields(val)}
            f.headers[bytes(kv.get(1, b"")).decode()] = bytes(kv.get(2, b"")).decode()
        elif num in (1, 2, 3, 4) and isinstance(val, int):
            setattr(f, ("SeqID", "LogID", "service", "method")[num - 1], val)
        elif num == 8 and isinstance(val, bytes):
            f.payload = bytes(val)
        elif num in (6, 7, 9) and isinstance(val, bytes):
            setattr(f, {6: "payload_encoding", 7: "payload_type", 9: "LogIDNew"}[num], bytes(val).decode())
    return f


# -- the fake ----------------------------------------------------------------------
@dataclass
class RecordMessage:
    """One message of a chat record (:meth:`FakeFeishu.chat_record_event`)."""

    sender: str  # a user's open_id, or with ``app`` an app's app_id
    text: str = ""
    msg_type: str = "text"
    content: dict[str, Any] | None = None  # default: ``{"text": text}``
    sent_ms: int = 0  # when it was first sent (ms); 0: now
    app: bool = False
    messages: list[RecordMessage] = field(default_factory=list)  # a record inside the record (msg_type merge_forward)


_FILE_TYPES = frozenset({"opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"})


@dataclass
class _Failure:
    code: int
    msg: str
    status: int
    after: int = 0  # sends to let through first
    accepted: bool = False  # the message goes out all the same


class FakeFeishu:
    def __init__(
        self,
        *,
        app_id: str = "cli_a1b2c3d4e5f6",
        app_secret: str = "fake-app-secret-0123456789abcdef",
        verification_token: str = "fake-verification-token-42",
        bot_open_id: str = "ou_bot0000000000000000000000000000",
        bot_name: str = "myclaw",
        token_expire: int = 7200,
        tenant_key: str = "2ed263bf32cf1651",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app_id = app_id
        self.app_secret = app_secret
        self.verification_token = verification_token
        self.bot_open_id = bot_open_id
        self.bot_name = bot_name
        self.token_expire = token_expire
        self.tenant_key = tenant_key
        self.port = 0
        self.valid_tokens: set[str] = set()
        self.issued_tokens: list[str] = []
        self.token_requests = 0
        self.sent: list[dict[str, Any]] = []  # every accepted create/reply
        self.deleted: list[str] = []  # message ids withdrawn by DELETE, in order
        # every accepted edit, in order: {"message_id", "msg_type", "text"}
        self.edits: list[dict[str, Any]] = []
        self.edit_limit = 20  # Feishu's edits per message
        self._edit_counts: dict[str, int] = {}  # message_id -> edits accepted
        self.files: dict[str, dict[str, Any]] = {}  # file_key -> {"file_name", "file_type", "data"}
        self.max_upload_bytes = 30_000_000  # "文件大小不得超过 30 MB" (im/v1/files)
        self.images: dict[str, tuple[bytes, str]] = {}  # image_key or file_key -> (bytes, content type), what users send
        self._resources_of: dict[str, set[str]] = {}  # message_id -> the keys its content names
        self.resource_downloads: list[tuple[str, str]] = []  # (message_id, key) of every picture served
        self.resource_requests: list[tuple[str, str]] = []  # (message_id, key) as asked for, served or not yet
        self._resource_gates: dict[str, asyncio.Event] = {}  # key -> what its downloads wait for
        self.requests: list[tuple[str, str]] = []  # (method, path) of every API call
        self.send_delay = 0.0
        self.send_gate: asyncio.Event | None = None  # set: sends wait for it
        self.ws_acks: dict[str, dict[str, Any]] = {}
        self.ws_pings = 0
        self.ws_connects = 0
        # (code, msg) the long-connection endpoint answers with instead of a
        # URL, e.g. (514, "auth failed") for an app without that permission.
        self.ws_refusal: tuple[int, str] | None = None
        self.ws_gate: asyncio.Event | None = None  # set: a websocket upgrade waits for it (a slow handshake)
        self._ws_asked = asyncio.Event()  # an upgrade was asked for
        self._failures: list[_Failure] = []
        self._delete_failures: list[_Failure] = []
        self._edit_failures: list[_Failure] = []
        self._edit_faults: list[tuple[str | None, _Failure]] = []  # (the words it hits, or any), fail_edits
        self._chat_of: dict[str, str] = {}  # message_id -> chat_id, for replies
        self._items: dict[str, dict[str, Any]] = {}  # message_id -> the message as GET .../messages/:id shows it
        self.message_reads = 0  # GET .../messages/:id calls answered
        self._record_items: dict[str, list[dict[str, Any]]] = {}  # a chat record's id -> the messages in it
        self._read_failures: list[_Failure] = []
        self._read_gates: dict[str, asyncio.Event] = {}  # message_id -> what its reads wait for
        self._delete_gates: dict[str, asyncio.Event] = {}  # message_id -> what its withdrawal waits for
        self._resource_failures: list[_Failure] = []
        self.contacts: dict[str, str] = {}  # open_id -> name, in the app's contact range
        self.contact_permission = True  # the app has contact:user.base:readonly
        self.contact_user_ids: dict[str, str] = {}  # user_id -> open_id, the app's tenant's
        self.contact_requests: list[str] = []  # ids asked for
        self.contact_lookups: list[tuple[str, str]] = []  # (user_id_type, id) asked for
        self.contact_gate: asyncio.Event | None = None  # set: contact lookups wait for it (a slow directory)
        self.chats: dict[str, str] = {}  # chat_id -> group name, the groups the bot is in
        self.chat_permission = True  # the app has im:chat:readonly
        self.chat_requests: list[str] = []  # chat_ids asked for
        self.chat_gate: asyncio.Event | None = None  # set: chat lookups wait for it
        self.clock = clock  # for the uuid window
        self._by_uuid: dict[str, tuple[float, dict[str, Any]]] = {}  # uuid -> (when, the answer's data)
        self.deduplicated = 0  # sends answered from the uuid window
        self._cuts: list[tuple[str, str | None, asyncio.Event]] = []  # cut_next's (on, words, arrived), in order
        self._closing = asyncio.Event()  # set by stop: held sends end
        self._cut_accepted: dict[asyncio.Event, bool] = {}
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._ws_connected = asyncio.Event()
        self._ack_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.service_id = 7

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        """What to put in ``channels.feishu.domain``."""
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> httpx.AsyncClient:
        """An HTTP client that takes requests for Feishu's real domain
        (``https://open.feishu.cn``: a channel configured as in production)
        to this server, over HTTP as any: for the channel's ``api_http``."""
        return httpx.AsyncClient(transport=ToFake(self.url))

    async def start(self, port: int = 0) -> FakeFeishu:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # room for a file over Feishu's own limit
        app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        app.router.add_get("/open-apis/bot/v3/info", self._bot_info)
        app.router.add_post("/open-apis/im/v1/messages", self._create)
        app.router.add_post("/open-apis/im/v1/messages/{message_id}/reply", self._reply)
        app.router.add_delete("/open-apis/im/v1/messages/{message_id}", self._delete)
        app.router.add_put("/open-apis/im/v1/messages/{message_id}", self._edit)
        app.router.add_get("/open-apis/im/v1/messages/{message_id}", self._get_message)
        app.router.add_get("/open-apis/im/v1/messages/{message_id}/resources/{file_key}", self._resource)
        app.router.add_post("/open-apis/im/v1/files", self._upload)
        app.router.add_get("/open-apis/contact/v3/users/{user_id}", self._contact_user)
        app.router.add_get("/open-apis/im/v1/chats/{chat_id}", self._get_chat)
        app.router.add_get("/open-apis/im/v1/chats", self._list_chats)
        app.router.add_post("/callback/ws/endpoint", self._ws_endpoint)
        app.router.add_get("/ws", self._ws)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self._closing.set()
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await stop_listening(self._runner)
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeFeishu:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- scripting -----------------------------------------------------------------------
    def fail_next(
        self,
        code: int,
        msg: str = "error",
        *,
        status: int = 400,
        times: int = 1,
        on: str = "send",
        after: int = 0,
        accepted: bool = False,
    ) -> None:
        """The next ``times`` message sends (``on="delete"``: withdrawals;
        ``on="read"``: reads of a message by id; ``on="edit"``: edits;
        ``on="resource"``: downloads of a message's picture or file)
        answer with this Feishu error, after letting ``after`` through (a
        split reply failing midway); ``accepted``: each is sent (or the edit
        made) all the same (the answer was lost, not the request)."""
        queue = {"send": self._failures, "delete": self._delete_failures, "read": self._read_failures,
                 "edit": self._edit_failures, "resource": self._resource_failures}[on]
        queue.extend(_Failure(code, msg, status, after if i == 0 else 0, accepted) for i in range(times))

    def cut_next(self, *, accepted: bool = False, on: str = "send", text: str | None = None) -> asyncio.Event:
        """The next message send (``on="edit"``: edit, to exactly ``text``
        if given) is never answered, as a gateway killed mid-send sees it:
        held until the fake stops, and not carried out unless ``accepted``
        (a send's uuid is then remembered: Feishu took it, the answer never
        came back). Returns an event set once the request arrived."""
        arrived = asyncio.Event()
        self._cuts.append(("send" if on == "send" else "edit", text, arrived))
        self._cut_accepted[arrived] = accepted
        return arrived

    def _cut(self, on: str, text: str | None) -> tuple[bool, asyncio.Event] | None:
        found = next((i for i, (kind, words, _) in enumerate(self._cuts) if kind == on and words in (None, text)), None)
        if found is None:
            return None
        arrived = self._cuts.pop(found)[2]
        return self._cut_accepted.pop(arrived), arrived

    async def _held(self, arrived: asyncio.Event) -> web.Response:
        arrived.set()
        await self._closing.wait()
        return web.json_response({"code": 99991400, "msg": "cut"}, status=502)

    def fail_edits(
        self,
        code: int = 230020,
        msg: str = "This operation triggers the frequency limit.",
        *,
        times: int = 1,
        text: str | None = None,
        status: int = 400,
    ) -> None:
        """The next ``times`` edits (of a valid body) answer with this
        Feishu error; with ``text``, only edits to exactly those words
        (the reply's, not its drafts'). :meth:`clear_edit_failures` ends it."""
        self._edit_faults.extend((text, _Failure(code, msg, status)) for _ in range(times))

    def clear_failures(self) -> None:
        """Every failure still scripted by :meth:`fail_next` and :meth:`fail_edits` is dropped."""
        for queue in (self._failures, self._delete_failures, self._read_failures, self._resource_failures):
            queue.clear()
        self.clear_edit_failures()

    def clear_edit_failures(self) -> None:
        self._edit_faults.clear()
        self._edit_failures.clear()

    def revoke_tokens(self) -> None:
        """Tokens issued so far stop working (as after a secret reset)."""
        self.valid_tokens.clear()

    def add_image(self, data: bytes, content_type: str = "image/jpeg") -> str:
        """Keep a picture a user sends; returns its ``image_key`` for an
        ``image`` message's content (``{"image_key": key}``) or a post's ``img``."""
        key = f"img_v3_{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:4]}g"
        self.images[key] = (data, content_type)
        return key

    def add_audio(self, data: bytes) -> str:
        """Keep a voice recording a user sends; returns its ``file_key`` for
        an ``audio`` message's content (``{"file_key": key, "duration": ms}``)."""
        key = f"file_v3_{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:4]}g"
        self.images[key] = (data, "audio/ogg")
        return key

    def add_file(self, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Keep a file a user sends; returns its ``file_key`` for a ``file``
        message's content (``{"file_key": key, "file_name": name}``)."""
        key = f"file_v3_{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:4]}g"
        self.images[key] = (data, content_type)
        return key

    def hold_read(self, message_id: str) -> asyncio.Event:
        """Reads of ``message_id`` (``GET .../messages/:id``: a quote, a
        chat record) wait until the returned event is set."""
        return self._read_gates.setdefault(message_id, asyncio.Event())

    def hold_delete(self, message_id: str) -> asyncio.Event:
        """Withdrawals of ``message_id`` wait until the returned event is set
        (or the fake stops): a slow DELETE the test ends."""
        return self._delete_gates.setdefault(message_id, asyncio.Event())

    def hold_resource(self, key: str) -> asyncio.Event:
        """Downloads of ``key`` (a picture or recording) wait until the
        returned event is set: a slow download the test ends."""
        return self._resource_gates.setdefault(key, asyncio.Event())

    def texts(self) -> list[str]:
        """The words of every text and post message sent (a post's md element as written)."""
        return [m["text"] for m in self.sent if m["msg_type"] in ("text", "post")]

    def visible(self) -> list[dict[str, Any]]:
        """What the bot sent that is still in the chats (not withdrawn)."""
        return [m for m in self.sent if m["message_id"] not in self.deleted]

    # -- Open API ------------------------------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        self.token_requests += 1
        body = await request.json()
        if body.get("app_id") != self.app_id:
            return web.json_response({"code": 10003, "msg": "invalid param"}, status=400)
        if body.get("app_secret") != self.app_secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"}, status=400)
        token = "t-" + secrets.token_hex(20)
        self.valid_tokens.add(token)
        self.issued_tokens.append(token)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.token_expire}
        )

    def _auth_error(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return web.json_response({"code": 99991661, "msg": "Missing access token for authorization."}, status=400)
        if auth[len("Bearer ") :] not in self.valid_tokens:
            return web.json_response({"code": 99991663, "msg": "Invalid access token for authorization."}, status=400)
        return None

    async def _bot_info(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        return web.json_response(
            {
                "code": 0,
                "msg": "ok",
                "bot": {
                    "activate_status": 2,
                    "app_name": self.bot_name,
                    "avatar_url": "https://example.invalid/avatar.png",
                    "ip_white_list": [],
                    "open_id": self.bot_open_id,
                },
            }
        )

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        """A file of a user's message, as a binary stream."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        mid, key = request.match_info["message_id"], request.match_info["file_key"]
        if request.query.get("type") not in ("image", "file") or key not in self._resources_of.get(mid, set()):
            return web.json_response({"code": 234001, "msg": "Invalid request param."}, status=400)
        self.resource_requests.append((mid, key))
        if self._resource_failures:
            f = self._resource_failures.pop(0)
            return web.json_response({"code": f.code, "msg": f.msg}, status=f.status)
        gate = self._resource_gates.get(key)
        if gate is not None:
            await gate.wait()
        data, content_type = self.images[key]
        self.resource_downloads.append((mid, key))
        return web.Response(body=data, headers={"Content-Type": content_type,
                                                "Content-Disposition": f'attachment; filename="{key}"'})

    async def _create(self, request: web.Request) -> web.Response:
        if request.query.get("receive_id_type") != "chat_id":
            return web.json_response({"code": 99992402, "msg": "field validation failed: receive_id_type"}, status=400)
        body = await request.json()
        return await self._send(request, body, chat_id=str(body.get("receive_id") or ""), reply_to="")

    async def _reply(self, request: web.Request) -> web.Response:
        mid = request.match_info["message_id"]
        body = await request.json()
        chat_id = self._chat_of.get(mid)
        if chat_id is None:
            self.requests.append((request.method, request.path))
            return web.json_response({"code": 230001, "msg": f"invalid message_id: {mid}"}, status=400)
        if mid in self.deleted:
            self.requests.append((request.method, request.path))
            return web.json_response({"code": 230011, "msg": "The message is recalled."}, status=400)
        return await self._send(request, body, chat_id=chat_id, reply_to=mid)

    async def _get_message(self, request: web.Request) -> web.Response:
        """``GET /open-apis/im/v1/messages/:message_id``: a message of a chat
        the bot is in (a user's or its own), as ``data.items[0]``."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        mid = request.match_info["message_id"]
        if (gate := self._read_gates.get(mid)) is not None:
            await gate.wait()
        if self._read_failures:
            f = self._read_failures.pop(0)
            return web.json_response({"code": f.code, "msg": f.msg}, status=f.status)
        item = self._items.get(mid)
        if item is None:
            return web.json_response({"code": 230001, "msg": f"invalid message_id: {mid}"}, status=400)
        self.message_reads += 1
        items = [{**item, "deleted": mid in self.deleted}, *self._record_items.get(mid, ())]
        return web.json_response({"code": 0, "msg": "success", "data": {"items": items}})

    async def _contact_user(self, request: web.Request) -> web.Response:
        """``GET /open-apis/contact/v3/users/:user_id``: a user's basic
        information, as far as the app's permission and contact range go."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        id_type = request.query.get("user_id_type", "open_id")
        if id_type not in ("open_id", "union_id", "user_id"):
            return web.json_response({"code": 99992402, "msg": "field validation failed: user_id_type"}, status=400)
        asked = request.match_info["user_id"]
        self.contact_requests.append(asked)
        self.contact_lookups.append((id_type, asked))
        if id_type == "union_id":
            uid = "ou_" + asked[3:] if asked.startswith("on_") else ""
        elif id_type == "user_id":
            uid = self.contact_user_ids.get(asked, "")
        else:
            uid = asked
        if self.contact_gate is not None:
            await self.contact_gate.wait()
        if not self.contact_permission:
            return web.json_response({"code": 99991672, "msg": "Access denied. One of the following scopes is "
                                      "required: [contact:user.base:readonly, contact:contact.base:readonly]."},
                                     status=400)
        if uid not in self.contacts:
            return web.json_response({"code": 41050, "msg": "no user authority error"}, status=400)
        user = {"open_id": uid, "union_id": "on_" + uid[3:], "name": self.contacts[uid], "en_name": ""}
        return web.json_response({"code": 0, "msg": "success", "data": {"user": user}})

    def _chat_refused(self) -> web.Response:
        return web.json_response({"code": 99991672, "msg": "Access denied. One of the following scopes is "
                                  "required: [im:chat, im:chat:readonly]."}, status=400)

    async def _list_chats(self, request: web.Request) -> web.Response:
        """``GET /open-apis/im/v1/chats``: the groups the bot is in (lark-oapi
        ``im.v1.chat.list``), one page."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        if not self.chat_permission:
            return self._chat_refused()
        size = int(request.query.get("page_size") or 20)
        items = [
            {"chat_id": cid, "name": name, "avatar": "", "description": "", "owner_id": "ou_owner0001",
             "owner_id_type": "open_id", "external": False, "tenant_key": self.tenant_key, "chat_status": "normal"}
            for cid, name in list(self.chats.items())[:size]
        ]
        return web.json_response({"code": 0, "msg": "success",
                                  "data": {"items": items, "page_token": "", "has_more": len(self.chats) > size}})

    async def _get_chat(self, request: web.Request) -> web.Response:
        """``GET /open-apis/im/v1/chats/:chat_id``: a group's information
        (lark-oapi ``im.v1.chat.get``), for a chat the bot is in."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        cid = request.match_info["chat_id"]
        self.chat_requests.append(cid)
        if self.chat_gate is not None:
            await self.chat_gate.wait()
        if not self.chat_permission:
            return self._chat_refused()
        if cid not in self.chats:
            return web.json_response({"code": 232011, "msg": "Operator can NOT be out of the chat."}, status=400)
        data = {
            "avatar": "https://s1-imfile.feishucdn.com/static-resource/v1/default-avatar", "name": self.chats[cid],
            "description": "", "i18n_names": {"zh_cn": "", "en_us": "", "ja_jp": ""},
            "add_member_permission": "all_members", "share_card_permission": "allowed",
            "at_all_permission": "all_members", "edit_permission": "all_members", "owner_id_type": "open_id",
            "owner_id": "ou_owner0001", "chat_mode": "group", "chat_type": "private", "chat_tag": "inner",
            "join_message_visibility": "all_members", "leave_message_visibility": "all_members",
            "membership_approval": "no_approval_required", "moderation_permission": "all_members",
            "external": False, "tenant_key": self.tenant_key, "user_count": "3", "bot_count": "1",
            "chat_status": "normal",
        }
        return web.json_response({"code": 0, "msg": "success", "data": data})

    async def _delete(self, request: web.Request) -> web.Response:
        """Withdraw a message: a bot may withdraw only its own."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        mid = request.match_info["message_id"]
        if (gate := self._delete_gates.get(mid)) is not None:
            await gate.wait()
        if self._delete_failures:
            f = self._delete_failures.pop(0)
            return web.json_response({"code": f.code, "msg": f.msg}, status=f.status)
        if mid not in self._chat_of:
            return web.json_response({"code": 230001, "msg": f"invalid message_id: {mid}"}, status=400)
        if mid in self.deleted:
            return web.json_response({"code": 230011, "msg": "The message is recalled."}, status=400)
        if not any(m["message_id"] == mid for m in self.sent):
            return web.json_response({"code": 230026, "msg": "No permission to recall this message."}, status=400)
        self.deleted.append(mid)
        return web.json_response({"code": 0, "msg": "success", "data": {}})

    async def _edit(self, request: web.Request) -> web.Response:
        """Edit a text or post message the bot sent, as the docs describe it."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        failure: _Failure | None = None
        if self._edit_failures and self._edit_failures[0].after:
            self._edit_failures[0].after -= 1
        elif self._edit_failures:
            failure = self._edit_failures.pop(0)
            if not failure.accepted:
                return web.json_response({"code": failure.code, "msg": failure.msg}, status=failure.status)
        mid = request.match_info["message_id"]
        raw = await request.read()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict) or body.get("msg_type") not in ("text", "post") \
                or not isinstance(body.get("content"), str):
            return web.json_response({"code": 230001, "msg": "param is invalid"}, status=400)
        msg_type, content = body["msg_type"], body["content"]
        text = _post_text(content) if msg_type == "post" else _text_of(content)
        if text is None:
            return web.json_response({"code": 230001, "msg": f"param is invalid: {msg_type} content"}, status=400)
        cut = self._cut("edit", text)
        if cut is not None and not cut[0]:
            return await self._held(cut[1])
        fault = next((i for i, (words, _) in enumerate(self._edit_faults) if words in (None, text)), None)
        if fault is not None:
            _, f = self._edit_faults.pop(fault)
            return web.json_response({"code": f.code, "msg": f.msg}, status=f.status)
        if len(raw) > (150 if msg_type == "text" else 30) * 1024:
            return web.json_response({"code": 230025, "msg": "The length of the message content reaches its limit."},
                                     status=400)
        if mid not in self._chat_of:
            return web.json_response({"code": 230001, "msg": f"invalid message_id: {mid}"}, status=400)
        if mid in self.deleted:
            return web.json_response({"code": 230011, "msg": "The message is recalled."}, status=400)
        record = next((m for m in self.sent if m["message_id"] == mid), None)
        if record is None:
            return web.json_response({"code": 230071, "msg": "The operator is not the sender of the message."},
                                     status=400)
        if record["msg_type"] not in ("text", "post"):
            return web.json_response({"code": 230054, "msg": "This message type does not support the operation."},
                                     status=400)
        if self._edit_counts.get(mid, 0) >= self.edit_limit:
            return web.json_response({"code": 230072, "msg": "The message has reached the number of times it "
                                      "can be edited."}, status=400)
        self._edit_counts[mid] = self._edit_counts.get(mid, 0) + 1
        record.update(msg_type=msg_type, text=text)
        self.edits.append({"message_id": mid, "msg_type": msg_type, "text": text})
        item = self._items[mid]
        item.update(msg_type=msg_type, body={"content": content}, updated=True,
                    update_time=str(int(time.time() * 1000)))
        if cut is not None:  # made, its answer never comes back
            return await self._held(cut[1])
        if failure is not None:
            return web.json_response({"code": failure.code, "msg": failure.msg}, status=failure.status)
        return web.json_response({"code": 0, "msg": "success", "data": item})

    async def _upload(self, request: web.Request) -> web.Response:
        """Upload a file (multipart form), as the docs describe it."""
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        if request.content_type != "multipart/form-data":
            return web.json_response({"code": 234001, "msg": "Invalid request param."}, status=400)
        form = await request.post()
        file, file_type, file_name = form.get("file"), form.get("file_type"), form.get("file_name")
        if not isinstance(file, web.FileField) or file_type not in _FILE_TYPES or not isinstance(file_name, str):
            return web.json_response({"code": 234001, "msg": "Invalid request param."}, status=400)
        data = file.file.read()
        if not data:
            return web.json_response({"code": 234010, "msg": "File's size can't be 0."}, status=400)
        if len(data) > self.max_upload_bytes:
            return web.json_response({"code": 234006, "msg": "The file size exceed the max value."}, status=400)
        key = f"file_v3_{uuid.uuid4().hex}"
        self.files[key] = {"file_name": file_name, "file_type": file_type, "data": data}
        return web.json_response({"code": 0, "msg": "success", "data": {"file_key": key}})

    async def _send(self, request: web.Request, body: dict[str, Any], *, chat_id: str, reply_to: str) -> web.Response:
        self.requests.append((request.method, request.path))
        if (err := self._auth_error(request)) is not None:
            return err
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if self.send_gate is not None:
            await self.send_gate.wait()
        failure: _Failure | None = None
        if self._failures and self._failures[0].after:
            self._failures[0].after -= 1
        elif self._failures:
            failure = self._failures.pop(0)
            if not failure.accepted:
                return web.json_response({"code": failure.code, "msg": failure.msg}, status=failure.status)
        if not chat_id or body.get("msg_type") not in ("text", "post", "file") or not isinstance(body.get("content"), str):
            return web.json_response({"code": 230001, "msg": "param is invalid"}, status=400)
        if body["msg_type"] == "post" and _post_text(body["content"]) is None:
            return web.json_response({"code": 230001, "msg": "param is invalid: post content"}, status=400)
        if body["msg_type"] == "file" and json.loads(body["content"]).get("file_key", "") not in self.files:
            return web.json_response({"code": 230001, "msg": "param is invalid: file_key"}, status=400)
        if (cut := self._cut("send", None)) is not None:
            if cut[0]:
                self._sent_before(str(body.get("uuid") or "")) or self._accept(body, chat_id=chat_id, reply_to=reply_to)
            return await self._held(cut[1])
        answer = self._sent_before(str(body.get("uuid") or "")) or self._accept(body, chat_id=chat_id, reply_to=reply_to)
        if failure is not None:
            return web.json_response({"code": failure.code, "msg": failure.msg}, status=failure.status)
        return web.json_response({"code": 0, "msg": "success", "data": answer})

    def _sent_before(self, key: str) -> dict[str, Any] | None:
        """The message a send with this uuid made within the hour, if any."""
        if not key:
            return None
        now = self.clock()
        for old in [k for k, (at, _) in self._by_uuid.items() if now - at >= 3600]:
            del self._by_uuid[old]
        found = self._by_uuid.get(key)
        if found is None:
            return None
        self.deduplicated += 1
        return found[1]

    def _accept(self, body: dict[str, Any], *, chat_id: str, reply_to: str) -> dict[str, Any]:
        content = json.loads(body["content"])
        file = self.files.get(content.get("file_key", "")) if body["msg_type"] == "file" else None
        message_id = f"om_{uuid.uuid4().hex}"
        self._chat_of[message_id] = chat_id
        now = str(int(time.time() * 1000))
        record = {
            "kind": "reply" if reply_to else "create",
            "chat_id": chat_id,
            "reply_to": reply_to,
            "message_id": message_id,
            "msg_type": body["msg_type"],
            "text": _post_text(body["content"]) if body["msg_type"] == "post" else content.get("text", ""),
            "uuid": body.get("uuid", ""),
        }
        if file is not None:
            record.update(file_key=content["file_key"], file_name=file["file_name"], data=file["data"])
        self.sent.append(record)
        data = {
            "message_id": message_id,
            "root_id": reply_to,
            "parent_id": reply_to,
            "msg_type": body["msg_type"],
            "create_time": now,
            "update_time": now,
            "deleted": False,
            "updated": False,
            "chat_id": chat_id,
            "sender": {"id": self.app_id, "id_type": "app_id", "sender_type": "app", "tenant_key": self.tenant_key},
            "body": {"content": body["content"]},
            "mentions": [],
            "upper_message_id": "",
        }
        if body.get("uuid"):
            self._by_uuid[str(body["uuid"])] = (self.clock(), data)
        self._items[message_id] = data
        return data

    # -- events ------------------------------------------------------------------------
    def message_event(
        self,
        text: str = "hello",
        *,
        chat_id: str = "oc_chat0001",
        chat_type: str = "p2p",
        open_id: str = "ou_user0001",
        union_id: str = "on_user0001",
        user_id: str = "u0001",
        message_type: str = "text",
        content: dict[str, Any] | None = None,
        mentions: list[dict[str, Any]] | None = None,
        event_id: str | None = None,
        message_id: str | None = None,
        parent_id: str = "",
        sender_type: str = "user",
    ) -> dict[str, Any]:
        """A realistic ``im.message.receive_v1`` event (schema 2.0)."""
        n = next(self._ids)
        message_id = message_id or f"om_in{n:04d}{uuid.uuid4().hex[:12]}"
        self._chat_of[message_id] = chat_id
        self._resources_of[message_id] = _keys_in(content or {})
        now = str(int(time.time() * 1000))
        raw = json.dumps(content if content is not None else {"text": text}, ensure_ascii=False)
        self._items[message_id] = {
            "message_id": message_id, "root_id": parent_id, "parent_id": parent_id, "msg_type": message_type,
            "create_time": now, "update_time": now, "deleted": False, "updated": False, "chat_id": chat_id,
            "sender": {"id": open_id, "id_type": "open_id", "sender_type": sender_type, "tenant_key": self.tenant_key},
            "body": {"content": raw},
            # GET names a mention's id flat, where an event nests its ids
            "mentions": [{"key": m.get("key"), "id": (m.get("id") or {}).get("open_id", ""), "id_type": "open_id",
                          "name": m.get("name"), "tenant_key": self.tenant_key} for m in mentions or []],
            "upper_message_id": "",
        }
        return {
            "schema": "2.0",
            "header": self._header("im.message.receive_v1", event_id, now),
            "event": {
                "sender": {
                    "sender_id": {"union_id": union_id, "user_id": user_id, "open_id": open_id},
                    "sender_type": sender_type,
                    "tenant_key": self.tenant_key,
                },
                "message": {
                    "message_id": message_id,
                    "root_id": parent_id,
                    "parent_id": parent_id,
                    "create_time": now,
                    "update_time": now,
                    "chat_id": chat_id,
                    "chat_type": chat_type,
                    "message_type": message_type,
                    "content": json.dumps(content if content is not None else {"text": text}, ensure_ascii=False),
                    "mentions": mentions or [],
                    "user_agent": "Mozilla/5.0 Lark/7.0",
                },
            },
        }

    def chat_record_event(self, messages: list[RecordMessage], **event: Any) -> dict[str, Any]:
        """A user forwards ``messages`` as a chat record (合并转发): a
        ``merge_forward`` event (``event``: as :meth:`message_event` takes,
        e.g. ``chat_id``, ``chat_type``, ``open_id``, ``parent_id``) whose
        content is the stand-in; the messages are read by its id."""
        payload = self.message_event(message_type="merge_forward",
                                     content={"content": "Merged and Forwarded Message"}, **event)
        record_id = payload["event"]["message"]["message_id"]
        items: list[dict[str, Any]] = []

        def add(parent: str, subs: list[RecordMessage]) -> None:
            for sub in subs:
                mid = f"om_sub{next(self._ids):04d}{uuid.uuid4().hex[:12]}"
                when = str(sub.sent_ms or int(time.time() * 1000))
                content = {"content": "Merged and Forwarded Message"} if sub.msg_type == "merge_forward" else \
                    sub.content if sub.content is not None else {"text": sub.text}
                items.append({
                    "message_id": mid, "msg_type": sub.msg_type, "create_time": when, "update_time": when,
                    "deleted": False, "updated": False, "chat_id": "oc_elsewhere0001",
                    "sender": {"id": sub.sender, "id_type": "app_id" if sub.app else "open_id",
                               "sender_type": "app" if sub.app else "user", "tenant_key": self.tenant_key},
                    "body": {"content": json.dumps(content, ensure_ascii=False)},
                    "upper_message_id": parent,
                })
                add(mid, sub.messages)

        add(record_id, messages)
        self._record_items[record_id] = items
        return payload

    def recall_event(
        self,
        message_id: str,
        *,
        chat_id: str | None = None,
        recall_type: str = "message_owner",
        event_id: str | None = None,
    ) -> dict[str, Any]:
        """A realistic ``im.message.recalled_v1`` event (schema 2.0): it names
        the message and its chat, not who recalled it (``recall_type`` says
        which role). ``chat_id`` defaults to the chat the message was sent in."""
        now = str(int(time.time() * 1000))
        return {
            "schema": "2.0",
            "header": self._header("im.message.recalled_v1", event_id, now),
            "event": {
                "message_id": message_id,
                "chat_id": chat_id or self._chat_of.get(message_id, "oc_chat0001"),
                "recall_time": now,
                "recall_type": recall_type,
            },
        }

    def member_left_event(self, chat_id: str, *open_ids: str, event_id: str | None = None) -> dict[str, Any]:
        """A realistic ``im.chat.member.user.deleted_v1`` event (schema 2.0):
        members who left group ``chat_id`` or were removed from it."""
        now = str(int(time.time() * 1000))
        return {
            "schema": "2.0",
            "header": self._header("im.chat.member.user.deleted_v1", event_id, now),
            "event": {
                "chat_id": chat_id,
                "external": False,
                "operator_id": {"open_id": "ou_owner0001", "union_id": "on_owner0001", "user_id": None},
                "operator_tenant_key": self.tenant_key,
                "users": [{"name": f"Member {o}", "tenant_key": self.tenant_key,
                           "user_id": {"open_id": o, "union_id": f"on_{o}", "user_id": None}} for o in open_ids],
            },
        }

    def bot_removed_event(self, chat_id: str, *, by: str = "ou_owner0001", event_id: str | None = None) -> dict[str, Any]:
        """A realistic ``im.chat.member.bot.deleted_v1`` event (schema 2.0):
        the bot was removed from group ``chat_id`` by member ``by``."""
        now = str(int(time.time() * 1000))
        return {
            "schema": "2.0",
            "header": self._header("im.chat.member.bot.deleted_v1", event_id, now),
            "event": {
                "chat_id": chat_id,
                "external": False,
                "name": f"Group {chat_id}",
                "operator_id": {"open_id": by, "union_id": f"on_{by}", "user_id": None},
                "operator_tenant_key": self.tenant_key,
            },
        }

    def _header(self, event_type: str, event_id: str | None, now: str) -> dict[str, Any]:
        """The schema 2.0 header every event carries."""
        return {
            "event_id": event_id or uuid.uuid4().hex,
            "token": self.verification_token,
            "create_time": now,
            "event_type": event_type,
            "tenant_key": self.tenant_key,
            "app_id": self.app_id,
        }

    def mention(self, key: str = "@_user_1", *, bot: bool = True, name: str | None = None, open_id: str = "") -> dict[str, Any]:
        """An entry of ``message.mentions`` (the bot's, by default)."""
        return {
            "key": key,
            "id": {"union_id": "on_x", "user_id": "" if bot else "u_x", "open_id": self.bot_open_id if bot else open_id or "ou_other"},
            "name": name or (self.bot_name if bot else "Alice"),
            "tenant_key": self.tenant_key,
        }

    async def push_event(
        self,
        webhook_url: str,
        event: dict[str, Any],
        *,
        encrypt_key: str | None = None,
        verification_token: str | None = None,
        bad_signature: bool = False,
        timeout: float = 10.0,
    ) -> httpx.Response:
        """POST ``event`` to ``webhook_url`` as Feishu does: the header token
        set to ``verification_token`` (default: ours), encrypted and signed
        when ``encrypt_key`` is given."""
        event = json.loads(json.dumps(event))
        token = self.verification_token if verification_token is None else verification_token
        if isinstance(event.get("header"), dict):
            event["header"]["token"] = token
        elif "token" in event:
            event["token"] = token
        return await self._post_webhook(webhook_url, event, encrypt_key, bad_signature, timeout)

    async def push_challenge(
        self,
        webhook_url: str,
        challenge: str = "ajls384kdjx98XX",
        *,
        encrypt_key: str | None = None,
        verification_token: str | None = None,
    ) -> httpx.Response:
        token = self.verification_token if verification_token is None else verification_token
        body = {"challenge": challenge, "token": token, "type": "url_verification"}
        return await self._post_webhook(webhook_url, body, encrypt_key, False, 10.0, signed=False)

    async def _post_webhook(
        self,
        url: str,
        payload: dict[str, Any],
        encrypt_key: str | None,
        bad_signature: bool,
        timeout: float,
        *,
        signed: bool = True,
    ) -> httpx.Response:
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "Go-http-client/1.1"}
        if encrypt_key:
            body = json.dumps({"encrypt": _encrypt(encrypt_key, json.dumps(payload, ensure_ascii=False))}).encode()
            if signed:
                ts, nonce = str(int(time.time())), secrets.token_hex(8)
                sig = hashlib.sha256((ts + nonce + encrypt_key).encode() + body).hexdigest()
                if bad_signature:
                    sig = sig[::-1]
                headers.update({"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": sig})
        else:
            body = json.dumps(payload, ensure_ascii=False).encode()
            if bad_signature:  # unsigned deliveries have nothing to break; send a forged header anyway
                headers["X-Lark-Signature"] = "0" * 64
        async with httpx.AsyncClient(timeout=timeout) as client:
            return await client.post(url, content=body, headers=headers)

    # -- long connection ---------------------------------------------------------------
    async def _ws_endpoint(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        body = await request.json()
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return web.json_response({"code": 514, "msg": "auth failed: app id or secret invalid"})
        if self.ws_refusal is not None:
            return web.json_response({"code": self.ws_refusal[0], "msg": self.ws_refusal[1]})
        device = uuid.uuid4().hex[:16]
        return web.json_response(
            {
                "code": 0,
                "msg": "ok",
                "data": {
                    "URL": f"ws://127.0.0.1:{self.port}/ws?device_id={device}&service_id={self.service_id}"
                    f"&access_key={secrets.token_hex(8)}&ticket={secrets.token_hex(8)}",
                    "ClientConfig": self._client_config(),
                },
            }
        )

    def _client_config(self) -> dict[str, int]:
        # Short reconnect settings so tests never wait on the SDK's defaults.
        return {"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 120}

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        self._ws_asked.set()
        if self.ws_gate is not None:
            await self.ws_gate.wait()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        self.ws_connects += 1
        self._ws_connected.set()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                frame = decode_frame(msg.data)
                kind = frame.headers.get("type")
                if frame.method == 0 and kind == "ping":
                    self.ws_pings += 1
                    pong = Frame(service=frame.service, method=0, headers={"type": "pong"},
                                 payload=json.dumps(self._client_config()).encode())
                    await ws.send_bytes(encode_frame(pong))
                elif frame.method == 1:  # the client's ACK of a data frame we sent
                    mid = frame.headers.get("message_id", "")
                    ack = json.loads(frame.payload or b"{}")
                    ack["headers"] = dict(frame.headers)
                    self.ws_acks[mid] = ack
                    waiter = self._ack_waiters.pop(mid, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(ack)
        finally:
            self._sockets.discard(ws)
            if not self._sockets:
                self._ws_connected.clear()
        return ws

    @property
    def connected(self) -> bool:
        """Whether a long connection client is connected now (``push_ws_event`` needs one)."""
        return bool(self._sockets)

    async def wait_ws_connected(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._ws_connected.wait(), timeout)

    async def wait_ws_asked(self, timeout: float = 30.0) -> None:
        """Until a client asked for the websocket (held by ``ws_gate``, if set)."""
        await asyncio.wait_for(self._ws_asked.wait(), timeout)

    async def drop_ws(self) -> None:
        """Close every long connection from this side, as Feishu dropping it."""
        for ws in list(self._sockets):
            await ws.close()

    async def push_ws_event(self, event: dict[str, Any], *, timeout: float = 10.0) -> dict[str, Any]:
        """Send ``event`` as a data frame over the long connection and
        return the client's ACK payload (``{"code": 200, ...}``)."""
        if not self._sockets:
            raise RuntimeError("no long connection client is connected")
        mid = uuid.uuid4().hex
        frame = Frame(
            SeqID=0,
            LogID=0,
            service=self.service_id,
            method=1,
            headers={"type": "event", "message_id": mid, "trace_id": uuid.uuid4().hex, "sum": "1", "seq": "0"},
            payload=json.dumps(event, ensure_ascii=False).encode(),
        )
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._ack_waiters[mid] = waiter
        ws = next(iter(self._sockets))
        await ws.send_bytes(encode_frame(frame))
        try:
            return await asyncio.wait_for(waiter, timeout)
        finally:
            self._ack_waiters.pop(mid, None)


_POST_TAGS = {"text", "a", "at", "img", "media", "emotion", "hr", "code_block", "md"}


def _post_text(content: str) -> str | None:
    """A post's words (its elements' texts, paragraphs on their own lines),
    or None for content Feishu refuses: one locale object with a
    ``content`` list of paragraphs, each a list of known elements, an
    ``md`` element alone in its paragraph."""
    try:
        post = json.loads(content)
    except json.JSONDecodeError:
        return None
    if not isinstance(post, dict) or len(post) != 1:
        return None
    body = next(iter(post.values()))
    paragraphs = body.get("content") if isinstance(body, dict) else None
    if not isinstance(paragraphs, list) or not paragraphs:
        return None
    lines = []
    for para in paragraphs:
        if not isinstance(para, list) or not all(isinstance(e, dict) and e.get("tag") in _POST_TAGS for e in para):
            return None
        if any(e["tag"] == "md" for e in para) and len(para) != 1:
            return None
        lines.append("".join(str(e.get("text", "")) for e in para))
    return "\n".join(lines)


def _text_of(content: str) -> str | None:
    """A text message's words, or None for content Feishu refuses."""
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError:
        return None
    text = parsed.get("text") if isinstance(parsed, dict) else None
    return text if isinstance(text, str) and text else None


def _keys_in(content: Any) -> set[str]:
    """Every ``image_key`` / ``file_key`` a message's content names (a post's
    ``img`` elements included)."""
    if isinstance(content, dict):
        found = {str(v) for k, v in content.items() if k in ("image_key", "file_key") and v}
        return found.union(*(_keys_in(v) for v in content.values()))
    if isinstance(content, list):
        return set().union(*(_keys_in(v) for v in content))
    return set()


def _encrypt(encrypt_key: str, plaintext: str) -> str:
    from Crypto.Cipher import AES  # pycryptodome, which lark-oapi depends on

    key = hashlib.sha256(encrypt_key.encode()).digest()
    iv = os.urandom(16)
    data = plaintext.encode()
    pad = 16 - len(data) % 16
    data += bytes([pad]) * pad
    return base64.b64encode(iv + AES.new(key, AES.MODE_CBC, iv).encrypt(data)).decode()
