"""A Feishu chat record end to end: ``App`` with Feishu by webhook, the fake
Feishu Open API (the record read by its id, names from the contact API),
the fake LLM. The model reads who said what; Tier 0 keeps the record in
its ``[forwarded: ...]`` form, never as the user's own words."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu, RecordMessage
from tests.fakes.openai_server import FakeOpenAI, Reply, said

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until

ALICE = "ou_alice0000000000000000000000000"
DANA, BOB = "ou_dana000000000000000000000000", "ou_bob0000000000000000000000000"


def _ms(hour: int, minute: int) -> int:
    return int(datetime(2026, 2, 27, hour, minute, tzinfo=UTC).timestamp() * 1000)


def _rows(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        return [c for (c,) in db.execute("SELECT content FROM session_messages WHERE role = 'user' ORDER BY id")]


async def test_a_chat_record_reaches_the_model_with_its_authors_and_stays_forwarded_in_history(
    tmp_path: Path, clock: ManualClock
) -> None:
    record = [
        RecordMessage(DANA, "The launch moves to Thursday 14:00", sent_ms=_ms(9, 30)),
        RecordMessage(BOB, "Then QA needs the build by Wednesday", sent_ms=_ms(9, 31)),
        RecordMessage(DANA, "agreed", sent_ms=_ms(9, 32)),
    ]
    expected = ("[forwarded: 3 messages, sent 2026-02-27]\nDana: The launch moves to Thursday 14:00\n"
                "person 1: Then QA needs the build by Wednesday\nDana: agreed")
    async with FakeFeishu() as feishu, FakeOpenAI(
        api_key="sk-test-forwards-e2e-0123456789", responder=lambda body: Reply(content="summary: " + said(body)),
    ) as llm:
        feishu.contacts[DANA] = "Dana"  # Bob is outside the app's contact range
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            hook = app.http.url + "/feishu/events"
            event = feishu.chat_record_event(record, chat_id="oc_alice", open_id=ALICE)
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 1)
            # The model read the record with its authors, and answered it without a comment from the user.
            assert said(llm.chat_requests()[0]) == expected
            [sent] = feishu.sent
            assert (sent["chat_id"], sent["text"]) == ("oc_alice", "summary: " + expected)
            # The next turn re-reads the history: the record is still marked as forwarded there.
            follow = feishu.message_event("what did Bob need?", chat_id="oc_alice", open_id=ALICE)
            assert (await feishu.push_event(hook, follow, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 2)
            history = [m["content"] for m in llm.chat_requests()[1]["messages"] if m["role"] == "user"]
            assert any(str(c).endswith(expected) for c in history[:-1])
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [expected, "what did Bob need?"]
