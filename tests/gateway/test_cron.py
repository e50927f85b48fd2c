from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from gateway.cron import (
    INTERNAL_DAILY,
    INTERNAL_WEEKLY,
    CronError,
    CronJob,
    CronScheduler,
    CronStore,
    InternalJob,
    JobAttempt,
    memory_jobs,
    next_run,
)
from gateway.cron_tools import cron_tools
from gateway.tools import ToolContext, ToolError
from memory import ManualClock, MemoryEngine
from memory.clock import format_ts, parse_ts
from memory.compression import COMPRESS_LEASE, Compressor
from memory.lease import LeaseBusy, LeaseLost, Leases
from memory.llm import MemoryLLM
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.logjson import debug_json_log, lines
from tests.memory._writepath import reply

from zoneinfo import ZoneInfo

# 2026-03-01 is a Sunday.
START = "2026-03-01T12:00:00Z"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[CronStore]:
    s = await CronStore.open(tmp_path / "data" / "cron.db", clock, "Asia/Shanghai")
    try:
        yield s
    finally:
        await s.close()


def test_next_run_uses_the_timezone() -> None:
    after = parse_ts("2026-03-01T12:00:00Z")  # 20:00 in Shanghai
    assert format_ts(next_run("0 3 * * *", after, ZoneInfo("Asia/Shanghai"))) == "2026-03-01T19:00:00Z"
    assert format_ts(next_run("0 3 * * *", after, ZoneInfo("UTC"))) == "2026-03-02T03:00:00Z"
    assert format_ts(next_run("0 4 * * 1", after, ZoneInfo("UTC"))) == "2026-03-02T04:00:00Z"


async def test_internal_jobs_fire_on_schedule_and_run_the_engine(
    tmp_path: Path, clock: ManualClock, store: CronStore
) -> None:
    async with FakeOpenAI(responder=lambda body: Reply(reply([{"content": "Alice set up CI"}], "s"))) as fake:
        engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
        llm = MemoryLLM(base_url=fake.url, model="m", retries=0)
        try:
            await engine.add_event("alice", "2026-03-01", "Alice set up CI today")
            sched = CronScheduler(store, internal=memory_jobs(Compressor(engine, llm, timezone="Asia/Shanghai")))
            assert await sched.start(loop=False) == []
            jobs = {j.id: j for j in await store.list()}
            assert (jobs[INTERNAL_DAILY].schedule, jobs[INTERNAL_WEEKLY].schedule) == ("0 3 * * *", "0 4 * * 1")
            assert jobs[INTERNAL_DAILY].next_run_at == "2026-03-01T19:00:00Z"  # 03:00 Shanghai
            clock.set("2026-03-01T18:59:59Z")
            assert await sched.run_due() == []
            clock.advance(1)
            runs = await sched.run_due()
            assert [(r.job_id, r.status) for r in runs] == [(INTERNAL_DAILY, "ok")]
            assert await engine.events("alice", uncompressed_only=True) == []  # the engine ran, not the agent
            assert [m.content for m in await engine.list_memories("alice")] == ["Alice set up CI"]
            assert (await store.get(INTERNAL_DAILY)).next_run_at == "2026-03-02T19:00:00Z"  # type: ignore[union-attr]
            clock.set("2026-03-01T20:00:00Z")  # Monday 04:00 in Shanghai
            assert [r.job_id for r in await sched.run_due()] == [INTERNAL_WEEKLY]
        finally:
            await llm.aclose()
            await engine.close()


