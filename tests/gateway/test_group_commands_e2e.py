"""A command picked from a Telegram group's "/" menu, end to end (real App,
the Telegram and OpenAI fakes). With no other bot in the group the client
sends it without @bot ("/help"), and privacy mode passes it on: the bot
published that menu, so it answers it (it was ignored as unaddressed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.loop import HELP_TEXT
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram


async def test_a_bare_command_from_the_group_menu_is_answered(tmp_path: Path, clock: ManualClock) -> None:
    group = -100777
    async with FakeOpenAI(api_key="sk-group-cmd-0123456789", responder=lambda body: Reply(content="hi")) as llm, \
            FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(group, 7, "/shrug", chat_type="supergroup")  # not ours: left to whoever it is for
            tg.push_text(group, 7, "/help", chat_type="supergroup")
            tg.push_text(group, 7, "/memory", chat_type="supergroup")
            await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    help_text, memory_text = tg.texts(group)
    assert help_text.startswith(HELP_TEXT.split("\n")[0])
    assert "private chat" in memory_text  # /memory is refused in a group, not ignored
    assert llm.requests == []  # "/shrug" never reached the model
