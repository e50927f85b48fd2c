"""A message whose turn cannot be saved (gateway.db's write lock held by
another process past the wait) is not answered as if the model failed: the
user is told it could not be saved, in their language, and to try again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.loop import _NOT_SAVED, _NOT_SAVED_FULL, _NOT_SAVED_FULL_ZH, _NOT_SAVED_ZH
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.logjson import debug_json_log, lines

from .conftest import make_rig


async def test_a_turn_that_cannot_be_saved_says_so(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("an answer nobody will remember")
    fake_llm.queue_reply("另一个回答")
    # The lock is held until both replies are in, so any wait is "past the
    # wait": a short one, not the default 5 s per message.
    async with make_rig(tmp_path, clock, fake_llm, busy_ms=200) as rig:
        other = sqlite3.connect(tmp_path / "gateway.db", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            await rig.send("remember I am vegetarian", chat="1")
            await rig.send("我吃素", chat="2", sender="200")
            replies: dict[str, str] = {}
            for _ in range(2):
                out = await rig.reply(timeout=30)
                replies[out.chat_id] = out.text
        finally:
            other.rollback()
            other.close()
        assert replies == {"1": _NOT_SAVED, "2": _NOT_SAVED_ZH}
        assert "could not save" in _NOT_SAVED and "try again" in _NOT_SAVED
        await rig.settle()
        assert await rig.sessions.window("telegram:1") == [] and rig.loop.stats.errors == 2


async def test_a_full_disk_is_named_as_such_and_the_gateway_serves_again_once_space_is_back(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    for text in ("hello there", "an answer nobody will remember", "没人会记住的回答", "now it is kept"):
        fake_llm.queue_reply(text)
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        assert (await rig.ask("hello", chat="1")).text == "hello there"
        await rig.settle()
        (pages,) = await rig.sessions.db.fetchall("PRAGMA page_count")
        await rig.sessions.db.write(f"PRAGMA max_page_count = {pages[0]}")  # SQLITE_FULL on the real gateway.db
        long = "my whole travel plan: " + "day by day, " * 2000  # more than the free pages hold
        assert (await rig.ask(long, chat="1")).text == _NOT_SAVED_FULL
        assert (await rig.ask("我的行程：" + "每一天，" * 3000, chat="2", sender="200")).text == _NOT_SAVED_FULL_ZH
        assert "storage is full" in _NOT_SAVED_FULL and "try again" in _NOT_SAVED_FULL
        await rig.settle()
        await rig.sessions.db.write("PRAGMA max_page_count = 1073741823")  # space is back: no restart
        assert (await rig.ask(long, chat="1")).text == "now it is kept"
        await rig.settle()
        window = await rig.sessions.window("telegram:1")
        assert [(m.role, m.content) for m in window] == [
            ("user", "hello"), ("assistant", "hello there"), ("user", long), ("assistant", "now it is kept"),
        ]


async def test_a_turn_not_saved_is_logged_by_its_codes_never_the_words_sqlite_quoted(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """SQLite's error text may quote what the row held (here FTS5, asked
    for the message's word as a column): the log line names the failure
    by its type and SQLite's error name; on a full disk, SQLITE_FULL."""
    fake_llm.queue_reply("an answer nobody will remember")
    fake_llm.queue_reply("another one")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.sessions.db.write("CREATE VIRTUAL TABLE probe USING fts5(x)")
        await rig.sessions.db.write("CREATE TRIGGER refuse BEFORE INSERT ON session_messages WHEN NEW.role = 'user' "
                                    "BEGIN SELECT * FROM probe WHERE probe MATCH NEW.content || ':x'; END")
        with debug_json_log() as out:
            assert (await rig.ask("wombat7731", chat="1")).text == _NOT_SAVED
            await rig.sessions.db.write("DROP TRIGGER refuse")
            (pages,) = await rig.sessions.db.fetchall("PRAGMA page_count")
            await rig.sessions.db.write(f"PRAGMA max_page_count = {pages[0]}")
            assert (await rig.ask("wombat7731 " * 3000, chat="2")).text == _NOT_SAVED_FULL
            await rig.settle()
    assert "wombat" not in out.getvalue()
    quoted, full = lines(out, "message not saved, so not answered; later ones are counted until one is")
    assert quoted["error"] == "gateway.loop.TurnNotSaved" and quoted["caused_by"][0] == "sqlite3.OperationalError"
    assert quoted["sqlite_error"] == "SQLITE_ERROR" and quoted["full"] is False
    assert full["sqlite_error"] == "SQLITE_FULL" and full["full"] is True
