"""A Telegram Bot API server on 127.0.0.1, for tests, benchmarks and trying
myclaw by hand.

It speaks the real protocol at ``/bot<token>/<method>`` (JSON, form and
multipart bodies, as python-telegram-bot sends them) with the real error
shapes, so the client code under test cannot tell it from Telegram:

* unknown token: 401 ``Unauthorized``; a path that is not ``bot<token>``
  or an unknown method: 404 ``Not Found``;
* ``fail_next(method, 429, retry_after=1)``: 429 with
  ``parameters.retry_after``; any other status with Telegram's wording
  (``times=`` in a row, ``after=`` calls that go through first);
  ``cut_next(method)``: the call is held unanswered until the fake stops
  (a gateway killed mid-send), carried out first with ``accepted=True``;
  ``slow_next(method)``: carried out, its answer held until the returned
  event is set (a send in flight when the gateway is asked to stop;
  ``after=`` calls answered at once first: a split reply's later part);
* ``sendMessage`` over 4096 characters (UTF-16 code units, the stricter
  count; with ``parse_mode=HTML`` counted without the markup): 400 ``Bad
  Request: message is too long``; to a chat nobody wrote from: 400 ``Bad
  Request: chat not found``; HTML Telegram would refuse (a tag it does
  not know, one not closed, a bare ``<``): 400 ``Bad Request: can't parse
  entities: ...`` (:func:`parse_html`);
* two ``getUpdates`` at once: the older gets 409 ``Conflict``;
* ``migrate_group(old, new)``: a group upgraded to a supergroup, as
  Telegram does it: the supergroup numbers its messages from 1 on its own
  (a basic group's come from the account's counter, so the old group's ids
  come back there, meaning other messages); its first message is a service message
  with ``migrate_from_chat_id``, the old group's last one has
  ``migrate_to_chat_id``, and any send to the old id is refused with 400
  ``Bad Request: group chat was upgraded to a supergroup chat`` and
  ``parameters.migrate_to_chat_id``;
* ``sendDocument`` takes the file as a multipart upload (as PTB sends an
  ``InputFile``), recorded in ``documents`` with its bytes and filename;
  a file id or URL instead, an empty file, or a caption over 1024
  characters (with ``parse_mode=HTML``: its visible text, the markup
  checked as a message's): 400 with Telegram's wording; a file over
  ``max_upload_bytes`` (50 MB): 413 ``Request Entity Too Large``.
* ``sendMessageDraft`` (a reply shown while it is written) is recorded in
  ``drafts``; to a chat that is not private, or with ``draft_id`` 0: 400.
  Telegram shows a draft as an ephemeral preview, gone once the message is
  sent or 30 s after its last update; there is no call that takes one
  away, so a draft never followed by ``sendMessage`` fades by itself (the
  fake keeps every draft it accepted, for tests to read).

* ``getFile`` answers a file a pushed message carries (``push_photo``,
  ``push_document``) with its ``file_path``, and ``GET
  /file/bot<token>/<file_path>`` serves its bytes, as Telegram does; an
  unknown ``file_id``: 400 ``Bad Request: invalid file_id``, one over 20 MB
  (what bots may download): 400 ``Bad Request: file is too big``; an
  unknown path: 404. ``file_downloads`` counts what was fetched;
  ``file_requests`` records a download as it arrives, and ``hold_file(file_id)``
  returns an ``asyncio.Event`` that file's downloads wait for (a slow
  download, released by the test).
* ``push_photo(..., media_group_id=...)``: one part of an album, as Telegram
  sends albums (one update per part, the caption on one of them).

Updates are ``message`` (``push_text``, ``push_media``, ``push_photo``,
``push_document``, ``push_external_reply``: a reply to a message of another
chat, with ``origin_user`` / ``origin_hidden_user`` / ``origin_chat`` /
``origin_channel``; the same origins as ``forward_origin=`` make a pushed
message a forward; ``push_media`` with ``location`` / ``venue`` /
``contact`` / ``poll`` / ``dice`` / ``sticker``: what users share) and
``edited_message`` (``push_edit``), filtered by ``allowed_updates`` as
Telegram does (the last list given sticks).

``getUpdates`` keeps updates until an ``offset`` confirms them (at-least-once,
as Telegram does; ``redeliver(update_id)`` offers confirmed ones again, as
after a bot crashed before confirming them) and long-polls on an ``asyncio.Event``, so a pushed update
reaches a waiting poller at once. ``go_offline()`` closes the listener and
every open connection (clients see refused connections and dropped long
polls); ``go_online()`` listens again on the same port.

Tests read ``sent`` and ``calls`` (and ``refused``: the methods asked for
with a wrong or malformed token, answered 401 or 404); a benchmark passes ``record=False`` and
reads ``sent_count`` or sets ``on_send`` (memory stays flat over 10,000s
of messages).

Run by hand: ``python -m tests.fakes.telegram_server --port 8081`` and set
``channels.telegram.baseUrl`` to ``http://127.0.0.1:8081/bot``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.http import stop_listening

__all__ = [
    "DEFAULT_TOKEN", "Call", "FakeTelegram", "SentDocument", "SentMessage", "Upload", "contact", "dice", "location",
    "origin_channel", "origin_chat", "origin_hidden_user", "origin_user", "poll", "sticker", "venue",
]

DEFAULT_TOKEN = "123456789:AAFakeTokenForTests_abcdefghijklmnopq"
MAX_MESSAGE_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024

_PATH_RE = re.compile(r"^/bot(?P<token>[^/]*)/(?P<method>[A-Za-z]+)$")
_FILE_PATH_RE = re.compile(r"^/file/bot(?P<token>[^/]*)/(?P<path>.+)$")
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # what getFile lets a bot download
_TOKEN_RE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_MENTION_RE = re.compile(r"@[A-Za-z0-9_]{5,32}")
# Fields whose form value is JSON text (PTB json-dumps every non-str value).
_JSON_FIELDS = frozenset(
    {"reply_parameters", "allowed_updates", "entities", "link_preview_options", "reply_markup", "commands", "scope"}
)
_STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class SentMessage:
    """One ``sendMessage`` the fake accepted."""

    chat_id: int
    text: str  # as the chat shows it: with parse_mode=HTML, without the tags (params["text"] has them)
    message_id: int
    reply_to: int | None = None
    parse_mode: str | None = None
    message_thread_id: int | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SentDraft:
    """One ``sendMessageDraft`` the fake accepted: a reply being written,
    shown in a private chat until the message itself comes."""

    chat_id: int
    draft_id: int
    text: str  # as shown: with parse_mode=HTML, without the tags
    parse_mode: str | None = None
    message_thread_id: int | None = None


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart request."""

    filename: str
    data: bytes = field(repr=False)
    content_type: str


