"""Recently seen ids, bounded in count and age, optionally kept across
restarts.

Feishu delivers events at least once: a webhook is retried when our answer
is slow or lost (after 15 s, 5 min, 1 h, 6 h), and a long connection may
redeliver after a reconnect. Remembering ids for a few hours is what stops
the bot answering the same message twice.

Given an :class:`IdStore` (the gateway passes its table in gateway.db,
``gateway/seenids.py``), the ids are written behind to it and loaded by
:meth:`RecentIds.open`, so a retry that comes after a restart is dropped
too. As for the reply log (``replies.py``): an id is seen at once in
memory, checking one never reads the disk, and a background task hands
the last ``flush_every`` seconds' changes to the store in one transaction
(a crash loses at most that second: such an event may be answered twice,
as every one was before). Expired ids are swept from the store at start
and with a write at most once a minute, and it keeps only the newest
``maxsize``. Times are wall-clock seconds (``time.time``), which mean the
same to the next process.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from .writebehind import WriteBehind

__all__ = ["EVENT_IDS", "Change", "IdStore", "RecentIds"]

# (id, when it was seen): seen; (id, None): forgotten.
Change = tuple[str, float | None]


class IdStore(Protocol):
    """Where a :class:`RecentIds` keeps one kind of id across restarts."""

    async def load(self, since: float, limit: int) -> list[tuple[str, float]]:
        """The newest ``limit`` ids seen at ``since`` or later, oldest first,
        each with when it was seen."""
        ...

    async def write(self, changes: Sequence[Change], *, expired_before: float | None, keep: int) -> None:
        """Apply ``changes`` in order; given ``expired_before``, also drop
        the ids seen before it and all but the newest ``keep``; in one
        transaction."""
        ...


# Event ids a Feishu channel keeps: 4 events a second for the whole 7 h.
# Measured (scripts/bench_dedup.py): ~17 MB RSS when full, and 0.7 s to
# load them all from gateway.db at start. A busier bot drops the
# oldest early, and its webhook refuses events created before the oldest
# still held (``remembered_after``), so a replay never passes as new.
EVENT_IDS = 100_000


class RecentIds:
    def __init__(
        self,
        maxsize: int = EVENT_IDS,
        ttl: float = 7 * 3600.0,  # longer than Feishu's last retry (6 h)
        clock: Callable[[], float] = time.time,
        *,
        store: IdStore | None = None,
        flush_every: float = 1.0,
        sweep_every: float = 60.0,
    ) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("maxsize must be >= 1 and ttl > 0")
        self._maxsize = maxsize
        self._ttl = ttl
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # id -> time first seen, oldest first
        # When the newest id dropped for room (not age) was seen: ids seen
        # after it are all still here, ids seen up to it may not be.
        self._dropped: float | None = None
        self._store = store
        self._sweep_every = sweep_every
        self._swept: float | None = None  # when expired ids last left the store
        self._sweep_next = False  # the next write sweeps, whatever the time
        self._behind: WriteBehind[Change] = WriteBehind(
            self._save, every=flush_every, bound=4 * maxsize, name="feishu-seen-ids",
            # the ids are still known here; a restart would forget them
            failure="could not save the ids of events already taken; retrying",
        )

    @property
    def ttl(self) -> float:
        """Seconds an id is remembered: an event older than this may be taken twice."""
        return self._ttl

    def remembered_after(self) -> float:
        """Every id first seen after this time is still remembered: now
        minus the TTL, or later when ids had to leave for room (a bot
        busier than ``maxsize`` ids in the TTL). An event created before it
        may have been taken already and forgotten, so is refused as a replay."""
        horizon = self._clock() - self._ttl
        return horizon if self._dropped is None else max(horizon, self._dropped)

    def seen_before(self, key: str) -> bool:
        """Record ``key``; True when it was already recorded and not expired."""
        now = self._clock()
        self._expire(now)
        if key in self._seen:
            return True
        self._seen[key] = now
        if len(self._seen) > self._maxsize:
            self._drop_oldest()
        if self._store is not None:
            self._behind.note((key, now))
        return False

    def forget(self, key: str) -> None:
        """Unrecord ``key`` (its event was not handled after all), so a
        redelivery of it is taken again, after a restart too."""
        self._seen.pop(key, None)
        if self._store is not None:
            self._behind.note((key, None))

    def __contains__(self, key: object) -> bool:
        self._expire(self._clock())
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def _drop_oldest(self) -> None:
        _key, at = self._seen.popitem(last=False)
        self._dropped = at if self._dropped is None else max(self._dropped, at)

    def _expire(self, now: float) -> None:
        # Insertion order is age order, so expired ids are all at the front.
        while self._seen:
            key, first = next(iter(self._seen.items()))
            if now - first < self._ttl:
                break
            del self._seen[key]

    # -- the store -----------------------------------------------------------------
    async def open(self) -> None:
        """Load the ids still within the TTL (before any event is taken in),
        sweep the expired ones from the store and start writing behind.
        Without a store: nothing to do."""
        if self._store is None or self._behind.started:
            return
        now = self._clock()
        rows = await self._store.load(now - self._ttl, self._maxsize)
        if len(rows) >= self._maxsize:
            # The store keeps the newest maxsize too: older ones may have left it.
            self._dropped = rows[0][1]
        loaded = OrderedDict((key, at) for key, at in rows if key not in self._seen)
        loaded.update(self._seen)  # any seen here already is newer
        self._seen = loaded
        while len(self._seen) > self._maxsize:
            self._drop_oldest()
        self._expire(now)
        await self.flush(sweep=True)
        self._behind.start()

    async def close(self) -> None:
        """Stop writing behind and write what is left; safe to call twice."""
        await self._behind.stop()

    async def flush(self, *, sweep: bool = False) -> None:
        """Hand the changes noted so far to the store, sweeping expired ids
        along when ``sweep`` or a minute has passed since the last sweep. A
        failed write keeps them for the next one (logged): the ids are
        still known here."""
        if self._store is None:
            return
        self._sweep_next = self._sweep_next or sweep
        await self._behind.flush(always=sweep)

    async def _save(self, changes: list[Change]) -> None:
        assert self._store is not None
        now = self._clock()
        sweep = self._sweep_next or (bool(changes) and (self._swept is None or now - self._swept >= self._sweep_every))
        if not changes and not sweep:
            return
        await self._store.write(changes, expired_before=now - self._ttl if sweep else None, keep=self._maxsize)
        if sweep:
            self._swept, self._sweep_next = now, False
