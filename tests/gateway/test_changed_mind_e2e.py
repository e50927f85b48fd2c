"""A user who changed their mind asks, weeks later, what was decided and
when: the current decision is recalled as current, and the one it replaced
comes with it, dated and marked as replaced (seed 002: "why did we drop
that plan", a decision's status superseded and what it supersedes), not
dropped so the model cannot say when the first choice was made. Only in
the user's private chat. Through the real App, the Telegram and OpenAI
fakes, a moved clock."""

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
from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

FIRST = "For Atlas the team chose Postgres over MySQL because it needs JSONB"
THEN = "Atlas switched from Postgres to MySQL because ops only supports MySQL"
_CAND = re.compile(r"^(\d+)\. \[[^\]]*\] (.*)$", re.M)


def _model(body: dict[str, Any]) -> Reply:
    """Chat: an echo. Extraction: each decision from the line that says it,
    the switch marked as updating the first (rule 5), as a model would."""
    if not body.get("response_format"):
        return Reply(content="ok: " + said(body))
    user = text_of(body["messages"][-1]["content"])
    facts: list[dict[str, Any]] = []
    if "we chose Postgres" in user:
        facts.append({"content": FIRST, "project": "atlas", "topic": "database", "category": "decision",
                      "importance": 0.8, "lines": [1]})
    if "switching Atlas to MySQL" in user:
        existing = user.split("Conversation:")[0]
        first = next(int(n) for n, c in _CAND.findall(existing) if c == FIRST)
        facts.append({"content": THEN, "project": "atlas", "topic": "database", "category": "decision",
                      "importance": 0.8, "lines": [1], "updates": first})
    return Reply(content=json.dumps({"facts": facts, "summary": "the Atlas database"}))


async def _say(app: App, tg: FakeTelegram, clock: ManualClock, chat: int, text: str, **kw: Any) -> None:
    before = tg.sent_count
    tg.push_text(chat, 7, text, first_name="Alice", **kw)
    await tg.wait_sent(before + 1, timeout=10)
    assert app.loop is not None and await app.loop.drain(5)


async def _learnt(app: App, clock: ManualClock) -> None:
    clock.advance(600)  # past the quiet gap
    assert app.extraction is not None
    await asyncio.wait_for(app.extraction.tick(), 10)  # type: ignore[attr-defined]


async def test_a_replaced_decision_is_recalled_under_the_new_one_dated_and_marked(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T09:00:00Z")
    async with FakeOpenAI(api_key="sk-changed-mind-0123456789", responder=_model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"host": "127.0.0.1", "port": 0,
                                                                                "timezone": "Europe/Berlin"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _learnt ticks extraction itself (handtick.py)
            await _say(app, tg, clock, 7, "For project Atlas we chose Postgres over MySQL because we need JSONB.")
            await _learnt(app, clock)
            clock.advance(10 * 86400)
            await _say(app, tg, clock, 7, "Change of plan: we're switching Atlas to MySQL, ops only supports MySQL.")
            await _learnt(app, clock)
            clock.advance(86400)
            await _say(app, tg, clock, 7, "/new")
            await _say(app, tg, clock, 7, "Why did we drop Postgres for Atlas, and when had we picked it?")
            block, _ = split_user_content(text_of(llm.last_chat()["messages"][-1]["content"]))
            lines = block.splitlines()
            now = next(i for i, line in enumerate(lines) if line.endswith(f"] {THEN}"))
            # Right under the decision that replaced it, with the day it was said.
            under = lines[now + 1] if now + 1 < len(lines) else ""
            assert "2026-03-02" in under and FIRST in under, block

            # Shared with her groups, the decision is recalled there, without its history.
            ref = re.match(r"- \[(m\d+) ", lines[now])
            assert ref is not None
            await _say(app, tg, clock, 7, f"/share {ref.group(1)}")
            await _say(app, tg, clock, -500, "why did we drop Postgres for Atlas?", chat_type="group", mention=True)
            group = json.dumps(llm.last_chat()["messages"], ensure_ascii=False)
            assert THEN in group and FIRST not in group, group
        finally:
            await asyncio.wait_for(app.close(), 15)
