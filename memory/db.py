"""SQLite access shared by the memory engine and the gateway's own stores.

One writer connection (serialised by an asyncio lock, so two coroutines never
interleave inside one transaction) and one reader connection (WAL lets it read
while a long write such as a weekly compression is open, so the reply path is
not stuck behind the write path). Both run in aiosqlite's threads.

A third connection, :attr:`Database.reader`, runs short reads (retrieval's
few bounded queries per message) on the event loop's own thread. Through a
thread they cost more than the query: the sqlite3 module releases and
retakes the GIL for every row fetched, so a result of a few hundred rows
waited for the busy event loop hundreds of times (retrieval 7-11 ms p50 in
the running gateway against ~1.2 ms of work; docs/BENCHMARKS.md, "Gateway
throughput"). A WAL reader does not wait for writers; its busy timeout is
short (a reader is only ever busy during a WAL recovery) so the loop is
never held for long. Scans over a table (extraction's queue, the memory
page, exports) stay on :meth:`Database.fetchall`, in a thread.

Schemas are ordered lists of migrations, applied inside a transaction each
and recorded in ``PRAGMA user_version``. A shipped migration is never edited;
changes are appended.

A table written on every message but never read by the reply path can live
in a second file (:class:`Attachment`) that the writer and the threaded
reader attach and the inline reader does not: a commit to a WAL database
makes every other connection drop its whole page cache, so with the
extraction buffer in memory.db each buffered message cost the next
retrieval ~0.5 ms of re-reading pages (docs/BENCHMARKS.md, session 10).
A transaction over both files is atomic per file only (SQLite commits
``main`` first); callers that need more record it in ``main``
(memory/buffer.py).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import structlog

__all__ = ["Attachment", "Database", "InlineReader", "Migration", "SchemaTooNew", "private_dirs", "private_file", "run_script"]

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]


def private_dirs(path: Path) -> None:
    """Make ``path`` and its missing parents, readable by the owner only
    (folders already there are left as they are): they hold people's
    memories and conversations, as a backup of them does."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700, exist_ok=True)


def private_file(path: Path) -> None:
    """Create ``path`` (and its folders) owner-only if it is missing; an
    existing file keeps its permissions, the operator's choice. SQLite gives
    a database's -wal and -shm files the database's own permissions."""
    private_dirs(path.parent)
    # O_EXCL: an existing file is never opened here. Closing a descriptor
    # drops every POSIX lock this process holds on the file, SQLite's too
    # (the reader attaches the side file the writer already has open):
    # another process closing it would then delete the live WAL.
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


async def run_script(conn: aiosqlite.Connection, script: str) -> None:
    """Run several statements inside the caller's transaction.

    ``executescript`` would COMMIT the open transaction first, which would make
    a migration half-applied if a later statement failed.
    """
    stmt = ""
    for line in script.splitlines(keepends=True):
        stmt += line
        if sqlite3.complete_statement(stmt):
            if stmt.strip():
                await conn.execute(stmt)
            stmt = ""
    if stmt.strip():
        await conn.execute(stmt)


class SchemaTooNew(Exception):
    """The file was written by a newer myclaw; refuse rather than corrupt it."""


@dataclass(frozen=True)
class Attachment:
    """A second file opened beside the main one under ``schema`` by the
    writer and the threaded reader (not the inline reader), with its own
    migrations (their SQL names ``schema.`` explicitly) and its own
    ``PRAGMA schema.user_version``. Unqualified names a table of ``main``
    does not hold resolve into it, so the SQL that uses its tables stays."""

    schema: str
    path: Path
    migrations: Sequence[Migration]


CACHE_KIB = 16_000
"""Page cache of the inline reader (SQLite's ``cache_size``) by default:
memory.db's serves retrieval, filled as the file is read."""
SMALL_CACHE_KIB = 512
"""Page cache of the writer and the threaded reader, and of the inline
reader of a file read a few rows at a time (gateway.db, cron.db). Writers
append (the last pages of a table and its indexes) and a page missed is a
``pread`` from the OS's cache away; larger caches only grew with the files
all through a run: 16 MB +6.5 MB of RSS over the gateway bench, 2 MB +2.6
MB (docs/BENCHMARKS.md, RSS). See :meth:`Database.larger_cache` for jobs
that rewrite much of the file."""
BULK_CACHE_KIB = 4_000
"""Writer and threaded reader cache while a compression job runs: FTS5's
segments stay in it; at 512 KB the weekly compression of 5,000 facts took
~40 % longer (scripts/bench_writepath.py)."""


