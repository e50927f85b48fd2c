"""A user who lives across time zones, and clocks that jump, through the
real App on a moving clock (the fake model, real SQLite files): a daily
8:00 reminder across both of New York's DST changes, a flight to Shanghai
and a ``/timezone`` change (what follows the user and what stays), the
day log's day boundary when the zone changes mid-day, a gateway off over a
DST night, and a clock an NTP correction steps back an hour (cron, the
outbox's backoff, the rate limit, the extraction's quiet gap, the model
failover's cooldown, the compression lease). README (``/timezone``) says
what the user sees."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from channels.telegram import TelegramChannel
from gateway.app import App
from gateway.bus import InboundMessage, MessageBus
from gateway.config import TelegramConfig
from gateway.cron import INTERNAL_DAILY, CronJob, CronStore, local_instant, next_run
from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.compression import COMPRESS_LEASE
from memory.clock import format_ts, parse_ts
from memory.lease import LeaseBusy, Leases
from tests.fakes.openai_server import FakeOpenAI, Reply, said, split_user_content, text_of
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import handtick
from tests.gateway.test_app import ECHO, EchoChannel, _config
from tests.gateway.test_delivery import FAST, Rig, _rig
from tests.gateway.test_failover_e2e import BACKUP_KEY, _app_with_fallback, answer
from tests.gateway.test_remembering_e2e import say
from tests.gateway.yearwalk import core_memory

NY, SHANGHAI = ZoneInfo("America/New_York"), ZoneInfo("Asia/Shanghai")
ALICE = "alice"
OWNER = f"echo:{ALICE}"


def local(day: str, hm: str, tz: ZoneInfo) -> datetime:
    """``hm`` on ``day`` on a wall clock in ``tz``, as an instant."""
    return datetime.fromisoformat(f"{day}T{hm}").replace(tzinfo=tz)


class Model:
    """Chat turns: a cron tool call for "every day at 8" (the schedule a
    model makes of it) and a memory_search one for "look up what we said
    yesterday", "done." after either; a job's run answers "⏰" and its
    words; anything else "ok.". The memory model finds no facts and sums a
    batch up as the user's lines ("talked about: ..."). ``down``: every
    request fails (a provider outage); ``memory_down``: the memory model's."""

    down = False
    memory_down = False  # only the memory model's requests fail

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.down:
            return Reply(status=503, content=None)
        if body.get("response_format", {}).get("type") == "json_object":
            if self.memory_down:
                return Reply(status=503, content=None)
            # The day's summary names what was said, so a compression's
            # request shows which events it was given.
            user = text_of(body["messages"][-1]["content"])
            words = re.findall(r"^L\d+ .*? user: (.*)$", user.partition("Conversation:")[2], re.M)
            return Reply(content=json.dumps({"facts": [], "summary": "talked about: " + "; ".join(words)}))
        last = body["messages"][-1]
        if last.get("role") == "tool":
            return Reply(content="done.")
        words = said(body)
        if words == "look up what we said yesterday":
            return Reply(content=None, tool_calls=[{"name": "memory_search", "arguments": {
                "query": "what did we talk about yesterday"}}])
        if words == "remind me every day at 8 to take my pills":
            return Reply(content=None, tool_calls=[{"name": "cron_add", "arguments": {
                "schedule": "0 8 * * *", "message": "take your pills"}}])
        if words.startswith(("take your pills", "water the plants", "night check", "call the NY office")):
            return Reply(content="⏰ " + words.split("\n")[0])
        return Reply(content="ok.")


@asynccontextmanager
async def gateway(tmp_path: Path, clock: ManualClock, model: Model | None = None, *, by_hand: bool = False,
                  **config: Any) -> AsyncIterator[tuple[App, FakeOpenAI]]:
    """``by_hand``: the background extraction loop stopped, for a test
    that ticks extraction itself (tests/gateway/handtick.py)."""
    async with FakeOpenAI(api_key="sk-time-walk-0123456789", responder=model or Model()) as fake:
        cfg, paths = _config(tmp_path, fake, **config)
        app = App(cfg, paths, clock=clock, channel_specs=(ECHO,))
        try:
            await app.open()
            await app.start()
            if by_hand:
                await handtick.by_hand(app)
            yield app, fake
        finally:
            await app.close()


def store_of(app: App) -> CronStore:
    assert app._cron_store is not None
    return app._cron_store


async def job(app: App, message: str) -> CronJob:
    [j] = [j for j in await store_of(app).list(OWNER) if j.message == message]
    return j


