"""A Chinese user asks "上周我们聊了什么？" weeks into using the bot: the
summaries of last week's chats (Tier 3, daily_events) are in the memory
block, on the user's calendar (Asia/Shanghai), without the model having to
think of calling memory_search; "上周三" brings that Wednesday's; a week
with nothing to say for it brings no other week's; a group gets none of
them. Through the real App, the Telegram and OpenAI fakes, a moved clock."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said, split_user_content, text_of
from tests.fakes.telegram_server import FakeTelegram

from .handtick import by_hand
from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

# What each day's chat is summarised as (the extraction's "summary").
SUMMARIES = {
    "Hugo": "讨论了把博客从 WordPress 迁移到 Hugo",
    "香山": "计划周末和朋友去香山爬山",
    "跳槽": "聊了跳槽去一家新公司的打算",
    "驾照": "说起了报名考驾照的事",
}


def _model(body: dict[str, Any]) -> Reply:
    """Chat: an echo. Extraction: no facts, the day's summary."""
    if not body.get("response_format"):
        return Reply(content="好的：" + said(body))
    user = text_of(body["messages"][-1]["content"])
    summary = next((s for k, s in SUMMARIES.items() if k in user), "闲聊")
    return Reply(content=json.dumps({"facts": [], "summary": summary}, ensure_ascii=False))


async def _say(app: App, tg: FakeTelegram, chat: int, text: str, **kw: Any) -> None:
    before = tg.sent_count
    tg.push_text(chat, 7, text, first_name="Li", **kw)
    await tg.wait_sent(before + 1, timeout=10)
    assert app.loop is not None and await asyncio.wait_for(app.loop.drain(5), 10)


async def _summarised(app: App, clock: ManualClock) -> None:
    clock.advance(600)  # past the quiet gap
    assert app.extraction is not None
    await asyncio.wait_for(app.extraction.tick(), 10)  # type: ignore[attr-defined]


def _block(llm: FakeOpenAI) -> str:
    block, _ = split_user_content(text_of(llm.last_chat()["messages"][-1]["content"]))
    return block


async def test_last_weeks_chats_are_recalled_from_their_summaries_on_the_users_calendar(tmp_path: Path) -> None:
    clock = ManualClock("2026-02-24T02:00:00Z")  # Tuesday 10:00 in Shanghai, the week before last
    async with FakeOpenAI(api_key="sk-last-week-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                                "timezone": "Asia/Shanghai"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _summarised ticks extraction itself (handtick.py)
            await _say(app, tg, 7, "我在考虑报名考驾照，周末有空")  # 2026-02-24: the week before last
            await _summarised(app, clock)
            clock.advance(6 * 86400)  # Monday 2026-03-02, 10:10 in Shanghai: last week
            await _say(app, tg, 7, "我想把博客从 WordPress 搬到 Hugo，你觉得呢")
            await _summarised(app, clock)
            clock.advance(2 * 86400)  # Wednesday 2026-03-04
            await _say(app, tg, 7, "这周末打算和朋友去香山爬山")
            await _summarised(app, clock)
            # Sunday 2026-03-08 17:30 UTC is Monday 01:30 in Shanghai: this week there.
            clock.advance(4 * 86400 + 15 * 3600 + 10 * 60)
            await _say(app, tg, 7, "睡不着，在想要不要跳槽")
            await _summarised(app, clock)
            clock.advance(2 * 86400)  # Wednesday 2026-03-11 in Shanghai
            await _say(app, tg, 7, "/new")

            await _say(app, tg, 7, "上周我们聊了什么？")
            block = _block(llm)
            assert SUMMARIES["Hugo"] in block and SUMMARIES["香山"] in block, block
            assert SUMMARIES["跳槽"] not in block and SUMMARIES["驾照"] not in block, block
            assert "2026-03-02" in block and "2026-03-04" in block, block  # dated on their calendar

            await _say(app, tg, 7, "上周三我们聊了什么？")
            block = _block(llm)
            assert SUMMARIES["香山"] in block and SUMMARIES["Hugo"] not in block, block

            await _say(app, tg, 7, "上上周我们聊了啥？")
            assert SUMMARIES["驾照"] in _block(llm)

            # A group reads no one's chat summaries.
            await _say(app, tg, -500, "上周我们聊了什么？", chat_type="group", mention=True)
            group = json.dumps(llm.last_chat()["messages"], ensure_ascii=False)
            assert not any(s in group for s in SUMMARIES.values()), group
        finally:
            await asyncio.wait_for(app.close(), 15)
