"""What the user just told us about themselves shapes the very next reply.

On a Tuesday Alice says "from now on always answer me in English":
extraction stores it (Tier 2) within minutes, and from then on it is in
the Core Memory of every prompt of hers, not only of those whose words
happen to recall it, without waiting for Monday's weekly refresh (seed
000 §4.2). Replaced, it leaves at once; it is never in a group's prompt
nor in another user's; recall does not show it twice. Through the real
App, the Telegram and OpenAI fakes, a moved clock."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said, split_user_content, text_of
from tests.fakes.telegram_server import FakeTelegram

from .handtick import by_hand
from .test_core_memory_dates_e2e import DECISION, _lived
from .test_core_memory_dates_e2e import _model as _deciding
from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

ENGLISH = "Alice wants every answer in English from now on"
CHINESE = "Alice wants every answer in Chinese again"
UNRELATED = "What is a good name for a cat?"
_CAND = re.compile(r"^(\d+)\. \[[^\]]*\] (.*)$", re.M)


def _model(body: dict[str, Any]) -> Reply:
    """Chat: an echo. Extraction: the standing instruction (config, as a
    model labels a setting), and its replacement marked as updating it."""
    if not body.get("response_format"):
        return Reply(content="ok: " + said(body))
    user = text_of(body["messages"][-1]["content"])
    facts: list[dict[str, Any]] = []
    if "always answer me in English" in user:
        facts.append({"content": ENGLISH, "project": "_global", "topic": "_general", "category": "config",
                      "importance": 0.9, "lines": [1]})
    if "answer me in Chinese again" in user:
        existing = user.split("Conversation:")[0]
        first = next(int(n) for n, c in _CAND.findall(existing) if c == ENGLISH)
        facts.append({"content": CHINESE, "project": "_global", "topic": "_general", "category": "config",
                      "importance": 0.9, "lines": [1], "updates": first})
    return Reply(content=json.dumps({"facts": facts, "summary": "how to answer"}))


async def _say(app: App, tg: FakeTelegram, llm: FakeOpenAI, chat: int, text: str, user: int = 7,
               **kw: Any) -> dict[str, Any]:
    """Send ``text`` and wait for the reply; the chat request it made."""
    before = tg.sent_count
    tg.push_text(chat, user, text, first_name="Alice" if user == 7 else "Bob", **kw)
    await tg.wait_sent(before + 1, timeout=10)
    assert app.loop is not None and await asyncio.wait_for(app.loop.drain(5), 10)
    return dict(llm.last_chat())


async def _learnt(app: App, clock: ManualClock) -> None:
    clock.advance(600)  # past the quiet gap
    assert app.extraction is not None
    await asyncio.wait_for(app.extraction.tick(), 10)  # type: ignore[attr-defined]


def _core(body: dict[str, Any]) -> str:
    system = text_of(body["messages"][0]["content"])
    if "# Core Memory\n" not in system:
        return ""
    return system.split("# Core Memory\n", 1)[1].split("\n\n", 1)[0]


def _recalled(body: dict[str, Any]) -> str:
    return split_user_content(text_of(body["messages"][-1]["content"]))[0]


def _start(tmp_path: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> App:
    return _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                             "timezone": "Europe/Berlin"})


async def test_a_standing_instruction_is_in_core_memory_of_the_next_unrelated_message(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-03T09:00:00Z")  # a Tuesday: six days before the weekly refresh
    async with FakeOpenAI(api_key="sk-core-now-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _start(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _learnt ticks extraction itself (handtick.py)
            await _say(app, tg, llm, 7, "From now on always answer me in English, please.")
            await _learnt(app, clock)

            body = await _say(app, tg, llm, 7, UNRELATED)
            core = _core(body)
            assert re.search(rf"^- \[m\d+ · 2026-03-03\] {ENGLISH}$", core, re.M), core
            assert ENGLISH not in _recalled(body)

            # Words that recall it: still once, in Core Memory, not again under <memories>.
            body = await _say(app, tg, llm, 7, "Which language should you answer me in, English?")
            assert ENGLISH in _core(body) and ENGLISH not in _recalled(body)

            # /memory lists it once, as always in mind.
            await _say(app, tg, llm, 7, "/memory")
            listed = tg.sent[-1].text
            assert listed.count(ENGLISH) == 1 and listed.index("Always in mind:") < listed.index(ENGLISH), listed

            # Bob's prompt never holds it; nor does a group's, even Alice's message there.
            body = await _say(app, tg, llm, 8, UNRELATED, user=8)
            assert ENGLISH not in json.dumps(body["messages"], ensure_ascii=False)
            body = await _say(app, tg, llm, -500, UNRELATED + " @bot", chat_type="group", mention=True)
            assert ENGLISH not in json.dumps(body["messages"], ensure_ascii=False)
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_replaced_instruction_leaves_core_memory_at_once_but_for_its_history(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-03T09:00:00Z")
    async with FakeOpenAI(api_key="sk-core-now-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _start(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _learnt ticks extraction itself (handtick.py)
            await _say(app, tg, llm, 7, "From now on always answer me in English, please.")
            await _learnt(app, clock)
            await _say(app, tg, llm, 7, "Sorry, changed my mind: answer me in Chinese again.")
            await _learnt(app, clock)

            body = await _say(app, tg, llm, 7, UNRELATED)
            core = _core(body)
            # English only as the history under Chinese, dated, no longer true ("when had I asked for English?").
            assert re.search(rf"^- \[m\d+ · 2026-03-03\] {CHINESE}\n"
                             rf"  \(it replaced what was said on 2026-03-03, no longer true: {ENGLISH}\)$", core, re.M), core
            assert core.count(ENGLISH) == 1, core
            assert ENGLISH not in _recalled(body)
            # The rules tell the model Core Memory holds what was said minutes ago, not only long ago.
            assert "what they said about themselves minutes ago" in text_of(body["messages"][0]["content"])
            # Never in a group's prompt, not even as history.
            body = await _say(app, tg, llm, -500, UNRELATED + " @bot", chat_type="group", mention=True)
            assert ENGLISH not in json.dumps(body["messages"], ensure_ascii=False)
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_memory_lists_a_core_memory_decision_once(tmp_path: Path) -> None:
    """The weekly refresh lifts a decision into Core Memory and the fact it
    was drawn from stays in Tier 2: /memory shows it under "Always in mind"
    only, not again under "Newest"."""
    clock = ManualClock("2026-03-04T09:00:00Z")
    async with FakeOpenAI(api_key="sk-core-now-0123456789", responder=_deciding) as llm, FakeTelegram() as tg:
        app = _start(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _lived ticks extraction itself (handtick.py)
            await _lived(app, tg, clock)
            tg.push_text(7, 7, "/memory", first_name="Alice")
            sent = await tg.wait_sent(2, timeout=10)
            text = sent[-1].text
            assert text.count(DECISION) == 1, text
        finally:
            await asyncio.wait_for(app.close(), 15)