async def walk_jobs(app: App, clock: ManualClock, start: datetime, end: datetime,
                    step: timedelta = timedelta(minutes=15)) -> list[tuple[str, datetime]]:
    """Polls the scheduler every ``step`` from ``start`` to ``end`` as the
    gateway's loop does; (job message, the instant it ran), in order."""
    assert app.cron is not None
    ran: list[tuple[str, datetime]] = []
    clock.set(start)
    while clock.now() <= end:
        words = {j.id: j.message for j in await store_of(app).list()}  # a one-time job's row goes with its run
        for r in await app.cron.run_due():  # type: ignore[attr-defined]
            ran.append((words[r.job_id], clock.now()))
        clock.advance(step)
    return ran


def on_clock(ran: list[tuple[str, datetime]], message: str, tz: ZoneInfo) -> list[str]:
    """When ``message``'s job ran, on a wall clock in ``tz``."""
    return [f"{at.astimezone(tz):%m-%d %H:%M}" for m, at in ran if m == message]


async def in_group(app: App, clock: ManualClock, text: str) -> None:
    echo = app.channels["echo"]
    assert isinstance(echo, EchoChannel) and app.loop is not None
    echo.got.clear()
    await echo.publish(InboundMessage(channel="echo", chat_id="g-family", sender_id=ALICE, text=text, is_group=True,
                                      mentioned=True, timestamp=clock.now()))
    await asyncio.wait_for(echo.got.wait(), 5)
    assert await app.loop.drain(5)


# -- a daily reminder across New York's DST changes ------------------------------


async def test_a_daily_8_oclock_reminder_comes_once_a_day_at_8_across_both_dst_changes(
    tmp_path: Path, clock: ManualClock
) -> None:
    clock.set(local("2026-03-04", "12:00", NY))
    async with gateway(tmp_path, clock) as (app, _):  # gateway.timezone unset: UTC
        assert "America/New_York" in await say(app, clock, "/timezone America/New_York", ALICE)
        assert await say(app, clock, "remind me every day at 8 to take my pills", ALICE) == "done."
        pills = await job(app, "take your pills")
        assert (pills.schedule, pills.timezone, pills.private) == ("0 8 * * *", "America/New_York", True)
        # In the hour the spring-forward night skips, and in the one the fall-back night repeats.
        store = store_of(app)
        await store.add(schedule="30 2 * * *", message="water the plants", channel="echo", chat_id="c-alice",
                        user=OWNER, private=True, tz=NY)
        await store.add(schedule="30 1 * * *", message="night check", channel="echo", chat_id="c-alice",
                        user=OWNER, private=True, tz=NY)

        march = await walk_jobs(app, clock, local("2026-03-04", "12:15", NY), local("2026-03-10", "23:59", NY))
        assert on_clock(march, "take your pills", NY) == ["03-05 08:00", "03-06 08:00", "03-07 08:00", "03-08 08:00",
                                                          "03-09 08:00", "03-10 08:00"]
        # 02:30 on 8 March does not exist in New York: the job runs at the jump (03:00), once.
        assert on_clock(march, "water the plants", NY) == ["03-05 02:30", "03-06 02:30", "03-07 02:30", "03-08 03:00",
                                                           "03-09 02:30", "03-10 02:30"]
        assert len(on_clock(march, "night check", NY)) == 6

        # The gateway ran all along: the clock moves on to autumn. What came due meanwhile runs once.
        clock.set(local("2026-10-30", "00:00", NY))
        caught = [r.job_id for r in await app.cron.run_due()]  # type: ignore[attr-defined]
        assert len(caught) == 5 == len(set(caught))  # three reminders, the daily and the weekly compression
        november = await walk_jobs(app, clock, local("2026-10-30", "00:15", NY), local("2026-11-03", "23:59", NY))
        assert on_clock(november, "take your pills", NY) == ["10-30 08:00", "10-31 08:00", "11-01 08:00",
                                                             "11-02 08:00", "11-03 08:00"]
        # 01:30 comes twice on 1 November (EDT, then EST): the job runs at the first, not again.
        nights = [at for m, at in november if m == "night check"]
        assert [f"{t.astimezone(NY):%m-%d %H:%M %Z}" for t in nights] == [
            "10-30 01:30 EDT", "10-31 01:30 EDT", "11-01 01:30 EDT", "11-02 01:30 EST", "11-03 01:30 EST"]
        # Each run's reply reached the chat: 6 in March, 5 in autumn, and the one caught up on 30 October.
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel)
        assert sum(m.text == "⏰ take your pills" for m in echo.sent) == 12



