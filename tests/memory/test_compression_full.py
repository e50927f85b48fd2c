"""Daily and weekly compression on a full memory.db (SQLite's own
SQLITE_FULL on the real file, through ``PRAGMA max_page_count``): nothing
is half-written (no summary without its events marked, no source fact
archived without the merged fact that replaces it), the run is not
recorded as done, the lease is free for the retry, and once space is back
the same work is done in full."""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

import pytest

from memory import Category, ManualClock, MemoryEngine, NewMemory
from memory.changelog import read_log
from memory.compression import COMPRESS_LEASE, Compressor
from memory.llm import MemoryLLM
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply  # noqa: F401
from .test_compression import kind
from .test_extraction_full import _indexes_agree


def words(seed: int, n: int) -> str:
    rnd = random.Random(seed)  # words that do not compress into a few pages
    return " ".join("".join(rnd.choice("abcdefghij") for _ in range(8)) for _ in range(n))


async def fill_up(engine: MemoryEngine) -> None:
    """memory.db at its last page, with no room left in it: another user's
    facts fill it until SQLite says it is full."""
    (pages,) = await engine.db.fetchall("PRAGMA main.page_count")
    await engine.db.write(f"PRAGMA main.max_page_count = {pages[0] + 8}")
    for i in range(10_000):
        try:
            await engine.add(NewMemory(owner="zed", content=f"zed filler {i}: {words(i, 100)}"))
        except sqlite3.OperationalError as exc:
            assert "full" in str(exc)
            return
    raise AssertionError("memory.db never filled")


async def _space_back(engine: MemoryEngine) -> None:
    await engine.db.write("PRAGMA main.max_page_count = 1073741823")


async def test_a_full_memory_db_stops_the_daily_run_whole_and_the_next_run_does_it_all(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    days = {"2026-02-26": "Alice chose Postgres", "2026-02-27": "Alice set up CI", "2026-02-28": "Alice hired Bob"}
    events = [(await engine.add_event("alice", d, s, channel="telegram")).id for d, s in days.items()]
    facts = [{"content": f"alice fact {i}: {words(i, 30)}", "category": "decision"} for i in range(40)]
    fake.responder = lambda body: Reply(reply(facts, "x"))
    await fill_up(engine)
    with pytest.raises(Exception, match="full"):
        await Compressor(engine, llm).daily()
    assert len(fake.requests) == 1  # the first day failed: the others were not asked for, to fail the same way
    assert await engine.list_memories("alice", status=None) == []  # no half-written summary
    assert [e.id for e in await engine.events("alice", uncompressed_only=True)] == events
    assert [e.action for e in await read_log(engine.db, job="daily_compress")] == []  # not recorded as done
    assert await Compressor(engine, llm).leases.holder(COMPRESS_LEASE) is None  # free for the retry
    await _indexes_agree(engine)
    await _space_back(engine)
    rep = await Compressor(engine, llm).daily()
    assert rep.events == 3 and await engine.events("alice", uncompressed_only=True) == []
    assert "run" in [e.action for e in await read_log(engine.db, job="daily_compress")]


async def test_a_full_memory_db_archives_no_source_fact_of_a_merge_it_could_not_write(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    ids = await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas deploy fact number {i}", project="atlas", topic="deploy",
                   category=Category.DECISION, importance=0.5), None)
        for i in range(1, 13)
    )
    merged = f"atlas deploy facts merged: {words(99, 2000)}"

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        return Reply(json.dumps({"facts": [{"content": merged, "category": "decision", "from": list(range(1, 13))}]}))

    fake.responder = responder
    await fill_up(engine)
    with pytest.raises(Exception, match="full"):
        await Compressor(engine, llm).weekly()
    rows = await engine.list_memories("alice", status=None, limit=100)
    assert sorted(m.id for m in rows) == sorted(ids) and all(m.status.value == "active" for m in rows)
    assert [e.action for e in await read_log(engine.db, job="weekly_compress")] == []
    assert await Compressor(engine, llm).leases.holder(COMPRESS_LEASE) is None
    await _indexes_agree(engine)
    await _space_back(engine)
    await Compressor(engine, llm).weekly()
    active = await engine.list_memories("alice", limit=100)
    assert [m.content[:26] for m in active] == ["atlas deploy facts merged:"]
