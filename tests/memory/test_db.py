from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from memory.db import SMALL_CACHE_KIB, Attachment, Database, run_script
from memory.schema import MIGRATIONS


async def _cache_kib(db: Database) -> tuple[int, int]:
    (w,) = await db._writer.execute_fetchall("PRAGMA cache_size")
    (r,) = await db.fetchall("PRAGMA cache_size")
    return -w[0], -r[0]


async def test_larger_cache_is_given_back_by_the_last_block_out(tmp_path: Path) -> None:
    # A compression job's cache must not stay after it: the gateway's RSS
    # would keep it for good (docs/BENCHMARKS.md, RSS).
    db = await Database.open(tmp_path / "m.db", MIGRATIONS)
    try:
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
        async with db.larger_cache(4000):
            assert await _cache_kib(db) == (4000, 4000)
            async with db.larger_cache(8000):  # nested: the outer size holds
                assert await _cache_kib(db) == (4000, 4000)
            assert await _cache_kib(db) == (4000, 4000)
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
        try:
            async with db.larger_cache(4000):
                raise RuntimeError("job failed")
        except RuntimeError:
            pass
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
    finally:
        await db.close()


async def test_cache_sizes_are_per_file(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "g.db", MIGRATIONS, inline_cache_kib=300, cache_kib=700)
    try:
        assert await _cache_kib(db) == (700, 700)
        assert db.reader._conn.execute("PRAGMA cache_size").fetchone()[0] == -300
    finally:
        await db.close()


async def test_a_checkpoint_takes_deleted_rows_off_the_disk_for_a_plain_table(tmp_path: Path) -> None:
    # What the gateway does to gateway.db after an erasure, instead of a
    # VACUUM: the rows' old pages are in the main file (checkpointed before)
    # and in the WAL (written since); a long row spills into overflow pages.
    from memory.db import run_script
    from tests.disk import on_disk

    async def _plain(conn) -> None:  # type: ignore[no-untyped-def]
        await run_script(conn, "CREATE TABLE lines (id INTEGER PRIMARY KEY, owner TEXT, content TEXT);")

    folder = tmp_path / "data"
    folder.mkdir()
    db = await Database.open(folder / "g.db", [_plain])
    try:
        async with db.transaction() as conn:
            for i in range(300):
                secret = i % 50 == 7
                text = f"my door code is zqxjkv4711 {'x' * (6000 if i == 107 else 10)}" if secret else f"line {i} " * 8
                owner = "alice" if secret else "bob"
                await conn.execute("INSERT INTO lines (owner, content) VALUES (?, ?)", (owner, text))
        await db.checkpoint()  # now in the main file
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO lines (owner, content) VALUES ('alice', 'again zqxjkv4711')")  # in the WAL
        assert on_disk(folder, "zqxjkv4711") == 7
        async with db.transaction() as conn:
            await conn.execute("DELETE FROM lines WHERE owner = 'alice'")
        assert on_disk(folder, "zqxjkv4711") > 0  # the old pages are still there
        await db.checkpoint()
        assert on_disk(folder, "zqxjkv4711") == 0
        assert len(await db.fetchall("SELECT id FROM lines")) == 294
    finally:
        await db.close()


async def test_compact_and_checkpoint_run_back_to_back(tmp_path: Path) -> None:
    # Two erasures in a row, nothing written between them: the checkpoint's
    # statement once stayed open and the second VACUUM failed.
    db = await Database.open(tmp_path / "m.db", MIGRATIONS)
    try:
        await db.compact()
        await db.compact()
        await db.checkpoint()
        await db.compact()
    finally:
        await db.close()


