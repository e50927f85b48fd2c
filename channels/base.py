"""What every channel is: it turns platform events into ``InboundMessage``
on the bus and sends ``OutboundMessage`` back. A channel checks its
allow-list and never calls the agent itself."""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from gateway.bus import (
    Audio,
    Image,
    InboundMessage,
    MessageBus,
    NotKept,
    OutboundMessage,
    audio_mark,
    audio_not_read,
    not_heard,
    notes_in_chinese,
    picture_mark,
)
from gateway.logging import error_fields
from memory.errorlog import Wordless

from .documents import FILE_NOT_READ, NO_TEXT, document_note, document_placeholder, read_document, read_scanned
from .media import FAILED, NOT_READ, ImageError, answering, image_note, placeholder, recording_note

__all__ = ["UNREADABLE_REPLY", "UNREADABLE_REPLY_ZH", "BaseChannel", "ChannelFatalError", "DeliveryError", "LeftForLater", "NotPermitted", "rest_of"]

# What a photo, sticker or voice message gets instead of silence, which
# reads as a bot that is down.
UNREADABLE_REPLY = "Sorry, I can only read text for now. Please type your message (a photo or file caption works too)."
UNREADABLE_REPLY_ZH = "抱歉，我目前只能读文字。请直接打字发给我（给图片或文件配上文字说明也可以）。"


class ChannelFatalError(Exception):
    """The channel cannot run with this configuration (e.g. invalid token).
    The gateway stops with this message instead of retrying forever."""