# Zones whose clocks change in the small hours, at midnight (Santiago,
# Beirut, Havana), by half an hour (Lord Howe), south of the equator, or
# twice a year around Ramadan (Casablanca).
ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "America/Santiago", "Australia/Lord_Howe",
         "Asia/Beirut", "America/Havana", "Africa/Casablanca", "America/Asuncion", "Europe/Dublin")


@pytest.mark.parametrize("zone", ZONES)
def test_a_daily_time_fires_once_every_local_day_of_a_year_in_any_zone(zone: str) -> None:
    """The walk's rule over a whole year, on the schedules alone: each
    daily time runs on every local day, once; at its time, except on a
    night that skips it, when it runs at the jump."""
    tz = ZoneInfo(zone)
    for minute, hour in ((0, 8), (30, 2), (30, 1), (0, 0), (30, 0), (45, 23)):
        runs, t = [], datetime(2026, 1, 1, tzinfo=UTC)
        while t < datetime(2027, 1, 1, tzinfo=UTC):
            t = next_run(f"{minute} {hour} * * *", t, tz)
            runs.append(t.astimezone(tz))
        days = [r.date() for r in runs]
        assert len(days) == len(set(days)), (zone, hour, minute)  # never twice a day
        first = date(2026, 1, 2)
        assert set(days) >= {first + timedelta(days=i) for i in range(363)}, (zone, hour, minute)  # never skipped
        for r in runs:
            if (r.hour, r.minute) != (hour, minute):  # only where that wall time does not exist that day
                wall = datetime(r.year, r.month, r.day, hour, minute)
                assert wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall, r
                assert r == local_instant(wall, tz).astimezone(tz), r  # at the jump

# -- a flight to Shanghai ----------------------------------------------------------


async def test_after_a_flight_a_users_schedules_follow_their_clock_and_a_one_time_reminder_keeps_its_moment(
    tmp_path: Path, clock: ManualClock
) -> None:
    clock.set(local("2026-11-09", "12:00", NY))
    async with gateway(tmp_path, clock) as (app, _):
        await say(app, clock, "/timezone New York", ALICE)
        assert await say(app, clock, "remind me every day at 8 to take my pills", ALICE) == "done."
        store = store_of(app)
        # "Remind me on the 12th at 10": a moment, read on her clock as she asked.
        await store.add(at=local("2026-11-12", "10:00", NY), message="call the NY office", channel="echo",
                        chat_id="c-alice", user=OWNER, private=True, tz=NY)
        # The family group's job she made there: the group's, not her travel clock's.
        await in_group(app, clock, "hi all")
        await store.add(schedule="0 19 * * *", message="water the plants", channel="echo", chat_id="g-family",
                        user=OWNER, tz=NY)
        ran = await walk_jobs(app, clock, local("2026-11-09", "12:15", NY), local("2026-11-10", "21:00", NY))
        assert on_clock(ran, "take your pills", NY) == ["11-10 08:00"]

        # She lands in Shanghai (11 November, 10:00 there) and says so.
        clock.set(local("2026-11-11", "10:00", SHANGHAI))
        told = await say(app, clock, "/timezone 上海", ALICE)
        assert "Asia/Shanghai" in told, told
        pills = await job(app, "take your pills")
        assert pills.timezone == "Asia/Shanghai"
        # 08:00 in Shanghai passed before she landed, and its last run was yesterday evening there (08:00 in
        # New York): the run it had pending (08:00 New York, 21:00 here) stays, or today would have none.
        assert parse_ts(pills.next_run_at) == local("2026-11-11", "21:00", SHANGHAI)
        group = await job(app, "water the plants")
        assert group.timezone == "America/New_York"
        once = await job(app, "call the NY office")
        assert parse_ts(once.next_run_at) == local("2026-11-12", "10:00", NY)  # 23:00 in Shanghai
        # The answer says what moved and what stayed, on her new clock.
        assert "now runs on Asia/Shanghai time (next 2026-11-11 21:00)" in told, told
        assert "2026-11-12 23:00" in told, told  # the one-time reminder, on her new clock
        assert "1 other" in told, told  # the group's
        listed = await say(app, clock, "/jobs", ALICE)
        assert "0 8 * * * (Asia/Shanghai)" in listed, listed

        ran = await walk_jobs(app, clock, local("2026-11-11", "10:15", SHANGHAI), local("2026-11-13", "23:00", SHANGHAI))
        assert on_clock(ran, "take your pills", SHANGHAI) == ["11-11 21:00", "11-12 08:00", "11-13 08:00"]
        assert on_clock(ran, "call the NY office", SHANGHAI) == ["11-12 23:00"]
        assert on_clock(ran, "water the plants", NY) == ["11-11 19:00", "11-12 19:00"]  # the group's clock

        # Home again, and back to the gateway's zone by mistake: her schedule follows that too.
        clock.set(local("2026-11-20", "09:00", NY))
        await app.cron.run_due()  # type: ignore[attr-defined]  # the week it was not polled: once
        await say(app, clock, "/timezone reset", ALICE)
        pills = await job(app, "take your pills")
        assert pills.timezone == ""
        assert parse_ts(pills.next_run_at) == datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


