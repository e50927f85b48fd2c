"""A traveller's dates through the real App (the fake model, real SQLite
files, a moving clock): what she said in Tokyo stays dated the day she
lived it there after ``/timezone`` moves her to New York: the day a
recalled fact is cited with, the facts "yesterday" finds, Core Memory's
day, and the day log of a batch the memory model took only after she
moved. ``/jobs`` shows a one-time reminder on her clock now. A gateway
whose ``gateway.timezone`` changed between runs moves the users without
a zone of their own: their daily job and "yesterday" follow it, no run
missed or doubled across the restart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memory import Category, ManualClock, NewMemory, Provenance
from memory.clock import format_ts
from tests.fakes.openai_server import Reply, split_user_content, text_of
from tests.gateway.test_remembering_e2e import Model, fact, running, say
from tests.gateway.test_time_walk_e2e import NY, SHANGHAI, gateway, local, on_clock, store_of, walk_jobs
from tests.gateway.yearwalk import core_memory

TOKYO = ZoneInfo("Asia/Tokyo")
ALICE = "alice"
OWNER = f"echo:{ALICE}"


class Flaky(Model):
    """The memory model can be down (its batch waits, retried later)."""

    memory_down = False

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.memory_down and body.get("response_format", {}).get("type") == "json_object":
            return Reply(status=503, content=None)
        return super().__call__(body)


def recalled(fake: Any) -> str:
    """The <memories> block of the last chat request."""
    return split_user_content(text_of(fake.last_chat()["messages"][-1]["content"]))[0]


async def test_what_she_said_in_tokyo_keeps_its_tokyo_day_after_she_moves_to_new_york(
    tmp_path: Path, clock: ManualClock
) -> None:
    """08:30 on 4 May in Tokyo is 19:30 on 3 May in New York. Read on her
    new clock, the fact was said "on 3 May" and "yesterday" (4 May in New
    York) missed it; she lived it on 4 May."""
    model = Flaky()
    clock.set(local("2026-05-04", "08:00", TOKYO))
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):  # gateway.timezone unset: UTC
        await say(app, clock, "/timezone Asia/Tokyo", ALICE)
        engine = app.backend.engine  # type: ignore[attr-defined]
        clock.set(local("2026-05-04", "08:30", TOKYO))
        await engine.add(NewMemory(owner=OWNER, tier=1, content="Alice prefers window seats on night flights",
                                   category=Category.CONFIG, importance=0.9,
                                   provenance=Provenance(date_from=format_ts(clock.now()), date_to=format_ts(clock.now()))))
        model.extractions.append(("passport", {"facts": [fact("Alice left her passport in the Shinjuku hotel safe",
                                                              category="decision")],
                                               "summary": "packing for the flight"}))
        await say(app, clock, "I left my passport in the hotel safe in Shinjuku", ALICE)
        clock.advance(200)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        assert model.extractions == []  # taken

        # She lands in New York: 4 May, 20:00 there (5 May, 09:00 in Tokyo).
        clock.set(local("2026-05-04", "20:00", NY))
        assert "America/New_York" in await say(app, clock, "/timezone America/New_York", ALICE)
        await say(app, clock, "where did I leave my passport?", ALICE)
        block = recalled(fake)
        assert "Shinjuku hotel safe" in block, block
        assert "2026-05-04" in block and "2026-05-03" not in block, block  # cited on the day she lived it
        core = core_memory(fake.last_chat())
        assert "· 2026-05-04] Alice prefers window seats" in core, core
        # /memory and /export date it so too.
        listed = await say(app, clock, "/memory", ALICE)
        assert "2026-05-04" in listed and "2026-05-03" not in listed, listed
        await say(app, clock, "/export", ALICE)
        echo = app.channels["echo"]
        exported = echo.sent[-1].attachment  # type: ignore[attr-defined]
        assert exported is not None
        text = exported.data.decode()
        assert "Shinjuku hotel safe" in text and "2026-05-04" in text and "2026-05-03" not in text, text
        # What it keeps to date her days is hers to see: where she was, until when (her clock now).
        assert "The zones you were in before, so what you said there keeps its day: Asia/Tokyo until 2026-05-04 20:00." \
            in text, text

        # The next morning in New York, "yesterday" is 4 May: the Tokyo morning is part of it.
        for ask in ("what did I tell you yesterday?", "我昨天跟你说了什么？"):
            clock.set(local("2026-05-05", "09:00", NY))
            await say(app, clock, ask, ALICE)
            block = recalled(fake)
            assert "Shinjuku hotel safe" in block, block

        # Two days later (7 May in New York) it is no longer "yesterday".
        clock.set(local("2026-05-07", "09:00", NY))
        await say(app, clock, "what did I tell you yesterday?", ALICE)
        assert "Shinjuku hotel safe" not in recalled(fake)


async def test_a_batch_the_memory_model_took_after_she_moved_is_dated_where_she_said_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The memory model is down when she speaks in Tokyo (08:30, 4 May)
    and back once she is in New York (3 May's evening there at the time
    she spoke): the day log's day and the lines' times the model reads are
    Tokyo's."""
    model = Flaky()
    clock.set(local("2026-05-04", "08:00", TOKYO))
    async with running(tmp_path, model, clock, by_hand=True) as (app, _):
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(local("2026-05-04", "08:30", TOKYO))
        model.memory_down = True
        await say(app, clock, "the ramen place near Shibuya station was the best", ALICE)
        clock.advance(200)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        waiting = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT content FROM extraction_buffer WHERE owner = ?", (OWNER,))
        assert any("Shibuya" in r[0] for r in waiting)  # kept for the retry
        clock.set(local("2026-05-04", "20:00", NY))
        await say(app, clock, "/timezone New York", ALICE)
        model.memory_down = False
        clock.advance(86400)  # past any backoff
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert reports and all(r.ok for r in reports)
        prompt = next(p for p in model.extraction_prompts if "Shibuya" in p)
        assert "2026-05-04 Mon 08:30] user: the ramen place" in prompt, prompt
        days = await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT event_date, summary FROM daily_events WHERE owner = ? ORDER BY id", (OWNER,))
        assert days[0][0] == "2026-05-04", days


