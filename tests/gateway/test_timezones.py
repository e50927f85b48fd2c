"""Each user's own time zone: /timezone, the prompt's date, their schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gateway.commands import UserCommands
from gateway.cron import CronStore
from gateway.cron_tools import cron_tools
from gateway.sessions import SessionStore
from gateway.timezones import TimezoneError, UserTimezones, parse_timezone, zone_name
from gateway.tools import ToolContext
from gateway.userdata import UserData
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI

from .conftest import make_rig
from .test_cron import old_cron_db

ALICE = "telegram:100"
BOB = "telegram:200"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Asia/Shanghai", "Asia/Shanghai"),
        ("asia/shanghai", "Asia/Shanghai"),
        ("Shanghai", "Asia/Shanghai"),
        ("new york", "America/New_York"),
        ("New_York", "America/New_York"),
        ("beijing", "Asia/Shanghai"),
        ("上海", "Asia/Shanghai"),
        ("东京", "Asia/Tokyo"),
        ("UTC", "UTC"),
        ("gmt", "UTC"),
        ("UTC+8", "UTC+08:00"),
        ("GMT-05:30", "UTC-05:30"),
        ("+0800", "UTC+08:00"),
        ("utc + 5", "UTC+05:00"),
        ("UTC+0", "UTC"),
        ("EST5EDT", "EST5EDT"),
    ],
)
def test_what_people_type_names_a_zone(text: str, name: str) -> None:
    assert zone_name(parse_timezone(text)) == name


@pytest.mark.parametrize("text", ["", "Mars/Olympus", "UTC+15", "UTC-13", "+08:75", "../../etc/passwd", "Asia/", "x" * 500])
def test_anything_else_is_a_clear_error(text: str) -> None:
    with pytest.raises(TimezoneError):
        parse_timezone(text)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        # How Chinese speakers name an offset: "the East Eighth zone", "Beijing time".
        ("东八区", "UTC+08:00"),
        ("东8区", "UTC+08:00"),
        ("西五区", "UTC-05:00"),
        ("东十二区", "UTC+12:00"),
        ("零时区", "UTC"),
        ("北京时间", "Asia/Shanghai"),
        # Abbreviations people type for zones with summer time: the zone, so
        # summer is right too (tzdata's "EST" is a fixed UTC-5 all year).
        ("PST", "America/Los_Angeles"),
        ("est", "America/New_York"),
        ("EDT", "America/New_York"),
        ("JST", "Asia/Tokyo"),
    ],
)
def test_chinese_zone_names_and_common_abbreviations_name_a_zone(text: str, name: str) -> None:
    assert zone_name(parse_timezone(text)) == name


@pytest.mark.parametrize("text", ["东十五区", "西十三区", "东零区x", "CST"])
def test_an_offset_out_of_range_or_an_ambiguous_abbreviation_is_refused(text: str) -> None:
    # CST is China's and the US Central's: guessing would put one of them 14 hours off.
    with pytest.raises(TimezoneError):
        parse_timezone(text)


def test_a_stored_name_reads_back_as_the_same_zone() -> None:
    for text in ("Asia/Kolkata", "UTC-03:30", "UTC"):
        assert zone_name(parse_timezone(zone_name(parse_timezone(text)))) == zone_name(parse_timezone(text))


async def test_a_users_zone_persists_and_is_theirs_alone(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as sessions:
        zones = UserTimezones(sessions.db)
        assert await zones.get(ALICE) is None
        await zones.set(ALICE, ZoneInfo("Asia/Shanghai"), at=clock.now())
        await zones.set(BOB, timezone(timedelta(hours=-5)), at=clock.now())
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as sessions:
        zones = UserTimezones(sessions.db)
        assert zone_name(await zones.get(ALICE) or UTC) == "Asia/Shanghai"
        assert zone_name(await zones.get(BOB) or UTC) == "UTC-05:00"
        # merge-identities: a handle's zone goes to the user unless they have one.
        await zones.set("feishu:ou_1", ZoneInfo("Europe/Berlin"), at=clock.now())
        assert await zones.move_owner("feishu:ou_1", ALICE) == 0
        assert zone_name(await zones.get(ALICE) or UTC) == "Asia/Shanghai"
        assert await zones.get("feishu:ou_1") is None
        await zones.set("feishu:ou_2", ZoneInfo("Europe/Berlin"), at=clock.now())
        assert await zones.move_owner("feishu:ou_2", "telegram:300") == 1
        assert zone_name(await zones.get("telegram:300") or UTC) == "Europe/Berlin"
        assert await zones.forget_owner(ALICE) == 1 and await zones.get(ALICE) is None
        assert zone_name(await zones.get(BOB) or UTC) == "UTC-05:00"


async def test_timezone_command_sets_shows_and_resets(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    clock.set("2026-11-22T20:00:00Z")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        rig.loop.commands = UserCommands(rig.backend, clock=clock, timezones=zones, default_tz=ZoneInfo("Europe/London"))
        rig.loop.timezones = zones
        shown = (await rig.ask("/timezone", chat="100")).text
        assert shown.startswith("I use the gateway's time zone, Europe/London (now 2026-11-22 20:00)")
        assert (await rig.ask("/timezone Mars", chat="100")).text.startswith("I don't know the time zone \"Mars\"")
        done = (await rig.ask("/timezone Shanghai", chat="100")).text
        assert done == ("Your time zone is now Asia/Shanghai (it is 2026-11-23 04:00 there). "
                        "Dates and new schedules use it.")
        assert (await rig.ask("/tz", chat="100")).text.startswith("Your time zone: Asia/Shanghai (now 2026-11-23 04:00)")
        assert (await rig.ask("/timezone 重置", chat="100")).text == "已恢复为网关的时区 Europe/London。"
        assert await zones.get(ALICE) is None
        assert "private chat" in (await rig.ask("/timezone UTC+8", chat="-5", group=True, mentioned=True)).text
        assert await zones.get(ALICE) is None
        await rig.settle()
        assert fake_llm.requests == []  # answered without the model
        assert await rig.sessions.window("telegram:100") == []  # and kept out of history


def test_a_near_miss_names_the_zone_it_is_close_to() -> None:
    with pytest.raises(TimezoneError) as near:
        parse_timezone("Asia/Shangai")
    assert near.value.nearest == "Asia/Shanghai"
    with pytest.raises(TimezoneError) as city:
        parse_timezone("Tokio")
    assert city.value.nearest == "Asia/Tokyo"
    with pytest.raises(TimezoneError) as far:
        parse_timezone("Mars/Olympus")
    assert far.value.nearest is None


async def test_an_unknown_zone_is_answered_plainly_in_the_chats_language(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        commands = UserCommands(rig.backend, clock=clock, timezones=zones)
        rig.loop.commands = commands
        mars = (await rig.ask("/timezone Mars/Olympus", chat="100")).text
        assert mars == ("I don't know the time zone \"Mars/Olympus\". Send a city or a zone name, "
                        "for example /timezone Berlin, /timezone Asia/Shanghai or /timezone UTC+8.")
        near = (await rig.ask("/timezone Asia/Shangai", chat="100")).text
        assert near.endswith("Did you mean /timezone Asia/Shanghai?")
        zh = await commands.run("timezone", "Mars/Olympus", user=ALICE, private=True, chat_zh=True)
        assert zh == "我不认识时区“Mars/Olympus”。请发送城市或时区名，例如 /timezone 上海、/timezone Asia/Shanghai 或 /timezone UTC+8。"
        zh_near = await commands.run("timezone", "Europe/Berlinn", user=ALICE, private=True, chat_zh=True)
        assert zh_near.endswith("你是不是想说 /timezone Europe/Berlin？")
        assert "unknown time zone" not in mars + near + zh + zh_near
        # An abbreviation of two zones hours apart: name both, so the user picks.
        cst = (await rig.ask("/timezone CST", chat="100")).text
        assert cst == ("\"CST\" names more than one time zone: send /timezone Asia/Shanghai (China) "
                       "or /timezone America/Chicago (US Central).")
        zh_cst = await commands.run("timezone", "cst", user=ALICE, private=True, chat_zh=True)
        assert zh_cst == "“cst”可以指不止一个时区：请发送 /timezone Asia/Shanghai（中国）或 /timezone America/Chicago（美国中部）。"
        assert await zones.get(ALICE) is None  # nothing was set


async def test_the_prompt_dates_the_conversation_in_the_users_zone(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    clock.set("2026-11-22T20:00:00Z")  # Sunday in London, Monday in Shanghai
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        rig.loop.commands = UserCommands(rig.backend, clock=clock, timezones=zones)
        rig.loop.timezones = zones
        await rig.ask("/timezone Asia/Shanghai", chat="100")
        fake_llm.queue_reply("Morning!")
        await rig.ask("what day is it?", chat="100")
        fake_llm.queue_reply("Evening!")
        await rig.ask("what day is it?", chat="200", sender="200")
        await rig.settle()
        alice, bob = (r["messages"][0]["content"] for r in fake_llm.requests)
        # The time of day with the latest message, on each one's clock.
        assert [r["messages"][-1]["content"] for r in fake_llm.requests] == [
            "<time>04:00</time>\nwhat day is it?", "<time>20:00</time>\nwhat day is it?"
        ]
        assert "Current date: 2026-11-23 Monday (Asia/Shanghai)" in alice
        assert "Current date: 2026-11-22 Sunday (UTC)" in bob


async def test_a_users_schedule_runs_in_their_zone(tmp_path: Path, clock: ManualClock) -> None:
    clock.set("2026-11-22T20:00:00Z")
    store = await CronStore.open(tmp_path / "cron.db", clock, "UTC")
    try:
        add, list_jobs, _ = cron_tools(store)
        ctx = ToolContext(user=ALICE, channel="telegram", chat_id="100", private=True, tz=ZoneInfo("Asia/Shanghai"))
        said = await add.handler({"schedule": "0 9 * * *", "message": "plan my day"}, ctx)
        assert said.endswith("(times in Asia/Shanghai)")
        [job] = await store.list(ALICE)
        # 09:00 in Shanghai is 01:00 UTC; next is the 23rd (it is 04:00 there now).
        assert (job.timezone, job.next_run_at) == ("Asia/Shanghai", "2026-11-23T01:00:00Z")
        assert "'0 9 * * *', Asia/Shanghai ->" in await list_jobs.handler({}, ctx)
        await store.record_run(job, ran_at=datetime(2026, 11, 23, 1, tzinfo=UTC), status="ok", error=None)
        assert (await store.get(job.id)).next_run_at == "2026-11-24T01:00:00Z"  # type: ignore[union-attr]
        # Without a zone of their own: the gateway's, as before.
        plain = ToolContext(user=BOB, channel="telegram", chat_id="200", private=True)
        assert (await add.handler({"schedule": "0 9 * * *", "message": "bees"}, plain)).endswith("(times in UTC)")
        [bobs] = await store.list(BOB)
        assert (bobs.timezone, bobs.next_run_at) == ("", "2026-11-23T09:00:00Z")
        # A fixed offset keeps too.
        await store.add(schedule="30 8 * * *", message="x", channel="telegram", chat_id="1", user="u",
                        tz=parse_timezone("UTC-05:30"))
        [odd] = await store.list("u")
        assert (odd.timezone, odd.next_run_at) == ("UTC-05:30", "2026-11-23T14:00:00Z")
    finally:
        await store.close()


async def test_an_old_cron_db_gains_the_zone_column(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cron.db"
    await old_cron_db(
        path, 2,
        "INSERT INTO cron_jobs (id, schedule, message, kind, channel, chat_id, user, created_at, next_run_at) "
        "VALUES ('job-1', '0 9 * * *', 'hi', 'agent', 'telegram', '1', 'u', '2026-01-01T00:00:00.000Z', "
        "'2026-01-02T09:00:00.000Z')",
    )
    store = await CronStore.open(path, clock, "UTC")
    try:
        job = await store.get("job-1")
        assert job is not None and job.timezone == "" and store.zone_of(job) == ZoneInfo("UTC")
    finally:
        await store.close()


async def test_forget_all_erases_the_zone_too(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        everything = UserData(rig.backend, rig.sessions, timezones=zones)
        rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock, timezones=zones)
        await rig.ask("/timezone Berlin", chat="100")
        await rig.ask("/timezone Tokyo", chat="200", sender="200")
        fake_llm.queue_reply("ok")
        await rig.ask("hello", chat="100")
        code = (await rig.ask("/forget all", chat="100")).text.rsplit(" ", 1)[1]
        await rig.ask(f"/forget all {code}", chat="100")
        assert await zones.get(ALICE) is None
        assert zone_name(await zones.get(BOB) or UTC) == "Asia/Tokyo"


async def test_recall_reads_yesterday_in_the_users_zone(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    from memory import NewMemory

    clock.set("2026-03-01T20:30:00Z")  # 04:30 on the 2nd in Shanghai
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        rig.loop.commands = UserCommands(rig.backend, clock=clock, timezones=zones)
        rig.loop.timezones = zones
        await rig.engine.add(NewMemory(owner=ALICE, content="lunch with Wei at the noodle bar"), at="2026-03-01T04:00:00Z")
        await rig.engine.add(NewMemory(owner=ALICE, content="lunch with Wei, dumplings this time"), at="2026-02-28T10:00:00Z")
        await rig.ask("/timezone Asia/Shanghai", chat="100")
        fake_llm.queue_reply("The noodle bar.")
        await rig.ask("where did I have lunch with Wei yesterday?", chat="100")
        block = fake_llm.requests[-1]["messages"][-1]["content"]
        assert block.index("noodle bar") < block.index("dumplings")


async def test_a_zone_that_cannot_be_read_costs_the_zone_not_the_reply(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    class Broken(UserTimezones):
        async def get(self, owner: str) -> None:
            raise OSError("disk I/O error")

    clock.set("2026-11-22T20:00:00Z")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.timezones = Broken(rig.sessions.db)
        fake_llm.queue_reply("Hello!")
        assert (await rig.ask("hi", chat="100")).text == "Hello!"
        assert "Current date: 2026-11-22 Sunday (UTC)" in fake_llm.requests[-1]["messages"][0]["content"]


async def test_the_cache_of_users_zones_is_capped_and_forgets_nothing(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as sessions:
        zones = UserTimezones(sessions.db, users_kept=4)
        await zones.set(ALICE, ZoneInfo("Asia/Shanghai"), at=clock.now())
        for i in range(20):  # thousands of users over months: a capped cache
            assert await zones.get(f"telegram:{i}") is None
        assert len(zones._cache) <= 4
        assert await zones.get(ALICE) == ZoneInfo("Asia/Shanghai")  # read again from gateway.db
