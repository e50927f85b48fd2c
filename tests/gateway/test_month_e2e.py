"""A month of the background jobs, through the real App: two users chat a
few times a day (one in the gateway's Europe/Berlin, one in UTC+8), the
clock crosses day and week boundaries and the spring DST change, the memory
model fails for a day, the gateway restarts mid-day and is down for two
days. Asserted on the real SQLite files: each daily job runs once per day,
no day is lost or compressed twice, the weekly jobs run on Mondays, the
extraction buffer drains."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gateway.app import App
from gateway.cron import INTERNAL_DAILY, INTERNAL_WEEKLY
from memory import ManualClock
from memory.clock import parse_ts
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.handtick import by_hand, cron_by_hand
from tests.gateway.test_app import ECHO, _config
from tests.gateway.test_remembering_e2e import say

BERLIN = ZoneInfo("Europe/Berlin")
SHANGHAI = ZoneInfo("Asia/Shanghai")
_LINE = re.compile(r"^L(\d+) .*? user: (TEMP|DECISION|EVENT) (.*)$")
_CATS = {"TEMP": "temp", "DECISION": "decision", "EVENT": "event"}


class MonthModel:
    """Chat turns get "ok."; the memory model extracts one fact per user
    line marked TEMP/DECISION/EVENT, merges nothing away (each fact kept
    from itself), and keeps the profile as the facts it is given. ``down``:
    every memory-model call fails with a 500."""

    def __init__(self) -> None:
        self.down = False
        self.calls: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") != "json_object":
            return Reply(content="ok.")
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if self.down:
            self.calls["failed"] += 1
            return Reply(status=500, error_body="memory model down")
        if system.startswith("You are a memory extraction"):
            kind = "compress" if "Event log:" in user else "extract"
            self.calls[kind] += 1
            facts = [
                {"content": m.group(3).strip(), "project": "_global", "topic": _CATS[m.group(2)],
                 "category": _CATS[m.group(2)], "importance": 0.5 if m.group(2) == "TEMP" else 0.8,
                 "lines": [int(m.group(1))]}
                for m in map(_LINE.match, user.splitlines()) if m
            ]
            return Reply(content=json.dumps({"facts": facts, "summary": f"talk {self.calls[kind]}"}))
        if system.startswith("You consolidate"):
            self.calls["merge"] += 1
            nums = re.findall(r"^(\d+)\. \[\w+[^\]]*\] (.*)$", user, re.M) or re.findall(r"^(\d+)\. (.*)$", user, re.M)
            return Reply(content=json.dumps({"facts": [
                {"content": text, "category": "event", "importance": 0.5, "from": [int(n)]} for n, text in nums
            ], "drop": []}))
        if system.startswith("You maintain"):
            self.calls["profile"] += 1
            cur = re.findall(r"^- (.*)$", user.split("Important facts:")[0], re.M)
            return Reply(content=json.dumps({"entries": [{"content": c, "category": "identity", "facts": []} for c in cur]}))
        raise AssertionError(f"unexpected memory-model call: {system[:60]}")


@asynccontextmanager
async def gateway(tmp_path: Path, fake: FakeOpenAI, clock: ManualClock) -> AsyncIterator[App]:
    cfg, paths = _config(tmp_path, fake, gateway={"timezone": "Europe/Berlin"})
    app = App(cfg, paths, clock=clock, channel_specs=(ECHO,))
    try:
        await app.open()
        await app.start()  # runs the jobs missed while down (awaited: not the poll's work)
        # The tests tick extraction and run cron by hand (_tick, the held
        # daily run): the loops would race them for the due user and jobs.
        await cron_by_hand(await by_hand(app))
        yield app
    finally:
        await app.close()


async def _tick(app: App) -> None:
    """What the background loops (stopped: handtick.py) do at this moment of the clock."""
    assert app.extraction is not None and app.cron is not None
    await app.extraction.tick()  # type: ignore[attr-defined]
    await app.cron.run_due()  # type: ignore[attr-defined]


async def _live_day(app: App, clock: ManualClock, day: int) -> None:
    """Three conversations each (Berlin 09:00, 13:00, 20:00 wall time), then
    the night hour by hour up to the next morning."""
    start = clock.now().astimezone(BERLIN).date()
    for hour in (9, 13, 20):
        clock.set(parse_ts(f"{start}T{hour:02d}:00:00").replace(tzinfo=BERLIN))
        await say(app, clock, f"TEMP scratch note {day}-{hour}", "alice")
        await say(app, clock, f"DECISION builds use toolchain v{day % 4}", "alice")
        await say(app, clock, f"EVENT bob did thing {day}-{hour}", "bob")
        clock.advance(300)  # past the quiet gap
        await _tick(app)
    while clock.now().astimezone(BERLIN).date() == start or clock.now().astimezone(BERLIN).hour < 8:
        clock.advance(3600)
        await _tick(app)


async def _rows(app: App, sql: str, *args: Any) -> list[Any]:
    return list(await app.backend.engine.db.fetchall(sql, args))  # type: ignore[union-attr]


async def test_a_month_of_daily_and_weekly_jobs_runs_each_once_and_loses_no_day(tmp_path: Path) -> None:
    model = MonthModel()
    clock = ManualClock("2026-03-16T07:00:00Z")  # a Monday, 08:00 in Berlin; DST starts 2026-03-29
    async with FakeOpenAI(api_key="sk-month-key-0123456789", responder=model) as fake:
        day = 0
        async with gateway(tmp_path, fake, clock) as app:
            assert await say(app, clock, "/timezone Asia/Shanghai", "bob")
            for day in range(0, 9):
                model.down = day == 5  # the memory model is down all of day 5 and its night
                await _live_day(app, clock, day)
                if day == 5:
                    # Nothing was lost: day 5's lines wait in the buffer, its events stay uncompressed.
                    waiting = await _rows(app, "SELECT content FROM extraction_buffer WHERE owner = 'echo:alice' "
                                               "AND role = 'user'")
                    assert any("5-9" in r[0] for r in waiting)
            await say(app, clock, "TEMP before the restart", "alice")
        # Restarted mid-morning: the daily job of this day already ran.
        async with gateway(tmp_path, fake, clock) as app:
            for day in range(9, 14):
                await _live_day(app, clock, day)
        clock.advance(timedelta(days=2))  # down for two days
        async with gateway(tmp_path, fake, clock) as app:
            for day in range(16, 31):
                await _live_day(app, clock, day)
            runs = await _rows(app, "SELECT at, job, detail FROM memory_log WHERE action = 'run' ORDER BY at")
            events = await _rows(app, "SELECT owner, event_date, is_compressed FROM daily_events")
            buffer = await _rows(app, "SELECT COUNT(*) FROM extraction_buffer")
            cron = await app._cron_store.list()  # type: ignore[union-attr]

    daily = [(parse_ts(r["at"]).astimezone(BERLIN), json.loads(r["detail"])) for r in runs if r["job"] == "daily_compress"]
    weekly = [parse_ts(r["at"]).astimezone(BERLIN) for r in runs if r["job"] == "weekly_compress"]
    days = [at.date() for at, _ in daily]
    assert len(days) == len(set(days)), f"a daily job ran twice on a day: {days}"
    # At 03:00 Berlin (the clock moves in 5-minute steps), before and after the DST change; the
    # slots missed while down made up once, at the start after them.
    late = [at for at, _ in daily if at.hour != 3]
    assert [f"{at:%m-%d %H}" for at in late] == ["04-01 08"], " ".join(f"{at:%m-%d %H:%M}" for at, _ in daily)
    # One run a day from 2026-03-17 to 2026-04-16, except the two days the gateway was down (one catch-up run).
    first = days[0]
    expected = [first + timedelta(days=i) for i in range((days[-1] - first).days + 1)]
    missing = sorted(set(expected) - set(days))
    assert len(missing) == 1, missing  # two slots missed while down, one of them made up at start
    # Every event of an ended day compressed, each once: the runs' counts add up to the events.
    assert sum(d["events"] for _, d in daily) == sum(1 for e in events if e["is_compressed"])
    ended = {e["event_date"] for e in events if e["is_compressed"] == 0}
    assert ended <= {"2026-04-16", "2026-04-17"}, ended
    # The failing day cost no day: one failed group, later caught up.
    assert sum(d["failed_groups"] for _, d in daily) >= 1
    assert buffer[0][0] == 0
    assert [(w.date().isoformat(), w.weekday(), w.hour) for w in weekly] == [
        ("2026-03-23", 0, 4), ("2026-03-30", 0, 4), ("2026-04-06", 0, 4), ("2026-04-13", 0, 4)
    ]
    assert {j.last_status for j in cron if j.internal} == {"ok"}


class HeldModel(MonthModel):
    """A MonthModel whose daily-compression calls wait, one by one, until
    the test lets each go (a slow memory model in the night)."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = False
        self.entered: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def respond(self, body: dict[str, Any]) -> Reply:
        user = body["messages"][-1]["content"]
        if self.holding and body.get("response_format", {}).get("type") == "json_object" and "Event log:" in user:
            go = asyncio.Event()
            await self.entered.put(go)
            await go.wait()
        return self(body)