async def test_a_new_database_and_the_folders_made_for_it_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    """memory.db holds every user's memories (credentials too): as a backup
    of it is, the live file, its WAL and the data folder are owner-only,
    whatever the umask lets others read."""
    import os
    import stat

    path = tmp_path / "home" / "data" / "m.db"
    old = os.umask(0o022)
    try:
        db = await Database.open(path, MIGRATIONS, attach=Attachment("buf", tmp_path / "home" / "data" / "b.db", ()))
        try:
            async with db.transaction() as conn:
                await conn.execute("CREATE TABLE t (x)")
            for p in (path, path.with_name("m.db-wal"), path.with_name("m.db-shm"), tmp_path / "home" / "data" / "b.db"):
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
            for d in (tmp_path / "home", tmp_path / "home" / "data"):
                assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
        finally:
            await db.close()
    finally:
        os.umask(old)


async def test_an_existing_database_keeps_its_permissions(tmp_path: Path) -> None:
    import stat

    path = tmp_path / "m.db"
    path.touch(mode=0o640)
    path.chmod(0o640)
    db = await Database.open(path, MIGRATIONS)
    await db.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the operator's choice


async def _m_items(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        """
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL,
                           parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
        """,
    )


async def test_a_full_disk_mid_transaction_raises_the_full_disk_and_the_writer_goes_on(tmp_path: Path) -> None:
    # SQLite rolls a transaction back by itself on SQLITE_FULL; the ROLLBACK
    # sent after it failed ("no transaction is active") and that error
    # replaced the one saying the disk is full.
    db = await Database.open(tmp_path / "f.db", [_m_items])
    try:
        (pages,) = await db.fetchall("PRAGMA page_count")
        await db.write(f"PRAGMA max_page_count = {pages[0]}")  # a real SQLITE_FULL on a real file
        with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO item (v) VALUES ('kept')")
                await conn.execute("INSERT INTO item (v) VALUES (?)", ("x" * 50_000,))
        assert await db.fetchall("SELECT v FROM item") == []  # nothing half-written
        await db.write("PRAGMA max_page_count = 1073741823")  # space is back
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO item (v) VALUES (?)", ("x" * 50_000,))
        assert [len(r[0]) for r in await db.fetchall("SELECT v FROM item")] == [50_000]
    finally:
        await db.close()


async def test_a_commit_that_fails_leaves_no_transaction_open(tmp_path: Path) -> None:
    # A COMMIT can fail and leave its transaction open (a deferred foreign
    # key, SQLITE_BUSY): the writer must not stay inside it, or every later
    # BEGIN fails ("cannot start a transaction within a transaction").
    db = await Database.open(tmp_path / "c.db", [_m_items])
    try:
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO item (v, parent) VALUES ('orphan', 7)")
        assert await db.fetchall("SELECT v FROM item") == []
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO item (v) VALUES ('next')")
        assert [r[0] for r in await db.fetchall("SELECT v FROM item")] == ["next"]
    finally:
        await db.close()


async def test_a_transaction_cancelled_as_it_begins_leaves_none_open(tmp_path: Path) -> None:
    # A stop cancels a transaction (a channel's write-behind, a draft's row)
    # while its BEGIN is on its way to the writer thread, which still runs
    # it: left open, every later BEGIN failed ("cannot start a transaction
    # within a transaction") and every later write joined a transaction
    # never committed (a Feishu draft's row lost, so never withdrawn).
    db = await Database.open(tmp_path / "b.db", [_m_items])
    try:
        async def cut() -> None:
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO item (v) VALUES ('cut')")

        for _ in range(20):  # the cancel lands before and after the BEGIN ran in the thread
            task = asyncio.create_task(cut())
            await asyncio.sleep(0)  # its BEGIN IMMEDIATE sent, awaited
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await db.write("INSERT INTO item (v) VALUES ('alone')")
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO item (v) VALUES ('next')")
        await db.close()
        db = await Database.open(tmp_path / "b.db", [_m_items])  # what was committed, read back
        assert sorted({r[0] for r in await db.fetchall("SELECT v FROM item")}) == ["alone", "next"]
    finally:
        await db.close()


