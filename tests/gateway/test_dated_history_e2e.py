"""A chat resumed weeks later: the turns of the chat's history (Tier 0, the
last 20 messages, which no idle time resets) said on an earlier day carry
their date and time, as the latest message carries its time; undated, a
month-old "I'll run the migration on Friday night" reads as said just now.
Today's turns stay as they were. Through the real App, the Telegram and
OpenAI fakes, a moved clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram


def _echo(body: dict[str, Any]) -> Reply:
    return Reply(content="ok: " + said(body))


async def test_history_turns_from_an_earlier_day_carry_their_date(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T09:00:00Z")  # 10:00 in Berlin
    async with FakeOpenAI(api_key="sk-dated-history-0123456789", responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                                "timezone": "Europe/Berlin"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(-500, 8, "I will run the Atlas data migration on Friday night", chat_type="group",
                         first_name="Bob", mention=True)
            await tg.wait_sent(1, timeout=10)
            clock.advance(24 * 86400)
            tg.push_text(-500, 7, "and the cache?", chat_type="group", first_name="Alice", mention=True)
            await tg.wait_sent(2, timeout=10)
            clock.advance(60)
            tg.push_text(-500, 7, "what did Bob say about the migration, and when?", chat_type="group",
                         first_name="Alice", mention=True)
            await tg.wait_sent(3, timeout=10)
            # The 24-day step makes the day's extraction due; its request may land after the reply's.
            chat = llm.last_chat()
            turns = [text_of(m["content"]) for m in chat["messages"] if m["role"] == "user"]
            assert turns[0].startswith("<time>2026-03-02 10:00</time>\n<said by=\"Bob\">"), turns
            assert turns[1].startswith("<said by=\"Alice\">"), turns  # today's: as before
        finally:
            await asyncio.wait_for(app.close(), 15)
