"""Set, reset, set again through the real App (the fake model, real
SQLite files, a moving clock): what a user said while back on the
gateway's zone (``/timezone reset``) keeps the gateway's day after they
name another zone, as what they said in a zone they set and left keeps
its (memory/zonehistory.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from memory import Category, ManualClock, NewMemory, Provenance
from memory.clock import format_ts
from memory.zonehistory import read_spans
from tests.gateway.test_remembering_e2e import Model, running, say
from tests.gateway.test_time_walk_e2e import NY, local
from tests.gateway.test_zone_dates_e2e import ALICE, OWNER, TOKYO, recalled


async def test_what_she_said_back_on_the_gateways_zone_keeps_its_day_after_she_sets_another(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Gateway on UTC. Tokyo from 1 May, reset on 3 May, New York from
    6 May. At 02:00 UTC on 4 May (between: UTC's 4 May, New York's 3 May)
    she said where her bike was. Read on New York, the gap's day was 3 May;
    she lived it on the gateway's, 4 May."""
    clock.set(local("2026-05-01", "09:00", TOKYO))
    async with running(tmp_path, Model(), clock) as (app, fake):  # gateway.timezone unset: UTC
        engine = app.backend.engine  # type: ignore[attr-defined]
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(datetime(2026, 5, 3, 12, 0, tzinfo=UTC))
        assert "UTC" in await say(app, clock, "/timezone reset", ALICE)
        clock.set(datetime(2026, 5, 4, 2, 0, tzinfo=UTC))
        stamp = format_ts(clock.now())
        await engine.add(NewMemory(owner=OWNER, content="Alice chained her bike at the north gate of the campus",
                                   category=Category.DECISION, importance=0.8,
                                   provenance=Provenance(date_from=stamp, date_to=stamp)))
        clock.set(datetime(2026, 5, 6, 12, 0, tzinfo=UTC))
        assert "America/New_York" in await say(app, clock, "/timezone New York", ALICE)
        await say(app, clock, "where did I chain my bike?", ALICE)
        block = recalled(fake)
        assert "north gate" in block, block
        assert "2026-05-04" in block and "2026-05-03" not in block, block
        # Her Tokyo days, then the gateway's UTC until she named New York.
        assert [(s, u, str(z)) for s, u, z in await read_spans(engine.db, OWNER)] == [
            (format_ts(local("2026-05-01", "09:00", TOKYO)), "2026-05-03T12:00:00Z", "Asia/Tokyo"),
            ("2026-05-03T12:00:00Z", "2026-05-06T12:00:00Z", "UTC")]


async def test_a_gateway_zone_changed_during_the_gap_dates_each_part_of_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The gateway ran on UTC, then on Asia/Shanghai after a restart in
    the middle of her gap: the part before is UTC's, the part after
    Shanghai's, as those days were dated for everyone on the gateway's."""
    shanghai = ZoneInfo("Asia/Shanghai")
    clock.set(local("2026-05-01", "09:00", TOKYO))
    async with running(tmp_path, Model(), clock) as (app, _):
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(datetime(2026, 5, 3, 12, 0, tzinfo=UTC))
        await say(app, clock, "/timezone reset", ALICE)
    clock.set(datetime(2026, 5, 5, 0, 0, tzinfo=UTC))
    async with running(tmp_path, Model(), clock, gateway={"timezone": "Asia/Shanghai"}) as (app, _):
        clock.set(datetime(2026, 5, 6, 12, 0, tzinfo=UTC))
        await say(app, clock, "/timezone New York", ALICE)
        spans = await read_spans(app.backend.engine.db, OWNER)  # type: ignore[attr-defined]
        assert [(s, u, str(z)) for s, u, z in spans][1:] == [
            ("2026-05-03T12:00:00Z", "2026-05-05T00:00:00Z", "UTC"),
            ("2026-05-05T00:00:00Z", "2026-05-06T12:00:00Z", str(shanghai))]


async def test_a_first_timezone_still_records_no_gateway_span(tmp_path: Path, clock: ManualClock) -> None:
    """Never set one before: the gateway's zone was a guess (the decision
    recorded in docs/ARCHITECTURE.md), nothing is recorded."""
    clock.set(local("2026-05-01", "09:00", NY))
    async with running(tmp_path, Model(), clock) as (app, _):
        await say(app, clock, "/timezone New York", ALICE)
        assert await read_spans(app.backend.engine.db, OWNER) == ()  # type: ignore[attr-defined]


async def test_the_file_store_keeps_each_line_on_the_day_of_the_zone_it_was_written_in(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Memory disabled (the file store), gateway on UTC. The files are the
    record: each line sits in the day file of the zone in force when it was
    written, and a later /timezone moves none (docs/ARCHITECTURE.md, the
    file store's row: a line's instant is not kept, only its day and wall
    time). Before her first /timezone: UTC's 10 Nov (08:30 on 11 Nov in
    Tokyo); in Tokyo: Tokyo's; after a reset: UTC's again, as the database
    store now dates that gap too."""
    from memory.filestore import FileMemory

    clock.set(datetime(2026, 11, 10, 23, 30, tzinfo=UTC))
    async with running(tmp_path, Model(), clock, memory={"enabled": False}) as (app, _):
        assert isinstance(app.backend, FileMemory)
        await say(app, clock, "the spare key is under the blue flowerpot", ALICE)
        await say(app, clock, "/timezone Tokyo", ALICE)
        clock.set(datetime(2026, 11, 11, 23, 30, tzinfo=UTC))
        await say(app, clock, "the bike lock code is on the fridge", ALICE)
        await say(app, clock, "/timezone reset", ALICE)
        clock.set(datetime(2026, 11, 12, 23, 30, tzinfo=UTC))
        await say(app, clock, "the parcel goes to the side door", ALICE)
        await say(app, clock, "/timezone New York", ALICE)
        folder = app.backend.user_dir(OWNER)
        logs = {f.name: f.read_text(encoding="utf-8") for f in folder.iterdir() if f.name.startswith("2026-")}
        assert "- 23:30 user: the spare key is under the blue flowerpot" in logs["2026-11-10.md"]
        assert "- 08:30 user: the bike lock code is on the fridge" in logs["2026-11-12.md"]
        assert "- 23:30 user: the parcel goes to the side door" in logs["2026-11-12.md"]
