"""One-time jobs ("remind me tomorrow at 9"): ``at`` in the user's zone,
run once at their time (or at start when missed), then gone; delivered at
least once (gateway/cron.py's docstring)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gateway.cron import (
    CRON_MIGRATIONS, CronError, CronJob, CronScheduler, CronStore, JobAttempt, once_local, parse_at,
)
from gateway.cron_tools import cron_tools
from gateway.tools import ToolContext, ToolError
from memory import ManualClock
from memory.clock import format_ts
from tests.gateway.test_cron import old_cron_db

SHANGHAI = ZoneInfo("Asia/Shanghai")
# 2026-03-01 is a Sunday; 12:00 UTC is 20:00 in Shanghai.
START = "2026-03-01T12:00:00Z"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[CronStore]:
    s = await CronStore.open(tmp_path / "cron.db", clock, "UTC")  # the gateway's zone: UTC
    try:
        yield s
    finally:
        await s.close()


def ctx(user: str = "alice", tz: ZoneInfo | None = SHANGHAI) -> ToolContext:
    return ToolContext(user=user, channel="telegram", chat_id="42", private=True, tz=tz)


class Agent:
    """``run_agent_job``: what was sent, in order."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def __call__(self, job: CronJob, attempt: JobAttempt) -> None:
        self.sent.append(job.message)


async def test_at_is_read_in_the_users_zone_and_an_explicit_offset_wins(store: CronStore) -> None:
    add = {t.name: t for t in cron_tools(store)}["cron_add"].handler
    out = await add({"at": "2026-03-02 09:00", "message": "call mom"}, ctx())
    assert "once at 2026-03-02 09:00 (Asia/Shanghai)" in out and "call mom" in out
    await add({"at": "2026-03-02T09:00", "message": "gateway nine"}, ctx("bob", tz=None))
    await add({"at": "2026-03-02T09:00+02:00", "message": "Berlin nine"}, ctx("carol"))
    await add({"at": "2026-03-02T09:00:00Z", "message": "UTC nine"}, ctx("dave"))
    jobs = {j.message: (j.next_run_at, j.at, j.timezone, j.schedule) for j in await store.list()}
    assert jobs == {
        "call mom": ("2026-03-02T01:00:00Z", "2026-03-02T01:00:00Z", "Asia/Shanghai", ""),
        "gateway nine": ("2026-03-02T09:00:00Z", "2026-03-02T09:00:00Z", "UTC", ""),
        "Berlin nine": ("2026-03-02T07:00:00Z", "2026-03-02T07:00:00Z", "Asia/Shanghai", ""),
        "UTC nine": ("2026-03-02T09:00:00Z", "2026-03-02T09:00:00Z", "Asia/Shanghai", ""),
    }
    # Listed in the zone it was asked in.
    listed = await {t.name: t for t in cron_tools(store)}["cron_list"].handler({}, ctx("carol"))
    assert "once at 2026-03-02 15:00 (Asia/Shanghai) -> 'Berlin nine'" in listed


async def test_a_time_past_too_far_both_neither_or_unreadable_is_refused_with_why(store: CronStore) -> None:
    add = {t.name: t for t in cron_tools(store)}["cron_add"].handler
    with pytest.raises(ToolError, match=r"^2026-03-01 19:00 \(Asia/Shanghai\) is in the past: it is now "
                                        r"2026-03-01 20:00 \(Asia/Shanghai\)$"):
        await add({"at": "2026-03-01 19:00", "message": "x"}, ctx())
    with pytest.raises(ToolError, match=r"2027-03-03 09:00 \(Asia/Shanghai\) is more than a year ahead"):
        await add({"at": "2027-03-03 09:00", "message": "x"}, ctx())
    with pytest.raises(ToolError, match="exactly one of 'schedule' .* and 'at' .*, not both"):
        await add({"at": "2026-03-02 09:00", "schedule": "0 9 * * *", "message": "x"}, ctx())
    with pytest.raises(ToolError, match="exactly one of 'schedule' .* and 'at'"):
        await add({"message": "x"}, ctx())
    with pytest.raises(ToolError, match="'message' is required"):
        await add({"at": "2026-03-02 09:00"}, ctx())
    for unreadable in ("tomorrow at 9", "2026-03-02", "2026-03-02 25:00"):
        with pytest.raises(ToolError, match="a date and a time of day as 'YYYY-MM-DD HH:MM'"):
            await add({"at": unreadable, "message": "x"}, ctx())
    assert await store.list() == []
    # The store says the same to the operator's CLI.
    with pytest.raises(CronError, match="neither"):
        await store.add(message="x", channel="t", chat_id="1", user="u")
    with pytest.raises(CronError, match="not both"):
        await store.add(message="x", channel="t", chat_id="1", user="u", schedule="0 9 * * *",
                        at=parse_at("2026-03-02 09:00", SHANGHAI))


