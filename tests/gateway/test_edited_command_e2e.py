"""An edit of a message whose turn is over: Telegram's ``edited_message``
after the answer. A message the model answered has its stored words
corrected and nothing is said (gateway/revisions.py). A command is never
stored, so there is nothing to correct, and it is not run again (a
``/forget`` twice, a ``/timezone`` the user may not have meant to send):
the bot says once that the edit changed nothing, so the user does not
believe it did. An edit that leaves the words as they were (a link
preview's) says nothing.

Real ``App`` on a home directory, the fake Telegram / OpenAI servers, real SQLite."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_edit_inflight_e2e import _rows, _started
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import _telegram


def _zones(home: Path) -> list[str]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [str(z) for (z,) in db.execute("SELECT timezone FROM user_timezones")]


async def test_an_edited_command_is_not_run_again_and_the_user_is_told_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            sent = tg.push_text(9, 9, "/timezone Asia/Shanghai")
            [done] = await tg.wait_sent(1, timeout=15)
            tg.push_edit(9, sent["message_id"], "/timezone Asia/Shanghai")  # a link preview's edit: the same words
            tg.push_edit(9, sent["message_id"], "/timezone Europe/Berlin")
            told = (await tg.wait_sent(2, timeout=15))[1]
            await until(lambda: app.loop is not None and app.loop.stats.revised == 2, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "Asia/Shanghai" in done.text
    assert "/timezone" in told.text and "again" in told.text and "Berlin" not in told.text
    assert len(tg.sent) == 2
    assert _zones(tmp_path) == ["Asia/Shanghai"]  # not run again
    assert llm.requests == [] and _rows(tmp_path, "user") == []


async def test_an_edit_of_an_answered_message_corrects_what_was_stored_and_says_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            llm.queue_reply("see you at 5")
            sent = tg.push_text(9, 9, "shall we meet at 5 tomorrow?")
            await tg.wait_sent(1, timeout=15)
            tg.push_edit(9, sent["message_id"], "shall we meet at 6 tomorrow?")
            await until(lambda: app.loop is not None and app.loop.stats.revised == 1, timeout=15)
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert len(tg.sent) == 1 and len(llm.requests) == 1
    assert _rows(tmp_path, "user") == ["shall we meet at 6 tomorrow?"]
