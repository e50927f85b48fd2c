"""Which of the bot's messages answer which inbound message, in gateway.db
(table ``sent_replies``, migration 006 of ``gateway/sessions.py``): the
store behind a channel's reply log (``channels.feishu.replies.ReplyLog``),
so a message recalled after a restart still takes the bot's reply along.

A row holds platform ids (chat, the inbound message, the bot's message)
and when it was sent; no words and no owner. It is not erased with a
user's data (``/forget all``, ``myclaw memory forget --user``): it says
nothing about them that the chat itself does not show, it lives at most
the recall window (24 h), and it is what lets a recall made after an
erasure still withdraw the bot's reply from the chat.
"""

from __future__ import annotations

from collections.abc import Sequence

from channels.feishu.replies import SentPart, Taken
from memory.db import Database

__all__ = ["SentReplies"]


class SentReplies:
    """``SentReplies(db, channel)``: ``channel``'s rows in gateway.db's
    :class:`~memory.db.Database` (the session store's). A
    :class:`~channels.feishu.replies.ReplyStore`."""

    def __init__(self, db: Database, channel: str) -> None:
        self.db = db
        self.channel = channel

    async def load(self, since: float) -> list[SentPart]:
        rows = await self.db.fetchall(
            "SELECT answers, chat_id, message_id, sent_at FROM sent_replies "
            "WHERE channel = ? AND sent_at >= ? ORDER BY sent_at, rowid",
            (self.channel, since),
        )
        return [SentPart(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]

    async def write(self, changes: Sequence[SentPart | Taken], *, expired_before: float) -> None:
        async with self.db.transaction() as conn:
            for change in changes:
                if isinstance(change, SentPart):
                    await conn.execute(
                        "INSERT INTO sent_replies (channel, chat_id, answers, message_id, sent_at) VALUES (?, ?, ?, ?, ?)",
                        (self.channel, change.chat_id, change.answers, change.message_id, change.sent_at),
                    )
                else:
                    await conn.execute(
                        "DELETE FROM sent_replies WHERE channel = ? AND answers = ? AND chat_id = ?",
                        (self.channel, change.answers, change.chat_id),
                    )
            await conn.execute(
                "DELETE FROM sent_replies WHERE channel = ? AND sent_at < ?", (self.channel, expired_before)
            )

    async def count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM sent_replies WHERE channel = ?", (self.channel,))
        return int(row[0]) if row else 0