async def test_one_time_jobs_count_in_the_limit_but_not_the_minimum_interval(store: CronStore) -> None:
    add = {t.name: t for t in cron_tools(store, max_jobs=2, min_interval_minutes=10)}["cron_add"].handler
    # One minute from now, and a minute apart: the interval rule is for schedules.
    await add({"at": "2026-03-01 20:01", "message": "tea is ready"}, ctx())
    await add({"at": "2026-03-01 20:02", "message": "pour the tea"}, ctx())
    with pytest.raises(ToolError, match="already have 2 scheduled jobs"):
        await add({"at": "2026-03-01 21:00", "message": "drink it"}, ctx())
    with pytest.raises(ToolError, match="already have 2 scheduled jobs"):
        await add({"schedule": "0 9 * * *", "message": "daily"}, ctx())


async def test_a_one_time_job_runs_once_at_its_time_and_is_gone(clock: ManualClock, store: CronStore) -> None:
    job = await store.add(at=parse_at("2026-03-02 09:00", SHANGHAI), message="call mom", channel="telegram",
                          chat_id="42", user="alice", tz=SHANGHAI)
    assert job.once and once_local(job) == "2026-03-02 09:00 (Asia/Shanghai)"
    agent = Agent()
    sched = CronScheduler(store, run_agent_job=agent)
    clock.set("2026-03-02T00:59:59Z")
    assert await sched.run_due() == [] and agent.sent == []
    clock.advance(1)
    [run] = await sched.run_due()
    assert (run.job_id, run.status, agent.sent) == (job.id, "ok", ["call mom"])
    assert await store.list() == [] and await store.get(job.id) is None
    for _ in range(3):
        clock.advance(timedelta(days=1))
        assert await sched.run_due() == []
    assert agent.sent == ["call mom"]


async def test_a_failed_one_time_job_is_not_retried(clock: ManualClock, store: CronStore) -> None:
    async def down(job: CronJob, attempt: JobAttempt) -> None:
        raise CronError("channel 'telegram' is not running in this gateway")

    await store.add(at=parse_at("2026-03-01 21:00", SHANGHAI), message="x", channel="telegram", chat_id="42",
                    user="alice", tz=SHANGHAI)
    sched = CronScheduler(store, run_agent_job=down)
    clock.set("2026-03-01T13:00:00Z")
    [run] = await sched.run_due()
    assert run.status == "error" and "not running" in (run.error or "")
    assert await store.list() == [] and await sched.run_due() == []