async def test_a_daily_run_past_the_weekly_slot_delays_the_weekly_not_skips_it(tmp_path: Path) -> None:
    model = HeldModel()
    clock = ManualClock("2026-03-22T07:00:00Z")  # a Sunday, 08:00 in Berlin
    async with FakeOpenAI(api_key="sk-month-key-0123456789", responder=model.respond) as fake:
        async with gateway(tmp_path, fake, clock) as app:
            assert app.cron is not None
            for hour in (9, 13, 20):
                clock.set(parse_ts(f"2026-03-22T{hour:02d}:00:00").replace(tzinfo=BERLIN))
                await say(app, clock, f"DECISION builds use toolchain v{hour}", "alice")
                await say(app, clock, f"EVENT bob did thing {hour}", "bob")
                clock.advance(300)
                await _tick(app)
            clock.set(parse_ts("2026-03-23T02:05:00").replace(tzinfo=BERLIN))
            await _tick(app)
            # Monday 03:05: the daily job starts; its model calls are slow.
            model.holding = True
            clock.set(parse_ts("2026-03-23T03:05:00").replace(tzinfo=BERLIN))
            daily = asyncio.create_task(app.cron.run_due())  # type: ignore[attr-defined]
            first = await asyncio.wait_for(model.entered.get(), 10)
            clock.set(parse_ts("2026-03-23T03:58:00").replace(tzinfo=BERLIN))
            first.set()  # its first group done, the lease renewed; the next group waits
            second = await asyncio.wait_for(model.entered.get(), 10)
            clock.set(parse_ts("2026-03-23T04:05:00").replace(tzinfo=BERLIN))
            busy = await app.cron.run_due()  # type: ignore[attr-defined]
            assert [(r.job_id, r.status) for r in busy] == [(INTERNAL_WEEKLY, "busy")]
            second.set()
            model.holding = False
            assert [(r.job_id, r.status) for r in await asyncio.wait_for(daily, 10)] == [(INTERNAL_DAILY, "ok")]
            # The hours go on: the weekly job runs once the lease is free, once.
            end = parse_ts("2026-03-31T08:00:00").replace(tzinfo=BERLIN)
            while clock.now() < end:  # by the minute at 04:xx, by the hour otherwise
                clock.advance(3600 if clock.now().astimezone(BERLIN).hour != 4 else 60)
                await _tick(app)
            runs = await _rows(app, "SELECT at, job FROM memory_log WHERE action = 'run' ORDER BY at, id")
            weekly = await app._cron_store.get(INTERNAL_WEEKLY)  # type: ignore[union-attr]

    at = [(r["job"], parse_ts(r["at"]).astimezone(BERLIN)) for r in runs]
    monday = [(job, f"{t:%m-%d %H:%M}") for job, t in at if t.date().isoformat() == "2026-03-23"]
    assert [job for job, _ in monday] == ["daily_compress", "weekly_compress"], monday
    assert monday[1][1] > monday[0][1] and monday[1][1] < "03-23 05:00", monday
    assert [f"{t:%m-%d}" for job, t in at if job == "weekly_compress"] == ["03-23", "03-30"]
    assert weekly is not None and weekly.last_status == "ok" and weekly.due_at is None


