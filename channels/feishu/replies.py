"""Which Feishu messages the bot sent as the reply to which inbound message,
so a recalled message takes the bot's reply along (``FeishuChannel``).

Bounded in count and age. The age is Feishu's window for a bot to recall
its own message: 24 hours by default (the tenant admin may change it; past
it the DELETE is refused with code 230009), so an older entry is of no use.

Kept in memory and, given a :class:`ReplyStore` (the gateway passes its
table in gateway.db, ``gateway/sentreplies.py``), written behind to it: a
recall after a restart still withdraws the reply. Write-behind, because a
reply's send path must not wait on the disk: :meth:`ReplyLog.record` only
notes the change, and a background task hands the changes of the last
``flush_every`` seconds (1) to the store in one transaction, so a crash
loses at most that much (those replies then stay visible after a recall,
as all did before). Each write also sweeps the entries past the window.
:meth:`ReplyLog.open` loads the entries still in the window, and
:meth:`ReplyLog.close` writes what is left. Times are wall-clock seconds
(``time.time``), which mean the same to the next process.

It also remembers which inbound messages were recalled (as long),
because a recall can overtake the reply: the message is still being
answered, or its reply is still being sent. The channel then does not
send that reply, or withdraws what of it went out, and does not take the
message if it comes again (a redelivery). Given a ``recalled_store``,
these are kept across restarts the same way (a :class:`RecentIds` written
behind, ``dedup.py``). A reply waiting in the gateway's outbox is dropped
by the gateway itself (``gateway/revisions.py``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .dedup import IdStore, RecentIds
from .writebehind import WriteBehind

__all__ = ["RECALL_WINDOW", "ReplyLog", "ReplyStore", "SentPart", "Taken"]

RECALL_WINDOW = 24 * 3600.0  # seconds a bot may recall its own message (Feishu's default)



@dataclass(frozen=True)
class SentPart:
    """One part of a reply: ``message_id`` sent in ``chat_id`` at
    ``sent_at`` as (part of) the answer to inbound message ``answers``."""

    answers: str
    chat_id: str
    message_id: str
    sent_at: float


@dataclass(frozen=True)
class Taken:
    """The reply to ``answers`` in ``chat_id`` is forgotten (withdrawn)."""

    answers: str
    chat_id: str


class ReplyStore(Protocol):
    """Where a :class:`ReplyLog` keeps its entries across restarts."""

    async def load(self, since: float) -> list[SentPart]:
        """Parts sent at ``since`` or later, oldest first."""
        ...

    async def write(self, changes: Sequence[SentPart | Taken], *, expired_before: float) -> None:
        """Apply ``changes`` in order and drop parts sent before
        ``expired_before``, in one transaction."""
        ...


@dataclass
class _Reply:
    chat_id: str
    first_sent: float  # the oldest part's age decides when the entry goes
    message_ids: list[str] = field(default_factory=list)


class ReplyLog:
    def __init__(
        self,
        maxsize: int = 5000,
        ttl: float = RECALL_WINDOW,
        clock: Callable[[], float] = time.time,
        *,
        store: ReplyStore | None = None,
        recalled_store: IdStore | None = None,
        flush_every: float = 1.0,
    ) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("maxsize must be >= 1 and ttl > 0")
        self._maxsize = maxsize
        self._ttl = ttl
        self._clock = clock
        self._store = store
        self._behind: WriteBehind[SentPart | Taken] = WriteBehind(
            self._save, every=flush_every, bound=4 * maxsize, name="feishu-replies",
            # the replies are still known here; a restart would leave them visible
            failure="could not save which messages answer which; retrying",
        )
        # inbound message id -> the reply's parts; oldest first
        self._replies: OrderedDict[str, _Reply] = OrderedDict()
        # "chat id<space>inbound message id" of the messages recalled
        self._recalled = RecentIds(maxsize, ttl, clock, store=recalled_store, flush_every=flush_every)

    def record(self, answers: str, chat_id: str, message_id: str) -> None:
        """``message_id`` (one part of a reply, sent in ``chat_id``) answers
        the inbound message ``answers``."""
        if not answers or not message_id:
            return
        now = self._clock()
        self._expire(now)
        if self._add(answers, chat_id, message_id, now) and self._store is not None:
            self._behind.note(SentPart(answers, chat_id, message_id, now))

    def _add(self, answers: str, chat_id: str, message_id: str, now: float) -> bool:
        """Note one part; False when it was known (a resend Feishu
        de-duplicated names the same message)."""
        entry = self._replies.get(answers)
        if entry is None or entry.chat_id != chat_id:
            # A message id lives in one chat; a different chat would be a
            # caller's mix-up, and the newest reply is the one to keep.
            self._replies.pop(answers, None)  # re-inserted at the end: age order holds
            entry = self._replies[answers] = _Reply(chat_id, now)
        if message_id in entry.message_ids:
            return False
        entry.message_ids.append(message_id)
        while len(self._replies) > self._maxsize:
            self._replies.popitem(last=False)
        return True

    def take(self, answers: str, chat_id: str) -> list[str]:
        """The parts of the reply to ``answers`` sent in ``chat_id``, now
        forgotten (each is withdrawn once); [] when there is none or it is
        older than the recall window."""
        self._expire(self._clock())
        entry = self._replies.get(answers)
        if entry is None or entry.chat_id != chat_id:
            return []
        del self._replies[answers]
        if self._store is not None:
            self._behind.note(Taken(answers, chat_id))
        return list(entry.message_ids)

    def mark_recalled(self, answers: str, chat_id: str) -> None:
        if answers:
            self._recalled.seen_before(_recall_key(answers, chat_id))

    def was_recalled(self, answers: str, chat_id: str) -> bool:
        return bool(answers) and _recall_key(answers, chat_id) in self._recalled

    def __len__(self) -> int:
        return len(self._replies)

    # -- the store -----------------------------------------------------------------
    async def open(self) -> None:
        """Load the entries still in the window (before any event is taken
        in) and start writing behind. Without a store: nothing to do."""
        await self._recalled.open()
        if self._store is None or self._behind.started:
            return
        now = self._clock()
        for part in await self._store.load(now - self._ttl):
            self._add(part.answers, part.chat_id, part.message_id, part.sent_at)
        self._expire(now)
        self._behind.start()

    async def close(self) -> None:
        """Stop writing behind and write what is left; safe to call twice."""
        await self._behind.stop()
        await self._recalled.close()

    async def flush(self) -> None:
        """Hand the changes noted so far to the stores. A failed write keeps
        them for the next one (logged): the replies are still known here."""
        await self._recalled.flush()
        if self._store is not None:
            await self._behind.flush()

    async def _save(self, changes: list[SentPart | Taken]) -> None:
        assert self._store is not None
        await self._store.write(changes, expired_before=self._clock() - self._ttl)

    def _expire(self, now: float) -> None:
        # Insertion order is age order: expired entries are all at the front.
        while self._replies:
            entry = next(iter(self._replies.values()))
            if now - entry.first_sent < self._ttl:
                break
            self._replies.popitem(last=False)


def _recall_key(answers: str, chat_id: str) -> str:
    # Feishu's ids (oc_..., om_...) hold no space.
    return f"{chat_id} {answers}"
