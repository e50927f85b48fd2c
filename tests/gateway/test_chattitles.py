"""gateway/chattitles.py: groups' titles as the gateway last saw them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from structlog.testing import capture_logs

from channels.feishu import FeishuClient
from gateway.chattitles import (
    MAX_TITLE_CHARS, REFUSED_RETRY_AFTER, RETRY_AFTER, ChatTitles, group_name, read_refusals,
)
from gateway.sessions import SessionStore
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu


async def test_a_title_is_kept_as_last_seen_and_a_group_without_one_keeps_its_id(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-1", "Hiking   club\n", at="2026-03-01T12:00:00Z")
        await titles.seen("telegram", "-1", "Hiking club", at="2026-03-02T12:00:00Z")  # the same: not written
        await titles.seen("telegram", "-2", "x" * 500, at="2026-03-01T12:00:00Z")
        await titles.seen("telegram", "-3", "  ", at="2026-03-01T12:00:00Z")  # no title: nothing
        rows = await store.db.fetchall("SELECT chat_id, title, seen_at FROM chat_titles ORDER BY chat_id")
        assert [tuple(r) for r in rows] == [("-1", "Hiking club", "2026-03-01T12:00:00Z"),
                                            ("-2", "x" * MAX_TITLE_CHARS, "2026-03-01T12:00:00Z")]
        # Renamed: seen under the new title from then on, by another process's store too.
        await ChatTitles(store.db).seen("telegram", "-1", "Hikers", at="2026-03-03T12:00:00Z")
        names = await ChatTitles(store.db).names(["telegram:-1", "telegram:-3", "feishu:-1", "*"])
        assert names == {"telegram:-1": "Hikers"}
        assert [group_name(p, names) for p in ("telegram:-1", "telegram:-3")] == ["Hikers", "telegram:-3"]


async def test_a_feishu_groups_title_is_looked_up_once_a_day_in_the_background(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A Feishu event carries no chat title: it is asked of Feishu (GET
    /open-apis/im/v1/chats/:chat_id) the first time the group is seen, kept,
    and asked again only once the stored one is a day old."""
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "g.db", clock) as store:
        api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
        try:
            fake.chats["oc_team"] = "Team  lunch"
            titles = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            titles.untitled("feishu", "oc_team")
            titles.untitled("feishu", "oc_team")  # while asking: not asked twice
            await asyncio.wait_for(titles.idle(), 10)
            assert await titles.names(["feishu:oc_team"]) == {"feishu:oc_team": "Team lunch"}
            titles.untitled("feishu", "oc_team")
            titles.untitled("telegram", "-5")  # no lookup for Telegram: its messages carry the title
            await asyncio.wait_for(titles.idle(), 10)
            assert fake.chat_requests == ["oc_team"]

            # Another run within the day: the stored title is fresh enough.
            again = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            again.untitled("feishu", "oc_team")
            await asyncio.wait_for(again.idle(), 10)
            assert fake.chat_requests == ["oc_team"]

            # A day on, renamed: asked again and kept under the new name.
            clock.advance(timedelta(days=1, seconds=1))
            fake.chats["oc_team"] = "Team dinner"
            again.untitled("feishu", "oc_team")
            await asyncio.wait_for(again.idle(), 10)
            assert fake.chat_requests == ["oc_team", "oc_team"]
            assert await again.names(["feishu:oc_team"]) == {"feishu:oc_team": "Team dinner"}
        finally:
            await api.aclose()


async def test_a_failed_title_lookup_leaves_the_id_and_is_tried_again_later(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "g.db", clock) as store:
        api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01, max_attempts=1)
        try:
            titles = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            titles.untitled("feishu", "oc_gone")  # the bot is not in it (232011)
            await asyncio.wait_for(titles.idle(), 10)
            assert await titles.names(["feishu:oc_gone"]) == {}
            titles.untitled("feishu", "oc_gone")  # not asked again at once
            await asyncio.wait_for(titles.idle(), 10)
            assert fake.chat_requests == ["oc_gone"]

            clock.advance(RETRY_AFTER + timedelta(seconds=1))
            fake.chats["oc_gone"] = "Back again"
            titles.untitled("feishu", "oc_gone")
            await asyncio.wait_for(titles.idle(), 10)
            assert await titles.names(["feishu:oc_gone"]) == {"feishu:oc_gone": "Back again"}

            # A lookup that never answers is given up on, not waited for.
            slow = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title}, timeout=0.2)
            fake.chats["oc_slow"] = "Slow"
            fake.chat_gate = asyncio.Event()
            slow.untitled("feishu", "oc_slow")
            await asyncio.wait_for(slow.idle(), 10)
            assert await slow.names(["feishu:oc_slow"]) == {}
            fake.chat_gate.set()
            await slow.aclose()
        finally:
            await api.aclose()


async def _fails_while_the_clock_steps(titles: ChatTitles, fake: FakeFeishu, clock: ManualClock, step: timedelta) -> None:
    """oc_gone looked up and failed (the bot is not in it), the clock
    stepped by ``step`` while the lookup was under way."""
    fake.chat_gate = asyncio.Event()
    asked = len(fake.chat_requests)
    titles.untitled("feishu", "oc_gone")
    async with asyncio.timeout(10):
        while len(fake.chat_requests) == asked:
            await asyncio.sleep(0.01)
    clock.advance(step)
    fake.chat_gate.set()
    await asyncio.wait_for(titles.idle(), 10)
    fake.chat_gate = None


async def _asked_again(titles: ChatTitles, fake: FakeFeishu) -> bool:
    asked = len(fake.chat_requests)
    titles.untitled("feishu", "oc_gone")
    await asyncio.wait_for(titles.idle(), 10)
    return len(fake.chat_requests) > asked


