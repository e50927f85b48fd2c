"""A scheduled job whose model call fails is tried again (1, 3, 10 min),
never past its next slot; the last attempt sends the job's own words if
the model fails once more; a late run says it is late (gateway/cron.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from structlog.testing import capture_logs

from gateway.app import App
from gateway.cron import (
    CRON_MIGRATIONS,
    INTERNAL_DAILY,
    CronJob,
    CronScheduler,
    CronStore,
    InternalJob,
    JobAttempt,
    fallback_text,
    job_prompt,
    memory_jobs,
    parse_at,
)
from memory import ManualClock, MemoryEngine
from memory.clock import parse_ts
from memory.compression import Compressor
from memory.llm import MemoryLLM
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.gateway.test_app import ECHO, EchoChannel, _config
from tests.gateway.test_cron import old_cron_db
from tests.memory._writepath import reply
from tests.memory.test_compression_full import fill_up, words

# Facts more than a full memory.db holds (a fact is cut at 300 characters).
FACTS = [{"content": f"alice fact {i}: {words(i, 30)}", "category": "decision"} for i in range(40)]

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[CronStore]:
    s = await CronStore.open(tmp_path / "cron.db", clock, "UTC")
    try:
        yield s
    finally:
        await s.close()


class Flaky:
    """``run_agent_job`` whose model fails the first ``failures`` attempts;
    on an attempt with a fallback it sends that instead, as the loop does."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[JobAttempt] = []
        self.sent: list[str] = []

    async def __call__(self, job: CronJob, attempt: JobAttempt) -> bool:
        self.attempts.append(attempt)
        if len(self.attempts) > self.failures:
            self.sent.append(f"model: {attempt.prompt}")
            return True
        if attempt.fallback is not None:
            self.sent.append(attempt.fallback(None))  # the chat tells nothing
            return False
        raise RuntimeError("LLMUnavailable")


async def _step(sched: CronScheduler, clock: ManualClock, minutes: float) -> list[str]:
    clock.advance(timedelta(minutes=minutes))
    return [r.status for r in await sched.run_due()]


async def test_a_failed_reminder_is_tried_again_then_sent_as_written(clock: ManualClock, store: CronStore) -> None:
    job = await store.add(at=parse_at("2026-03-02 09:00", SHANGHAI), message="call mom", channel="telegram",
                          chat_id="42", user="alice", tz=SHANGHAI)
    agent = Flaky(failures=99)
    sched = CronScheduler(store, run_agent_job=agent)
    clock.set("2026-03-02T01:00:00Z")
    assert [r.status for r in await sched.run_due()] == ["retry"]
    assert agent.sent == []  # nothing reached the chat
    row = await store.get(job.id)
    assert row is not None and (row.attempts, row.due_at, row.next_run_at) == (1, "2026-03-02T01:00:00Z",
                                                                                "2026-03-02T01:01:00Z")
    assert await _step(sched, clock, 0.5) == []  # not before its retry time
    assert await _step(sched, clock, 0.5) == ["retry"]  # 09:01
    assert await _step(sched, clock, 3) == ["retry"]  # 09:04
    assert await _step(sched, clock, 9) == []
    assert await _step(sched, clock, 1) == ["fallback"]  # 09:14, the last attempt
    assert [a.fallback is not None for a in agent.attempts] == [False, False, False, True]
    assert [a.number for a in agent.attempts] == [1, 2, 3, 4]
    assert agent.sent == [
        "⏰ call mom\n(Scheduled for 09:00. The assistant could not be reached, so this is the task as it was set.)"
    ]
    assert await store.get(job.id) is None  # done
    # The last attempt's prompt says how late it is; the first ones do not.
    assert [a.prompt for a in agent.attempts[:3]] == ["call mom"] * 3
    assert agent.attempts[3].prompt == (
        "call mom\n\n(This scheduled task was due at 09:00 (Asia/Shanghai) and runs 14 min late; say so briefly.)"
    )