async def test_a_missed_run_runs_once_at_start(tmp_path: Path, clock: ManualClock) -> None:
    calls: list[str] = []

    async def daily() -> None:
        calls.append(format_ts(clock.now()))

    path = tmp_path / "cron.db"
    store = await CronStore.open(path, clock)
    try:
        await CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)]).start(loop=False)
        await store.add(schedule="*/10 * * * *", message="ping", channel="telegram", chat_id="1", user="alice")
    finally:
        await store.close()
    clock.advance(timedelta(days=3, hours=1))  # the gateway was down for three days
    store = await CronStore.open(path, clock)
    agent: list[CronJob] = []

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        agent.append(job)

    try:
        sched = CronScheduler(store, run_agent_job=run_agent, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)])
        missed = await sched.start(loop=False)
        assert sorted(r.job_id for r in missed)[0] == INTERNAL_DAILY and len(missed) == 2
        assert calls == ["2026-03-04T13:00:00Z"] and [j.message for j in agent] == ["ping"]
        assert (await store.get(INTERNAL_DAILY)).next_run_at == "2026-03-05T03:00:00Z"  # type: ignore[union-attr]
        assert await sched.run_due() == []
    finally:
        await sched.stop()
        await store.close()


async def test_agent_jobs_call_back_with_target_and_failures_are_recorded(clock: ManualClock, store: CronStore) -> None:
    seen: list[tuple[str, str, str, str]] = []

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        seen.append((job.channel, job.chat_id, job.user, job.message))
        if "fail" in job.message:
            raise RuntimeError("provider down")

    ok = await store.add(schedule="0 9 * * *", message="今天的天气", channel="feishu", chat_id="oc_1", user="alice")
    bad = await store.add(schedule="0 9 * * *", message="fail please", channel="telegram", chat_id="2", user="bob")
    sched = CronScheduler(store, run_agent_job=run_agent)
    clock.set("2026-03-02T01:00:00Z")  # 09:00 Shanghai
    runs = {r.job_id: r for r in await sched.run_due()}
    assert runs[ok.id].status == "ok" and runs[bad.id].status == "retry"
    assert sorted(seen) == [("feishu", "oc_1", "alice", "今天的天气"), ("telegram", "2", "bob", "fail please")]
    failed = await store.get(bad.id)
    # Tried again a minute later, for the same slot.
    # By its type: a job's exception may quote a memory or a message (its text is never kept).
    assert failed is not None and failed.last_status == "retry" and failed.last_error == "RuntimeError"
    assert (failed.next_run_at, failed.due_at, failed.attempts) == ("2026-03-02T01:01:00Z", "2026-03-02T01:00:00Z", 1)
    assert (await store.get(ok.id)).next_run_at == "2026-03-03T01:00:00Z"  # type: ignore[union-attr]


async def test_a_busy_lease_tries_again_for_the_same_slot_and_runs_it_once(clock: ManualClock, store: CronStore) -> None:
    held = [True]
    ran: list[str] = []

    async def daily() -> None:
        if held[0]:
            raise LeaseBusy("memory:compress", "weekly@1", "2026-03-01T19:15:00Z")
        ran.append(format_ts(clock.now()))

    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)])
    await sched.start(loop=False)
    clock.set("2026-03-01T19:00:00Z")  # 03:00 in Shanghai
    [run] = await sched.run_due()
    job = await store.get(INTERNAL_DAILY)
    assert run.status == "busy" and job is not None and job.last_status == "busy"
    # Not skipped: looked at again a minute later, for the same slot; not an attempt used up.
    assert (job.next_run_at, job.due_at, job.attempts) == ("2026-03-01T19:01:00Z", "2026-03-01T19:00:00Z", 0)
    clock.advance(60)
    assert [r.status for r in await sched.run_due()] == ["busy"]
    held[0] = False
    clock.advance(60)
    assert [r.status for r in await sched.run_due()] == ["ok"]
    job = await store.get(INTERNAL_DAILY)
    assert job is not None and (job.next_run_at, job.due_at, job.last_status) == ("2026-03-02T19:00:00Z", None, "ok")
    clock.advance(60)
    assert await sched.run_due() == []
    assert ran == ["2026-03-01T19:02:00Z"]  # once for the slot


