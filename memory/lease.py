"""Job interlock (seed 002 4.4): a lease row in ``job_leases`` with an expiry.

Daily and weekly compression take the same lease, so they never write at the
same time, even from two processes (the gateway's scheduler and a hand-run
``myclaw memory compress``). The holder string says which process holds it
(:mod:`memory.holder`): a holder on this machine that is provably gone
(SIGKILLed mid-run) is taken over at once, logged ``lease-takeover``; any
other holder (another machine, an old-format row, no ``/proc``) leaves a
lease that expires, and the next job takes it over then. A job that
overruns its time limit is cancelled ("fails fast") and the lease is released in ``finally``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import aiosqlite
import structlog

from .clock import Clock, format_ts, parse_ts
from .db import Database
from .errorlog import error_fields
from .holder import Holder, HolderState, ProcessProbe

__all__ = ["Lease", "LeaseBusy", "LeaseLost", "Leases", "JobTimeout"]

log = structlog.get_logger(component="memory")


class LeaseBusy(Exception):
    """Another holder has the lease and it has not expired."""

    def __init__(self, name: str, holder: str, expires_at: str, state: HolderState | None = None) -> None:
        h = Holder.parse(holder)
        who = f"{h.job} (pid {h.pid}, {state.why})" if state is not None and h.pid is not None else holder
        super().__init__(f"job lease {name!r} is held by {who} until {expires_at}")
        self.name, self.holder, self.expires_at, self.state = name, holder, expires_at, state


class LeaseLost(Exception):
    """Our lease expired and someone else took it; stop writing."""


class JobTimeout(Exception):
    """The job ran past its time limit and was stopped."""


@dataclass
class Lease:
    name: str
    holder: str
    expires_at: str
    _leases: Leases
    # What it was taken for: a renewal extends it as long again, not by the
    # Leases' default (a 30-minute import renewed for 15 would expire early).
    ttl: timedelta | None = None

    async def renew(self) -> None:
        """Extend the lease; raises :class:`LeaseLost` if it is no longer ours."""
        await self._leases.renew(self, ttl=self.ttl)

    async def release(self) -> None:
        await self._leases.release(self)

    async def fence(self, conn: aiosqlite.Connection) -> None:
        """Inside a write transaction: raise :class:`LeaseLost` unless the
        lease is still ours, so a job that lost it writes nothing more."""
        async with conn.execute("SELECT 1 FROM job_leases WHERE name = ? AND holder = ?",
                                (self.name, self.holder)) as cur:
            if await cur.fetchone() is None:
                raise LeaseLost(f"job lease {self.name!r} was taken over")


class Leases:
    def __init__(self, db: Database, clock: Clock, *, ttl: timedelta = timedelta(minutes=15),
                 probe: ProcessProbe | None = None) -> None:
        self.db = db
        self.clock = clock
        self.ttl = ttl
        self.probe = probe or _PROBE

    def new_holder(self, job: str) -> str:
        return self.probe.new_holder(job)

    async def acquire(self, name: str, holder: str, *, ttl: timedelta | None = None) -> Lease:
        now = self.clock.now()
        expires = format_ts(now + (ttl or self.ttl))
        async with self.db.transaction() as conn:
            async with conn.execute("SELECT holder, expires_at FROM job_leases WHERE name = ?", (name,)) as cur:
                row = await cur.fetchone()
            if row is not None and row["holder"] != holder:
                if parse_ts(row["expires_at"]) <= now:
                    log.warning("job lease expired; taking over", lease=name, previous=row["holder"])
                elif (state := self.probe.state(row["holder"])).gone:
                    # Its holder died mid-run (SIGKILL): waiting out the expiry
                    # would only hold the job back. The pid, not the row's token.
                    previous = Holder.parse(row["holder"])
                    log.warning("lease-takeover", lease=name, previous_job=previous.job,
                                previous_pid=previous.pid, why=state.why, expires_at=row["expires_at"])
                else:
                    raise LeaseBusy(name, row["holder"], row["expires_at"], state)
            await conn.execute(
                "INSERT INTO job_leases(name, holder, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
                (name, holder, expires),
            )
        return Lease(name, holder, expires, self, ttl or self.ttl)

    async def renew(self, lease: Lease, *, ttl: timedelta | None = None) -> None:
        expires = format_ts(self.clock.now() + (ttl or self.ttl))
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE job_leases SET expires_at = ? WHERE name = ? AND holder = ?",
                (expires, lease.name, lease.holder),
            )
            if cur.rowcount == 0:
                raise LeaseLost(f"job lease {lease.name!r} was taken over")
        lease.expires_at = expires

    async def release(self, lease: Lease) -> None:
        # Only our own row: after a takeover the lease belongs to someone else.
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM job_leases WHERE name = ? AND holder = ?", (lease.name, lease.holder))

    async def holder(self, name: str) -> tuple[str, str] | None:
        row = await self.db.fetchone("SELECT holder, expires_at FROM job_leases WHERE name = ?", (name,))
        return (row["holder"], row["expires_at"]) if row else None

    @asynccontextmanager
    async def hold(
        self, name: str, job: str, *, ttl: timedelta | None = None, timeout: float | None = None
    ) -> AsyncIterator[Lease]:
        """Hold ``name`` for the body; the body is cancelled after ``timeout``
        seconds (raising :class:`JobTimeout`); the lease is always released."""
        lease = await self.acquire(name, self.new_holder(job), ttl=ttl)
        try:
            if timeout is None:
                yield lease
            else:
                try:
                    async with asyncio.timeout(timeout):
                        yield lease
                except TimeoutError as exc:
                    raise JobTimeout(f"{job} ran longer than {timeout:g}s; stopped") from exc
        except BaseException:
            # The job's own failure says what went wrong (memory.db full, say);
            # a release that fails for the same reason must not replace it.
            # The lease then expires at ``expires_at`` and the next run takes it over.
            try:
                await asyncio.shield(self.release(lease))
            except Exception as exc:  # noqa: BLE001 - logged; the job's error is the one raised
                log.error("job lease release failed after the job failed; it expires by itself",
                          lease=name, holder=lease.holder, expires_at=lease.expires_at,
                          **error_fields(exc))
            raise
        await asyncio.shield(self.release(lease))


_PROBE = ProcessProbe()  # one per process: its own identity is read once
