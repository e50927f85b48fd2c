"""A comment whose forwards come in the next poll: Telegram clients send
the comment first, and getUpdates may answer before the forwards reach
it. The forwards' burst takes the comment in and supersedes its turn if
that turn has not answered yet: one reply, which read the comment with
the forwards. The App, the fake Telegram server (two polls), the
OpenAI-compatible fake (a slow first answer: the comment's turn is under
way, or queued behind another), SQLite files."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app, _until
from .test_quoted_e2e import _telegram
from .test_telegram_forwards_e2e import FEB_27
from .test_vision_e2e import _rows

BURST = "[forwarded from Dana, sent 2026-02-27]\nlaunch moves to Friday\n\nwhat does she want?"
FORWARD = "[forwarded from Dana, sent 2026-02-27]\nlaunch moves to Friday"


class SlowFirst:
    """Answers what it was sent; the first answer waits for ``gate`` (a
    model still thinking until the test lets it go)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        self.calls.append(said(body))
        if len(self.calls) == 1:
            await self.gate.wait()
        return Reply(content=f"re: {said(body)}")


async def test_forwards_in_the_next_poll_supersede_their_comments_turn(tmp_path: Path, clock: ManualClock) -> None:
    model = SlowFirst()
    calls = model.calls
    async with FakeOpenAI(api_key="sk-poll-e2e-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(9, 9, "what does she want?")
            await _until(lambda: len(calls) == 1)  # taken in a poll of its own; its model call under way
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == f"re: {BURST}"
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.superseded == 1
            assert calls == ["what does she want?", BURST]
            assert len(tg.sent) == 1
        finally:
            model.gate.set()
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [("user", BURST), ("assistant", f"re: {BURST}")]


async def test_a_comment_answered_while_its_burst_gathers_gets_no_reply_of_its_own(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The model answers the comment after its forwards came but before
    their burst is quiet (album_quiet after the last forward): the answer
    waits for the burst, which takes the comment in, and is never sent.
    One reply, the burst's."""
    model = SlowFirst()
    calls = model.calls
    async with FakeOpenAI(api_key="sk-poll-e2e-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            comment_id = str(tg.push_text(9, 9, "what does she want?")["message_id"])
            await _until(lambda: len(calls) == 1)  # its model call under way
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
            await _until(lambda: app.bus.holding("telegram:9", comment_id))  # the burst began, gathering
            model.gate.set()  # the comment is answered now, while the burst still gathers
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == f"re: {BURST}"
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.superseded == 1 and calls == ["what does she want?", BURST]
            assert len(tg.sent) == 1 and not app.bus.holding("telegram:9", comment_id)
        finally:
            model.gate.set()
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [("user", BURST), ("assistant", f"re: {BURST}")]


async def test_a_queued_comment_is_taken_in_without_asking_the_model(tmp_path: Path, clock: ManualClock) -> None:
    """The chat is busy with an earlier message: the comment waits in its
    queue, and the forwards' message takes its place there."""
    model = SlowFirst()
    calls = model.calls
    async with FakeOpenAI(api_key="sk-poll-e2e-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(9, 9, "hello")
            await _until(lambda: len(calls) == 1)
            tg.push_text(9, 9, "what does she want?")
            await _until(lambda: app.loop is not None and app.loop.stats.received == 2)
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
            await _until(lambda: app.loop is not None and app.loop.stats.superseded == 1)
            model.gate.set()  # "hello" answered only now: the comment waited behind it all along
            [hello, burst] = await tg.wait_sent(2, timeout=10)
            assert (hello.text, burst.text) == ("re: hello", f"re: {BURST}")
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.superseded == 1 and calls == ["hello", BURST]
        finally:
            model.gate.set()
            await asyncio.wait_for(app.close(), 15)
    assert [c for r, c in _rows(tmp_path) if r == "user"] == ["hello", BURST]


async def test_a_comments_turn_that_made_a_job_is_not_dropped_for_its_forwards(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The comment's model already made a scheduled job when the forwards
    come: dropped, its reply (the one saying so) would never be sent and
    its rows erased, so the burst's model, seeing nothing of it, would
    make the job again. It ends as it was; the burst is answered after it."""
    async with FakeOpenAI(api_key="sk-poll-e2e-0123456789",
                          responder=lambda body: Reply(content=f"re: {said(body)}")) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            llm.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
                "schedule": "0 9 * * 1", "message": "ask what Dana wants"}}])
            held = llm.queue_hold("Done: every Monday at 9:00 I will ask.")
            tg.push_text(9, 9, "what does she want?")
            await _until(lambda: len(llm.requests) == 2)  # the job made, the model asked on
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
            await _until(lambda: app.loop is not None and app.loop.stats.received == 2)
            held.set()
            [comment, burst] = await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.superseded == 0 and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert comment.text == "Done: every Monday at 9:00 I will ask." and burst.text == f"re: {BURST}"
    assert "Done: every Monday" in str(llm.chat_requests()[2]["messages"])  # the burst's model sees what was done
    with sqlite3.connect(tmp_path / "data" / "cron.db") as db:
        assert db.execute("SELECT COUNT(*) FROM cron_jobs WHERE kind != 'internal'").fetchone() == (1,)


async def test_a_comment_already_answered_stays_and_its_forwards_are_answered_too(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Its reply went out before the forwards came: nothing is withdrawn."""
    async with FakeOpenAI(api_key="sk-poll-e2e-0123456789", responder=lambda b: Reply(content=f"re: {said(b)}")) as llm, \
            FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(9, 9, "what does she want?")
            await tg.wait_sent(1, timeout=10)
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
            [first, second] = await tg.wait_sent(2, timeout=10)
            assert (first.text, second.text) == ("re: what does she want?", f"re: {BURST}")
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.superseded == 0 and len(llm.requests) == 2
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_stop_while_the_burst_gathers_loses_neither_the_comment_nor_its_forwards(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The comment's turn is under way and its forward is still being
    gathered when the gateway stops past its timeout (with no time left at
    all, too): the comment's turn is answered at the restart, and the
    forward, never put on the bus so never confirmed, comes again from
    Telegram and is answered too. Each once; not as one message (what the
    burst took in is not known across a restart). With no time left the
    forward went on the bus after the loop had closed, was confirmed, and
    was never answered."""
    for stop in (0.0, 1.0):
        home = tmp_path / f"stop-{stop}"
        home.mkdir()
        model = SlowFirst()
        async with FakeOpenAI(api_key="sk-poll-e2e-0123456789", responder=model) as llm, FakeTelegram() as tg:
            app = _app(home, clock, llm, {"telegram": _telegram(tg)})
            try:
                await app.open()
                await asyncio.wait_for(app.start(), 15)
                comment = str(tg.push_text(9, 9, "what does she want?")["message_id"])
                await _until(lambda: len(model.calls) == 1)
                tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
                bus = app.bus
                await _until(lambda: bus.holding("telegram:9", comment))  # the forward's burst gathering, the comment in it
            finally:
                await asyncio.wait_for(app.close(timeout=stop), 15)
            model.gate.set()
            assert tg.pending_updates == 1, stop  # the forward: not confirmed
            clock.advance(60)
            app = _app(home, clock, llm, {"telegram": _telegram(tg)})
            try:
                await app.open()
                await asyncio.wait_for(app.start(), 15)
                await tg.wait_sent(2, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                await asyncio.sleep(1.5)  # a second reply, if any, would come now
            finally:
                await asyncio.wait_for(app.close(), 15)
            assert [m.text for m in tg.sent] == ["re: what does she want?", f"re: {FORWARD}"], stop
            assert _rows(home) == [("user", "what does she want?"), ("assistant", "re: what does she want?"),
                                   ("user", FORWARD), ("assistant", f"re: {FORWARD}")]
