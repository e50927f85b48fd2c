"""The durable inbox: every message taken from a platform, in gateway.db
(table ``inbox``, migration 015 of ``gateway/sessions.py``) from the
moment it is taken until its turn ends.

Why: a platform is told a message was received before the gateway has
answered it (Telegram's next ``getUpdates`` confirms every update whose
message is on the bus; Feishu is answered on arrival), and the bus is an
in-memory queue. Without the inbox a crash (SIGKILL, out of memory,
power) lost every message taken but not yet begun, its first durable
record being the Tier 0 row its turn writes. Now :meth:`MessageBus.
publish_inbound <gateway.bus.MessageBus.publish_inbound>` awaits
:meth:`Inbox.keep` before the message goes on the bus, so before the
channel can confirm it (Telegram's offset moves past an update only once
its message is on the bus; a Feishu text's webhook or long-connection
handler returns only once it is); the process loop drops the row when
the turn ends, however it ended (:meth:`Inbox.done`); the next start
answers what is left (gateway/resume.py ``resume_inbox``), after the cut
turns, in arrival order per chat, once: a message with a Tier 0 row was
begun, and is the cut-turn resume's or answered already.

What is kept: what the loop needs to answer the message again, as JSON:
its words, forwards, quote, files read as text (recent files keep them a
day anyway), routing and flags. Never a picture's or a recording's bytes
(``Image``/``Audio``: never stored); only that there were some, and the
channel's keys to read them again (a Feishu message's resource keys: the
next start downloads them again, gateway/resume.py; so too the id of the
message it replied to, and a chat record's, whose messages were not yet
read), so such a message gets a note asking for it again only when they
cannot be. Only new messages the loop may
answer are kept (not edits, recalls, stickers, nor group messages not
addressed to the bot): the cost is one grouped insert (memory/batch.py)
and one grouped delete per message.

A write that fails (a full disk, gateway.db locked) raises
:class:`~gateway.bus.NotKept`: the message is not put on the bus and the
channel does not let the platform take it as received (Telegram's offset
stays before it, and polling tries again after a growing pause; Feishu is
answered with an error, and sends it again), so it is answered once
there is room, and not lost meanwhile (Tier 0, in the same file, could
not have kept its turn either). Logged as an error once, then counted.

Edits and recalls (``InboundMessage.kind`` EDIT, RECALL) are kept too, in
their own table (``revisions``, migration 018), from the moment they are
taken until the loop applied them: Feishu is answered and Telegram's
offset passes them as for a message, and one a stop or a crash cut (queued
behind a turn, still in a Feishu chat's lane) is applied at the next start
(:meth:`Inbox.revisions`; gateway/app.py), or the recalled words would
stay in the history and memory. A write that fails raises
:class:`~gateway.bus.NotKept` as for a message. So too a member's leaving
a group (LEFT), one row per member and chat (``message_id`` holds the
member's id: a redelivered event is the same row), or their jobs would
go on posting as them there.

An edit, recall or leaving whose application raised (the loop's or the
next start's) stays for the next start, its ``attempts`` counted
(migration 022); one that failed :data:`REVISION_ATTEMPTS` times is
dropped, logged as an error by its ids alone (a row that can never apply
must not fail at every start forever).

At start, the rows not to be answered (begun already, skipped by
``resume_inbox``, unreadable) are deleted. A delete the disk refuses (full,
read-only) must not stop the gateway coming up: the rows stay, one error
says so by type and code, and they are tried again in the background, the
pause doubling from :data:`DROP_RETRY` to :data:`DROP_RETRY_MAX`, until
they go or the gateway stops (the next start finds them again and decides
anew: a begun one is begun still).

Neither table names an owner; an erasure (``/forget all``, ``myclaw
memory forget --user``) finds a user's rows by their sender
(:meth:`Inbox.forget_owner`), or the next start would answer and learn
from an erased user's words.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import structlog

from memory.batch import RowBatcher, insert_statement
from memory.clock import Clock, format_ts, parse_ts
from memory.db import Database

from .bus import AGAIN, EDIT, LEFT, MESSAGE, RECALL, ROUTING_KEYS, Document, Forwarded, InboundMessage, NotKept, Quoted
from .logging import error_fields
from .revisions import edited_words

__all__ = ["DROP_RETRY", "DROP_RETRY_MAX", "REVISION_ATTEMPTS", "Dropped", "Inbox", "MessageKey", "Revision", "Waiting",
           "dumps", "kept", "loads", "revision"]

log = structlog.get_logger(component="gateway")

MessageKey = tuple[str, str, str]  # a message's (channel, chat_id, message_id)

# Failed applications of a kept edit, recall or leaving before it is
# dropped: a cause that passes (gateway.db or memory.db locked, a full
# disk) has had a live try and two starts to pass.
REVISION_ATTEMPTS = 3

# Seconds before rows a full disk kept at start are tried again (doubling, up to the max).
DROP_RETRY = 5.0
DROP_RETRY_MAX = 300.0

# A row to delete by its id and its message: a retry never takes a later
# row that was given the same id.
Dropped = tuple[int, str, str, str]  # (id, channel, chat_id, message_id)


def kept(msg: InboundMessage, waiting: Mapping[str, Any] | None = None) -> bool:
    """Is ``msg`` one the inbox keeps: a new message with a platform id
    that the loop would answer (addressed to the bot, with something in
    it, or something still to be read for it: ``waiting``)?"""
    if msg.kind != MESSAGE or not msg.message_id:
        return False
    if msg.is_group and not (msg.mentioned or msg.reply_to_bot):
        return False
    return bool(msg.text.strip() or msg.images or msg.documents or msg.forwarded or msg.audio is not None or waiting)


def revision(msg: InboundMessage) -> bool:
    """Is ``msg`` an edit or recall the inbox keeps (it names its message),
    or a member's leaving a group (it names the member)?"""
    if msg.kind == LEFT:
        return bool(msg.sender_id)
    return msg.kind in (EDIT, RECALL) and bool(msg.message_id)


