"""The Telegram channel: long polling in, ``sendMessage`` out, via
python-telegram-bot's ``Bot``.

Why our own ``getUpdates`` loop instead of ``Application`` and
``Updater.start_polling``:

* PTB's updater stops polling for good on a rejected token and only logs
  it. Here ``start()`` raises :class:`ChannelFatalError` and a rejection
  while running is surfaced through :meth:`TelegramChannel.wait_failed`.
* Backoff, ``RetryAfter`` and confirming the offset on stop are explicit,
  and tests can shorten them (``backoff=``).
* Updates go straight to the bus. Skipping the application's update queue
  and handler dispatch matters at 1,000 chats and hundreds of messages per
  second.

Intake: a message whose picture or recording must be downloaded (agent.vision,
agent.transcription), and an album being gathered, wait in their chat's lane
(channels/lanes.py): the chat's later messages wait behind them, in order,
and other chats go straight on. A text of a chat with nothing pending goes
to the bus at once. A burst of forwards (Telegram sends one update per
forwarded message) is gathered as an album is, into one message, with the
comment the client sends just before it when that is in the same batch: a
text never waits to see whether forwards follow.

Delivery: Telegram confirms every update below the ``offset`` a
``getUpdates`` names, so the offset polling names never passes an update
whose message is not on the bus yet (or dropped on purpose). While a
download is pending that means Telegram keeps offering the updates from it
on, and ``getUpdates`` answers at once instead of long-polling: polling then
asks again as soon as a lane finishes, or every ``hold_poll`` seconds (0.5),
skipping what it already took. So a crash during a download re-delivers that
message (and the ones after it; the gateway ignores those it answered), and a
clean restart re-delivers nothing. (One exception, logged: when 100 updates
already taken sit behind a pending one, a full batch, polling confirms them
rather than stall every chat; a crash then loses what was pending, a clean
stop does not.) At shutdown the gateway calls ``stop_receiving()`` first:
polling stops and pending lanes put their messages on the bus; then it
answers what is on the bus before ``stop()`` confirms the offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import html
import os
import random
import re
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

# PTB 22 reads time periods (``RetryAfter.retry_after``) as timedelta when this
# opt-in is set, and otherwise warns with PTBDeprecationWarning every time
# a 429 arrives -- even inside its own exception constructor.
os.environ.setdefault("PTB_TIMEDELTA", "true")

import aiohttp
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    Chat,
    InputFile,
    Message,
    MessageEntity,
    MessageOrigin,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Poll,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ChatType, ParseMode, UpdateType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import BaseRequest, RequestData

from channels.base import BaseChannel, ChannelFatalError, DeliveryError, FileTooLarge, rest_of
from channels.documents import document_placeholder
from channels.lanes import Job, Lanes
from channels.markdown import might_have_markup, part_openers, plain_length, telegram_html
from channels.marks import contact_mark, dice_mark, location_mark, place_mark, poll_mark, sticker_mark, video_mark
from channels.media import (
    FAILED,
    TOO_LARGE,
    UNSUPPORTED,
    ImageError,
    album_note,
    as_image,
    audio_filename,
    audio_label,
    placeholder,
)
from gateway.bus import (
    BOT_LEFT,
    EDIT,
    LEFT,
    MESSAGE,
    MOVED,
    Attachment,
    Audio,
    Forwarded,
    Image,
    InboundMessage,
    MessageBus,
    OutboundMessage,
    Quoted,
    audio_mark,
    notes_in_chinese,
)
from gateway.commands import MENU, MENU_ZH, is_own_command
from gateway.config import TelegramConfig
from gateway.logging import error_fields
from memory.errorlog import error_brief

__all__ = [
    "AiohttpRequest",
    "INVALID_TOKEN_MESSAGE",
    "NOT_FOUND_MESSAGE",
    "MAX_MESSAGE_CHARS",
    "Backoff",
    "CommentStore",
    "RecentComments",
    "TelegramChannel",
    "TelegramSendError",
    "split_message",
]

MAX_MESSAGE_CHARS = 4096
CAPTION_LIMIT = 1024  # a document's caption
# Bot API sendDocument: "files of any type of up to 50 MB" (decimal here:
# the safe reading; a larger /export is compressed first, gateway/delivery.py).
MAX_UPLOAD_BYTES = 50_000_000
INVALID_TOKEN_MESSAGE = "Telegram rejected the bot token (401 Unauthorized): check channels.telegram.token"
# Telegram answers 404 to a malformed token; so does a wrong baseUrl.
NOT_FOUND_MESSAGE = (
    "Telegram rejected the bot token (404 Not Found): check channels.telegram.token and channels.telegram.baseUrl"
)
# Edits too: the stored words of the message follow (gateway/revisions.py).
# Telegram tells bots nothing when a message is deleted, so there is no recall.
# my_chat_member: the bot's own membership changed (removed from a group).
_ALLOWED_UPDATES = [UpdateType.MESSAGE, UpdateType.EDITED_MESSAGE, UpdateType.MY_CHAT_MEMBER]
# Message contents a user sends that carry no text to answer.
_UNREADABLE_KINDS = (
    "photo", "sticker", "voice", "audio", "video", "video_note", "animation", "document",
    "location", "venue", "contact", "poll", "dice",
)
# What a message of another chat may hold instead of words (``external_reply``:
# Telegram sends its media but never its text), in the order looked at.
_EXTERNAL_MEDIA = (
    "photo", "video", "animation", "audio", "document", "voice", "video_note", "sticker", "story", "paid_media",
    "live_photo", "poll", "checklist", "location", "venue", "contact", "dice", "game", "giveaway",
    "giveaway_winners", "invoice",
)
_GROUP_TYPES = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})
# "/help", "/share m12", "/帮助": a command with no @bot after it (the loop's
# split_command reads the same words).
# A document the model may read as a picture (agent.vision); the bytes are
# checked again once downloaded (channels/media.py).
_IMAGE_DOCUMENT_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_CONFIRM_TIMEOUT = 5.0
# Parts of one album that go to the model: Telegram allows 10 per album.
MAX_ALBUM_IMAGES = 10
# Updates one getUpdates returns at most (Telegram's default limit).
_BATCH = 100
# Comments published on their own kept at most for a burst of forwards to take in.
_LONE_KEPT = 256
# Comments sent with forwards whose edits are still applied (RecentComments),
# and for how long: Telegram's edit window.
_GROUPED_KEPT = 1000
_EDIT_WINDOW = 48 * 3600.0
# What stop_receiving waits beyond the downloads' own timeout for the lanes.
_LANE_MARGIN = 5.0


class TelegramSendError(DeliveryError):
    """A reply could not be delivered after the retries; the message says
    which chat and part, never the text. ``retryable`` is False when
    Telegram refused the request itself (BadRequest: chat not found;
    Forbidden: the bot was blocked or removed; InvalidToken), True for
    network trouble, 5xx, a rate limit longer than ``max_retry_after`` and
    a channel that is not running."""


@dataclass(frozen=True)
class _Picture:
    """Which file of a message to download as its picture: ``file_id``, or
    none when every size is over the limit (``too_large``) or a document
    is an image of a type the model does not take (``unsupported``)."""

    file_id: str = ""
    size: int | None = None
    refused: str = ""  # TOO_LARGE | UNSUPPORTED


@dataclass
class _Album:
    """The parts of an album, or of a burst of forwards (with the comment
    typed just before them), gathered so far (Telegram sends one update
    per part); ``update_ids`` are held back until its message is on the bus."""

    # None: not read (no agent.vision, a forward's video); _Voice: a forwarded recording (agent.transcription)
    parts: list[tuple[InboundMessage, str, _Picture | _Voice | _Video | None]]
    update_ids: list[int]
    last_part: float  # loop time the last part came
    closed: bool = False  # downloading: a later part starts a new album
    # No part can come any more (the sender wrote something else after
    # their forwards): it goes on without waiting out the quiet period.
    sealed: asyncio.Event = field(default_factory=asyncio.Event)
    # A comment already on the bus on its own that the burst takes in (its
    # forwards came in the next poll): the burst's message supersedes it.
    supersedes: str = ""


@dataclass(frozen=True)
class _Video:
    """An album's video: nothing to fetch, the model cannot watch it; its
    mark says so (channels/marks.py ``video_mark``)."""


@dataclass(frozen=True)
class _Voice:
    """A voice message's recording, or an audio file's (``name``: as its
    mark shows it, channels/media.py ``audio_label``), to download for
    transcription."""

    file_id: str
    size: int | None
    mime: str
    name: str = ""  # "": a voice message
    filename: str = "voice.ogg"  # what the endpoint reads the format from; Telegram voice: OGG/Opus


@dataclass(frozen=True)
class _File:
    """A document to read as text (agent.documents): a file that is not a
    picture the model would take."""

    file_id: str
    size: int | None
    name: str


_Fetch = _Picture | _Voice | _File


def _shared_mark(msg: Message) -> str:
    """What the user shared instead of typing, as words (channels/marks.py):
    a place, a location, a contact, a poll, a dice roll, a sticker with its
    emoji; "" for anything else."""
    if msg.venue is not None:  # a venue carries its location too: the place says more
        return place_mark(msg.venue.title, msg.venue.address)
    if msg.location is not None:
        where = msg.location
        return location_mark(where.latitude, where.longitude, live=where.live_period is not None)
    if msg.contact is not None:
        card = msg.contact
        return contact_mark(" ".join(n for n in (card.first_name, card.last_name) if n), card.phone_number)
    if msg.poll is not None:
        poll = msg.poll
        return poll_mark(poll.question, [o.text for o in poll.options], quiz=poll.type == Poll.QUIZ)
    if msg.dice is not None:
        return dice_mark(msg.dice.emoji, msg.dice.value)
    if msg.sticker is not None:
        return sticker_mark(msg.sticker.emoji or "")
    return ""


def _content_mark(msg: Message) -> str:
    """What a forwarded message holds besides words: what it shares, or
    the kind of its media ("[voice]", "[file plan.pdf]"); "" for text."""
    if mark := _shared_mark(msg):
        return mark
    if msg.document is not None:
        return document_placeholder(msg.document.file_name or "file")
    kind = next((k for k in _EXTERNAL_MEDIA if getattr(msg, k, None)), "")
    return f"[{kind.replace('_', ' ')}]" if kind else ""


def _recording(msg: Message) -> _Voice | None:
    """A voice message's recording, an audio file's (sent as music, or as a
    file of an audio type) to transcribe; None for a message without one."""
    if msg.voice is not None:
        return _Voice(msg.voice.file_id, msg.voice.file_size, msg.voice.mime_type or "audio/ogg")
    if msg.audio is not None:
        a = msg.audio
        mime = a.mime_type or "audio/mpeg"
        name = audio_label(title=a.title or "", performer=a.performer or "", file_name=a.file_name or "")
        return _Voice(a.file_id, a.file_size, mime, name, audio_filename(a.file_name or "", mime))
    doc = msg.document
    if doc is not None and (doc.mime_type or "").startswith("audio/"):
        name = audio_label(file_name=doc.file_name or "")
        return _Voice(doc.file_id, doc.file_size, doc.mime_type or "", name,
                      audio_filename(doc.file_name or "", doc.mime_type or ""))
    return None


def _sender(msg: Message) -> tuple[str, str, str]:
    """(id, display name, username) of who sent ``msg``. One sent on behalf
    of a chat (an anonymous group admin, a member posting as their channel,
    a channel's post mirrored into its discussion group) has in ``from`` an
    account Telegram shares among every such sender in every chat
    (GroupAnonymousBot, Channel_Bot, 777000): the sender is the chat, so
    one group's anonymous admin never shares memory with another's."""
    on_behalf = msg.sender_chat
    if on_behalf is not None:
        title = on_behalf.title or on_behalf.effective_name or ""
        name = f"{msg.author_signature} ({title})" if msg.author_signature and title else title
        return str(on_behalf.id), name, on_behalf.username or ""
    user = msg.from_user
    assert user is not None
    return str(user.id), user.full_name, user.username or ""


def _burst_of(msg: InboundMessage) -> str:
    """The key a sender's forwards are gathered under in their chat (and
    forum topic), next to the albums' ``media_group_id``."""
    return f"forward:{msg.sender_id}:{msg.metadata.get('message_thread_id', '')}"


