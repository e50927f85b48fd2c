from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory import ManualClock, MemoryEngine, NewMemory
from memory.compression import COMPRESS_LEASE, Compressor
from memory.lease import JobTimeout, LeaseBusy, LeaseLost, Leases
from memory.llm import MemoryLLM
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply  # noqa: F401


async def test_acquire_busy_expiry_takeover_and_release(engine: MemoryEngine, clock: ManualClock) -> None:
    leases = Leases(engine.db, clock, ttl=timedelta(minutes=5))
    a = await leases.acquire("job", "a")
    with pytest.raises(LeaseBusy, match="held by a"):
        await leases.acquire("job", "b")
    clock.advance(timedelta(minutes=4))
    await a.renew()  # extends to 4 + 5 minutes
    clock.advance(timedelta(minutes=4))
    with pytest.raises(LeaseBusy):
        await leases.acquire("job", "b")
    clock.advance(timedelta(minutes=2))  # expired: a died
    b = await leases.acquire("job", "b")
    with pytest.raises(LeaseLost):
        await a.renew()
    await a.release()  # releasing a lost lease does not free b's
    assert (await leases.holder("job"))[0] == "b"  # type: ignore[index]
    await b.release()
    assert await leases.holder("job") is None


async def test_daily_and_weekly_never_run_together(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    for i in range(10):
        await engine.add(NewMemory(owner="alice", content=f"fact {i}", project="p"))
    started = asyncio.Event()

    async def slow(body: dict[str, Any]) -> Reply:
        started.set()
        await asyncio.sleep(0.3)
        return Reply(reply([], "s"))

    fake.responder = slow
    daily = asyncio.create_task(Compressor(engine, llm).daily())
    await asyncio.wait_for(started.wait(), 5)
    with pytest.raises(LeaseBusy, match="daily_compress"):
        await Compressor(engine, llm).weekly()  # fails fast, does not wait
    assert len(fake.requests) == 1
    assert (await asyncio.wait_for(daily, 5)).events == 1
    assert await Leases(engine.db, engine.clock).holder(COMPRESS_LEASE) is None  # released
    fake.responder = lambda body: Reply(json.dumps({"facts": [{"content": "all", "from": list(range(1, 11))}]}))
    assert (await Compressor(engine, llm).weekly()).created == 1


async def test_an_expired_lease_of_a_dead_job_is_taken_over(engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    leases = Leases(engine.db, clock)
    await leases.acquire(COMPRESS_LEASE, "weekly_compress@dead-process")
    with pytest.raises(LeaseBusy):
        await Compressor(engine, llm).daily()
    clock.advance(timedelta(minutes=16))
    assert (await Compressor(engine, llm).daily()).events == 0


async def test_a_stuck_job_fails_fast_and_releases(engine: MemoryEngine, fake: FakeOpenAI) -> None:
    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    stuck = MemoryLLM(base_url=fake.url, model="m", timeout=30, retries=0)
    try:
        fake.queue_delay(1.5, reply([], "s"))
        with pytest.raises(JobTimeout):
            await Compressor(engine, stuck, job_timeout=0.3).daily()
    finally:
        await stuck.aclose()
    assert await Leases(engine.db, engine.clock).holder(COMPRESS_LEASE) is None
    assert len(await engine.events("alice", uncompressed_only=True)) == 1


async def test_a_release_that_fails_after_the_job_failed_keeps_the_jobs_own_error(
    engine: MemoryEngine, clock: ManualClock, tmp_path: Path
) -> None:
    """memory.db full (SQLite's own SQLITE_FULL, through ``PRAGMA
    max_page_count``) fails the job; the release then cannot write either
    (here: the write lock held by another connection). The caller learns
    why the job failed, not why the release did; the release failure is
    logged once."""
    from structlog.testing import capture_logs

    from .test_compression_full import fill_up, words

    await engine.db.write("PRAGMA busy_timeout = 0")  # the other writer's lock fails the release at once
    other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    try:
        with capture_logs() as logs, pytest.raises(sqlite3.OperationalError, match="full"):
            async with Leases(engine.db, clock).hold(COMPRESS_LEASE, "daily_compress"):
                try:
                    await fill_up(engine)
                    await engine.add(NewMemory(owner="alice", content=words(7, 2000)))  # pages it cannot have
                finally:
                    other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
    failed = [e for e in logs if "release" in e["event"]]
    assert len(failed) == 1 and failed[0]["log_level"] == "error" and failed[0]["sqlite_error"] == "SQLITE_BUSY"
    assert failed[0]["lease"] == COMPRESS_LEASE and failed[0]["expires_at"]
    holder = await Leases(engine.db, clock).holder(COMPRESS_LEASE)
    assert holder is not None and holder[0].startswith("daily_compress@")  # it expires; the next run takes it over


async def test_a_release_that_fails_after_the_job_succeeded_is_raised(
    engine: MemoryEngine, clock: ManualClock, tmp_path: Path
) -> None:
    await engine.db.write("PRAGMA busy_timeout = 0")
    other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            async with Leases(engine.db, clock).hold(COMPRESS_LEASE, "daily_compress"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