# -- the gateway's own clock stepped back (an NTP correction) -----------------------


@pytest.fixture
async def telegram(tmp_path: Path, clock: ManualClock) -> AsyncIterator[tuple[FakeTelegram, Rig]]:
    """Delivery through the outbox to the fake Telegram (tests/gateway/test_delivery.py's rig)."""
    async with FakeTelegram(strict_chats=False) as tg:
        cfg = TelegramConfig(enabled=True, token=SecretStr(tg.token), base_url=tg.base_url, poll_timeout=1)
        channel = TelegramChannel(cfg, MessageBus(), backoff=FAST, send_attempts=1)
        await asyncio.wait_for(channel.start(), 10)
        async for rig in _rig(tmp_path, clock, channel):
            yield tg, rig


async def test_a_clock_stepped_back_an_hour_does_not_hold_a_kept_reply_for_that_hour(
    telegram: tuple[FakeTelegram, Rig], clock: ManualClock
) -> None:
    """A reply kept after a failed send is due 15-30 s later on the clock
    that failed it. The clock then steps back an hour: the row's time is
    an hour and a half ahead, longer than any backoff (30 min at most), so
    it is the clock that moved, and the row is sent at the next pass, not
    an hour late."""
    tg, rig = telegram
    tg.fail_next("sendMessage", 502)
    await rig.reply("your train leaves at 9")
    assert tg.texts() == [] and await rig.outbox.count() == 1
    clock.advance(-3600)  # NTP: the machine's clock was an hour fast
    await rig.later(31)
    assert tg.texts() == ["your train leaves at 9"]
    assert await rig.outbox.count() == 0
    # A backoff the clock did not move is kept: a failed send waits its 15-30 s.
    tg.fail_next("sendMessage", 502)
    await rig.reply("and take an umbrella")
    await rig.later(5)
    assert tg.texts() == ["your train leaves at 9"]
    await rig.later(30)
    assert tg.texts() == ["your train leaves at 9", "and take an umbrella"]


async def test_a_clock_stepped_back_runs_no_reminder_twice_and_holds_no_retry_for_the_step(
    tmp_path: Path, clock: ManualClock
) -> None:
    model = Model()
    clock.set(local("2026-06-01", "07:00", NY))
    async with gateway(tmp_path, clock, model, gateway={"timezone": "America/New_York"}) as (app, _):
        await say(app, clock, "remind me every day at 8 to take my pills", ALICE)  # no /timezone: the gateway's
        pills = await job(app, "take your pills")
        assert pills.timezone == "" and parse_ts(pills.next_run_at) == local("2026-06-01", "08:00", NY)
        ran = await walk_jobs(app, clock, local("2026-06-01", "07:45", NY), local("2026-06-01", "08:15", NY))
        assert on_clock(ran, "take your pills", NY) == ["06-01 08:00"]
        # The machine's clock was an hour fast: NTP steps it back. 08:00 comes again, the reminder does not.
        ran = await walk_jobs(app, clock, local("2026-06-01", "07:15", NY), local("2026-06-02", "08:15", NY))
        assert on_clock(ran, "take your pills", NY) == ["06-02 08:00"]

        # The model is down at 08:00 on the 3rd: the job is tried again a minute later ...
        model.down = True
        clock.set(local("2026-06-03", "08:00", NY))
        [run] = [r for r in await app.cron.run_due() if r.job_id == pills.id]  # type: ignore[attr-defined]
        assert run.status == "retry"
        retry = parse_ts((await job(app, "take your pills")).next_run_at)
        assert retry == local("2026-06-03", "08:01", NY)
        # ... and the clock steps back an hour before it: the retry comes a minute later still, not an hour.
        model.down = False
        clock.set(local("2026-06-03", "07:00", NY))
        ran = await walk_jobs(app, clock, local("2026-06-03", "07:01", NY), local("2026-06-03", "07:10", NY),
                              step=timedelta(minutes=1))
        assert on_clock(ran, "take your pills", NY) == ["06-03 07:01"]
        # That was 3 June's 08:00: when 08:00 comes round again on the corrected clock, it is not run twice.
        after = await job(app, "take your pills")
        assert after.last_status == "ok" and parse_ts(after.next_run_at) == local("2026-06-04", "08:00", NY)
        ran = await walk_jobs(app, clock, local("2026-06-03", "07:15", NY), local("2026-06-04", "08:15", NY))
        assert on_clock(ran, "take your pills", NY) == ["06-04 08:00"]


