"""Changes kept in memory at once and handed to a store behind: the reply
log (``replies.py``) and the seen ids (``dedup.py``) both answer from
memory and write to gateway.db every ``every`` seconds, in one transaction,
so no event waits for the disk."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import structlog

from gateway.logging import error_fields

__all__ = ["WriteBehind"]

C = TypeVar("C")
log = structlog.get_logger(channel="feishu")


class WriteBehind(Generic[C]):
    """``note`` a change; ``write`` gets the changes noted since the last
    write, in order, one write at a time. A failed write keeps them for the
    next one (logged as ``failure``), at most ``bound`` of them: a store that
    keeps failing costs the oldest changes, not memory."""

    def __init__(
        self, write: Callable[[list[C]], Awaitable[None]], *, every: float, bound: int, name: str, failure: str
    ) -> None:
        self._write = write
        self._every = every
        self._bound = bound
        self._name = name
        self._failure = failure
        self._changes: list[C] = []
        self._lock = asyncio.Lock()  # changes land in order
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def note(self, change: C) -> None:
        self._changes.append(change)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._often(), name=self._name)

    async def stop(self) -> None:
        """Stop writing behind and write what is left; safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.flush()

    async def flush(self, *, always: bool = False) -> None:
        """Write the changes noted so far (``always``: even none, for a
        store that does more than apply them, e.g. sweep)."""
        async with self._lock:
            changes, self._changes = self._changes, []
            if not changes and not always:
                return
            try:
                await self._write(changes)
            except asyncio.CancelledError:
                self._changes[:0] = changes
                raise
            except Exception as exc:
                self._changes[:0] = changes
                del self._changes[: max(0, len(self._changes) - self._bound)]
                log.error(self._failure, pending=len(self._changes), **error_fields(exc))

    async def _often(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            await self.flush()
