"""Hand edits of the memory files reach the running gateway (seed 004,
"memory sync: file to database").

With ``memory.enabled`` the files under ``<workspace>/memory`` (``MEMORY.md``,
``YYYY-MM-DD.md``) are imported at start (:func:`memory.migrate.migrate_files`);
:class:`FileSync` keeps doing so while the gateway runs. Every ``interval``
seconds it stats each file (no file is read, no dependency, no inotify); a
file whose size or mtime changed is imported with the same logic as
``myclaw memory migrate``, that file only, once it stayed unchanged for a
whole poll: an editor still saving would otherwise be read half-way, and
the lines not written yet archived, to come back a moment later as new
entries.

Not on the reply path: a background task, whose writes go through the
engine's single writer like any other; one importer at a time across
processes (``myclaw memory migrate`` beside the gateway) by the
:data:`FILE_SYNC_LEASE` job lease (seed 002). The gateway itself writes
none of these files while SQLite is on; what the file store writes (memory
off elsewhere) is imported once, as at start: the import ledger records what
each line and day became, so nothing is read back twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from datetime import timedelta
from pathlib import Path

import structlog

from .engine import MemoryEngine
from .lease import LeaseBusy, Leases
from .migrate import MigrationReport, memory_files, migrate_files

__all__ = ["FILE_SYNC_LEASE", "FileSync", "migrate_leased"]

log = structlog.get_logger(component="memory")

FILE_SYNC_LEASE = "file_sync"
# Longer than a first import of a large workspace; a holder that died frees it after this.
_LEASE_TTL = timedelta(minutes=30)

Stamp = tuple[int, int]  # size, mtime_ns


async def migrate_leased(
    workspace: Path | str, engine: MemoryEngine, *, only: set[Path] | None = None, job: str = "migrate"
) -> MigrationReport:
    """:func:`migrate_files` under :data:`FILE_SYNC_LEASE`: two importers at
    once would both see a line as new and add it twice. Raises
    :class:`~memory.lease.LeaseBusy` when another holds it."""
    async with Leases(engine.db, engine.clock).hold(FILE_SYNC_LEASE, job, ttl=_LEASE_TTL):
        return await migrate_files(workspace, engine, only=only)


class FileSync:
    """Poll ``<workspace>/memory``; :meth:`poll` is one look (tests call it)."""

    def __init__(self, workspace: Path | str, engine: MemoryEngine, *, interval: float = 10.0) -> None:
        self.root = Path(workspace) / "memory"
        self.workspace = Path(workspace)
        self.engine = engine
        self.interval = interval
        self._last: dict[Path, Stamp] = {}  # at the previous poll
        self._done: dict[Path, Stamp] = {}  # as last imported (or found in the ledger)
        self._task: asyncio.Task[None] | None = None

    def _stat(self) -> dict[Path, Stamp]:
        out: dict[Path, Stamp] = {}
        for f in memory_files(self.root):
            try:
                st = f.path.stat()
            except FileNotFoundError:
                continue  # removed between listing and stat
            out[f.path] = (st.st_size, st.st_mtime_ns)
        return out

    async def poll(self) -> MigrationReport | None:
        """Import the files that changed and then stayed put for a poll;
        None when there were none (or another importer holds the lease:
        they wait for the next poll)."""
        now = await asyncio.to_thread(self._stat)
        settled = {p for p, s in now.items() if self._last.get(p) == s and self._done.get(p) != s}
        self._last = now
        for gone in set(self._done) - set(now):
            del self._done[gone]
        if not settled:
            return None
        try:
            report = await migrate_leased(self.workspace, self.engine, only=settled, job="file_sync")
        except LeaseBusy as busy:
            log.info("memory files changed; another import is running, retried at the next poll",
                     files=len(settled), why=str(busy))
            return None
        for p in settled:
            self._done[p] = now[p]
        if report.changed:
            log.info("memory files edited while running imported", files=len(settled),
                     added=report.memories_added, archived=report.memories_archived,
                     events=report.events_added, replaced=report.events_replaced)
        return report

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("file sync already started")
        self._task = asyncio.create_task(self._run(), name="memory-file-sync")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            try:
                await self.poll()
            except (sqlite3.Error, OSError) as exc:
                # The files stay as they are; the next poll tries again.
                log.error("memory file sync failed; will retry", error=f"{type(exc).__name__}: {exc}"[:300])
            await asyncio.sleep(self.interval)
