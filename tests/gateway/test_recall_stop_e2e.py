"""A recall (Feishu) or an edit (Telegram) taken just before a stop or a
crash is still applied: Feishu had its 200 and Telegram's offset passed
the update, so neither platform sends it again, and the recalled words
must not stay in the history, the extraction buffer or the facts.

Real ``App`` on a home directory, the fake Feishu / Telegram / OpenAI
servers, real SQLite; a restart is a new ``App`` on the same home."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock, Provenance
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import PHOTO, _telegram

ALICE = "ou_alice0000000000000000000000000"
SECRET = "my vault password is tulip-4471"


def _start(home: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu) -> App:  # noqa: F811
    return _app(home, clock, llm, {"feishu": _feishu_section(feishu, "webhook")},
                agent={"model": "test-model", "vision": True})


async def _push(app: App, feishu: FakeFeishu, event: dict[str, Any]) -> None:  # noqa: F811
    assert app.http is not None
    assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200


def _everywhere(home: Path, words: str) -> dict[str, int]:
    """How often ``words`` are in each store: Tier 0, the inbox, the
    extraction buffer, the facts (as rows, not bytes: a delete leaves pages)."""
    data = home / "data"
    found: dict[str, int] = {}
    with sqlite3.connect(data / "gateway.db") as db:
        found["tier0"] = db.execute("SELECT COUNT(*) FROM session_messages WHERE content LIKE ?",
                                    (f"%{words}%",)).fetchone()[0]
        found["inbox"] = db.execute("SELECT COUNT(*) FROM inbox WHERE payload LIKE ?", (f"%{words}%",)).fetchone()[0]
    with sqlite3.connect(data / "memory.buffer.db") as db:
        found["buffer"] = db.execute("SELECT COUNT(*) FROM extraction_buffer WHERE content LIKE ?",
                                     (f"%{words}%",)).fetchone()[0]
    with sqlite3.connect(data / "memory.db") as db:
        found["facts"] = db.execute("SELECT COUNT(*) FROM memories WHERE content LIKE ?", (f"%{words}%",)).fetchone()[0]
    return found


def _revisions(home: Path) -> list[tuple[str, str]]:
    """The edits and recalls kept and not yet applied: (kind, message id)."""
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [(str(k), str(m)) for k, m in db.execute("SELECT kind, message_id FROM revisions ORDER BY id")]


NOWHERE = {"tier0": 0, "inbox": 0, "buffer": 0, "facts": 0}


async def _answered_and_buffered(app: App, feishu: FakeFeishu) -> str:  # noqa: F811
    """Alice's secret, answered and handed to memory; its message id."""
    secret = feishu.message_event(SECRET, chat_id="oc_alice", open_id=ALICE)
    await _push(app, feishu, secret)
    await until(lambda: len(feishu.sent) == 1, timeout=15)
    assert app.loop is not None and await app.loop.drain(10)
    return str(secret["event"]["message"]["message_id"])


async def _learnt_from(app: App, home: Path, mid: str) -> None:
    """A fact drawn from message ``mid`` alone, as extraction or memory_save
    keeps it (its provenance names the message)."""
    assert app.backend is not None
    await app.backend.remember(f"feishu:{ALICE}", "Alice's vault password is tulip-4471",
                               provenance=Provenance(channel="feishu", chat_id="oc_alice", message_ids=(mid,)),
                               source_text=SECRET, category="credential")
    assert _everywhere(home, "tulip-4471")["facts"] == 1


async def _asked_again(home: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu) -> None:  # noqa: F811
    """A restart; Alice asks what she said. Every prompt of this run is
    checked by the caller (``llm.requests`` from ``first``)."""
    app = _start(home, clock, llm, feishu)
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        sent = len(feishu.sent)
        await _push(app, feishu, feishu.message_event("what did I tell you?", chat_id="oc_alice", open_id=ALICE))
        await until(lambda: len(feishu.sent) > sent, timeout=15)
        await quiet(app)
    finally:
        await asyncio.wait_for(app.close(), 30)