async def test_a_run_whose_lease_was_taken_over_is_busy_and_looks_again_not_an_error(
    clock: ManualClock, store: CronStore
) -> None:
    """A compression that outran its lease stops (LeaseLost) while the run
    that took it over does the work: the slot is looked at again, as when
    the lease was busy from the start, not recorded as the job failing."""
    lost = [True]
    ran: list[str] = []

    async def daily() -> None:
        if lost[0]:
            raise LeaseLost("job lease 'memory:compress' was taken over")
        ran.append(format_ts(clock.now()))

    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)])
    await sched.start(loop=False)
    clock.set("2026-03-01T19:00:00Z")  # 03:00 in Shanghai
    [run] = await sched.run_due()
    job = await store.get(INTERNAL_DAILY)
    assert run.status == "busy" and job is not None and job.last_status == "busy"
    assert (job.next_run_at, job.due_at, job.attempts) == ("2026-03-01T19:01:00Z", "2026-03-01T19:00:00Z", 0)
    lost[0] = False
    clock.advance(60)
    assert [r.status for r in await sched.run_due()] == ["ok"]
    assert ran == ["2026-03-01T19:01:00Z"]


async def test_a_busy_slot_with_no_time_left_folds_into_the_next(clock: ManualClock, store: CronStore) -> None:
    async def busy() -> None:
        raise LeaseBusy("memory:compress", "daily@1", "2026-03-01T19:15:00Z")

    await store.ensure_internal("__internal:test:often", "*/1 * * * *")
    sched = CronScheduler(store, internal=[InternalJob("__internal:test:often", "*/1 * * * *", busy)],
                          busy_retry=timedelta(minutes=5))
    clock.set("2026-03-01T12:01:00Z")
    [run] = await sched.run_due()
    job = await store.get("__internal:test:often")
    # The next slot comes before the retry would: it is the retry.
    assert run.status == "busy" and job is not None and (job.next_run_at, job.due_at) == ("2026-03-01T12:02:00Z", None)


async def test_a_restart_after_a_crash_mid_run_runs_the_daily_job_once_the_dead_lease_expires(
    tmp_path: Path, clock: ManualClock, store: CronStore
) -> None:
    async with FakeOpenAI(responder=lambda body: Reply(reply([{"content": "Alice set up CI"}], "s"))) as fake:
        engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
        llm = MemoryLLM(base_url=fake.url, model="m", retries=0)
        sched = CronScheduler(store, internal=memory_jobs(Compressor(engine, llm, timezone="Asia/Shanghai")))
        try:
            await engine.add_event("alice", "2026-03-01", "Alice set up CI today")
            await store.ensure_internal(INTERNAL_DAILY, "0 3 * * *")
            await store.ensure_internal(INTERNAL_WEEKLY, "0 4 * * 1")
            clock.set("2026-03-01T19:00:00Z")  # 03:00 in Shanghai: the run that crashed took the lease
            await Leases(engine.db, clock).acquire(COMPRESS_LEASE, "daily_compress@4242:dead")
            clock.advance(120)  # restarted two minutes later, within the lease's 15
            assert [(r.job_id, r.status) for r in await sched.start(loop=False)] == [(INTERNAL_DAILY, "busy")]
            statuses = []
            while clock.now() < parse_ts("2026-03-01T19:20:00Z"):
                clock.advance(60)
                statuses += [r.status for r in await sched.run_due()]
            assert statuses.count("ok") == 1 and set(statuses) == {"busy", "ok"}, statuses
            assert await engine.events("alice", uncompressed_only=True) == []  # the day was not lost
            job = await store.get(INTERNAL_DAILY)
            assert job is not None and (job.next_run_at, job.due_at) == ("2026-03-02T19:00:00Z", None)
        finally:
            await sched.stop()
            await llm.aclose()
            await engine.close()


