"""A decision the weekly refresh lifts into Core Memory keeps the day the
user said it (seed 002: answers carry their date and source), not the
day of the refresh. Core Memory is in every prompt: when a question's
words ("when did we pick that?") find no fact to recall, its line is all
the model has to go by. Through the real App, the Telegram and OpenAI
fakes, a moved clock."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .handtick import by_hand
from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

DECISION = "For Atlas the team chose Postgres over MySQL because it needs JSONB"


def _model(body: dict[str, Any]) -> Reply:
    """Chat: an echo. Extraction: the decision, from the line that says it;
    the weekly profile refresh: every important fact it is given, citing it."""
    if not body.get("response_format"):
        return Reply(content="ok: " + said(body))
    system, user = text_of(body["messages"][0]["content"]), text_of(body["messages"][-1]["content"])
    if system.startswith("You are a memory extraction"):
        facts = [{"content": DECISION, "project": "atlas", "topic": "database", "category": "decision",
                  "importance": 0.8, "lines": [1]}] if "Postgres over MySQL" in user else []
        return Reply(content=json.dumps({"facts": facts, "summary": "the Atlas database"}))
    if system.startswith("You maintain"):
        important = user.split("Important facts:")[-1]
        entries = [{"content": DECISION, "category": "decision", "facts": [1]}] if DECISION in important else []
        return Reply(content=json.dumps({"entries": entries}))
    return Reply(content=json.dumps({"facts": [], "drop": []}))


async def _lived(app: App, tg: FakeTelegram, clock: ManualClock) -> None:
    """Alice says the decision on Wednesday 4 March; the clock then runs,
    an hour at a time, past the Monday weekly refresh."""
    tg.push_text(7, 7, "For project Atlas we chose Postgres over MySQL because we need JSONB.", first_name="Alice")
    await tg.wait_sent(1, timeout=10)
    assert app.loop is not None and await app.loop.drain(5)
    assert app.extraction is not None and app.cron is not None
    for _ in range(24 * 6):  # to Tuesday 10 March
        clock.advance(3600)
        await app.extraction.tick()  # type: ignore[attr-defined]
        await app.cron.run_due()  # type: ignore[attr-defined]
    engine = app.backend.engine  # type: ignore[attr-defined]
    assert [m.content for m in await engine.profile("telegram:7")] == [DECISION]


async def test_a_core_memory_line_says_the_day_its_decision_was_said(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-04T09:00:00Z")
    async with FakeOpenAI(api_key="sk-core-dates-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                                "timezone": "Europe/Berlin"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _lived ticks extraction itself (handtick.py)
            await _lived(app, tg, clock)
            tg.push_text(7, 7, "When did we pick that?", first_name="Alice")
            await tg.wait_sent(2, timeout=10)
            system = text_of(llm.last_chat()["messages"][0]["content"])
            core = system.split("# Core Memory\n", 1)[1].split("\n\n", 1)[0]
            assert core.endswith(f" · 2026-03-04] {DECISION}"), core
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_memory_lists_a_core_memory_entry_with_the_day_it_was_said(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-04T09:00:00Z")
    async with FakeOpenAI(api_key="sk-core-dates-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                                "timezone": "Europe/Berlin"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _lived ticks extraction itself (handtick.py)
            await _lived(app, tg, clock)
            tg.push_text(7, 7, "/memory", first_name="Alice")
            sent = await tg.wait_sent(2, timeout=10)
            listed = next(line for line in sent[-1].text.splitlines() if "weekly summary" in line)
            assert "weekly summary of 1 note, 2026-03-04]" in listed, listed
        finally:
            await asyncio.wait_for(app.close(), 15)
