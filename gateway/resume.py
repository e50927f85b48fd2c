"""Answering, at start, the messages whose turn a stop cut.

The gateway killed (SIGKILL, OOM, power) while the model writes a reply
leaves the user's message in Tier 0 (written while the model runs,
gateway/loop.py) and nothing answering it; the platform will not send it
again (Telegram's offset is confirmed by the next poll, Feishu's event was
acknowledged). At the next start, :func:`resume_cut_turns` hands each such
message back to the process loop, as if redelivered (its row is not
written twice), oldest first. That runs before any channel or webhook can
deliver a message (a new one would no longer leave the cut turn its
chat's last row, or be taken for one and answered ahead of it), and the
resumed turns wait (``ProcessLoop.resume_gate``) until the replies kept
in the outbox from the last run are held, so theirs go out after.

The message is rebuilt from its row's words (as an edit may have left
them) and its context: one that forwards messages is taken apart again
into the forwards (authors and dates kept in the context, words as the
history shows them) and the user's own words, so it is recalled for,
answered and cited (memory_save: "from a message you forwarded") as the
forward it was.

A stop also finds messages taken from the platform whose turn had not
begun (queued behind a slow turn in their chat, still on the bus, or cut
before their row was written): ``ProcessLoop.close`` writes their rows as
their turns would have (the platform will not send them again), after the
cut turn's, so they are answered here too, in order. A crash runs no
``close``: those are lost (their row is written when their turn begins).

A cut turn is a user row with no reply after it in its chat's current
session (a chat's turns run one after another, so the last row, and the
rows a stop wrote after it), with:

* its :class:`TurnContext`, how the loop got it (group or not, addressed
  or not, its routing, what a private chat's message replied to, the
  files and pictures it carried). Rows without one are not answered:
  written before it was kept, a scheduled job's (the scheduler runs those
  again), or a group message whose quoted message Tier 0 does not keep
  (another member's words; answering the words alone would answer
  something else);
* a platform message id (one the gateway made up answers nothing);
* memory allowed to learn from it: an incognito turn is not answered
  again (the user turned the bot's attention away; not picked up later);
* no reply to it waiting in the outbox (that goes out from there, once;
  its row is marked ``APOLOGISED`` first, or a later start, the outbox
  row gone, would answer it again);
* no apology sent for it, no reply whose own row could not be written
  (a full disk), and not refused over the rate limit when it was resumed
  (the row's context is then ``APOLOGISED``, written before the apology,
  the reply or the limit's note is sent): that was its one answer;
* written within ``gateway.resumeWithinMinutes``: an older one gets
  nothing, logged.

The messages taken but never begun (queued behind a turn, on the bus):
their first record is the durable inbox (gateway/inbox.py), written
before the platform was told they arrived. :func:`resume_inbox`, run after
:func:`resume_cut_turns`, hands each back to the loop as if it came again
(its turn writes its Tier 0 row), oldest first, so in arrival order in
each chat and after the chat's cut turn; one with a Tier 0 row was begun
(the cut-turn resume's, or answered) and is not handed back, nor one older
than ``gateway.resumeWithinMinutes``. A command is handed back too, and the
loop answers it with a note asking for it again (a cut ``/forget all`` is
not run again unasked); its inbox row goes before its answer is sent, so
one answered before the kill is not told this. One that carried pictures, a recording
or a file not yet read (their bytes are never stored) is read again from
its platform in its turn when its channel can (:class:`ReadsAgain`:
Feishu, by the resource keys kept with it; a group member's name is
looked up again too), so it is answered as it would have been; otherwise,
or when that read fails, it gets one note asking for it again, in its
chat's turn, after the replies resumed before it.

Not answered because never stored: commands (kept out of Tier 0; a cut
``/forget all`` is not run again unasked; one a stop cut or found
waiting gets a note asking for it again, sent by ``ProcessLoop._park``,
or after a crash from the inbox, above),
messages over the rate limit (the user was told), group messages not
addressed to the bot, stickers.
A superseded turn's rows are erased before the turn that took it in
starts, and a recalled message's row is erased with it.

What a message carried beyond its words, per kind:

* a file (a document read as text): kept in recent files before the row
  is written (gateway/recent_files.py), and the context names it by its
  row id and where the model's read was cut, so the resumed turn reads
  it again as the first turn did. Where it can no longer be had (the stop
  came before its background write, ``/forget all``, past the day,
  documents turned off), the message is answered once with a note in the
  user's language asking them to send it again (no model call; marked
  ``APOLOGISED`` first, as an apology is);
* a photo (and a scanned PDF's pages, which went as pictures): the model
  saw it as content parts, whose bytes are never stored, so it gets the
  same note asking for it again;
* a voice note or audio file: the row is written after the transcription,
  with the transcript as its words, so the resumed turn reads what the
  first one read (not transcribed again). One a stop found not yet
  transcribed (waiting its turn, or mid-transcription) gets the note:
  its recording is not kept.

The reply's own row is written before the reply is sent (gateway/loop.py),
so a reply that went out is never answered again. A stop after the row is
written but before the send finishes does not lose that reply: it was
written to the outbox before its row (gateway/delivery.py, "A reply on its
way"), so the next start sends it from there, and its message is skipped
here ("its reply waits in the outbox"), not answered a second time.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import structlog

from memory.clock import format_ts, parse_ts

from .bus import (
    MESSAGE, ROUTING_KEYS, Document, InboundMessage, Quoted, forwards_from_history,
    notes_in_chinese, picture_mark,
)
from .inbox import Dropped, Inbox
from .logging import error_fields
from .outbox import Outbox
from .prompt import QUOTE_CHARS
from .recent_files import KeptFile, RecentFiles
from .sessions import APOLOGISED, SessionStore, StoredMessage

__all__ = ["FileMark", "Redelivered", "Resumed", "TurnContext", "lost_note", "mark_later", "resume_cut_turns", "resume_inbox", "unread_note"]

log = structlog.get_logger(component="gateway")

# Rows older than the window are still looked at (and logged as skipped) this far back.
_LOOK_BACK = timedelta(days=1)


@dataclass(frozen=True)
class FileMark:
    """A file a message carried, as the model read it: found again in
    recent files by its row id (and name), cut where the first turn's was."""

    name: str
    id: int  # its KeptFile id; 0: not kept (recent files off)
    shown: int  # characters the model read with the message (Document.text)
    total: int  # of the whole text (Document.total_chars)


