"""Draft messages kept until their reply is out, in gateway.db (table
``draft_messages``, migration 009 of ``gateway/sessions.py``): the store
behind a channel's reply drafts (``channels.feishu.drafts.DraftStore``), so
a reply sent after a restart, from the outbox, still becomes the message
that showed its drafts, and a draft whose reply will never come is found
at the next start and withdrawn.

A row holds platform ids (chat, the draft message), the reply's
``send_key`` (which ties it to its row in the outbox) and a time; no words
and no owner. Like ``sent_replies`` it is not erased with a user's data:
it says nothing the chat does not show, and it lives until the reply is
out, at most :data:`~channels.feishu.drafts.DRAFT_KEEP` (a day), swept on
every write. Each method is one statement or one transaction, so a crash
leaves a row whole or absent. A reply with an outbox row (``kept``) is
not forgotten here but by the outbox, with that row, in one transaction
(``Outbox.remove``/``retry_later`` ``drafted``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from channels.feishu.drafts import StoredDraft
from memory.db import Database

__all__ = ["DraftMessages"]

_COLUMNS = "send_key, chat_id, message_id, created_at, finishing"


def _draft(row: Sequence[Any]) -> StoredDraft:
    return StoredDraft(str(row[0]), str(row[1]), str(row[2]), float(row[3]), bool(row[4]))


class DraftMessages:
    """``DraftMessages(db, channel)``: ``channel``'s rows in gateway.db's
    :class:`~memory.db.Database` (the session store's). A
    :class:`~channels.feishu.drafts.DraftStore`."""

    def __init__(self, db: Database, channel: str) -> None:
        self.db = db
        self.channel = channel

    async def put(self, draft: StoredDraft, *, expired_before: float) -> None:
        async with self.db.transaction() as conn:
            await conn.execute(
                f"INSERT OR REPLACE INTO draft_messages (channel, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (self.channel, draft.send_key, draft.chat_id, draft.message_id, draft.created_at, int(draft.finishing)),
            )
            await conn.execute(
                "DELETE FROM draft_messages WHERE channel = ? AND created_at < ?", (self.channel, expired_before)
            )

    async def get(self, send_key: str) -> StoredDraft | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM draft_messages WHERE channel = ? AND send_key = ?", (self.channel, send_key)
        )
        return _draft(row) if row is not None else None

    async def finishing(self, send_key: str) -> None:
        await self.db.write(
            "UPDATE draft_messages SET finishing = 1 WHERE channel = ? AND send_key = ?", (self.channel, send_key)
        )

    async def remove(self, send_key: str) -> None:
        await self.db.write("DELETE FROM draft_messages WHERE channel = ? AND send_key = ?", (self.channel, send_key))

    async def orphans(self) -> list[StoredDraft]:
        """Rows whose reply has no row in the outbox (``send_key`` rides in
        its ``extra``): the run that showed them ended mid-turn, or their
        reply was dropped since."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM draft_messages d WHERE channel = ? AND NOT EXISTS ("
            "SELECT 1 FROM outbox o WHERE o.channel = d.channel AND json_extract(o.extra, '$.send_key') = d.send_key"
            ") ORDER BY created_at",
            (self.channel,),
        )
        return [_draft(r) for r in rows]

    async def count(self) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM draft_messages WHERE channel = ?", (self.channel,))
        return int(row[0]) if row else 0
