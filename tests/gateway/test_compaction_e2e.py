"""The pre-compaction flush (seed 003, issue 4) through the whole App: what
a user said only in messages that have left the prompt's window is
extracted then, not after the conversation pauses, so the model's next
requests still carry it (as a recalled memory), however long the
conversation goes on without a pause."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gateway.app import App
from gateway.bus import InboundMessage
from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, fact, running, say
from tests.gateway.test_app import EchoChannel


async def learnt(app: App, owner: str, words: str) -> bool:
    engine = app.backend.engine  # type: ignore[union-attr]
    for _ in range(500):  # the background extraction, woken by the turn
        if any(m.content == words for m in await engine.list_memories(owner)):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_fact_said_before_the_window_is_still_in_the_models_request(tmp_path: Path) -> None:
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    model.extractions.append(("4471", {"facts": [fact("The user's gym locker code is 4471")], "summary": "gym"}))
    async with running(tmp_path, model, clock, agent={"model": "test-model", "historyMessages": 4}) as (app, fake):
        await say(app, clock, "Remember: my locker code at the gym is 4471.", "alice")
        for i in range(3):  # a quick exchange: no quiet gap, few tokens
            clock.advance(5)
            await say(app, clock, f"small talk number {i}", "alice")
        # The locker line has left the four-message window: it is extracted now.
        assert await learnt(app, "echo:alice", "The user's gym locker code is 4471")
        clock.advance(5)
        await say(app, clock, "what is my gym locker code?", "alice")
        request = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "The user's gym locker code is 4471" in request
        assert "my locker code at the gym is 4471" not in request  # not from the window: it has left it


async def test_a_long_conversation_is_extracted_as_its_lines_leave_not_at_every_turn(tmp_path: Path) -> None:
    """One extraction call when lines leave the window, not one per turn."""
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, agent={"model": "test-model", "historyMessages": 8}) as (app, fake):
        app.extraction.wake_gap = 0.0  # type: ignore[attr-defined]  # a tick after every turn, as turns a second apart get
        for i in range(12):
            clock.advance(10)  # within the rate limit (10 messages a minute)
            await say(app, clock, f"line {i} of a long chat", "alice")
            await asyncio.sleep(0.2)  # lets the woken extraction run between turns
        for _ in range(300):
            if len(model.extraction_prompts) >= 2:
                break
            await asyncio.sleep(0.01)
        # Eight messages are four turns: turn 1 leaves at turn 5 (lines 1-5 extracted), turn 6 at
        # turn 10; twelve turns, two flushes (three if a tick came late), never one a turn.
        assert 2 <= len(model.extraction_prompts) <= 3, len(model.extraction_prompts)


async def test_a_new_session_flushes_what_the_old_one_left_unextracted(tmp_path: Path) -> None:
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    model.extractions.append(("Oporto", {"facts": [fact("The user's sister lives in Oporto")], "summary": "family"}))
    async with running(tmp_path, model, clock) as (app, fake):
        await say(app, clock, "my sister lives in Oporto", "alice")
        clock.advance(5)
        await say(app, clock, "/new", "alice")
        clock.advance(5)
        await say(app, clock, "hello again", "alice")
        assert await learnt(app, "echo:alice", "The user's sister lives in Oporto")
        other = await app.backend.engine.list_memories("echo:bob")  # type: ignore[union-attr]
        assert other == []


async def test_a_reply_does_not_wait_for_memory_db_while_a_flush_holds_its_writer(tmp_path: Path) -> None:
    """A chat's next message waits until its last turn is handed to memory,
    in order, not until memory.db committed it: a flush's transaction (held
    here for the whole exchange) delays the lines' write, never the replies.
    Nothing is lost and the lines keep their order once it ends."""
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel)
        held, release = asyncio.Event(), asyncio.Event()

        async def flush_holding_the_writer() -> None:
            async with engine.db.transaction():
                held.set()
                await release.wait()

        holder = asyncio.create_task(flush_holding_the_writer())
        await held.wait()
        try:
            for i in range(3):  # quick lines: each waits for the last one's buffering
                clock.advance(5)
                echo.got.clear()
                await echo.publish(InboundMessage(channel="echo", chat_id="c-alice", sender_id="alice",
                                                  text=f"quick line {i}", timestamp=clock.now()))
                # No speed is asserted: the writer is held until `release`, set
                # only after the three replies, so a reply waiting for memory.db
                # would never come. The bound only fails such a build instead
                # of hanging it; 3 s was tight on a loaded box (session 36).
                await asyncio.wait_for(echo.got.wait(), 30)
            assert holder.done() is False  # every reply came while memory.db's writer was held
        finally:
            release.set()
            await holder
        assert app.loop is not None and await app.loop.drain(5)
        rows = await engine.db.fetchall(
            "SELECT role, content FROM extraction_buffer WHERE owner = 'echo:alice' ORDER BY id")
        assert [r["content"] for r in rows if r["role"] == "user"] == [f"quick line {i}" for i in range(3)]
        assert [r["role"] for r in rows] == ["user", "assistant"] * 3
        assert app.sessions is not None and await app.sessions.unbuffered("echo:c-alice") == []