async def test_a_fact_said_after_midnight_in_shanghai_is_cited_with_the_users_day(tmp_path: Path) -> None:
    """03:00 on 2026-03-20 in Shanghai is 19:00 UTC on the 19th: the prompt's
    citation, /memory, /memory <words> and /export all say the 20th, the
    day the user said it (as its Tier 3 event does)."""
    model = MonthModel()
    clock = ManualClock("2026-03-19T18:00:00Z")
    async with FakeOpenAI(api_key="sk-month-key-0123456789", responder=model) as fake:
        async with gateway(tmp_path, fake, clock) as app:
            assert await say(app, clock, "/timezone Asia/Shanghai", "bob")
            clock.set("2026-03-19T19:00:00Z")
            await say(app, clock, "DECISION builds use toolchain zebra", "bob")
            clock.advance(300)
            await _tick(app)
            events = await _rows(app, "SELECT event_date FROM daily_events WHERE owner = 'echo:bob'")
            assert [e[0] for e in events] == ["2026-03-20"]
            clock.advance(600)
            await say(app, clock, "which toolchain do builds use?", "bob")
            prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
            overview = await say(app, clock, "/memory", "bob")
            found = await say(app, clock, "/memory toolchain", "bob")
            await say(app, clock, "/export", "bob")
            echo = app.channels["echo"]
            attachment = echo.sent[-1].attachment  # type: ignore[attr-defined]
            assert attachment is not None
            export = attachment.data.decode("utf-8")

    cited = re.findall(r"\[m\d+ · (\d{4}-\d{2}-\d{2})[^\]]*\] builds use toolchain zebra", prompt)
    assert cited == ["2026-03-20"], prompt
    assert "2026-03-20" in overview and "2026-03-19" not in overview, overview
    assert "2026-03-20" in found and "2026-03-19" not in found, found
    fact = next(line for line in export.splitlines() if "builds use toolchain zebra" in line)
    assert "2026-03-20" in fact and "2026-03-19" not in fact, fact
