"""Which comment went into which burst of forwards, in gateway.db (table
``burst_comments``, migration 010 of ``gateway/sessions.py``): the store
behind the Telegram channel's :class:`~channels.telegram.CommentStore`, so
an edit of a comment typed with forwards still changes their message after
a restart.

A row holds platform ids (the chat, the comment, the burst's message, the
burst's comments in order) with each comment's length and when it was
kept; no words and no owner. Like ``sent_replies`` it is not erased with a
user's data: it says nothing of them the chat does not show, and it lives
the edit window (48 h), the newest 1,000 a channel.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from memory.db import Database

__all__ = ["EDIT_WINDOW", "KEPT", "BurstComments"]

EDIT_WINDOW = 48 * 3600.0  # seconds a comment's edit is still applied (Telegram's edit window)
KEPT = 1000  # comments kept a channel


class BurstComments:
    """``BurstComments(db, channel)``: ``channel``'s rows in gateway.db's
    :class:`~memory.db.Database` (the session store's)."""

    def __init__(self, db: Database, channel: str, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.channel = channel
        self._clock = clock

    async def keep(self, chat_id: str, burst_id: str, comments: Sequence[tuple[str, int]]) -> None:
        now = self._clock()
        spans = json.dumps([[mid, chars] for mid, chars in comments])
        async with self.db.transaction() as conn:
            for mid, _ in comments:
                await conn.execute(
                    "INSERT OR REPLACE INTO burst_comments (channel, chat_id, comment_id, burst_id, comments, kept_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (self.channel, chat_id, mid, burst_id, spans, now),
                )
            await conn.execute(
                "DELETE FROM burst_comments WHERE channel = ? AND kept_at < ?", (self.channel, now - EDIT_WINDOW)
            )
            await conn.execute(
                "DELETE FROM burst_comments WHERE channel = ? AND rowid NOT IN (SELECT rowid FROM burst_comments "
                "WHERE channel = ? ORDER BY kept_at DESC, rowid DESC LIMIT ?)",
                (self.channel, self.channel, KEPT),
            )

    async def find(self, chat_id: str, comment_id: str) -> tuple[str, list[tuple[str, int]]] | None:
        row = await self.db.fetchone(
            "SELECT burst_id, comments FROM burst_comments WHERE channel = ? AND chat_id = ? AND comment_id = ? "
            "AND kept_at >= ?",
            (self.channel, chat_id, comment_id, self._clock() - EDIT_WINDOW),
        )
        if row is None:
            return None
        return str(row[0]), [(str(mid), int(chars)) for mid, chars in json.loads(row[1])]
