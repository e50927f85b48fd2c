from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory import ManualClock, MemoryEngine, NewMemory
from memory.compression import COMPRESS_LEASE, Compressor
from memory.holder import Holder, ProcessProbe
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


# -- a holder that died: taken over at once when that is proved -----------------------------
_HOLDER_PROCESS = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from memory.clock import ManualClock
from memory.compression import COMPRESS_LEASE
from memory.engine import MemoryEngine
from memory.lease import Leases
async def main():
    eng = await MemoryEngine.open(sys.argv[2], ManualClock("2026-03-01T12:00:00Z"))
    async with Leases(eng.db, eng.clock).hold(COMPRESS_LEASE, "daily_compress"):
        print("held", flush=True)
        await asyncio.sleep(3600)  # mid-run, until it is killed
asyncio.run(main())
"""


@asynccontextmanager
async def holder_process(engine: MemoryEngine) -> AsyncIterator[asyncio.subprocess.Process]:
    """A real process holding the compression lease in ``engine``'s file, mid-run."""
    root = str(Path(__file__).resolve().parents[2])
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _HOLDER_PROCESS, root, str(engine.db.path),
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line == b"held\n", (line, await proc.stderr.read() if proc.stderr else b"")
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_a_sigkilled_holders_lease_is_taken_over_at_once(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Found by scripts/walk_chaos.py: a compression SIGKILLed mid-run held
    the lease for its 15 minutes, and the next start could not compress.
    Its holder names its process; a process on the same machine that finds
    it gone takes the lease over at once, and says so (the pid, no token)."""
    from structlog.testing import capture_logs

    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    fake.responder = lambda body: Reply(reply([{"content": "Alice set up CI"}], "s"))
    async with holder_process(engine) as proc:
        holder = await Leases(engine.db, clock).holder(COMPRESS_LEASE)
        assert holder is not None and holder[0].startswith(f"daily_compress@{proc.pid}:")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    with capture_logs() as logs:
        report = await Compressor(engine, llm).daily()  # the same minute: nothing expired
    assert report.events == 1 and await engine.events("alice", uncompressed_only=True) == []
    taken = [e for e in logs if e["event"] == "lease-takeover"]
    assert len(taken) == 1 and taken[0]["previous_pid"] == proc.pid and taken[0]["lease"] == COMPRESS_LEASE
    assert taken[0]["previous_job"] == "daily_compress" and taken[0]["why"].startswith("gone")
    token = holder[0].split(" ")[0].partition(":")[2]
    assert token not in json.dumps(logs, default=str)
    assert await Leases(engine.db, clock).holder(COMPRESS_LEASE) is None  # and released after


async def test_a_killed_holder_not_yet_reaped_is_gone_too(engine: MemoryEngine, clock: ManualClock) -> None:
    """A zombie (killed, its parent has not waited for it yet) runs no code.
    ``subprocess.Popen``: asyncio's child watcher would reap it at once."""
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER_PROCESS, root, str(engine.db.path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60) == b"held\n"
        os.kill(proc.pid, signal.SIGKILL)
        stat, tasks = Path(f"/proc/{proc.pid}/stat"), Path(f"/proc/{proc.pid}/task")
        for _ in range(1000):  # a zombie a moment after the signal, once its threads (aiosqlite's) have ended
            if stat.read_text().rpartition(")")[2].split()[0] == "Z" and len(list(tasks.iterdir())) == 1:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the killed process never became a zombie")
        lease = await Leases(engine.db, clock).acquire(COMPRESS_LEASE, "weekly_compress@me")
        assert stat.exists()  # still not reaped: it was taken over as a zombie
        await lease.release()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def test_a_live_holders_lease_is_never_taken_over(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    async with holder_process(engine) as proc:
        with pytest.raises(LeaseBusy, match=rf"held by daily_compress \(pid {proc.pid}, running\)"):
            await Compressor(engine, llm).weekly()
        with pytest.raises(LeaseBusy):
            await Leases(engine.db, clock).acquire(COMPRESS_LEASE, "file_sync@me")
        clock.advance(timedelta(minutes=14))
        with pytest.raises(LeaseBusy):  # still within its 15 minutes: it is running
            await Compressor(engine, llm).daily()
        assert proc.returncode is None
        holder = await Leases(engine.db, clock).holder(COMPRESS_LEASE)
        assert holder is not None and holder[0].startswith(f"daily_compress@{proc.pid}:")
    assert fake.requests == []


@pytest.mark.parametrize("holder", [
    "daily_compress@{pid}:1f2e3d4c",  # written before holders said who they are
    "daily_compress@{pid}:1f2e3d4c host=elsewhere boot={boot} pidns={ns} uid={uid} start=1",  # another machine
    "daily_compress@{pid}:1f2e3d4c host={host} boot=0-other-boot pidns={ns} uid={uid} start=1",  # rebooted or another VM
    "daily_compress@{pid}:1f2e3d4c host={host} boot={boot} pidns=1 uid={uid} start=1",  # another container
    "daily_compress@{pid}:1f2e3d4c host={host} boot={boot} pidns={ns} uid={uid}",  # no start time
    "daily_compress@dead-process",
])
async def test_a_holder_not_proved_gone_waits_for_its_expiry(
    engine: MemoryEngine, clock: ManualClock, holder: str
) -> None:
    """Fail safe: a pid that exists nowhere here proves nothing about a
    holder elsewhere (or one that does not say where it is)."""
    me = Holder.parse(ProcessProbe().new_holder("x"))
    dead = await _a_dead_pid()
    row = holder.format(pid=dead, host=me.host, boot=me.boot, ns=me.pidns, uid=me.uid)
    leases = Leases(engine.db, clock)
    await leases.acquire(COMPRESS_LEASE, row)
    with pytest.raises(LeaseBusy):
        await leases.acquire(COMPRESS_LEASE, leases.new_holder("daily_compress"))
    clock.advance(timedelta(minutes=16))
    await leases.acquire(COMPRESS_LEASE, leases.new_holder("daily_compress"))


async def test_a_recycled_pid_is_not_taken_for_the_holder(engine: MemoryEngine, clock: ManualClock) -> None:
    """The holder's pid now belongs to a live process that started later
    (here: this test's own pid with an earlier start time): the holder is gone."""
    me = Holder.parse(ProcessProbe().new_holder("x"))
    assert me.start is not None and me.start > 0
    earlier = dataclasses.replace(me, job="daily_compress", start=me.start - 1).format()
    leases = Leases(engine.db, clock)
    await leases.acquire(COMPRESS_LEASE, earlier)
    await leases.acquire(COMPRESS_LEASE, leases.new_holder("weekly_compress"))
    still_me = dataclasses.replace(me, job="daily_compress", token="00000000").format()
    clock.advance(timedelta(minutes=16))
    await leases.acquire(COMPRESS_LEASE, still_me)
    with pytest.raises(LeaseBusy, match="running"):  # the same pid and start: this process, alive
        await leases.acquire(COMPRESS_LEASE, leases.new_holder("weekly_compress"))


async def test_without_proc_nothing_is_proved_gone(engine: MemoryEngine, clock: ManualClock, tmp_path: Path) -> None:
    """Not Linux (no ``/proc``): holders are written without the fields a
    check needs, and every lease waits for its expiry as before."""
    blind = ProcessProbe(proc=tmp_path / "no-proc")
    written = blind.new_holder("daily_compress")
    assert written.startswith("daily_compress@") and " " not in written
    dead = dataclasses.replace(Holder.parse(ProcessProbe().new_holder("daily_compress")), pid=await _a_dead_pid())
    leases = Leases(engine.db, clock, probe=blind)
    await leases.acquire(COMPRESS_LEASE, dead.format())
    with pytest.raises(LeaseBusy, match="no /proc"):
        await leases.acquire(COMPRESS_LEASE, written)


async def _a_dead_pid() -> int:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    return proc.pid


# -- a job whose lease expired mid-run: the loser writes nothing more ----------------------
async def test_a_job_whose_lease_was_taken_over_mid_run_writes_nothing_after(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI
) -> None:
    """The first daily run's model call outlasts its lease (15 minutes) and a
    second run takes the lease over by its expiry. The first's answer then
    comes: it must not write it (its lease is another's; it learnt that only
    at its renew, after the write), and the second's work is written once."""
    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    await engine.add_event("bob", "2026-02-28", "Bob moved to Berlin")
    loser_may, winner_may = asyncio.Event(), asyncio.Event()
    asked: list[str] = []

    async def answer(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        who = "alice" if "Alice set up CI" in prompt else "bob"
        asked.append(who)
        if len(asked) == 1:  # the first run, alice's day
            await loser_may.wait()
            return Reply(reply([{"content": "Alice set up CI (the first run)"}], "s"))
        if who == "alice":
            await winner_may.wait()
        return Reply(reply([{"content": "Alice set up CI" if who == "alice" else "Bob lives in Berlin"}], "s"))

    fake.responder = answer
    first_llm = MemoryLLM(base_url=fake.url, model="m", timeout=60, retries=0)
    second_llm = MemoryLLM(base_url=fake.url, model="m", timeout=60, retries=0)
    try:
        loser = asyncio.create_task(Compressor(engine, first_llm).daily())
        while not asked:
            await asyncio.sleep(0.01)
        clock.advance(timedelta(minutes=16))  # its lease expired while the model thought
        winner = asyncio.create_task(Compressor(engine, second_llm).daily())
        while len(asked) < 2:
            await asyncio.sleep(0.01)
        loser_may.set()  # the first run's answer comes while the second's lease is live
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(loser, 10)
        winner_may.set()
        report = await asyncio.wait_for(winner, 10)
    finally:
        await first_llm.aclose()
        await second_llm.aclose()
    assert report.events == 2
    facts = sorted([m.content for m in await engine.list_memories("alice")]
                   + [m.content for m in await engine.list_memories("bob")])
    assert facts == ["Alice set up CI", "Bob lives in Berlin"]
    assert await engine.events("alice", uncompressed_only=True) == []
    runs = await engine.db.fetchall("SELECT job FROM memory_log WHERE action = 'run'")
    assert [r["job"] for r in runs] == ["daily_compress"]  # the second run's only


async def test_a_weekly_merge_answered_after_its_lease_was_taken_over_is_not_written(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI
) -> None:
    """The same for the weekly merge: the first run's merge, answered once a
    second run holds the lease, is not written; the second's is, once."""
    for i in range(10):
        await engine.add(NewMemory(owner="alice", content=f"fact {i}", project="p"))
    loser_may, winner_may = asyncio.Event(), asyncio.Event()
    asked: list[int] = []

    async def answer(body: dict[str, Any]) -> Reply:
        asked.append(len(asked))
        if len(asked) == 1:
            await loser_may.wait()
            return Reply(json.dumps({"facts": [{"content": "all ten (the first run)", "from": list(range(1, 11))}]}))
        await winner_may.wait()
        return Reply(json.dumps({"facts": [{"content": "all ten", "from": list(range(1, 11))}]}))

    fake.responder = answer
    first_llm = MemoryLLM(base_url=fake.url, model="m", timeout=60, retries=0)
    second_llm = MemoryLLM(base_url=fake.url, model="m", timeout=60, retries=0)
    try:
        loser = asyncio.create_task(Compressor(engine, first_llm).weekly())
        while not asked:
            await asyncio.sleep(0.01)
        clock.advance(timedelta(minutes=16))
        winner = asyncio.create_task(Compressor(engine, second_llm).weekly())
        while len(asked) < 2:
            await asyncio.sleep(0.01)
        loser_may.set()
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(loser, 10)
        winner_may.set()
        report = await asyncio.wait_for(winner, 10)
    finally:
        await first_llm.aclose()
        await second_llm.aclose()
    assert report.created == 1
    assert [m.content for m in await engine.list_memories("alice")] == ["all ten"]
    runs = await engine.db.fetchall("SELECT job FROM memory_log WHERE action = 'run'")
    assert [r["job"] for r in runs] == ["weekly_compress"]


async def test_a_lease_renews_for_as_long_as_it_was_taken(engine: MemoryEngine, clock: ManualClock) -> None:
    """A lease taken for 30 minutes from Leases whose default is 15 is
    renewed for 30 again, not cut to the default (the file import's)."""
    leases = Leases(engine.db, clock, ttl=timedelta(minutes=15))
    lease = await leases.acquire("job", "a", ttl=timedelta(minutes=30))
    clock.advance(timedelta(minutes=20))
    await lease.renew()
    clock.advance(timedelta(minutes=20))  # past a 15-minute renewal, inside a 30-minute one
    with pytest.raises(LeaseBusy):
        await leases.acquire("job", "b")
