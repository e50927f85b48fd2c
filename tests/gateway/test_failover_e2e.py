"""The gateway with a fallback model: the App as `myclaw gateway` builds it,
its primary endpoint down, the fallback on a second fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.handtick import by_hand
from tests.gateway.test_app import ECHO, _config
from tests.gateway.test_remembering_e2e import say

BACKUP_KEY = "sk-backup-e2e-0123456789"


def answer(body: dict[str, Any]) -> Reply:
    if body.get("response_format", {}).get("type") == "json_object":
        return Reply(content=json.dumps({"facts": [{"content": "User drinks oat latte", "category": "identity"}],
                                         "summary": "coffee"}))
    return Reply(content=f"{body['model']} here")


def _app_with_fallback(tmp_path: Path, clock: ManualClock, primary: FakeOpenAI, backup: FakeOpenAI) -> App:
    """The App on ``primary``'s test-model, with ``backup``'s backup-model behind it."""
    cfg, paths = _config(
        tmp_path, primary,
        agent={"model": "test-model", "fallbacks": [{"model": "backup-model", "provider": {"baseUrl": backup.url}}]},
        env={"MYCLAW_AGENT_FALLBACKS_0_API_KEY": BACKUP_KEY},
    )
    return App(cfg, paths, clock=clock, channel_specs=(ECHO,))


async def test_replies_and_extraction_go_to_the_fallback_while_the_primary_is_down(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-01T12:00:00Z")
    async with FakeOpenAI(api_key="sk-e2e-key-0123456789") as primary, \
            FakeOpenAI(api_key=BACKUP_KEY, responder=answer) as backup:
        primary.down = Reply(status=503)
        app = _app_with_fallback(tmp_path, clock, primary, backup)
        try:
            await app.open()
            await app.start()
            await by_hand(app)  # the test's tick is the extraction counted
            assert await say(app, clock, "I drink oat latte every morning", "alice") == "backup-model here"
            assert await say(app, clock, "and tea in the evening", "alice") == "backup-model here"
            # The second message skipped the cooling primary (one failed request, no retry: maxRetries 0).
            assert (len(primary.requests), len(backup.requests)) == (1, 2)
            # The memory model is the chat model here, so it fails over the same way.
            clock.advance(200)
            assert app.extraction is not None
            reports = await app.extraction.tick()  # type: ignore[attr-defined]
            assert [r.ok for r in reports] == [True]
            assert backup.memory_requests("extract")[-1]["model"] == "backup-model"
            # Back up and past its cooldown: the primary answers again.
            primary.down = None
            primary.queue_reply("primary again", kind="chat")
            clock.advance(60)
            assert await say(app, clock, "hello?", "alice") == "primary again"
        finally:
            await app.close()


async def test_an_outage_the_extraction_finds_sends_the_next_chat_turn_to_the_fallback(tmp_path: Path) -> None:
    """The chat model and the memory model on one endpoint share its
    cooldown (the App's): the extraction finds the primary down, and the
    next chat turn goes straight to the fallback without asking it."""
    clock = ManualClock("2026-03-01T12:00:00Z")
    async with FakeOpenAI(api_key="sk-e2e-key-0123456789", responder=answer) as primary, \
            FakeOpenAI(api_key=BACKUP_KEY, responder=answer) as backup:
        app = _app_with_fallback(tmp_path, clock, primary, backup)
        try:
            await app.open()
            await app.start()
            await by_hand(app)  # the test's tick is the extraction counted
            assert await say(app, clock, "I drink oat latte every morning", "alice") == "test-model here"
            assert (len(primary.requests), len(backup.requests)) == (1, 0)
            primary.down = Reply(status=503)
            clock.advance(200)
            assert app.extraction is not None
            reports = await app.extraction.tick()  # type: ignore[attr-defined]
            assert [r.ok for r in reports] == [True]  # the memory model's fallback took it
            assert (len(primary.requests), len(backup.requests)) == (2, 1)
            # The chat turn does not ask the primary the extraction found down.
            assert await say(app, clock, "and tea in the evening", "alice") == "backup-model here"
            assert (len(primary.requests), len(backup.requests)) == (2, 2)
        finally:
            await app.close()