async def test_jobs_shows_a_one_time_reminder_on_her_clock_now_with_the_time_she_asked_it_in(
    tmp_path: Path, clock: ManualClock
) -> None:
    """"Remind me on the 12th at 10" asked in New York is 23:00 in
    Shanghai: after /timezone, /jobs said "10:00 (America/New_York)", a
    time she had to work out; the moment is the same, shown on her clock."""
    clock.set(local("2026-11-09", "12:00", NY))
    async with running(tmp_path, Model(), clock) as (app, _):
        await say(app, clock, "/timezone New York", ALICE)
        store = store_of(app)
        once = await store.add(at=local("2026-11-12", "10:00", NY), message="call the NY office", channel="echo",
                               chat_id="c-alice", user=OWNER, private=True, tz=NY)
        listed = await say(app, clock, "/jobs", ALICE)
        assert f"[{once.id}] once, 2026-11-12 10:00 (America/New_York): call the NY office" in listed, listed
        clock.set(local("2026-11-11", "10:00", SHANGHAI))
        await say(app, clock, "/timezone Shanghai", ALICE)
        listed = await say(app, clock, "/jobs", ALICE)
        assert (f"[{once.id}] once, 2026-11-12 23:00 (Asia/Shanghai), set as 2026-11-12 10:00 (America/New_York): "
                "call the NY office") in listed, listed
        await say(app, clock, "我到上海了", ALICE)
        listed = await say(app, clock, "/jobs", ALICE)
        assert (f"[{once.id}] 一次，2026-11-12 23:00 (Asia/Shanghai)，设定时为 2026-11-12 10:00 (America/New_York): "
                "call the NY office") in listed, listed


@pytest.mark.parametrize(("back_at", "runs"), [
    # Back that evening: the pending 08:00 UTC (16:00 in Shanghai) becomes 08:00 Shanghai.
    ("2026-11-10 20:00", ["11-11 08:00", "11-12 08:00", "11-13 08:00"]),
    # Back after 08:00 Shanghai passed since the last run: that day's comes at the time it had, then 08:00.
    ("2026-11-11 10:00", ["11-11 16:00", "11-12 08:00", "11-13 08:00"]),
])
async def test_a_gateway_zone_changed_between_runs_moves_the_users_without_one_of_their_own(
    tmp_path: Path, clock: ManualClock, back_at: str, runs: list[str]
) -> None:
    """gateway.timezone UTC, then Asia/Shanghai after a restart. Bob set
    no zone: his "every day at 8" was 08:00 UTC (16:00 in Shanghai) and
    kept that time until it ran once more on the new zone; his "yesterday"
    is Shanghai's. No day's run missed, none twice."""
    bob = "bob"
    clock.set(datetime(2026, 11, 9, 12, 0, tzinfo=UTC))
    async with gateway(tmp_path, clock, by_hand=True) as (app, _):  # UTC; it ticks extraction itself
        assert await say(app, clock, "remind me every day at 8 to take my pills", bob) == "done."
        [pills] = [j for j in await store_of(app).list(f"echo:{bob}") if j.message == "take your pills"]
        assert pills.timezone == ""  # the gateway's
        clock.advance(600)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]  # that day's log
        ran = await walk_jobs(app, clock, datetime(2026, 11, 9, 13, 0, tzinfo=UTC), datetime(2026, 11, 10, 9, 0, tzinfo=UTC))
        assert [f"{t:%m-%d %H:%M}" for m, t in ran if m == "take your pills"] == ["11-10 08:00"]  # UTC
        clock.set(datetime(2026, 11, 10, 9, 30, tzinfo=UTC))
        await say(app, clock, "we repainted the kitchen blue", bob)  # 17:30 on 10 Nov in Shanghai
        clock.advance(600)
        await app.extraction.tick()  # type: ignore[attr-defined]

    back = datetime.fromisoformat(back_at).replace(tzinfo=SHANGHAI)
    clock.set(back)
    async with gateway(tmp_path, clock, gateway={"timezone": "Asia/Shanghai"}) as (app, fake):
        morning = local("2026-11-11", "07:00", SHANGHAI)
        if back < morning:
            # "Yesterday" at 07:00 on 11 Nov in Shanghai (still 10 Nov in UTC) is 10 Nov.
            clock.set(morning)
            await say(app, clock, "what did we talk about yesterday?", bob)
            block = recalled(fake)
            assert "repainted the kitchen" in block, block
        ran = await walk_jobs(app, clock, clock.now(), local("2026-11-13", "23:00", SHANGHAI))
        assert on_clock(ran, "take your pills", SHANGHAI) == runs