def _revision_key(msg: InboundMessage) -> tuple[str, str, str, str]:
    """The row's (channel, chat_id, message_id, kind): a leaving is the
    member's (Feishu's event names no message), so one a member and chat."""
    return msg.channel, msg.chat_id, msg.sender_id if msg.kind == LEFT else msg.message_id, msg.kind


def _revision_payload(msg: InboundMessage) -> str:
    """An edit or recall as kept: the message's form (:func:`dumps`) and
    the metadata an edit is applied by (a comment's or caption's lengths)."""
    d = json.loads(dumps(msg))
    d["e"] = {k: v for k, v in msg.metadata.items() if isinstance(v, (str, int, float, bool, list)) or v is None}
    return json.dumps(d, ensure_ascii=False)


def dumps(msg: InboundMessage, waiting: Mapping[str, Any] | None = None) -> str:
    """``msg`` as the inbox keeps it (no picture or recording bytes);
    ``waiting`` (kept as "w"): what was still to be read from the platform
    when it was written, by the channel's keys: ``i`` pictures, ``a`` a
    recording, ``f`` a file's name, ``r`` a chat record, ``q`` the message
    replied to, ``k`` the platform's keys (a Feishu image or file key),
    ``n`` the sender's name (a Feishu group member's, looked up). The
    channel's keys to read its media again (metadata :data:`AGAIN`) are
    kept as "x", whole or not."""
    d: dict[str, Any] = {
        "s": msg.sender_id, "t": msg.text, "ts": format_ts(msg.timestamp), "g": msg.is_group,
        "m": msg.mentioned, "r": msg.reply_to_bot, "n": msg.sender_name, "l": msg.locale, "p": msg.placeholder,
        "k": {k: msg.metadata[k] for k in ROUTING_KEYS if k in msg.metadata},
    }
    if msg.quoted is not None:
        d["q"] = [msg.quoted.author, msg.quoted.text, msg.quoted.partial]
    if msg.forwarded:
        d["f"] = [[f.author, f.text, format_ts(f.sent_at) if f.sent_at is not None else "", f.audio is not None]
                  for f in msg.forwarded]
    if msg.documents:
        d["d"] = [[x.name, x.text, x.total_chars, x.pages, x.more] for x in msg.documents]
    if msg.images:
        d["i"] = len(msg.images)
    if msg.audio is not None:
        d["a"] = True
    if waiting:
        d["w"] = dict(waiting)
    if isinstance(again := msg.metadata.get(AGAIN), Mapping) and again:
        d["x"] = dict(again)
    return json.dumps(d, ensure_ascii=False)


