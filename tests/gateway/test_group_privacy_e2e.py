"""What a group reads of a member's memory, end to end (real App, the
Telegram and OpenAI fakes): what the member said in THAT group, and the
deployment's shared notes; never what they told the bot in a private chat
(health, money, family...) nor what they said in another group. Both the
automatic recall and the ``memory_search`` tool; the private chat still
sees everything."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory import Category, ManualClock, NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

ALICE = "telegram:7"
PRIVATE = "Alice takes sertraline for her depression since March"
GROUP_A = "Alice's team ships the sertraline dosage app Bluebird on Friday"
GROUP_B = "Alice owes Bob 300 dollars for the sertraline refill trip"
SHARED = "The deployment's sertraline notes live in the team wiki"
ASK = "what do you remember about sertraline and Bluebird?"


def _searching(body: dict[str, Any]) -> Reply:
    """The model asks memory_search once, then says what the tool answered."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(content="found: " + text_of(last["content"]))
    if "search it" in said(body):
        return Reply(content=None, tool_calls=[{"name": "memory_search", "arguments": {"query": "sertraline Bluebird"}}])
    return Reply(content=f"re: {said(body)}")


async def _seed(app: Any) -> None:
    engine = app.backend.engine
    for content, chat in ((PRIVATE, "7"), (GROUP_A, "-500"), (GROUP_B, "-600")):
        await engine.add(NewMemory(owner=ALICE, content=content, category=Category.EVENT,
                                       provenance=Provenance(channel="telegram", chat_id=chat)))
    await engine.add(NewMemory(owner="_global", content=SHARED, category=Category.EVENT))


def _prompt(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


async def test_a_group_reads_only_what_the_member_said_there(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-group-privacy-0123456789", responder=_searching) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await _seed(app)
            await asyncio.wait_for(app.start(), 15)

            # Group A: its own fact and the shared note, not the private one nor group B's.
            tg.push_text(-500, 7, ASK, chat_type="group", first_name="Alice", mention=True)
            await tg.wait_sent(1, timeout=10)
            recalled = _prompt(llm.last_chat())
            assert GROUP_A in recalled and SHARED in recalled
            assert PRIVATE not in recalled and GROUP_B not in recalled

            # The memory_search tool in group A: the same rule.
            tg.push_text(-500, 7, "search it: sertraline Bluebird", chat_type="group", first_name="Alice",
                         mention=True)
            sent = await tg.wait_sent(2, timeout=10)
            found = sent[-1].text
            assert found.startswith("found: ") and "Bluebird" in found
            assert "depression" not in found and "300 dollars" not in found

            # Group B: only its own fact.
            tg.push_text(-600, 7, ASK, chat_type="group", first_name="Alice", mention=True)
            await tg.wait_sent(3, timeout=10)
            recalled = _prompt(llm.last_chat())
            assert GROUP_B in recalled and PRIVATE not in recalled and GROUP_A not in recalled

            # Her private chat: all of her own.
            tg.push_text(7, 7, ASK, first_name="Alice")
            await tg.wait_sent(4, timeout=10)
            recalled = _prompt(llm.last_chat())
            assert PRIVATE in recalled and GROUP_A in recalled
            assert "depression" not in " ".join(_prompt(b) for b in llm.requests[:-1])
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_debug_logs_carry_no_message_or_memory_text(tmp_path: Path, clock: ManualClock) -> None:
    """At debug level the gateway logs what it did (ids, counts, times),
    never what was said or remembered: an operator's log is no copy of
    people's chats."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        with capture_logs() as logs:
            async with (FakeOpenAI(api_key="sk-group-privacy-0123456789", responder=_searching) as llm,
                        FakeTelegram() as tg):
                app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
                try:
                    await app.open()
                    await _seed(app)
                    await asyncio.wait_for(app.start(), 15)
                    tg.push_text(7, 7, ASK, first_name="Alice")
                    tg.push_text(-500, 7, "search it: sertraline Bluebird", chat_type="group", first_name="Alice",
                                 mention=True)
                    await tg.wait_sent(2, timeout=10)
                    assert app.loop is not None and await app.loop.drain(5)
                finally:
                    await asyncio.wait_for(app.close(), 15)
    finally:
        root.setLevel(level)
    assert any(e.get("event") == "message handled" for e in logs)  # debug lines were on
    text = json.dumps(logs, ensure_ascii=False, default=str)
    for said_or_kept in ("sertraline", "Bluebird", "depression", "300 dollars"):
        assert said_or_kept not in text