async def test_a_one_time_job_missed_while_down_runs_once_at_start(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    store = await CronStore.open(path, clock)
    try:
        await store.add(at=parse_at("2026-03-02 09:00", SHANGHAI), message="call mom", channel="telegram",
                        chat_id="42", user="alice", tz=SHANGHAI)
        await store.add(at=parse_at("2026-03-09 09:00", SHANGHAI), message="later", channel="telegram",
                        chat_id="42", user="alice", tz=SHANGHAI)
    finally:
        await store.close()
    clock.advance(timedelta(days=3))  # down from Sunday to Wednesday
    store = await CronStore.open(path, clock)
    agent = Agent()
    sched = CronScheduler(store, run_agent_job=agent)
    try:
        missed = await sched.start(loop=False)
        assert [r.status for r in missed] == ["ok"] and agent.sent == ["call mom"]
        assert await sched.run_due() == []
        assert [j.message for j in await store.list()] == ["later"]
    finally:
        await sched.stop()
        await store.close()


async def test_stopped_between_the_reply_and_the_record_it_is_sent_again_at_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The choice: at least once. The row is deleted after the run, so a
    gateway stopped (or killed) after the reply went out but before that
    write sends the reminder again at the next start, once; deleting it
    first would lose it to any stop during the LLM call."""
    path = tmp_path / "cron.db"
    store = await CronStore.open(path, clock)
    sent: list[str] = []
    hang = asyncio.Event()

    async def reply_then_stall(job: CronJob, attempt: JobAttempt) -> None:
        sent.append(job.message)  # the reply is out ...
        await hang.wait()  # ... and the process stops before the run is recorded

    sched = CronScheduler(store, run_agent_job=reply_then_stall)
    try:
        job = await store.add(at=parse_at("2026-03-01 21:00", SHANGHAI), message="call mom", channel="telegram",
                              chat_id="42", user="alice", tz=SHANGHAI)
        clock.set("2026-03-01T13:00:00Z")
        assert await sched.run_due(wait=False) == []
        for _ in range(100):
            if sent:
                break
            await asyncio.sleep(0.01)
        assert sent == ["call mom"]
        # While it runs, a poll does not start it again.
        await sched.run_due(wait=False)
        await asyncio.sleep(0.01)
        assert sent == ["call mom"]
        await sched.stop()
        assert await store.get(job.id) is not None  # not recorded: still due
    finally:
        await store.close()

    store = await CronStore.open(path, clock)
    agent = Agent()
    sched = CronScheduler(store, run_agent_job=agent)
    try:
        assert [r.status for r in await sched.start(loop=False)] == ["ok"]
        assert agent.sent == ["call mom"] and await store.list() == []  # sent a second time, then done
        assert await sched.run_due() == []
    finally:
        await sched.stop()
        await store.close()


async def test_a_cron_db_from_before_one_time_jobs_is_upgraded_with_its_jobs(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    await old_cron_db(
        path, 3,
        "INSERT INTO cron_jobs (id, schedule, message, kind, channel, chat_id, user, private, created_at, "
        "next_run_at, timezone) VALUES ('job-1', '0 9 * * *', 'summarise', 'agent', 'telegram', '42', 'alice', "
        "1, '2026-02-01T00:00:00Z', '2026-03-02T01:00:00Z', 'Asia/Shanghai')",
    )
    store = await CronStore.open(path, clock)
    try:
        [job] = await store.list(user="alice")
        assert (job.schedule, job.at, job.once, job.private, job.timezone) == (
            "0 9 * * *", None, False, True, "Asia/Shanghai"
        )
        once = await store.add(at=parse_at("2026-03-02 08:00", SHANGHAI), message="before the summary",
                               channel="telegram", chat_id="42", user="alice", tz=SHANGHAI)
        agent = Agent()
        sched = CronScheduler(store, run_agent_job=agent)
        clock.set("2026-03-02T01:00:00Z")
        assert sorted(r.job_id for r in await sched.run_due()) == sorted(["job-1", once.id])
        clock.set("2026-03-03T01:00:00Z")
        await sched.run_due()
        assert agent.sent == ["before the summary", "summarise", "summarise"]
        [left] = await store.list()
        assert left.id == "job-1" and left.next_run_at == format_ts(clock.now() + timedelta(days=1))
        row = await store.db.fetchone("PRAGMA user_version")
        assert row is not None and row[0] == len(CRON_MIGRATIONS)
    finally:
        await store.close()


async def test_through_the_app_the_model_asks_for_a_reminder_in_two_hours_and_it_comes_once(tmp_path: Path) -> None:
    """The user is in Shanghai (/timezone), the gateway in UTC: the prompt
    tells the model her date and time, the model calls ``cron_add`` with
    ``at``, and the reminder reaches her chat once, at her 06:00."""
    from tests.gateway.test_app import EchoChannel
    from tests.gateway.test_remembering_e2e import LiteralModel, running, say

    clock = ManualClock("2026-11-22T20:00:00Z")  # Monday 04:00 in Shanghai
    async with running(tmp_path, LiteralModel(), clock) as (app, fake):
        assert app._cron_store is not None and app.cron is not None
        await say(app, clock, "/timezone Asia/Shanghai", "alice")
        fake.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
            "at": "2026-11-23 06:00", "message": "Remind me to take the laundry out"}}], kind="chat")
        fake.queue_reply("I'll remind you at 06:00.", kind="chat")
        assert await say(app, clock, "in 2 hours, tell me to take the laundry out", "alice") == (
            "I'll remind you at 06:00."
        )
        asked = fake.chat_requests()[-2]
        assert "Current date: 2026-11-23 Monday (Asia/Shanghai)" in asked["messages"][0]["content"]
        assert "at" in {t["function"]["name"]: t for t in asked["tools"]}["cron_add"]["function"]["parameters"][
            "properties"]
        tool_result = next(m["content"] for m in fake.last_chat()["messages"] if m["role"] == "tool")
        assert "once at 2026-11-23 06:00 (Asia/Shanghai)" in tool_result
        [job] = await app._cron_store.list("echo:alice")
        assert (job.at, job.schedule, job.chat_id) == ("2026-11-22T22:00:00Z", "", "c-alice")

        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and app.loop is not None
        clock.advance(timedelta(hours=1, minutes=59))
        assert await app.cron.run_due() == []  # type: ignore[attr-defined]
        before = len(echo.sent)
        clock.advance(60)
        fake.queue_reply("Time to take the laundry out!", kind="chat")
        [run] = await app.cron.run_due()  # type: ignore[attr-defined]
        assert run.status == "ok" and await app.loop.drain(5)
        assert [m.text for m in echo.sent[before:]] == ["Time to take the laundry out!"]
        assert echo.sent[-1].chat_id == "c-alice"
        assert await app._cron_store.list("echo:alice") == []

        clock.advance(timedelta(days=1))
        later = await app.cron.run_due()  # type: ignore[attr-defined]
        assert [r.job_id for r in later if not r.job_id.startswith("__internal:")] == []  # the memory jobs may run
        assert await app.loop.drain(5) and len(echo.sent) == before + 1