@dataclass(frozen=True)
class TurnContext:
    """What the loop knew of a message beyond its words and sender."""

    is_group: bool = False
    mentioned: bool = False
    reply_to_bot: bool = False
    sender_name: str = ""
    routing: Mapping[str, Any] = field(default_factory=dict)  # bus.ROUTING_KEYS (a forum topic)
    locale: str = ""
    # Each forwarded message's author and when it was first sent: with the
    # row's words (which hold the forwards' own) the message is rebuilt as
    # the forward it was, so it is answered and cited as one.
    forwards: tuple[tuple[str, datetime | None], ...] = ()
    # What a private chat's message replied to (the bot's words, the user's
    # own, a post they chose to bring), as much as the prompt shows; a
    # group's is never kept (another member's words).
    quoted: Quoted | None = None
    # The files it carried (kept in recent files) and how many pictures:
    # the row keeps only their mark ("[file q3.pdf]", "[photo]"), so a
    # resumed turn reads the files again from recent files, and a picture,
    # whose bytes are never stored, is asked for again (:func:`lost_note`).
    files: tuple[FileMark, ...] = ()
    photos: int = 0
    # A recording not transcribed yet (its turn never began: a stop found
    # it waiting, ProcessLoop._park): its bytes are gone, so it is asked for again.
    unheard: bool = False

    @classmethod
    def of(cls, msg: InboundMessage, kept: Sequence[KeptFile] = ()) -> TurnContext | None:
        """None for a message Tier 0 does not keep whole: in a group, the
        message it quotes went to the model with it only (another member's
        words). ``kept``: its documents as recent files kept them, in order."""
        if msg.kind != MESSAGE or (msg.quoted is not None and msg.is_group):
            return None
        q = msg.quoted
        ids = [k.id for k in kept] + [0] * (len(msg.documents) - len(kept))
        return cls(
            quoted=None if q is None else Quoted(q.author, q.text.strip()[:QUOTE_CHARS], q.partial),
            is_group=msg.is_group, mentioned=msg.mentioned, reply_to_bot=msg.reply_to_bot,
            sender_name=msg.sender_name, routing={k: msg.metadata[k] for k in ROUTING_KEYS if k in msg.metadata},
            locale=msg.locale, forwards=tuple((f.author, f.sent_at) for f in msg.forwarded),
            files=tuple(FileMark(d.name, i, len(d.text), d.total_chars) for d, i in zip(msg.documents, ids, strict=False)),
            photos=len(msg.images), unheard=msg.audio is not None or any(f.audio is not None for f in msg.forwarded),
        )

    def dumps(self) -> str:
        d: dict[str, Any] = {"g": self.is_group, "m": self.mentioned, "r": self.reply_to_bot, "n": self.sender_name,
                             "k": dict(self.routing), "l": self.locale}
        if self.forwards:
            d["f"] = [[a, format_ts(t) if t is not None else ""] for a, t in self.forwards]
        if self.quoted is not None:
            d["q"] = [self.quoted.author, self.quoted.text, self.quoted.partial]
        if self.files:
            d["d"] = [[f.name, f.id, f.shown, f.total] for f in self.files]
        if self.photos:
            d["p"] = self.photos
        if self.unheard:
            d["a"] = True
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str) -> TurnContext | None:
        """None for "" (not kept) or anything unreadable."""
        try:
            d = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(d, dict):
            return None
        routing = d.get("k")
        forwards = d.get("f")
        try:
            origins = tuple((str(a), parse_ts(t) if t else None) for a, t in forwards) if isinstance(forwards, list) else ()
        except (TypeError, ValueError):
            return None
        q = d.get("q")
        if q is not None and not (isinstance(q, list) and len(q) == 3):
            return None
        try:
            files = tuple(FileMark(str(n), int(i), int(a), int(b)) for n, i, a, b in d.get("d") or ())
            photos = int(d.get("p") or 0)
        except (TypeError, ValueError):
            return None
        return cls(is_group=bool(d.get("g")), mentioned=bool(d.get("m")), reply_to_bot=bool(d.get("r")),
                   sender_name=str(d.get("n") or ""), routing=routing if isinstance(routing, dict) else {},
                   locale=str(d.get("l") or ""), forwards=origins,
                   quoted=None if q is None else Quoted(str(q[0]), str(q[1]), bool(q[2])), files=files, photos=photos,
                   unheard=bool(d.get("a")))

    def message(self, row: StoredMessage, documents: tuple[Document, ...] = ()) -> InboundMessage:
        """``row`` as the loop first got it: its words as Tier 0 keeps them,
        a forward's taken apart again (the user's own words, the forwards
        as the history shows them), a file's or a picture's mark apart
        from the words (``documents``: the files, read again)."""
        placeholder, forwarded, text = forwards_from_history(row.content, self.forwards)
        if not forwarded and (self.files or self.photos) and not self.unheard:
            placeholder = picture_mark(row.content)
            text = row.content[len(placeholder):].strip()
        return InboundMessage(
            channel=row.channel, chat_id=row.chat_id, sender_id=row.sender_id, text=text,
            message_id=row.message_id, timestamp=parse_ts(row.created_at), is_group=self.is_group,
            mentioned=self.mentioned, reply_to_bot=self.reply_to_bot, sender_name=self.sender_name,
            metadata=dict(self.routing), locale=self.locale, placeholder=placeholder, forwarded=forwarded,
            quoted=self.quoted, documents=documents,
        )


