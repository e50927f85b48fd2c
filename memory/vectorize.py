"""The vectorizer: embeds memories in the background (seed 003).

Whatever writes a memory (extraction, compression, ``memory_save``, the
memory page, migration) only writes its row and FTS text; this service finds
the active memories whose vector is missing or stale
(:meth:`memory.vectors.VectorIndex.pending`) and embeds them in batches
through the cached embedder, so no reply ever waits on an embedding of a
memory. A failing endpoint loses nothing: the memories stay found by their
words, and the batch is retried with backoff.

A backfill yields to users: on an endpoint with one worker (Ollama's
default, scripts/embed_server.py) a query vector waits for the batch being
embedded, and 64 memories are 0.7 s of a small local model, past the
500 ms query timeout. So a batch is sized to hold the endpoint about
``batch_seconds`` (the endpoint's time per memory, fitted over the recent
batches: a fast or parallel endpoint still gets ``batch_size``), and for
``busy_for`` seconds after a query vector reached the endpoint
(``CachedEmbedder.queries``) it is at most ``busy_batch_size``.

Another process's writes (``myclaw memory add``) cannot wake the service:
every ``tick`` seconds while idle it asks SQLite whether another connection
committed (``PRAGMA data_version``, via :meth:`memory.db.Database.stamp`),
and looks for pending memories at once if so.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import structlog

from .embedding import Embedder, EmbeddingError
from .errorlog import error_brief, error_fields
from .vectors import Pending, VectorIndex

__all__ = ["Vectorizer"]

log = structlog.get_logger(component="vectorize")


def _endpoints_fault(exc: Exception) -> bool:
    """Down, slow, limiting: asking for each memory alone would only
    multiply the requests (or the timeouts) by the batch's size."""
    return isinstance(exc, EmbeddingError) and exc.endpoint