async def test_a_retry_that_succeeds_ends_the_slot(clock: ManualClock, store: CronStore) -> None:
    job = await store.add(schedule="0 9 * * *", message="plan my day", channel="telegram", chat_id="42",
                          user="alice", tz=SHANGHAI)
    agent = Flaky(failures=1)
    sched = CronScheduler(store, run_agent_job=agent)
    clock.set("2026-03-02T01:00:00Z")
    assert await _step(sched, clock, 0) == ["retry"]
    assert await _step(sched, clock, 1) == ["ok"]
    assert agent.sent == ["model: plan my day"]
    row = await store.get(job.id)
    assert row is not None and (row.last_status, row.attempts, row.due_at) == ("ok", 0, None)
    assert row.next_run_at == "2026-03-03T01:00:00Z"  # tomorrow's 09:00, as if on time
    # The next slot starts a fresh count of attempts.
    agent.failures = 99
    clock.set("2026-03-03T01:00:00Z")
    assert await _step(sched, clock, 0) == ["retry"]
    assert (await store.get(job.id)).attempts == 1  # type: ignore[union-attr]


async def test_retries_never_run_past_the_next_slot(clock: ManualClock, store: CronStore) -> None:
    """Every 10 minutes: the retry at +10 would be the next slot itself, so
    the attempt at +4 is the last (with the fallback)."""
    job = await store.add(schedule="*/10 * * * *", message="check the oven", channel="telegram", chat_id="42",
                          user="alice")
    agent = Flaky(failures=99)
    sched = CronScheduler(store, run_agent_job=agent)
    clock.set("2026-03-01T12:10:00Z")
    assert await _step(sched, clock, 0) == ["retry"]
    assert await _step(sched, clock, 1) == ["retry"]
    assert await _step(sched, clock, 3) == ["fallback"]  # 12:14
    assert [a.fallback is not None for a in agent.attempts] == [False, False, True]
    row = await store.get(job.id)
    assert row is not None and (row.next_run_at, row.attempts, row.due_at) == ("2026-03-01T12:20:00Z", 0, None)
    assert row.last_status == "fallback" and "could not be reached" in (row.last_error or "")