# -- a gateway off over a DST night ---------------------------------------------------


async def _runs(app: App, job: str) -> int:
    rows = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
        "SELECT COUNT(*) FROM memory_log WHERE job = ? AND action = 'run'", (job,))
    return int(rows[0][0])


async def test_a_gateway_off_over_the_spring_forward_night_catches_up_each_job_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """gateway.timezone set, Alice with no /timezone: the gateway's clock is
    hers. Off from Saturday 22:00 to Sunday 10:00 over the night New York
    springs forward: the 03:00 compression and the 08:00 reminder each run
    once at start (the reminder saying it is late), then at their times."""
    clock.set(local("2026-03-07", "19:00", NY))
    model = Model()
    config = {"gateway": {"timezone": "America/New_York"}}
    async with gateway(tmp_path, clock, model, by_hand=True, **config) as (app, _):
        await say(app, clock, "remind me every day at 8 to take my pills", ALICE)
        await say(app, clock, "we booked the cabin for Easter", ALICE)
        clock.advance(600)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        daily_before = await _runs(app, "daily_compress")
        clock.set(local("2026-03-07", "22:00", NY))
    clock.set(local("2026-03-08", "10:00", NY))  # the machine was off; the clock skipped 02:00-03:00 meanwhile
    async with gateway(tmp_path, clock, model, by_hand=True, **config) as (app, fake):
        assert await _runs(app, "daily_compress") == daily_before + 1  # Saturday's events, once
        events = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT event_date, is_compressed FROM daily_events WHERE owner = ?", (OWNER,))
        assert [(r[0], r[1]) for r in events] == [("2026-03-07", 1)]
        pills = [said(b) for b in fake.requests if said(b).startswith("take your pills")]
        assert len(pills) == 1
        assert "was due at 08:00 (America/New_York) and runs 2 h late" in pills[0], pills[0]
        ran = await walk_jobs(app, clock, local("2026-03-08", "10:15", NY), local("2026-03-09", "09:00", NY))
        assert on_clock(ran, "take your pills", NY) == ["03-09 08:00"]
        assert on_clock(ran, INTERNAL_DAILY, NY) == ["03-09 03:00"]
        assert await _runs(app, "daily_compress") == daily_before + 2


# -- the day log's day when the zone changes mid-day ---------------------------------


def compressed(fake: FakeOpenAI) -> list[str]:
    """Each line the daily compression was given ("- 2026-11-10 Tue [echo] ..."), over all its runs."""
    out: list[str] = []
    for body in fake.requests:
        user = text_of(body["messages"][-1]["content"]) if body.get("response_format") else ""
        if "Event log:" in user:
            out += re.findall(r"^L\d+ (- 20.*)$", user.partition("Event log:")[2], re.M)
    return out


