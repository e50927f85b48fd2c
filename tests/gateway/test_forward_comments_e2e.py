"""A comment typed with forwards, edited after the gateway restarted: the
App, the fake Telegram server, the OpenAI-compatible fake, SQLite files.
Which burst the comment went into is kept in gateway.db, so the edit
still changes those words in the burst's stored message, and only them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app, _until
from .test_quoted_e2e import _rows, _telegram
from .test_telegram_forwards_e2e import FEB_27, answering


async def test_an_edit_of_a_comment_after_a_restart_changes_the_bursts_message(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-fwd-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            comment = tg.push_text(9, 9, "what does she wnat?\nand by when")
            dana = origin_user(5, "Dana", "Kim", date=FEB_27)
            tg.push_text(9, 9, "launch moves to Friday\n\nsee you there", forward_origin=dana)
            await tg.wait_sent(1, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)

        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_edit(9, comment["message_id"], "what does she want?\nand by when")
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 1)
            tg.push_edit(9, comment["message_id"], "what does she want from me?")  # from the first edit's words
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 2)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert len(llm.requests) == 1  # an edit is not answered
    # The forward's paragraphs joined by one line break: the blank line is the comment's.
    assert _rows(tmp_path) == ["[forwarded from Dana Kim, sent 2026-02-27]\nlaunch moves to Friday\nsee you there"
                               "\n\nwhat does she want from me?"]