async def test_validation_and_removal(store: CronStore) -> None:
    with pytest.raises(CronError, match="invalid cron schedule"):
        await store.add(schedule="every day", message="x", channel="t", chat_id="1", user="u")
    with pytest.raises(CronError, match="invalid cron schedule"):
        await store.add(schedule="0 0 3 * * *", message="x", channel="t", chat_id="1", user="u")  # seconds field
    with pytest.raises(CronError, match="empty"):
        await store.add(schedule="0 9 * * *", message="  ", channel="t", chat_id="1", user="u")
    await store.ensure_internal(INTERNAL_DAILY, "0 3 * * *")
    with pytest.raises(CronError, match="internal"):
        await store.remove(INTERNAL_DAILY)
    with pytest.raises(CronError, match="no job"):
        await store.remove("job-nope")


async def test_background_loop_polls_and_stops(clock: ManualClock, store: CronStore) -> None:
    ran = asyncio.Event()

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        ran.set()

    await store.add(schedule="* * * * *", message="tick", channel="t", chat_id="1", user="u")
    sched = CronScheduler(store, run_agent_job=run_agent, poll_interval=0.01)
    await sched.start()
    try:
        clock.advance(60)
        await asyncio.wait_for(ran.wait(), 5)
    finally:
        await sched.stop()


async def test_agent_tools_act_for_the_asking_user_only(store: CronStore) -> None:
    tools = {t.name: t for t in cron_tools(store)}
    alice = ToolContext(user="alice", channel="telegram", chat_id="42", private=True)
    bob = ToolContext(user="bob", channel="feishu", chat_id="oc_9", private=True)
    out = await tools["cron_add"].handler({"schedule": "30 8 * * 1-5", "message": "summarise my day"}, alice)
    assert "Asia/Shanghai" in out
    [job] = await store.list(user="alice")
    assert (job.channel, job.chat_id, job.user, job.message) == ("telegram", "42", "alice", "summarise my day")
    assert await tools["cron_list"].handler({}, bob) == "no scheduled jobs"
    assert job.id in await tools["cron_list"].handler({}, alice)
    with pytest.raises(ToolError, match="no job"):
        await tools["cron_remove"].handler({"id": job.id}, bob)
    with pytest.raises(ToolError, match="invalid cron"):
        await tools["cron_add"].handler({"schedule": "tomorrow", "message": "x"}, alice)
    assert await tools["cron_remove"].handler({"id": job.id}, alice) == f"removed {job.id}"
    assert await store.list() == []
    assert tools["cron_add"].spec()["function"]["parameters"]["required"] == ["message"]  # and schedule or at


async def test_a_job_gets_private_memory_only_when_made_in_the_users_private_chat(store: CronStore) -> None:
    add = {t.name: t for t in cron_tools(store)}["cron_add"].handler
    here = ToolContext(user="alice", channel="telegram", chat_id="42", private=True)
    group = ToolContext(user="alice", channel="telegram", chat_id="-100", private=False)
    out = await add({"schedule": "0 9 * * *", "message": "my agenda", "chat_id": "42"}, here)
    assert "private memory" in out
    await add({"schedule": "0 9 * * *", "message": "team agenda"}, group)
    jobs = {j.message: (j.chat_id, j.private) for j in await store.list(user="alice")}
    assert jobs == {"my agenda": ("42", True), "team agenda": ("-100", False)}


async def test_a_user_cannot_point_a_job_at_another_chat(store: CronStore) -> None:
    # Otherwise anyone could make the bot post, on a timer, into any group
    # it is in or any private chat of someone who once started it.
    add = {t.name: t for t in cron_tools(store)}["cron_add"].handler
    here = ToolContext(user="alice", channel="telegram", chat_id="42", private=True)
    with pytest.raises(ToolError, match="only reply into the chat it is made in"):
        await add({"schedule": "0 9 * * *", "message": "post my agenda", "chat_id": "-100"}, here)
    with pytest.raises(ToolError, match="myclaw cron add"):
        await add({"schedule": "0 9 * * *", "message": "feishu agenda", "channel": "feishu"}, here)
    assert await store.list() == []
    spec = {t.name: t for t in cron_tools(store)}["cron_add"].spec()["function"]["parameters"]
    assert set(spec["properties"]) == {"schedule", "at", "message"}  # no target


