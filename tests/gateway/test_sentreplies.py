"""The Feishu reply log written behind to gateway.db (``SentReplies``): a
real SQLite file, the log's own clock; what a reopened log knows."""

from __future__ import annotations

import asyncio

from channels.feishu.replies import ReplyLog
from gateway.sentreplies import SentReplies
from gateway.sessions import SessionStore
from tests.gateway.test_outbox import sessions  # noqa: F401  (the fixture: gateway.db in tmp_path)


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_reopened_log_knows_the_replies_still_in_the_window(sessions: SessionStore) -> None:
    clock, store = Clock(), SentReplies(sessions.db, "feishu")
    log = ReplyLog(clock=clock, store=store, flush_every=3600)  # only explicit flushes here
    await log.open()
    log.record("om_q1", "oc_a", "om_r1a")
    log.record("om_q1", "oc_a", "om_r1b")  # a split reply
    log.record("om_q1", "oc_a", "om_r1b")  # a resend Feishu de-duplicated: the same message
    log.record("om_q2", "oc_a", "om_r2")
    assert await store.count() == 0  # written behind, not on the send path
    await log.flush()
    assert await store.count() == 3
    assert log.take("om_q2", "oc_a") == ["om_r2"]
    clock.now += 3600
    log.record("om_q3", "oc_b", "om_r3")
    await log.close()
    assert await store.count() == 3

    again = ReplyLog(clock=clock, store=store)
    await again.open()
    try:
        assert again.take("om_q2", "oc_a") == []  # withdrawn before the restart: not twice
        assert again.take("om_q1", "oc_a") == ["om_r1a", "om_r1b"]
        clock.now += 86400 - 1800  # om_q3's reply is 22.5 h old, om_q1's would be 23.5 h
    finally:
        await again.close()
    assert await store.count() == 1  # the take is written: om_q3 is left

    clock.now += 3600  # om_q3's reply is past the recall window
    last = ReplyLog(clock=clock, store=store)
    await last.open()
    try:
        assert last.take("om_q3", "oc_b") == [] and len(last) == 0
        last.record("om_q4", "oc_b", "om_r4")
    finally:
        await last.close()
    rows = await sessions.db.fetchall("SELECT answers FROM sent_replies")
    assert [r[0] for r in rows] == ["om_q4"]  # the expired row swept with the next write


async def test_changes_reach_the_file_within_a_second_and_a_failed_write_is_retried(sessions: SessionStore) -> None:
    store = SentReplies(sessions.db, "feishu")
    log = ReplyLog(store=store, flush_every=0.05)
    await log.open()
    try:
        log.record("om_q1", "oc_a", "om_r1")
        async with asyncio.timeout(5):
            while await store.count() == 0:
                await asyncio.sleep(0.01)
        await sessions.db.write("DROP TABLE sent_replies")  # a write that fails
        log.record("om_q2", "oc_a", "om_r2")
        await asyncio.sleep(0.2)
        await sessions.db.write(
            "CREATE TABLE sent_replies (channel TEXT NOT NULL, chat_id TEXT NOT NULL, answers TEXT NOT NULL, "
            "message_id TEXT NOT NULL, sent_at REAL NOT NULL)"
        )
        async with asyncio.timeout(5):
            while await store.count() == 0:
                await asyncio.sleep(0.01)
    finally:
        await log.close()
    assert [r[0] for r in await sessions.db.fetchall("SELECT message_id FROM sent_replies")] == ["om_r2"]
