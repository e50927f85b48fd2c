"""Which Feishu messages the bot sent as the reply to which inbound message,
so a recalled message takes the bot's reply along (``FeishuChannel``).

Bounded in count and age. The age is Feishu's window for a bot to recall
its own message: 24 hours by default (the tenant admin may change it; past
it the DELETE is refused with code 230009), so an older entry is of no use.
Kept in memory only: after a restart the bot no longer knows its earlier
replies, and a recall then erases the stored words but leaves the reply
visible in the chat.

It also remembers which inbound messages were recalled (as long), because
a recall can overtake the reply: the message is still being answered, or
its reply is still being sent. The channel then does not send that reply,
or withdraws what of it went out.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RECALL_WINDOW", "ReplyLog"]

RECALL_WINDOW = 24 * 3600.0  # seconds a bot may recall its own message (Feishu's default)


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("maxsize must be >= 1 and ttl > 0")
        self._maxsize = maxsize
        self._ttl = ttl
        self._clock = clock
        # inbound message id -> the reply's parts; oldest first
        self._replies: OrderedDict[str, _Reply] = OrderedDict()
        # (chat id, inbound message id) -> when its recall came; oldest first
        self._recalled: OrderedDict[tuple[str, str], float] = OrderedDict()

    def record(self, answers: str, chat_id: str, message_id: str) -> None:
        """``message_id`` (one part of a reply, sent in ``chat_id``) answers
        the inbound message ``answers``."""
        if not answers or not message_id:
            return
        now = self._clock()
        self._expire(now)
        entry = self._replies.get(answers)
        if entry is None or entry.chat_id != chat_id:
            # A message id lives in one chat; a different chat would be a
            # caller's mix-up, and the newest reply is the one to keep.
            self._replies.pop(answers, None)  # re-inserted at the end: age order holds
            entry = self._replies[answers] = _Reply(chat_id, now)
        entry.message_ids.append(message_id)
        while len(self._replies) > self._maxsize:
            self._replies.popitem(last=False)

    def take(self, answers: str, chat_id: str) -> list[str]:
        """The parts of the reply to ``answers`` sent in ``chat_id``, now
        forgotten (each is withdrawn once); [] when there is none or it is
        older than the recall window."""
        self._expire(self._clock())
        entry = self._replies.get(answers)
        if entry is None or entry.chat_id != chat_id:
            return []
        del self._replies[answers]
        return list(entry.message_ids)

    def mark_recalled(self, answers: str, chat_id: str) -> None:
        now = self._clock()
        self._expire(now)
        self._recalled[(chat_id, answers)] = now
        self._recalled.move_to_end((chat_id, answers))
        while len(self._recalled) > self._maxsize:
            self._recalled.popitem(last=False)

    def was_recalled(self, answers: str, chat_id: str) -> bool:
        self._expire(self._clock())
        return bool(answers) and (chat_id, answers) in self._recalled

    def __len__(self) -> int:
        return len(self._replies)

    def _expire(self, now: float) -> None:
        # Insertion order is age order: expired entries are all at the front.
        while self._replies:
            entry = next(iter(self._replies.values()))
            if now - entry.first_sent < self._ttl:
                break
            self._replies.popitem(last=False)
        while self._recalled:
            first = next(iter(self._recalled.values()))
            if now - first < self._ttl:
                break
            self._recalled.popitem(last=False)
