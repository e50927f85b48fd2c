"""Group chats' titles, as the gateway last saw them (``chat_titles`` in
gateway.db), so a member's ``/share`` listing, the memory page and their
export name a group ("Family") rather than ``telegram:-100123``.

A Telegram message carries its chat's title; a Feishu event does not (its
chats fall back to their id). A title is written when it is first seen or
changes, not with every message. ``/forget all`` leaves titles: they are
the group's, not the member's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memory.db import Database
from memory.lru import LRU

__all__ = ["ChatTitles", "group_name"]

CHATS_KEPT = 4096  # chats whose last written title is remembered (no write while it is the same)
MAX_TITLE_CHARS = 128  # Telegram's limit; a longer one is cut


def group_name(place: str, names: Mapping[str, str]) -> str:
    """``channel:chat_id`` by its title when known, else as it is."""
    return names.get(place) or place


class ChatTitles:
    def __init__(self, db: Database, *, chats_kept: int = CHATS_KEPT) -> None:
        self.db = db
        self._written: LRU[str, str] = LRU(chats_kept)

    async def seen(self, channel: str, chat_id: str, title: str, *, at: str) -> None:
        """A message came in ``chat_id`` under ``title``."""
        title = " ".join(title.split())[:MAX_TITLE_CHARS]
        place = f"{channel}:{chat_id}"
        if not title or not channel or not chat_id or self._written.get(place) == title:
            return
        await self.db.write(
            "INSERT INTO chat_titles(channel, chat_id, title, seen_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(channel, chat_id) DO UPDATE SET title = excluded.title, seen_at = excluded.seen_at "
            "WHERE title != excluded.title",
            (channel, chat_id, title, at),
        )
        self._written[place] = title

    async def names(self, places: Iterable[str]) -> dict[str, str]:
        """``channel:chat_id`` -> title, for those of ``places`` with one."""
        want = sorted({p for p in places if ":" in p})
        out: dict[str, str] = {}
        for start in range(0, len(want), 200):
            chunk = want[start : start + 200]
            rows = await self.db.fetchall(
                f"SELECT channel || ':' || chat_id, title FROM chat_titles WHERE channel || ':' || chat_id "
                f"IN ({','.join('?' * len(chunk))})", chunk)
            out.update((str(r[0]), str(r[1])) for r in rows)
        return out