async def test_a_reminder_missed_while_down_says_it_is_late(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    store = await CronStore.open(path, clock)
    await store.add(at=parse_at("2026-03-02 09:00", SHANGHAI), message="吃药", channel="telegram", chat_id="42",
                    user="alice", tz=SHANGHAI)
    await store.close()
    clock.set("2026-03-02T03:30:00Z")  # 11:30 in Shanghai: down all morning
    store = await CronStore.open(path, clock)
    agent = Flaky(failures=0)
    sched = CronScheduler(store, run_agent_job=agent)
    try:
        assert [r.status for r in await sched.start(loop=False)] == ["ok"]
        assert agent.sent == ["model: 吃药\n\n(This scheduled task was due at 09:00 (Asia/Shanghai) and runs "
                              "2 h 30 min late; say so briefly.)"]
    finally:
        await sched.stop()
        await store.close()


def test_the_fallback_is_in_the_jobs_language_and_dates_another_day() -> None:
    job = CronJob(id="j", schedule="", message="提醒我给妈妈打电话", kind="agent", timezone="Asia/Shanghai")
    slot = parse_ts("2026-03-02T01:00:00Z")
    assert fallback_text(job, slot, parse_ts("2026-03-02T01:14:00Z"), SHANGHAI) == (
        "⏰ 提醒我给妈妈打电话\n（定于 09:00。助手暂时无法回应，以上是设定时的原文。）"
    )
    # Sent the next day (the gateway was down): the date is named.
    late = parse_ts("2026-03-03T02:00:00Z")
    assert "（定于 2026-03-02 09:00。" in fallback_text(job, slot, late, SHANGHAI)
    assert "runs 25 h late" in job_prompt(job, slot, late, SHANGHAI)
    assert "runs 3 days late" in job_prompt(job, slot, slot + timedelta(days=3, hours=5), SHANGHAI)
    assert job_prompt(job, slot, slot + timedelta(minutes=4), SHANGHAI) == job.message  # on time enough
    # Japanese writes kanji too, but is not Chinese.
    japanese = CronJob(id="k", schedule="", message="母に電話するのを思い出させて", kind="agent", timezone="Asia/Tokyo")
    assert "(Scheduled for 09:00." in fallback_text(japanese, slot, parse_ts("2026-03-02T01:14:00Z"), SHANGHAI)


def test_a_fallback_without_words_speaks_as_the_chat_does() -> None:
    # The bot's own note follows the one language rule: the job's words
    # first; a job of none (a number, an emoji, a link) by the chat's
    # (the loop's answer: its recent words, then the app's language).
    slot, now = parse_ts("2026-03-02T01:00:00Z"), parse_ts("2026-03-02T01:14:00Z")
    wordless = CronJob(id="w", schedule="", message="📞 13800138000", kind="agent", timezone="Asia/Shanghai")
    assert fallback_text(wordless, slot, now, SHANGHAI, chat_zh=True) == (
        "⏰ 📞 13800138000\n（定于 09:00。助手暂时无法回应，以上是设定时的原文。）"
    )
    assert "(Scheduled for 09:00." in fallback_text(wordless, slot, now, SHANGHAI, chat_zh=False)
    assert "(Scheduled for 09:00." in fallback_text(wordless, slot, now, SHANGHAI)  # nothing tells: English
    chinese = CronJob(id="c", schedule="", message="提醒我喝水", kind="agent", timezone="Asia/Shanghai")
    assert "（定于 09:00。" in fallback_text(chinese, slot, now, SHANGHAI, chat_zh=False)  # its words first


async def test_an_old_cron_db_gains_the_retry_columns(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    await old_cron_db(
        path, len(CRON_MIGRATIONS) - 1,
        "INSERT INTO cron_jobs (id, schedule, message, kind, channel, chat_id, user, created_at, next_run_at, at, "
        "timezone) VALUES ('job-1', '', 'call mom', 'agent', 'telegram', '42', 'alice', '2026-03-01T00:00:00Z', "
        "'2026-03-02T01:00:00Z', '2026-03-02T01:00:00Z', 'Asia/Shanghai')",
    )
    store = await CronStore.open(path, clock)
    try:
        [job] = [j for j in await store.list() if not j.internal]
        assert (job.attempts, job.due_at, job.slot) == (0, None, job.next_run_at)
    finally:
        await store.close()


# -- through the App: the loop, the fake LLM and a channel -----------------------


async def _app_with_a_due_reminder(tmp_path: Path, clock: ManualClock, fake: FakeOpenAI) -> App:
    cfg, paths = _config(tmp_path, fake)
    paths.data_dir.mkdir(parents=True)
    store = await CronStore.open(paths.data_dir / "cron.db", clock)
    try:
        await store.add(at=parse_at("2026-03-01 13:00", ZoneInfo("UTC")), message="Remind me to stretch",
                        channel="echo", chat_id="c1", user="echo:100", job_id="stretch")
    finally:
        await store.close()
    clock.set("2026-03-01T13:00:00Z")
    return App(cfg, paths, clock=clock, channel_specs=[ECHO])


async def _tier0(app: App) -> list[tuple[str, str]]:
    assert app.sessions is not None
    await app.sessions.flush()
    rows = await app.sessions.db.fetchall("SELECT role, content FROM session_messages ORDER BY id")
    return [(r[0], r[1]) for r in rows]


async def test_the_model_down_at_the_reminders_time_costs_a_minute_not_the_reminder(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    fake_llm.queue_error(500)
    fake_llm.queue_reply("Time to stretch!")
    app = await _app_with_a_due_reminder(tmp_path, clock, fake_llm)
    try:
        await app.open()
        await app.start()  # runs the due job: the model fails
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and echo.sent == []  # no apology for a question nobody asked
        assert await _tier0(app) == []  # and no trace of the failed attempt
        clock.advance(60)
        assert app.cron is not None
        await app.cron.run_due()  # type: ignore[attr-defined]
        await asyncio.wait_for(echo.got.wait(), 5)
        assert [m.text for m in echo.sent] == ["Time to stretch!"]
        assert [said(r) for r in fake_llm.requests] == ["Remind me to stretch"] * 2
        assert await _tier0(app) == [("user", "Remind me to stretch"), ("assistant", "Time to stretch!")]
    finally:
        await app.close()


async def test_the_model_down_for_good_sends_the_reminder_as_written(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    fake_llm.queue_error(500, times=4)
    app = await _app_with_a_due_reminder(tmp_path, clock, fake_llm)
    try:
        await app.open()
        await app.start()
        assert app.cron is not None and app.loop is not None
        for minutes in (1, 3, 10):
            clock.advance(minutes * 60)
            await app.cron.run_due()  # type: ignore[attr-defined]
        echo = app.channels["echo"]
        await asyncio.wait_for(echo.got.wait(), 5)
        assert isinstance(echo, EchoChannel) and [m.text for m in echo.sent] == [
            "⏰ Remind me to stretch\n(Scheduled for 13:00. The assistant could not be reached, so this is the "
            "task as it was set.)"
        ]
        assert len(fake_llm.requests) == 4
        assert said(fake_llm.chat_requests()[3]).endswith("runs 14 min late; say so briefly.)")
        tier0 = await _tier0(app)
        assert [role for role, _ in tier0] == ["user", "assistant"] and tier0[1][1] == echo.sent[0].text
        assert app._cron_store is not None and await app._cron_store.get("stretch") is None
        assert app.loop.stats.failed == 4 and app.loop.stats.errors == 0
    finally:
        await app.close()


async def test_compression_on_a_full_memory_db_is_retried_later_not_recorded_done(
    tmp_path: Path, clock: ManualClock, store: CronStore
) -> None:
    async with FakeOpenAI(responder=lambda body: Reply(reply(FACTS, "s"))) as fake:
        engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
        llm = MemoryLLM(base_url=fake.url, model="m", retries=0)
        try:
            await engine.add_event("alice", "2026-03-01", "Alice chose Postgres for atlas")
            sched = CronScheduler(store, internal=memory_jobs(Compressor(engine, llm)))
            await sched.start(loop=False)
            await fill_up(engine)
            clock.set("2026-03-02T03:00:00Z")
            with capture_logs() as logs:
                runs = await sched.run_due()
            assert [(r.job_id, r.status) for r in runs] == [(INTERNAL_DAILY, "retry")]
            assert [e["event"] for e in logs if e["log_level"] != "info"] == ["cron job finished"]  # once
            assert logs[-1]["error"] == "OperationalError (SQLITE_FULL)" and logs[-1]["at"]
            job = await store.get(INTERNAL_DAILY)
            assert job is not None and job.last_status == "retry" and job.last_error == "OperationalError (SQLITE_FULL)"
            assert (job.next_run_at, job.due_at) == ("2026-03-02T03:10:00Z", "2026-03-02T03:00:00Z")
            assert len(await engine.events("alice", uncompressed_only=True)) == 1
            assert await sched.run_due() == []  # not before the retry's time
            await engine.db.write("PRAGMA main.max_page_count = 1073741823")  # space is back
            clock.set("2026-03-02T03:10:00Z")
            assert [r.status for r in await sched.run_due()] == ["ok"]
            assert await engine.events("alice", uncompressed_only=True) == []
            job = await store.get(INTERNAL_DAILY)
            assert job is not None and (job.last_status, job.next_run_at, job.attempts) == (
                "ok", "2026-03-03T03:00:00Z", 0)
        finally:
            await llm.aclose()
            await engine.close()


async def test_an_internal_job_failing_for_another_reason_waits_for_its_next_slot(
    clock: ManualClock, store: CronStore
) -> None:
    async def broken() -> None:
        raise ValueError("a bug, not the disk")

    sched = CronScheduler(store, internal=[InternalJob(INTERNAL_DAILY, "0 3 * * *", broken)])
    await sched.start(loop=False)
    clock.set("2026-03-02T03:00:00Z")
    assert [r.status for r in await sched.run_due()] == ["error"]
    assert (await store.get(INTERNAL_DAILY)).next_run_at == "2026-03-03T03:00:00Z"  # type: ignore[union-attr]