async def test_a_batch_across_her_midnight_writes_each_days_log_on_its_day(
    tmp_path: Path, clock: ManualClock
) -> None:
    """23:59 and 00:01 in Tokyo, one conversation, one batch: its day log
    went wholly under the first line's day, so "what did we talk about
    yesterday?" the next day missed the half said after midnight. Each
    day's lines now make that day's summary; a reply stays with the line
    it answers."""
    clock.set(local("2026-05-03", "23:00", TOKYO))
    async with gateway(tmp_path, clock, by_hand=True) as (app, fake):  # it ticks extraction itself
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(local("2026-05-03", "23:59", TOKYO))
        await say(app, clock, "we had sushi at Tsukiji tonight", ALICE)
        clock.set(local("2026-05-04", "00:01", TOKYO))
        await say(app, clock, "in the morning I take the train to Kyoto", ALICE)
        clock.advance(600)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert reports and all(r.ok for r in reports)
        days = [tuple(r) for r in await app.backend.engine.db.fetchall(  # type: ignore[attr-defined]
            "SELECT event_date, summary FROM daily_events WHERE owner = ? ORDER BY id", (OWNER,))]
        [(may3, before)] = [d for d in days if "Tsukiji" in d[1]]
        [(may4, after)] = [d for d in days if "Kyoto" in d[1]]
        assert (may3, may4) == ("2026-05-03", "2026-05-04"), days
        assert "Kyoto" not in before and "Tsukiji" not in after, days
        clock.set(local("2026-05-05", "09:00", TOKYO))
        await say(app, clock, "what did we talk about yesterday?", ALICE)
        block = recalled(fake)
        assert "Kyoto" in block and "Tsukiji" not in block, block