@dataclass(frozen=True)
class SentDocument:
    """One ``sendDocument`` the fake accepted."""

    chat_id: int
    message_id: int
    filename: str
    data: bytes = field(repr=False)
    mime_type: str
    caption: str | None = None  # as the chat shows it: with parse_mode=HTML, without the tags
    reply_to: int | None = None
    message_thread_id: int | None = None
    parse_mode: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # as sent, without the file


@dataclass(frozen=True)
class Call:
    """Any request that reached a method (accepted or failed)."""

    method: str
    params: dict[str, Any]
    status: int


@dataclass(frozen=True)
class _File:
    file_id: str
    file_unique_id: str
    data: bytes = field(repr=False)
    path: str


@dataclass
class _Failure:
    status: int
    retry_after: int | None
    description: str | None
    after: int = 0  # calls to let through first


def utf16_len(text: str) -> int:
    """Telegram counts text lengths and entity offsets in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_HTML_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
    "blockquote", "tg-emoji",
}
_HTML_TOKEN = re.compile(r"<(/?)([^\s>/]*)([^>]*)>|&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot);|[<>&]")


class EntityError(ValueError):
    """A ``parse_mode=HTML`` text Telegram would refuse; the message is Telegram's."""


def parse_html(text: str) -> str:
    """The visible text of a ``parse_mode=HTML`` message, checked as
    Telegram checks it: only its tags, each closed in order, ``a`` with an
    ``href``, nothing inside ``code`` and only ``code`` inside ``pre``, no
    quote inside a quote, and every other ``<``, ``>`` and ``&`` written as
    an entity. Raises :class:`EntityError` with Telegram's wording."""
    out: list[str] = []
    stack: list[str] = []
    pos = 0
    for m in _HTML_TOKEN.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        offset = len(text[: m.start()].encode())
        where = f"at byte offset {offset}"
        if m.group(0) in "<>&":
            if m.group(0) == "<":
                raise EntityError(f"Bad Request: can't parse entities: Unsupported start tag \"\" {where}")
            out.append(m.group(0))  # Telegram lets a bare ">" or "&" through
        elif m.group(4) is not None:
            ref = m.group(4)
            out.append(chr(int(ref[2:], 16)) if ref.startswith("#x") else chr(int(ref[1:])) if ref[0] == "#"
                       else {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}[ref])
        elif m.group(1):
            name = m.group(2).lower()
            if not stack or stack[-1] != name:
                raise EntityError(f"Bad Request: can't parse entities: Unexpected end tag {where}")
            stack.pop()
        else:
            name, attrs = m.group(2).lower(), m.group(3)
            if name not in _HTML_TAGS:
                raise EntityError(f"Bad Request: can't parse entities: Unsupported start tag \"{name}\" {where}")
            if name == "a" and "href=" not in attrs:
                raise EntityError(f"Bad Request: can't parse entities: Can't find href attribute {where}")
            inside = stack[-1] if stack else ""
            if inside == "code" or (inside == "pre" and name != "code") or (name == "blockquote" and "blockquote" in stack):
                raise EntityError(f"Bad Request: can't parse entities: Can't nest \"{name}\" in \"{inside}\" {where}")
            stack.append(name)
    if stack:
        raise EntityError(
            f"Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"{stack[-1]}\""
        )
    out.append(text[pos:])
    return "".join(out)


# An origin's ``date`` (when the source message was sent, Unix time): a
# minute ago unless given.