async def test_a_zone_changed_mid_day_loses_no_day_log_and_compresses_each_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Events are dated on the user's calendar as they are written. East
    (New York -> Shanghai) the date jumps ahead; west (back) it steps back
    to a day Shanghai already finished and compressed. Each event is
    compressed once, under the day it was written on, once that day is
    over where the user is now; none is lost or waits for ever."""
    clock.set(local("2026-11-10", "20:00", NY))

    async def chat(words: str) -> None:
        await say(app, clock, words, ALICE)
        clock.advance(600)  # past the quiet gap: the extraction writes the day's event
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]

    # gateway.timezone unset: UTC, compression at 03:00 UTC
    async with gateway(tmp_path, clock, by_hand=True) as (app, fake):
        await say(app, clock, "/timezone New York", ALICE)
        await chat("we booked the cabin in Maine")  # 10 Nov, 20:00 in New York
        clock.set(local("2026-11-11", "10:00", SHANGHAI))  # 10 Nov 21:00 in New York: her day is not over
        await say(app, clock, "/timezone Shanghai", ALICE)
        await chat("landed in Shanghai, the hotel is near the Bund")
        # "Yesterday", the next morning in Shanghai, is her Shanghai yesterday: the day she landed,
        # not the evening in New York (10 Nov there, though only 13 hours before).
        for ask in ("what did we talk about yesterday?", "昨天我们聊了什么？"):
            clock.set(local("2026-11-12", "09:00", SHANGHAI))
            await say(app, clock, ask, ALICE)
            block = split_user_content(text_of(fake.last_chat()["messages"][-1]["content"]))[0]
            assert "near the Bund" in block and "cabin in Maine" not in block, block
            assert "2026-11-11" in block, block
        clock.advance(600)
        await app.extraction.tick()  # type: ignore[attr-defined]  # the questions are that day's log
        clock.set(local("2026-11-20", "09:00", SHANGHAI))
        await chat("meeting the Hangzhou supplier today")
        clock.set(local("2026-11-20", "11:30", SHANGHAI))  # 03:30 UTC: Shanghai's 19 Nov compressed at 03:00
        await say(app, clock, "/timezone New York", ALICE)  # back home: 19 Nov, 22:30 there
        await chat("home again, jet lag is brutal")
        await walk_jobs(app, clock, clock.now(), local("2026-11-22", "12:00", NY), step=timedelta(hours=1))
        days = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT event_date, summary, is_compressed FROM daily_events WHERE owner = ? ORDER BY id", (OWNER,))
        assert all(c == 1 for _, _, c in days), days  # none lost, none waiting for ever
        said_on = [d for d, summary, _ in days if "yesterday" not in summary and "昨天" not in summary]
        assert said_on == ["2026-11-10", "2026-11-11", "2026-11-20", "2026-11-19"]
        lines = compressed(fake)
        for day, words in (("2026-11-10", "cabin in Maine"), ("2026-11-11", "near the Bund"),
                           ("2026-11-20", "Hangzhou supplier"), ("2026-11-19", "jet lag")):
            assert len([x for x in lines if words in x]) == 1, lines  # compressed once
            [line] = [x for x in lines if words in x]
            assert line.startswith(f"- {day} "), line  # under the day it was said on, on her calendar then


async def test_a_clock_stepped_back_never_gives_the_compression_lease_to_a_second_holder(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """The lease's expiry is on the clock that wrote it: stepped back an
    hour, a live holder's lease looks held for 75 minutes, and nobody takes
    it over meanwhile (two compressions writing at once is worse than one
    waiting); the holder's next renewal puts it on the corrected clock."""
    leases = Leases(engine.db, clock)
    daily = await leases.acquire(COMPRESS_LEASE, "daily_compress@1")
    clock.advance(-3600)
    with pytest.raises(LeaseBusy):
        await leases.acquire(COMPRESS_LEASE, "weekly_compress@2")
    await daily.renew()  # still its own: 15 minutes from the corrected now
    assert parse_ts(daily.expires_at) == clock.now() + leases.ttl
    clock.advance(leases.ttl + timedelta(seconds=1))  # the holder died after that renewal
    weekly = await leases.acquire(COMPRESS_LEASE, "weekly_compress@2")
    assert await leases.holder(COMPRESS_LEASE) == (weekly.holder, weekly.expires_at)


# -- Core Memory's dates on the user's calendar ------------------------------------------


async def test_core_memory_dates_an_entry_on_the_users_calendar(tmp_path: Path, clock: ManualClock) -> None:
    """A Core Memory line carries the day its fact was said: her day, not
    UTC's. Said at 21:00 in New York on 10 November is 02:00 UTC on the
    11th; an entry whose provenance keeps the moment (the weekly refresh's)
    and one dated by its own row alike. With no /timezone, the gateway's
    zone is her calendar (gateway.timezone set), as the prompt's date is,
    for what she says from then on."""
    clock.set(local("2026-11-10", "21:00", NY))
    async with gateway(tmp_path, clock, gateway={"timezone": "Asia/Shanghai"}) as (app, fake):
        await say(app, clock, "/timezone New York", ALICE)
        engine = app.backend.engine  # type: ignore[attr-defined]
        said_at = format_ts(clock.now())
        await engine.add(NewMemory(owner=OWNER, tier=1, content="Alice is allergic to peanuts",
                                   category=Category.IDENTITY, importance=1.0))
        await engine.add(NewMemory(owner=OWNER, tier=1, content="Alice prefers aisle seats on long flights",
                                   category=Category.CONFIG, importance=0.9,
                                   provenance=Provenance(date_from=said_at, date_to=said_at)))
        clock.advance(600)
        await say(app, clock, "anything I should pack?", ALICE)
        core = core_memory(fake.last_chat())
        assert "· 2026-11-10] Alice is allergic to peanuts" in core, core
        assert "· 2026-11-10] Alice prefers aisle seats" in core, core
        # Back on the gateway's zone (Shanghai, 10:10 on the 11th there): its calendar for what she
        # says now; what she said in New York keeps the day she lived it (memory/zonehistory.py).
        await say(app, clock, "/timezone reset", ALICE)
        await engine.add(NewMemory(owner=OWNER, tier=1, content="Alice takes green tea, no sugar",
                                   category=Category.CONFIG, importance=0.9))
        await say(app, clock, "and now?", ALICE)
        core = core_memory(fake.last_chat())
        assert "· 2026-11-10] Alice is allergic to peanuts" in core, core
        assert "· 2026-11-11] Alice takes green tea" in core, core


