"""A file recalled in a Feishu group after its message left the history,
end to end: the App on its SQLite files, the fake Feishu Open API (the
file downloaded from it, the recall an ``im.message.recalled_v1`` event),
the fake OpenAI model. Tier 0 keeps a window per chat, so a busy group
prunes the file's row within a few turns, while ``file_read`` keeps the
file a day: the recall must find the file by its message id, or any
member asking the bot for "the latest file" has it read out."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until, feishu  # noqa: F401 (fixture)

ALICE = "ou_alice0000000000000000000000000"
BOB = "ou_bob00000000000000000000000000"
GROUP = "oc_team0000000000000000000000000"
SECRET = "Health notes: diagnosed with sarcoidosis. Bank PIN 83715."


def model(body: dict[str, Any]) -> Reply:
    """``tool: NAME`` calls that tool; its answer is repeated to the chat."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(content="tool said: " + text_of(last["content"]))
    words = said(body)
    if "tool: file_read" in words:
        return Reply(content=None, tool_calls=[{"name": "file_read", "arguments": {}}])
    return Reply(content="noted")


async def test_a_file_recalled_after_its_history_row_was_pruned_is_not_read_to_bob(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key="sk-recalled-files-0123456789", responder=model) as llm:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")},
                   agent={"model": "test-model", "historyMessages": 2})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None and app.loop is not None and app.sessions is not None
            assert app.recent_files is not None
            hook = app.http.url + "/feishu/events"

            async def push(event: dict[str, Any], replies: int) -> None:
                assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                await _until(lambda: len(feishu.sent) == replies)
                assert app.loop is not None and await app.loop.drain(10)

            def to_bot(text: str, sender: str) -> dict[str, Any]:
                return feishu.message_event(f"@_user_1 {text}", chat_id=GROUP, chat_type="group", open_id=sender,
                                            mentions=[feishu.mention()])

            await push(to_bot("hello", ALICE), 1)
            # Her file, as a reply to the bot's message (addressed to it: a file carries no mention).
            key = feishu.add_file(SECRET.encode(), "text/plain")
            sent = feishu.message_event(message_type="file", content={"file_key": key, "file_name": "notes.txt"},
                                        chat_id=GROUP, chat_type="group", open_id=ALICE,
                                        parent_id=feishu.sent[0]["message_id"])
            await push(sent, 2)
            await app.recent_files.flush()
            mid = sent["event"]["message"]["message_id"]
            assert [f.message_id for f in app.recent_files.files(f"feishu:{GROUP}")] == [mid]
            await push(to_bot("what's for lunch?", BOB), 3)
            await push(to_bot("and tomorrow?", BOB), 4)
            assert await app.sessions.find(f"feishu:{GROUP}", mid) is None  # pruned from Tier 0

            assert (await feishu.push_event(hook, feishu.recall_event(mid), encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 1)
            assert await app.loop.drain(10)
            assert app.recent_files.files(f"feishu:{GROUP}") == []

            n = len(llm.requests)
            await push(to_bot("tool: file_read", BOB), 5)
            seen = json.dumps([r["messages"] for r in llm.requests[n:]], ensure_ascii=False) + feishu.texts()[-1]
            assert "sarcoidosis" not in seen and "83715" not in seen
            offered = [t["function"]["name"] for r in llm.requests[n:] for t in r.get("tools", [])]
            assert "file_read" not in offered and "there is no tool named 'file_read'" in feishu.texts()[-1]
        finally:
            await asyncio.wait_for(app.close(), 30)
    with closing(sqlite3.connect(tmp_path / "data" / "gateway.db")) as db:
        assert db.execute("SELECT count(*) FROM recent_files").fetchone() == (0,)
