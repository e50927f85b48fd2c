"""The message bus: channels publish inbound messages, the process loop
publishes replies. Bounded queues give backpressure: when the loop falls
behind, a channel's ``publish_inbound`` waits instead of memory growing.

Outbound messages go to one queue per channel, so a slow channel (a Feishu
API hiccup) never holds up replies on another.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

from memory.errorlog import Wordless
from memory.tokens import estimate_tokens, prefix_within

__all__ = [
    "AGAIN", "BOT_LEFT", "EDIT", "FILE_NOT_READ", "FORWARD_TOKENS", "LEFT", "MESSAGE", "MOVED", "PHOTO_NOT_READ", "RECALL", "ROUTING_KEYS", "VOICE", "VOICE_NOT_READ",
    "Attachment", "Audio", "Document",
    "Forwarded", "Image", "InboundMessage", "MessageBus", "NotKept", "OutboundMessage", "app_in_chinese", "audio_mark",
    "audio_not_read", "forwarded_text", "forwards_from_history", "not_heard", "notes_in_chinese", "picture_mark",
    "words_in_chinese",
]

# Metadata that says where inside a chat a message was (a Telegram forum
# topic): an answer goes to the same place.
ROUTING_KEYS = ("message_thread_id",)
# ``InboundMessage.metadata`` key: what the channel needs to read a
# message's pictures, recording or file again after a restart (their bytes
# are never kept: gateway/inbox.py keeps this), by the channel's own keys
# (Feishu: ``i`` image keys, ``a`` a recording's file key with ``af`` its
# file name and ``an`` its label, ``f`` / ``fn`` a file's key and name).
AGAIN = "read_again"

# What an inbound event is (``InboundMessage.kind``): a new message, or a
# change to one the user sent earlier (``message_id`` names it): its new
# text (a Telegram edit) or its withdrawal (a Feishu recall, text "").
MESSAGE = "message"
EDIT = "edit"
RECALL = "recall"
# The chat now has another id (a Telegram group upgraded to a supergroup):
# ``chat_id`` is the new one, ``metadata["moved_from"]`` the old; its
# history follows. No words, no sender.
MOVED = "moved"
# A member left the group, or was removed (``sender_id``: theirs): what
# they set up there to speak for them (scheduled jobs) goes. No words.
LEFT = "left"
# ... whose member is the bot itself: it was removed from the group (or
# left it), and the group's own memory goes (memory/groupnotes.py). No
# platform id has this shape (Telegram's are numbers, Feishu's ou_/on_ ids).
BOT_LEFT = "@bot"


# The history's mark for pictures nobody saw (a download failed, the model
# could not read them): memory must not take the reply as their description.
PHOTO_NOT_READ = "[photo not read]"
# ... and for a file nobody read (nor its scans, for a scanned PDF).
FILE_NOT_READ = "[file not read]"
# A voice message's mark, before its transcript; and one nobody could hear.
VOICE = "[voice]"
VOICE_NOT_READ = "[voice not read]"
# An audio file's (a recording sent as music or as a file): "[audio NAME]",
# "[audio NAME not read]"; audio_mark and audio_not_read make them.
_NOT_HEARD = re.compile(r"^\[(?:voice|audio [^\]\n]+) not read\](?= |\n|$)")
# Marks of pictures or a file in front of a stored user message ("[photo]",
# "[3 photos]", PHOTO_NOT_READ, "[file plan.pdf]", "[file not read]"), with
# an album's videos the model did not watch after them ("[2 photos] [video
# not watched]", channels/marks.py), as ``InboundMessage.placeholder`` puts
# them there.
_PICTURE_MARK = re.compile(
    r"^\[(?:photo|[1-9]\d* photos|photo not read|file [^\]\n]+)\]"
    r"(?: \[(?:video|[1-9]\d* videos) not watched\])?(?= |$)"
)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# Japanese writes kanji with kana; Chinese slang borrows a lone の at most.
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff].*[\u3040-\u30ff\u31f0-\u31ff]", re.S)
_MARKS = re.compile(r"\[[^\]\n]*\]")  # "[photo]", "[voice not read]", "[file a.pdf]": ours, not the user's words
# Code and links are in no one's language: a Chinese user's pasted
# traceback or URL says nothing about what to answer them in.
_NOT_WORDS = re.compile(r"```.*?(?:```|$)|`[^`\n]+`|\b(?:https?|ftp)://\S+|\bwww\.\S+", re.S | re.I)
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def notes_in_chinese(msg: InboundMessage) -> bool:
    """Is a note the bot sends by itself about ``msg`` (a picture, voice or
    file not read) written in Chinese? By the message's own words first
    (its text, what it forwards; our marks are not words): kana (Japanese)
    -> no, Chinese characters -> yes, Latin letters only -> no; a message
    without words goes by the sender's app language (``locale``)."""
    zh = words_in_chinese("\n".join([msg.text, *(f.text for f in msg.forwarded)]))
    return app_in_chinese(msg) if zh is None else zh