async def test_users_jobs_are_limited_in_number_and_in_how_often_they_run(store: CronStore) -> None:
    add = {t.name: t for t in cron_tools(store, max_jobs=2, min_interval_minutes=10)}["cron_add"].handler
    alice = ToolContext(user="alice", channel="telegram", chat_id="42", private=True)
    bob = ToolContext(user="bob", channel="telegram", chat_id="43", private=True)
    with pytest.raises(ToolError, match=r"runs as often as every minute; jobs may run at most every 10 minutes"):
        await add({"schedule": "* * * * *", "message": "ping"}, alice)
    # A burst inside an otherwise daily schedule counts at its busiest.
    with pytest.raises(ToolError, match="every 5 minutes"):
        await add({"schedule": "0,5 9 * * *", "message": "ping"}, alice)
    await add({"schedule": "*/10 * * * *", "message": "check the build"}, alice)
    await add({"schedule": "0 9 * * *", "message": "my agenda"}, alice)
    with pytest.raises(ToolError, match="already have 2 scheduled jobs"):
        await add({"schedule": "0 18 * * *", "message": "my evening"}, alice)
    await add({"schedule": "0 18 * * *", "message": "his evening"}, bob)  # per user
    # The operator is not limited, and internal jobs do not count.
    await store.add(schedule="* * * * *", message="ops", channel="telegram", chat_id="42", user="alice")
    await store.ensure_internal("__internal:memory:daily_compress", "0 3 * * *")
    assert len(await store.list(user="alice")) == 3
    assert [j.message for j in await store.list(user="bob")] == ["his evening"]


def test_shortest_gap_is_measured_in_real_time_across_a_dst_change() -> None:
    from datetime import timedelta

    from gateway.cron import shortest_gap

    ny = ZoneInfo("America/New_York")
    assert shortest_gap("0 * * * *", parse_ts("2026-10-31T00:00:00Z"), ny) == timedelta(hours=1)
    assert shortest_gap("0 9 1 * *", parse_ts("2026-10-31T00:00:00Z"), ny) == timedelta(days=28)


async def old_cron_db(path: Path, version: int, insert: str) -> None:
    """A cron.db as a build of schema ``version`` left it, with ``insert``'s rows."""
    from gateway.cron import CRON_MIGRATIONS
    from memory.db import Database

    old = await Database.open(path, CRON_MIGRATIONS[:version])
    try:
        async with old.transaction() as conn:
            await conn.execute(insert)
    finally:
        await old.close()