async def test_a_first_timezone_dates_what_was_said_before_in_it_as_before(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Bob chatted on the gateway's UTC, not knowing /timezone, then set
    Tokyo, where he had been all along: the gateway's zone was a guess,
    not where he lived, so what he said before is read in the zone he
    named (as before this was kept). Only a zone he had set, and left,
    keeps its days."""
    bob = "bob"
    model = Model()
    clock.set(local("2026-05-04", "08:00", TOKYO))  # 23:00 UTC on 3 May
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        model.extractions.append(("umbrella", {"facts": [fact("Bob left his umbrella at the Ginza office",
                                                              category="decision")], "summary": "errands"}))
        await say(app, clock, "I left my umbrella at the Ginza office", bob)  # 08:00 in Tokyo, 4 May
        clock.advance(200)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        assert model.extractions == []
        await say(app, clock, "/timezone Tokyo", bob)
        await say(app, clock, "where is my umbrella?", bob)
        block = recalled(fake)
        assert "Ginza office" in block and "2026-05-04" in block and "2026-05-03" not in block, block


async def test_a_gateway_zone_changed_between_runs_keeps_the_days_of_those_without_a_zone_of_their_own(
    tmp_path: Path, clock: ManualClock
) -> None:
    """gateway.timezone UTC, then Asia/Shanghai after a restart. Bob set
    no zone: at 23:30 UTC on 10 Nov (07:30 on 11 Nov in Shanghai) he said
    where his bike was, and that day's log is dated 10 Nov (UTC's). Read
    on the new zone alone, the fact was "said on 11 Nov" and "yesterday"
    on 12 Nov found it but not its day log; the gateway's old zone dates
    what was said under it, as a traveller's does. Carol, who set Tokyo
    herself, keeps her own days."""
    bob, carol = "bob", "carol"
    model = Model()
    clock.set(datetime(2026, 11, 10, 12, 0, tzinfo=UTC))
    async with running(tmp_path, model, clock, by_hand=True) as (app, _):  # gateway.timezone unset: UTC
        await say(app, clock, "/timezone Tokyo", carol)
        clock.set(datetime(2026, 11, 10, 23, 30, tzinfo=UTC))
        model.extractions.append(("bike", {"facts": [fact("Bob chained his bike at the east gate of the park",
                                                          category="decision")], "summary": "the bike"}))
        await say(app, clock, "I chained my bike at the east gate of the park", bob)
        model.extractions.append(("scarf", {"facts": [fact("Carol left her red scarf at the Ueno cafe",
                                                           category="decision")], "summary": "the scarf"}))
        await say(app, clock, "I left my red scarf at the Ueno cafe", carol)  # 08:30 on 11 Nov in Tokyo
        clock.advance(200)
        assert app.extraction is not None
        await app.extraction.tick()  # type: ignore[attr-defined]
        assert model.extractions == []

    clock.set(local("2026-11-12", "09:00", SHANGHAI))
    async with running(tmp_path, model, clock, gateway={"timezone": "Asia/Shanghai"}, by_hand=True) as (app, fake):
        await say(app, clock, "where is my bike?", bob)
        block = recalled(fake)
        assert "east gate" in block and "2026-11-10" in block and "2026-11-11" not in block, block
        await say(app, clock, "where is my red scarf?", carol)
        block = recalled(fake)
        assert "Ueno cafe" in block and "2026-11-11" in block and "2026-11-10" not in block, block
        # Restarted on the same zone: nothing more recorded.
    async with running(tmp_path, model, clock, gateway={"timezone": "Asia/Shanghai"}, by_hand=True) as (app, fake):
        await say(app, clock, "where is my bike?", bob)
        block = recalled(fake)
        assert "east gate" in block and "2026-11-10" in block and "2026-11-11" not in block, block


async def test_forget_all_names_the_zones_she_left_and_erases_them(tmp_path: Path, clock: ManualClock) -> None:
    """Tokyo, then New York, then back on the gateway's zone: memory keeps
    the two she left to date her days. /forget all's confirmation listed
    her time zone setting and the rest, never those, though it erased them."""
    from memory.zonehistory import read_spans

    clock.set(local("2026-05-01", "09:00", TOKYO))
    async with running(tmp_path, Model(), clock) as (app, _):
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(local("2026-05-04", "20:00", NY))
        await say(app, clock, "/timezone New York", ALICE)
        clock.advance(86400)
        await say(app, clock, "/timezone reset", ALICE)
        engine = app.backend.engine  # type: ignore[attr-defined]
        assert len(await read_spans(engine.db, OWNER)) == 2
        asked = await say(app, clock, "/forget all", ALICE)
        assert "the 2 time zones you were in before (kept to date your days)" in asked, asked
        done = await say(app, clock, f"/forget all {asked.rsplit(' ', 1)[1]}", ALICE)
        assert done.startswith("Erased for good: ") and "the 2 time zones you were in before" in done, done
        assert await read_spans(engine.db, OWNER) == ()

        await say(app, clock, "/timezone 东京", ALICE)
        clock.advance(3600)
        await say(app, clock, "/timezone 上海", ALICE)
        asked = await say(app, clock, "/forget 全部", ALICE)
        assert "你之前所在的 1 个时区的记录（用来确定你说话那天的日期）" in asked, asked
        assert "你设置的时区" in asked, asked


async def test_the_file_store_dates_her_lines_in_her_zone(tmp_path: Path, clock: ManualClock) -> None:
    """Memory disabled (the file store), gateway on UTC, Alice in Tokyo:
    at 23:30 UTC on 10 Nov her line went into 10 Nov's file at "23:30",
    on the gateway's calendar, not hers (08:30 on 11 Nov)."""
    from memory.filestore import FileMemory

    clock.set(datetime(2026, 11, 10, 12, 0, tzinfo=UTC))
    async with running(tmp_path, Model(), clock, memory={"enabled": False}) as (app, _):
        assert isinstance(app.backend, FileMemory)
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(datetime(2026, 11, 10, 23, 30, tzinfo=UTC))
        await say(app, clock, "the spare key is under the blue flowerpot", ALICE)
        folder = app.backend.user_dir(OWNER)
        [day] = [f for f in folder.iterdir() if f.name.startswith("2026-")]
        assert day.name == "2026-11-11.md"
        assert "- 08:30 user: the spare key is under the blue flowerpot" in day.read_text(encoding="utf-8")
