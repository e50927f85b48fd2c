"""A gateway that runs for months meets thousands of chats: what the process
loop and the session store keep per chat in memory is capped (a chat
forgotten is read again from gateway.db), and no task outlives its chat's turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI

from .conftest import make_rig


async def test_many_chats_leave_only_the_recent_ones_in_memory_and_no_task_behind(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm, history=2, chats_kept=8) as rig:
        for chat in range(40):
            for _ in range(3):  # past the window: pruning counts each chat's marks
                await rig.ask("hi", chat=str(chat), sender=str(1000 + chat))
        await rig.settle()
        assert len(rig.loop._clean) <= 8
        assert len(rig.sessions._current) <= 8
        assert len(rig.sessions._unpruned) <= 8
        assert not rig.loop._queues and not rig.loop._workers and not rig.loop._buffering and not rig.loop._current
        await asyncio.sleep(0)
        per_chat = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(("chat:", "turn:", "buffer:"))]
        assert per_chat == []


async def test_a_chat_the_loop_forgot_still_has_rows_left_unbuffered_buffered_first(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm, chats_kept=4) as rig:
        await rig.ask("first", chat="0", sender="1000")
        await rig.settle()
        sid = await rig.sessions.current("telegram:0")
        # a row another run left unbuffered (a crash between storing and buffering)
        await rig.sessions.append("telegram:0", channel="telegram", chat_id="0", role="user", content="lost?",
                                  owner="telegram:1000", message_id="77")
        for chat in range(1, 10):  # chat 0 falls out of what the loop and the store remember
            await rig.ask("hi", chat=str(chat), sender=str(1000 + chat))
        await rig.settle()
        assert "telegram:0" not in rig.loop._clean
        await rig.ask("again", chat="0", sender="1000")
        await rig.settle()
        rows = await rig.engine.db.fetchall("SELECT content FROM extraction_buffer WHERE chat_id = '0' ORDER BY id")
        assert [r[0] for r in rows] == ["first", "ok", "lost?", "again", "ok"]
        assert await rig.sessions.current("telegram:0") == sid  # the same session, read again