async def test_jobs_made_before_the_private_flag_run_with_shared_memory(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    await old_cron_db(
        path, 1,
        "INSERT INTO cron_jobs (id, schedule, message, kind, channel, chat_id, user, created_at, next_run_at) "
        "VALUES ('job-1', '0 9 * * *', 'summarise', 'agent', 'telegram', '-100', 'alice', "
        "'2026-03-01T00:00:00Z', '2026-03-02T01:00:00Z')",
    )
    new = await CronStore.open(path, clock)
    try:
        [job] = await new.list(user="alice")
        assert job.private is False  # made who knows where: never the private memory
    finally:
        await new.close()


def test_a_set_time_on_a_dst_night_fires_once_and_a_skipped_one_at_the_jump() -> None:
    ny = ZoneInfo("America/New_York")

    def runs(expr: str, after: str, n: int) -> list[str]:
        out, t = [], parse_ts(after)
        for _ in range(n):
            t = next_run(expr, t, ny)
            out.append(f"{t.astimezone(ny):%m-%d %H:%M%z}")
        return out

    # 1 Nov 2026: 01:00-02:00 happens twice. A daily 01:30 reminder comes once, not at 01:30 EDT and EST.
    assert runs("30 1 * * *", "2026-10-31T12:00:00Z", 2) == ["11-01 01:30-0400", "11-02 01:30-0500"]
    # A job that runs every half hour keeps running through the repeated hour: it is about intervals.
    assert runs("*/30 * * * *", "2026-11-01T05:00:00Z", 4) == [
        "11-01 01:30-0400", "11-01 01:00-0500", "11-01 01:30-0500", "11-01 02:00-0500"
    ]
    # 8 Mar 2026: 02:00-03:00 does not happen; 02:30 fires when the clock jumps.
    assert runs("30 2 * * *", "2026-03-07T12:00:00Z", 2) == ["03-08 03:00-0400", "03-09 02:30-0400"]


def test_a_one_time_job_in_a_dst_gap_or_repeat_is_the_jump_or_the_first_occurrence() -> None:
    from gateway.cron import parse_at

    ny = ZoneInfo("America/New_York")
    assert format_ts(parse_at("2026-03-08 02:30", ny)) == "2026-03-08T07:00:00Z"  # 03:00 EDT, not 03:30
    assert format_ts(parse_at("2026-11-01 01:30", ny)) == "2026-11-01T05:30:00Z"  # the first 01:30 (EDT)
    assert format_ts(parse_at("2026-06-01 09:00", ny)) == "2026-06-01T13:00:00Z"
    lord_howe = ZoneInfo("Australia/Lord_Howe")  # a half-hour change: 02:00 -> 02:30
    assert f"{parse_at('2026-10-04 02:15', lord_howe).astimezone(lord_howe):%H:%M}" == "02:30"


async def test_a_daily_job_runs_once_on_the_fall_back_night(clock: ManualClock, store: CronStore) -> None:
    seen: list[str] = []

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        seen.append(format_ts(clock.now()))

    clock.set("2026-10-31T12:00:00Z")
    await store.add(schedule="30 1 * * *", message="pills", channel="telegram", chat_id="1", user="alice",
                    tz=ZoneInfo("America/New_York"))
    sched = CronScheduler(store, run_agent_job=run_agent)
    for at in ("2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"):
        clock.set(at)
        await sched.run_due()
    assert seen == ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]


async def test_a_chat_moved_to_a_new_id_takes_its_jobs(clock: ManualClock, store: CronStore) -> None:
    """A Telegram group upgraded to a supergroup: its jobs run in the new
    chat (reply and history there); another chat's stay; a second move finds none."""
    seen: list[str] = []

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        seen.append(job.chat_id)

    group = await store.add(schedule="0 9 * * *", message="standup", channel="telegram", chat_id="-500", user="alice")
    other = await store.add(schedule="0 9 * * *", message="standup", channel="feishu", chat_id="-500", user="bob")
    assert await store.move_chat("telegram", "-500", "-100500") == 1
    assert await store.move_chat("telegram", "-500", "-100500") == 0
    assert (await store.get(group.id)).chat_id == "-100500"  # type: ignore[union-attr]
    assert (await store.get(other.id)).chat_id == "-500"  # type: ignore[union-attr]
    clock.set("2026-03-02T01:00:00Z")  # 09:00 Shanghai
    await CronScheduler(store, run_agent_job=run_agent).run_due()
    assert sorted(seen) == ["-100500", "-500"]


