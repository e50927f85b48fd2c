"""The outbox: replies that could not be delivered yet, in ``gateway.db``
(table ``outbox``, migration 003 of ``gateway/sessions.py``).

Only storage lives here; when rows are written, sent and dropped is
``gateway/delivery.py``'s business. A row is one ``OutboundMessage``
plus its delivery state: ``attempts``, ``next_attempt_at``, and
``last_error`` (the channel's error, which names chat and part, never the
text; scrubbed again by the caller). The message is stored field by field
over ``dataclasses.fields``, so a field added to ``OutboundMessage`` later
is carried through (JSON in ``extra``) without this module knowing it.

A chat's rows are sent oldest first: :meth:`Outbox.heads` gives the
oldest row of every chat, and the next one only comes up once it is gone.

A row may also be a reply on its way (``sending``: written before its
first send, ``Delivery.hold``): it names the run (``Outbox.run``) whose
sender has it, and that run's reads leave it out (its sender, not the
redelivery, sends it). A row naming another run is one a kill cut
mid-send: every read takes it as waiting, so the next start sends it.

A scheduled job's reply (``OutboundMessage.job_slot``) marks its slot
answered (table ``job_replies``, one row a job) in the transaction that
writes its row: cron.db records the run only after that, and a kill in
between would otherwise have the next start send the reply from here and
run the job again (gateway/cron.py asks :meth:`Outbox.job_reply` first,
and records the run as the mark says it went: a fallback stays one).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.bus import OutboundMessage
from memory.clock import format_ts, parse_ts
from memory.db import Database

__all__ = ["Outbox", "Pending", "job_slot"]

# OutboundMessage fields with a column of their own; any other goes to
# ``extra``. ``owner`` is the row's own column (written by ``add``'s
# ``owner``, which is the message's when it names one) and read back into
# the message, so a merge-identities move reaches the message too.
_COLUMNS = ("channel", "chat_id", "text", "reply_to", "metadata", "owner")
# Not stored: the row's own id (``OutboundMessage.kept``), a file (never
# kept), and a send's progress callback.
_NOT_STORED = ("kept", "attachment", "on_part_sent")
# The draft message row of an outbox row's reply, by its send key (in ``extra``).
_FORGET_DRAFT = ("DELETE FROM draft_messages WHERE (channel, send_key) IN "
                 "(SELECT channel, json_extract(extra, '$.send_key') FROM outbox WHERE id = ?)")
_SELECT = (
    "SELECT id, channel, chat_id, text, reply_to, metadata, extra, owner, created_at, attempts, "
    "next_attempt_at, last_error FROM outbox"
)


_MARK_SLOT = ("INSERT INTO job_replies (job, slot, written_at, fallback) VALUES (?, ?, ?, ?) "
              "ON CONFLICT(job) DO UPDATE SET slot = excluded.slot, written_at = excluded.written_at, "
              "fallback = excluded.fallback")


def job_slot(job_id: str, slot: str) -> str:
    """``OutboundMessage.job_slot`` of job ``job_id``'s reply for ``slot``
    (its stored time, which has no space: the job id may)."""
    return f"{slot} {job_id}"


@dataclass(frozen=True)
class Pending:
    """One reply waiting in the outbox."""

    id: int
    message: OutboundMessage
    owner: str
    created_at: datetime
    attempts: int
    next_attempt_at: datetime
    last_error: str

    @property
    def chat(self) -> tuple[str, str]:
        return self.message.channel, self.message.chat_id


def _encode(msg: OutboundMessage) -> tuple[str, str, str, str, str, str]:
    values = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
    extra = {k: v for k, v in values.items() if k not in _COLUMNS and k not in _NOT_STORED}
    return (
        str(values["channel"]),
        str(values["chat_id"]),
        str(values["text"]),
        str(values.get("reply_to") or ""),
        json.dumps(values.get("metadata") or {}, ensure_ascii=False),
        json.dumps(extra, ensure_ascii=False),
    )


def _decode(row: Sequence[Any], kind: type[OutboundMessage]) -> Pending:
    stored: dict[str, Any] = {
        **json.loads(row[6] or "{}"),
        "channel": row[1],
        "chat_id": row[2],
        "text": row[3],
        "reply_to": row[4],
        "metadata": json.loads(row[5] or "{}"),
        "owner": row[7],
    }
    # A field this build does not have (written by a newer one) is left
    # out; one it has and the row lacks takes its default.
    known = {f.name for f in dataclasses.fields(kind)}
    msg = kind(**{k: v for k, v in stored.items() if k in known})
    return Pending(
        id=int(row[0]),
        message=msg,
        owner=str(row[7]),
        created_at=parse_ts(row[8]),
        attempts=int(row[9]),
        next_attempt_at=parse_ts(row[10]),
        last_error=str(row[11]),
    )


class Outbox:
    """``Outbox(db)`` on gateway.db's :class:`~memory.db.Database` (the
    session store's); times are passed in by the caller's clock.
    ``kind``: the message class rows are read back as (a test's subclass
    with a field of its own). ``run``: this process's mark on the
    replies its sender has on their way (new for every start)."""

    def __init__(self, db: Database, kind: type[OutboundMessage] = OutboundMessage, *, run: str = "") -> None:
        self.db = db
        self.kind = kind
        self.run = run or uuid.uuid4().hex

    async def add(
        self,
        msg: OutboundMessage,
        *,
        owner: str,
        created_at: datetime,
        next_attempt_at: datetime,
        attempts: int = 0,
        last_error: str = "",
        sending: bool = False,
    ) -> int:
        """Keep ``msg`` behind the chat's other rows; returns its id.
        ``sending``: a reply on its way, this run's sender's (not waiting).
        A job's reply on its way marks its slot answered in the same
        transaction (a later write of it, a retry's, comes after cron.db
        has the run: its mark would only linger)."""
        insert = ("INSERT INTO outbox (channel, chat_id, text, reply_to, metadata, extra, owner, created_at, attempts, "
                  "next_attempt_at, last_error, sending) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        params = (*_encode(msg), owner, format_ts(created_at), attempts, format_ts(next_attempt_at), last_error,
                  self.run if sending else "")
        if not (msg.job_slot and sending):
            row_id, _ = await self.db.write(insert, params)
            return row_id
        slot, _, job = msg.job_slot.partition(" ")
        async with self.db.transaction() as conn:
            cur = await conn.execute(insert, params)
            await conn.execute(_MARK_SLOT, (job, slot, format_ts(created_at), int(msg.job_fallback)))
        assert cur.lastrowid is not None
        return cur.lastrowid

    async def job_reply(self, job_id: str, slot: str) -> str | None:
        """How job ``job_id``'s reply for ``slot`` was written (sent, or here
        to send): "ok", or "fallback" (the job's own words, the model could
        not be reached); None: it was not."""
        row = await self.db.fetchone("SELECT fallback FROM job_replies WHERE job = ? AND slot = ?", (job_id, slot))
        if row is None:
            return None
        return "fallback" if row[0] else "ok"

    async def job_recorded(self, job_id: str, slot: str) -> None:
        """cron.db has the run for ``slot``: its mark is not needed any more
        (a later slot's, written meanwhile, stays)."""
        await self.db.write("DELETE FROM job_replies WHERE job = ? AND slot = ?", (job_id, slot))

    async def forget_jobs(self, job_ids: Iterable[str]) -> None:
        """The marks of erased jobs: a mark outlives its job only when a kill
        fell between the reply and cron's record, but a job's id may be
        words the user chose ("call-mom")."""
        ids = list(job_ids)
        if ids:
            await self.db.write(f"DELETE FROM job_replies WHERE job IN ({','.join('?' * len(ids))})", ids)

    async def heads(self, channels: Iterable[str] | None = None) -> list[Pending]:
        """The oldest row of every chat (of ``channels``, default all), oldest first."""
        names = list(channels) if channels is not None else None
        where = f" AND channel IN ({','.join('?' * len(names))})" if names is not None else ""
        if names == []:
            return []
        rows = await self.db.fetchall(
            f"{_SELECT} WHERE id IN (SELECT MIN(id) FROM outbox WHERE sending <> ? GROUP BY channel, chat_id){where} "
            "ORDER BY id",
            (self.run, *(names or ())),
        )
        return [_decode(r, self.kind) for r in rows]

    async def head(self, channel: str, chat_id: str) -> Pending | None:
        """The chat's oldest row, or None when none waits."""
        row = await self.db.fetchone(f"{_SELECT} WHERE channel = ? AND chat_id = ? AND sending <> ? ORDER BY id LIMIT 1",
                                     (channel, chat_id, self.run))
        return _decode(row, self.kind) if row is not None else None

    async def last_due(self, channel: str, chat_id: str) -> datetime | None:
        """The latest next attempt of the chat's waiting rows (None: none waits)."""
        row = await self.db.fetchone("SELECT MAX(next_attempt_at) FROM outbox WHERE channel = ? AND chat_id = ? "
                                     "AND sending <> ?", (channel, chat_id, self.run))
        return parse_ts(row[0]) if row is not None and row[0] is not None else None

    async def older_than(self, created_before: datetime) -> list[Pending]:
        rows = await self.db.fetchall(f"{_SELECT} WHERE created_at < ? AND sending <> ? ORDER BY id",
                                      (format_ts(created_before), self.run))
        return [_decode(r, self.kind) for r in rows]

    async def chats(self) -> list[tuple[str, str]]:
        """Every chat with a row waiting."""
        rows = await self.db.fetchall("SELECT DISTINCT channel, chat_id FROM outbox WHERE sending <> ?", (self.run,))
        return [(str(r[0]), str(r[1])) for r in rows]

    async def remove(self, row_id: int, *, drafted: bool = False) -> None:
        """Delivered, or dropped. ``drafted``: the reply's drafts were
        shown, and the row naming their message (``draft_messages``,
        gateway/draftmessages.py) goes with this one, in one transaction:
        the outbox row left alone would have the next start send the reply
        as a new message beside the draft message it became."""
        if not drafted:
            await self.db.write("DELETE FROM outbox WHERE id = ?", (row_id,))
            return
        async with self.db.transaction() as conn:
            await conn.execute(_FORGET_DRAFT, (row_id,))
            await conn.execute("DELETE FROM outbox WHERE id = ?", (row_id,))

    async def retry_later(self, row_id: int, *, text: str, attempts: int, next_attempt_at: datetime, last_error: str,
                          drafted: bool = False) -> None:
        """Another failed attempt (or a reply on its way held back: it waits
        now); ``text``: what is still to send (less than before when the
        first parts went out). ``drafted``: the first part went into the
        reply's draft message, whose row goes in the same transaction (the
        rest is sent as new messages; kept, the next start would edit the
        rest's first part over the reply's)."""
        update = ("UPDATE outbox SET text = ?, attempts = ?, next_attempt_at = ?, last_error = ?, sending = '' "
                  "WHERE id = ?")
        params = (text, attempts, format_ts(next_attempt_at), last_error, row_id)
        if not drafted:
            await self.db.write(update, params)
            return
        async with self.db.transaction() as conn:
            await conn.execute(_FORGET_DRAFT, (row_id,))
            await conn.execute(update, params)

    async def drop_answering(self, channel: str, chat_id: str, answers: str) -> int:
        """The message ``answers`` in this chat was recalled: its replies not
        delivered yet are not to be (their words often repeat it); returns
        how many rows went. ``answers`` rides in ``extra``: a chat has few
        rows, found by ``idx_outbox_chat``, so no column or index of its own."""
        if not answers:
            return 0
        _, deleted = await self.db.write(
            "DELETE FROM outbox WHERE channel = ? AND chat_id = ? AND json_extract(extra, '$.answers') = ?",
            (channel, chat_id, answers),
        )
        return deleted

    async def answering(self, channel: str, chat_id: str, answers: str) -> bool:
        """Does a reply to message ``answers`` of this chat wait here?"""
        if not answers:
            return False
        row = await self.db.fetchone(
            "SELECT 1 FROM outbox WHERE channel = ? AND chat_id = ? AND json_extract(extra, '$.answers') = ? LIMIT 1",
            (channel, chat_id, answers),
        )
        return row is not None

    async def count(self) -> int:
        """Rows waiting (this run's replies on their way left out)."""
        row = await self.db.fetchone("SELECT COUNT(*) FROM outbox WHERE sending <> ?", (self.run,))
        return int(row[0]) if row else 0

    async def cut(self) -> int:
        """Replies another run had on their way: a kill cut their send."""
        row = await self.db.fetchone("SELECT COUNT(*) FROM outbox WHERE sending NOT IN ('', ?)", (self.run,))
        return int(row[0]) if row else 0

    # -- people's data ----------------------------------------------------------

    async def owned(self, owner: str) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM outbox WHERE owner = ?", (owner,))
        return int(row[0]) if row else 0

    async def forget_owner(self, owner: str) -> int:
        """Erase the replies to ``owner``'s messages (``myclaw memory forget
        --user``); returns how many. Rows are zeroed on disk by
        ``secure_delete``; the caller compacts the file."""
        _, deleted = await self.db.write("DELETE FROM outbox WHERE owner = ?", (owner,))
        return deleted

    async def move_owner(self, old: str, new: str) -> int:
        """``myclaw memory merge-identities``: ``old``'s rows become ``new``'s."""
        _, moved = await self.db.write("UPDATE outbox SET owner = ? WHERE owner = ?", (new, old))
        return moved
