"""A full disk under the whole gateway, end to end: the App built from a
config, the fake Telegram server and the fake model on 127.0.0.1, real
SQLite files filled for real (``PRAGMA max_page_count``: SQLite's own
SQLITE_FULL). gateway.db fills first, then memory.db, then space comes
back, with no restart: each user is told the truth in their language,
nothing is answered twice, nothing accepted is lost, and the log says so
a line a failure, not a line a retry."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from gateway.app import App
from gateway.logging import configure_logging
from memory import ManualClock
from memory.extraction import BACKOFF
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram
from tests.memory.test_compression_full import fill_up, words

from .test_e2e_feishu import ALICE, ENCRYPT_KEY, _app, _feishu_section, _until
from .test_quoted_e2e import _telegram

FACTS = [{"content": f"Alice keeps note {i}: {words(i, 30)}", "category": "config"} for i in range(40)]
SPACE = 1073741823  # SQLite's default max_page_count: the disk has room again


def model(body: dict[str, Any]) -> Reply:
    if body.get("response_format", {}).get("type") == "json_object":  # the memory model
        return Reply(content=json.dumps({"facts": FACTS, "summary": "Alice's notes"}))
    return Reply(content=f"re: {said(body)[:40].strip()}")


async def _history(app: App, chat: str) -> list[tuple[str, str]]:
    assert app.sessions is not None
    return [(m.role, m.content[:40]) for m in await app.sessions.window(chat)]


async def test_the_gateway_tells_the_truth_on_a_full_disk_and_recovers_when_space_is_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key="sk-diskfull-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.sessions is not None and app.loop is not None and app.extraction is not None
            # This test drives extraction by hand: the background loop's own
            # tick (it wakes on each buffered line) took the failure first in
            # 1 of 4 runs under load, and the test's tick found nothing due.
            await app.extraction.stop()
            engine = app.backend.engine  # type: ignore[union-attr]
            tg.push_text(42, 42, "hello")
            await tg.wait_sent(1, timeout=10)

            # gateway.db is full: the messages cannot be kept, so Telegram is not told they arrived.
            (pages,) = await app.sessions.db.fetchall("PRAGMA page_count")
            await app.sessions.db.write(f"PRAGMA max_page_count = {pages[0]}")
            plan = "my whole travel plan: " + words(1, 3000)  # more than the free pages hold
            zh = "我的行程：" + "每一天，" * 4000
            tg.push_text(42, 42, plan)
            tg.push_text(43, 43, zh)
            assert app.inbox is not None
            inbox = app.inbox
            await _until(lambda: inbox.failed >= 2)  # tried again, after a pause
            assert tg.pending_updates == 2 and len(tg.sent) == 1 and await app.loop.drain(5)

            # Space is back: the same gateway takes them from Telegram, answers and keeps them; nothing lost.
            await app.sessions.db.write(f"PRAGMA max_page_count = {SPACE}")
            await tg.wait_sent(3, timeout=40)
            assert await app.loop.drain(5)
            await _until(lambda: tg.pending_updates == 0)
            # What they said is learnt while memory.db has room (both are over the buffer's token budget).
            clock.advance(timedelta(minutes=4))
            early = await app.extraction.tick()  # type: ignore[attr-defined]
            assert all(r.ok for r in early)

            # memory.db is full: the chat goes on (the buffer is its own file); learning waits.
            learnt_before = len(await engine.list_memories("telegram:42", limit=100))
            await fill_up(engine)
            tg.push_text(42, 42, "my locker is 42")
            await tg.wait_sent(4, timeout=10)
            assert await app.loop.drain(5)
            clock.advance(timedelta(minutes=4))  # past the quiet gap
            [failed] = await app.extraction.tick()  # type: ignore[attr-defined]
            assert failed.error == "OperationalError (SQLITE_FULL) (memory.db)"
            asked = len(llm.requests)
            assert await app.extraction.tick() == [] and len(llm.requests) == asked  # type: ignore[attr-defined]
            assert len(await engine.list_memories("telegram:42", limit=100)) == learnt_before  # nothing learnt meanwhile

            # The buffer's file fills too: answered all the same; what is said waits in gateway.db.
            await engine.db.write("VACUUM buffer")  # the early flush left free pages there: none now
            (pages,) = await engine.db.fetchall("PRAGMA buffer.page_count")
            await engine.db.write(f"PRAGMA buffer.max_page_count = {pages[0]}")
            bike = "and my bike lock code is 1234, " + words(5, 3000)
            tg.push_text(42, 42, bike)
            await tg.wait_sent(5, timeout=10)
            assert await app.loop.drain(5)
            tg.push_text(42, 42, "and my desk is 7")
            await tg.wait_sent(6, timeout=10)
            assert await app.loop.drain(5)
            await engine.db.write(f"PRAGMA buffer.max_page_count = {SPACE}")
            tg.push_text(42, 42, "that is all")
            await tg.wait_sent(7, timeout=10)
            assert await app.loop.drain(5)

            await engine.db.write(f"PRAGMA main.max_page_count = {SPACE}")
            clock.advance(BACKOFF[0])
            learnt = await app.extraction.tick()  # type: ignore[attr-defined]
            assert all(r.ok for r in learnt) and learnt
            assert await engine.db.fetchall("SELECT id FROM extraction_buffer") == []  # every turn learnt from

            # Each message answered once, in order, none with a "not saved" note: none was lost.
            assert tg.texts(42) == [
                "re: hello", f"re: {plan[:40].strip()}", "re: my locker is 42", f"re: {bike[:40].strip()}",
                "re: and my desk is 7", "re: that is all",
            ]
            assert tg.texts(43) == [f"re: {zh[:40]}"]
            assert await _history(app, "telegram:42") == [
                ("user", "hello"), ("assistant", "re: hello"), ("user", plan[:40]), ("assistant", f"re: {plan[:36]}"),
                ("user", "my locker is 42"), ("assistant", "re: my locker is 42"),
                ("user", bike[:40]), ("assistant", f"re: {bike[:36]}"), ("user", "and my desk is 7"),
                ("assistant", "re: and my desk is 7"), ("user", "that is all"), ("assistant", "re: that is all"),
            ]
            assert app.delivery is not None and await app.delivery.outbox.count() == 0
        finally:
            await asyncio.wait_for(app.close(), 15)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    loud = [(e["level"], e["event"]) for e in lines if e["level"] in ("warning", "error")]
    assert loud == [
        # The inbox fails (before the message goes on the bus): held at Telegram, so Tier 0 is never tried.
        ("error", "message not saved in the inbox: held at the platform, tried again until there is room; "
                  "later failures are counted until one is saved"),
        ("warning", "messages are saved in the inbox again"),
        ("error", "buffering for extraction failed; will retry"),
        ("warning", "buffering for extraction works again"),
    ]
    [again] = [e for e in lines if e["event"] == "messages are saved in the inbox again"]
    assert again["not_saved"] >= 2
    assert not any("travel plan" in line or "每一天" in line for line in stream.getvalue().splitlines())


async def test_feishu_on_a_full_gateway_db_is_told_to_send_again_and_a_redelivered_event_is_answered_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The event cannot be kept: the webhook does not answer 200, so Feishu
    sends it again (it retries for hours); once there is room it is taken
    and answered, and a further copy is not answered twice."""
    async with FakeOpenAI(api_key="sk-diskfull-0123456789", responder=model) as llm, FakeFeishu() as feishu:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.sessions is not None and app.loop is not None and app.http is not None
            hook = app.http.url + "/feishu/events"
            (pages,) = await app.sessions.db.fetchall("PRAGMA page_count")
            await app.sessions.db.write(f"PRAGMA max_page_count = {pages[0]}")
            plan = "我的行程：" + "每一天，" * 4000
            first = feishu.message_event(plan, chat_id="oc_alice", open_id=ALICE)
            assert (await feishu.push_event(hook, first, encrypt_key=ENCRYPT_KEY)).status_code == 503
            assert await app.loop.drain(5) and feishu.sent == []
            await app.sessions.db.write(f"PRAGMA max_page_count = {SPACE}")
            # Feishu's retry: taken now, and answered.
            assert (await feishu.push_event(hook, first, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 1)
            assert await app.loop.drain(5)
            # Feishu sends the same event again (it does, when unsure it arrived): not answered again.
            assert (await feishu.push_event(hook, first, encrypt_key=ENCRYPT_KEY)).status_code == 200
            assert await app.loop.drain(5)
            assert [m["text"] for m in feishu.sent] == [f"re: {plan[:40]}"]
        finally:
            await asyncio.wait_for(app.close(), 30)