# -- a user with no /timezone on a gateway with one ------------------------------------


async def test_with_no_timezone_of_their_own_yesterday_is_the_gateways_yesterday(
    tmp_path: Path, clock: ManualClock
) -> None:
    """gateway.timezone Asia/Shanghai; Bob never set /timezone. His day log
    is dated on Shanghai's calendar (the gateway's), so his "yesterday" /
    "昨天" must be Shanghai's too. At 07:00 there it is still the day
    before in UTC: read on UTC's calendar, "yesterday" was two days ago."""
    bob = "bob"

    async def chat(day: str, words: str) -> None:
        clock.set(local(day, "20:00", SHANGHAI))
        await say(app, clock, words, bob)
        clock.advance(600)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]

    clock.set(local("2026-11-09", "20:00", SHANGHAI))
    async with gateway(tmp_path, clock, gateway={"timezone": "Asia/Shanghai"}, by_hand=True) as (app, fake):
        await chat("2026-11-09", "my sister visited from Chengdu")
        await chat("2026-11-10", "we repainted the kitchen blue")
        events = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT event_date FROM daily_events WHERE owner = 'echo:bob' ORDER BY id")
        assert [r[0] for r in events] == ["2026-11-09", "2026-11-10"]
        for ask in ("what did we talk about yesterday?", "昨天我们聊了什么？"):
            clock.set(local("2026-11-11", "07:00", SHANGHAI))
            await say(app, clock, ask, bob)
            body = fake.last_chat()
            assert "Current date: 2026-11-11" in text_of(body["messages"][0]["content"])
            block = split_user_content(text_of(body["messages"][-1]["content"]))[0]
            assert "repainted the kitchen" in block and "Chengdu" not in block, block
        # The memory_search tool reads it the same way.
        await say(app, clock, "look up what we said yesterday", bob)
        found = text_of(fake.last_chat()["messages"][-1]["content"])
        assert fake.last_chat()["messages"][-1]["role"] == "tool"
        assert "repainted the kitchen" in found.splitlines()[0], found  # ranked first: yesterday's