_LOST_FILES = "Sorry, I restarted before I could answer, and {what} you sent ({names}) {are} no longer with me. Please send {it} again."
_LOST_FILES_ZH = "抱歉，我在回答之前重启了，你发来的文件（{names}）没有留下。请再发一次。"
_LOST_PHOTOS = "Sorry, I restarted before I could answer, and {what} you sent {are} no longer with me. Please send {it} again."
_LOST_PHOTOS_ZH = "抱歉，我在回答之前重启了，你发来的图片没有留下。请再发一次。"
_LOST_RECORDING = "Sorry, I restarted before I could listen to your voice message. Please send it again."
_LOST_RECORDING_ZH = "抱歉，我还没来得及听你的语音消息就重启了。请再发一次。"


_UNREAD = "Sorry, I restarted before I could read your message. Please send it again."
_UNREAD_ZH = "抱歉，我还没来得及读完你的消息就重启了。请再发一次。"


def unread_note(msg: InboundMessage) -> str:
    """What a message the inbox kept before the platform's part of it was
    read (a Feishu chat record's messages, the message it replied to) is
    answered with: its words alone would answer something else."""
    return _UNREAD_ZH if notes_in_chinese(msg) else _UNREAD


def lost_note(context: TurnContext, msg: InboundMessage) -> str:
    """What a cut turn whose files or pictures cannot be had again is
    answered with, in the user's language: send them again (its words
    alone would answer something else)."""
    zh = notes_in_chinese(msg)
    if context.files:  # a scanned PDF's pages are pictures too: the file is what to send
        names = ", ".join(f.name for f in context.files)
        if zh:
            return _LOST_FILES_ZH.format(names=names)
        many = len(context.files) > 1
        return _LOST_FILES.format(what="the files" if many else "the file", names=names,
                                  are="are" if many else "is", it="them" if many else "it")
    if not context.photos:
        return _LOST_RECORDING_ZH if zh else _LOST_RECORDING
    if zh:
        return _LOST_PHOTOS_ZH
    many = context.photos > 1
    return _LOST_PHOTOS.format(what="the photos" if many else "the photo", are="are" if many else "is",
                               it="them" if many else "it")


