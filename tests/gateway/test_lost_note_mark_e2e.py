"""The note asking for a cut turn's photo or file again is said once
(gateway/loop.py: a resumed turn whose pictures or files are gone), end
to end: the fake Telegram server and model on 127.0.0.1, a real
gateway.db refusing, as a full disk does, the update that marks the
message answered (tests/disk.py). Before, the note went all the same,
the row kept looking unanswered, and every later start said it again.
Now the note waits for its mark, as a reply whose row failed does; a
kill meanwhile leaves it in the outbox, sent once at the next start,
which marks the message answered before it goes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from memory import ManualClock
from tests.disk import allow, refuse
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import _history
from .test_e2e_feishu import _app
from .test_resume_files_e2e import AGENT, KEY, _cut, _echo, _running
from .test_vision_e2e import PHOTO, _telegram

NOTE = "Sorry, I restarted before I could answer, and the photo you sent is no longer with me. Please send it again."


@pytest.mark.parametrize("then", ["space-back", "killed-while-held"])
async def test_a_cut_photos_note_whose_mark_the_disk_refuses_is_said_once(
    tmp_path: Path, clock: ManualClock, then: str
) -> None:
    db = tmp_path / "data" / "gateway.db"
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_photo(42, 42, [PHOTO], caption="what is the code?"))
        refuse(db, "marks", "BEFORE UPDATE OF context ON session_messages")
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as again:
            loop = again.loop
            assert loop is not None
            loop.mark_retry = 0.05
            await until(lambda: loop.stats.held >= 1 or len(tg.sent) >= 1, timeout=15)
            await asyncio.sleep(0.3)  # tried again, still full
            assert tg.sent == []  # the note waits for its mark
            if then == "space-back":
                allow(db, "marks")
                await tg.wait_sent(1, timeout=15)
                await quiet(again)
            else:
                await killed(again, tmp_path)
                allow(db, "marks")
        async with _running(tmp_path, clock, llm, tg) as third:
            if then != "space-back":
                await tg.wait_sent(1, timeout=15)  # from the outbox: its row on its way was written
                assert third.resumed is not None
                assert [why for _, why in third.resumed.skipped] == ["its reply waits in the outbox"]
                assert third.delivery is not None and await asyncio.wait_for(third.delivery.sweep(), 10) is None
            await quiet(third)
        async with _running(tmp_path, clock, llm, tg) as fourth:  # nothing left to say
            await quiet(fourth)
            assert fourth.resumed is not None and fourth.resumed.answered == []
        assert [m.text for m in tg.sent] == [NOTE]
        assert len(llm.requests) == 1  # no model call for the note
        [(role, _, _)] = _history(tmp_path)
        assert role == "user"


async def test_a_note_sent_from_the_outbox_while_the_disk_is_still_full_is_marked_once_there_is_room(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The start after the kill still cannot mark the message: the note
    goes from the outbox all the same (the gateway comes up), and the mark
    is tried again until it is written; the start after says nothing."""
    db = tmp_path / "data" / "gateway.db"
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_photo(42, 42, [PHOTO], caption="what is the code?"))
        refuse(db, "marks", "BEFORE UPDATE OF context ON session_messages")
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as again:
            loop = again.loop
            assert loop is not None
            loop.mark_retry = 0.05
            await until(lambda: loop.stats.held >= 1 or len(tg.sent) >= 1, timeout=15)
            await killed(again, tmp_path)
        assert tg.sent == []
        third = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=AGENT)
        try:
            await third.open()
            assert third.loop is not None
            third.loop.mark_retry = 0.05
            await asyncio.wait_for(third.start(), 15)
            await tg.wait_sent(1, timeout=15)  # from the outbox, the mark refused
            assert third.resumed is not None and [r.message_id for r in third.resumed.unmarked] == [_history(tmp_path)[0][1]]
            await asyncio.sleep(0.3)  # tried again, still full
            allow(db, "marks")
            async with asyncio.timeout(10):
                while _context(tmp_path) != "apologised":
                    await asyncio.sleep(0.05)
            await quiet(third)
        finally:
            await asyncio.wait_for(third.close(), 30)
        async with _running(tmp_path, clock, llm, tg) as fourth:  # nothing left to say
            await quiet(fourth)
            assert fourth.resumed is not None and fourth.resumed.answered == []
        assert [m.text for m in tg.sent] == [NOTE] and len(llm.requests) == 1


def _context(home: Path) -> str:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        [(context,)] = db.execute("SELECT context FROM session_messages WHERE role = 'user'").fetchall()
        return str(context)
