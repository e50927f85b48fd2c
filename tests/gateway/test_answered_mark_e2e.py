"""A reply goes out only once something durable says its message was
answered (gateway/loop.py, ``ProcessLoop._until_marked``), end to end:
the real App, the fake Telegram server and model on 127.0.0.1, gateway.db
refusing the writes a full disk refuses (SQLite triggers raising "database
or disk is full" on the statements named). Found by
``scripts/chaos_kill.py --disk-full``: the reply went out while every
record of it failed, and the next start answered the message again.

Held, the reply goes out once the mark is written (space came back, the
same gateway); a stop while it is held leaves the message to the next
start, which answers it once."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import KEY, _echo, _telegram_app

QUESTION = "is the launch on Thursday?"
ANSWER = "re: is the launch on Thursday?"

# What a full disk refuses, by name: each a trigger on gateway.db.
FULL = {
    "rows": "BEFORE INSERT ON session_messages",  # the user's row and the reply's
    "replies": "BEFORE INSERT ON session_messages WHEN NEW.role = 'assistant'",  # the reply's row alone
    "marks": "BEFORE UPDATE ON session_messages",  # the user row marked answered
    "inbox": "BEFORE DELETE ON inbox",  # the inbox row's removal ("answered")
    "outbox": "BEFORE INSERT ON outbox",  # the reply's row on its way
}


def _fill(home: Path, *names: str) -> None:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        for name in names:
            db.execute(f"CREATE TRIGGER full_{name} {FULL[name]} BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")


def _free(home: Path, *names: str) -> None:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        for name in names:
            db.execute(f"DROP TRIGGER IF EXISTS full_{name}")


async def _held(app: App, n: int = 1) -> None:
    loop = app.loop
    assert loop is not None
    loop.mark_retry = 0.05  # try the mark again often: the test frees the space
    await until(lambda: loop.stats.held >= n, timeout=15)


@pytest.mark.parametrize("full", [("rows", "inbox"), ("replies", "marks")], ids=["no-rows-inbox-kept", "user-row-unmarked"])
async def test_a_reply_no_record_can_say_was_sent_waits_until_one_does_and_goes_once(
    tmp_path: Path, clock: ManualClock, full: tuple[str, ...]
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            _fill(tmp_path, *full)
            tg.push_text(42, 42, QUESTION)
            await _held(app)
            await asyncio.sleep(0.3)  # tried again, still full
            assert tg.sent == []
            _free(tmp_path, *full)  # space is back: the same gateway sends it
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            await asyncio.wait_for(app.close(), 30)
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.redelivered is not None and again.redelivered.answered == []
            assert again.resumed is not None and again.resumed.answered == []
        assert [m.text for m in tg.sent] == [ANSWER] and len(llm.requests) == 1


@pytest.mark.parametrize("outbox", [True, False], ids=["reply-on-its-way-kept", "outbox-full-too"])
async def test_a_kill_while_a_reply_is_held_leaves_the_message_answered_once_at_the_next_start(
    tmp_path: Path, clock: ManualClock, outbox: bool
) -> None:
    full = ("rows", "inbox") if outbox else ("rows", "inbox", "outbox")
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            _fill(tmp_path, *full)
            tg.push_text(42, 42, QUESTION)
            await _held(app)
            await killed(app, tmp_path)
        assert tg.sent == []
        _free(tmp_path, *full)
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(1, timeout=15)
            await quiet(again)
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
            # The inbox kept it (its "answered" delete failed): its reply in the outbox is its one answer.
            assert again.redelivered is not None
            assert [why for _, why in again.redelivered.skipped] == (["its reply waits in the outbox"] if outbox else [])
            assert len(again.redelivered.answered) == (0 if outbox else 1)
        async with _telegram_app(tmp_path, clock, llm, tg) as third:  # nothing left to answer
            await quiet(third)
        assert [m.text for m in tg.sent] == [ANSWER]
        # Its reply waited in the outbox: sent as written, the model not asked again.
        assert len(llm.requests) == (1 if outbox else 2)


async def test_messages_a_stop_on_a_full_disk_could_not_save_are_answered_from_the_inbox_and_the_log_says_so(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Found by scripts/chaos_kill.py --disk-full: each message the stop
    could not write to the history was logged as "it will not be answered"
    (159 errors in one stop), yet the inbox keeps it and the next start
    answers it. Now one error says so, and they are answered, once each."""
    import io
    import json

    from gateway.logging import configure_logging

    from .test_resume_e2e import _telegram_app as start

    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with start(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "first question")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            _fill(tmp_path, "rows")
            tg.push_text(42, 42, "second question")
            tg.push_text(42, 42, "third question")
            loop = app.loop
            assert loop is not None
            await until(lambda: loop.stats.received == 3, timeout=15)
            await asyncio.wait_for(app.close(timeout=0.2), 30)
        _free(tmp_path, "rows")
        clock.advance(60)
        async with start(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(3, timeout=15)
            await quiet(again)
        assert sorted(m.text for m in tg.sent) == ["re: first question", "re: second question", "re: third question"]
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    said = [e["event"] for e in events if e.get("level") == "error"]
    assert not any("will not be answered" in e for e in said)
    assert sum("the inbox keeps it" in e for e in said) == 1


async def test_a_held_reply_whose_mark_fails_for_another_reason_than_the_disk_goes_at_once(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held for a full disk, the mark then fails with something waiting
    will not mend (a bug): the reply was held, and the chat silent, until a
    restart. It goes now (a restart may answer it again: the lesser harm)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            _fill(tmp_path, "replies", "marks")
            tg.push_text(42, 42, QUESTION)
            await _held(app)
            assert app.sessions is not None

            async def broken(*args: object, **kw: object) -> None:
                raise RuntimeError("a bug, not the disk")

            monkeypatch.setattr(app.sessions, "mark_apologised", broken)
            await tg.wait_sent(1, timeout=15)
            assert [m.text for m in tg.sent] == [ANSWER]
            monkeypatch.undo()
            _free(tmp_path, "replies", "marks")
            await quiet(app)


@pytest.mark.parametrize("then", ["space-back", "killed-while-held"])
async def test_a_note_asking_for_a_message_again_goes_once_when_its_inbox_row_cannot_be_deleted(
    tmp_path: Path, clock: ManualClock, then: str
) -> None:
    """/memory waits behind a turn when a kill comes: the next start tells
    the user it was not done (gateway/loop.py, the note asking for it
    again), its inbox row deleted first. The disk refuses that delete: the
    note is held until it goes, as a reply whose mark failed. Before, it
    went at once, the row stayed, and every later start said it again."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, QUESTION)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "/memory")
            loop = app.loop
            assert loop is not None
            await until(lambda: loop.stats.received == 2, timeout=15)
            tg.cut_next("sendMessage")  # the stop's own note never reaches the chat: as a kill
            await killed(app, tmp_path)
        # The disk refuses the command's row's delete (the cut turn's, dropped at start, goes).
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("CREATE TRIGGER full_note BEFORE DELETE ON inbox WHEN OLD.payload LIKE '%/memory%' "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            held = again.loop
            assert held is not None
            held.mark_retry = 0.05
            await until(lambda: held.stats.held >= 1 or len(tg.sent) >= 2, timeout=15)
            await asyncio.sleep(0.3)  # tried again, still full
            assert [m.text for m in tg.sent] == [ANSWER]  # the note waits for its row's delete
            if then == "space-back":
                _free(tmp_path, "note")
                await tg.wait_sent(2, timeout=15)
                await quiet(again)
            else:
                await killed(again, tmp_path)
                _free(tmp_path, "note")
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            if then != "space-back":
                await tg.wait_sent(2, timeout=15)  # from the outbox: its row on its way was written
                # Its row gone too: this rig's stop is a kill, which between Telegram
                # taking the note and the row's delete would send it again (README).
                assert third.delivery is not None and await asyncio.wait_for(third.delivery.sweep(), 10) is None
            await quiet(third)
        async with _telegram_app(tmp_path, clock, llm, tg) as fourth:  # nothing left to say
            await quiet(fourth)
        answer, note = [m.text for m in tg.sent]
        assert answer == ANSWER and "/memory" in note and "send it again" in note