async def test_a_busy_retry_logs_at_info_and_a_slot_folded_into_the_next_warns_once(
    clock: ManualClock, store: CronStore
) -> None:
    from structlog.testing import capture_logs

    async def busy() -> None:
        raise LeaseBusy("memory:compress", "weekly@1", "2026-03-01T19:15:00Z")

    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", busy)])
    await sched.start(loop=False)
    clock.set("2026-03-01T19:00:00Z")
    with capture_logs() as logs:
        for _ in range(3):  # the other job holds the lease for a while: one look a minute
            assert [r.status for r in await sched.run_due()] == ["busy"]
            clock.advance(60)
    finished = [e for e in logs if e["event"] != "cron job starting"]
    assert [(e["log_level"], e["event"], e["status"]) for e in finished] == [("info", "cron job finished", "busy")] * 3
    # The lease still held when the next slot comes: this slot is given up, once, with a warning.
    clock.set("2026-03-02T18:59:30Z")
    with capture_logs() as logs:
        assert [r.status for r in await sched.run_due()] == ["busy"]
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and warned[0]["job"] == INTERNAL_DAILY and warned[0]["status"] == "busy"
    assert "next slot" in warned[0]["event"] and warned[0]["next_run_at"] == "2026-03-02T19:00:00Z"
    assert [e for e in logs if e["event"] == "cron job finished" and e["log_level"] == "info"] == []


async def test_a_slot_whose_reply_the_outbox_holds_is_recorded_and_not_run_again(
    tmp_path: Path, clock: ManualClock, store: CronStore
) -> None:
    """A kill after the reply's outbox row and before cron.db's record:
    the slot's mark (written with the row, gateway/outbox.py) has the next
    run record it without asking the model again; the mark then goes, and
    the next slot runs as ever. gateway.db not answering: run (at least once)."""
    from gateway.bus import OutboundMessage
    from gateway.outbox import Outbox, job_slot
    from gateway.sessions import SessionStore

    ran: list[str] = []

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        ran.append(job.slot)

    job = await store.add(schedule="0 9 * * *", message="stand-up notes", channel="telegram", chat_id="2", user="bob")
    sessions = await SessionStore.open(tmp_path / "data" / "gateway.db", clock)
    outbox = Outbox(sessions.db)
    try:
        reply = OutboundMessage("telegram", "2", "re: stand-up notes", job_slot=job_slot(job.id, job.slot))
        await outbox.add(reply, owner="bob", created_at=clock.now(), next_attempt_at=clock.now(), sending=True)
        sched = CronScheduler(store, run_agent_job=run_agent, replies=outbox)
        clock.set("2026-03-02T01:00:00Z")  # 09:00 Shanghai: the slot the kill left unrecorded
        [run] = await sched.run_due()
        assert run.status == "ok" and ran == []
        done = await store.get(job.id)
        assert done is not None and (done.next_run_at, done.last_status) == ("2026-03-03T01:00:00Z", "ok")
        assert await sessions.db.fetchall("SELECT * FROM job_replies") == []

        clock.set("2026-03-03T01:00:00Z")  # the next slot: no mark, it runs
        await sched.run_due()
        assert ran == ["2026-03-03T01:00:00Z"]
    finally:
        await sessions.close()
    clock.set("2026-03-04T01:00:00Z")  # gateway.db closed: the mark cannot be read, so the job runs
    await sched.run_due()
    assert ran == ["2026-03-03T01:00:00Z", "2026-03-04T01:00:00Z"]


async def test_a_slot_whose_fallback_the_outbox_holds_is_recorded_as_a_fallback(
    tmp_path: Path, clock: ManualClock, store: CronStore
) -> None:
    """The reply a kill left unrecorded was the job's fallback (the model
    could not be reached): the slot is recorded as the run would have
    recorded it, "fallback" with its words, not "ok"."""
    from gateway.bus import OutboundMessage
    from gateway.cron import FALLBACK_SENT
    from gateway.outbox import Outbox, job_slot
    from gateway.sessions import SessionStore

    async def run_agent(job: CronJob, attempt: JobAttempt) -> None:
        raise AssertionError("the slot was answered: not run again")

    job = await store.add(schedule="0 9 * * *", message="stand-up notes", channel="telegram", chat_id="2", user="bob")
    async with await SessionStore.open(tmp_path / "data" / "gateway.db", clock) as sessions:
        outbox = Outbox(sessions.db)
        reply = OutboundMessage("telegram", "2", "⏰ stand-up notes", job_slot=job_slot(job.id, job.slot),
                                job_fallback=True)
        await outbox.add(reply, owner="bob", created_at=clock.now(), next_attempt_at=clock.now(), sending=True)
        sched = CronScheduler(store, run_agent_job=run_agent, replies=outbox)
        clock.set("2026-03-02T01:00:00Z")
        [run] = await sched.run_due()
        assert (run.status, run.error) == ("fallback", FALLBACK_SENT)
        done = await store.get(job.id)
        assert done is not None and (done.last_status, done.last_error) == ("fallback", FALLBACK_SENT)
        assert await sessions.db.fetchall("SELECT * FROM job_replies") == []


