"""Group chats' titles, as the gateway last saw them (``chat_titles`` in
gateway.db), so a member's ``/share`` listing, the memory page and their
export name a group ("Family") rather than ``telegram:-100123``.

A Telegram message carries its chat's title, written when it is first seen
or changes, not with every message. A Feishu event does not: the channel's
lookup (``GET /open-apis/im/v1/chats/:chat_id``) is asked in the
background the first time a group is seen and again once its stored title
is a day old; a failed or slow lookup leaves the id and is tried again
later, and never holds up the message. An app refused the permission
(Feishu's im:chat:readonly) is said so once at warning level, naming the
scope, and its channel is not asked again for a day (or until a restart):
every group would be refused alike. The refusal is kept in gateway.db
(``refused_permissions``) until an ask works, so ``myclaw doctor
--offline`` (:func:`read_refusals`) and /healthz, in the next run too,
report it. ``/forget all`` leaves titles: they are the group's, not the
member's.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

import structlog

from channels.base import NotPermitted
from memory.clock import Clock, SystemClock, format_ts, parse_ts
from memory.db import Database
from memory.errorlog import error_fields
from memory.lru import LRU

__all__ = [
    "REFUSED_RETRY_AFTER", "RETRY_AFTER", "STALE_AFTER", "ChatTitles", "Lookup", "group_name", "open_read_only",
    "read_refusals", "read_titles",
]

CHATS_KEPT = 4096  # chats whose last written title is remembered (no write while it is the same)
MAX_TITLE_CHARS = 128  # Telegram's limit; a longer one is cut
STALE_AFTER = timedelta(days=1)  # a looked-up title is asked for again after this (a group renamed)
RETRY_AFTER = timedelta(minutes=10)  # after a failed lookup
REFUSED_RETRY_AFTER = timedelta(days=1)  # after the app was refused the permission (an admin may grant it)
LOOKUP_TIMEOUT = 10.0  # seconds a lookup may take before it counts as failed

# chat_id -> its title ("" for none); raises on failure, NotPermitted when
# the app may not ask at all.
Lookup = Callable[[str], Awaitable[str]]

log = structlog.get_logger(__name__)


def group_name(place: str, names: Mapping[str, str]) -> str:
    """``channel:chat_id`` by its title when known, else as it is."""
    return names.get(place) or place


def open_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only: a file no process has open is read
    ``immutable``, so not even a ``-wal`` is made."""
    live = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()  # a gateway has it open
    uri = path.absolute().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    return sqlite3.connect(uri, uri=True, timeout=2.0)


def read_refusals(path: Path) -> dict[str, tuple[str, str]]:
    """Channel -> (the permission its platform refused the app, when) as
    the gateway.db at ``path`` last recorded them, read only, as
    :func:`read_titles` reads. {} when there is no such file or it
    predates the record."""
    if not path.is_file():
        return {}
    with closing(open_read_only(path)) as conn:
        try:
            rows = conn.execute("SELECT channel, scope, refused_at FROM refused_permissions").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
    return {str(channel): (str(scope), str(at)) for channel, scope, at in rows}


def read_titles(path: Path) -> dict[str, str]:
    """Every ``channel:chat_id`` -> title in the gateway.db at ``path``, for
    a command that opens memory.db alone (``myclaw memory export``): read
    only, never migrated or written (a file no process has open is read
    ``immutable``, so not even a ``-wal`` is made). {} when there is no
    such file or it predates the table. Raises ``sqlite3.DatabaseError``
    for a file that is not a database."""
    if not path.is_file():
        return {}
    with closing(open_read_only(path)) as conn:
        try:
            rows = conn.execute("SELECT channel || ':' || chat_id, title FROM chat_titles").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a gateway.db from before titles were kept
                return {}
            raise
    return {str(place): str(title) for place, title in rows}


def _clean(title: str) -> str:
    return " ".join(title.split())[:MAX_TITLE_CHARS]


def _waiting(waits: LRU[str, tuple[datetime, timedelta]] | dict[str, tuple[datetime, timedelta]], key: str,
             now: datetime) -> bool:
    """Whether ``key`` is not to be asked yet. A wait further off than it
    was set for means the clock stepped back since: it is cut to that wait
    from now (10 minutes, not 10 plus the step)."""
    entry = waits.get(key)
    if entry is None:
        return False
    due, wait = entry
    if due - now > wait:
        due = now + wait
        waits[key] = (due, wait)
    return now < due


