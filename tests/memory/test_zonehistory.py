"""memory/zonehistory.py: the zones a user lived in, on a real memory.db."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from memory import ManualClock, MemoryEngine
from memory.clock import format_ts, local_day
from memory.zonehistory import Lived, lived_periods, lived_wall, read_gateway_spans, read_spans

TOKYO, NY, BERLIN = ZoneInfo("Asia/Tokyo"), ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")


def at(day: str, hm: str, tz: ZoneInfo) -> datetime:
    return datetime.fromisoformat(f"{day}T{hm}").replace(tzinfo=tz).astimezone(UTC)


async def test_a_moment_is_dated_in_the_zone_in_force_then(engine: MemoryEngine) -> None:
    # Tokyo from 1 May (when she set it), New York from 4 May 20:00 there.
    await engine.zone_changed("alice", TOKYO, since=format_ts(at("2026-05-01", "12:00", TOKYO)),
                              at=at("2026-05-04", "20:00", NY))
    lived = await engine.lived("alice", NY)
    assert isinstance(lived, Lived)
    said = format_ts(at("2026-05-04", "08:30", TOKYO))  # 3 May, 19:30 in New York
    assert local_day(said, lived) == "2026-05-04"
    assert local_day(said, NY) == "2026-05-03"
    assert local_day(format_ts(at("2026-05-04", "21:00", NY)), lived) == "2026-05-04"  # after: New York's
    # Before the span (said before it was kept): today's zone, as before.
    assert local_day(format_ts(at("2026-04-20", "08:30", TOKYO)), lived) == "2026-04-19"
    # A wall time made on it is read on today's zone.
    assert datetime(2026, 5, 5, tzinfo=lived).astimezone(UTC) == at("2026-05-05", "00:00", NY)
    # Another user never moved: their zone as given.
    assert await engine.lived("bob", NY) is NY


async def test_a_day_named_today_is_the_moments_that_were_that_day_where_she_was(engine: MemoryEngine) -> None:
    # She leaves Tokyo at 11:00 on 5 May there (22:00 on 4 May in New York).
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    lived = await engine.lived("alice", NY)
    may4 = [(at("2026-05-04", "00:00", NY), at("2026-05-05", "00:00", NY))]
    got = lived_periods(may4, lived)
    # Tokyo's 4 May, then New York's 4 May from when she got there: the Tokyo
    # morning of 5 May between them is not 4 May.
    assert got == [(at("2026-05-04", "00:00", TOKYO), at("2026-05-05", "00:00", TOKYO)),
                   (at("2026-05-05", "11:00", TOKYO), at("2026-05-05", "00:00", NY))]
    # "Just now" (not whole days) stays as it is.
    recent = [(at("2026-05-05", "08:00", NY), at("2026-05-05", "11:00", NY))]
    assert lived_periods(recent, lived) == recent
    assert lived_periods(may4, NY) == may4  # no history: unchanged


async def test_each_change_starts_where_the_last_ended_and_a_clock_stepped_back_drops_the_future(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    await engine.zone_changed("alice", NY, since=format_ts(at("2026-05-05", "11:00", TOKYO) + timedelta(hours=1)),
                              at=at("2026-05-10", "09:00", NY))
    spans = await read_spans(engine.db, "alice")
    assert [(s, u, str(z)) for s, u, z in spans] == [
        ("", format_ts(at("2026-05-05", "11:00", TOKYO)), "Asia/Tokyo"),
        (format_ts(at("2026-05-05", "11:00", TOKYO) + timedelta(hours=1)), format_ts(at("2026-05-10", "09:00", NY)),
         "America/New_York"),
    ]
    # The clock stepped back before the second change: it is dropped, the new one ends the first.
    await engine.zone_changed("alice", BERLIN, since="", at=at("2026-05-08", "09:00", BERLIN))
    assert [str(z) for _, _, z in await read_spans(engine.db, "alice")] == ["Asia/Tokyo", "Europe/Berlin"]


async def test_forgetting_a_user_forgets_where_they_were(engine: MemoryEngine) -> None:
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    await engine.zone_changed("bob", BERLIN, since="", at=at("2026-05-05", "11:00", TOKYO))
    await engine.forget_owner("alice")
    assert await read_spans(engine.db, "alice") == ()
    assert await engine.lived("alice", NY) is NY
    assert len(await read_spans(engine.db, "bob")) == 1


async def test_a_days_noon_is_noon_where_she_was_that_day(engine: MemoryEngine) -> None:
    """A day log with no line time is dated at its day's noon: New York's
    noon on 4 May is 01:00 on 5 May in Tokyo, where she was."""
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    lived = await engine.lived("alice", NY)
    assert lived_wall(date(2026, 5, 4), time(12), lived) == at("2026-05-04", "12:00", TOKYO)
    assert lived_wall(date(2026, 5, 6), time(12), lived) == at("2026-05-06", "12:00", NY)  # in New York by then
    assert lived_wall(date(2026, 5, 4), time(12), NY) == at("2026-05-04", "12:00", NY)


async def test_merged_identities_bring_the_handles_zones_unless_the_user_has_their_own(
    engine: MemoryEngine,
) -> None:
    from memory.merge import move_owner
    from memory.types import Category, NewMemory

    for handle in ("tg:alice", "fs:alice"):
        await engine.add(NewMemory(owner=handle, content=f"{handle} likes tea", category=Category.CONFIG))
    await engine.zone_changed("tg:alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    await engine.zone_changed("fs:alice", BERLIN, since="", at=at("2026-05-05", "11:00", TOKYO))
    await engine.zone_changed("alice", NY, since="", at=at("2026-06-01", "11:00", NY))
    await move_owner(engine, "tg:alice", "ann", job="merge")
    assert [str(z) for _, _, z in await read_spans(engine.db, "ann")] == ["Asia/Tokyo"]
    assert await read_spans(engine.db, "tg:alice") == ()
    await move_owner(engine, "fs:alice", "alice", job="merge")  # she has her own: hers stay
    assert [str(z) for _, _, z in await read_spans(engine.db, "alice")] == ["America/New_York"]
    assert await read_spans(engine.db, "fs:alice") == ()


async def test_a_damaged_record_is_read_as_none_and_the_next_change_starts_it_again(engine: MemoryEngine) -> None:
    for bad in ("not json", '{"a": 1}', '[["x"], 3, ["", "2026-05-01T00:00:00Z", "Mars/Olympus"]]',
                '[["", "garbage", "Asia/Tokyo"], ["soon", "2026-05-01T00:00:00Z", "Asia/Tokyo"]]'):
        await engine.db.write("INSERT INTO meta(key, value) VALUES ('zones:alice', ?) "
                              "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (bad,))
        engine._zones.pop("alice")
        assert await engine.lived("alice", NY) is NY  # today's zone: as before any was kept
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    assert [str(z) for _, _, z in await read_spans(engine.db, "alice")] == ["Asia/Tokyo"]


async def test_the_gateways_old_zone_dates_what_those_without_their_own_said_under_it(engine: MemoryEngine) -> None:
    """gateway.timezone UTC, then Shanghai from 10 Nov 12:00 UTC, then Berlin:
    one shared record. Bob set no zone: what he said under UTC is dated
    there. Carol set Tokyo: hers are hers. Alice left Tokyo for the
    gateway's zone (/timezone reset) on 1 Nov: her Tokyo days stay Tokyo's."""
    shanghai = ZoneInfo("Asia/Shanghai")
    own = {"carol": TOKYO}

    async def zone_of(user: str) -> ZoneInfo | None:
        return own.get(user)

    engine.zone_of = zone_of
    assert not await engine.gateway_zone(UTC, at=at("2026-10-01", "00:00", UTC))  # the first run that keeps it
    assert not await engine.gateway_zone(UTC, at=at("2026-10-02", "00:00", UTC))  # the same zone again
    late = format_ts(at("2026-11-09", "23:30", UTC))  # 10 Nov in Shanghai
    assert await engine.lived("bob", UTC) is UTC  # no history yet
    assert await engine.gateway_zone(shanghai, at=at("2026-11-10", "12:00", UTC))
    assert [(s, u, str(z)) for s, u, z in await read_gateway_spans(engine.db)] == [
        ("", format_ts(at("2026-11-10", "12:00", UTC)), "UTC")]
    assert local_day(late, await engine.lived("bob", shanghai)) == "2026-11-09"
    assert local_day(format_ts(at("2026-11-11", "07:30", shanghai)), await engine.lived("bob", shanghai)) == "2026-11-11"
    assert await engine.lived("carol", TOKYO) is TOKYO  # her own zone: the gateway's history is not hers
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-11-01", "12:00", UTC))
    alice = await engine.lived("alice", shanghai)
    assert local_day(format_ts(at("2026-10-20", "08:30", TOKYO)), alice) == "2026-10-20"  # Tokyo's
    assert local_day(late, alice) == "2026-11-09"  # back on the gateway's, then UTC
    # A later change starts where the last ended; restarting on it records nothing.
    assert await engine.gateway_zone(BERLIN, at=at("2026-12-01", "12:00", UTC))
    assert not await engine.gateway_zone(BERLIN, at=at("2026-12-02", "12:00", UTC))
    assert [str(z) for _, _, z in await read_gateway_spans(engine.db)] == ["UTC", "Asia/Shanghai"]
    assert local_day(late, await engine.lived("bob", BERLIN)) == "2026-11-09"
    # Without knowing who set a zone (no zone_of), no one is taken to be on the gateway's.
    engine.zone_of = None
    assert await engine.lived("bob", BERLIN) is BERLIN


async def test_a_day_between_two_spans_is_read_on_todays_zone_as_its_moments_are() -> None:
    """Tokyo until 3 May, back on the gateway's zone (New York today), then
    Berlin from 8 May: 5 May, between them, is New York's 5 May; it was
    left out of the days "5 May" named."""
    spans = [("", format_ts(at("2026-05-03", "12:00", NY)), TOKYO),
             (format_ts(at("2026-05-08", "12:00", NY)), format_ts(at("2026-05-10", "12:00", NY)), BERLIN)]
    lived = Lived(NY, spans)
    may5 = [(at("2026-05-05", "00:00", NY), at("2026-05-06", "00:00", NY))]
    assert lived_periods(may5, lived) == may5
    assert local_day(format_ts(at("2026-05-05", "23:30", NY)), lived) == "2026-05-05"


async def test_a_handle_with_no_memories_brings_its_zones_to_the_user_all_the_same(engine: MemoryEngine) -> None:
    """merge-identities returned at once for a handle owning no rows and
    left its zone record behind, under a name no erasure of the user reaches."""
    from memory.merge import move_owner

    await engine.zone_changed("tg:alice", TOKYO, since="", at=at("2026-05-05", "11:00", TOKYO))
    assert await engine.lived("ann", NY) is NY
    counts = await move_owner(engine, "tg:alice", "ann", job="merge")
    assert not any(counts.values())  # no rows moved
    assert [str(z) for _, _, z in await read_spans(engine.db, "ann")] == ["Asia/Tokyo"]
    assert await read_spans(engine.db, "tg:alice") == ()
    assert isinstance(await engine.lived("ann", NY), Lived)  # not the cached "never moved"


async def test_a_zone_named_after_a_reset_keeps_the_gap_as_the_gateways_and_a_first_one_records_nothing(
    engine: MemoryEngine,
) -> None:
    """record_return: nothing for one who never set a zone (the gateway's
    was a guess); after a reset, the gap in the gateway's zones then."""
    from memory.zonehistory import record_return

    assert not await record_return(engine.db, "bob", UTC, at=at("2026-05-06", "12:00", UTC))
    assert await read_spans(engine.db, "bob") == ()
    await engine.zone_changed("alice", TOKYO, since="", at=at("2026-05-03", "12:00", UTC))  # her reset
    await engine.zone_named("alice", BERLIN, at=at("2026-05-06", "12:00", UTC))
    lived = await engine.lived("alice", NY)
    assert [(u, str(z)) for _, u, z in lived.spans] == [  # type: ignore[union-attr]
        (format_ts(at("2026-05-03", "12:00", UTC)), "Asia/Tokyo"),
        (format_ts(at("2026-05-06", "12:00", UTC)), "Europe/Berlin")]
    assert local_day(format_ts(at("2026-05-04", "23:30", UTC)), lived) == "2026-05-05"  # Berlin's, the gateway's then
    # Named again at once (the same moment): nothing more.
    assert not await record_return(engine.db, "alice", BERLIN, at=at("2026-05-06", "12:00", UTC))