async def _read_again(context: TurnContext, row: StoredMessage, files: RecentFiles | None) -> tuple[Document, ...] | None:
    """The files ``row``'s message carried, as the model read them, from
    recent files; None when one is no longer there (its background write
    cut by the stop, /forget all, past the day) or a picture came with them."""
    if context.photos or context.unheard:
        return None
    if not context.files:
        return ()
    if files is None:
        return None
    index = {f.id: f for f in files.files(f"{row.channel}:{row.chat_id}")}
    docs: list[Document] = []
    for mark in context.files:
        kept = index.get(mark.id)
        text = await files.text(kept) if kept is not None and kept.name == mark.name else None
        if text is None:
            return None
        docs.append(Document(mark.name, text[: mark.shown], total_chars=mark.total, pages=kept.pages if kept else None,
                             more=text if mark.shown < len(text) else ""))
    return tuple(docs)


class Resumer(Protocol):
    def resume(self, msg: InboundMessage, row: StoredMessage, *, lost: str = "") -> None: ...


@dataclass(frozen=True)
class Resumed:
    answered: list[StoredMessage]  # handed to the loop, oldest first
    skipped: list[tuple[StoredMessage, str]]  # with why
    # Of the skipped, those whose reply waits in the outbox and whose mark
    # the disk refused: :func:`mark_later` marks them once it can.
    unmarked: list[StoredMessage] = field(default_factory=list)