async def test_a_clock_stepped_back_an_hour_does_not_rate_limit_a_user_for_that_hour(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The rate limit's windows measure time between a user's messages: a
    clock stepped back an hour must not make the messages just before it
    count as sent within the coming minute for an hour (the user silenced,
    told nothing). Their counts are dropped; the limit holds from there."""
    clock.set(local("2026-06-01", "09:00", NY))
    async with gateway(tmp_path, clock, gateway={"rateLimit": {"perMinute": 3, "perHour": 50}}) as (app, _):
        for i in range(3):
            assert await say(app, clock, f"quick question {i}", ALICE) == "ok."
            clock.advance(5)
        limited = await say(app, clock, "one more", ALICE)
        assert limited != "ok." and "minute" in limited, limited  # the limit holds
        clock.advance(-3600)  # NTP: the clock was an hour fast
        clock.advance(61)
        assert await say(app, clock, "and now?", ALICE) == "ok."
        for i in range(2):
            clock.advance(5)
            assert await say(app, clock, f"follow-up {i}", ALICE) == "ok."
        clock.advance(5)
        assert await say(app, clock, "a fourth within the minute", ALICE) != "ok."  # still counted


async def test_a_clock_stepped_back_an_hour_does_not_hold_what_was_said_from_memory_for_that_hour(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The extraction waits for a quiet gap after a user's last line (3 min).
    Stepped back an hour, the clock put that line an hour ahead: the user
    went quiet, and was not learnt from until the hour had passed."""
    clock.set(local("2026-06-01", "09:00", NY))
    async with gateway(tmp_path, clock, by_hand=True) as (app, _):
        await say(app, clock, "my new phone number ends in 4471", ALICE)
        clock.advance(-3600)
        clock.advance(200)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        events = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT summary FROM daily_events WHERE owner = ?", (OWNER,))
        assert [r[0] for r in events] == ["talked about: my new phone number ends in 4471"]


async def test_a_clock_stepped_back_an_hour_does_not_add_the_hour_to_a_failed_extractions_backoff(
    tmp_path: Path, clock: ManualClock
) -> None:
    """An extraction the memory model failed is tried again 10 minutes later
    (then 30, 2 h ...), at a time on the clock that saw it fail; stepped
    back an hour, it would wait 70. A retry further ahead than its backoff
    is due: how much of it has passed is not known, so it is tried now."""
    model = Model()
    clock.set(local("2026-06-01", "09:00", NY))
    async with gateway(tmp_path, clock, model, by_hand=True) as (app, _):
        await say(app, clock, "my new phone number ends in 4471", ALICE)
        model.memory_down = True
        clock.advance(200)
        assert app.extraction is not None
        [failed] = await app.extraction.tick()  # type: ignore[attr-defined]
        assert not failed.ok
        model.memory_down = False
        clock.advance(-3600)
        clock.advance(60)  # its retry is 69 min ahead now: longer than its backoff, so the clock moved
        [report] = await app.extraction.tick()  # type: ignore[attr-defined]
        assert report.ok


async def test_a_clock_stepped_back_an_hour_does_not_refuse_an_export_for_that_hour(
    tmp_path: Path, clock: ManualClock
) -> None:
    """One /export a minute: the last one's time, an hour ahead of a clock
    stepped back, made the next wait an hour ("ask again in 3660 s")."""
    clock.set(local("2026-06-01", "09:00", NY))
    async with gateway(tmp_path, clock) as (app, _):
        await say(app, clock, "hello", ALICE)
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel)
        await say(app, clock, "/export", ALICE)
        assert echo.sent[-1].attachment is not None
        clock.advance(10)
        assert "One export a minute" in await say(app, clock, "/export", ALICE)  # the limit holds
        clock.advance(-3600)
        clock.advance(61)
        await say(app, clock, "/export", ALICE)
        assert echo.sent[-1].attachment is not None, echo.sent[-1].text


async def test_a_clock_stepped_back_an_hour_does_not_keep_the_primary_model_cooling_for_that_hour(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A failed primary cools down for 30 s (10 min at most), until a time
    on the clock that saw it fail. Stepped back an hour, every turn went to
    the fallback for that hour though the primary was back."""
    clock.set(local("2026-06-01", "09:00", NY))
    async with FakeOpenAI(api_key="sk-e2e-key-0123456789", responder=answer) as primary, \
            FakeOpenAI(api_key=BACKUP_KEY, responder=answer) as backup:
        primary.down = Reply(status=503)
        app = _app_with_fallback(tmp_path, clock, primary, backup)
        try:
            await app.open()
            await app.start()
            assert await say(app, clock, "good morning", ALICE) == "backup-model here"
            primary.down = None
            clock.advance(-3600)
            clock.advance(60)  # past its cooldown, on the corrected clock
            assert await say(app, clock, "are you there?", ALICE) == "test-model here"
        finally:
            await app.close()


async def test_a_flight_far_east_after_the_days_reminder_does_not_bring_it_twice_that_day(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Honolulu -> Tokyo (19 hours ahead): 08:00 in Honolulu is 03:00 the
    next day in Tokyo. Landing at 05:00 and saying so, the reminder must
    not come again at 08:00: that Tokyo day had it (at 03:00)."""
    honolulu, tokyo = ZoneInfo("Pacific/Honolulu"), ZoneInfo("Asia/Tokyo")
    clock.set(local("2026-11-09", "12:00", honolulu))
    async with gateway(tmp_path, clock) as (app, _):
        await say(app, clock, "/timezone Pacific/Honolulu", ALICE)
        await say(app, clock, "remind me every day at 8 to take my pills", ALICE)
        ran = await walk_jobs(app, clock, local("2026-11-09", "12:15", honolulu), local("2026-11-10", "09:00", honolulu))
        assert on_clock(ran, "take your pills", tokyo) == ["11-11 03:00"]
        clock.set(local("2026-11-11", "05:00", tokyo))
        await say(app, clock, "/timezone Tokyo", ALICE)
        ran = await walk_jobs(app, clock, local("2026-11-11", "05:15", tokyo), local("2026-11-12", "09:00", tokyo))
        assert on_clock(ran, "take your pills", tokyo) == ["11-12 08:00"]