@dataclass(frozen=True)
class Waiting:
    """A message the inbox kept whose turn never ended, as it came back."""

    id: int
    received_at: datetime
    msg: InboundMessage  # without its pictures or recording (see ``unheard`` and ``pictures``)
    pictures: int = 0  # how many pictures it carried (their bytes are not kept)
    unheard: bool = False  # it carried a recording (its own or a forward's), not kept
    # Still to be read from the platform when the run stopped (its file, a
    # chat record, the message it replied to): names of files never read,
    # and whether anything was (then its words alone would answer something else).
    unread_files: tuple[str, ...] = ()
    unread: bool = False
    # Its pictures, recording, unread file, quote or chat record can be read
    # again from the platform by the keys the channel kept (metadata
    # ``AGAIN``: a Feishu message's resource keys, the id of the message it
    # replied to), and nothing else was still to be read (a forward's recording).
    again: bool = False
    # A group member's name was still being looked up (Feishu): the channel may find it now.
    unnamed: bool = False


def loads(channel: str, chat_id: str, message_id: str, payload: str) -> tuple[InboundMessage, int, bool]:
    """The message :func:`dumps` kept, how many pictures it had, whether
    it had a recording. Raises ValueError for a payload it cannot read."""
    d = json.loads(payload)
    if not isinstance(d, dict):
        raise ValueError("inbox payload is not an object")
    q = d.get("q")
    forwards = tuple(Forwarded(str(a), str(t), parse_ts(s) if s else None) for a, t, s, _ in d.get("f") or ())
    docs = tuple(Document(str(n), str(t), int(c), p if p is None else int(p), str(m)) for n, t, c, p, m in d.get("d") or ())
    w = d.get("w") or {}
    unheard = bool(d.get("a") or w.get("a")) or any(bool(f[3]) for f in d.get("f") or ())
    routing = d.get("k")
    metadata: dict[str, Any] = dict(routing) if isinstance(routing, dict) else {}
    if isinstance(d.get("x"), dict):
        metadata[AGAIN] = d["x"]
    msg = InboundMessage(
        channel=channel, chat_id=chat_id, sender_id=str(d["s"]), text=str(d["t"]), message_id=message_id,
        timestamp=parse_ts(str(d["ts"])), is_group=bool(d.get("g")), mentioned=bool(d.get("m")),
        reply_to_bot=bool(d.get("r")), sender_name=str(d.get("n") or ""),
        metadata=metadata, locale=str(d.get("l") or ""),
        placeholder=str(d.get("p") or ""), quoted=None if q is None else Quoted(str(q[0]), str(q[1]), bool(q[2])),
        forwarded=forwards, documents=docs,
    )
    return msg, int(d.get("i") or w.get("i") or 0), unheard


def unread(payload: str) -> tuple[tuple[str, ...], bool]:
    """Of a kept payload: the files never read, and whether anything was
    still to be read (a sender's name aside: the words answer the same)."""
    w = json.loads(payload).get("w") or {}
    return ((str(w["f"]),) if w.get("f") else ()), bool(set(w) - {"n"})