def _is_comment(msg: InboundMessage) -> bool:
    """Words that may have been typed with forwards: a plain text, not a command."""
    return bool(msg.text.strip()) and not msg.text.startswith("/") and not msg.metadata.get("unreadable")


def _forward_follows(update: Update, following: Update | None) -> bool:
    """Is ``following`` a forward by the same sender in the same chat (and
    topic) as ``update``'s message: how a client sends a comment typed with
    forwards, just before them."""
    msg, nxt = update.message, following.message if following is not None else None
    if msg is None or nxt is None or nxt.forward_origin is None or nxt.is_automatic_forward:
        return False
    if msg.from_user is None or nxt.from_user is None or msg.media_group_id:
        return False

    def topic(m: Message) -> int | None:
        return m.message_thread_id if m.is_topic_message else None

    return (nxt.chat.id, _sender(nxt)[0], topic(nxt)) == (msg.chat.id, _sender(msg)[0], topic(msg))


def _forward_burst(
    parts: list[tuple[InboundMessage, str, _Picture | _Voice | _Video | None]]
) -> tuple[InboundMessage, str, list[InboundMessage]]:
    """A burst of forwards (``parts`` in order) as one message: every
    forwarded message in order, the comment typed with them as its words.
    It answers the last part, under which the reply shows, and that
    part's id is the one a redelivered burst is known by."""
    comments = [p[0] for p in parts if not p[0].forwarded]
    last, username, _ = parts[-1]
    msg = dataclasses.replace(
        last,
        text="\n".join(c.text for c in comments if c.text.strip()),
        forwarded=tuple(f for p in parts for f in p[0].forwarded),
        mentioned=any(p[0].mentioned for p in parts),
        reply_to_bot=any(p[0].reply_to_bot for p in parts),
        quoted=next((c.quoted for c in comments if c.quoted is not None), None),
    )
    return msg, username, comments


class CommentStore(Protocol):
    """Where the channel keeps which comments went into which burst of
    forwards (gateway/burstcomments.py: gateway.db, so a restart keeps it):
    each comment's id and length in characters, in order, under the
    burst's message id; no words (what they said is in the burst's stored
    message). Bounded, and expiring with Telegram's edit window.

    A recording's own caption is kept the same way, as a burst of one
    under the recording's id (a burst's id is its last forward's, never a
    comment's): its stored row holds the transcript after the caption."""

    async def keep(self, chat_id: str, burst_id: str, comments: Sequence[tuple[str, int]]) -> None: ...

    async def find(self, chat_id: str, comment_id: str) -> tuple[str, list[tuple[str, int]]] | None: ...


class RecentComments:
    """A :class:`CommentStore` in memory: the newest ``kept`` comments of
    the last ``window`` seconds (a channel given no store of its own)."""

    def __init__(self, *, kept: int = _GROUPED_KEPT, window: float = _EDIT_WINDOW,
                 clock: Callable[[], float] = time.time) -> None:
        self._kept, self._window, self._clock = kept, window, clock
        self._items: OrderedDict[tuple[str, str], tuple[float, str, list[tuple[str, int]]]] = OrderedDict()

    def footprint(self) -> dict[str, Collection[object]]:
        """The comments it keeps, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"items": self._items}

    async def keep(self, chat_id: str, burst_id: str, comments: Sequence[tuple[str, int]]) -> None:
        now = self._clock()
        for mid, _ in comments:
            self._items[(chat_id, mid)] = (now, burst_id, list(comments))
            self._items.move_to_end((chat_id, mid))
        while len(self._items) > self._kept:
            self._items.popitem(last=False)

    async def find(self, chat_id: str, comment_id: str) -> tuple[str, list[tuple[str, int]]] | None:
        found = self._items.get((chat_id, comment_id))
        if found is None or found[0] < self._clock() - self._window:
            return None
        return found[1], list(found[2])


def _edited_mark(attached: _Fetch | None) -> str:
    # An edited caption keeps its message's mark; the stored one wins
    # (gateway/revisions.py): an album's count, a "not read".
    if isinstance(attached, _Picture):
        return placeholder(1)
    if isinstance(attached, _Voice):  # its transcript stays after the caption
        return audio_mark(attached.name)
    return document_placeholder(attached.name) if isinstance(attached, _File) else ""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter, for polling and sending."""

    initial: float = 1.0
    maximum: float = 30.0
    factor: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.initial
        while True:
            # Jitter so that many gateways do not retry in lockstep.
            yield delay * random.uniform(0.5, 1.0)
            delay = min(self.maximum, delay * self.factor)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _fit(text: str, limit: int) -> int:
    """The longest prefix of ``text`` (in code points) that is at most
    ``limit`` UTF-16 units, Telegram's unit of length."""
    if len(text) <= limit // 2 or _utf16_len(text[:limit]) <= limit:
        return min(len(text), limit)
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return i
    return len(text)