# The accounts Telegram puts in ``from`` of a message sent on behalf of a
# chat (Bot API: Message.from): the same for every group and channel.
_ANONYMOUS_ADMIN: dict[str, Any] = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
_CHANNEL_BOT: dict[str, Any] = {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"}


def anonymous_admin(group_id: int, title: str) -> dict[str, Any]:
    """``sender_chat`` of a message an anonymous admin sent: the group itself."""
    return {"id": group_id, "type": "supergroup", "title": title}


def as_channel(channel_id: int, title: str) -> dict[str, Any]:
    """``sender_chat`` of a message a member sent as one of their channels."""
    return {"id": channel_id, "type": "channel", "title": title}


def origin_user(user_id: int, first_name: str, last_name: str | None = None, *, date: int | None = None
                ) -> dict[str, Any]:
    """A MessageOriginUser: the source message was sent by this user."""
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
    if last_name:
        user["last_name"] = last_name
    return {"type": "user", "date": date or int(time.time()) - 60, "sender_user": user}


def origin_hidden_user(name: str, *, date: int | None = None) -> dict[str, Any]:
    """A MessageOriginHiddenUser: a user who hides their account in forwards."""
    return {"type": "hidden_user", "date": date or int(time.time()) - 60, "sender_user_name": name}


def origin_chat(chat_id: int, title: str, signature: str | None = None, *, date: int | None = None) -> dict[str, Any]:
    """A MessageOriginChat: sent on behalf of a group (an anonymous admin)."""
    origin: dict[str, Any] = {"type": "chat", "date": date or int(time.time()) - 60,
                              "sender_chat": {"id": chat_id, "type": "supergroup", "title": title}}
    if signature:
        origin["author_signature"] = signature
    return origin


def origin_channel(chat_id: int, title: str, message_id: int, signature: str | None = None, *,
                   date: int | None = None) -> dict[str, Any]:
    """A MessageOriginChannel: a channel's post."""
    origin: dict[str, Any] = {"type": "channel", "date": date or int(time.time()) - 60, "message_id": message_id,
                              "chat": {"id": chat_id, "type": "channel", "title": title}}
    if signature:
        origin["author_signature"] = signature
    return origin


# What an ExternalReplyInfo carries of the source message's media (Bot API shapes).
_EXTERNAL_MEDIA: dict[str, Any] = {
    "photo": [{"file_id": "AgACAgIAAxkBAAIextph", "file_unique_id": "AQADext1", "width": 90, "height": 60,
               "file_size": 1200}],
    "video": {"file_id": "BAACAgIAAxkBAAIextvi", "file_unique_id": "AQADext2", "width": 640, "height": 360,
              "duration": 12},
    "document": {"file_id": "BQACAgIAAxkBAAIextdo", "file_unique_id": "AQADext3", "file_name": "plan.pdf",
                 "mime_type": "application/pdf"},
    "voice": {"file_id": "AwACAgIAAxkBAAIextvo", "file_unique_id": "AQADext4", "duration": 4,
              "mime_type": "audio/ogg"},
    "poll": {"id": "5012", "question": "Lunch at noon?", "options": [
        {"persistent_id": "0", "text": "yes", "voter_count": 3}, {"persistent_id": "1", "text": "no", "voter_count": 1}],
        "total_voter_count": 4, "is_closed": False, "is_anonymous": True, "type": "regular",
        "allows_multiple_answers": False, "allows_revoting": True, "members_only": False},
}


# What users share instead of typing (Bot API shapes), for ``push_media(kind, content=...)``.


def location(latitude: float, longitude: float, *, live_period: int | None = None) -> dict[str, Any]:
    """A Location; ``live_period`` (seconds) for a live one."""
    loc: dict[str, Any] = {"latitude": latitude, "longitude": longitude}
    if live_period is not None:
        loc |= {"live_period": live_period, "heading": 90, "horizontal_accuracy": 12.5}
    return loc


def venue(title: str, address: str, latitude: float = 52.5, longitude: float = 13.4) -> dict[str, Any]:
    """A Venue (a message with one carries its ``location`` too)."""
    return {"location": location(latitude, longitude), "title": title, "address": address,
            "foursquare_id": "4b0588a3f964a520b1d322e3"}


def contact(phone_number: str, first_name: str, last_name: str | None = None, user_id: int | None = None
            ) -> dict[str, Any]:
    card: dict[str, Any] = {"phone_number": phone_number, "first_name": first_name}
    if last_name:
        card["last_name"] = last_name
    if user_id is not None:
        card["user_id"] = user_id
    return card


def poll(question: str, options: list[str], *, quiz: bool = False) -> dict[str, Any]:
    """A Poll as a user sends it (``type``: regular or quiz)."""
    shape: dict[str, Any] = {
        "id": "5012345678901234567", "question": question,
        "options": [{"persistent_id": str(i), "text": o, "voter_count": 0} for i, o in enumerate(options)],
        "total_voter_count": 0, "is_closed": False, "is_anonymous": True, "type": "quiz" if quiz else "regular",
        "allows_multiple_answers": False, "allows_revoting": not quiz, "members_only": False,
    }
    if quiz:
        shape["correct_option_ids"] = [0]
    return shape


def dice(emoji: str = "🎲", value: int = 4) -> dict[str, Any]:
    return {"emoji": emoji, "value": value}


def sticker(emoji: str | None = "👍") -> dict[str, Any]:
    """A Sticker; ``emoji`` None for one without."""
    shape: dict[str, Any] = {"file_id": "CAACAgIAAxkBAAIst1", "file_unique_id": "AgADst1", "width": 512, "height": 512,
                             "is_animated": False, "is_video": False, "type": "regular"}
    if emoji is not None:
        shape["emoji"] = emoji
    return shape


_MEDIA: dict[str, Any] = {
    "photo": [{"file_id": "ph1", "file_unique_id": "u1", "width": 90, "height": 60}],
    "sticker": sticker(),
    "voice": {"file_id": "vo1", "file_unique_id": "u3", "duration": 3, "mime_type": "audio/ogg"},
    "video": {"file_id": "vi1", "file_unique_id": "u4", "width": 640, "height": 360, "duration": 12},
    "video_note": {"file_id": "vn1", "file_unique_id": "u5", "length": 240, "duration": 8},
    "animation": {"file_id": "an1", "file_unique_id": "u6", "width": 320, "height": 240, "duration": 2},
    "audio": {"file_id": "au1", "file_unique_id": "u7", "duration": 180, "performer": "Nina", "title": "Song"},
    "location": location(52.52, 13.405),
    "venue": venue("Café Kranzler", "Kurfürstendamm 18"),
    "contact": contact("+4915112345678", "Ana", "Ruiz"),
    "poll": poll("Lunch?", ["pizza", "sushi"]),
    "dice": dice(),
}


def _error(
    status: int, description: str | None = None, retry_after: int | None = None, *, migrate_to: int | None = None
) -> web.Response:
    if description is None:
        description = f"Too Many Requests: retry after {retry_after}" if status == 429 else _STATUS_TEXT.get(status, "Error")
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    if migrate_to is not None:
        body["parameters"] = {"migrate_to_chat_id": migrate_to}
    return web.json_response(body, status=status)


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _as_int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class FakeTelegram:
    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "myclaw_bot",
        strict_chats: bool = True,
        record: bool = True,
        first_id: int = 1,
    ) -> None:
        """``first_id``: the first update id and message id (by hand, a
        fresh fake must not repeat the ids of the last run's: the gateway
        would take its messages for redeliveries it already answered)."""
        self.token = token
        self.bot_username = bot_username
        self.bot_id = int(token.split(":", 1)[0]) if _TOKEN_RE.match(token) else 1
        self.bot_user = {"id": self.bot_id, "is_bot": True, "first_name": "myclaw", "username": bot_username}
        # user id -> the IETF tag their client is set to ("zh-hans"): the
        # ``language_code`` of their User object in every message they send.
        self.user_languages: dict[int, str] = {}
        # strict: sendMessage to a chat no update came from fails, as it does
        # on Telegram; catches a reply addressed to a user id in a group.
        self.strict_chats = strict_chats
        # record=False (benchmarks): keep counts only, so the fake's memory
        # stays flat; ``on_send`` still sees every accepted message.
        self.record = record
        self.on_send: Callable[[SentMessage], None] | None = None
        self.sent_count = 0
        self.sent: list[SentMessage] = []
        self.drafts: list[SentDraft] = []
        self.documents: list[SentDocument] = []
        # The Bot API's "up to 50 MB" for a bot's files (a local Bot API
        # server takes 2000 MB): larger, 413 as Telegram answers it.
        self.max_upload_bytes = 50_000_000
        self.on_document: Callable[[SentDocument], None] | None = None
        self.calls: list[Call] = []
        self.counts: Counter[str] = Counter()
        self.refused: list[str] = []  # methods asked for with a wrong token (401/404)
        self.port = 0
        self._updates: deque[dict[str, Any]] = deque()
        self._every_update: list[dict[str, Any]] = []  # record=True: for redeliver()
        self._update_ids = itertools.count(first_id)
        self._message_ids = itertools.count(first_id)
        self._chats: dict[int, dict[str, Any]] = {}
        self._migrated: dict[int, int] = {}  # a group upgraded to a supergroup -> the supergroup's id
        # Chats numbering their messages from 1 on their own, as supergroups
        # do (the supergroups migrate_group makes); the others share the
        # account's counter, as private chats and basic groups do.
        self._own_ids: dict[int, Iterator[int]] = {}
        self._messages: set[tuple[int, int]] = set()
        self._pushed: dict[tuple[int, int], dict[str, Any]] = {}  # users' messages, for push_edit
        self._last_bot_message: dict[int, dict[str, Any]] = {}
        self._allowed_updates: frozenset[str] | None = None
        self._files: dict[str, _File] = {}  # file_id -> the file
        self._file_ids = itertools.count(1)
        self.file_downloads: list[str] = []  # file_path of every file served
        self.file_requests: list[str] = []  # file_path of every download asked for, served or not yet
        self._file_gates: dict[str, asyncio.Event] = {}  # file_path -> what its download waits for
        self.last_update_id = 0
        self._failures: dict[str, deque[_Failure]] = {}
        self._cuts: dict[str, deque[tuple[bool, asyncio.Event]]] = {}  # method -> cut_next's, in order
        self._slow: dict[str, deque[list[Any]]] = {}  # method -> slow_next's [after, answer], in order
        self._closing = asyncio.Event()  # set by stop: held calls end
        self._wake = asyncio.Event()
        self._poll_generation = 0
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.online = False
        self._revoked = False

    # -- lifecycle --------------------------------------------------------------
    async def start(self, port: int = 0) -> FakeTelegram:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await self._listen(port)
        return self

    async def stop(self) -> None:
        self.online = False
        if self._runner is not None:
            runner, self._runner, self._site = self._runner, None, None
            self._wake.set()
            self._closing.set()
            for gate in self._file_gates.values():  # a held download must not hold up the shutdown
                gate.set()
            await stop_listening(runner)
            await runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _listen(self, port: int) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", port)
        await self._site.start()
        self.port = self._site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.online = True

    async def go_offline(self) -> None:
        """Simulate network loss: new connections are refused and open ones
        (including a waiting long poll) are cut without a response."""
        if not self.online or self._runner is None:
            return
        self.online = False
        if self._site is not None:
            await stop_listening(self._runner)
            self._site = None
        for conn in self._runner.server.connections if self._runner.server else []:
            conn.force_close()
        self._wake.set()  # waiting long polls return (into closed sockets)

    async def go_online(self) -> None:
        if self.online or self._runner is None:
            return
        await self._listen(self.port)

    @property
    def base_url(self) -> str:
        """What to put in ``channels.telegram.baseUrl``."""
        return f"http://127.0.0.1:{self.port}/bot"

    # -- scripting ------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        status: int,
        times: int = 1,
        retry_after: int | None = None,
        description: str | None = None,
        after: int = 0,
    ) -> None:
        """The next ``times`` calls of ``method`` get an error response,
        after ``after`` calls go through (a split reply failing midway)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        q = self._failures.setdefault(method.lower(), deque())
        q.extend(_Failure(status, retry_after, description, after if i == 0 else 0) for i in range(times))

    def cut_next(self, method: str, *, accepted: bool = False) -> asyncio.Event:
        """The next call of ``method`` is never answered, as a gateway
        killed mid-send sees it: held until the fake stops (then 502), and
        carried out first when ``accepted`` (Telegram took it, the answer
        never came back). Returns an event set once the call arrived."""
        arrived = asyncio.Event()
        self._cuts.setdefault(method.lower(), deque()).append((accepted, arrived))
        return arrived

    def uncut(self, method: str | None = None) -> int:
        """Call off the cuts ``cut_next`` aimed at ``method`` (every method:
        None) that no call reached yet (a walk's kill came first); returns
        how many. A call already held stays held."""
        methods = [method.lower()] if method is not None else list(self._cuts)
        return sum(len(self._cuts.pop(m, ())) for m in methods)

    def slow_next(self, method: str, *, after: int = 0) -> asyncio.Event:
        """The next call of ``method`` (after ``after`` answered at once) is
        carried out at once, its answer held until the returned event is
        set (or the fake stops)."""
        answer = asyncio.Event()
        self._slow.setdefault(method.lower(), deque()).append([after, answer])
        return answer

    def revoke_token(self) -> None:
        """From now on every request is 401 (the token was revoked in BotFather)."""
        self._revoked = True
        self._wake.set()

    def push_text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        username: str | None = None,
        first_name: str | None = None,
        chat_type: str = "private",
        entities: list[dict[str, Any]] | None = None,
        reply_to_bot: bool = False,
        mention: bool = False,
        message_thread_id: int | None = None,
        topic: bool = False,
        reply_to: dict[str, Any] | None = None,
        quote: str | None = None,
        forward_origin: dict[str, Any] | None = None,
        automatic_forward: bool = False,
        sender_chat: dict[str, Any] | None = None,
        without_sender: bool = False,
    ) -> dict[str, Any]:
        """Queue a text message update as Telegram would build it; returns
        the message object (``["message_id"]`` for reply assertions).
        ``reply_to``: a message pushed before (its returned object), which
        this one replies to; ``quote``: the part of it the user quoted
        (Telegram's ``quote``, which must be a piece of its text).
        ``forward_origin`` (:func:`origin_user` and its siblings): the
        message is a forward of one sent earlier, by that origin;
        ``automatic_forward``: a channel's post Telegram mirrored into its
        linked discussion group (``is_automatic_forward``);
        ``sender_chat`` (:func:`anonymous_admin`, :func:`as_channel`): sent
        on behalf of a chat, ``from`` then Telegram's placeholder account
        shared by every such sender (``user_id`` is ignored);
        ``without_sender``: neither ``from`` nor ``sender_chat`` (the Bot
        API leaves ``from`` empty only in channels: a malformed update)."""
        if mention:
            text = f"@{self.bot_username} {text}"
        if entities is None:
            # Telegram recognises @mentions server-side and sends entities.
            entities = [
                {"type": "mention", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
                for m in _MENTION_RE.finditer(text)
            ]
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}"}
        if username:
            user["username"] = username
        if sender_chat is not None:
            user = dict(_CHANNEL_BOT if sender_chat["type"] == "channel" else _ANONYMOUS_ADMIN)
        if language := self.user_languages.get(user_id):
            user["language_code"] = language
        chat = self._chats.get(chat_id)
        if chat is None or chat["type"] != chat_type:
            if chat_type == "private":
                chat = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
                if username:
                    chat["username"] = username
            else:
                chat = {"id": chat_id, "type": chat_type, "title": f"Group {chat_id}"}
            self._chats[chat_id] = chat
        message_id = self._next_message_id(chat_id)
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if sender_chat is not None:
            message["sender_chat"] = sender_chat
        if without_sender:
            del message["from"]
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
        if forward_origin is not None:
            message["forward_origin"] = forward_origin
            if automatic_forward:
                message["is_automatic_forward"] = True
        if topic:  # a message in a forum topic (then message_thread_id is the topic)
            message["is_topic_message"] = True
        if reply_to_bot:
            message["reply_to_message"] = self._last_bot_message.get(chat_id) or self._bot_message(chat, "(earlier reply)")
        elif reply_to is not None:
            message["reply_to_message"] = {k: v for k, v in reply_to.items() if k != "reply_to_message"}
        if quote is not None:
            replied = str(message["reply_to_message"].get("text") or message["reply_to_message"].get("caption") or "")
            if quote not in replied:
                raise ValueError("Telegram's quote is a piece of the replied-to message")
            message["quote"] = {"text": quote, "position": utf16_len(replied[: replied.index(quote)]), "is_manual": True}
        if self.record:
            self._messages.add((chat_id, message_id))
            self._pushed[(chat_id, message_id)] = message  # the same object _with_media completes
        self.last_update_id = next(self._update_ids)
        self._queue({"update_id": self.last_update_id, "message": message})
        self._wake.set()
        return message

    def push_left(self, chat_id: int, user_id: int, *, by: int | None = None) -> None:
        """The service message of member ``user_id`` leaving group
        ``chat_id`` (a chat pushed to before), or removed by ``by``."""
        left: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        actor = left if by is None else {"id": by, "is_bot": False, "first_name": f"User{by}"}
        message = {"message_id": next(self._message_ids), "from": actor, "chat": self._chats[chat_id],
                   "date": int(time.time()), "left_chat_member": left}
        self.last_update_id = next(self._update_ids)
        self._queue({"update_id": self.last_update_id, "message": message})
        self._wake.set()

    def push_bot_removed(self, chat_id: int, by: int, *, status: str = "kicked") -> None:
        """The ``my_chat_member`` update Telegram sends the bot when member
        ``by`` removes it from group ``chat_id`` (a chat pushed to before):
        its status ``kicked``, or ``left``."""
        actor = {"id": by, "is_bot": False, "first_name": f"User{by}"}
        member = {"chat": self._chats[chat_id], "from": actor, "date": int(time.time()),
                  "old_chat_member": {"status": "member", "user": self.bot_user},
                  "new_chat_member": {"status": status, "user": self.bot_user,
                                      **({"until_date": 0} if status == "kicked" else {})}}
        self.last_update_id = next(self._update_ids)
        self._queue({"update_id": self.last_update_id, "my_chat_member": member})
        self._wake.set()

    def migrate_group(self, old_id: int, new_id: int, user_id: int) -> None:
        """Upgrade group ``old_id`` (a chat pushed to before) to supergroup
        ``new_id``, by user ``user_id``: the two service messages Telegram
        sends (the supergroup's ``migrate_from_chat_id`` first, then the old
        group's ``migrate_to_chat_id``), and from now on a send to
        ``old_id`` is refused with the new id."""
        old = self._chats[old_id]
        new = self._chats[new_id] = {"id": new_id, "type": "supergroup", "title": old.get("title", f"Group {new_id}")}
        self._migrated[old_id] = new_id
        self._own_ids[new_id] = itertools.count(1)  # a supergroup's own ids: the old group's come back
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        for chat, field, value in ((new, "migrate_from_chat_id", old_id), (old, "migrate_to_chat_id", new_id)):
            message = {"message_id": self._next_message_id(chat["id"]), "from": user, "chat": chat, "date": int(time.time()),
                       field: value}
            self.last_update_id = next(self._update_ids)
            self._queue({"update_id": self.last_update_id, "message": message})
        self._wake.set()

    def push_external_reply(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        origin: dict[str, Any],
        original: str = "",
        quote: str | None = None,
        media: str | None = None,
        source_chat: dict[str, Any] | None = None,
        source_message_id: int | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        """Queue a reply to a message of another chat or channel, as Telegram
        sends it: ``external_reply`` (an ExternalReplyInfo: ``origin``, from
        :func:`origin_user` and its siblings; the source ``chat`` and
        ``message_id`` when the bot may see that chat; the media it holds,
        ``media``: photo, video, document, voice or poll; never its text),
        and ``quote``, which must be a piece of ``original``, the text or
        caption the source message had (the fake's own record: it is not
        sent). ``kw`` as :meth:`push_text`."""
        message = self.push_text(chat_id, user_id, text, **kw)
        info: dict[str, Any] = {"origin": origin}
        if source_chat is not None:
            info["chat"] = source_chat
            if source_message_id is not None:
                info["message_id"] = source_message_id
        if media is not None:
            info[media] = _EXTERNAL_MEDIA[media]
        message["external_reply"] = info
        if quote is not None:
            if quote not in original:
                raise ValueError("Telegram's quote is a piece of the replied-to message")
            message["quote"] = {"text": quote, "position": utf16_len(original[: original.index(quote)]),
                                "is_manual": True}
        return message

    def _queue(self, update: dict[str, Any]) -> None:
        self._updates.append(update)
        if self.record:
            self._every_update.append(update)

    def push_edit(self, chat_id: int, message_id: int, text: str, *, mention: bool = False) -> dict[str, Any]:
        """Queue an ``edited_message`` update: the user changed the text (or
        caption) of their message ``message_id`` (pushed earlier),
        as Telegram sends it: the whole message with the new text, its
        entities, and ``edit_date``. Returns the edited message."""
        original = self._pushed.get((chat_id, message_id))
        if original is None:
            raise KeyError(f"no message {message_id} was pushed in chat {chat_id}")
        if mention:
            text = f"@{self.bot_username} {text}"
        # A photo's, a voice message's or a document's words are its caption
        # (one added to media sent without one, too).
        words, marks = ("caption", "caption_entities") if "text" not in original else ("text", "entities")
        edited = {k: v for k, v in original.items() if k != marks}
        edited[words] = text
        edited["edit_date"] = int(time.time())
        entities = [
            {"type": "mention", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
            for m in _MENTION_RE.finditer(text)
        ]
        if entities:
            edited[marks] = entities
        self._pushed[(chat_id, message_id)] = edited
        self.last_update_id = next(self._update_ids)
        self._queue({"update_id": self.last_update_id, "edited_message": edited})
        self._wake.set()
        return edited

    def push_media(
        self,
        chat_id: int,
        user_id: int,
        kind: str,
        *,
        content: Any = None,
        caption: str | None = None,
        chat_type: str = "private",
        reply_to_bot: bool = False,
        forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a message of ``kind`` (photo, sticker, voice, video,
        video_note, animation, audio, location, venue, contact, poll, dice)
        as Telegram sends it, with a sample of that kind or ``content``
        (:func:`location`, :func:`poll`, ...); a venue carries its location
        too. Files here cannot be downloaded (``push_photo`` for that).
        Returns the message object."""
        message = self.push_text(chat_id, user_id, caption or "x", chat_type=chat_type, reply_to_bot=reply_to_bot,
                                 entities=None if caption else [], forward_origin=forward_origin)
        text = message.pop("text")
        if caption:
            message["caption"] = text
            if "entities" in message:
                message["caption_entities"] = message.pop("entities")
        message[kind] = content if content is not None else _MEDIA[kind]
        if kind == "venue":
            message["location"] = message[kind]["location"]
        return message

    def add_file(self, data: bytes, folder: str = "photos", suffix: str = "jpg") -> dict[str, Any]:
        """Keep ``data`` as a file users sent; returns its ``file_id``,
        ``file_unique_id`` and ``file_size`` (for a PhotoSize or Document)."""
        n = next(self._file_ids)
        unique = f"AQADfake{n:06d}"
        file = _File(f"AgACAgIAAxkBAAI{unique}", unique, data, f"{folder}/file_{n}.{suffix}")
        self._files[file.file_id] = file
        return {"file_id": file.file_id, "file_unique_id": unique, "file_size": len(data)}

    def hold_file(self, file_id: str) -> asyncio.Event:
        """Downloads of ``file_id`` (its bytes, after ``getFile``) wait until
        the returned event is set: a slow download the test ends."""
        return self._file_gates.setdefault(self._files[file_id].path, asyncio.Event())

    def push_photo(
        self,
        chat_id: int,
        user_id: int,
        sizes: list[bytes],
        *,
        caption: str | None = None,
        chat_type: str = "private",
        mention: bool = False,
        reply_to_bot: bool = False,
        file_size_known: bool = True,
        media_group_id: str | None = None,
        forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a photo message: ``sizes``, smallest first, are the
        versions Telegram keeps of it (``photo`` is that list of PhotoSize);
        ``caption`` with its entities as Telegram sends them;
        ``media_group_id``: a part of that album; ``forward_origin``: a
        forwarded photo (see :meth:`push_text`)."""
        photo = []
        for i, data in enumerate(sizes):
            size = {**self.add_file(data), "width": 90 * (i + 1), "height": 60 * (i + 1)}
            if not file_size_known:
                del size["file_size"]
            photo.append(size)
        message = self._with_media(chat_id, user_id, "photo", photo, caption, chat_type, mention, reply_to_bot,
                                   forward_origin=forward_origin)
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        return message

    def push_document(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        *,
        mime_type: str,
        file_name: str = "file",
        caption: str | None = None,
        chat_type: str = "private",
        mention: bool = False,
        forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a file sent as a document (not compressed as a photo)."""
        doc = {**self.add_file(data, "documents", file_name.rpartition(".")[2] or "bin"),
               "file_name": file_name, "mime_type": mime_type}
        return self._with_media(chat_id, user_id, "document", doc, caption, chat_type, mention, False,
                                forward_origin=forward_origin)

    def push_voice(
        self, chat_id: int, user_id: int, data: bytes, *, chat_type: str = "private", reply_to_bot: bool = False,
        caption: str | None = None, forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a voice message (OGG/Opus, as Telegram records them);
        ``forward_origin``: someone else's, forwarded."""
        voice = {**self.add_file(data, "voice", "oga"), "duration": 3, "mime_type": "audio/ogg"}
        return self._with_media(chat_id, user_id, "voice", voice, caption, chat_type, False, reply_to_bot,
                                forward_origin=forward_origin)

    def push_audio(
        self, chat_id: int, user_id: int, data: bytes, *, title: str | None = None, performer: str | None = None,
        file_name: str | None = None, mime_type: str = "audio/mpeg", caption: str | None = None,
        chat_type: str = "private", mention: bool = False, forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue an audio file sent as music (Telegram's ``audio``: a player
        shows its ``title`` and ``performer``, from the file's tags), as a
        client sends an mp3 or m4a; ``forward_origin``: someone else's."""
        suffix = (file_name or "").rpartition(".")[2] or "mp3"
        audio: dict[str, Any] = {**self.add_file(data, "music", suffix), "duration": 180, "mime_type": mime_type}
        for key, value in (("title", title), ("performer", performer), ("file_name", file_name)):
            if value is not None:
                audio[key] = value
        return self._with_media(chat_id, user_id, "audio", audio, caption, chat_type, mention, False,
                                forward_origin=forward_origin)

    def _with_media(
        self, chat_id: int, user_id: int, kind: str, media: Any, caption: str | None, chat_type: str,
        mention: bool, reply_to_bot: bool, *, forward_origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        text = caption if caption is not None else "x"
        message = self.push_text(chat_id, user_id, text, chat_type=chat_type, mention=mention and caption is not None,
                                 reply_to_bot=reply_to_bot, entities=None if caption is not None else [],
                                 forward_origin=forward_origin)
        text = message.pop("text")
        entities = message.pop("entities", None)
        if caption is not None:  # a caption's entities are "caption_entities"
            message["caption"] = text
            if entities:
                message["caption_entities"] = entities
        message[kind] = media
        return message

    def redeliver(self, first_update_id: int) -> int:
        """Offer every update from ``first_update_id`` on again, as Telegram
        does when a bot stopped without confirming them (it crashed): the
        same update ids and messages. Returns how many are pending."""
        again = {u["update_id"]: u for u in self._every_update if u["update_id"] >= first_update_id}
        again.update((u["update_id"], u) for u in self._updates)
        self._updates = deque(again[k] for k in sorted(again))
        self._wake.set()
        return len(self._updates)

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by an ``offset``."""
        return len(self._updates)

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds; checked whenever a request is served."""
        if predicate():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(fut, timeout)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentMessage]:
        await self.wait_until(lambda: self.sent_count >= count, timeout)
        return self.sent

    def _notify(self) -> None:
        for predicate, fut in list(self._waiters):
            if not fut.done() and predicate():
                fut.set_result(None)

    # -- HTTP -----------------------------------------------------------------------
    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.body_exists:
            ctype = request.content_type
            if ctype == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    params.update(body)
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                for k, v in form.items():
                    if isinstance(v, str):
                        params[k] = v
                    elif isinstance(v, web.FileField):
                        params[k] = Upload(v.filename, v.file.read(), v.content_type)
        for key in _JSON_FIELDS & params.keys():
            if isinstance(params[key], str):
                try:
                    params[key] = json.loads(params[key])
                except json.JSONDecodeError:
                    pass  # the method reports it as a bad request
        return params

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        file = _FILE_PATH_RE.match(request.path)
        if file is not None:
            return await self._download(file["token"], file["path"])
        m = _PATH_RE.match(request.path)
        if m is None or not _TOKEN_RE.match(m["token"]):
            self.refused.append(m["method"].lower() if m else request.path)
            return _error(404, "Not Found")
        if m["token"] != self.token or self._revoked:
            self.refused.append(m["method"].lower())
            return _error(401, "Unauthorized")
        method = m["method"].lower()
        handler = self._methods.get(method)
        if handler is None:
            return _error(404, "Not Found")
        try:
            params = await self._params(request)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "Bad Request: can't parse JSON")
        self.counts[method] += 1
        failures = self._failures.get(method)
        if failures and failures[0].after:
            failures[0].after -= 1
        elif failures:
            f = failures.popleft()
            if self.record:
                self.calls.append(Call(method, params, f.status))
            self._notify()
            return _error(f.status, f.description, f.retry_after)
        cuts = self._cuts.get(method)
        if cuts:
            accepted, arrived = cuts.popleft()
            if accepted:
                await handler(self, params)
                self._notify()
            arrived.set()
            await self._closing.wait()
            return _error(502, "Bad Gateway")
        response: web.StreamResponse = await handler(self, params)
        if self.record:
            self.calls.append(Call(method, params, response.status))
        self._notify()
        slow = self._slow.get(method)
        if slow and slow[0][0]:
            slow[0][0] -= 1
        elif slow:
            _, answer = slow.popleft()
            waits = [asyncio.ensure_future(answer.wait()), asyncio.ensure_future(self._closing.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        return response

    async def _download(self, token: str, path: str) -> web.StreamResponse:
        """``GET /file/bot<token>/<file_path>``: the file's bytes."""
        if token != self.token or self._revoked:
            return _error(401, "Unauthorized")
        file = next((f for f in self._files.values() if f.path == path), None)
        if file is None:
            return _error(404, "Not Found")
        self.file_requests.append(path)
        self._notify()
        gate = self._file_gates.get(path)
        if gate is not None:
            await gate.wait()
        self.file_downloads.append(path)
        self._notify()
        return web.Response(body=file.data, content_type="application/octet-stream")

    # -- methods ----------------------------------------------------------------------
    async def _get_file(self, params: dict[str, Any]) -> web.Response:
        file = self._files.get(str(params.get("file_id") or ""))
        if file is None:
            return _error(400, "Bad Request: invalid file_id")
        if len(file.data) > MAX_DOWNLOAD_BYTES:
            return _error(400, "Bad Request: file is too big")
        return _ok({"file_id": file.file_id, "file_unique_id": file.file_unique_id,
                    "file_size": len(file.data), "file_path": file.path})

    async def _get_me(self, params: dict[str, Any]) -> web.Response:
        return _ok(
            {
                **self.bot_user,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
                "can_connect_to_business": False,
                "has_main_web_app": False,
            }
        )

    async def _delete_webhook(self, params: dict[str, Any]) -> web.Response:
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self._updates.clear()
        return web.json_response({"ok": True, "result": True, "description": "Webhook is already deleted"})

    async def _get_webhook_info(self, params: dict[str, Any]) -> web.Response:
        return _ok({"url": "", "has_custom_certificate": False, "pending_update_count": len(self._updates)})

    async def _true(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            # -N: keep the last N updates and forget the rest.
            while len(self._updates) > -offset:
                self._updates.popleft()
            return
        while self._updates and self._updates[0]["update_id"] < offset:
            self._updates.popleft()

    def _select(self, limit: int) -> list[dict[str, Any]]:
        allowed = self._allowed_updates
        out: list[dict[str, Any]] = []
        for upd in self._updates:
            if allowed is None or any(k in allowed for k in upd if k != "update_id"):
                out.append(upd)
                if len(out) >= limit:
                    break
        return out

    async def _get_updates(self, params: dict[str, Any]) -> web.Response:
        offset = _as_int(params.get("offset")) or 0
        limit = min(max(_as_int(params.get("limit")) or 100, 1), 100)
        timeout = max(_as_int(params.get("timeout")) or 0, 0)
        if "allowed_updates" in params:
            au = params["allowed_updates"]
            # As on Telegram: the setting sticks until changed; [] means all.
            self._allowed_updates = frozenset(au) if au else None
        self._confirm(offset)
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake.set()  # an older waiting poller gets its 409
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self._revoked:
                return _error(401, "Unauthorized")
            batch = self._select(limit)
            remaining = deadline - loop.time()
            if batch or remaining <= 0:
                return _ok(batch)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return _ok([])
            if generation != self._poll_generation:
                return _error(409)
            if not self.online:
                # Offline or stopping: this connection is already cut.
                return _error(502)

    def _next_message_id(self, chat_id: int) -> int:
        own = self._own_ids.get(chat_id)
        return next(own) if own is not None else next(self._message_ids)

    def _bot_message(self, chat: dict[str, Any], text: str, thread_id: int | None = None) -> dict[str, Any]:
        message_id = self._next_message_id(chat["id"])
        msg: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
        if self.record:
            self._messages.add((chat["id"], message_id))
        self._last_bot_message[chat["id"]] = msg
        return msg

    def _target(self, params: dict[str, Any]) -> tuple[dict[str, Any], int | None, int | None] | web.Response:
        """The chat, replied message and topic a send names, or the error
        Telegram answers."""
        chat_id = _as_int(params.get("chat_id"))
        if chat_id is None:
            return _error(400, "Bad Request: chat_id is empty" if not params.get("chat_id") else "Bad Request: chat not found")
        if chat_id in self._migrated:
            return _error(400, "Bad Request: group chat was upgraded to a supergroup chat",
                          migrate_to=self._migrated[chat_id])
        chat = self._chats.get(chat_id)
        if chat is None:
            if self.strict_chats:
                return _error(400, "Bad Request: chat not found")
            chat = self._chats[chat_id] = {"id": chat_id, "type": "private", "first_name": f"User{chat_id}"}
        reply_to: int | None = None
        allow_without_reply = False
        rp = params.get("reply_parameters")
        if isinstance(rp, dict):
            reply_to = _as_int(rp.get("message_id"))
            allow_without_reply = bool(rp.get("allow_sending_without_reply"))
        elif rp is not None:
            return _error(400, "Bad Request: can't parse reply parameters JSON object")
        elif params.get("reply_to_message_id") is not None:
            reply_to = _as_int(params["reply_to_message_id"])
            allow_without_reply = str(params.get("allow_sending_without_reply", "")).lower() == "true"
        known = not self.record or (chat_id, reply_to) in self._messages
        if reply_to is not None and not known and not allow_without_reply:
            return _error(400, "Bad Request: message to be replied not found")
        return chat, reply_to, _as_int(params.get("message_thread_id"))

    async def _send_message(self, params: dict[str, Any]) -> web.Response:
        text = params.get("text")
        target = self._target(params)
        if isinstance(target, web.Response):
            return target
        chat, reply_to, thread_id = target
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        parse_mode = params.get("parse_mode") or None
        shown = _shown(text, parse_mode)
        if isinstance(shown, web.Response):
            return shown
        text = shown
        if not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_MESSAGE_LENGTH:
            return _error(400, "Bad Request: message is too long")
        msg = self._bot_message(chat, text, thread_id)
        sent = SentMessage(
            chat_id=chat["id"],
            text=text,
            message_id=msg["message_id"],
            reply_to=reply_to,
            parse_mode=parse_mode,
            message_thread_id=thread_id,
            params=params,
        )
        self.sent_count += 1
        if self.record:
            self.sent.append(sent)
        if self.on_send is not None:
            self.on_send(sent)
        return _ok(msg)

    async def _send_message_draft(self, params: dict[str, Any]) -> web.Response:
        """As Bot API 10.0: a private chat only, a non-zero ``draft_id``,
        the text optional (empty: a "Thinking..." placeholder), parsed and
        counted as a message's."""
        target = self._target(params)
        if isinstance(target, web.Response):
            return target
        chat, _, thread_id = target
        if chat.get("type") != "private":
            return _error(400, "Bad Request: message drafts can be sent only to private chats")
        draft_id = _as_int(params.get("draft_id"))
        if not draft_id:
            return _error(400, "Bad Request: draft_id must be non-zero")
        text = params.get("text") or ""
        if not isinstance(text, str):
            return _error(400, "Bad Request: text must be a string")
        parse_mode = params.get("parse_mode") or None
        shown = _shown(text, parse_mode)
        if isinstance(shown, web.Response):
            return shown
        text = shown
        if utf16_len(text) > MAX_MESSAGE_LENGTH:
            return _error(400, "Bad Request: message is too long")
        if self.record:
            self.drafts.append(SentDraft(chat["id"], draft_id, text, parse_mode, thread_id))
        return _ok(True)

    async def _send_document(self, params: dict[str, Any]) -> web.Response:
        target = self._target(params)
        if isinstance(target, web.Response):
            return target
        chat, reply_to, thread_id = target
        doc = params.get("document")
        if not isinstance(doc, Upload):  # a file_id or URL: none is known here
            return _error(400, "Bad Request: wrong file identifier/HTTP URL specified")
        if not doc.data:
            return _error(400, "Bad Request: file must be non-empty")
        if len(doc.data) > self.max_upload_bytes:
            return _error(413, "Request Entity Too Large")
        caption = params.get("caption") or None
        parse_mode = params.get("parse_mode") or None
        if parse_mode is not None and parse_mode not in ("Markdown", "MarkdownV2", "HTML"):
            return _error(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        if caption is not None and parse_mode == "HTML":
            # As for a message: the caption is what the markup shows, counted on that.
            try:
                caption = parse_html(caption)
            except EntityError as exc:
                return _error(400, str(exc))
        if caption is not None and utf16_len(caption) > MAX_CAPTION_LENGTH:
            return _error(400, "Bad Request: message caption is too long")
        msg = self._bot_message(chat, "", thread_id)
        del msg["text"]
        unique = f"AgAD{msg['message_id']:08d}"
        msg["document"] = {
            "file_id": f"BQACAgIAAxkBAAI{unique}",
            "file_unique_id": unique,
            "file_name": doc.filename,
            "mime_type": doc.content_type,
            "file_size": len(doc.data),
        }
        if caption is not None:
            msg["caption"] = caption
        sent = SentDocument(
            chat_id=chat["id"],
            message_id=msg["message_id"],
            filename=doc.filename,
            data=doc.data,
            mime_type=doc.content_type,
            caption=caption,
            reply_to=reply_to,
            message_thread_id=thread_id,
            parse_mode=parse_mode,
            params={k: v for k, v in params.items() if k != "document"},
        )
        if self.record:
            self.documents.append(sent)
        if self.on_document is not None:
            self.on_document(sent)
        return _ok(msg)

    _methods: dict[str, Any] = {
        "getme": _get_me,
        "deletewebhook": _delete_webhook,
        "getwebhookinfo": _get_webhook_info,
        "getupdates": _get_updates,
        "sendmessage": _send_message,
        "sendmessagedraft": _send_message_draft,
        "senddocument": _send_document,
        "getfile": _get_file,
        "sendchataction": _true,
        "setmycommands": _true,
        "deletemycommands": _true,
    }


def _shown(text: str, parse_mode: str | None) -> str | web.Response:
    """What a message's (or draft's) text shows, or Telegram's refusal: as
    Telegram, with ``parse_mode=HTML`` the text the markup shows, whose
    length is what counts."""
    if parse_mode is not None and parse_mode not in ("Markdown", "MarkdownV2", "HTML"):
        return _error(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
    if parse_mode != "HTML":
        return text
    try:
        return parse_html(text)
    except EntityError as exc:
        return _error(400, str(exc))


async def _serve(port: int, token: str) -> None:
    fake = await FakeTelegram(token, strict_chats=False).start(port)
    print(f"fake Telegram Bot API at {fake.base_url}  token {token}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await fake.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Fake Telegram Bot API server")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    args = parser.parse_args()
    asyncio.run(_serve(args.port, args.token))
