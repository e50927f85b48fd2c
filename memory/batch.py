"""Group commit: rows of one kind from many callers, one statement per round trip.

Every write through aiosqlite is a hop to its thread and back through the
event loop, and in a busy gateway those hops (and the GIL hand-offs they
cause), not SQLite, were the cost of the Tier 0 and extraction-buffer
writes: four per message. A :class:`RowBatcher` queues the rows of
concurrent callers and writes everything queued as one multi-row statement
when the previous one is done, so under load N chats' rows cost one hop,
and a lone caller still costs one.

A statement is atomic on its own (autocommit). When one fails, each caller's
rows are written again alone, so only the caller whose rows are at fault
gets the error.

Statements hold a power-of-two number of rows (what is queued beyond it goes
in the next one, with whatever arrives meanwhile): each row count is its
own SQL text, prepared once and kept in the connection's statement cache
(128 statements). Any count up to 128 grew the writers' prepared statements
to 4 MB for gateway.db and 14 MB for memory.db over a gateway bench run;
powers of two keep them to about twice the largest statement
(docs/BENCHMARKS.md, RSS).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .db import Database

__all__ = ["RowBatcher", "insert_statement"]

# SQLite allows 32,766 parameters per statement (3.32+); stay well below.
_MAX_PARAMS = 30_000


def insert_statement(head: str, width: int, returning: str = "") -> Callable[[int], str]:
    """``head VALUES (?, ...), (?, ...) [RETURNING ...]`` for ``n`` rows."""
    one = "(" + ", ".join("?" * width) + ")"
    tail = f" RETURNING {returning}" if returning else ""
    return lambda n: f"{head} VALUES {', '.join([one] * n)}{tail}"


@dataclass
class _Job:
    rows: list[Sequence[Any]]
    future: asyncio.Future[list[Any]] = field(repr=False)


class RowBatcher:
    """Write rows of one statement shape for many callers at once.

    ``build(n)`` gives the SQL for ``n`` rows of ``width`` parameters each.
    With ``returning``, the statement must return one value per row (e.g.
    ``RETURNING id`` of a rowid table), and :meth:`write` gives each caller
    the values of its rows: sorted ascending and matched to the rows in
    order, which holds for rowids inserted by the single writer connection.
    """

    def __init__(
        self, db: Database, build: Callable[[int], str], width: int, *, returning: bool = False
    ) -> None:
        self.db = db
        self.build = build
        self.width = width
        self.returning = returning
        self.max_rows = max(1, _MAX_PARAMS // max(1, width))
        self._queue: deque[_Job] = deque()
        self._queued = 0  # rows in _queue
        self._flusher: asyncio.Task[None] | None = None
        self._inflight: list[_Job] = []
        self.statements = 0  # written so far (for benchmarks and tests)

    async def write(self, rows: Sequence[Sequence[Any]]) -> list[Any]:
        """Queue ``rows`` for the next statement; return once it committed
        (with their RETURNING values if ``returning``). Cancelling the
        caller does not take its rows back."""
        if not rows:
            return []
        if len(rows) > self.max_rows:  # one statement each, so a caller's rows are atomic
            raise ValueError(f"at most {self.max_rows} rows per write, got {len(rows)}")
        for r in rows:
            if len(r) != self.width:
                raise ValueError(f"expected {self.width} values per row, got {len(r)}")
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_consume)
        self._queue.append(_Job(list(rows), future))
        self._queued += len(rows)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="row-batcher")
            self._flusher.add_done_callback(self._flusher_done)
        return await asyncio.shield(future)

    async def drain(self) -> None:
        """Wait until every row queued so far is written (or failed); rows
        queued meanwhile by others are not waited for, so a busy gateway
        cannot keep this waiting."""
        pending = [j.future for j in (*self._inflight, *self._queue) if not j.future.done()]
        if pending:
            await asyncio.wait(pending)

    def _flusher_done(self, task: asyncio.Task[None]) -> None:
        # Cancelled (the loop shutting down), even before it ran: nobody may
        # wait forever for rows it will not write.
        if task is not self._flusher:  # a newer flusher owns the queue now
            return
        if task.cancelled() or task.exception() is not None:
            gone = RuntimeError("row batcher stopped before writing these rows")
            for job in (*self._inflight, *self._queue):
                _settle(job, gone)
            self._queue.clear()
            self._queued = 0
        self._inflight = []

    async def _flush(self) -> None:
        while self._queue:
            batch: list[_Job] = []
            n = 0
            room = _power_of_two_at_most(min(self._queued, self.max_rows))
            # A caller's rows stay in one statement: a job larger than the
            # room goes alone, in a statement of its own size.
            while self._queue and (not batch or n + len(self._queue[0].rows) <= room):
                job = self._queue.popleft()
                batch.append(job)
                n += len(job.rows)
            self._queued -= n
            self._inflight = batch
            try:
                out = await self._run([r for job in batch for r in job.rows])
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch[0], exc)
                    continue
                for job in batch:  # only the rows at fault fail
                    try:
                        _settle(job, await self._run(job.rows))
                    except Exception as one:
                        _settle(job, one)
                continue
            i = 0
            for job in batch:
                _settle(job, out[i : i + len(job.rows)] if self.returning else [])
                i += len(job.rows)

    async def _run(self, rows: list[Sequence[Any]]) -> list[Any]:
        """One statement (batches never exceed ``max_rows``)."""
        sql = self.build(len(rows))
        params = [v for r in rows for v in r]
        self.statements += 1
        if not self.returning:
            await self.db.write(sql, params)
            return []
        got = sorted(r[0] for r in await self.db.write_returning(sql, params))
        if len(got) != len(rows):
            raise RuntimeError(f"expected {len(rows)} returned values, got {len(got)}")
        return got


def _power_of_two_at_most(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _settle(job: _Job, result: list[Any] | BaseException) -> None:
    if job.future.done():
        return
    if isinstance(result, BaseException):
        job.future.set_exception(result)
    else:
        job.future.set_result(result)


def _consume(f: asyncio.Future[list[Any]]) -> None:
    # A caller cancelled while waiting never reads its future's error;
    # reading it here keeps asyncio from logging it as lost.
    if not f.cancelled():
        f.exception()