def readable_again(payload: str) -> tuple[bool, bool]:
    """Of a kept payload: can what it lacks (pictures' or a recording's
    bytes, a file, quote or chat record not read) be read again by the keys kept ("x"), with
    nothing else missing; and was its sender's name still being looked up?"""
    d = json.loads(payload)
    w, x = d.get("w") or {}, d.get("x") or {}
    if not isinstance(w, dict) or not isinstance(x, dict):
        return False, False
    missing = bool(d.get("i") or w.get("i") or d.get("a") or w.get("a") or w.get("f") or w.get("q") or w.get("r"))
    covered = ((not (d.get("i") or w.get("i")) or bool(x.get("i")))
               and (not (d.get("a") or w.get("a")) or bool(x.get("a")))
               and (not w.get("f") or bool(x.get("f")))
               and (not w.get("q") or bool(x.get("q")))  # the message replied to, by its id
               and (not w.get("r") or bool(x.get("r"))))  # a chat record's messages, by its own id
    forwarded_audio = any(bool(f[3]) for f in d.get("f") or ())
    others = bool(set(w) - {"i", "a", "f", "q", "r", "k", "n"})
    return missing and covered and not forwarded_audio and not others, bool(w.get("n"))


@dataclass(frozen=True)
class Revision:
    """An edit, recall or leaving the inbox kept whose application never ended."""

    id: int
    msg: InboundMessage
    payload: str  # as kept: the row goes once what it says was applied (:meth:`Inbox.done`)
    attempts: int = 0  # applications that failed so far