class _Announcing:
    """An aiosqlite connection that says when it begins a transaction."""

    def __init__(self, conn: aiosqlite.Connection, began: asyncio.Event) -> None:
        self._conn, self._began = conn, began

    def execute(self, sql: str, *args: object) -> object:
        if sql.startswith("BEGIN"):
            self._began.set()
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


async def test_two_processes_opening_an_old_file_at_once_apply_each_migration_once(tmp_path: Path) -> None:
    """The gateway and a `myclaw memory` command started together after an
    upgrade: both read the old version; the one that waits for the other's
    migration must not run it again ("duplicate column name")."""
    from memory.db import _migrate

    path = tmp_path / "m.db"
    await (await Database.open(path, MIGRATIONS[:2])).close()
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("BEGIN IMMEDIATE")  # the other process, inside migration 3
    first.execute("ALTER TABLE memories ADD COLUMN source_text TEXT NOT NULL DEFAULT ''")
    first.execute("PRAGMA user_version = 3")
    began = asyncio.Event()
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        await conn.execute("PRAGMA busy_timeout = 10000")
        second = asyncio.create_task(_migrate(_Announcing(conn, began), MIGRATIONS))  # type: ignore[arg-type]
        await began.wait()  # it has read version 2 and waits for the lock
        first.execute("COMMIT")
        await second
        (version,) = await (await conn.execute("PRAGMA user_version")).fetchone()  # type: ignore[misc]
        assert version == len(MIGRATIONS)
    finally:
        await conn.close()
        first.close()


_PEEK = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM sqlite_master').fetchall(); c.close()"


async def test_another_process_closing_the_side_file_leaves_the_live_wal_alone(tmp_path: Path) -> None:
    """`myclaw memory stats` while the gateway runs opens memory.buffer.db
    and closes it. Opening the side file again for the reader (to create it
    owner-only) closed a descriptor of a file SQLite held locks on, and
    POSIX drops every lock a process holds on a file when any descriptor of
    it closes: the other process then took itself for the last user,
    deleted the live WAL, and lines buffered afterwards went to an unlinked
    file (gone at the next start; other processes read old lines again)."""
    import subprocess
    import sys

    side = tmp_path / "b.db"
    buf = Attachment("buf", side, (lambda conn: run_script(conn, "CREATE TABLE buf.lines (x TEXT)"),))
    db = await Database.open(tmp_path / "m.db", MIGRATIONS, attach=buf)
    try:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO buf.lines VALUES ('before')")
        await asyncio.to_thread(subprocess.run, [sys.executable, "-c", _PEEK, str(side)], check=True, timeout=30)
        assert side.with_name("b.db-wal").exists()
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO buf.lines VALUES ('after')")
        with sqlite3.connect(side) as other:  # what another process (or the next start) reads
            assert [r[0] for r in other.execute("SELECT x FROM lines ORDER BY rowid")] == ["before", "after"]
        other.close()
    finally:
        await db.close()


async def test_an_upgrade_of_an_existing_file_is_logged_before_and_after_a_new_one_is_not(tmp_path: Path) -> None:
    """An operator upgrading sees which file is migrated, from which schema
    to which, and how long it took: a long migration at start is not a
    silent hang. A first start (a new file) and an open of a current file
    log nothing."""
    import io
    import json

    from gateway.logging import configure_logging

    out = io.StringIO()
    configure_logging(stream=out)
    path = tmp_path / "memory.db"
    await (await Database.open(path, MIGRATIONS[:3])).close()
    assert out.getvalue() == ""  # created: nothing to upgrade
    await (await Database.open(path, MIGRATIONS)).close()
    await (await Database.open(path, MIGRATIONS)).close()  # current: nothing
    rows = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(r["event"], r["file"], r["from_version"], r["to_version"], r["level"]) for r in rows] == [
        ("upgrading database schema", "memory.db", 3, len(MIGRATIONS), "info"),
        ("database schema upgraded", "memory.db", 3, len(MIGRATIONS), "info"),
    ]
    assert rows[1]["seconds"] >= 0
    assert str(tmp_path) not in out.getvalue()  # the file's name, not its folder
