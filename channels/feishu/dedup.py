"""Recently seen ids, bounded in count and age.

Feishu delivers events at least once: a webhook is retried when our answer
is slow or lost (after 15 s, 5 min, 1 h, 6 h), and a long connection may
redeliver after a reconnect. Remembering ids for a few hours is what stops
the bot answering the same message twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RecentIds"]


class RecentIds:
    def __init__(
        self,
        maxsize: int = 10_000,
        ttl: float = 7 * 3600.0,  # longer than Feishu's last retry (6 h)
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("maxsize must be >= 1 and ttl > 0")
        self._maxsize = maxsize
        self._ttl = ttl
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # id -> time first seen, oldest first

    def seen_before(self, key: str) -> bool:
        """Record ``key``; True when it was already recorded and not expired."""
        now = self._clock()
        self._expire(now)
        if key in self._seen:
            return True
        self._seen[key] = now
        if len(self._seen) > self._maxsize:
            self._seen.popitem(last=False)
        return False

    def forget(self, key: str) -> None:
        """Unrecord ``key`` (its event was not handled after all), so a
        redelivery of it is taken again."""
        self._seen.pop(key, None)

    def __contains__(self, key: object) -> bool:
        self._expire(self._clock())
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def _expire(self, now: float) -> None:
        # Insertion order is age order, so expired ids are all at the front.
        while self._seen:
            key, first = next(iter(self._seen.items()))
            if now - first < self._ttl:
                break
            del self._seen[key]
