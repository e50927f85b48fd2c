"""Extraction when memory.db cannot be written: a full disk (SQLite's own
SQLITE_FULL on the real file, through ``PRAGMA max_page_count``) or its
write lock held by another process past the busy timeout. The buffer stays
whole and is retried with backoff, no fact is half-written (the full-text
indexes agree with their tables), and the memory model is not asked again
at every tick while the failure cannot even be recorded."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory import ManualClock, MemoryEngine
from memory.extraction import BACKOFF, ExtractionService
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, turns  # noqa: F401

# More than memory.db's free pages hold: facts are cut at 300 characters.
FACTS = [{"content": f"Alice keeps note {i}: " + f"w{i}x " * 60, "category": "config"} for i in range(60)]


async def _buffer(engine: MemoryEngine) -> list[tuple[Any, ...]]:
    rows = await engine.db.fetchall("SELECT content, attempts, next_attempt_at FROM extraction_buffer ORDER BY id")
    return [tuple(r) for r in rows]


async def _indexes_agree(engine: MemoryEngine) -> None:
    # Raises (SQLITE_CORRUPT_VTAB) when an index and its table disagree.
    for fts in ("memories_fts", "events_fts"):
        await engine.db.write(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")
    (ok,) = await engine.db.fetchall("PRAGMA integrity_check")
    assert ok[0] == "ok"


async def test_a_full_memory_db_keeps_the_buffer_writes_nothing_and_retries_later(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer(turns("alice", ("remember my notes", "ok"), ("and the rest", "sure")))
    before = await _buffer(engine)
    clock.advance(timedelta(minutes=3))
    (pages,) = await engine.db.fetchall("PRAGMA main.page_count")
    await engine.db.write(f"PRAGMA main.max_page_count = {pages[0]}")  # memory.db is full; its buffer file is not
    fake.responder = lambda body: Reply(reply(FACTS, "Alice's notes"))
    [rep] = await svc.tick()
    assert rep.error == "OperationalError (SQLITE_FULL) (memory.db)"  # says why, not "cannot rollback"
    assert await engine.list_memories("alice") == [] and await engine.events("alice") == []
    await _indexes_agree(engine)
    kept = await _buffer(engine)
    assert [r[0] for r in kept] == [r[0] for r in before]
    assert {r[1:] for r in kept} == {(1, _ts(clock.now() + BACKOFF[0]))}
    asked = len(fake.requests)
    assert await svc.tick() == [] and len(fake.requests) == asked  # backing off
    await engine.db.write("PRAGMA main.max_page_count = 1073741823")  # space is back
    clock.advance(BACKOFF[0])
    [rep] = await svc.tick()
    assert rep.ok and len(rep.added) == len(FACTS) and await _buffer(engine) == []
    await _indexes_agree(engine)


async def test_a_failure_that_cannot_be_recorded_still_backs_off_and_is_logged_once(
    tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
    other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    try:
        mem = SqliteMemory(engine)
        svc = ExtractionService(engine, llm)
        await mem.buffer(turns("alice", ("my locker is 42", "ok")))
        before = await _buffer(engine)
        clock.advance(timedelta(minutes=3))
        await engine.db.write("PRAGMA busy_timeout = 50")  # the wait is the same, only shorter
        fake.responder = lambda body: Reply(reply([{"content": "Alice's locker is 42", "category": "config"}], "locker"))
        other.execute("BEGIN IMMEDIATE")  # another process holds memory.db's write lock
        with capture_logs() as logs:
            [rep] = await svc.tick()
            assert rep.error == "OperationalError (SQLITE_BUSY) (memory.db)"
            asked = len(fake.requests)
            for _ in range(3):  # the loop's next ticks, before the backoff is over
                clock.advance(timedelta(seconds=5))
                assert await svc.tick() == []
            assert len(fake.requests) == asked  # the model is not asked again and again
        failed = [e for e in logs if e["log_level"] in ("warning", "error")]
        assert len(failed) == 1 and str(tmp_path / "memory.db") in str(failed[0])
        other.rollback()
        assert await _buffer(engine) == before  # whole, as it was (the attempt could not be written)
        clock.advance(BACKOFF[0])
        [rep] = await svc.tick()
        assert rep.ok and await _buffer(engine) == []
        assert [m.content for m in await engine.list_memories("alice")] == ["Alice's locker is 42"]
        await _indexes_agree(engine)
    finally:
        other.close()
        await engine.close()


def _ts(dt: Any) -> str:
    from memory.clock import format_ts

    return format_ts(dt)


async def test_a_failure_whose_text_quotes_a_fact_keeps_and_logs_its_codes_only(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """SQLite's text may quote a value (FTS5 takes a fact's last word for a
    column): the batch's kept error and every log line name the failure by
    its type and SQLite's error name, never the words."""
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer(turns("alice", ("my safe opens with wombat7731", "ok")))
    clock.advance(timedelta(minutes=3))
    await engine.db.write("CREATE VIRTUAL TABLE probe USING fts5(x)")
    await engine.db.write("CREATE TRIGGER refuse BEFORE INSERT ON memories "
                          "BEGIN SELECT * FROM probe WHERE probe MATCH NEW.content || ':x'; END")
    fake.responder = lambda body: Reply(reply([{"content": "Alice safe code wombat7731", "category": "config"}],
                                              "safe"))
    with capture_logs() as logs:
        [rep] = await svc.tick()
    assert rep.error == "OperationalError (SQLITE_ERROR) (memory.db)"
    (kept,) = await engine.db.fetchall("SELECT DISTINCT last_error FROM extraction_buffer")
    assert kept[0] == rep.error
    assert "wombat" not in repr(logs)