class ChatTitles:
    def __init__(
        self,
        db: Database,
        *,
        chats_kept: int = CHATS_KEPT,
        clock: Clock | None = None,
        lookups: Mapping[str, Lookup] | None = None,
        timeout: float = LOOKUP_TIMEOUT,
    ) -> None:
        """``lookups``: channel -> how to ask it a group's title, for a
        channel whose messages carry none (Feishu); set as channels start."""
        self.db = db
        self.clock = clock or SystemClock()
        self.lookups: dict[str, Lookup] = dict(lookups or {})
        self.timeout = timeout
        self._written: LRU[str, str] = LRU(chats_kept)
        # place -> (not asked again before, the wait that was set), and so for a channel refused
        self._next_lookup: LRU[str, tuple[datetime, timedelta]] = LRU(chats_kept)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # place -> its lookup under way
        self.refused: dict[str, str] = {}  # channel -> the permission it was refused, while it is
        self._refused_until: dict[str, tuple[datetime, timedelta]] = {}  # channel -> the same, refused
        self._warned: set[str] = set()  # channels whose refusal was said at warning level

    async def load(self) -> None:
        """The refusals the last run recorded (this one asks again at once)."""
        rows = await self.db.fetchall("SELECT channel, scope FROM refused_permissions")
        self.refused.update((str(r[0]), str(r[1])) for r in rows)

    async def _record_refusal(self, channel: str, scope: str | None, at: datetime) -> None:
        """Kept (``scope``) or cleared (None) in gateway.db; a failed write
        costs only the record, said in the log."""
        try:
            if scope is None:
                await self.db.write("DELETE FROM refused_permissions WHERE channel = ?", (channel,))
            else:
                await self.db.write(
                    "INSERT INTO refused_permissions (channel, scope, refused_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (channel) DO UPDATE SET scope = excluded.scope, refused_at = excluded.refused_at",
                    (channel, scope, format_ts(at)))
        except (sqlite3.Error, OSError) as exc:
            log.error("could not record the permission's state in gateway.db", channel=channel, **error_fields(exc))

    async def seen(self, channel: str, chat_id: str, title: str, *, at: str) -> None:
        """A message came in ``chat_id`` under ``title``."""
        title = _clean(title)
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

    def untitled(self, channel: str, chat_id: str) -> None:
        """A message came in group ``chat_id`` without its title: looked up
        in the background when its channel has a lookup and the title is
        not known from the last day. Returns at once."""
        lookup = self.lookups.get(channel)
        place = f"{channel}:{chat_id}"
        if lookup is None or not chat_id or place in self._tasks:
            return
        now = self.clock.now()
        if _waiting(self._refused_until, channel, now) or _waiting(self._next_lookup, place, now):
            return
        task = asyncio.create_task(self._look_up(channel, chat_id, lookup), name=f"title:{place}")
        self._tasks[place] = task
        task.add_done_callback(lambda _t: self._tasks.pop(place, None))

    async def _look_up(self, channel: str, chat_id: str, lookup: Lookup) -> None:
        place = f"{channel}:{chat_id}"
        now = self.clock.now()
        try:
            row = await self.db.fetchone(
                "SELECT seen_at FROM chat_titles WHERE channel = ? AND chat_id = ?", (channel, chat_id))
            if row is not None and parse_ts(str(row[0])) + STALE_AFTER > now:  # fresh: another run asked
                self._next_lookup[place] = (parse_ts(str(row[0])) + STALE_AFTER, STALE_AFTER)
                return
            title = _clean(await asyncio.wait_for(lookup(chat_id), self.timeout))
            if title:
                # seen_at moves on even for the same title: it says when it was last asked.
                await self.db.write(
                    "INSERT INTO chat_titles(channel, chat_id, title, seen_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(channel, chat_id) DO UPDATE SET title = excluded.title, seen_at = excluded.seen_at",
                    (channel, chat_id, title, format_ts(now)),
                )
                self._written[place] = title
            self._next_lookup[place] = (now + STALE_AFTER, STALE_AFTER)
            if (granted := self.refused.pop(channel, None)) is not None:
                self._refused_until.pop(channel, None)
                await self._record_refusal(channel, None, now)
                log.info(f"group titles are looked up again: {granted} was granted", channel=channel)
        except NotPermitted as exc:
            # The app's, not this group's: every group would be refused alike.
            # From the answer, not the ask: the clock may have stepped while it was awaited.
            self._refused_until[channel] = (self.clock.now() + REFUSED_RETRY_AFTER, REFUSED_RETRY_AFTER)
            self.refused[channel] = exc.scope
            await self._record_refusal(channel, exc.scope, now)
            if channel not in self._warned:
                self._warned.add(channel)
                log.warning(f"the {channel} app may not read group information ({exc.scope}): groups are shown "
                            f"by id in /share, the memory page and exports; grant {exc.scope} to the app "
                            "(and publish a version) to name them. Asked again in a day or at restart",
                            channel=channel, scope=exc.scope)
            else:
                log.info("group title lookup still not permitted", channel=channel, scope=exc.scope)
        except Exception as exc:  # a nicety: the group keeps its id until the next try
            self._next_lookup[place] = (self.clock.now() + RETRY_AFTER, RETRY_AFTER)  # from the failure
            # Neither the title nor any message text: the error's kind and Feishu's code alone.
            log.info("group title lookup failed; shown by its id for now", channel=channel, chat_id=chat_id,
                     error=type(exc).__name__, code=getattr(exc, "code", None))

    async def idle(self) -> None:
        """Until every lookup under way has ended (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def aclose(self) -> None:
        """Lookups under way are dropped (tried again at the next run)."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

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
