"""Ids a channel has seen, in gateway.db (table ``seen_ids``, migration 007
of ``gateway/sessions.py``): the store behind a channel's
``channels.feishu.dedup.RecentIds``, so what it took before a restart is
still known after it. Feishu keeps two kinds: ``event`` (event ids taken,
so a retry or a redelivery is not answered twice) and ``recalled``
(messages recalled, so a reply to one is never sent).

A row holds a platform id (a recalled message's with its chat) and when
it was seen; no words and no owner. Like ``sent_replies`` it is not
erased with a user's data: it says nothing about them that the chat
itself does not show, and it lives hours (7 h for events, the recall
window of 24 h for recalls).
"""

from __future__ import annotations

from collections.abc import Sequence

from channels.feishu.dedup import Change
from memory.db import Database

__all__ = ["SeenIds"]


class SeenIds:
    """``SeenIds(db, channel, kind)``: the ``kind`` ids of ``channel`` in
    gateway.db's :class:`~memory.db.Database` (the session store's). A
    :class:`~channels.feishu.dedup.IdStore`."""

    def __init__(self, db: Database, channel: str, kind: str) -> None:
        self.db = db
        self.channel = channel
        self.kind = kind

    async def load(self, since: float, limit: int) -> list[tuple[str, float]]:
        rows = await self.db.fetchall(
            "SELECT id, seen_at FROM (SELECT id, seen_at FROM seen_ids WHERE channel = ? AND kind = ? AND seen_at >= ? "
            "ORDER BY seen_at DESC LIMIT ?) ORDER BY seen_at",
            (self.channel, self.kind, since, limit),
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    async def write(self, changes: Sequence[Change], *, expired_before: float | None, keep: int) -> None:
        scope = (self.channel, self.kind)
        async with self.db.transaction() as conn:
            for key, at in changes:
                if at is None:
                    await conn.execute("DELETE FROM seen_ids WHERE channel = ? AND kind = ? AND id = ?", (*scope, key))
                else:
                    await conn.execute(
                        "INSERT OR REPLACE INTO seen_ids (channel, kind, id, seen_at) VALUES (?, ?, ?, ?)",
                        (*scope, key, at),
                    )
            if expired_before is not None:
                await conn.execute(
                    "DELETE FROM seen_ids WHERE channel = ? AND kind = ? AND seen_at < ?", (*scope, expired_before)
                )
                # Bounded as the set in memory is: only the newest ``keep``.
                await conn.execute(
                    "DELETE FROM seen_ids WHERE channel = ? AND kind = ? AND seen_at < (SELECT seen_at FROM seen_ids "
                    "WHERE channel = ? AND kind = ? ORDER BY seen_at DESC LIMIT 1 OFFSET ?)",
                    (*scope, *scope, keep - 1),
                )

    async def count(self) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) FROM seen_ids WHERE channel = ? AND kind = ?", (self.channel, self.kind)
        )
        return int(row[0]) if row else 0