def split_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` UTF-16 units, preferring
    paragraph, then line, then word boundaries; whitespace at a split is
    dropped. Never cuts between the halves of a surrogate pair."""
    parts: list[str] = []
    rest = text
    while _utf16_len(rest) > limit:
        cut = _fit(rest, limit)
        window = rest[:cut]
        for sep in ("\n\n", "\n", " "):
            # A boundary in the first half would make needlessly many parts.
            pos = window.rfind(sep, cut // 2)
            if pos > 0:
                head, rest = window[:pos], rest[pos + len(sep) :]
                break
        else:
            if "\ud800" <= window[-1] <= "\udbff":  # a lone high surrogate from odd input
                cut -= 1
            head, rest = rest[:cut], rest[cut:]
        if head.strip():
            parts.append(head)
    if rest.strip():
        parts.append(rest)
    return parts


def _retry_after_seconds(exc: RetryAfter) -> float:
    value: Any = exc.retry_after  # timedelta with PTB_TIMEDELTA (set above)
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _token_rejected(exc: InvalidToken) -> ChannelFatalError:
    # PTB raises InvalidToken for 401 and 404; at startup it wraps it in a
    # message that quotes the token, so only the original's text is read
    # and nothing is chained (raise ... from None at the call sites).
    original = exc.__cause__ if isinstance(exc.__cause__, InvalidToken) else exc
    not_found = "not found" in str(original).lower()
    return ChannelFatalError(NOT_FOUND_MESSAGE if not_found else INVALID_TOKEN_MESSAGE)


# Telegram's refusals, as this list words them: a description may quote
# what was sent (an entity's tag) or a chat's title, so the log names the
# refusal it matched, never the description itself.
_REASONS = (
    "chat not found", "can't parse entities", "message is too long", "bot was blocked by the user",
    "bot was kicked", "bot is not a member", "not enough rights", "have no rights to send",
    "user is deactivated", "message to be replied not found", "message thread not found",
    "file is too big", "wrong file identifier", "invalid file_id", "request entity too large",
    "terminated by other getupdates request", "webhook is active", "too many requests",
    "unauthorized", "not found", "internal server error", "bad gateway", "service unavailable",
    "gateway timeout", "timed out",
)


def _error_log(exc: BaseException) -> dict[str, Any]:
    """A log line's fields for a Telegram error: :func:`error_fields` (its
    type, place, codes) and ``reason``, the refusal it is from
    :data:`_REASONS`, when one matches."""
    fields = error_fields(exc)
    if reason := _reason(exc):
        fields["reason"] = reason
    return fields


def _brief(exc: BaseException) -> str:
    """A Telegram error in a few words of ours for an error's text:
    "BadRequest: chat not found", "NetworkError"."""
    reason = _reason(exc)
    return f"{type(exc).__name__}: {reason}" if reason else error_brief(exc)


def _reason(exc: BaseException) -> str:
    words = str(exc).lower()
    return next((r for r in _REASONS if r in words), "")


def _chat_id(chat_id: str) -> int | str:
    # Numeric ids as int; "@channelname" stays a string.
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


class AiohttpRequest(BaseRequest):
    """python-telegram-bot's transport on an ``aiohttp`` session (a
    dependency already: the HTTP server of the Feishu webhook and the fakes).

    PTB's default ``HTTPXRequest`` costs ~0.7 ms of event-loop CPU per Bot
    API call, ~1.3 ms with many pooled connections (httpcore checks every
    idle connection for readability on each request); this costs ~0.2 ms
    (docs/BENCHMARKS.md, "Gateway throughput"). Errors map as PTB's own
    transports do: a timeout is :class:`~telegram.error.TimedOut`, any other
    transport failure :class:`~telegram.error.NetworkError`; HTTP statuses
    are PTB's business (``BaseRequest._request_wrapper``).
    """

    __slots__ = ("_connect_timeout", "_pool_size", "_pool_timeout", "_read_timeout", "_session")

    def __init__(
        self,
        *,
        connection_pool_size: int = 8,
        connect_timeout: float = 5.0,
        read_timeout: float = 5.0,
        pool_timeout: float = 5.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._pool_timeout = pool_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size, enable_cleanup_closed=True),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")

        def pick(value: Any, default: float) -> float | None:
            return default if isinstance(value, type(BaseRequest.DEFAULT_NONE)) else value

        read = pick(read_timeout, self._read_timeout)
        connect = pick(connect_timeout, self._connect_timeout)
        pool = pick(pool_timeout, self._pool_timeout)
        # aiohttp's ``connect`` covers waiting for a pooled connection and
        # opening a new one; a write goes to the socket buffer (no timeout).
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=None if connect is None or pool is None else connect + pool,
            sock_connect=connect,
            sock_read=read,
        )
        data: Any = None
        if request_data is not None:
            files = request_data.multipart_data
            if files:
                form = aiohttp.FormData()
                for name, value in request_data.json_parameters.items():
                    form.add_field(name, value)
                for name, part in files.items():
                    filename, content = part[0], part[1]
                    content_type = part[2] if len(part) > 2 else None
                    form.add_field(name, content, filename=filename, content_type=content_type)
                data = form
            else:
                data = request_data.json_parameters
        try:
            async with session.request(method, url, data=data, timeout=timeout) as resp:
                return resp.status, await resp.read()
        except TimeoutError as err:  # aiohttp's ServerTimeoutError is one too
            raise TimedOut from err
        except aiohttp.ClientError as err:
            raise NetworkError(f"aiohttp.{err.__class__.__name__}: {err}") from err


def _default_request(pool_size: int, read_timeout: float) -> BaseRequest:
    return AiohttpRequest(
        connection_pool_size=pool_size,
        connect_timeout=5.0,
        read_timeout=read_timeout,
        pool_timeout=5.0,
    )


class TelegramChannel(BaseChannel):
    """``TelegramChannel(config, bus)``; ``start()`` / ``stop()`` / ``send()``.

    Keyword overrides (tests, benchmarks): ``request`` and
    ``get_updates_request`` (PTB request objects), ``backoff``,
    ``send_attempts``, ``startup_wait`` (seconds ``start()`` waits for
    ``getMe`` before going on in the background), ``max_retry_after``,
    ``album_quiet`` (seconds an album, or a burst of forwards, waits after its
    last part before it goes on as one message), ``hold_poll`` (seconds between polls while an
    update is held back for a pending download; see the module docstring);
    ``max_image_bytes`` (the gateway's, with ``agent.vision``): photos and
    image documents up to this size go to the model; ``max_audio_bytes``
    (with ``agent.transcription``): voice messages up to this size are
    downloaded for transcription; ``max_document_bytes`` (with
    ``agent.documents``): other files up to this size are read as text.
    """

    name = "telegram"

    def __init__(
        self,
        config: TelegramConfig,
        bus: MessageBus,
        *,
        request: BaseRequest | None = None,
        get_updates_request: BaseRequest | None = None,
        backoff: Backoff | None = None,
        send_attempts: int = 5,
        startup_wait: float = 10.0,
        max_retry_after: float = 300.0,
        max_image_bytes: int | None = None,
        max_audio_bytes: int | None = None,
        max_document_bytes: int | None = None,
        max_document_tokens: int = 12_000,
        album_quiet: float = 1.0,
        hold_poll: float = 0.5,
        comment_store: CommentStore | None = None,
        max_file_bytes: int | None = None,
    ) -> None:
        super().__init__(bus, config.allow_from, max_image_bytes=max_image_bytes, max_audio_bytes=max_audio_bytes,
                         max_document_bytes=max_document_bytes, max_document_tokens=max_document_tokens,
                         max_file_bytes=config.max_upload_bytes if max_file_bytes is None else max_file_bytes)
        # Parts of an album in a later batch are seen within hold_poll (the
        # album's first part is held back), so the quiet period must be longer.
        self.album_quiet = album_quiet
        self.hold_poll = min(hold_poll, album_quiet / 2)
        self.config = config
        self.backoff = backoff or Backoff()
        self.send_attempts = max(1, send_attempts)
        self.startup_wait = startup_wait
        self.max_retry_after = max_retry_after
        self._token = config.token.get_secret_value()
        self._request = request
        self._get_updates_request = get_updates_request
        self._bot: Bot | None = None
        # When each group was last shown "typing…" (time.monotonic), for send_draft.
        self._typing_at: dict[str, float] = {}
        # Groups upgraded to supergroups, (old id, new id), already told to
        # the gateway: Telegram says it up to three times (two service
        # messages, and each send to the old id).
        self._moves: set[tuple[str, str]] = set()
        self._poll_task: asyncio.Task[None] | None = None
        self._next = 0  # the update after the last one taken in
        self._unsettled: set[int] = set()  # taken into a lane, message not on the bus yet
        self._floor = 0  # confirmed regardless (a full batch behind a pending update)
        self._lanes = Lanes("telegram-lanes")
        self._albums: dict[tuple[str, str], _Album] = {}  # (chat, media_group_id) -> still gathering
        # Comments gathered into a burst's message, for their edits: the
        # gateway's (gateway.db, kept across restarts), or recent ones in memory.
        self._comments: CommentStore = comment_store if comment_store is not None else RecentComments()
        # A comment published on its own, by (chat, _burst_of), with its
        # username and loop time: forwards of its sender in the next poll
        # (within album_quiet) take it in (_take_comment).
        self._lone: dict[tuple[str, str], tuple[InboundMessage, str, float]] = {}
        # (session key, comment id) a burst still gathering holds on the bus; let go once it is published.
        self._holding: set[tuple[str, str]] = set()
        self._ready = asyncio.Event()
        self._failed = asyncio.Event()
        self._failure: ChannelFatalError | None = None
        self._state = "new"  # new -> running -> stopped
        self._bot_id = 0
        self._mention_re: re.Pattern[str] | None = None
        self._command_re: re.Pattern[str] | None = None

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-chat state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        held: dict[str, Collection[object]] = {
            "typing_at": self._typing_at, "albums": self._albums, "lone": self._lone, "holding": self._holding,
            "lanes": self._lanes.footprint()["queues"]}
        if isinstance(self._comments, RecentComments):  # gateway.db's store keeps them on disk
            held["comments"] = self._comments.footprint()["items"]
        return held

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        if self._state != "new":
            raise RuntimeError(f"TelegramChannel cannot start: it is {self._state}")
        if not self._token:
            raise ChannelFatalError("channels.telegram.token is empty: set it in the config or MYCLAW_TELEGRAM_TOKEN")
        self._state = "running"
        self._bot = Bot(
            self._token,
            base_url=self.config.base_url,
            base_file_url=self.config.file_url,
            request=self._request or _default_request(pool_size=64, read_timeout=10.0),
            # One long poll at a time; PTB adds the poll timeout to read_timeout.
            get_updates_request=self._get_updates_request or _default_request(pool_size=1, read_timeout=10.0),
        )
        self._poll_task = asyncio.create_task(self._run(), name="telegram-poll")
        ready = asyncio.create_task(self._ready.wait())
        failed = asyncio.create_task(self._failed.wait())
        try:
            await asyncio.wait({ready, failed}, timeout=self.startup_wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            failed.cancel()
        if self._failure is not None:
            await self.stop()
            raise self._failure
        if not self._ready.is_set():
            # A network outage at boot must not hold up the other channels;
            # polling keeps trying and a rejected token still surfaces.
            self.log.warning("Telegram not reachable yet; still trying in the background", base_url=self.config.base_url)

    async def stop_receiving(self) -> None:
        """Stop polling, then wait for the chats' pending downloads and
        albums to put their messages on the bus (each download within
        ``image_timeout``; at most ``image_timeout`` + ``album_quiet`` + 5 s
        in all); sending still works. What is still pending then, or when
        the caller stops waiting (the gateway bounds this call), is
        cancelled and never reaches the bus: its update stays unconfirmed,
        and it comes again after a restart, with the updates after it (the
        gateway ignores those it answered). Safe to call twice."""
        task, self._poll_task = self._poll_task, None
        try:
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
            bound = self.image_timeout + self.album_quiet + _LANE_MARGIN
            if not await self._lanes.wait_idle(bound):
                self.log.warning("downloads still pending at shutdown; their messages come again after a restart",
                                 pending=self._lanes.cancel())
        except asyncio.CancelledError:
            # Nothing may reach the bus after the gateway stopped waiting:
            # it would not be answered, yet its offset would be confirmed.
            self._lanes.cancel()
            raise
        finally:  # a burst cancelled before it ran: the comment it held is answered on its own
            for key, message_id in list(self._holding):
                self._let_go(key, message_id)

    async def stop(self, timeout: float | None = None) -> None:
        """Stop polling, cancel what is still pending, confirm to Telegram
        the updates whose messages are on the bus (within ``timeout``, at
        most 5 s: unconfirmed, they come again after a restart and the
        gateway ignores those it answered), close; safe twice.

        Pending lanes are not waited for here (:meth:`stop_receiving` does
        that, while the gateway still answers): a message put on the bus now
        would be confirmed and never answered. That happened when the
        gateway's bounded :meth:`stop_receiving` was cut before it began (a
        stop with no time left): a burst still gathering went on the bus
        here, after the loop had closed, and was lost. Cancelled, its
        update stays unconfirmed and comes again after the restart."""
        if self._state != "running":
            self._state = "stopped"
            return
        self._state = "stopped"
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        task, self._poll_task = self._poll_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        if self._lanes.pending:
            self.log.warning("downloads still pending at shutdown; their messages come again after a restart",
                             pending=self._lanes.pending)
        await self._lanes.close()
        for key, message_id in list(self._holding):  # the comment a burst held is answered on its own, if at all
            self._let_go(key, message_id)
        bot, self._bot = self._bot, None
        if bot is None:
            return
        try:
            if self._confirmable() and self._ready.is_set() and self._failure is None:
                left = _CONFIRM_TIMEOUT if deadline is None else max(0.0, deadline - time.monotonic())
                await self._confirm_offset(bot, min(left, _CONFIRM_TIMEOUT))
        finally:
            await bot.shutdown()
        self.log.info("telegram channel stopped")

    def _confirmable(self) -> int:
        """The offset that confirms every update whose message is on the
        bus and none that is still pending (0: nothing taken yet)."""
        return max(self._floor, min(self._unsettled, default=self._next))

    async def _confirm_offset(self, bot: Bot, timeout: float) -> None:
        # getUpdates with the next offset is how Telegram learns what we
        # handled; without it a restart gets the last batch again.
        offset = self._confirmable()
        try:
            await asyncio.wait_for(bot.get_updates(offset=offset, limit=1, timeout=0), timeout)
        except (TelegramError, TimeoutError) as exc:
            self.log.warning(
                "could not confirm handled Telegram updates; they may be delivered again",
                offset=offset,
                **_error_log(exc),
            )

    @property
    def failure(self) -> ChannelFatalError | None:
        """Set when the channel stopped for good (the token was rejected)."""
        return self._failure

    async def wait_failed(self) -> ChannelFatalError:
        """Return once the channel has failed for good; the gateway awaits
        this next to its other tasks and stops with the error's message."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def _fail(self, exc: ChannelFatalError) -> None:
        self._failure = exc
        self._failed.set()
        self.log.error("Telegram channel stopped for good", error=str(exc))

    # -- receiving --------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._connect()
            self._ready.set()
            # Beside the polling, not before it: a menu waiting on its retry holds no message.
            menu = asyncio.create_task(self._publish_menu(), name="telegram-menu")
            try:
                await self._poll()
            finally:
                menu.cancel()
        except ChannelFatalError as exc:
            self._fail(exc)
        except Exception as exc:
            # A bug, not a network problem: surface it like a fatal error
            # rather than let the poller die unnoticed.
            # Its text may quote an update's words: type and place only, here and in the gateway's log.
            fields = error_fields(exc)
            self.log.error("Telegram polling crashed", **fields)
            self._fail(ChannelFatalError(f"Telegram polling stopped: {fields['error']}"))

    async def _connect(self) -> None:
        bot = self._bot
        assert bot is not None
        delays = self.backoff.delays()
        while True:
            try:
                await bot.initialize()  # getMe: validates the token
                # getUpdates fails with 409 while a webhook is set.
                await bot.delete_webhook(drop_pending_updates=False)
                break
            except InvalidToken as exc:
                raise _token_rejected(exc) from None
            except RetryAfter as exc:
                await asyncio.sleep(_retry_after_seconds(exc))
            except TelegramError as exc:
                self.log.warning("Telegram getMe failed; retrying", base_url=self.config.base_url, **_error_log(exc))
                await asyncio.sleep(next(delays))
        username = bot.username
        self._bot_id = bot.id
        name = re.escape(username)
        self._mention_re = re.compile(rf"(?<![\w@])@{name}(?!\w)[,:]?[ \t]*", re.IGNORECASE)
        self._command_re = re.compile(rf"^(/\w+)@{name}(?!\w)", re.IGNORECASE)
        self.log.info("Telegram bot connected", username=username, base_url=self.config.base_url)

    async def _publish_menu(self, timeout: float = 10.0, attempts: int = 5) -> None:
        """The "/" menu Telegram shows: every command in private chats, and
        in groups the ones that work there. Best effort, beside the polling:
        a refusal costs the menu; a slow answer or a server error (or the
        loop held past ``timeout``, as importing lark-oapi at a first start
        did) is tried again after the channel's backoff, ``attempts`` in all."""
        bot = self._bot
        assert bot is not None
        delays = self.backoff.delays()
        for attempt in range(1, attempts + 1):
            try:
                async with asyncio.timeout(timeout):
                    for language, texts in ((None, {}), ("zh", MENU_ZH)):  # Telegram shows the user's language's
                        private = [BotCommand(name, texts.get(name, text)) for name, text, _ in MENU]
                        groups = [BotCommand(name, texts.get(name, text)) for name, text, only in MENU if not only]
                        await bot.set_my_commands(private, scope=BotCommandScopeAllPrivateChats(), language_code=language)
                        await bot.set_my_commands(groups, scope=BotCommandScopeAllGroupChats(), language_code=language)
                return
            except (TelegramError, TimeoutError) as exc:
                again = isinstance(exc, (NetworkError, TimeoutError)) and not isinstance(exc, BadRequest)
                if not again or attempt == attempts:
                    self.log.warning("Telegram command menu not set", **_error_log(exc))
                    return
                self.log.info("Telegram command menu not set yet; trying again", **_error_log(exc))
            await asyncio.sleep(next(delays))

    async def _poll(self) -> None:
        bot = self._bot
        assert bot is not None
        delays = self.backoff.delays()
        while True:
            offset = self._confirmable()
            holding = offset < self._next  # an update taken in is not on the bus yet
            try:
                updates = await bot.get_updates(
                    offset=offset or None,
                    # Held back, Telegram answers at once (it has updates from
                    # the offset on): no long poll to wait in.
                    timeout=0 if holding else self.config.poll_timeout,
                    allowed_updates=_ALLOWED_UPDATES,
                )
            except InvalidToken as exc:
                raise _token_rejected(exc) from None
            except RetryAfter as exc:
                wait = _retry_after_seconds(exc)
                self.log.warning("Telegram getUpdates rate limited", retry_after=wait)
                await asyncio.sleep(wait)
                continue
            except Conflict as exc:
                # Another process polls with this token: loud, but not fatal,
                # since the other one may be the instance being replaced.
                self.log.error("Telegram getUpdates conflict: is another bot instance running?", **_error_log(exc))
                await asyncio.sleep(next(delays))
                continue
            except TelegramError as exc:  # NetworkError, TimedOut, a 5xx, Forbidden, ...
                self.log.warning("Telegram getUpdates failed; retrying", **_error_log(exc))
                await asyncio.sleep(next(delays))
                continue
            delays = self.backoff.delays()
            fresh = [u for u in updates if u.update_id >= self._next]
            if holding and not fresh:
                if len(updates) >= _BATCH:
                    # Only updates already taken fit in a batch: holding on
                    # would keep every chat from being read.
                    self.log.info("Telegram updates confirmed while downloads are pending",
                                  pending=len(self._unsettled))
                    self._floor = self._next
                else:
                    await self._lanes.wait_change(self.hold_poll)
                continue
            for i, update in enumerate(fresh):
                await self._handle(update, fresh[i + 1] if i + 1 < len(fresh) else None)
                self._next = update.update_id + 1

    async def _handle(self, update: Update, following: Update | None = None) -> None:
        """Put the update's message on the bus, or into its chat's lane when
        it needs a download or the chat has something pending. ``following``:
        the next update of the batch (a comment typed before forwards comes
        just before them)."""
        if self._migration(update):
            return
        if await self._departure(update):
            return
        try:
            converted = self._to_inbound(update)
        except Exception as exc:
            # One malformed update must not stall polling: it is skipped,
            # logged with its id (the error by type and place: its text may
            # quote the message), and confirmed like the others.
            self.log.error("Telegram update could not be read; skipped", update_id=update.update_id,
                           **error_fields(exc))
            return
        if converted is None:
            return
        inbound, username, picture = converted
        ids = (inbound.sender_id, username)
        chat, uid = inbound.chat_id, update.update_id
        job: Job
        if inbound.kind == MESSAGE:
            burst = _burst_of(inbound)
            if inbound.forwarded and not isinstance(picture, _File):
                # Telegram sends a multi-message forward (a forwarded album
                # too) one update per message: one message for all of them,
                # gathered as an album is (its recordings transcribed as their
                # authors' words). A file read as text goes on alone.
                fresh = (chat, burst) not in self._albums
                self._add_to_album(chat, burst, uid, inbound, username, picture)
                if fresh:
                    self._take_comment(chat, burst)
                return
            self._seal(chat, burst)  # anything else the sender sends ends their burst
            self._lone.pop((chat, burst), None)
            if picture is None and _is_comment(inbound) and _forward_follows(update, following):
                # Typed with the forwards, sent just before them; only looked
                # for in the same batch, so a plain text never waits for it.
                self._add_to_album(chat, burst, uid, inbound, username, None)
                return
            if picture is None and _is_comment(inbound):
                # Its forwards may come in the next poll: then their burst
                # takes it in and supersedes its turn (_take_comment).
                now = asyncio.get_running_loop().time()
                if len(self._lone) >= _LONE_KEPT:  # senders who never forward: only the recent matter
                    self._lone = {k: v for k, v in self._lone.items() if now - v[2] <= self.album_quiet}
                self._lone[(chat, burst)] = (inbound, username, now)
        if inbound.kind == EDIT:
            # In a group, the loop changes only a message it stored (one
            # addressed to the bot); the allow-list applies as to new ones.
            # Looked up when it runs: a burst still gathering is ahead of it in the lane.
            async def job() -> None:
                await self.publish(await self._regrouped(inbound), *ids)
        elif (group := self._album_of(update)) and not isinstance(picture, (_Voice, _File)):
            # Also without agent.vision (or a video's part): one message, one note, for the album.
            # A file read as text (agent.documents) is a message of its own.
            assert update.message is not None  # an album's part is a new message
            video = picture is None and update.message.video is not None
            self._add_to_album(chat, group, uid, inbound, username, _Video() if video else picture)
            return
        elif isinstance(picture, _Voice):
            voice = picture

            async def record() -> Audio:
                return await self._download_voice(voice)

            async def job() -> None:
                await self._keep_caption(inbound)
                await self.publish_voice(inbound, record, *ids, name=voice.name)
        elif isinstance(picture, _File):
            file = picture

            async def read() -> bytes:
                return await self._download_file(file)

            async def job() -> None:
                await self.publish_document(inbound, file.name, read, *ids)
        elif picture is not None:
            still = picture

            async def fetch() -> list[Image]:
                return [await self._download(still)]

            async def job() -> None:
                await self.publish_image(inbound, fetch, *ids)
        elif kind := inbound.metadata.get("unreadable"):
            async def job() -> None:
                await self.decline_unreadable(inbound, kind, *ids)
        else:
            async def job() -> None:
                await self.publish(inbound, *ids)
        if picture is None and not self._lanes.busy(chat):
            await job()  # the fast path: nothing of this chat is pending
        else:
            self._hold(chat, [uid], job)

    async def _group_comments(self, msg: InboundMessage, comments: list[InboundMessage]) -> None:
        """Keep that ``comments`` were gathered into the burst ``msg``; a
        store that fails costs their later edits, not the burst (logged)."""
        kept = [(c.message_id, len(c.text)) for c in comments if c.text.strip()]
        if not kept:
            return
        try:
            await self._comments.keep(msg.chat_id, msg.message_id, kept)
        except Exception as exc:
            self.log.error("comments sent with forwards not kept; their edits will not apply",
                           chat_id=msg.chat_id, burst=msg.message_id, **error_fields(exc))

    async def _keep_caption(self, msg: InboundMessage) -> None:
        """Keep how long a recording's caption is (0 for none): its stored
        row holds the transcript after it, and an edit of the caption
        changes those characters only. Kept as a burst of one under its own
        id; a store that fails costs the caption's later edits (logged, and
        gateway/revisions.py keeps the row rather than guess). Not for a
        group message the bot does not store (not addressed to it)."""
        if msg.is_group and not (msg.mentioned or msg.reply_to_bot):
            return
        try:
            await self._comments.keep(msg.chat_id, msg.message_id, [(msg.message_id, len(msg.text.strip()))])
        except Exception as exc:
            self.log.error("a recording's caption not kept; its edits may not apply",
                           chat_id=msg.chat_id, message_id=msg.message_id, **error_fields(exc))

    async def _regrouped(self, edit: InboundMessage) -> InboundMessage:
        """An edit of a comment gathered into a burst of forwards, as an
        edit of the burst's stored message: the comment's new words
        (``text``), which of the burst's comments it is (metadata
        ``comment``) and how long each was (``comments``), for the stored
        row to change those words only (gateway/revisions.py). An edit of
        a recording's caption with how long it was (metadata ``caption``).
        Any other edit as it is."""
        try:
            found = await self._comments.find(edit.chat_id, edit.message_id)
        except Exception as exc:
            self.log.error("comments sent with forwards not read; the edit goes on as it is",
                           chat_id=edit.chat_id, message_id=edit.message_id, **error_fields(exc))
            found = None
        if found is None:
            return edit
        burst, spans = found
        if burst == edit.message_id:  # a recording's own caption (_keep_caption): a burst ends in a forward
            try:
                await self._comments.keep(edit.chat_id, burst, [(burst, len(edit.text.strip()))])
            except Exception as exc:
                self.log.error("a recording's caption not kept; its edits may not apply",
                               chat_id=edit.chat_id, message_id=burst, **error_fields(exc))
            return dataclasses.replace(edit, metadata={**edit.metadata, "caption": spans[0][1]})
        at = next(i for i, (mid, _) in enumerate(spans) if mid == edit.message_id)
        lengths = [chars for _, chars in spans]
        # The next edit's lengths: this one's words are the comment's now.
        spans[at] = (edit.message_id, len(edit.text.strip()))  # as the stored row takes them
        try:
            await self._comments.keep(edit.chat_id, burst, spans)
        except Exception as exc:
            self.log.error("comments sent with forwards not kept; their edits will not apply",
                           chat_id=edit.chat_id, burst=burst, **error_fields(exc))
        self.log.info("edit of a comment sent with forwards applied to their message", chat_id=edit.chat_id,
                      message_id=edit.message_id, burst=burst)
        return dataclasses.replace(edit, message_id=burst, placeholder="",
                                   metadata={**edit.metadata, "comments": lengths, "comment": at})

    def _hold(self, chat: str, update_ids: list[int], job: Job) -> None:
        """Queue ``job`` in ``chat``'s lane, holding ``update_ids`` (a list
        an album still adds to) back from the offset until it is done."""
        self._unsettled.update(update_ids)

        async def settle() -> None:
            try:
                await job()
            except asyncio.CancelledError:
                raise  # not on the bus: the update stays unconfirmed
            except Exception as exc:  # a bug: skipped and confirmed, as a malformed update is
                self.log.error("Telegram update could not be handled; skipped", update_ids=update_ids,
                               **error_fields(exc))
            self._unsettled.difference_update(update_ids)

        self._lanes.submit(chat, settle)

    @staticmethod
    def _album_of(update: Update) -> str:
        """The album (``media_group_id``) a new message is a part of; "" for none."""
        msg = update.message
        return (msg.media_group_id or "") if msg is not None else ""

    def _add_to_album(
        self,
        chat: str,
        group: str,
        update_id: int,
        inbound: InboundMessage,
        username: str,
        picture: _Picture | _Voice | _Video | None,
    ) -> None:
        """One part of an album: it joins the album still gathering, or
        starts one, which goes on as one message ``album_quiet`` seconds
        after its last part (behind what the chat has pending)."""
        now = asyncio.get_running_loop().time()
        album = self._albums.get((chat, group))
        if album is not None and not album.closed:
            album.parts.append((inbound, username, picture))
            album.update_ids.append(update_id)
            album.last_part = now
            self._unsettled.add(update_id)
            return
        album = self._albums[(chat, group)] = _Album([(inbound, username, picture)], [update_id], now)

        async def job() -> None:
            loop = asyncio.get_running_loop()
            try:
                while not album.sealed.is_set() and (quiet := album.last_part + self.album_quiet - loop.time()) > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(album.sealed.wait(), quiet)
            finally:
                album.closed = True
                if self._albums.get((chat, group)) is album:
                    del self._albums[(chat, group)]
            try:
                await self._publish_album(album)
            finally:  # published (marked taken on the bus) or not: the comment's reply waits no more
                if album.supersedes:
                    self._let_go(album.parts[0][0].session_key, album.supersedes)

        self._hold(chat, album.update_ids, job)

    def _take_comment(self, chat: str, burst: str) -> None:
        """A burst of forwards just begun takes in the comment its sender
        published on its own within ``album_quiet`` before it (a client
        sends the comment first; its forwards may come in the next poll):
        one message, one reply. The comment is on the bus already, so the
        burst names it (metadata ``supersedes``) and the process loop drops
        its turn if not yet answered (gateway/loop.py). Costs nothing for a
        message without forwards after it: it was never held."""
        lone = self._lone.pop((chat, burst), None)
        album = self._albums.get((chat, burst))
        if lone is None or album is None:
            return
        comment, username, at = lone
        if asyncio.get_running_loop().time() - at > self.album_quiet:
            return
        album.parts.insert(0, (comment, username, None))
        album.supersedes = comment.message_id
        # Its reply, if the model answers before the burst is quiet, waits
        # for the burst and is dropped if the burst takes it in (gateway/bus.py).
        self.bus.hold(comment.session_key, comment.message_id)
        self._holding.add((comment.session_key, comment.message_id))

    def _let_go(self, key: str, message_id: str) -> None:
        self._holding.discard((key, message_id))
        self.bus.release(key, message_id)

    def _seal(self, chat: str, group: str) -> None:
        """The album or burst ``group`` of ``chat`` takes no more parts: it
        goes on now, and a later part starts a new one."""
        album = self._albums.pop((chat, group), None)
        if album is not None:
            album.closed = True
            album.sealed.set()

    async def _publish_album(self, album: _Album) -> None:
        """The album as one message: the captioned part's words (Telegram
        puts the caption on one part) and id, every part's picture. Parts
        not read get one note saying which ("photo 2 of 3"); the others go
        on. Without pictures to read (no agent.vision), the caption goes on
        as a single photo's does, and an album without one gets one note.
        A burst of forwards goes on as :func:`_forward_burst` makes it."""
        parts = sorted(album.parts, key=lambda p: int(p[0].message_id or 0))
        if any(p[0].forwarded for p in parts):
            msg, username, comments = _forward_burst(parts)
            if album.supersedes:
                msg = dataclasses.replace(msg, metadata={**msg.metadata, "supersedes": album.supersedes})
            await self._group_comments(msg, comments)
            # Each part forwards one message, in order: a recording's place among them.
            places = [n for n, p in enumerate(p for p in parts if p[0].forwarded) if isinstance(p[2], _Voice)]
            voices = [p[2] for p in parts if isinstance(p[2], _Voice)]
            heard = await self.attach_forwarded_voices(
                msg, {n: functools.partial(self._download_voice, v) for n, v in zip(places, voices)},
                msg.sender_id, username, names={n: v.name for n, v in zip(places, voices) if v.name},
            )
            if heard is None:
                return  # a recording not read was all: the user was told
            msg = heard
        else:
            base, username, _ = next((p for p in parts if p[0].text.strip()), parts[0])
            msg = dataclasses.replace(
                base,
                mentioned=any(p[0].mentioned for p in parts),
                reply_to_bot=any(p[0].reply_to_bot for p in parts),
            )
        pictures = [p[2] for p in parts if isinstance(p[2], _Picture)]
        # A picture's place in an album and the album's size, as the user
        # sees it; among a burst's pictures, their own.
        burst = bool(msg.forwarded)
        places = list(range(1, len(pictures) + 1)) if burst else [
            n for n, p in enumerate(parts, 1) if isinstance(p[2], _Picture)]
        total = len(pictures) if burst else len(parts)
        videos = sum(isinstance(p[2], _Video) for p in parts)
        if pictures and videos:  # the model and the history say a video came that nobody watched
            msg = dataclasses.replace(msg, placeholder=video_mark(videos))
        if not pictures:
            if msg.text.strip() or msg.forwarded:
                await self.publish(msg, msg.sender_id, username)
            else:
                await self.decline_unreadable(msg, str(msg.metadata.get("unreadable") or "photo"), msg.sender_id,
                                              username)
            return
        if len(pictures) > MAX_ALBUM_IMAGES:
            self.log.warning("album parts over the limit not read", chat_id=base.chat_id,
                             parts=len(pictures), limit=MAX_ALBUM_IMAGES)
            pictures = pictures[:MAX_ALBUM_IMAGES]
        limit = self.max_image_bytes
        assert limit is not None

        async def fetch() -> list[Image]:
            got = await asyncio.gather(*(self._download(p) for p in pictures), return_exceptions=True)
            images = [g for g in got if isinstance(g, Image)]
            failed: list[tuple[int, ImageError]] = []
            for n, g in zip(places, got):
                if isinstance(g, ImageError):
                    failed.append((n, g))
                elif not isinstance(g, Image):
                    raise g  # a bug, or cancelled: not a picture's fault
            if failed:
                self.log.warning("album pictures not read", reasons=[e.reason for _, e in failed],
                                 errors=[str(e) for _, e in failed], failed=[n for n, _ in failed],
                                 parts=total, chat_id=msg.chat_id)
            note = album_note([(n, e.reason) for n, e in failed], total, limit, videos=videos,
                              zh=notes_in_chinese(msg))
            if failed and not images:
                if len(pictures) == 1 and not videos:
                    raise failed[0][1]  # one picture: told as a single photo is
                # The album's note, and what is answered without them (the publisher's part).
                raise ImageError(failed[0][1].reason, "; ".join(str(e) for _, e in failed), note=note)
            if failed or videos:
                await self._note(msg, note)
            return images

        await self.publish_image(msg, fetch, msg.sender_id, username)

    def _migration(self, update: Update) -> bool:
        """A group upgraded to a supergroup (a new chat id): the service
        message either chat gets is told to the gateway as the move, once,
        so the conversation follows the chat. True when ``update`` was one."""
        msg = update.message
        if msg is None:
            return False
        if msg.migrate_from_chat_id is not None:
            self._tell_moved(str(msg.migrate_from_chat_id), str(msg.chat.id))
        elif msg.migrate_to_chat_id is not None:
            self._tell_moved(str(msg.chat.id), str(msg.migrate_to_chat_id))
        else:
            return False
        return True

    async def _departure(self, update: Update) -> bool:
        """A member left the group or was removed: told to the gateway as
        LEFT, whoever they are (no allow-list: it only takes away), so the
        jobs they made there stop speaking for them. True when ``update``
        was such a service message."""
        mine = update.my_chat_member
        if mine is not None:
            # The bot's own membership: removed from (or left) a group, the
            # group's own memory goes (LEFT of BOT_LEFT). Anything else
            # (added, made admin, a private chat blocked) changes nothing here.
            if mine.chat.type in ("group", "supergroup") and mine.new_chat_member.status in ("left", "kicked"):
                await self._bot_removed(str(mine.chat.id))
            return True
        msg = update.message
        if msg is None or msg.left_chat_member is None:
            return False
        gone = msg.left_chat_member
        if gone.id != self._bot_id:
            self.log.info("member left a group", chat_id=msg.chat.id, sender_id=gone.id)
            await self.bus.publish_inbound(InboundMessage(
                channel=self.name, chat_id=str(msg.chat.id), sender_id=str(gone.id), text="", is_group=True,
                kind=LEFT, message_id=str(msg.message_id),
            ))
        else:
            await self._bot_removed(str(msg.chat.id))
        return True

    async def _bot_removed(self, chat_id: str) -> None:
        self.log.info("bot removed from a group", chat_id=chat_id)
        await self.bus.publish_inbound(InboundMessage(
            channel=self.name, chat_id=chat_id, sender_id=BOT_LEFT, text="", is_group=True, kind=LEFT,
        ))

    def _tell_moved(self, old: str, new: str) -> None:
        """Put a MOVED event (``chat_id`` the new id, ``moved_from`` the old)
        on the bus; no words, no sender, no allow-list: it changes where a
        chat's history is kept, nothing else. Without waiting: it may come
        from the send path, which must not wait on the inbound queue."""
        if (old, new) in self._moves:
            return
        self.log.info("Telegram group upgraded to a supergroup; its conversation follows", chat_id=old,
                      new_chat_id=new)
        moved = InboundMessage(channel=self.name, chat_id=new, sender_id="", text="", is_group=True, kind=MOVED,
                               metadata={"moved_from": old})
        try:
            self.bus.inbound.put_nowait(moved)
        except asyncio.QueueFull:
            self.log.warning("Telegram group move not told: the inbound queue is full", chat_id=old, new_chat_id=new)
            return
        self._moves.add((old, new))

    def _to_inbound(self, update: Update) -> tuple[InboundMessage, str, _Fetch | None] | None:
        edited = update.message is None and update.edited_message is not None
        msg = update.edited_message if edited else update.message
        if msg is None:
            return None
        if msg.from_user is None:
            # Only a channel's own posts lack ``from`` (not read here): one
            # naming nobody would be owned by no one, so nobody's to answer.
            self.log.warning("Telegram message without a sender ignored", chat_id=msg.chat.id,
                             message_id=msg.message_id, update_id=update.update_id)
            return None
        text = msg.text if msg.text is not None else msg.caption
        unreadable = ""
        # Someone else's message (or the user's own, earlier) passed on; a
        # channel's post mirrored into its discussion group is not one.
        origin = msg.forward_origin if not (edited or msg.is_automatic_forward) else None
        picture: _Fetch | None = self._picture(msg) if self.max_image_bytes is not None else None
        if self.max_audio_bytes is not None and (recording := _recording(msg)) is not None:
            # A forwarded one is transcribed as its author's words (Forwarded.audio).
            picture = recording
        doc = msg.document
        if picture is None and doc is not None and self.max_document_bytes is not None:
            picture = _File(doc.file_id, doc.file_size, doc.file_name or "file")
        if text is None and edited:
            return None  # a caption removed, a live location moved: no words to change
        forwarded: tuple[Forwarded, ...] = ()
        if origin is not None:
            # Its words are the forward's, marked with what it held ("[sticker 😀]");
            # a picture or file to read keeps its own mark (the placeholder).
            mark = audio_mark(picture.name) if isinstance(picture, _Voice) else _content_mark(msg)
            # (A recording keeps its "[voice]" in front: the transcript follows it.)
            keeps = picture is not None and not isinstance(picture, _Voice)
            words = (text or mark) if keeps else f"{mark} {text or ''}".strip()
            if not words and picture is None:
                return None
            forwarded = (Forwarded(self._origin_name(origin, None), words, sent_at=origin.date),)
            text = ""
        if picture is not None and not edited:
            text = text or ""  # a photo alone is read too
        if text is None and not edited and (mark := _shared_mark(msg)):
            text = mark  # a place, a contact, a poll...: read as words
        if text is None:
            # A photo without caption, voice, video...: answered with a
            # note (decline_unreadable); member joins and the like: nothing.
            unreadable = next((k for k in _UNREADABLE_KINDS if getattr(msg, k, None)), "")
            if not unreadable:
                return None
            text = ""
        user, chat = msg.from_user, msg.chat
        sender_id, sender_name, username = _sender(msg)
        # Words forwarded are not the user addressing the bot: in a group, a
        # burst of forwards is addressed by the comment typed with it.
        mentioned = not forwarded and self._is_mentioned(msg)
        if mentioned:
            text = self._strip_mention(text)
        metadata: dict[str, Any] = {"chat_type": chat.type}
        if unreadable:
            metadata["unreadable"] = unreadable
        if username:
            metadata["username"] = username
        if chat.title:
            metadata["chat_title"] = chat.title
        if msg.is_topic_message and msg.message_thread_id is not None:
            metadata["message_thread_id"] = msg.message_thread_id
        inbound = InboundMessage(
            channel=self.name,
            chat_id=str(chat.id),
            sender_id=sender_id,
            text=text,
            message_id=str(msg.message_id),
            timestamp=msg.date,
            # Fails closed: any chat that is not a private one is shared (a
            # type we never asked for, as a channel's, is no one's own chat).
            is_group=chat.type != ChatType.PRIVATE,
            mentioned=mentioned,
            reply_to_bot=not forwarded and self._replies_to_bot(msg),
            sender_name=sender_name,
            metadata=metadata,
            kind=EDIT if edited else MESSAGE,
            # An edited caption keeps its picture's mark in the history.
            placeholder=_edited_mark(picture) if edited else "",
            quoted=None if forwarded else self._quoted(msg),
            forwarded=forwarded,
            locale=user.language_code or "",  # the language of the notes about a message without words
        )
        return inbound, username, None if edited else picture

    def _picture(self, msg: Message) -> _Picture | None:
        """The file to read as the message's picture (agent.vision): the
        largest photo size within the limit, or a document of an image
        type; None for a message without one."""
        limit = self.max_image_bytes
        assert limit is not None
        if msg.photo:
            # Sizes come smallest first; one without file_size is tried and checked once downloaded.
            fitting = [p for p in msg.photo if p.file_size is None or p.file_size <= limit]
            if not fitting:
                return _Picture(refused=TOO_LARGE)
            best = fitting[-1]
            return _Picture(best.file_id, best.file_size)
        doc = msg.document
        if doc is not None and (doc.mime_type or "").startswith("image/"):
            if doc.mime_type not in _IMAGE_DOCUMENT_TYPES:
                return _Picture(refused=UNSUPPORTED)
            if doc.file_size is not None and doc.file_size > limit:
                return _Picture(refused=TOO_LARGE)
            return _Picture(doc.file_id, doc.file_size)
        return None

    async def _download(self, picture: _Picture) -> Image:
        limit = self.max_image_bytes
        assert limit is not None
        if picture.refused:
            raise ImageError(picture.refused, "refused before download")
        return as_image(await self._file_bytes(picture.file_id, picture.size, limit), limit)

    async def _download_voice(self, voice: _Voice) -> Audio:
        limit = self.max_audio_bytes
        assert limit is not None
        data = await self._file_bytes(voice.file_id, voice.size, limit)
        return Audio(data=data, mime=voice.mime, filename=voice.filename, name=voice.name)

    async def _download_file(self, file: _File) -> bytes:
        limit = self.max_document_bytes
        assert limit is not None
        return await self._file_bytes(file.file_id, file.size, limit)

    async def _file_bytes(self, file_id: str, size: int | None, limit: int) -> bytes:
        """``getFile``, then the file itself, through PTB, within ``limit``
        bytes (the size the update stated is checked first, then getFile's,
        then the bytes'); errors as :class:`ImageError` (the token, part of
        the file's URL, scrubbed)."""
        bot = self._bot
        assert bot is not None
        if size is not None and size > limit:
            raise ImageError(TOO_LARGE, f"{size} bytes, over the {limit} byte limit")
        try:
            file = await bot.get_file(file_id)
            if file.file_size is not None and file.file_size > limit:
                raise ImageError(TOO_LARGE, f"{file.file_size} bytes, over the {limit} byte limit")
            data = bytes(await file.download_as_bytearray())
        except TelegramError as exc:
            too_big = "too big" in str(exc).lower()  # getFile's refusal past 20 MB
            raise ImageError(TOO_LARGE if too_big else FAILED, _brief(exc)) from None
        if len(data) > limit:
            raise ImageError(TOO_LARGE, f"{len(data)} bytes, over the {limit} byte limit")
        return data

    def _is_mentioned(self, msg: Message) -> bool:
        assert self._mention_re is not None and self._command_re is not None
        # PTB annotates the argument list[str | None]: a list[str] is refused (list is invariant)
        types: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION, MessageEntity.BOT_COMMAND]
        entities = msg.parse_entities(types) if msg.text is not None else msg.parse_caption_entities(types)
        for entity, value in entities.items():
            if entity.type == MessageEntity.TEXT_MENTION:
                if entity.user is not None and entity.user.id == self._bot_id:
                    return True
            elif self._mention_re.search(value) or self._command_re.match(value):
                return True
        # Entities can be missing (forwarded or edited text): look at the text.
        text = msg.text or msg.caption or ""
        if self._mention_re.search(text) or self._command_re.match(text):
            return True
        # A command picked from the group's menu comes without @bot when no
        # other bot is there (privacy mode lets every "/" message through):
        # one of ours is for us. Not a caption: that is a question about the file.
        if msg.text is None or msg.chat.type not in _GROUP_TYPES:
            return False
        return is_own_command(msg.text)

    def _strip_mention(self, text: str) -> str:
        assert self._mention_re is not None and self._command_re is not None
        stripped = self._command_re.sub(r"\1", text)
        stripped = self._mention_re.sub("", stripped).strip()
        # "@bot" alone: keep it rather than hand the loop an empty message.
        return stripped or text

    def _quoted(self, msg: Message) -> Quoted | None:
        """The message ``msg`` replies to, for the model: the part the user
        quoted if they picked one, else its text or caption; None for none
        (a forum topic's messages all "reply" to its first one). A message
        of another chat or channel comes as ``external_reply``."""
        replied = msg.reply_to_message
        if replied is None:
            return self._external_quoted(msg) if msg.external_reply is not None else None
        if msg.is_topic_message and replied.message_id == msg.message_thread_id:
            return None
        part = msg.quote.text if msg.quote is not None else ""
        text = part or replied.text or replied.caption or ""
        if not text.strip():
            return None
        author = replied.from_user
        name = "you" if author is not None and author.id == self._bot_id else (
            _sender(replied)[1] if author is not None or replied.sender_chat is not None else "")
        return Quoted(author=name, text=text, partial=bool(part))

    def _external_quoted(self, msg: Message) -> Quoted | None:
        """A reply to a message of another chat or channel: Telegram sends
        who wrote it (``origin``) and what it holds, but not its text; the
        words are the part the user quoted, if any, after a stand-in for
        its media ("[photo]"). None when there is neither."""
        ext = msg.external_reply
        assert ext is not None
        part = msg.quote.text if msg.quote is not None else ""
        kind = next((k for k in _EXTERNAL_MEDIA if getattr(ext, k, None)), "")
        stand_in = f"[{kind.replace('_', ' ')}]" if kind else ""
        if kind == "poll" and ext.poll is not None:
            stand_in = f"[poll] {ext.poll.question}"
        text = f"{stand_in} {part}".strip() if stand_in else part
        if not text.strip():
            return None
        return Quoted(author=self._origin_name(ext.origin, ext.chat), text=text, partial=bool(part))

    def _origin_name(self, origin: MessageOrigin, chat: Chat | None) -> str:
        """Who wrote a message of another chat: a user (by name; "you" for
        the bot), a user who hides their account, a chat or a channel (by
        title, with the author's signature when it has one)."""
        where = f" in {chat.title}" if chat is not None and chat.title else ""
        if isinstance(origin, MessageOriginUser):
            user = origin.sender_user
            return "you" if user.id == self._bot_id else f"{user.full_name}{where}"
        if isinstance(origin, MessageOriginHiddenUser):
            return f"{origin.sender_user_name}{where}"
        if isinstance(origin, MessageOriginChat):
            title = origin.sender_chat.title or ""
        elif isinstance(origin, MessageOriginChannel):
            title = origin.chat.title or ""
        else:  # a kind of origin newer than this code
            return (chat.title or "") if chat is not None else ""
        signature = origin.author_signature
        return f"{signature} ({title})" if signature and title else signature or title

    def _replies_to_bot(self, msg: Message) -> bool:
        replied = msg.reply_to_message
        if replied is None:
            # A reply to the bot's message in another chat: above all, in a
            # supergroup, to its answer from before the group's upgrade
            # (shown in the same chat, but the old group's message).
            ext = msg.external_reply
            origin = ext.origin if ext is not None else None
            return isinstance(origin, MessageOriginUser) and origin.sender_user.id == self._bot_id
        if replied.from_user is None or replied.from_user.id != self._bot_id:
            return False
        # In forum topics every message "replies" to the topic's first message.
        return not (msg.is_topic_message and replied.message_id == msg.message_thread_id)

    # -- sending ----------------------------------------------------------------------
    async def send_typing(self, chat_id: str) -> None:
        """Show "typing..." in the chat while a reply is being written. Best
        effort: a failure only costs the indicator, so it is not raised."""
        bot = self._bot
        if bot is None:
            return
        try:
            await bot.send_chat_action(chat_id=_chat_id(chat_id), action=ChatAction.TYPING)
        except TelegramError as exc:
            self.log.debug("typing indicator not sent", chat_id=chat_id, **_error_log(exc))

    async def send(self, msg: OutboundMessage) -> None:
        """Send a reply, split into parts of at most 4096 characters, in
        order. Raises :class:`TelegramSendError` when a part still fails
        after the retries (the rest is then not sent, to keep order; the
        error's ``remaining`` is the text from that part on); each part but
        the last that went out tells ``msg.on_part_sent`` what is left."""
        bot = self._bot
        if bot is None:
            raise TelegramSendError(
                f"Telegram channel is not running; reply to chat {msg.chat_id} not sent", retryable=True
            )
        if msg.attachment is not None:
            await self._send_document(bot, msg, msg.attachment)
            return
        parts = split_message(msg.text)
        if not parts:
            self.log.warning("empty reply not sent", chat_id=msg.chat_id)
            return
        chat_id = _chat_id(msg.chat_id)
        thread_id = msg.metadata.get("message_thread_id")
        reply_to = int(msg.reply_to) if msg.reply_to.isdigit() else None
        for i, (part, opener) in enumerate(zip(parts, part_openers(parts))):
            reply = (
                # A deleted original must not make the reply fail.
                ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
                if i == 0 and reply_to is not None
                else None
            )
            try:
                chat_id = await self._send_part(
                    bot, chat_id, part, reply, thread_id, f"part {i + 1} of {len(parts)}", opener=opener
                )
            except TelegramSendError as exc:
                if i:  # parts 1..i went out: only the rest may be sent again
                    exc.remaining = rest_of(msg.text, parts, i)
                raise
            if msg.on_part_sent is not None and i + 1 < len(parts):  # a stop cutting the next keeps only the rest
                msg.on_part_sent(rest_of(msg.text, parts, i + 1))

    async def send_draft(self, msg: OutboundMessage) -> bool:
        """Show a reply being written as Telegram's own draft
        (``sendMessageDraft``): the app animates each change, and the draft
        is gone once the reply is sent (``send``), or after 30 s without an
        update; empty text is Telegram's "thinking" placeholder. Telegram
        takes drafts in private chats only: a group (or channel) sees
        "typing…" instead. A draft longer than a message shows its last
        part, the one still being written. One attempt, no retries: a
        failure (a rate limit included) ends this reply's drafts."""
        bot = self._bot
        if bot is None:
            return False
        chat_id = _chat_id(msg.chat_id)
        thread_id = msg.metadata.get("message_thread_id")
        if not isinstance(chat_id, int) or chat_id <= 0:
            # "typing…" lasts 5 s: once every 4 s is enough, however often the words grow.
            now = time.monotonic()
            if now - self._typing_at.get(msg.chat_id, float("-inf")) >= 4.0:
                if len(self._typing_at) > 1000:
                    self._typing_at = {k: t for k, t in self._typing_at.items() if now - t < 4.0}
                self._typing_at[msg.chat_id] = now
                await bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING, message_thread_id=thread_id)
            return True
        # Stable for the reply (and non-zero, as Telegram asks): each update animates the same draft.
        draft_id = zlib.crc32(msg.send_key.encode()) % 2_000_000_000 + 1
        parts = split_message(msg.text)
        if not parts:
            await bot.send_message_draft(chat_id=chat_id, draft_id=draft_id, text="", message_thread_id=thread_id)
            return True
        text, opener = parts[-1], part_openers(parts)[-1]
        formatted = _formatted(text, MAX_MESSAGE_CHARS, opener=opener)
        if formatted is not None:
            try:
                await bot.send_message_draft(chat_id=chat_id, draft_id=draft_id, text=formatted,
                                             message_thread_id=thread_id, parse_mode=ParseMode.HTML)
                return True
            except BadRequest as exc:
                if not _refuses_markup(exc):
                    raise
        await bot.send_message_draft(chat_id=chat_id, draft_id=draft_id, text=text, message_thread_id=thread_id)
        return True

    async def _send_part(
        self,
        bot: Bot,
        chat_id: int | str,
        text: str,
        reply: ReplyParameters | None,
        thread_id: int | None,
        which: str,
        *,
        opener: str = "",
    ) -> int | str:
        """Send one part with retries; returns the chat id it went to (a group
        upgraded to a supergroup gets a new one). The model's Markdown goes
        as Telegram HTML (channels/markdown.py); a part with no markup, or
        whose HTML Telegram refuses, goes as the plain text it was."""
        formatted = _formatted(text, MAX_MESSAGE_CHARS, opener=opener)

        async def call(to: int | str) -> None:
            nonlocal formatted
            # Sent on to a supergroup (ChatMigrated), the reply quotes nothing:
            # it numbers its messages anew, so the id names another message there.
            quoted = reply if to == chat_id else None
            if formatted is not None:
                try:
                    await _send_message(bot, to, formatted, quoted, thread_id, parse_mode=ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if not _refuses_markup(exc):
                        raise
                    # A converter bug must not cost the reply: the words go out as written.
                    self.log.warning("Telegram refused the reply's formatting; sent as plain text",
                                     chat_id=to, part=which, **_error_log(exc))
                    formatted = None
            await _send_message(bot, to, text, quoted, thread_id)

        return await self._with_retries(chat_id, call, "sendMessage", f"{which}, {len(text)} chars")

    async def _send_document(self, bot: Bot, msg: OutboundMessage, file: Attachment) -> None:
        """The file with the reply's text as its caption, retried as a text
        part is: formatted as a reply is when its visible text fits
        Telegram's 1024 characters (and as written when Telegram refuses the
        markup), else as written, cut to fit."""
        thread_id = msg.metadata.get("message_thread_id")
        reply_to = int(msg.reply_to) if msg.reply_to.isdigit() else None
        reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
        caption = msg.text if len(msg.text) <= CAPTION_LIMIT else msg.text[: CAPTION_LIMIT - 1] + "…"
        formatted = _formatted(msg.text, CAPTION_LIMIT)

        async def send(to: int | str, words: str | None, parse_mode: str | None) -> None:
            with file.open() as content:  # streamed from the start on each try (a large export is on disk)
                document = InputFile(content, filename=file.filename, read_file_handle=False)
                document.mimetype = file.mime  # PTB guesses by the name, and takes .md.gz for text/markdown
                await bot.send_document(
                    chat_id=to,
                    document=document,
                    filename=file.filename,
                    caption=words,
                    parse_mode=parse_mode,
                    reply_parameters=reply if str(to) == msg.chat_id else None,  # moved on: as _send_part
                    message_thread_id=thread_id,
                )

        async def call(to: int | str) -> None:
            nonlocal formatted
            if formatted is not None:
                try:
                    await send(to, formatted, ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if not _refuses_markup(exc):
                        raise
                    self.log.warning("Telegram refused the caption's formatting; sent as plain text",
                                     chat_id=to, **_error_log(exc))
                    formatted = None
            await send(to, caption or None, None)

        await self._with_retries(_chat_id(msg.chat_id), call, "sendDocument", f"file, {file.size} bytes")

    async def _with_retries(
        self, chat_id: int | str, call: Callable[[int | str], Awaitable[None]], method: str, what: str
    ) -> int | str:
        """``call(chat_id)`` with the channel's retry rules; ``what`` names
        the part in errors (never its content)."""
        delays = self.backoff.delays()
        error = "no attempt made"
        attempt = 0
        for attempt in range(1, self.send_attempts + 1):
            try:
                await call(chat_id)
                return chat_id
            except ChatMigrated as exc:
                # Missed the service messages (the gateway was down longer
                # than Telegram keeps updates): the send tells the move.
                self._tell_moved(str(chat_id), str(exc.new_chat_id))
                chat_id = exc.new_chat_id
                continue
            except RetryAfter as exc:
                wait = _retry_after_seconds(exc)
                if wait > self.max_retry_after:
                    error = f"rate limited for {wait:.0f}s"
                    break
                self.log.warning(f"Telegram {method} rate limited; waiting", chat_id=chat_id, retry_after=wait)
                await asyncio.sleep(wait)
                error = "rate limited"
            except (BadRequest, Forbidden, InvalidToken) as exc:
                # The request itself is refused; sending it again cannot help.
                raise TelegramSendError(
                    f"Telegram refused the reply to chat {chat_id} ({what}): {_brief(exc)}",
                    retryable=False,
                ) from None
            except (NetworkError, Conflict) as exc:
                if _too_large(exc):  # 413: a file over what this Bot API server takes; no use sending it again
                    raise FileTooLarge(f"Telegram refused the file for chat {chat_id} ({what}) as too large") from None
                error = _brief(exc)
                if attempt < self.send_attempts:
                    self.log.warning(f"Telegram {method} failed; retrying", chat_id=chat_id, attempt=attempt,
                                     **_error_log(exc))
                    await asyncio.sleep(next(delays))
        raise TelegramSendError(
            f"Telegram reply to chat {chat_id} not sent ({what}) after {attempt} attempts: {error}",
            retryable=True,
        )


def _too_large(exc: TelegramError) -> bool:
    """PTB raises a 413 as a plain ``NetworkError`` with Telegram's
    description ("Request Entity Too Large") or the status phrase."""
    return isinstance(exc, NetworkError) and ("Request Entity Too Large" in exc.message or "(413)" in exc.message)


def _formatted(text: str, limit: int, *, opener: str = "") -> str | None:
    """``text`` (the model's Markdown) as Telegram HTML, or None when it is
    better sent as written: no markup, or its visible text over ``limit``
    (Telegram counts a formatted text without its tags)."""
    if not (opener or might_have_markup(text)):
        return None
    rendered = telegram_html(text, opener=opener)
    if rendered == html.escape(text, quote=False) or plain_length(rendered) > limit:
        return None
    return rendered


def _refuses_markup(exc: BadRequest) -> bool:
    """Telegram could not parse the HTML (an entity, a link), as opposed
    to refusing the request itself (chat not found)."""
    words = str(exc).lower()
    return "entit" in words or "url" in words


async def _send_message(
    bot: Bot,
    chat_id: int | str,
    text: str,
    reply: ReplyParameters | None,
    thread_id: int | None,
    *,
    parse_mode: str | None = None,
) -> None:
    """``sendMessage`` without turning Telegram's answer into a ``Message``.

    Nothing here reads the sent message, and ``Message.de_json`` was ~7% of
    the event loop's time at 300 messages/s. ``Bot._post`` is the path
    every PTB method takes (defaults, parameter encoding, the same error
    mapping: RetryAfter, ChatMigrated, BadRequest, ...); it is private, so
    fall back to the public method if a PTB release renames it."""
    post = getattr(bot, "_post", None)
    if post is None:
        await bot.send_message(chat_id=chat_id, text=text, reply_parameters=reply, message_thread_id=thread_id,
                               parse_mode=parse_mode)
        return
    data: dict[str, object] = {"chat_id": chat_id, "text": text}
    if parse_mode is not None:
        data["parse_mode"] = parse_mode
    if reply is not None:
        data["reply_parameters"] = reply
    if thread_id is not None:
        data["message_thread_id"] = thread_id
    await post("sendMessage", data)
