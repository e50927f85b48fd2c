from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from memory.batch import RowBatcher, insert_statement
from memory.db import Database, run_script


async def _notes(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        """CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT,
                               who TEXT NOT NULL, body TEXT NOT NULL CHECK (body != 'bad'));""",
    )


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    d = await Database.open(tmp_path / "batch.db", [_notes])
    yield d
    await d.close()


def _batcher(db: Database) -> RowBatcher:
    return RowBatcher(db, insert_statement("INSERT INTO notes (who, body)", 2, returning="id"), 2, returning=True)


async def _rows(db: Database) -> list[tuple[int, str, str]]:
    return [tuple(r) for r in await db.fetchall("SELECT id, who, body FROM notes ORDER BY id")]


async def test_concurrent_writers_share_statements_and_get_their_own_ids(db: Database) -> None:
    b = _batcher(db)
    results = await asyncio.gather(*(b.write([(f"w{i}", f"a{i}"), (f"w{i}", f"b{i}")]) for i in range(50)))
    rows = await _rows(db)
    assert len(rows) == 100
    by_id = {r[0]: r for r in rows}
    for i, ids in enumerate(results):  # each caller gets the ids of its own rows, in its order
        assert [by_id[x][1:] for x in ids] == [(f"w{i}", f"a{i}"), (f"w{i}", f"b{i}")]
    # the first caller goes alone, those queued meanwhile share the next
    # statements: 64 rows, 32, then the last caller's 2
    assert b.statements <= 5


async def test_statements_hold_a_power_of_two_rows(db: Database) -> None:
    # Each row count is a statement SQLite prepares and keeps: a handful of
    # shapes, not one per burst size (docs/BENCHMARKS.md, RSS).
    sizes: list[int] = []
    build = insert_statement("INSERT INTO notes (who, body)", 2, returning="id")

    def recording(n: int) -> str:
        sizes.append(n)
        return build(n)

    b = RowBatcher(db, recording, 2, returning=True)
    for burst in (3, 7, 12, 29, 50, 77, 5, 100):
        results = await asyncio.gather(*(b.write([(f"w{i}", f"x{burst}")]) for i in range(burst)))
        assert sorted(x for ids in results for x in ids) == [
            r[0] for r in await db.fetchall("SELECT id FROM notes WHERE body = ? ORDER BY id", (f"x{burst}",))
        ]
    assert len(await _rows(db)) == 283
    assert set(sizes) <= {1, 2, 4, 8, 16, 32, 64}


async def test_a_bad_row_fails_only_its_caller(db: Database) -> None:
    b = _batcher(db)
    results = await asyncio.gather(
        b.write([("alice", "one")]), b.write([("bob", "bad")]), b.write([("carol", "three")]), return_exceptions=True
    )
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert [r[1:] for r in await _rows(db)] == [("alice", "one"), ("carol", "three")]
    assert all(isinstance(r, list) and len(r) == 1 for r in (results[0], results[2]))


async def test_a_cancelled_caller_still_has_its_rows_written(db: Database) -> None:
    b = _batcher(db)
    first = asyncio.create_task(b.write([("alice", "kept")]))
    second = asyncio.create_task(b.write([("bob", "also kept")]))
    await asyncio.sleep(0)
    second.cancel()
    await first
    await b.drain()
    assert [r[1:] for r in await _rows(db)] == [("alice", "kept"), ("bob", "also kept")]


async def test_rows_of_the_wrong_width_or_too_many_are_refused(db: Database) -> None:
    b = _batcher(db)
    with pytest.raises(ValueError, match="2 values"):
        await b.write([("only one",)])
    with pytest.raises(ValueError, match="rows per write"):
        await b.write([("x", "y")] * (b.max_rows + 1))
    assert await _rows(db) == []
    assert await b.write([]) == []


async def test_without_returning_rows_are_written(db: Database) -> None:
    b = RowBatcher(db, insert_statement("INSERT INTO notes (who, body)", 2), 2)
    assert await asyncio.gather(b.write([("a", "1")]), b.write([("b", "2")])) == [[], []]
    assert [r[1:] for r in await _rows(db)] == [("a", "1"), ("b", "2")]


async def test_drain_waits_for_what_was_queued_not_for_later_rows(db: Database) -> None:
    b = _batcher(db)
    first = asyncio.create_task(b.write([("alice", "early")]))
    await asyncio.sleep(0)
    await b.drain()
    assert first.done()
    # A steady stream of other writers cannot keep drain() waiting.
    stop = asyncio.Event()

    async def stream() -> None:
        i = 0
        while not stop.is_set():
            await b.write([("bob", f"n{i}")])
            i += 1

    writers = [asyncio.create_task(stream()) for _ in range(4)]
    await asyncio.sleep(0.05)
    await asyncio.wait_for(b.drain(), 2)
    stop.set()
    await asyncio.gather(*writers)


async def test_a_cancelled_flush_fails_its_callers_instead_of_hanging(db: Database) -> None:
    b = _batcher(db)
    waiting = asyncio.create_task(b.write([("alice", "x")]))
    await asyncio.sleep(0)
    assert b._flusher is not None
    b._flusher.cancel()
    with pytest.raises(RuntimeError, match="row batcher stopped"):
        await asyncio.wait_for(waiting, 2)