class Vectorizer:
    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        *,
        interval: float = 15.0,
        batch_size: int = 64,
        max_backoff: float = 600.0,
        # 120k memories, all embedded: one query over all of them held the
        # reader 46-68 ms; windows of 2,000 ids take at most 1.5 ms each
        # (47 ms per whole sweep, every interval).
        window: int = 2000,
        keep_days: int = 90,
        prune_every: float = 86400.0,
        busy_batch_size: int = 8,
        busy_for: float = 30.0,
        batch_seconds: float = 0.2,
        tick: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.interval = interval
        self.batch_size = batch_size
        # A query waits behind at most this many memories while users ask
        # (8 of a small local model: ~90 ms); the backfill is slower then.
        self.busy_batch_size = min(busy_batch_size, batch_size)
        self.busy_for = busy_for
        self._monotonic = monotonic
        self._queries_seen = 0
        self._busy_until = -math.inf
        self._size = batch_size  # of the batch last asked for
        # A query asked while a batch is out waits for it on a one-worker
        # endpoint: batches hold it about this long (0.4 of the 500 ms
        # queryTimeout), measured as (texts sent, seconds) of recent batches.
        self.batch_seconds = batch_seconds
        self._timings: deque[tuple[int, float]] = deque(maxlen=32)
        self.tick = tick
        self._external: int | None = None  # Database.stamp's count of other processes' commits
        self.max_backoff = max_backoff
        self.window = window
        self._cursor = 0  # the id the next sweep starts after
        # Cache rows of texts not embedded again for keep_days go (the
        # memories' own vectors stay in memory_vectors): the cache stays the
        # size of what is being written, not of everything ever written.
        self.keep_days = keep_days
        self.prune_every = prune_every
        self._last_prune: float | None = None
        self.failures = 0  # consecutive failed batches
        # memory id -> (content hash, error) of texts the endpoint refused
        # while others of their batch went through; skipped until edited.
        self.refused: dict[int, tuple[str, str]] = {}
        self.last_error = ""
        # A backfill (full batches back to back: hybrid recall turned on for
        # memories written before, or a new model): memories embedded so far,
        # when it started, when progress was last logged.
        self._backfill = 0
        self._backfill_started = 0.0
        self._backfill_logged = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def run_once(self) -> int:
        """Embed one batch of pending memories; returns how many were
        embedded. Raises what the embedder raised when nothing of the batch
        went through (nothing is written then)."""
        todo = await self._next_batch()
        if not todo:
            return 0
        try:
            sent, took = getattr(self.embedder, "sent", None), getattr(self.embedder, "sent_seconds", 0.0)
            started = self._monotonic()
            vectors = await self.embedder.embed([p.content for p in todo])
            pairs: list[tuple[Pending, np.ndarray]] = list(zip(todo, vectors, strict=True))
            if sent is None:  # an embedder that does not say: the whole call
                self._timings.append((len(todo), self._monotonic() - started))
            elif (n := self.embedder.sent - sent) > 0:  # type: ignore[attr-defined]
                # The endpoint's part only: cache hits and the cache's commit cost it nothing.
                self._timings.append((n, self.embedder.sent_seconds - took))  # type: ignore[attr-defined]
        except Exception as exc:
            if len(todo) == 1 or _endpoints_fault(exc):
                raise  # retried with backoff, the batch whole
            pairs = await self._one_by_one(todo)
        stored = await self.index.store(pairs)
        if stored < len(todo):
            # Edited or deleted while embedding: the next pass sees the new state.
            log.debug("memories changed while embedding", embedded=len(todo), stored=stored)
        return len(pairs)

    def _batch_limit(self) -> int:
        """As many memories as the endpoint embeds in ``batch_seconds``, at
        most ``batch_size``, and at most ``busy_batch_size`` for ``busy_for``
        seconds after a query vector was asked of the endpoint."""
        asked = getattr(self.embedder, "queries", 0)
        now = self._monotonic()
        if asked != self._queries_seen:
            self._queries_seen = asked
            self._busy_until = now + self.busy_for
        limit = self._timed_limit()
        return min(self.busy_batch_size, limit) if now < self._busy_until else limit

    def _timed_limit(self) -> int:
        """``batch_size``, or fewer if the endpoint's time per memory says a
        batch that size would hold it past ``batch_seconds``.

        A request takes a fixed latency plus a time per text; only the
        second is what a query queues behind on a one-worker endpoint (a
        remote, parallel one's 300 ms round trip is no reason for small
        batches). The time per text is the median slope between recent
        (texts, seconds) of sizes at least twice apart (Theil-Sen: one slow
        commit or hiccup does not set it), never more than the fastest
        request's seconds per text. Until there are such sizes, batches
        start at ``busy_batch_size`` and double while within the budget, or
        halve past it (latency or time per memory: a half-size batch tells),
        so no batch is much past the budget before it is measured."""
        if not self._timings:
            return self.busy_batch_size
        ns = np.array([n for n, _ in self._timings], dtype=np.float64)
        ts = np.array([t for _, t in self._timings], dtype=np.float64)
        upper = float(np.min(ts / ns))
        i, j = np.triu_indices(len(ns), 1)
        apart = np.maximum(ns[i], ns[j]) >= 2 * np.minimum(ns[i], ns[j])
        if apart.any():
            slopes = (ts[j] - ts[i])[apart] / (ns[j] - ns[i])[apart]
            per_text = min(max(float(np.median(slopes)), 0.0), upper)
            fits = self.batch_size if per_text <= 0 else int(self.batch_seconds / per_text)
            return max(1, min(self.batch_size, 2 * int(ns.max()), fits))
        n, took = self._timings[-1]
        if took > self.batch_seconds:
            return max(1, n // 2)
        fits = self.batch_size if upper <= 0 else int(self.batch_seconds / upper)
        return max(1, min(self.batch_size, 2 * n, fits))

    async def _next_batch(self) -> list[Pending]:
        """Up to ``batch_size`` (or ``busy_batch_size``) memories to embed,
        found by sweeping the ids in windows of ``window`` from where the
        last batch ended (wrapping around once), so no single read holds the
        shared reader for long."""
        size = self._size = self._batch_limit()
        top = await self.index.max_id()
        start = self._cursor = self._cursor if self._cursor < top else 0
        end, wrapped = top, False
        todo: list[Pending] = []
        while len(todo) < size:
            if self._cursor >= end:
                if wrapped or start == 0:
                    break  # every id seen once
                self._cursor, end, wrapped = 0, start, True
            upto = min(end, self._cursor + self.window)
            need = size - len(todo)
            asked = need + len(self.refused)
            # The size of the endpoint's latest answer, once there is one:
            # vectors of another size (it changed what it serves) are redone.
            raw = await self.index.pending(asked, after=self._cursor, upto=upto,
                                           dimension=getattr(self.embedder, "dimension", None))
            rows = [p for p in raw if self.refused.get(p.memory_id, ("",))[0] != p.content_hash]
            todo += rows[:need]
            # Continue after the last memory taken, or after the last one read
            # when the window may hold more, or after the window.
            if len(rows) > need:
                self._cursor = rows[need - 1].memory_id
            elif len(raw) == asked:
                self._cursor = raw[-1].memory_id
            else:
                self._cursor = upto
        return todo

    async def _one_by_one(self, todo: list[Pending]) -> list[tuple[Pending, np.ndarray]]:
        """A batch failed: find the memories the endpoint refuses (a text it
        will never take must not hold back every memory after it). If none
        goes through, the endpoint is down: raise, and the batch is retried."""
        good: list[tuple[Pending, np.ndarray]] = []
        bad: list[tuple[Pending, Exception]] = []
        for p in todo:
            try:
                good.append((p, (await self.embedder.embed([p.content]))[0]))
            except Exception as exc:
                if _endpoints_fault(exc):
                    raise  # it went down meanwhile: the rest would fail (or wait) the same
                bad.append((p, exc))
        if not good:
            raise bad[0][1]
        for p, err in bad:
            # Until the memory is edited (or the gateway restarts).
            self.refused[p.memory_id] = (p.content_hash, str(err) or type(err).__name__)
            log.warning("the endpoint refuses a memory; found by its words only", memory_id=p.memory_id,
                        error=self.refused[p.memory_id][1])
        return good

    async def drain(self) -> int:
        """Embed everything pending now (tests, benchmarks; the gateway runs :meth:`start`)."""
        total = 0
        while n := await self.run_once():
            total += n
        return total

    async def prune_cache(self) -> int:
        """Delete embedding-cache rows unused for ``keep_days``; their count."""
        prune = getattr(self.embedder, "prune", None)
        if prune is None:
            return 0
        self._last_prune = time.monotonic()
        n: int = await prune(unused_days=self.keep_days)
        if n:
            log.info("embedding cache pruned", rows=n, unused_days=self.keep_days)
        return n

    def _progress(self, n: int) -> None:
        """Log a backfill's start, its progress each minute, and its end; an
        ordinary write (a batch not full) logs nothing."""
        now = time.monotonic()
        if not self._backfill:
            if n < self._size:
                return
            self._backfill_started = self._backfill_logged = now
            log.info("embedding memories in the background", batch_size=self.batch_size)
        self._backfill += n
        if n < self._size:
            log.info("memories embedded", memories=self._backfill, seconds=round(now - self._backfill_started, 1))
            self._backfill = 0
        elif now - self._backfill_logged >= 60.0:
            self._backfill_logged = now
            log.info("embedding memories", so_far=self._backfill, seconds=round(now - self._backfill_started, 1))

    def wake(self) -> None:
        """New memories were written (a fact saved or extracted): embed them
        now instead of at the next interval, so a question right after
        "remember that..." finds the fact by meaning. Backoff after a
        failure still holds."""
        self._wake.set()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-vectorize")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _delay(self) -> float:
        if not self.failures:
            return self.interval
        return min(self.max_backoff, self.interval * 2.0 ** min(self.failures, 16))

    async def _run(self) -> None:
        try:
            warmed = await self.index.warm()
            if warmed:
                log.info("memory vectors loaded", owners=warmed, mb=round(self.index.cached_bytes / 1e6, 1))
        except Exception as exc:  # a cold cache only costs the first search its load
            log.warning("loading memory vectors failed", **error_fields(exc))
        await self._written_elsewhere()  # where other processes' commits are counted from
        while True:
            try:
                n = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the endpoint's trouble must not end the service
                self.failures += 1
                self.last_error = error_brief(exc)  # shown by health: its kind and codes, not its text
                log.warning(
                    "embedding memories failed; retrying", error=self.last_error, failures=self.failures,
                    retry_in_s=round(self._delay(), 1),
                )
                n = 0
            else:
                self._progress(n)
                if self.failures:
                    log.info("embedding memories works again", after_failures=self.failures)
                self.failures = 0
                self.last_error = ""
                if self._last_prune is None or time.monotonic() - self._last_prune >= self.prune_every:
                    try:
                        await self.prune_cache()
                    except Exception as exc:  # a cache that cannot shrink now can later
                        self._last_prune = time.monotonic()
                        log.warning("pruning the embedding cache failed", **error_fields(exc))
            if n >= self._size and not self.failures:
                await asyncio.sleep(0)  # more pending: next batch right away, yielding first
                continue
            if self.failures:
                await asyncio.sleep(self._delay())  # a down endpoint is not hammered on every write
            else:
                await self._idle(self._delay())
            self._wake.clear()

    async def _idle(self, delay: float) -> None:
        """Wait ``delay`` seconds, or until :meth:`wake`, or until another
        process commits to the file (checked every ``tick``: one
        ``PRAGMA data_version``, no read of any table)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay
        while (left := until - loop.time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(self.tick, left))
                return
            if await self._written_elsewhere():
                return

    async def _written_elsewhere(self) -> bool:
        """Whether another connection committed since the last look."""
        db = self.index.db
        if db.closed:
            return False
        try:
            _, external = await db.stamp("vectorize", max_age=self.tick / 2)
        except Exception as exc:  # the interval still finds the memories
            log.debug("checking for other processes' writes failed", **error_fields(exc))
            return False
        seen, self._external = self._external, external
        return seen is not None and external != seen
