"""Who the gateway keeps anything of beside memory (``UserData.owners``:
history, inbox, settings, files, jobs), for the memory page's user list:
someone with only such rows is exportable by ``?user=``, so listed too.
Finding them reads gateway.db's history without an index on its owner (a
scan), so the answer is kept for a short while instead of read on every
render (scripts/bench_web_users.py, docs/BENCHMARKS.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["KeptOwners"]


class KeptOwners:
    """``KeptOwners(fetch, ttl=30)``: :meth:`get` gives ``fetch()``'s last
    answer while younger than ``ttl`` seconds (on ``clock``, monotonic);
    one read at a time, the renders waiting on it sharing its answer."""

    def __init__(self, fetch: Callable[[], Awaitable[list[str]]], *, ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch = fetch
        self.ttl = ttl
        self.clock = clock
        self._owners: list[str] = []
        self._at: float | None = None
        self._lock = asyncio.Lock()
        self.reads = 0  # how many times gateway.db was read (tests, the bench)

    async def get(self) -> list[str]:
        async with self._lock:
            if self._at is None or self.clock() - self._at >= self.ttl:
                self._owners = list(await self.fetch())
                self._at = self.clock()
                self.reads += 1
            return self._owners