async def test_a_run_the_poll_started_whose_record_fails_is_logged_by_type_not_left_unread(
    clock: ManualClock, store: CronStore
) -> None:
    """The poll starts due jobs and does not wait for them: a run whose
    record in cron.db failed ended its task with an exception nobody read,
    which asyncio logs with its repr, the error's text in it (a CHECK or
    a trigger's message may quote a value). The scheduler logs it by type."""
    async def daily() -> None:
        # cron.db refuses the run's record, with words in its refusal
        await store.db.write("CREATE TRIGGER refuse BEFORE UPDATE ON cron_jobs BEGIN SELECT RAISE(ABORT, 'QUOKKA'); END")

    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)])
    await sched.start(loop=False)
    clock.set("2026-03-01T19:00:00Z")  # 03:00 in Shanghai
    with debug_json_log() as stream:
        assert await sched.run_due(wait=False) == []
        await asyncio.wait_for(_until(lambda: not sched._running), 10)
        gc.collect()
        await asyncio.sleep(0)
    assert "QUOKKA" not in stream.getvalue()
    [line] = lines(stream, "cron job failed outside its run")
    assert (line["job"], line["error"], line["sqlite_error"]) == (INTERNAL_DAILY, "sqlite3.IntegrityError",
                                                                   "SQLITE_CONSTRAINT_TRIGGER")
    await sched.stop()


async def _until(done: Callable[[], bool]) -> None:
    while not done():
        await asyncio.sleep(0.01)


async def test_a_start_on_a_cron_db_that_cannot_be_written_goes_on_and_the_poll_catches_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A full (or read-only) cron.db made the catch-up raise, and with it
    the gateway's start: the gateway did not come up. Now the start goes
    on, one error says why, and the poll registers and runs them once
    there is room."""
    calls: list[str] = []

    async def daily() -> None:
        calls.append(format_ts(clock.now()))

    path = tmp_path / "cron.db"
    store = await CronStore.open(path, clock)
    try:
        await CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily)]).start(loop=False)
    finally:
        await store.close()
    clock.advance(timedelta(days=1))  # its slot passed while down
    store = await CronStore.open(path, clock)
    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", daily),
                                           InternalJob(INTERNAL_WEEKLY, "0 4 * * 1", daily)], poll_interval=0.02)
    try:
        with debug_json_log() as log:
            await store.db.write("PRAGMA query_only = 1")
            assert await asyncio.wait_for(sched.start(), 10) == []  # raised: the gateway did not come up
            await asyncio.sleep(0.2)  # polled, still full: no second error
            await store.db.write("PRAGMA query_only = 0")
            async with asyncio.timeout(10):
                # (the run's record is written after the job's call: wait for it too)
                while len(calls) < 1 or await store.get(INTERNAL_WEEKLY) is None or (
                        await store.get(INTERNAL_DAILY)).last_status is None:  # type: ignore[union-attr]
                    await asyncio.sleep(0.02)
        [error] = [e for e in lines(log, "cron: jobs missed while down not run at start (cron.db cannot be written); "
                                         "the poll tries again") if e["level"] == "error"]
        assert error["sqlite_error"] == "SQLITE_READONLY"
        assert len(calls) == 1 and (await store.get(INTERNAL_DAILY)).last_status == "ok"  # type: ignore[union-attr]
    finally:
        await sched.stop()
        await store.close()