async def test_a_failed_lookup_is_tried_again_ten_minutes_after_the_failure_whichever_way_the_clock_stepped(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The retry was counted from when the lookup began: a clock stepped
    back an hour while it was under way put the retry 70 minutes off, one
    stepped on an hour let the next message ask again at once. A step back
    after the failure kept it 70 minutes off too; now a wait is never
    longer than it was set for."""
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "g.db", clock) as store:
        api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01, max_attempts=1)
        try:
            hour, tick = timedelta(hours=1), timedelta(seconds=1)
            titles = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            await _fails_while_the_clock_steps(titles, fake, clock, -hour)  # stepped back mid-lookup
            clock.advance(RETRY_AFTER - tick)
            assert not await _asked_again(titles, fake)
            clock.advance(2 * tick)
            assert await _asked_again(titles, fake)  # 10 minutes after the failure, not 70

            clock.advance(RETRY_AFTER + tick)
            await _fails_while_the_clock_steps(titles, fake, clock, hour)  # stepped on mid-lookup
            assert not await _asked_again(titles, fake)  # not at once
            clock.advance(RETRY_AFTER - tick)
            assert not await _asked_again(titles, fake)
            clock.advance(2 * tick)
            assert await _asked_again(titles, fake)

            clock.advance(RETRY_AFTER + tick)
            await _fails_while_the_clock_steps(titles, fake, clock, timedelta(0))
            clock.advance(-hour)  # stepped back after the failure: 10 minutes from here at most
            assert not await _asked_again(titles, fake)
            clock.advance(RETRY_AFTER + tick)
            assert await _asked_again(titles, fake)
        finally:
            await api.aclose()


async def test_an_app_without_the_chat_scope_is_warned_of_once_and_not_asked_every_ten_minutes(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Feishu answers 99991672 ("Access denied. One of the following scopes
    is required") to every lookup of an app without im:chat:readonly: one
    warning naming the scope, then the channel is left alone for a day (a
    restart asks again), whichever group comes next."""
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "g.db", clock) as store:
        api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01, max_attempts=1)
        try:
            fake.chat_permission = False
            fake.chats.update({"oc_a": "Alpha", "oc_b": "Beta"})
            titles = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            with capture_logs() as logs:
                titles.untitled("feishu", "oc_a")
                await asyncio.wait_for(titles.idle(), 10)
                titles.untitled("feishu", "oc_b")  # another group: the scope is the app's, not asked
                clock.advance(RETRY_AFTER + timedelta(minutes=1))
                titles.untitled("feishu", "oc_a")
                titles.untitled("feishu", "oc_b")
                await asyncio.wait_for(titles.idle(), 10)
            assert fake.chat_requests == ["oc_a"]
            warnings = [e for e in logs if e["log_level"] == "warning"]
            assert len(warnings) == 1 and "im:chat:readonly" in warnings[0]["event"]
            assert titles.refused == {"feishu": "im:chat:readonly"}

            # A day on, still refused: asked once more, no second warning.
            clock.advance(REFUSED_RETRY_AFTER)
            with capture_logs() as logs:
                titles.untitled("feishu", "oc_b")
                await asyncio.wait_for(titles.idle(), 10)
            assert fake.chat_requests == ["oc_a", "oc_b"]
            assert not [e for e in logs if e["log_level"] == "warning"]

            # Granted: the next day's try finds the title, and says it is back.
            fake.chat_permission = True
            clock.advance(REFUSED_RETRY_AFTER)
            with capture_logs() as logs:
                titles.untitled("feishu", "oc_b")
                await asyncio.wait_for(titles.idle(), 10)
            assert await titles.names(["feishu:oc_b"]) == {"feishu:oc_b": "Beta"}
            assert titles.refused == {}
            assert [e for e in logs if e["log_level"] == "info" and "im:chat:readonly" in e["event"]]

            # A restart (a new ChatTitles) asks at once.
            fake.chat_permission = False
            fresh = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            fresh.untitled("feishu", "oc_a")
            await asyncio.wait_for(fresh.idle(), 10)
            assert fake.chat_requests[-1] == "oc_a" and fresh.refused == {"feishu": "im:chat:readonly"}
        finally:
            await api.aclose()


async def test_a_refused_scope_is_kept_in_gateway_db_until_a_lookup_works(tmp_path: Path, clock: ManualClock) -> None:
    """The refusal outlives the run that met it, for ``myclaw doctor
    --offline`` and the next run's /healthz, and goes once an ask works."""
    path = tmp_path / "g.db"
    async with FakeFeishu() as fake, await SessionStore.open(path, clock) as store:
        api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01, max_attempts=1)
        try:
            fake.chat_permission = False
            fake.chats["oc_a"] = "Alpha"
            titles = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})
            await titles.load()
            assert titles.refused == {} and read_refusals(path) == {}
            titles.untitled("feishu", "oc_a")
            await asyncio.wait_for(titles.idle(), 10)
            assert read_refusals(path) == {"feishu": ("im:chat:readonly", "2026-03-01T12:00:00Z")}

            later = ChatTitles(store.db, clock=clock, lookups={"feishu": api.chat_title})  # the next run
            await later.load()
            assert later.refused == {"feishu": "im:chat:readonly"}  # known before it asks anything
            fake.chat_permission = True  # granted meanwhile
            clock.advance(timedelta(hours=1))
            later.untitled("feishu", "oc_a")
            await asyncio.wait_for(later.idle(), 10)
            assert later.refused == {} and read_refusals(path) == {}
        finally:
            await api.aclose()
    assert read_refusals(tmp_path / "none.db") == {}
