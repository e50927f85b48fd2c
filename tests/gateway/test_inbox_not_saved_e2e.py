"""A message the durable inbox holds is answered even when its Tier 0 row
cannot be written (gateway.db's session rows fail, the inbox's did not):
the inbox is what keeps it, so the answer goes out, and the inbox row goes
before it does, so a restart does not answer it a second time."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from gateway.logging import configure_logging
from gateway.loop import _NOT_SAVED_FULL
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import as_killed_now, crash, quiet, undo_since
from .test_resume_e2e import KEY, _echo, _history, _telegram_app

_FULL = "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"


def _on_its_way(home: Path) -> int:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return int(db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])


async def test_a_message_the_inbox_holds_is_answered_when_its_tier0_row_fails_and_not_again_after_a_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # every Tier 0 row fails, for real
                db.execute(f"CREATE TRIGGER full BEFORE INSERT ON session_messages {_FULL}")
            tg.push_text(42, 42, "is the launch on Thursday?")
            killed: list[bool] = []

            def answered_then_killed() -> bool:
                # gateway.db as a kill finds it once the answer arrived and its
                # outbox row (a reply on its way, gateway/delivery.py) went: a
                # kill before that sends it again (Telegram: at least once).
                if tg.sent_count >= 1 and not killed and not _on_its_way(tmp_path):
                    as_killed_now(tmp_path)
                    killed.append(True)
                return bool(killed)

            await tg.wait_until(answered_then_killed, timeout=15)
            await quiet(app)
            await crash(app)
        undo_since(tmp_path)
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?"]
        assert _NOT_SAVED_FULL not in [m.text for m in tg.sent]
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("DROP TRIGGER full")  # space is back
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.redelivered is not None and again.redelivered.answered == []
            assert again.inbox is not None and await again.inbox.count() == 0
        assert len(tg.sent) == 1 and len(llm.requests) == 1
        assert _history(tmp_path) == []  # nothing in the chat's history: that is what failed
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [failed] = [e for e in lines if "not saved in the chat's history" in e["event"]]
    assert failed["level"] == "error" and failed["error"] == "sqlite3.IntegrityError"
    assert failed["sqlite_error"] == "SQLITE_CONSTRAINT_TRIGGER"  # the trigger's stand-in for SQLITE_FULL
    assert not any("launch" in line for line in stream.getvalue().splitlines())  # never the user's words


async def test_a_reply_row_written_after_the_user_row_failed_is_the_answered_mark(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Only the user's row fails (the lock passed in between): the reply's
    row, carrying the message's id, tells the next start it was answered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
                db.execute(f"CREATE TRIGGER full BEFORE INSERT ON session_messages WHEN NEW.role = 'user' {_FULL}")
            tg.push_text(42, 42, "who owns the deck?")
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.inbox is not None
            await app.inbox.flush()
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # as if its delete never ran
                db.execute("DROP TRIGGER full")
                db.execute("INSERT INTO inbox (channel, chat_id, message_id, received_at, payload) "
                           "SELECT 'telegram', '42', message_id, created_at, '{\"s\": \"42\", \"t\": \"who owns the deck?\", "
                           "\"ts\": \"2026-03-01T12:00:00Z\"}' FROM session_messages WHERE role = 'assistant'")
            await crash(app)
        assert [(r, c) for r, _, c in _history(tmp_path)] == [("assistant", "re: who owns the deck?")]
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.redelivered is not None and again.redelivered.answered == []
        assert [m.text for m in tg.sent] == ["re: who owns the deck?"]