async def resume_cut_turns(
    loop: Resumer, sessions: SessionStore, outbox: Outbox, *, now: datetime, within: timedelta,
    files: RecentFiles | None = None,
) -> Resumed:
    """Hand the turns a stop cut within ``within`` of ``now`` back to
    ``loop`` (see the module docstring), a file's read again from
    ``files``; logs each one skipped, with its chat, id, age and why,
    never its words."""
    done = Resumed([], [])
    if within <= timedelta(0):
        return done
    since = now - max(within, _LOOK_BACK)
    for row in await sessions.unanswered_last(format_ts(since)):
        context = TurnContext.loads(row.context)
        age = now - parse_ts(row.created_at)
        why = ""
        if row.context == APOLOGISED:
            why = "answered with an apology"  # or with the rate limit's note (resumed, refused)
        elif context is None:
            why = "not kept whole (a job's, a group's quote, or from before)"
        elif not row.message_id or row.message_id.startswith("g-"):
            why = "no platform message id"
        elif not row.learn:
            why = "incognito"
        elif age > within:
            why = "older than gateway.resumeWithinMinutes"
        elif context.is_group and not (context.mentioned or context.reply_to_bot):
            why = "a group message not addressed to the bot"
        elif await outbox.answering(row.channel, row.chat_id, row.message_id):
            why = "its reply waits in the outbox"
            if not await _outbox_answers(sessions, row):
                done.unmarked.append(row)
        if why:
            done.skipped.append((row, why))
            log.info("message a stop left unanswered: not answered now", reason=why, channel=row.channel,
                     chat_id=row.chat_id, message_id=row.message_id, age_s=round(age.total_seconds()))
            continue
        assert context is not None
        done.answered.append(row)
        docs = await _read_again(context, row, files)
        log.warning("answering a message a stop left unanswered", channel=row.channel, chat_id=row.chat_id,
                    message_id=row.message_id, age_s=round(age.total_seconds()),
                    **({"asked_again": "files" if context.files else "photos" if context.photos else "recording"}
                       if docs is None else {}))
        if docs is None:  # answered with the note alone: the files or pictures are not to be had
            msg = context.message(row)
            loop.resume(msg, row, lost=lost_note(context, msg))
        else:
            loop.resume(context.message(row, docs), row)
    return done


async def _outbox_answers(sessions: SessionStore, row: StoredMessage) -> bool:
    """The reply waiting in the outbox is ``row``'s one answer: its row is
    marked so (``APOLOGISED``, as for a reply whose own row could not be
    written) before the outbox sends it, or a later start, finding the row
    unanswered once the outbox row is gone, would answer it again (a note
    asking for a photo again, held for its mark when a kill came). A mark
    the disk refuses does not stop the start: logged, False (the reply
    still goes; :func:`mark_later` marks it once there is room)."""
    try:
        await sessions.mark_apologised(f"{row.channel}:{row.chat_id}", row.message_id)
    except (sqlite3.Error, OSError) as exc:
        log.error("message whose reply waits in the outbox not recorded as answered (the disk is full?); tried "
                  "again until there is room", channel=row.channel, chat_id=row.chat_id, message_id=row.message_id,
                  **error_fields(exc))
        return False
    return True


async def mark_later(sessions: SessionStore, rows: Sequence[StoredMessage], *, retry: float, most: float) -> None:
    """Mark ``rows`` answered (:attr:`Resumed.unmarked`) once the disk lets
    it, tried again after ``retry`` seconds doubling up to ``most``, until
    done; cancelled (the gateway stops), the next start tries again."""
    left = list(rows)
    delay = retry
    while left:
        await asyncio.sleep(delay)
        try:
            while left:
                row = left[0]
                await sessions.mark_apologised(f"{row.channel}:{row.chat_id}", row.message_id)
                left.pop(0)
        except (sqlite3.Error, OSError):  # still full: the pause grows
            delay = min(most, delay * 2)
        except Exception as exc:  # not the disk: waiting will not mend it; a later start may answer them again
            log.error("messages answered from the outbox not recorded as answered", rows=len(left), **error_fields(exc))
            return
    log.warning("messages answered from the outbox recorded as answered now", rows=len(rows))


@dataclass(frozen=True)
class Redelivered:
    answered: list[InboundMessage]  # handed to the loop (or asked for again), oldest first
    skipped: list[tuple[InboundMessage, str]]  # with why


Reread = Callable[[], Awaitable[InboundMessage]]


class Redeliverer(Protocol):
    def redeliver(self, msg: InboundMessage, *, lost: str = "", again: Reread | None = None) -> None: ...