class Inbox:
    """``Inbox(db, clock)``: the ``inbox`` table of gateway.db's
    :class:`~memory.db.Database` (the session store's)."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        # A message kept again (a redelivery, or a Feishu event kept before
        # its pictures were read, then whole) keeps its row and place; its
        # payload is the latest.
        adds = insert_statement("INSERT INTO inbox (channel, chat_id, message_id, received_at, payload)", 5)
        self._adds = RowBatcher(
            db, lambda n: adds(n) + " ON CONFLICT (channel, chat_id, message_id) DO UPDATE SET payload = excluded.payload",
            5)
        self._drops = RowBatcher(
            db, lambda n: "DELETE FROM inbox WHERE (channel, chat_id, message_id) IN (VALUES "
            + ", ".join(["(?, ?, ?)"] * n) + ")", 3)
        self._dropping: set[asyncio.Task[Any]] = set()
        self.failed = 0  # writes that failed (a full disk): each a message held at its platform, tried again
        self._failing = 0  # of those, since the last one kept
        # Messages an erasure dropped in this run (:meth:`forget_owner`),
        # by (channel, chat_id, message_id): few, as erasures are.
        self._erased: set[MessageKey] = set()
        self.drop_retry = DROP_RETRY  # tests shorten it
        self._undropped: dict[int, Dropped] = {}  # rows a delete at start could not take, by id
        self._retrying: asyncio.Task[None] | None = None

    async def keep(self, msg: InboundMessage, waiting: Mapping[str, Any] | None = None) -> None:
        """Write ``msg`` (if :func:`kept`) before the platform learns it
        was received; a redelivery of one kept is not written twice.
        Raises :class:`~gateway.bus.NotKept` when the write fails (logged):
        the platform must not be told it arrived."""
        if revision(msg):
            await self._keep_revision(msg)
            return
        if not kept(msg, waiting) or self.erased(msg):  # an erased one handed in again: never to be answered
            return
        try:
            await self._adds.write([(msg.channel, msg.chat_id, msg.message_id, format_ts(self.clock.now()),
                                     dumps(msg, waiting))])
        except (sqlite3.Error, OSError, RuntimeError) as exc:
            # A full disk fails every write alike until it passes: one error, then a count.
            self.failed += 1
            self._failing += 1
            (log.error if self._failing == 1 else log.info)(
                "message not saved in the inbox: held at the platform, tried again until there is room; "
                "later failures are counted until one is saved",
                channel=msg.channel, chat_id=msg.chat_id, message_id=msg.message_id, **error_fields(exc))
            raise NotKept(type(exc).__name__) from exc  # its text may quote the row
        if self._failing:
            log.warning("messages are saved in the inbox again", not_saved=self._failing)
            self._failing = 0

    async def _keep_revision(self, msg: InboundMessage) -> None:
        # Rare (a user's edit or recall): one write each, not grouped. A
        # later edit of the same message replaces the words, keeping its
        # place; its failed attempts were the old words'.
        try:
            await self.db.write(
                "INSERT INTO revisions (channel, chat_id, message_id, kind, received_at, payload) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, chat_id, message_id, kind) "
                "DO UPDATE SET payload = excluded.payload, attempts = "
                "CASE WHEN payload = excluded.payload THEN attempts ELSE 0 END",
                (*_revision_key(msg), format_ts(self.clock.now()), _revision_payload(msg)))
        except (sqlite3.Error, OSError, RuntimeError) as exc:
            self.failed += 1
            log.error("edit or recall not saved in the inbox: held at the platform, tried again",
                      channel=msg.channel, chat_id=msg.chat_id, message_id=msg.message_id, kind=msg.kind,
                      **error_fields(exc))
            raise NotKept(type(exc).__name__) from exc  # its text may quote the row

    def done(self, msg: InboundMessage, *, written: bool = False, failed: bool = False) -> None:
        """``msg``'s turn ended (answered, refused, ignored, failed): its
        row goes, in the background (grouped with others'). A crash first
        leaves it for the next start, which finds its Tier 0 row (if any)
        and does not answer it twice. ``written``: kept with what was still
        to be read for it (a picture alone: :func:`kept` of the message
        without it says no), so its row goes whatever it holds now. An
        edit's or recall's row goes only if it still says what was applied
        (a later edit of the message replaced it: that one is still to come);
        ``failed`` (its application raised): it stays for the next start,
        counted (:meth:`revision_failed`)."""
        if revision(msg):
            where = ("channel = ? AND chat_id = ? AND message_id = ? AND kind = ? AND payload = ?",
                     (*_revision_key(msg), _revision_payload(msg)))
            if failed:
                self._track(self._failed(*where))
            else:
                self._track(self.db.write(f"DELETE FROM revisions WHERE {where[0]}", where[1]))
            return
        if not written and not kept(msg):
            return
        self._track(self._drops.write([(msg.channel, msg.chat_id, msg.message_id)]))

    def _track(self, write: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(write)
        self._dropping.add(task)
        task.add_done_callback(self._dropped)

    async def answered(self, msg: InboundMessage) -> None:
        """``msg`` is answered and no Tier 0 row says so (its writes
        failed): its row goes now, before the answer is sent, or the next
        start would answer it again. Raises when the delete fails."""
        await self._drops.write([(msg.channel, msg.chat_id, msg.message_id)])

    def _dropped(self, task: asyncio.Task[Any]) -> None:
        self._dropping.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # Left in the inbox: the next start finds it answered (its Tier 0 row) or answers it.
            log.warning("answered message still in the inbox", **error_fields(exc))

    async def flush(self) -> None:
        """Wait for the rows being dropped (before gateway.db closes)."""
        if self._dropping:
            await asyncio.wait(set(self._dropping))
        await self._adds.drain()

    async def close(self) -> None:
        """Stop trying again the rows a full disk kept (the next start
        finds them), then :meth:`flush`; before gateway.db closes. Safe twice."""
        task, self._retrying = self._retrying, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if self._undropped:
                log.info("inbox rows the disk kept are left to the next start", rows=len(self._undropped))
        await self.flush()

    async def waiting(self) -> list[Waiting]:
        """The messages whose turn never ended and never began (no Tier 0
        row with their id in their chat), oldest first; the others (begun:
        the cut-turn resume's, or answered) are dropped, as are rows that
        cannot be read (logged)."""
        begun = """EXISTS (SELECT 1 FROM session_messages m JOIN sessions s ON s.id = m.session_id
                           WHERE m.message_id = i.message_id AND s.key = i.channel || ':' || i.chat_id)"""
        rows = await self.db.fetchall(
            f"SELECT i.id, i.channel, i.chat_id, i.message_id, i.received_at, i.payload, {begun} AS begun "
            "FROM inbox i ORDER BY i.id"
        )
        out: list[Waiting] = []
        gone: list[Dropped] = []
        for r in rows:
            key: Dropped = (int(r["id"]), str(r["channel"]), str(r["chat_id"]), str(r["message_id"]))
            if r["begun"]:
                gone.append(key)
                continue
            try:
                msg, pictures, unheard = loads(str(r["channel"]), str(r["chat_id"]), str(r["message_id"]), str(r["payload"]))
                files, pending = unread(str(r["payload"]))
                again, unnamed = readable_again(str(r["payload"]))
                at = parse_ts(str(r["received_at"]))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.error("inbox row unreadable; dropped", id=int(r["id"]), channel=r["channel"], chat_id=r["chat_id"],
                          message_id=r["message_id"], **error_fields(exc))
                gone.append(key)
                continue
            out.append(Waiting(int(r["id"]), at, msg, pictures, unheard, files, pending, again, unnamed))
        await self.drop(gone)
        return out

    async def drop(self, rows: Sequence[Dropped]) -> bool:
        """Delete ``rows`` (messages not to be answered after all, or begun
        already), at start. A delete storage refuses (a full disk, a
        read-only file) keeps them and does not raise: the gateway comes up
        all the same; they are tried again in the background (see the
        module docstring). False when they were kept."""
        if not rows:
            return True
        try:
            await self._delete(rows)
        except (sqlite3.Error, OSError) as exc:
            first = not self._undropped
            self._undropped.update((r[0], r) for r in rows)
            (log.error if first else log.info)(
                "inbox rows not to be answered could not be deleted (the disk is full or read-only?): kept, tried "
                "again until there is room", rows=len(rows), **error_fields(exc))
            if self._retrying is None or self._retrying.done():
                self._retrying = asyncio.create_task(self._drop_later(), name="inbox-drop-retry")
            return False
        return True

    async def _delete(self, rows: Sequence[Dropped]) -> None:
        for i in range(0, len(rows), 200):
            part = rows[i : i + 200]
            await self.db.write(
                "DELETE FROM inbox WHERE (id, channel, chat_id, message_id) IN (VALUES "
                + ", ".join(["(?, ?, ?, ?)"] * len(part)) + ")", [v for r in part for v in r])

    async def _drop_later(self) -> None:
        delay = self.drop_retry
        while self._undropped:
            await asyncio.sleep(delay)
            rows = list(self._undropped.values())
            try:
                await self._delete(rows)
            except (sqlite3.Error, OSError):  # still full: the pause grows
                delay = min(DROP_RETRY_MAX, delay * 2)
                continue
            except Exception as exc:  # not the disk (gateway.db closed, a bug): left to the next start
                log.error("inbox rows kept by a full disk not deleted; left to the next start", rows=len(rows),
                          **error_fields(exc))
                return
            for r in rows:
                self._undropped.pop(r[0], None)
            log.warning("inbox rows kept by a full disk are deleted now", rows=len(rows))

    async def revisions(self) -> list[Revision]:
        """The edits and recalls kept and never applied (a stop or a crash
        cut them), oldest first; rows that cannot be read are dropped (logged)."""
        rows = await self.db.fetchall(
            "SELECT id, channel, chat_id, message_id, kind, payload, attempts FROM revisions ORDER BY id")
        out: list[Revision] = []
        gone: list[int] = []
        for r in rows:
            try:
                msg, _, _ = loads(str(r["channel"]), str(r["chat_id"]), str(r["message_id"]), str(r["payload"]))
                extra = json.loads(str(r["payload"])).get("e") or {}
                if str(r["kind"]) not in (EDIT, RECALL, LEFT) or not isinstance(extra, dict):
                    raise ValueError(f"not an edit, a recall or a leaving: {r['kind']!r}")
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.error("kept edit or recall unreadable; dropped", id=int(r["id"]), channel=r["channel"],
                          chat_id=r["chat_id"], message_id=r["message_id"], **error_fields(exc))
                gone.append(int(r["id"]))
                continue
            msg = replace(msg, kind=str(r["kind"]), metadata={**extra, **msg.metadata})
            out.append(Revision(int(r["id"]), msg, str(r["payload"]), int(r["attempts"])))
        try:
            for i in range(0, len(gone), 500):
                part = gone[i : i + 500]
                await self.db.write(f"DELETE FROM revisions WHERE id IN ({','.join('?' * len(part))})", part)
        except (sqlite3.Error, OSError) as exc:  # a full disk: never applied, so no harm; the next start drops them
            log.error("unreadable edits or recalls not deleted; the next start tries again", rows=len(gone),
                      **error_fields(exc))
        return out

    async def drop_revision(self, rev: Revision) -> None:
        """``rev`` was applied: its row goes (unless a later edit replaced it)."""
        await self.db.write("DELETE FROM revisions WHERE id = ? AND payload = ?", (rev.id, rev.payload))

    async def revision_failed(self, rev: Revision) -> bool:
        """Applying ``rev`` raised: it stays for the next start, counted;
        True when that was its last attempt (:data:`REVISION_ATTEMPTS`) and it went."""
        return await self._failed("id = ? AND payload = ?", (rev.id, rev.payload))

    async def _failed(self, where: str, params: tuple[Any, ...]) -> bool:
        await self.db.write(f"UPDATE revisions SET attempts = attempts + 1 WHERE {where}", params)
        spent = await self.db.fetchall(
            f"SELECT id, channel, chat_id, message_id, kind, attempts FROM revisions WHERE {where} AND attempts >= ?",
            (*params, REVISION_ATTEMPTS))
        for r in spent:
            await self.db.write("DELETE FROM revisions WHERE id = ? AND attempts = ?", (r["id"], r["attempts"]))
            # Ids only: its payload holds the user's words.
            log.error("edit, recall or leaving dropped: it failed to apply every time it was tried",
                      id=int(r["id"]), channel=r["channel"], chat_id=r["chat_id"], message_id=r["message_id"],
                      kind=r["kind"], attempts=int(r["attempts"]))
        return bool(spent)

    async def drop_message(self, channel: str, chat_id: str, message_id: str) -> int:
        """A message recalled before its turn: never to be answered. Rows dropped."""
        _, changed = await self.db.write("DELETE FROM inbox WHERE channel = ? AND chat_id = ? AND message_id = ?",
                                         (channel, chat_id, message_id))
        return changed

    async def edit_waiting(self, edit: InboundMessage) -> bool:
        """An edit of a message still waiting here (its turn never began):
        its kept words become the edited ones, by its own sender only; for
        a comment sent with forwards (metadata ``comments``, ``comment``:
        gateway/revisions.py), that comment's words among the message's.
        True when a row changed."""
        if edit.kind != EDIT or not edit.text.strip():
            return False
        row = await self.db.fetchone(
            "SELECT id, payload FROM inbox WHERE channel = ? AND chat_id = ? AND message_id = ?",
            (edit.channel, edit.chat_id, edit.message_id))
        if row is None:
            return False
        d = json.loads(str(row["payload"]))
        if not isinstance(d, dict) or str(d.get("s")) != edit.sender_id:
            return False
        words = edited_words(str(d.get("t") or ""), edit)
        if words is None:
            log.info("edit of a comment sent with forwards not applied to the waiting message: its words differ",
                     channel=edit.channel, chat_id=edit.chat_id, message_id=edit.message_id)
            return False
        d["t"] = words
        await self.db.write("UPDATE inbox SET payload = ? WHERE id = ?", (json.dumps(d, ensure_ascii=False), row["id"]))
        return True

    async def count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM inbox")
        return int(row[0]) if row else 0

    async def _owned(self, owner: str, owner_of: Callable[[str, str], str]) -> tuple[list[MessageKey], list[int]]:
        """The (channel, chat_id, message_id) of ``owner``'s waiting
        messages and the ids of their edits not yet applied. A row names
        no owner: its sender does (``owner_of(channel, sender_id)``, the
        identity map's resolve, as the loop names a turn's owner), so a
        group's row is its sender's, and rows older versions wrote are
        found alike. Recalls are not theirs: they hold no words (a Feishu
        recall names no sender). A row that cannot be read is no one's
        here; the next start drops it (logged there)."""

        def theirs(channel: object, payload: object) -> bool:
            try:
                d = json.loads(str(payload))
                return isinstance(d, dict) and owner_of(str(channel), str(d["s"])) == owner
            except (ValueError, TypeError, KeyError):
                return False

        rows = await self.db.fetchall("SELECT channel, chat_id, message_id, payload FROM inbox ORDER BY id")
        messages = [(str(r["channel"]), str(r["chat_id"]), str(r["message_id"]))
                    for r in rows if theirs(r["channel"], r["payload"])]
        rows = await self.db.fetchall("SELECT id, channel, payload FROM revisions WHERE kind = ?", (EDIT,))
        return messages, [int(r["id"]) for r in rows if theirs(r["channel"], r["payload"])]

    async def owners(self, owner_of: Callable[[str, str], str]) -> set[str]:
        """Everyone a message or edit waiting here is of (:meth:`_owned`'s
        rule): the whole store's export names them, though nothing else of
        theirs may be stored."""
        await self._adds.drain()

        def whose(channel: object, payload: object) -> str:
            try:
                d = json.loads(str(payload))
                return owner_of(str(channel), str(d["s"])) if isinstance(d, dict) else ""
            except (ValueError, TypeError, KeyError):
                return ""

        rows = [*await self.db.fetchall("SELECT channel, payload FROM inbox"),
                *await self.db.fetchall("SELECT channel, payload FROM revisions WHERE kind = ?", (EDIT,))]
        return {o for r in rows if (o := whose(r["channel"], r["payload"]))}

    async def edits_owned(self, owner: str, owner_of: Callable[[str, str], str]) -> int:
        """How many of ``owner``'s edits wait here to be applied (their export counts them)."""
        await self._adds.drain()
        _, edits = await self._owned(owner, owner_of)
        return len(edits)

    async def owns(self, owner: str, owner_of: Callable[[str, str], str]) -> bool:
        """Whether a message or edit of ``owner`` waits here (:meth:`_owned`)."""
        messages, edits = await self._owned(owner, owner_of)
        return bool(messages or edits)

    async def owned(self, owner: str, owner_of: Callable[[str, str], str], *, besides: MessageKey | None = None) -> int:
        """How many of ``owner``'s messages wait here to be answered (their
        ``/export``, what ``/forget all`` will erase), ``besides`` (the
        command asking, whose own row is here while it runs) not counted."""
        await self._adds.drain()  # one taken a moment ago is waiting too
        messages, _ = await self._owned(owner, owner_of)
        return sum(1 for m in messages if m != besides)

    def erased(self, msg: InboundMessage) -> bool:
        """Was ``msg`` erased here (:meth:`forget_owner`) before its turn
        ended? The process loop holds it still (queued behind another turn,
        or under way): it must not be answered, stored or learnt after all."""
        return (msg.channel, msg.chat_id, msg.message_id) in self._erased

    async def forget_owner(self, owner: str, owner_of: Callable[[str, str], str], *,
                           besides: MessageKey | None = None) -> tuple[int, int]:
        """Erase ``owner``'s messages waiting here and their edits not yet
        applied (``/forget all``, ``myclaw memory forget --user``; found as
        :meth:`_owned` says); returns (messages, edits) dropped, ``besides``
        (the ``/forget all`` itself: its row goes too, its turn ends as any
        other) not counted. The messages are remembered as erased for this
        run (:meth:`erased`): the loop may hold them still, and a channel
        may hand one in again (a Feishu lane that was reading its pictures),
        which is then not kept. Recalls stay: applying one at the next start
        still withdraws the bot's reply in the chat."""
        await self._adds.drain()  # a row still being written would land after the delete
        messages, edits = await self._owned(owner, owner_of)
        dropped = [m for m in messages if m != besides]
        self._erased.update(dropped)
        for i in range(0, len(messages), 500):
            part = messages[i : i + 500]
            await self.db.write("DELETE FROM inbox WHERE (channel, chat_id, message_id) IN (VALUES "
                                + ", ".join(["(?, ?, ?)"] * len(part)) + ")", [v for m in part for v in m])
        for i in range(0, len(edits), 500):
            edit_ids = edits[i : i + 500]
            await self.db.write(f"DELETE FROM revisions WHERE id IN ({','.join('?' * len(edit_ids))})", edit_ids)
        return len(dropped), len(edits)