def app_in_chinese(msg: InboundMessage) -> bool:
    """Is the sender's app set to Chinese (Telegram's ``language_code``
    "zh-hans", a Feishu app on ``open.feishu.cn``)? The last word on the
    language of what the bot says, when nothing said tells."""
    return msg.locale.lower().startswith("zh")


def words_in_chinese(text: str) -> bool | None:
    """Are ``text``'s words Chinese? Kana (Japanese) -> no, Chinese
    characters -> yes (an English word among them changes nothing), Latin
    letters only -> no; None when it has no words to tell by: our marks,
    emoji, code, links, or a bare "ok" (a Chinese speaker types it too)."""
    words = _NOT_WORDS.sub(" ", _MARKS.sub(" ", text))
    if _KANA.search(words):
        return False
    if _HAN.search(words):
        return True
    latin = _LATIN_WORD.findall(words)
    if not latin or (len(latin) == 1 and len(latin[0]) <= 3):
        return None
    return False


def audio_mark(name: str = "") -> str:
    """What stands for a recording: ``[voice]`` for a voice message (``name``
    ""), ``[audio NAME]`` for an audio file, named as the user sees it."""
    return f"[audio {name}]" if name else VOICE


def audio_not_read(name: str = "") -> str:
    """:func:`audio_mark` of a recording nobody could hear."""
    return f"[audio {name} not read]" if name else VOICE_NOT_READ


def not_heard(text: str) -> bool:
    """Does ``text`` (a forward's words) start with the mark of a recording nobody heard?"""
    return _NOT_HEARD.match(text) is not None


def picture_mark(content: str) -> str:
    """The mark of pictures (or a file) a stored user message starts with; "" for none."""
    m = _PICTURE_MARK.match(content)
    return m.group(0) if m else ""


@dataclass(frozen=True)
class Image:
    """A picture a user sent, for a chat model that reads images
    (``agent.vision``): its bytes and their type (``image/jpeg``, ``image/png``,
    ``image/gif`` or ``image/webp``, read from the bytes, not the platform's
    word). It reaches the model with its message only; the history keeps
    the message's ``placeholder`` instead, so its bytes are never stored,
    shown in a repr or logged."""

    data: bytes = field(repr=False)
    mime: str


@dataclass(frozen=True)
class Audio:
    """A voice message (or an audio file), to be transcribed (``agent.transcription``) before
    the model reads it; the transcript becomes the message's words. Its
    bytes are never stored, shown in a repr or logged."""

    data: bytes = field(repr=False)
    mime: str
    filename: str  # the transcription endpoint reads the format from its extension
    # An audio file's name as the user sees it (title and performer, or its
    # file name): its words are marked as its transcript. "": a voice message.
    name: str = ""


@dataclass(frozen=True)
class Document:
    """A file a user sent, read as text (``agent.documents``,
    channels/documents.py) for the model with its message only: the
    history keeps the message's ``placeholder`` (``[file notes.md]``), and
    what the file said is learnt from the reply, as a photo's is. The text
    is never shown in a repr or logged."""

    name: str  # the file name the sender gave it
    text: str = field(repr=False)  # cut to the token budget
    total_chars: int = 0  # of the whole text, before the cut
    pages: int | None = None  # a PDF's
    # More of it than the model reads at once (up to channels/documents.py
    # KEEP_CHARS), for ``file_read`` to read on; "": no more than ``text``.
    more: str = field(default="", repr=False)

    @property
    def full_text(self) -> str:
        return self.more or self.text

    @property
    def cut(self) -> bool:
        """Whether the model reads only the start of the file."""
        return self.total_chars > len(self.text)


