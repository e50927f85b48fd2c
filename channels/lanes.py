"""Per-chat intake lanes: a slow message (a picture or recording being
downloaded, an album being gathered) holds up only its own chat.

A channel hands each incoming message over as a job, keyed by its chat.
When the chat has nothing pending and the job is quick (``run``), it runs
at once, inline: the common text message costs no task. A slow job
(``submit``), or any job of a chat that already has one pending, waits in
that chat's lane and runs after the jobs before it, in order, on a task of
the lane's own; other chats go straight on. So a chat's messages reach the
bus in the order they came, and one chat's download never stalls another's.

What the jobs hold back on the platform (Telegram's update offset) is the
channel's business: the lanes only say when a job finished
(:meth:`Lanes.wait_change`) and whether any is left (:meth:`Lanes.wait_idle`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Collection

import structlog

from gateway.logging import error_fields

__all__ = ["Job", "Lanes"]

Job = Callable[[], Awaitable[None]]


class Lanes:
    """Ordered lanes of pending jobs, one per key (a chat).

    A job that raises is logged and skipped (the next one runs); a
    cancelled lane drops the jobs still waiting in it. After :meth:`close`
    no job is taken."""

    def __init__(self, name: str = "lanes") -> None:
        self._queues: dict[str, deque[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._ending: set[asyncio.Task[None]] = set()  # cancelled, not finished yet
        # Keys whose quick job runs inline right now, set when it ends: a job
        # for the same key meanwhile (a second webhook request) queues behind it.
        self._inline: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Event()
        self._closed = False
        self._log = structlog.get_logger(component=name)

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-lane queues, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"queues": self._queues}

    def busy(self, key: str) -> bool:
        """Whether ``key`` has a job waiting or running (inline included)."""
        return key in self._workers or key in self._inline

    @property
    def pending(self) -> int:
        """Jobs waiting or running, in every lane."""
        return sum(len(q) for q in self._queues.values())  # a running job leaves its queue once done

    async def run(self, key: str, job: Job) -> None:
        """Run a quick ``job`` now when ``key`` has nothing pending (the
        caller waits for it); otherwise it goes behind what is pending,
        including another caller's job still running inline."""
        if self.busy(key):
            self.submit(key, job)
            return
        done = self._inline[key] = asyncio.Event()
        try:
            await job()
        finally:
            del self._inline[key]
            done.set()

    def submit(self, key: str, job: Job) -> None:
        """Queue ``job`` at the end of ``key``'s lane and return at once."""
        if self._closed:
            raise RuntimeError("Lanes are closed")
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            task = self._workers[key] = asyncio.create_task(self._work(key, queue), name=f"lane-{key}")
            task.add_done_callback(self._ended)
        queue.append(job)

    async def _work(self, key: str, queue: deque[Job]) -> None:
        if (inline := self._inline.get(key)) is not None:
            await inline.wait()  # the job that ran inline came first
        while queue:
            job = queue[0]
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad job must not stop the chat's lane
                # Its text may quote the message: logged by type and place.
                self._log.error("intake job failed; skipped", key=key, **error_fields(exc))
            queue.popleft()
            self._notify()
        # Emptied: gone before anything else runs, so a job submitted from
        # now on starts a new lane instead of joining this finished one.
        if self._workers.get(key) is asyncio.current_task():
            del self._queues[key]
            del self._workers[key]

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._ending.discard(task)
        self._notify()

    def _notify(self) -> None:
        # One event per generation: every waiter of this one wakes up.
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float) -> None:
        """Return once a job finishes, or after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no job is pending or ending; False when ``timeout`` ran
        out first."""
        try:
            async with asyncio.timeout(timeout):
                while self._workers or self._ending:
                    await asyncio.wait({*self._workers.values(), *self._ending})
                    await asyncio.sleep(0)  # let their done callbacks run
        except TimeoutError:
            return False
        return True

    def cancel(self) -> int:
        """Cancel every lane (running jobs are interrupted, waiting ones
        dropped) and return how many jobs that was. Does not wait; a job
        submitted afterwards starts a new lane."""
        dropped = self.pending
        for task in self._workers.values():
            task.cancel()
            self._ending.add(task)
        self._workers.clear()
        self._queues.clear()
        return dropped

    async def close(self) -> None:
        """Take no more jobs, cancel what is pending and wait for it to end;
        safe twice."""
        self._closed = True
        self.cancel()
        await self.wait_idle()
