"""``myclaw memory forget --user`` (or ``--group``) asking a running gateway to erase.

The CLI erasing the files beside a running gateway misses what that
process holds: their messages queued or at the model (answered and stored
after the erasure), their cached time zone and incognito setting. The
gateway's own erasure (``UserData.erase``, as ``/forget all``) reaches all
of it, so the CLI asks it through a row of gateway.db's
``erasure_requests``, which the gateway polls (:func:`serve`): a file both
already open, needing no port nor HTTP server. The gateway says in its
lock file that it takes them (``GatewayLock.serves``); with none running
that does, the CLI erases the files itself, as it does when the gateway
does not take the request in time (withdrawn first, so a gateway started
later never erases what the user said since) or its erasure failed.

A row: asked (``whom``, ``asked_at``), taken by the gateway
(``taken_at``), done (``done_at`` and what went, ``counts``: a JSON object
of numbers, or ``{"error": type}``). The CLI deletes it once read, or on
giving up; a gateway starting drops what is left (:meth:`ErasureRequests.clear`:
asked of a gateway no longer running, by a CLI killed or gone on without
it), so a request is never acted on by another run than the one asked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from memory.clock import Clock, format_ts
from memory.db import Database

from .logging import error_fields

__all__ = ["ErasureRequests", "Request", "serve"]

log = structlog.get_logger(component="gateway")


@dataclass(frozen=True)
class Request:
    id: int
    owner: str
    taken: bool = False
    counts: dict[str, int] | None = None  # done: what went
    error: str = ""  # done, but the gateway's erasure failed (its type): the CLI does it itself


class ErasureRequests:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    # -- the CLI's side ---------------------------------------------------------------

    async def ask(self, owner: str) -> int:
        rowid, _ = await self.db.write("INSERT INTO erasure_requests (whom, asked_at) VALUES (?, ?)",
                                       (owner, format_ts(self.clock.now())))
        return rowid

    async def get(self, request_id: int) -> Request | None:
        row = await self.db.fetchone(
            "SELECT id, whom, taken_at, done_at, counts FROM erasure_requests WHERE id = ?", (request_id,))
        if row is None:
            return None
        counts: dict[str, int] | None = None
        error = ""
        if row[3] is not None:
            done = json.loads(row[4] or "{}")
            error = str(done.pop("error", ""))
            counts = None if error else {str(k): int(v) for k, v in done.items()}
        return Request(int(row[0]), str(row[1]), taken=row[2] is not None, counts=counts, error=error)

    async def withdraw(self, request_id: int) -> bool:
        """Take back a request not taken yet; False when the gateway took it meanwhile."""
        _, n = await self.db.write("DELETE FROM erasure_requests WHERE id = ? AND taken_at IS NULL", (request_id,))
        return n > 0

    async def drop(self, request_id: int) -> None:
        await self.db.write("DELETE FROM erasure_requests WHERE id = ?", (request_id,))

    # -- the gateway's side ----------------------------------------------------------

    async def clear(self) -> int:
        """As the gateway starts, before it says it takes requests: every row
        left is void (its CLI gave up on it, or was killed)."""
        _, n = await self.db.write("DELETE FROM erasure_requests")
        return n

    async def take(self) -> list[Request]:
        """The requests waiting, now taken."""
        rows = await self.db.write_returning(
            "UPDATE erasure_requests SET taken_at = ? WHERE taken_at IS NULL RETURNING id, whom",
            (format_ts(self.clock.now()),))
        return [Request(int(r[0]), str(r[1]), taken=True) for r in sorted(rows, key=lambda r: int(r[0]))]

    async def done(self, request_id: int, counts: dict[str, int] | None = None, *, error: str = "") -> None:
        body = {"error": error} if error else (counts or {})
        await self.db.write("UPDATE erasure_requests SET done_at = ?, counts = ? WHERE id = ?",
                            (format_ts(self.clock.now()), json.dumps(body), request_id))


async def serve(requests: ErasureRequests, erase: Callable[[str], Awaitable[dict[str, int]]], *,
                ready: Callable[[], None] = lambda: None, every: float = 0.5) -> None:
    """The gateway's poller: each request taken is erased by ``erase`` (the
    gateway's ``/forget all``), its counts written back. Runs until
    cancelled. First the rows an earlier run left are dropped
    (:meth:`ErasureRequests.clear`), then ``ready()`` says it takes
    requests (the lock file): a gateway.db that refuses writes (a full
    disk) delays both, never the gateway's start. A failed erasure is told
    to the CLI, which then erases the files itself. The table is read only
    when another process wrote gateway.db (``Database.stamp``), and once
    at the start."""
    cleared = False
    seen: tuple[int, int] | None = None
    while True:
        if not cleared:
            try:
                await requests.clear()
            except Exception as exc:  # tried again each round, said once
                if seen is None:
                    log.warning("erasure requests not taken yet: gateway.db refused a write", **error_fields(exc))
                    seen = (-1, -1)
            else:
                cleared, seen = True, None
                ready()
        if cleared:
            stamp = await requests.db.stamp("erasure-requests", max_age=0)
            if stamp != seen:
                seen = stamp
                try:
                    await _serve_taken(requests, erase)
                except Exception as exc:  # gateway.db busy or full: tried again at the next change
                    seen = None
                    log.warning("erasure requests not read", **error_fields(exc))
        await asyncio.sleep(every)


async def _serve_taken(requests: ErasureRequests, erase: Callable[[str], Awaitable[dict[str, int]]]) -> None:
    for req in await requests.take():
        try:
            counts = await erase(req.owner)
        except Exception as exc:  # told to the CLI, which erases the files itself
            log.error("erasure asked by myclaw memory forget failed", owner=req.owner, **error_fields(exc))
            await requests.done(req.id, error=type(exc).__name__)
        else:
            log.info("erasure asked by myclaw memory forget done", owner=req.owner)
            await requests.done(req.id, counts)
