"""Ids a channel has seen, written behind to gateway.db (``SeenIds``): a
real SQLite file, the set's own clock; what a reopened set knows, and a
Feishu channel restarted on the same gateway.db against the fake Open API."""

from __future__ import annotations

import functools
from pathlib import Path


from channels.feishu import FeishuChannel, RecentIds
from gateway.bus import InboundMessage, MessageBus, OutboundMessage
from gateway.config import FeishuConfig
from gateway.http import HttpServer
from gateway.seenids import SeenIds
from gateway.sessions import SessionStore
from tests.channels.test_feishu import fake, http  # noqa: F401  (fixtures: the fake Open API, an HTTP server)
from tests.fakes.feishu_server import FakeFeishu
from tests.gateway.test_outbox import sessions  # noqa: F401  (the fixture: gateway.db in tmp_path)


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_reopened_set_that_was_full_still_refuses_what_it_may_have_dropped(sessions: SessionStore) -> None:
    # The file keeps the newest maxsize ids, as the set does: after a restart
    # of a full set, events before its oldest are still refused as replays.
    clock, store = Clock(), SeenIds(sessions.db, "feishu", "event")
    ids = RecentIds(maxsize=3, ttl=3600, clock=clock, store=store)
    await ids.open()
    for i in range(4):
        clock.now += 1
        ids.seen_before(f"ev_{i}")
    await ids.close()
    again = RecentIds(maxsize=3, ttl=3600, clock=clock, store=store)
    await again.open()
    try:
        assert again.remembered_after() == 1_000_002.0  # ev_1's: ev_0 left for room
        assert again.seen_before("ev_1") and not again.seen_before("ev_new")
    finally:
        await again.close()
    roomy = RecentIds(maxsize=10, ttl=3600, clock=clock, store=store)
    await roomy.open()  # fewer than maxsize in the file: nothing was dropped that it knows of
    try:
        assert roomy.remembered_after() == clock.now - 3600
    finally:
        await roomy.close()


async def test_a_reopened_set_knows_the_ids_still_within_the_ttl(sessions: SessionStore) -> None:
    clock, store = Clock(), SeenIds(sessions.db, "feishu", "event")
    ids = RecentIds(ttl=3600, clock=clock, store=store, flush_every=3600)  # only explicit flushes here
    await ids.open()
    assert not ids.seen_before("ev_1") and not ids.seen_before("ev_2") and not ids.seen_before("ev_3")
    assert ids.seen_before("ev_1")  # seen at once, in memory
    assert await store.count() == 0  # written behind, not on the intake path
    ids.forget("ev_3")  # its event was not handled after all
    await ids.close()
    assert await store.count() == 2
    # Another channel's ids, or another kind, are not these.
    other = RecentIds(store=SeenIds(sessions.db, "feishu", "recalled"), clock=clock)
    await other.open()
    assert not other.seen_before("ev_1")
    await other.close()

    clock.now += 1800
    again = RecentIds(ttl=3600, clock=clock, store=store)
    await again.open()
    try:
        assert again.seen_before("ev_1") and again.seen_before("ev_2")  # a redelivery after the restart
        assert not again.seen_before("ev_3")  # forgotten before it: taken again
    finally:
        await again.close()

    clock.now += 1801  # ev_1 and ev_2 are past the TTL now; ev_3 is not
    last = RecentIds(ttl=3600, clock=clock, store=store)
    await last.open()  # sweeps the expired ids from the file
    try:
        assert not last.seen_before("ev_1") and last.seen_before("ev_3")
    finally:
        await last.close()
    rows = await sessions.db.fetchall("SELECT id FROM seen_ids WHERE kind = 'event' ORDER BY seen_at")
    assert [r[0] for r in rows] == ["ev_3", "ev_1"]  # ev_2 went; ev_1 is new again


async def test_expired_ids_are_swept_at_most_once_a_minute_and_the_file_keeps_the_newest(
    sessions: SessionStore,
) -> None:
    clock, store = Clock(), SeenIds(sessions.db, "feishu", "event")
    ids = RecentIds(maxsize=3, ttl=600, clock=clock, store=store, flush_every=3600)
    await ids.open()
    try:
        for n in range(5):
            ids.seen_before(f"ev_{n}")
            clock.now += 1
        await ids.flush()  # the first write since the start's sweep: within the minute, no sweep
        assert await store.count() == 5 and len(ids) == 3
        clock.now += 600  # every id expired
        ids.seen_before("ev_new")
        await ids.flush()  # a minute since the last sweep: the expired go with this write
        rows = await sessions.db.fetchall("SELECT id FROM seen_ids")
        assert [r[0] for r in rows] == ["ev_new"]
        clock.now += 1
        for n in range(5):
            ids.seen_before(f"ev_more{n}")
        await ids.flush(sweep=True)
        rows = await sessions.db.fetchall("SELECT id FROM seen_ids ORDER BY seen_at, id")
        assert sorted(r[0] for r in rows) == ["ev_more0", "ev_more1", "ev_more2", "ev_more3", "ev_more4"]
    finally:
        await ids.close()


# -- a Feishu channel restarted on the same gateway.db ---------------------------------------


def _channel(fake: FakeFeishu, http: HttpServer, store: SessionStore) -> FeishuChannel:
    config = FeishuConfig(enabled=True, app_id=fake.app_id, app_secret=fake.app_secret,
                          verification_token=fake.verification_token, mode="webhook", domain=fake.url)
    return FeishuChannel(config, MessageBus(), http, backoff=0.01,
                         seen_store=functools.partial(SeenIds, store.db, "feishu"))


async def test_a_restarted_channel_drops_a_redelivery_and_withholds_a_reply_to_a_recalled_message(
    fake: FakeFeishu, http: HttpServer, tmp_path: Path
) -> None:
    """Feishu retries an event after the restart (its 5 min, 1 h, 6 h): the
    message answered before is not taken again. A message recalled before
    the restart stays recalled: a reply to it is not sent."""
    path = tmp_path / "gateway.db"
    hello = fake.message_event("hello", chat_id="oc_a")
    secret = fake.message_event("my pin is 4471", chat_id="oc_a")
    async with await SessionStore.open(path) as store:
        first = _channel(fake, http, store)
        await first.start()
        try:
            url = http.url + first.config.webhook_path
            for event in (hello, secret, fake.recall_event(secret["event"]["message"]["message_id"], chat_id="oc_a")):
                assert (await fake.push_event(url, event)).status_code == 200
            got = [first.bus.inbound.get_nowait() for _ in range(3)]
            assert [m.text for m in got[:2]] == ["hello", "my pin is 4471"]
        finally:
            await first.stop()

    async with await SessionStore.open(path) as store:
        second = _channel(fake, http, store)
        await second.start()
        try:
            url = http.url + second.config.webhook_path
            for event in (hello, secret):  # redelivered: the same event ids
                assert (await fake.push_event(url, event)).status_code == 200
            assert second.bus.inbound.empty()
            fresh = fake.message_event("hello again", chat_id="oc_a")
            assert (await fake.push_event(url, fresh)).status_code == 200
            assert second.bus.inbound.get_nowait().text == "hello again"  # a new event is taken
            recalled: InboundMessage = got[1]
            await second.send(OutboundMessage.answering(recalled, "noted: 4471"))
            await second.send(OutboundMessage.answering(got[0], "hi"))
            assert fake.texts() == ["hi"]
        finally:
            await second.stop()
