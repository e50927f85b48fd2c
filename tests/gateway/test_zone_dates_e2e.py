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

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memory import Category, ManualClock, NewMemory, Provenance
from memory.clock import format_ts
from tests.fakes.openai_server import Reply, split_user_content, text_of
from tests.gateway.test_remembering_e2e import Model, fact, running, say
from tests.gateway.test_time_walk_e2e import NY, SHANGHAI, local, store_of
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
    return split_user_content(text_of(fake.requests[-1]["messages"][-1]["content"]))[0]


async def test_what_she_said_in_tokyo_keeps_its_tokyo_day_after_she_moves_to_new_york(
    tmp_path: Path, clock: ManualClock
) -> None:
    """08:30 on 4 May in Tokyo is 19:30 on 3 May in New York. Read on her
    new clock, the fact was said "on 3 May" and "yesterday" (4 May in New
    York) missed it; she lived it on 4 May."""
    model = Flaky()
    clock.set(local("2026-05-04", "08:00", TOKYO))
    async with running(tmp_path, model, clock) as (app, fake):  # gateway.timezone unset: UTC
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
        core = core_memory(fake.requests[-1])
        assert "· 2026-05-04] Alice prefers window seats" in core, core

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
    async with running(tmp_path, model, clock) as (app, _):
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