async def test_a_recall_queued_behind_a_turn_when_a_stop_comes_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """The recall waits in the chat's queue behind a turn whose model call
    outlasts the stop: the next start erases the message all the same."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            mid = await _answered_and_buffered(app, feishu)
            assert _everywhere(tmp_path, "tulip-4471")["buffer"] == 2  # its line and the reply echoing it
            await _learnt_from(app, tmp_path, mid)
            llm.queue_hold("never sent")
            await _push(app, feishu, feishu.message_event("and one more thing", chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(llm.requests) == 2, timeout=15)
            await _push(app, feishu, feishu.recall_event(mid, chat_id="oc_alice"))  # queued behind the held turn
        finally:
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        first = len(llm.requests)
        clock.advance(60)
        await _asked_again(tmp_path, clock, llm, feishu)
    assert llm.requests[first:] and not any("tulip-4471" in json.dumps(r, ensure_ascii=False)
                                            for r in llm.requests[first:])
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE
    assert _revisions(tmp_path) == []


async def test_a_recall_waiting_behind_a_download_when_a_stop_with_no_time_comes_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """The recall waits in the chat's Feishu lane behind a picture being
    downloaded; the stop has no time left: the next start erases the
    message, and the bot's reply repeating it leaves the chat."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        release = feishu.hold_resource(key)
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            mid = await _answered_and_buffered(app, feishu)
            await _push(app, feishu, feishu.message_event(message_type="image", content={"image_key": key},
                                                          chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(feishu.resource_requests) == 1, timeout=15)
            await _push(app, feishu, feishu.recall_event(mid, chat_id="oc_alice"))  # in the lane, behind the picture
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        release.set()
        first = len(llm.requests)
        clock.advance(60)
        await _asked_again(tmp_path, clock, llm, feishu)
    assert not any("tulip-4471" in json.dumps(r, ensure_ascii=False) for r in llm.requests[first:])
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE
    assert feishu.sent[0]["message_id"] in feishu.deleted  # "re: my vault password ...", withdrawn
    assert _revisions(tmp_path) == []


async def test_a_recall_taken_just_before_a_crash_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Feishu had its 200 for the recall, and the gateway is killed before
    the loop reached it (queued behind a turn): applied at the next start."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            mid = await _answered_and_buffered(app, feishu)
            llm.queue_hold("never sent")
            await _push(app, feishu, feishu.message_event("and one more thing", chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(llm.requests) == 2, timeout=15)
            await _push(app, feishu, feishu.recall_event(mid, chat_id="oc_alice"))
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        first = len(llm.requests)
        clock.advance(60)
        await _asked_again(tmp_path, clock, llm, feishu)
    assert not any("tulip-4471" in json.dumps(r, ensure_ascii=False) for r in llm.requests[first:])
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE
    assert _revisions(tmp_path) == []


async def test_a_message_recalled_while_it_waited_in_the_inbox_at_a_crash_is_never_answered(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Alice's message waits behind a turn (kept in the inbox, not begun)
    when she recalls it, and the gateway is killed: the next start neither
    answers it nor stores it."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            llm.queue_hold("never sent")
            await _push(app, feishu, feishu.message_event("first things first", chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(llm.requests) == 1, timeout=15)
            secret = feishu.message_event(SECRET, chat_id="oc_alice", open_id=ALICE)
            await _push(app, feishu, secret)
            await _push(app, feishu, feishu.recall_event(secret["event"]["message"]["message_id"], chat_id="oc_alice"))
            assert app.inbox is not None
            await app.inbox.flush()
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        clock.advance(60)
        await _asked_again(tmp_path, clock, llm, feishu)
    assert "tulip-4471" not in llm.prompts_text()
    assert not any("tulip-4471" in t for t in feishu.texts())
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE


# -- Telegram: an edit at the same boundary ----------------------------------------------


async def test_a_telegram_edit_queued_behind_a_turn_when_a_stop_comes_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Telegram's offset passed the edit (it was on the bus), so it is
    never sent again: the next start changes the stored words and the line
    memory is still to learn, as the live edit would have."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            sent = tg.push_text(42, 42, "my vault password is tulip-4471")
            await tg.wait_sent(1, timeout=15)
            assert app.loop is not None and await app.loop.drain(10)
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "and one more thing")
            await until(lambda: len(llm.requests) == 2, timeout=15)
            tg.push_edit(42, sent["message_id"], "my vault password is in the safe")
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
        finally:
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        first = len(llm.requests)
        clock.advance(60)
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "what did I tell you?")
            await until(lambda: any("what did I tell you?" in m.text for m in tg.sent), timeout=15)
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    later = json.dumps(llm.requests[first:], ensure_ascii=False)
    assert "in the safe" in later and "tulip-4471" not in later.replace("re: my vault password is tulip-4471", "")
    found = _everywhere(tmp_path, "tulip-4471")
    assert found["inbox"] == 0 and found["facts"] == 0
    with sqlite3.connect(tmp_path / "data" / "memory.buffer.db") as db:  # the line still to learn, as edited
        assert [c for (c,) in db.execute("SELECT content FROM extraction_buffer WHERE role = 'user' AND content "
                                         "LIKE '%vault%'")] == ["my vault password is in the safe"]
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        assert db.execute("SELECT content FROM session_messages WHERE role = 'user' ORDER BY id LIMIT 1").fetchone() \
            == ("my vault password is in the safe",)
    assert _revisions(tmp_path) == []


async def test_a_telegram_edit_of_a_message_waiting_in_the_inbox_at_a_crash_is_answered_as_edited(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The message waits behind a turn (kept in the inbox, not begun) when
    it is edited, and the gateway is killed: the next start answers the
    edited words, never the first ones."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "first things first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            sent = tg.push_text(42, 42, "my vault password is tulip-4471")
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            tg.push_edit(42, sent["message_id"], "my vault password is in the safe")
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            assert app.inbox is not None
            await app.inbox.flush()
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        tg.sent.clear()  # what the test's stop (not a kill) sent
        clock.advance(60)
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await until(lambda: any("in the safe" in m.text for m in tg.sent), timeout=15)
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "tulip-4471" not in llm.prompts_text() and "in the safe" in llm.prompts_text()
    assert not any("tulip-4471" in m.text for m in tg.sent)
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE
    assert _revisions(tmp_path) == []


async def test_a_message_recalled_while_it_is_answered_when_a_stop_comes_is_not_answered_again(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Alice recalls her message while the model answers it, and the stop
    cuts that turn: the next start erases it instead of answering it again."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            llm.queue_hold("never sent")
            secret = feishu.message_event(SECRET, chat_id="oc_alice", open_id=ALICE)
            await _push(app, feishu, secret)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await _push(app, feishu, feishu.recall_event(secret["event"]["message"]["message_id"], chat_id="oc_alice"))
        finally:
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        first = len(llm.requests)
        clock.advance(60)
        await _asked_again(tmp_path, clock, llm, feishu)
    assert len(llm.requests) == first + 1  # the new question only: the recalled one is not answered again
    assert "tulip-4471" not in json.dumps(llm.requests[first:], ensure_ascii=False)
    assert not any("tulip-4471" in t for t in feishu.texts())
    assert _everywhere(tmp_path, "tulip-4471") == NOWHERE
    assert _revisions(tmp_path) == []