@dataclass(frozen=True)
class Quoted:
    """The message a user replied to (or the part of it they quoted), for
    the model to read with their words: "what does this mean?" needs it."""

    author: str  # their display name; "you" for the bot's own message
    text: str
    partial: bool = False  # the user quoted part of it (Telegram's quote)


@dataclass(frozen=True)
class Forwarded:
    """One message the user forwarded (Telegram's ``forward_origin``, a
    message of a Feishu chat record): someone else's words, or the user's
    own from earlier, passed on. Memory must not take them as the user
    saying them now, so they keep their author and date."""

    author: str  # their display name; "" when the platform hides it
    text: str  # its words, with a mark for what it held instead ("[photo]")
    sent_at: datetime | None = None  # when it was first sent
    # A forwarded voice message's recording, for the loop to transcribe
    # into ``text`` (agent.transcription), then dropped: never stored.
    audio: Audio | None = None


# What of a forward the model reads and the history keeps: a long chat
# record is a file's worth of text, and every later turn re-reads it.
FORWARD_TOKENS = 4000


# A blank line in a forward's words: memory reads the first blank line of a
# message with forwards as where the user's own words begin (extraction's
# rule 10), so a forward's paragraphs are joined by a single line break.
_BLANK_LINES = re.compile(r"\s*\n\s*\n\s*")


def _forward_words(text: str) -> str:
    return _BLANK_LINES.sub("\n", text.strip())


def forwarded_text(items: Sequence[Forwarded], max_tokens: int = FORWARD_TOKENS) -> str:
    """Forwarded messages as the history and the model read them: a mark
    that names the author (``[forwarded from Alice, sent 2026-02-28]``, the
    words on the next line) or, for several, ``[forwarded: 3 messages, ...]``
    and one ``author: words`` line each (a message's later lines indented
    by two spaces); cut to ``max_tokens``, saying how many messages were
    left out. "" for none."""
    if not items:
        return ""
    days = sorted({i.sent_at.date().isoformat() for i in items if i.sent_at is not None})
    when = "" if not days else f", sent {days[0]}" if len(days) == 1 else f", sent {days[0]} to {days[-1]}"
    if len(items) == 1:
        by = f" from {items[0].author}" if items[0].author else ""
        return prefix_within(f"[forwarded{by}{when}]\n{_forward_words(items[0].text)}", max_tokens).rstrip()
    lines = [f"[forwarded: {len(items)} messages{when}]"]
    used = estimate_tokens(lines[0])
    shown = 0
    for item in items:
        # A message's later lines are indented: one saying "Bob: ..." must
        # not read as a message of Bob's (extraction rule 10, memory/llm.py).
        line = f"{item.author or 'someone'}: " + _forward_words(item.text).replace("\n", "\n  ")
        cost = estimate_tokens(line)
        if used + cost > max_tokens:
            if not shown:  # one long first message: its start rather than nothing
                lines.append(prefix_within(line, max(max_tokens - used, 1)).rstrip() + "…")
                shown = 1
            break
        lines.append(line)
        used += cost
        shown += 1
    if shown < len(items):
        lines.append(f"[{len(items) - shown} more not shown]")
    return "\n".join(lines)


def forwards_from_history(
    content: str, origins: Sequence[tuple[str, datetime | None]]
) -> tuple[str, tuple[Forwarded, ...], str]:
    """A stored message with forwards (``InboundMessage.history_text``) taken
    apart again, given each forward's author and date (``origins``, kept
    beside it): its placeholder, its forwards (their words as the history
    shows them: a long one cut, those left out "") and the user's own
    words. The first blank line ends the forwards (their words have none,
    :func:`forwarded_text`). Content that does not hold them: no forwards."""
    start = content.find("[forwarded")
    if not origins or start < 0:
        return "", (), content
    placeholder = content[:start].strip()
    block, _, own = content[start:].partition("\n\n")
    lines = block.split("\n")[1:]  # after the mark
    if len(origins) == 1:
        author, sent_at = origins[0]
        return placeholder, (Forwarded(author, "\n".join(lines), sent_at),), own
    texts: list[str] = []
    for line in lines:
        if line.startswith("  ") and texts:  # a message's later line
            texts[-1] += "\n" + line[2:]
        elif len(texts) < len(origins) and not re.fullmatch(r"\[\d+ more not shown\]", line):
            head = f"{origins[len(texts)][0] or 'someone'}: "
            texts.append(line.removeprefix(head))
    texts += [""] * (len(origins) - len(texts))
    return placeholder, tuple(Forwarded(a, t, d) for (a, d), t in zip(origins, texts, strict=True)), own


