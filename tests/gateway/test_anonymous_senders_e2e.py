"""Telegram senders who speak on behalf of a chat, end to end: an anonymous
group admin, and a member posting as one of their channels. Telegram puts
the same placeholder account in ``from`` for every such sender (in every
group), so the sender is the chat they speak as: what one group's anonymous
admin told the bot is never recalled for another group's."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, text_of
from tests.fakes.telegram_server import FakeTelegram, anonymous_admin, as_channel

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

BUDGET = "The offsite budget is 4417 euros"


def _model(body: dict[str, Any]) -> Reply:
    """Extraction (JSON mode) learns the budget from the line that says it;
    chat turns get a plain answer."""
    if body.get("response_format", {}).get("type") == "json_object":
        if "4417" in json.dumps(body["messages"], ensure_ascii=False):
            fact = {"content": BUDGET, "project": "_global", "topic": "offsite", "category": "decision",
                    "importance": 0.9}
            return Reply(content=json.dumps({"facts": [fact], "summary": "offsite budget"}))
        return Reply(content='{"facts": [], "summary": "small talk"}')
    return Reply(content="Noted.")


def _owners(tmp_path: Path, chat_id: int) -> set[str]:
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        return {o for (o,) in db.execute(
            "SELECT m.owner FROM session_messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user' AND s.chat_id = ?", (str(chat_id),))}


async def _learn_then_ask(
    tmp_path: Path, clock: ManualClock, told: dict[str, Any], asker: dict[str, Any], chats: tuple[int, int]
) -> tuple[FakeOpenAI, list[str]]:
    """``told`` tells the bot the budget in ``chats[0]``, which memory learns;
    ``asker`` then asks for it in ``chats[1]``. Returns the fake model and
    the memories' owners."""
    async with FakeOpenAI(api_key="sk-anon-e2e-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(chats[0], 0, "our offsite budget is 4417 euros, please keep it in mind",
                         chat_type="supergroup", mention=True, sender_chat=told)
            await tg.wait_sent(1, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            for owner in _owners(tmp_path, chats[0]):
                await app.extraction.flush_now(owner)  # type: ignore[attr-defined]
            tg.push_text(chats[1], 0, "what is our offsite budget in euros?", chat_type="supergroup",
                         mention=True, sender_chat=asker)
            await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    with sqlite3.connect(tmp_path / "data" / "memory.db") as db:
        owners = [o for (o,) in db.execute("SELECT owner FROM memories WHERE content = ?", (BUDGET,))]
    return llm, owners


async def test_one_groups_anonymous_admin_is_not_another_groups(tmp_path: Path, clock: ManualClock) -> None:
    alpha, beta = -100111, -100222
    llm, owners = await _learn_then_ask(
        tmp_path, clock, anonymous_admin(alpha, "Alpha"), anonymous_admin(beta, "Beta"), (alpha, beta)
    )
    assert owners == [f"telegram:{alpha}"]  # learnt, as the group's own
    asked = llm.last_chat()
    assert all("4417" not in text_of(m["content"]) for m in asked["messages"])
    # Named by the chat they speak as, not Telegram's placeholder account.
    assert '<said by="Beta">' in text_of(asked["messages"][-1]["content"])
    assert _owners(tmp_path, beta) == {f"telegram:{beta}"}


async def test_a_member_posting_as_a_channel_is_that_channel(tmp_path: Path, clock: ManualClock) -> None:
    group = -100333
    llm, owners = await _learn_then_ask(
        tmp_path, clock, as_channel(-100444, "Alice's news"), as_channel(-100555, "Bob's news"), (group, group)
    )
    assert owners == ["telegram:-100444"]
    asked = llm.last_chat()
    # The group's history shows what Alice's channel said; recall and Tier 1 do not add it for Bob's.
    block = text_of(asked["messages"][-1]["content"]).split("<said by=", 1)[0]
    assert "4417" not in block and "4417" not in text_of(asked["messages"][0]["content"])