@runtime_checkable
class ReadsAgain(Protocol):
    """A channel that can make a message the inbox kept whole again from
    its platform (channels/feishu: a group member's name, pictures, a
    recording or a file, by the keys kept with it); raises when it cannot."""

    name: str

    async def read_again(self, msg: InboundMessage) -> InboundMessage: ...


async def resume_inbox(
    loop: Redeliverer, inbox: Inbox, *, now: datetime, within: timedelta,
    channels: Mapping[str, ReadsAgain] | None = None, outbox: Outbox | None = None,
) -> Redelivered:
    """Hand the messages the inbox kept whose turn never began back to
    ``loop``, oldest first (see the module docstring); a message whose
    pictures, recording or file are gone is read again from its platform
    in its turn, when its channel (``channels``, by name) can, and is
    answered with a note asking for them again when it cannot, by the loop
    too: in its turn, after the chat's resumed replies. Logs each one, with
    its chat, id and age, never its words."""
    done = Redelivered([], [])
    gone: list[Dropped] = []
    channels = channels or {}
    for w in await inbox.waiting():
        msg = w.msg
        age = now - w.received_at
        why = ""
        if within <= timedelta(0):
            why = "gateway.resumeWithinMinutes is 0"
        elif age > within:
            why = "older than gateway.resumeWithinMinutes"
        elif outbox is not None and await outbox.answering(msg.channel, msg.chat_id, msg.message_id):
            # Its turn wrote the reply to the outbox (on its way) but not its
            # Tier 0 row (a full disk): the outbox sends that one answer.
            why = "its reply waits in the outbox"
        if why:
            gone.append((w.id, msg.channel, msg.chat_id, msg.message_id))
            done.skipped.append((w.msg, why))
            log.info("message taken before a stop, never begun: not answered now", reason=why, channel=msg.channel,
                     chat_id=msg.chat_id, message_id=msg.message_id, age_s=round(age.total_seconds()))
            continue
        done.answered.append(msg)
        source = channels.get(msg.channel)
        if source is not None and (w.again or w.unnamed):
            # Made whole in its turn (its row stays until the turn ends): a
            # picture is downloaded again, a member's name looked up.
            lost = "" if not w.again else lost_note(TurnContext(
                photos=w.pictures, unheard=w.unheard, files=tuple(FileMark(f, 0, 0, 0) for f in w.unread_files)), msg) \
                if w.pictures or w.unheard or w.unread_files else unread_note(msg)
            log.warning("answering a message taken before a stop, never begun; read again from the platform",
                        channel=msg.channel, chat_id=msg.chat_id, message_id=msg.message_id,
                        age_s=round(age.total_seconds()), media=w.again)
            loop.redeliver(msg, lost=lost, again=functools.partial(source.read_again, msg))
            continue
        if w.pictures or w.unheard or w.unread:
            # Its row stays until the loop sends the note (deleted first, the
            # note its one answer: ProcessLoop._inbox_answered): dropped here,
            # a kill before the note would leave silence; kept after it (a
            # full disk), every later start would ask again.
            log.warning("message taken before a stop, never begun: asked for again (its pictures, recording or file are gone)",
                        channel=msg.channel, chat_id=msg.chat_id, message_id=msg.message_id,
                        age_s=round(age.total_seconds()))
            # The cut turns' own note, in the chat's turn: not ahead of the replies resumed before it.
            loop.redeliver(msg, lost=lost_note(TurnContext(
                photos=w.pictures, unheard=w.unheard, files=tuple(FileMark(f, 0, 0, 0) for f in w.unread_files)), msg)
                if w.pictures or w.unheard or w.unread_files else unread_note(msg))
            continue
        log.warning("answering a message taken before a stop, never begun", channel=msg.channel,
                    chat_id=msg.chat_id, message_id=msg.message_id, age_s=round(age.total_seconds()))
        loop.redeliver(msg)  # its row goes when its turn ends
    await inbox.drop(gone)  # a full disk keeps them, tried again later: the start goes on
    return done