class DeliveryError(Wordless):
    """A reply, or the end of one, was not delivered.

    ``retryable``: the platform may take it later (network, 5xx, a rate
    limit longer than the channel waits, the channel not running), so the
    gateway keeps it in the outbox (gateway/delivery.py); False: the
    platform refused the request itself (chat not found, bot blocked),
    and sending it again cannot help. ``remaining``: when the first parts
    of a split reply went out, the text still to send (so no part goes out
    twice); None when nothing went out. The message names the chat and
    part, never the reply's text (so it is :class:`~memory.errorlog.Wordless`)."""

    def __init__(self, message: str, *, retryable: bool, remaining: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.remaining = remaining


class NotPermitted(Exception):
    """The platform refuses a read because the app lacks a permission its
    admin must grant (``scope``): asking again fails the same way until
    then, for every chat, so the caller should stop asking for a while."""

    def __init__(self, scope: str, message: str) -> None:
        super().__init__(message)
        self.scope = scope


class LeftForLater(Exception):
    """A read from the platform (a picture, a recording, a file, a quote, a
    chat record) cut short by a stop, for a message the durable inbox keeps with the keys to read
    it again: it is not published now, and no note is sent; its row is the
    next start's to answer (gateway/resume.py), as after a kill."""


class FileTooLarge(DeliveryError):
    """The platform refused a reply's file as too large for it (Telegram's
    413, Feishu's 234006): the same file again cannot help, a smaller one
    (gzipped) may. Raised when a channel's ``max_file_bytes`` (its
    ``maxUploadBytes``) says more than the platform takes."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def rest_of(text: str, parts: Sequence[str], index: int) -> str:
    """``text`` from where ``parts[index]`` starts: what is left to send
    when the parts before it went out. Splitters cut ``text`` into
    substrings in order (dropping whitespace between them), so each part
    is found after the one before; the original separators are kept."""
    pos = 0
    for i, part in enumerate(parts[: index + 1]):
        found = text.find(part, pos)
        if found < 0:  # not a splitter of that kind: joined, nothing lost
            return "\n\n".join(parts[index:])
        if i == index:
            return text[found:]
        pos = found + len(part)
    return ""


def with_images(msg: InboundMessage, images: tuple[Image, ...]) -> InboundMessage:
    """``msg`` with its pictures, marked "[photo]" in the history; raises
    :class:`~channels.media.ImageError` for none."""
    if not images:
        raise ImageError(FAILED, "no picture found")
    # A mark already there (an album's videos not watched) stays after the pictures'.
    return dataclasses.replace(msg, images=images, placeholder=f"{placeholder(len(images))} {msg.placeholder}".strip())


def _answered(msg: InboundMessage) -> dict[str, Any]:
    """What of ``msg`` is answered without a thing not read, for
    :func:`~channels.media.answering`: the user's own words, and how many
    of its forwards say more than the mark of the picture or file they
    were ("[photo]": the thing not read itself); and the note's language."""
    forwarded = sum(f.text.strip() != picture_mark(f.text.strip()) for f in msg.forwarded)
    return {"has_text": bool(msg.text.strip()), "forwarded": forwarded, "zh": notes_in_chinese(msg)}


class BaseChannel(abc.ABC):
    name: str = "base"
    # Who a sender is for memory, ``(channel, sender_id) -> user``: the
    # gateway sets its ``IdentityMap.resolve`` here (channels know no
    # identities), so a note the channel sends itself names whose message
    # it answers and, kept in the outbox, is erased with their data.
    owner_of_sender: Callable[[str, str], str] | None = None
    # The app language of all its users, when the channel knows one
    # (Feishu's, by its domain or config; "": per sender, or unknown): what
    # a scheduled job's note speaks when nothing said in the chat tells.
    locale: str = ""

    # Seconds a message's pictures (or recording) may take to download before
    # the user is told it failed: the chat's later messages wait for them, to
    # keep its order (Telegram: in the chat's lane, channels/lanes.py).
    image_timeout: float = 30.0
    # Seconds between tries of a message the inbox cannot keep (a full
    # disk), the last repeated (:meth:`_put`): a full disk is not hammered.
    hold_pauses: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
    # A sender not in allowFrom is a warning once in this many seconds (the
    # id to add, if they should be); their other lines, such as an unlisted
    # member's every line in a group, are debug: not a warning per message.
    drop_warn_every: float = 3600.0
    drop_warn_senders: int = 1024  # senders remembered; the oldest is forgotten first

    def __init__(
        self,
        bus: MessageBus,
        allow_from: Iterable[str] = (),
        *,
        max_image_bytes: int | None = None,
        max_audio_bytes: int | None = None,
        max_document_bytes: int | None = None,
        max_document_tokens: int = 12_000,
        max_file_bytes: int | None = None,
    ) -> None:
        """``max_image_bytes``: pictures up to this size go to the model
        (``agent.vision``); ``max_audio_bytes``: voice messages up to this
        size are transcribed (``agent.transcription``); ``max_document_bytes``:
        files up to this size are read as text, at most
        ``max_document_tokens`` of it (``agent.documents``). None: not read.
        ``max_file_bytes``: the largest file the platform lets the bot send
        (gateway/delivery.py compresses a larger ``/export``); None: no limit."""
        self.bus = bus
        self.max_file_bytes = max_file_bytes
        self.allow_from = {str(a).lstrip("@").lower() for a in allow_from if str(a).strip()}
        self.max_image_bytes = max_image_bytes
        self.max_audio_bytes = max_audio_bytes
        self.max_document_bytes = max_document_bytes
        self.max_document_tokens = max_document_tokens
        self.log = structlog.get_logger(channel=self.name)
        self._sender_task: asyncio.Task[None] | None = None
        self.monotonic: Callable[[], float] = time.monotonic
        self._drop_warned: dict[str, float] = {}  # sender id -> when their drop was last a warning

    def is_allowed(self, *ids: str) -> bool:
        """Empty allow-list: everyone. Otherwise any of the sender's ids
        (numeric id, username) must be listed."""
        if not self.allow_from:
            return True
        return any(i and str(i).lstrip("@").lower() in self.allow_from for i in ids)

    async def publish(self, msg: InboundMessage, *ids: str) -> bool:
        if not self.is_allowed(msg.sender_id, *ids):
            self._log_dropped(msg)
            return False
        await self._put(msg)
        return True

    def _log_dropped(self, msg: InboundMessage) -> None:
        """A message from a sender not in allowFrom: a warning the first
        time in :attr:`drop_warn_every`, else debug."""
        now = self.monotonic()
        last = self._drop_warned.get(msg.sender_id)
        level = "warning" if last is None or now - last >= self.drop_warn_every else "debug"
        if level == "warning":
            self._drop_warned.pop(msg.sender_id, None)  # re-inserted last: the dict stays oldest first
            self._drop_warned[msg.sender_id] = now
            while len(self._drop_warned) > self.drop_warn_senders:
                del self._drop_warned[next(iter(self._drop_warned))]
        getattr(self.log, level)("message from sender not in allowFrom dropped", sender_id=msg.sender_id,
                                 chat_id=msg.chat_id)

    async def _put(self, msg: InboundMessage) -> None:
        """``msg`` on the bus. While the inbox cannot keep it (gateway.db
        full: :class:`~gateway.bus.NotKept`) it is held here, tried again
        after a pause that grows (``hold_pauses``): the caller has not told
        the platform it arrived (Telegram's offset stays before it; a
        Feishu event is kept in the inbox before it is answered), so a stop
        meanwhile loses nothing: the platform sends it again."""
        tries = 0
        while True:
            try:
                await self.bus.publish_inbound(msg)
                return
            except NotKept:
                await asyncio.sleep(self.hold_pauses[min(tries, len(self.hold_pauses) - 1)])
                tries += 1

    async def decline_unreadable(self, msg: InboundMessage, kind: str, *ids: str) -> bool:
        """Answer a message the bot cannot read (``kind``: photo, sticker,
        voice...) with :data:`UNREADABLE_REPLY`, where a text would have been
        answered: a private chat, or a group message addressed to the bot,
        from an allowed sender. The note goes straight to the outbound queue:
        there is nothing for the agent to do or for memory to learn."""
        if msg.is_group and not (msg.mentioned or msg.reply_to_bot):
            return False
        if not self.is_allowed(msg.sender_id, *ids):
            self._log_dropped(msg)
            return False
        self.log.info("message without text answered with a note", kind=kind, chat_id=msg.chat_id)
        await self._note(msg, UNREADABLE_REPLY_ZH if notes_in_chinese(msg) else UNREADABLE_REPLY)
        return True

    async def publish_image(
        self, msg: InboundMessage, fetch: Callable[[], Awaitable[Sequence[Image]]], *ids: str
    ) -> bool:
        """Publish ``msg`` (its words: a caption, maybe "") with the pictures
        ``fetch`` downloads (it raises :class:`~channels.media.ImageError`
        for one it cannot read). Nothing is downloaded for a group message
        not addressed to the bot (its words go on as any such message's) or
        from a sender not in the allow-list. A picture not read gets the user
        a short note; their words still go on, marked "[photo not read]",
        so a caption is answered and kept. Needs ``max_image_bytes``."""
        limit = self.max_image_bytes
        assert limit is not None, "publish_image without max_image_bytes"

        async def complete() -> InboundMessage:
            return with_images(msg, tuple(await fetch()))

        return await self._publish_fetched(
            msg, complete, ids, what="picture", not_read=NOT_READ,
            note=lambda reason, _: image_note(reason, limit, **_answered(msg)),
        )

    async def publish_voice(
        self, msg: InboundMessage, fetch: Callable[[], Awaitable[Audio]], *ids: str, name: str = ""
    ) -> bool:
        """Publish a voice message (or an audio file, ``name``: as the user
        sees it, channels/media.py ``audio_label``) with its recording, for
        the loop to transcribe; the same rules as :meth:`publish_image`.
        Needs ``max_audio_bytes``."""
        limit = self.max_audio_bytes
        assert limit is not None, "publish_voice without max_audio_bytes"

        async def complete() -> InboundMessage:
            audio = dataclasses.replace(await fetch(), name=name)
            return dataclasses.replace(msg, audio=audio, placeholder=audio_mark(name))

        return await self._publish_fetched(
            msg, complete, ids, what="audio file" if name else "voice message", not_read=audio_not_read(name),
            note=lambda reason, _: recording_note(reason, limit, name=name, **_answered(msg)),
        )

    async def attach_forwarded_voices(
        self, msg: InboundMessage, fetches: Mapping[int, Callable[[], Awaitable[Audio]]], *ids: str,
        names: Mapping[int, str] | None = None,
    ) -> InboundMessage | None:
        """``msg`` with the recordings of the voice messages (and audio
        files: ``names``, a forward's place -> the file's name) it forwards
        (``fetches``: a forward's place in ``msg.forwarded`` -> its
        download) attached, for the loop to transcribe as their authors'
        words (``Forwarded.audio``). Nothing is downloaded where
        :meth:`publish_image` downloads nothing (the forwards keep their
        ``[voice]`` mark). A recording not downloaded becomes ``[voice not
        read]`` (``[audio NAME not read]``) and the user gets a note; None
        when that leaves nothing to answer (the note was all). Needs
        ``max_audio_bytes``."""
        names = names or {}
        if not fetches or (msg.is_group and not (msg.mentioned or msg.reply_to_bot)):
            return msg
        limit = self.max_audio_bytes
        assert limit is not None, "attach_forwarded_voices without max_audio_bytes"
        if not self.is_allowed(msg.sender_id, *ids):
            return msg  # published (and dropped, logged) as any message of theirs

        async def one(fetch: Callable[[], Awaitable[Audio]]) -> Audio | ImageError:
            try:
                async with asyncio.timeout(self.image_timeout):
                    return await fetch()
            except ImageError as exc:
                return exc
            except TimeoutError:
                return ImageError(FAILED, f"no answer within {self.image_timeout:.0f}s")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a download bug must not lose the message: told and logged
                self.log.error("voice message download failed", chat_id=msg.chat_id, message_id=msg.message_id,
                               **error_fields(exc))  # its text may name the file: type and place only
                return ImageError(FAILED, type(exc).__name__)

        got = await asyncio.gather(*(one(f) for f in fetches.values()))
        items = list(msg.forwarded)
        failed: list[tuple[str, ImageError]] = []
        for n, heard in zip(fetches, got):
            name = names.get(n, "")
            if isinstance(heard, Audio):
                items[n] = dataclasses.replace(items[n], audio=dataclasses.replace(heard, name=name))
            else:
                caption = items[n].text.removeprefix(audio_mark(name)).strip()
                items[n] = dataclasses.replace(items[n], text=f"{audio_not_read(name)} {caption}".strip())
                failed.append((name, heard))
        msg = dataclasses.replace(msg, forwarded=tuple(items))
        if not failed:
            return msg
        self.log.warning("forwarded recording not read", reasons=[e.reason for _, e in failed],
                         errors=[str(e) for _, e in failed], chat_id=msg.chat_id, message_id=msg.message_id)
        rest = [f for f in items if not not_heard(f.text)]
        reasons = {e.reason for _, e in failed}
        reason = reasons.pop() if len(reasons) == 1 else FAILED
        # One audio file is named; voice messages (or several) are said as before.
        name = failed[0][0] if len(failed) == 1 else ""
        await self._note(msg, recording_note(reason, limit, name=name, has_text=bool(msg.text.strip()),
                                             forwarded=len(rest), zh=notes_in_chinese(msg)))
        return msg if msg.text.strip() or rest else None

    async def publish_document(
        self, msg: InboundMessage, name: str, fetch: Callable[[], Awaitable[bytes]], *ids: str
    ) -> bool:
        """Publish a message with the file ``name`` (``fetch`` downloads its
        bytes), read as text for the model; the same rules as
        :meth:`publish_image`: a file not read gets the user a short note,
        and their words still go on, marked ``[file not read]``. A scanned
        PDF, when the model reads pictures (``max_image_bytes``), goes to
        it as its first pages' scans. Needs ``max_document_bytes``."""
        limit = self.max_document_bytes
        assert limit is not None, "publish_document without max_document_bytes"

        async def complete() -> InboundMessage:
            return await self.with_document(msg, name, await fetch())

        return await self._publish_fetched(
            msg, complete, ids, what="file", not_read=FILE_NOT_READ,
            # What is answered without it is said as a picture's note says it.
            note=lambda reason, _: document_note(reason, limit, has_text=False, zh=notes_in_chinese(msg))
            + answering(**_answered(msg)),
        )

    async def with_document(self, msg: InboundMessage, name: str, data: bytes) -> InboundMessage:
        """``msg`` with the file ``name`` (its bytes ``data``) read as text
        for the model, as :meth:`publish_document` reads it; raises
        :class:`~channels.media.ImageError` for one it cannot read."""
        limit = self.max_document_bytes
        assert limit is not None, "with_document without max_document_bytes"
        # Parsing a PDF is pure Python: off the event loop.
        images: tuple[Image, ...] = ()
        try:
            doc = await asyncio.to_thread(read_document, data, name, max_bytes=limit, max_tokens=self.max_document_tokens)
        except ImageError as exc:
            # A scanned PDF goes to a model that reads pictures as its pages' scans.
            if exc.reason != NO_TEXT or self.max_image_bytes is None:
                raise
            scanned = await asyncio.to_thread(read_scanned, data, name, max_image_bytes=self.max_image_bytes)
            if scanned is None:
                raise
            doc, images = scanned
        return dataclasses.replace(msg, documents=(doc,), images=images, placeholder=document_placeholder(doc.name))

    async def _publish_fetched(
        self,
        msg: InboundMessage,
        complete: Callable[[], Awaitable[InboundMessage]],
        ids: Sequence[str],
        *,
        what: str,
        not_read: str,
        note: Callable[[str, bool], str],  # (reason, the message has words) -> what the user is told
    ) -> bool:
        if msg.is_group and not (msg.mentioned or msg.reply_to_bot):
            return await self.publish(msg, *ids) if msg.text.strip() else False
        if not self.is_allowed(msg.sender_id, *ids):
            return await self.publish(msg, *ids)  # logged and dropped there
        try:
            async with asyncio.timeout(self.image_timeout):
                done = await complete()
        except LeftForLater:
            raise  # no note: the next start reads it again and answers it
        except ImageError as exc:
            reason, detail, told = exc.reason, str(exc), exc.note
        except TimeoutError:
            reason, detail, told = FAILED, f"no answer within {self.image_timeout:.0f}s", ""
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a download bug must not lose the message: told and logged
            self.log.error(f"{what} download failed", chat_id=msg.chat_id, message_id=msg.message_id,
                           **error_fields(exc))  # its text may name the file: type and place only
            reason, detail, told = FAILED, type(exc).__name__, ""
        else:
            return await self.publish(done, *ids)
        self.log.warning(f"{what} not read", reason=reason, error=detail, chat_id=msg.chat_id,
                         message_id=msg.message_id)
        has_text = bool(msg.text.strip() or msg.forwarded)  # forwarded words go on too
        await self._note(msg, told + answering(**_answered(msg), without="them") if told else note(reason, has_text))
        if has_text:
            await self.publish(dataclasses.replace(msg, placeholder=f"{not_read} {msg.placeholder}".strip()), *ids)
        return True

    async def _note(self, msg: InboundMessage, text: str) -> None:
        """A note of the channel's own, straight to the outbound queue:
        nothing for the agent to do or for memory to learn."""
        owner = self.owner_of_sender(msg.channel, msg.sender_id) if self.owner_of_sender is not None else ""
        await self.bus.publish_outbound(OutboundMessage.answering(msg, text, owner=owner))

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and begin receiving. Raises ChannelFatalError when the
        configuration cannot work."""

    async def stop_receiving(self) -> None:
        """Take no more messages in, but keep sending: the gateway calls this
        first at shutdown, answers everything already on the bus, and only
        then calls :meth:`stop`. A message refused from here on must stay
        with the platform for redelivery (not acknowledged). Safe to call
        twice, and before :meth:`stop` only; the default does nothing."""

    @abc.abstractmethod
    async def stop(self, timeout: float | None = None) -> None:
        """Stop receiving and release resources; safe to call twice.
        ``timeout``: seconds this stop's waits on the platform (Telegram's
        offset confirmation, Feishu's withdrawals) may take in all, what is
        left of the gateway's stop; None: their own bounds."""

    @abc.abstractmethod
    async def send(self, msg: OutboundMessage) -> None:
        """Deliver one reply (split as the platform requires). A failure
        should be a :class:`DeliveryError` saying whether a later attempt
        can succeed and what is left to send; any other exception is taken
        as permanent."""

    async def send_draft(self, msg: OutboundMessage) -> bool:
        """Show ``msg.text``, a reply still being written
        (``OutboundMessage.draft``), in place of this reply's previous
        draft. Returns False when this channel (or this chat) shows no
        drafts: the gateway then sends this reply's later drafts nowhere.
        The finished reply comes through :meth:`send` with the same
        ``send_key``; a channel that showed a draft as a message of its own
        makes that message the reply there. Best effort: an exception
        drops the draft (and the later ones of this reply), never the
        reply. The default shows none."""
        return False

    async def drop_draft(self, msg: OutboundMessage) -> None:
        """The reply whose drafts were shown under ``msg.send_key`` will
        not come (``OutboundMessage.dropped``): take away what they left in
        the chat. Best effort, like a draft. The default has nothing to
        take away (no drafts, or drafts that fade by themselves)."""
        return None

    async def run_sender(self) -> None:
        """Drain this channel's outbound queue; a failed send is logged and
        the loop goes on with the next message. The gateway sends through
        its outbox instead (gateway/delivery.py), which keeps a reply that
        cannot go out now; this is for a channel used on its own."""
        q = self.bus.outbound_queue(self.name)
        while True:
            msg = await q.get()
            try:
                if msg.draft:
                    await self.send_draft(msg)
                elif msg.dropped:
                    await self.drop_draft(msg)
                else:
                    await self.send(msg)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad send must not stop the channel
                self.log.error("send failed", chat_id=msg.chat_id, **error_fields(exc))  # not its text: the reply's words
            finally:
                q.task_done()