@dataclass(frozen=True)
class InboundMessage:
    channel: str  # "telegram" | "feishu" | "terminal"
    chat_id: str
    sender_id: str
    text: str
    message_id: str = ""
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    is_group: bool = False
    mentioned: bool = False  # the bot was @-mentioned
    reply_to_bot: bool = False  # the message replies to one of the bot's
    sender_name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = MESSAGE  # MESSAGE | EDIT | RECALL | MOVED | LEFT
    images: tuple[Image, ...] = ()  # for the model, with this message only
    audio: Audio | None = None  # a voice message, transcribed by the loop
    documents: tuple[Document, ...] = ()  # files read as text, for the model with this message only
    # What stands for the message's pictures in the history and memory
    # ("[photo]", "[photo not read]"), in front of its words; "" for none.
    placeholder: str = ""
    # The message replied to, for the model with this message only: Tier 0
    # and memory keep the user's own words (the quote may be someone else's,
    # and is theirs to have remembered), as they keep a photo's mark only.
    quoted: Quoted | None = None
    # Messages the user forwarded, in order; ``text`` holds only their own
    # words (a comment sent with them), maybe "".
    forwarded: tuple[Forwarded, ...] = ()
    # The language the sender's app is set to, as the platform says it
    # (Telegram's ``language_code``, "zh-hans"; Feishu: its app's, by the
    # domain), "" when unknown: a note of the bot's own about a message
    # without words is written in it (:func:`notes_in_chinese`).
    locale: str = ""

    @property
    def session_key(self) -> str:
        """Tier 0 history is kept per chat."""
        return f"{self.channel}:{self.chat_id}"

    @property
    def history_text(self) -> str:
        """The message as the history (Tier 0) and memory keep it: the
        placeholder of its pictures, the messages it forwards (marked as
        forwarded, with their authors), then its own words."""
        text = self.text
        if self.forwarded:
            text = forwarded_text(self.forwarded) + (f"\n\n{text}" if text.strip() else "")
        return f"{self.placeholder} {text}".strip() if self.placeholder else text


@dataclass(frozen=True)
class Attachment:
    """A file sent with a reply (``/export``), the reply's text its caption.

    It may hold everything kept about a user, so it is never written to the
    outbox (gateway/delivery.py drops it when it cannot go out now) and its
    bytes never show in a repr or a log line.

    A large one is not held in memory: ``file`` is an anonymous temporary
    file (no name on disk, gone when closed or when the process ends) and
    ``data`` is empty. Whoever sends it reads it through :meth:`open` and
    calls :meth:`close` once it is sent or dropped (gateway/delivery.py)."""

    filename: str
    data: bytes = field(default=b"", repr=False)
    mime: str = "text/markdown"
    file: BinaryIO | None = field(default=None, repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.data) if self.file is None else os.fstat(self.file.fileno()).st_size

    def open(self) -> BinaryIO:
        """The content from its start, as a file of its own to read (and
        close: an uploader may close what it is given); each call starts over,
        for a retried upload."""
        if self.file is None:
            return io.BytesIO(self.data)
        f = os.fdopen(os.dup(self.file.fileno()), "rb")  # shares the offset: sends of one file take turns
        f.seek(0)
        return f

    def close(self) -> None:
        """Release the file (its bytes go with it); safe twice."""
        if self.file is not None:
            self.file.close()


