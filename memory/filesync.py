"""Hand edits of the memory files reach the running gateway (seed 004,
"memory sync: file to database").

With ``memory.enabled`` the files under ``<workspace>/memory`` (``MEMORY.md``,
``YYYY-MM-DD.md``) are imported at start (:func:`memory.migrate.migrate_files`);
:class:`FileSync` keeps doing so while the gateway runs. Every ``interval``
seconds it stats each file (no file is read, no dependency, no inotify); a
file whose size, mtime, ctime or inode changed is imported with the same logic as
``myclaw memory migrate``, that file only, once it stayed unchanged for a
whole poll: an editor still saving would otherwise be read half-way, and
the lines not written yet archived, to come back a moment later as new
entries. A stat cannot see a second save of the same size within one
filesystem tick; a file whose mtime is that close to the poll that saw it
(:func:`~memory.migrate.is_racy`) is read and hashed at that poll and the
next, so such a save counts as a change (git's "racily clean" entries).

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
import hashlib
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import structlog

from .engine import MemoryEngine
from .errorlog import error_fields
from .clock import parse_ts
from .lease import LeaseBusy, LeaseLost, Leases
from .migrate import MigrationReport, is_racy, memory_files, migrate_files

__all__ = ["FILE_SYNC_LEASE", "FileSync", "migrate_leased"]

log = structlog.get_logger(component="memory")

FILE_SYNC_LEASE = "file_sync"
# Longer than a first import of a large workspace; a holder that died frees it after this.
_LEASE_TTL = timedelta(minutes=30)

@dataclass(frozen=True)
class Stamp:
    """A file as one poll saw it."""

    size: int
    mtime_ns: int
    # A save that keeps the size and puts the mtime back (touch -d, rsync -t)
    # still moves the ctime, which no tool sets; a save by rename, the inode.
    ctime_ns: int = 0
    ino: int = 0
    sha: str = ""  # its content's hash, when the stat alone could not be trusted

    @property
    def stat(self) -> tuple[int, int, int, int]:
        return self.size, self.mtime_ns, self.ctime_ns, self.ino

    def same(self, other: Stamp | None) -> bool:
        return (
            other is not None
            and self.stat == other.stat
            and (not self.sha or not other.sha or self.sha == other.sha)
        )


async def migrate_leased(
    workspace: Path | str,
    engine: MemoryEngine,
    *,
    only: set[Path] | None = None,
    job: str = "migrate",
    wall_ns: Callable[[], int] = time.time_ns,
    log_problems: bool = True,
    prepare: Callable[[], Awaitable[object]] | None = None,
) -> MigrationReport:
    """:func:`migrate_files` under :data:`FILE_SYNC_LEASE`: two importers at
    once would both see a line as new and add it twice. Raises
    :class:`~memory.lease.LeaseBusy` when another holds it. The lease is
    renewed as the import goes and each write proves it still held: an
    import that outlived it anyway (a stalled process) and was taken over
    raises :class:`~memory.lease.LeaseLost` and writes nothing more (what
    it committed stays; the next run finds those rows and does not add them
    again). ``prepare``: run under the lease first (``myclaw memory migrate
    --user`` moves files there: no file sync reads them half-moved)."""
    async with Leases(engine.db, engine.clock, ttl=_LEASE_TTL).hold(FILE_SYNC_LEASE, job) as lease:
        if prepare is not None:
            await prepare()
        return await migrate_files(workspace, engine, only=only, wall_ns=wall_ns, log_problems=log_problems,
                                   lease=lease)


class FileSync:
    """Poll ``<workspace>/memory``; :meth:`poll` is one look (tests call it)."""

    def __init__(
        self,
        workspace: Path | str,
        engine: MemoryEngine,
        *,
        interval: float = 10.0,
        wall_ns: Callable[[], int] = time.time_ns,  # the clock mtimes are stamped by
    ) -> None:
        self.root = Path(workspace) / "memory"
        self.workspace = Path(workspace)
        self.engine = engine
        self.interval = interval
        self.wall_ns = wall_ns
        self._last: dict[Path, Stamp] = {}  # at the previous poll
        self._done: dict[Path, Stamp] = {}  # as last imported (or found in the ledger)
        self._due: dict[Path, datetime] = {}  # a held shrink (memory.migrate): not looked at again before
        self._task: asyncio.Task[None] | None = None
        self._written: list[Callable[[str], None]] = []

    def on_memories_written(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` after an import added memories of
        ``owner`` (the vectorizer embeds them at once, as a saved fact)."""
        self._written.append(listener)

    def _stat(self, looked: int) -> dict[Path, Stamp]:
        """Each file's stamp; hashed when its mtime is racy now, or when a
        stamp it is compared with was hashed (a save since, in that tick,
        shows only in the content)."""
        out: dict[Path, Stamp] = {}
        for f in memory_files(self.root):
            try:
                st = f.path.stat()
                stamp = Stamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                if is_racy(st.st_mtime_ns, looked) or any(
                    s is not None and s.sha and s.stat == stamp.stat
                    for s in (self._last.get(f.path), self._done.get(f.path))
                ):
                    stamp = replace(stamp, sha=hashlib.sha256(f.path.read_bytes()).hexdigest())
            except FileNotFoundError:
                continue  # removed between listing and stat
            out[f.path] = stamp
        return out

    async def import_all(self, *, job: str = "start") -> MigrationReport:
        """The start's full import (:func:`migrate_leased`), as this sync's
        first import: each file is then taken as done as it was stamped
        before the import read it, so the first polls do not import it
        again (nor warn again about a file left out, one not UTF-8 say)
        until it changes. Raises :class:`~memory.lease.LeaseBusy` as
        :func:`migrate_leased` does; nothing is marked done then."""
        looked = self.wall_ns()
        before = await asyncio.to_thread(self._stat, looked)  # before the reads: a save during them counts
        report = await migrate_leased(self.workspace, self.engine, job=job, wall_ns=self.wall_ns)
        for p, stamp in before.items():
            if (due := report.held.get(p.relative_to(self.root).as_posix())) is not None:
                self._due[p] = parse_ts(due)  # as poll() holds one
            else:
                self._done[p] = stamp
        self._last = dict(before)
        return report

    async def poll(self) -> MigrationReport | None:
        """Import the files that changed and then stayed put for a poll;
        None when there were none (or another importer holds the lease:
        they wait for the next poll)."""
        looked = self.wall_ns()  # before the stats: a save after them must count as racy
        now = await asyncio.to_thread(self._stat, looked)
        for p, s in now.items():
            if p in self._due and not s.same(self._last.get(p)):
                del self._due[p]  # saved again: judged afresh
        clock = self.engine.clock.now()
        settled = {
            p for p, s in now.items()
            if s.same(self._last.get(p)) and not s.same(self._done.get(p)) and clock >= self._due.get(p, clock)
        }
        for p, s in now.items():
            if s.sha and not is_racy(s.mtime_ns, looked):
                # Verified and old enough now: any later save moves the mtime.
                plain = replace(s, sha="")
                if p not in settled and s.same(self._done.get(p)):
                    self._done[p] = plain
                now[p] = plain
        self._last = now
        for gone in set(self._done) - set(now):
            del self._done[gone]
        for gone in set(self._due) - set(now):
            del self._due[gone]
        if not settled:
            return None
        try:
            report = await migrate_leased(self.workspace, self.engine, only=settled, job="file_sync",
                                          wall_ns=self.wall_ns)
        except LeaseBusy as busy:
            log.info("memory files changed; another import is running, retried at the next poll",
                     files=len(settled), why=str(busy))
            return None
        except LeaseLost:
            # Stalled past the lease and taken over: the other import reads
            # these files too; they are not marked done, so a change it did
            # not take in is imported at a later poll.
            log.warning("memory file import taken over by another import; stopped", files=len(settled))
            return None
        for p in settled:
            if (due := report.held.get(p.relative_to(self.root).as_posix())) is not None:
                self._due[p] = parse_ts(due)  # nothing imported: looked at again then, or once saved again
            else:
                self._done[p] = now[p]
                self._due.pop(p, None)
        if report.memories_added:
            for owner in report.owners:
                for listener in self._written:
                    listener(owner)
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
                log.error("memory file sync failed; will retry", **error_fields(exc))  # not its text: a file's name
            await asyncio.sleep(self.interval)