async def _configure(conn: aiosqlite.Connection, *, busy_ms: int, cache_kib: int) -> None:
    await conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
    await conn.execute("PRAGMA foreign_keys = ON")
    await conn.execute("PRAGMA synchronous = NORMAL")
    await conn.execute("PRAGMA temp_store = MEMORY")
    await conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
    # A deleted row's bytes are overwritten with zeros, not left in free
    # space: erased words must not be readable from the file. Many builds
    # (Debian's) default to it; others (SQLite's own default) do not.
    await conn.execute("PRAGMA secure_delete = ON")


class InlineReader:
    """Short read-only queries on the event loop's thread (see the module
    docstring): ``await reader.execute_fetchall(sql, params)``, the one
    method of ``aiosqlite.Connection`` it keeps."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute_fetchall(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()


_INLINE_BUSY_MS = 100


class Database:
    """A migrated SQLite file with a writer and a reader connection."""

    def __init__(
        self,
        path: Path,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        inline: sqlite3.Connection | None = None,
        cache_kib: int = SMALL_CACHE_KIB,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._inline = inline
        self._lock = asyncio.Lock()
        self._closed = False
        # Cache stamps (see stamp()): named counters bumped by in-process
        # writers, and one bumped when another process changed the file.
        self._versions: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._external = 0
        self._data_version: int | None = None
        self._checked_at = float("-inf")
        self._monotonic = monotonic  # stamp()'s look at the file, once in max_age
        self._cache_kib = cache_kib  # the writer's and threaded reader's, outside larger_cache()
        self._larger = 0  # larger_cache() blocks open
        self._attached: str | None = None  # the schema of an Attachment

    @classmethod
    async def open(
        cls,
        path: Path | str,
        migrations: Sequence[Migration],
        *,
        busy_ms: int = 5000,
        inline_cache_kib: int = CACHE_KIB,
        cache_kib: int = SMALL_CACHE_KIB,
        attach: Attachment | None = None,
        before: Mapping[int, Migration] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Database:
        """``inline_cache_kib``: the inline reader's page cache;
        ``cache_kib``: the writer's and the threaded reader's; ``attach``:
        a second file (migrated first); ``before``: steps run, each in its
        own transaction, before ``main``'s migration of that version (data
        moved into the attached file must be committed there before
        ``main`` lets go of it); ``monotonic``: the clock :meth:`stamp`
        spaces its looks for other processes' commits by."""
        path = Path(path)
        if str(path) != ":memory:":
            private_file(path)
        writer = await aiosqlite.connect(str(path), isolation_level=None)
        reader: aiosqlite.Connection | None = None
        try:
            writer.row_factory = sqlite3.Row
            await writer.execute("PRAGMA journal_mode = WAL")
            await _configure(writer, busy_ms=busy_ms, cache_kib=cache_kib)
            if attach is not None:
                await _attach(writer, attach, cache_kib=cache_kib, wal=True)
                await _migrate(writer, attach.migrations, schema=attach.schema)
            await _migrate(writer, migrations, before=before or {})
            reader = await aiosqlite.connect(str(path), isolation_level=None)
            reader.row_factory = sqlite3.Row
            await _configure(reader, busy_ms=busy_ms, cache_kib=cache_kib)
            if attach is not None:
                await _attach(reader, attach, cache_kib=cache_kib, wal=False)
            await reader.execute("PRAGMA query_only = ON")
        except BaseException:
            if reader is not None:
                await reader.close()
            await writer.close()
            raise
        inline = None
        if str(path) != ":memory:":  # a second :memory: connection would be another database
            inline = sqlite3.connect(str(path), isolation_level=None)
            inline.row_factory = sqlite3.Row
            for pragma in (
                f"PRAGMA busy_timeout = {_INLINE_BUSY_MS}",
                "PRAGMA temp_store = MEMORY",
                f"PRAGMA cache_size = -{int(inline_cache_kib)}",
                "PRAGMA query_only = ON",
            ):
                inline.execute(pragma)
        db = cls(path, writer, reader, inline, cache_kib, monotonic)
        db._attached = attach.schema if attach is not None else None
        return db

    async def close(self) -> None:
        """Close both connections; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            if self._inline is not None:
                self._inline.close()
            await self._reader.close()
            try:
                await self._writer.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            await self._writer.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @asynccontextmanager
    async def larger_cache(self, kib: int = BULK_CACHE_KIB) -> AsyncIterator[None]:
        """The writer's and the threaded reader's page caches at ``kib`` for
        a job that rewrites much of the file; back to their size after
        (SQLite frees the pages over it), so a nightly job leaves no RSS
        behind. Blocks may nest or overlap: the last one out restores."""
        if self._larger == 0:
            await self._set_cache(max(kib, self._cache_kib))
        self._larger += 1
        try:
            yield
        finally:
            self._larger -= 1
            if self._larger == 0 and not self._closed:
                await asyncio.shield(self._set_cache(self._cache_kib))

    async def _set_cache(self, kib: int) -> None:
        for conn in (self._writer, self._reader):
            await conn.execute(f"PRAGMA cache_size = -{int(kib)}")

    async def compact(self) -> None:
        """Rewrite the file (``VACUUM``), then empty the WAL: bytes no row
        holds any more (an FTS5 merge leaves some in the pages it rewrites,
        which ``secure_delete`` does not reach) are gone from the disk.
        Blocks other writers while it runs (10k memories ~0.1 s, 50k
        ~0.4 s: scripts/bench_erase.py); the WAL is only emptied when no
        reader is inside a read."""
        if self._closed:
            raise RuntimeError("database is closed")
        async with self._lock:
            await self._writer.execute("VACUUM")
            if self._attached is not None:
                await self._writer.execute(f"VACUUM {self._attached}")
            await self._checkpoint()  # every attached file's too

    async def checkpoint(self) -> None:
        """Copy the WAL into the file and empty it. After a delete under
        ``secure_delete`` this is enough to take the deleted rows' bytes
        off the disk for plain tables: the checkpoint overwrites their old
        pages with the zeroed ones. An FTS5 index needs :meth:`compact`
        (a merge leaves words in pages nothing zeroes). Like compact, the
        WAL is only emptied when no reader is inside a read."""
        if self._closed:
            raise RuntimeError("database is closed")
        async with self._lock:
            await self._checkpoint()

    async def _checkpoint(self) -> None:
        # Read the pragma's row: a statement left stepping makes the next
        # VACUUM on this connection fail ("SQL statements in progress").
        await self._writer.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any exception
        (cancellation included), so a failed write leaves nothing half-done."""
        if self._closed:
            raise RuntimeError("database is closed")
        async with self._lock:
            try:
                # Inside the try: cancelled while it is on its way, the BEGIN
                # still runs in the writer thread, and must be rolled back.
                await self._writer.execute("BEGIN IMMEDIATE")
                yield self._writer
                await self._writer.execute("COMMIT")
            except BaseException:
                await asyncio.shield(self._rollback())
                raise
            finally:
                self._bump_dirty()

    async def _rollback(self) -> None:
        # SQLite may have rolled the transaction back itself (SQLITE_FULL,
        # SQLITE_IOERR): a ROLLBACK then fails, and its error would hide the
        # one that says why. A COMMIT that failed may leave it open (a
        # deferred foreign key): the writer must not stay inside it. A
        # statement whose caller was cancelled still runs: the writer thread
        # runs calls in order, so one more round trip lets it finish first
        # (a BEGIN, or a COMMIT, which then leaves nothing to roll back).
        with suppress(sqlite3.Error):  # its error must not hide the one that says why
            await self._writer.execute("SELECT 1")
        if self._writer.in_transaction:
            await self._writer.execute("ROLLBACK")

    async def write(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> tuple[int, int]:
        """One statement on its own, atomic without ``BEGIN``/``COMMIT``
        (autocommit): one round trip to the writer thread instead of three.
        Returns ``(lastrowid, rowcount)``."""
        if self._closed:
            raise RuntimeError("database is closed")
        if not self._lock.locked():
            # No transaction is open: the statement is queued to the writer
            # thread at once (aiosqlite runs calls in order, so a transaction
            # begun later starts after it). Taking the lock here made every
            # write wait a whole event-loop turn per write queued ahead of it
            # (6 ms p50 at 100 messages/s against 0.4 ms of work).
            cur = await self._writer.execute(sql, params)
            return int(cur.lastrowid or 0), cur.rowcount
        async with self._lock:  # after the open transaction, never inside it
            cur = await self._writer.execute(sql, params)
            return int(cur.lastrowid or 0), cur.rowcount

    async def write_returning(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        """Like :meth:`write` for a statement with ``RETURNING``: its rows, in
        one round trip (the statement runs to its end, so it has committed)."""
        if self._closed:
            raise RuntimeError("database is closed")
        if not self._lock.locked():
            return list(await self._writer.execute_fetchall(sql, params))
        async with self._lock:
            return list(await self._writer.execute_fetchall(sql, params))

    # -- cache invalidation -------------------------------------------------------

    def bump(self, name: str) -> None:
        """Record that data cached under ``name`` changed (or is changing).

        Called by a writer of this process: at once, and again when the
        write or transaction in progress ends, so a reader that loaded the
        old rows between the two (the reader connection does not see an
        uncommitted transaction) does not keep them."""
        self._versions[name] = self._versions.get(name, 0) + 1
        if self._lock.locked():
            self._dirty.add(name)

    def _bump_dirty(self) -> None:
        for name in self._dirty:
            self._versions[name] = self._versions.get(name, 0) + 1
        self._dirty.clear()

    async def stamp(self, name: str, *, max_age: float = 1.0) -> tuple[int, int]:
        """A value that changes whenever data cached under ``name`` may have
        changed: a :meth:`bump` in this process, or a commit by another
        process (``myclaw memory ...`` beside the gateway), noticed within
        ``max_age`` seconds through ``PRAGMA data_version`` on the writer
        connection (which counts other connections' commits only)."""
        now = self._monotonic()
        if now - self._checked_at >= max_age and not self._closed:
            self._checked_at = now
            rows = await self._writer.execute_fetchall("PRAGMA data_version")
            version = int(next(iter(rows))[0])
            if self._data_version is not None and version != self._data_version:
                self._external += 1
            self._data_version = version
        return self._versions.get(name, 0), self._external

    async def fetchall(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        if self._closed:
            raise RuntimeError("database is closed")
        # One round trip to the reader thread (execute, fetch and close
        # would be three, each a hop through the event loop).
        return list(await self._reader.execute_fetchall(sql, params))

    async def fetchone(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Row | None:
        if self._closed:
            raise RuntimeError("database is closed")
        rows = await self._reader.execute_fetchall(sql, params)  # one round trip, not three
        return next(iter(rows), None)

    @property
    def reader(self) -> InlineReader | aiosqlite.Connection:
        """For short, bounded reads only: they run on the event loop's thread
        (the aiosqlite reader for an in-memory database)."""
        if self._closed:
            raise RuntimeError("database is closed")
        return InlineReader(self._inline) if self._inline is not None else self._reader


async def _attach(conn: aiosqlite.Connection, att: Attachment, *, cache_kib: int, wal: bool) -> None:
    side = str(att.path)
    if side != ":memory:":
        private_file(Path(side))
    await conn.execute(f"ATTACH DATABASE ? AS {att.schema}", (side,))
    if wal:  # persistent in the file; set once, by the writer
        await conn.execute(f"PRAGMA {att.schema}.journal_mode = WAL")
    await conn.execute(f"PRAGMA {att.schema}.synchronous = NORMAL")
    await conn.execute(f"PRAGMA {att.schema}.cache_size = -{int(cache_kib)}")
    await conn.execute(f"PRAGMA {att.schema}.secure_delete = ON")  # as main's: erased words zeroed


async def _user_version(conn: aiosqlite.Connection, schema: str) -> int:
    async with conn.execute(f"PRAGMA {schema}.user_version") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _migrate(
    conn: aiosqlite.Connection,
    migrations: Sequence[Migration],
    *,
    schema: str = "main",
    before: Mapping[int, Migration] | None = None,
) -> None:
    current = await _user_version(conn, schema)
    if current > len(migrations):
        raise SchemaTooNew(
            f"database schema version {current} ({schema}) is newer than this myclaw ({len(migrations)})"
        )
    # An existing file upgraded is said before and after: a long migration
    # at start is then not a silent hang. A new file is only created.
    name = await _file_name(conn, schema) if 0 < current < len(migrations) else ""
    if name:
        log = structlog.get_logger(component="db")
        log.info("upgrading database schema", file=name, from_version=current, to_version=len(migrations))
        started = time.monotonic()
    for version, step in enumerate(migrations[current:], start=current + 1):
        steps = [(before[version], False)] if before and version in before else []
        for run, last in [*steps, (step, True)]:
            await conn.execute("BEGIN IMMEDIATE")
            try:
                # Read again under the lock: another process opening the
                # same old file (the gateway and a `myclaw memory` command
                # started together) may have applied it while this one
                # waited, and a step run twice fails ("duplicate column").
                if await _user_version(conn, schema) < version:
                    await run(conn)
                    if last:
                        await conn.execute(f"PRAGMA {schema}.user_version = {version}")
                await conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # see Database._rollback
                    await conn.execute("ROLLBACK")
                raise
    if name:
        log.info("database schema upgraded", file=name, from_version=current, to_version=len(migrations),
                 seconds=round(time.monotonic() - started, 3))


async def _file_name(conn: aiosqlite.Connection, schema: str) -> str:
    """The name (not the folder) of the file open as ``schema``."""
    async with conn.execute("PRAGMA database_list") as cur:
        for row in await cur.fetchall():
            if row[1] == schema:
                return Path(str(row[2])).name or schema
    return schema