@dataclass(frozen=True)
class OutboundMessage:
    channel: str
    chat_id: str
    text: str
    reply_to: str = ""  # message id to reply to, where the channel supports it
    # The inbound message this answers (its ``message_id``), quoted or not:
    # a channel that can withdraw its own messages withdraws this reply
    # when that message is recalled. "" for what answers nothing (cron).
    answers: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    attachment: Attachment | None = None  # a file, sent with ``text`` as its caption
    # Whose message this answers (the memory user, as ``IdentityMap``
    # resolves the sender), so a reply kept in the outbox is erased with the
    # rest of their data. "" when the builder does not know: the gateway
    # then looks it up in the chat's history.
    owner: str = ""
    # The same for every attempt at sending this reply, across restarts
    # (kept with it in the outbox): a channel whose platform de-duplicates
    # sends derives each part's idempotency key from it (Feishu's ``uuid``),
    # so a part that went out before a cut is not shown twice. Not part of
    # equality: two replies of the same words are the same reply to compare.
    send_key: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False)
    # A preview of a reply still being written (``agent.streaming``):
    # ``text`` is the reply so far, each draft replacing the one before.
    # Every draft of one reply, and the reply itself when it is done (an
    # ordinary message, ``draft`` False), carry the same ``send_key``, so a
    # channel that shows drafts as a message of their own turns that message
    # into the reply. Best effort: a draft is never kept in the outbox, and
    # one that cannot go out now is dropped.
    draft: bool = False
    # The reply whose drafts were shown under this ``send_key`` will not
    # come (its turn was superseded, taken in, or cut by a stop): a channel
    # takes those drafts away (``BaseChannel.drop_draft``). No words; never
    # kept in the outbox.
    dropped: bool = False
    # The outbox row of a reply on its way (``Delivery.hold``: written
    # before its Tier 0 row and its send, removed once the platform took
    # it), 0 for none. Not stored in the row (it is the row's own id).
    kept: int = field(default=0, compare=False)
    # A scheduled job's reply: the run it is for, "<slot> <job id>"
    # (gateway/outbox.py ``job_slot``), "" otherwise. Its outbox row marks
    # the slot answered in the same transaction, so a kill before cron.db
    # records the run does not have the job run again at the next start.
    job_slot: str = ""
    # That reply is the job's fallback (the model could not be reached):
    # its slot's mark says so, and cron.db records the run as one.
    job_fallback: bool = False
    # Told the text still to send each time a part of a split reply went
    # out (the platform answered it), by a channel that splits (Telegram):
    # a send a stop cuts then keeps only that rest, not the parts the chat
    # has (gateway/delivery.py). Set by the sender for one send; never stored.
    on_part_sent: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def answering(
        cls, msg: InboundMessage, text: str, attachment: Attachment | None = None, *, owner: str = ""
    ) -> OutboundMessage:
        """``text`` as the answer to ``msg``: in its chat, quoting it in a
        group (several people talk there), in the same place inside the chat
        (a Telegram forum topic). ``answers`` names ``msg`` always, so a
        channel can find this reply again when ``msg`` is recalled;
        ``owner``: whose message ``msg`` is, where the caller knows."""
        return cls(
            channel=msg.channel,
            chat_id=msg.chat_id,
            text=text,
            reply_to=msg.message_id if msg.is_group else "",
            answers=msg.message_id,
            metadata={k: msg.metadata[k] for k in ROUTING_KEYS if k in msg.metadata},
            attachment=attachment,
            owner=owner,
        )


@dataclass
class _Takeover:
    """A message a later one, still being gathered, is to take in."""

    over: asyncio.Event = field(default_factory=asyncio.Event)  # gathered: published or given up
    taken: bool = False  # published, naming the message (metadata "supersedes")


class NotKept(Wordless):
    """The durable inbox could not write a message (gateway.db full or
    locked): it is not on the bus, and the channel must not let the
    platform take it as received (Telegram's offset stays before it,
    Feishu gets no answer yet), so it comes again once there is room. Its
    text is the failure's type (gateway/inbox.py), fit for a log."""


class Keeper(Protocol):
    """Where an inbound message is written before it goes on the bus
    (gateway/inbox.py); raises :class:`NotKept` when it cannot be."""

    async def keep(self, msg: InboundMessage, waiting: Mapping[str, Any] | None = None) -> None: ...

    def done(self, msg: InboundMessage, *, written: bool = False) -> None: ...


