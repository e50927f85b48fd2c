"""Incognito: a user asks the bot not to learn from what they say for a
while (``/incognito``), as a browser's private window keeps no history.

While it is on, their turns are answered as usual, with what the bot
already remembers, and kept in the chat's Tier 0 so the conversation reads
on; but every row is written as never to be learnt (``buffered = 2``,
gateway/sessions.py): no extraction, no summary, no pre-compaction flush,
and an edit of one later changes Tier 0 only. ``/incognito off`` ends it.
What they ask to be remembered in so many words (the ``memory_save`` tool)
is still saved: that is not learning behind their back.

The setting is the user's (every chat, every channel their identity
joins) and lives in ``gateway.db`` (``user_incognito``), so a restart does
not end it; ``/forget all`` erases it with the rest.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from memory.clock import format_ts, parse_ts
from memory.db import Database
from memory.lru import LRU

__all__ = ["Incognito"]

USERS_KEPT = 4096  # users whose setting is cached (asked once per message)


class Incognito:
    """``user_incognito`` in gateway.db, read through a cache (asked once
    per message)."""

    def __init__(self, db: Database, *, users_kept: int = USERS_KEPT) -> None:
        self.db = db
        # The most recent users' answers; one forgotten is read again.
        self._cache: LRU[str, datetime | None] = LRU(users_kept)

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-user cache, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"cache": self._cache.view()}

    async def since(self, owner: str) -> datetime | None:
        """When the user turned incognito on; None when it is off."""
        if owner in self._cache:
            return self._cache[owner]
        row = await self.db.fetchone("SELECT since FROM user_incognito WHERE owner = ?", (owner,))
        since = parse_ts(str(row[0])) if row is not None else None
        self._cache[owner] = since
        return since

    async def start(self, owner: str, *, at: datetime) -> bool:
        """Turn it on; False when it already was (its start stays)."""
        _, n = await self.db.write(
            "INSERT INTO user_incognito(owner, since) VALUES (?, ?) ON CONFLICT(owner) DO NOTHING",
            (owner, format_ts(at)),
        )
        self._cache.pop(owner, None)
        return n > 0

    async def end(self, owner: str) -> bool:
        """Turn it off; False when it was not on."""
        _, n = await self.db.write("DELETE FROM user_incognito WHERE owner = ?", (owner,))
        self._cache[owner] = None
        return n > 0

    async def forget_owner(self, owner: str) -> int:
        return int(await self.end(owner))

    async def owners(self) -> list[str]:
        """Who has it on (the whole store's export names them)."""
        return [str(r[0]) for r in await self.db.fetchall("SELECT owner FROM user_incognito ORDER BY owner")]

    async def move_owner(self, old: str, new: str) -> int:
        """merge-identities: ``old``'s setting becomes ``new``'s unless ``new`` has one."""
        _, moved = await self.db.write(
            "UPDATE user_incognito SET owner = ? WHERE owner = ? "
            "AND NOT EXISTS (SELECT 1 FROM user_incognito WHERE owner = ?)",
            (new, old, new),
        )
        await self.db.write("DELETE FROM user_incognito WHERE owner = ?", (old,))
        self._cache.pop(old, None)
        self._cache.pop(new, None)
        return moved
