"""Where the memory page keeps its sign-ins across restarts: two tables of
``gateway.db`` (migration ``_m014_admin_sessions``, gateway/sessions.py).

``admin_sessions`` holds, per live session, an HMAC of its id keyed with a
key derived from the admin token, and when it expires; never the cookie.
The file alone (a backup, a stolen disk) therefore gives neither a cookie
nor a way to forge one: that needs the token. ``admin_failures`` holds the
recent wrong-token attempts per client address (the lockout).
"""

from __future__ import annotations

from memory.db import Database

__all__ = ["AdminStore"]


class AdminStore:
    """``admin_sessions`` and ``admin_failures`` in gateway.db."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def sessions(self, now: float) -> list[tuple[str, float]]:
        """The live sessions (hash, expiry), oldest first; expired ones go."""
        await self.db.write("DELETE FROM admin_sessions WHERE expires_at < ?", (int(now),))
        rows = await self.db.fetchall("SELECT id_hash, expires_at FROM admin_sessions ORDER BY expires_at, id_hash")
        return [(str(r[0]), float(r[1])) for r in rows]

    async def add_session(self, id_hash: str, expires_at: float) -> None:
        await self.db.write(
            "INSERT OR REPLACE INTO admin_sessions(id_hash, expires_at) VALUES (?, ?)", (id_hash, int(expires_at))
        )

    async def end_sessions(self, id_hashes: list[str]) -> None:
        for h in id_hashes:
            await self.db.write("DELETE FROM admin_sessions WHERE id_hash = ?", (h,))

    async def failures(self, since: float) -> list[tuple[str, float]]:
        """Wrong-token attempts after ``since`` (older ones go), oldest first."""
        await self.db.write("DELETE FROM admin_failures WHERE at < ?", (since,))
        rows = await self.db.fetchall("SELECT who, at FROM admin_failures ORDER BY at")
        return [(str(r[0]), float(r[1])) for r in rows]

    async def add_failure(self, who: str, at: float, *, keep: int, since: float) -> None:
        """One more for ``who``; only its last ``keep`` are kept (the lockout
        counts no more) and none before ``since``, so scanners cannot grow
        the table."""
        await self.db.write("INSERT INTO admin_failures(who, at) VALUES (?, ?)", (who, at))
        await self.db.write("DELETE FROM admin_failures WHERE at < ?", (since,))
        await self.db.write(
            "DELETE FROM admin_failures WHERE who = ? AND rowid NOT IN "
            "(SELECT rowid FROM admin_failures WHERE who = ? ORDER BY at DESC LIMIT ?)",
            (who, who, keep),
        )