class MessageBus:
    def __init__(self, maxsize: int = 1000, inbox: Keeper | None = None) -> None:
        self._maxsize = maxsize
        # The durable inbox: a message is written there before it is on the
        # bus, so before a channel lets the platform take it as received
        # (Telegram's offset, Feishu's answer); the bus itself is memory only.
        self.inbox = inbox
        self.inbound: asyncio.Queue[InboundMessage] = asyncio.Queue(maxsize)
        self._outbound: dict[str, asyncio.Queue[OutboundMessage]] = {}
        self._takeovers: dict[tuple[str, str], _Takeover] = {}
        # kept whole by keep(), not on the bus yet: not written twice (a
        # recall names the message it recalls: the kind tells them apart)
        self._kept: set[tuple[str, str, str]] = set()

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-chat state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"takeovers": self._takeovers}

    async def keep(self, msg: InboundMessage, waiting: Mapping[str, Any] | None = None) -> None:
        """Write ``msg`` to the inbox before the platform is told it
        arrived, when it goes on the bus only later (a Feishu event is
        answered at once, its pictures read after); ``waiting``: what is
        still to be read from the platform for it (its keys: gateway/inbox.py).
        Raises :class:`NotKept` when it cannot be written."""
        if self.inbox is None:
            return
        await self.inbox.keep(msg, waiting)
        if not waiting:
            self._kept.add((msg.session_key, msg.message_id, msg.kind))

    def unkeep(self, msg: InboundMessage) -> None:
        """A message :meth:`keep` wrote will not go on the bus after all
        (recalled before its turn, a picture alone that could not be read)."""
        self._kept.discard((msg.session_key, msg.message_id, msg.kind))
        if self.inbox is not None:
            self.inbox.done(msg, written=True)

    async def publish_inbound(self, msg: InboundMessage) -> None:
        gone = msg.metadata.get("supersedes")
        takeover = self._takeovers.get((msg.session_key, gone)) if isinstance(gone, str) else None
        if takeover is not None:  # marked before the put: the held turn must not wake to a message not yet there
            takeover.taken = True
        if self.inbox is not None and (msg.session_key, msg.message_id, msg.kind) not in self._kept:
            await self.inbox.keep(msg)  # NotKept: not on the bus
        self._kept.discard((msg.session_key, msg.message_id, msg.kind))
        await self.inbound.put(msg)

    # A comment published on its own whose forwards then begin a burst
    # (channels/telegram.py): the burst goes on the bus only once it is
    # quiet, and a comment answered meanwhile would get a reply of its own
    # as well as the burst's. The channel holds the comment from the burst's
    # start until it is published (or given up); the process loop, before it
    # sends the comment's reply, waits for that and drops the reply if the
    # burst took it in.

    def hold(self, session_key: str, message_id: str) -> None:
        """A message being gathered is to take in ``message_id``: a reply to it waits (:meth:`taken_in`)."""
        self._takeovers.setdefault((session_key, message_id), _Takeover())

    def release(self, session_key: str, message_id: str) -> None:
        """The message that was to take in ``message_id`` is published (or given up). Safe twice."""
        takeover = self._takeovers.pop((session_key, message_id), None)
        if takeover is not None:
            takeover.over.set()

    def holding(self, session_key: str, message_id: str) -> bool:
        """Is ``message_id`` held by a message still being gathered?"""
        return (session_key, message_id) in self._takeovers

    async def taken_in(self, session_key: str, message_id: str) -> bool:
        """Wait while ``message_id`` is held; True when the message that
        held it was published taking it in (its own reply is not to go)."""
        takeover = self._takeovers.get((session_key, message_id))
        if takeover is None:
            return False
        await takeover.over.wait()
        return takeover.taken

    async def consume_inbound(self) -> InboundMessage:
        return await self.inbound.get()

    def outbound_queue(self, channel: str) -> asyncio.Queue[OutboundMessage]:
        q = self._outbound.get(channel)
        if q is None:
            q = self._outbound[channel] = asyncio.Queue(self._maxsize)
        return q

    async def publish_outbound(self, msg: OutboundMessage) -> None:
        await self.outbound_queue(msg.channel).put(msg)

    def offer_outbound(self, msg: OutboundMessage) -> bool:
        """Queue ``msg`` if there is room now (a draft: better not shown
        than waited for); False when the channel's queue is full."""
        try:
            self.outbound_queue(msg.channel).put_nowait(msg)
        except asyncio.QueueFull:
            return False
        return True
