"""Which comment went into which burst of forwards, in gateway.db
(``BurstComments``): a real SQLite file and the store's own clock; what it
finds within the edit window, how many it keeps, and that it holds no words."""

from __future__ import annotations

import sqlite3

from gateway.burstcomments import EDIT_WINDOW, KEPT, BurstComments
from gateway.sessions import SessionStore
from tests.gateway.test_outbox import sessions  # noqa: F401  (the fixture: gateway.db in tmp_path)


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_comment_is_found_under_its_burst_within_the_edit_window(sessions: SessionStore) -> None:
    clock = Clock()
    store = BurstComments(sessions.db, "telegram", clock=clock)
    await store.keep("9", "14", [("11", 18), ("12", 7)])
    assert await store.find("9", "11") == ("14", [("11", 18), ("12", 7)])
    assert await store.find("9", "12") == ("14", [("11", 18), ("12", 7)])
    assert await store.find("8", "11") is None  # another chat's message 11
    assert await BurstComments(sessions.db, "feishu", clock=clock).find("9", "11") is None
    await store.keep("9", "14", [("11", 20), ("12", 7)])  # after an edit: its new length
    assert await store.find("9", "12") == ("14", [("11", 20), ("12", 7)])
    clock.now += EDIT_WINDOW + 1
    assert await store.find("9", "11") is None  # past Telegram's edit window


async def test_the_newest_are_kept_and_the_expired_go(sessions: SessionStore) -> None:
    clock = Clock()
    store = BurstComments(sessions.db, "telegram", clock=clock)
    await store.keep("9", "2", [("1", 5)])
    clock.now += EDIT_WINDOW + 1
    for n in range(KEPT + 5):
        clock.now += 1
        await store.keep("9", str(100_000 + n), [(str(10 * n), 4)])
    rows = await sessions.db.fetchall("SELECT comment_id FROM burst_comments ORDER BY kept_at")
    assert len(rows) == KEPT and rows[0][0] == "50"  # the expired one and the oldest five went
    assert await store.find("9", "40") is None and await store.find("9", str(10 * (KEPT + 4))) is not None


async def test_it_holds_ids_and_lengths_only(sessions: SessionStore) -> None:
    await BurstComments(sessions.db, "telegram").keep("9", "14", [("11", 18)])
    await sessions.flush()
    with sqlite3.connect(sessions.db.path) as db:
        assert db.execute("SELECT chat_id, comment_id, burst_id, comments FROM burst_comments").fetchall() == [
            ("9", "11", "14", '[["11", 18]]')]
