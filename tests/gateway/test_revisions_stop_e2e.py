"""What a stop, a crash or a failure still lost around members' leavings
and edits: a member's leaving taken just before a stop or a crash is
applied at the next start (their jobs no longer post as them in the group
they left); an edit whose application failed is applied at the next
start; an edit of a comment sent with forwards, whose message still waits
for its turn, is what gets answered.

Real ``App`` on a home directory, the fake Feishu / Telegram / OpenAI
servers, real SQLite; a restart is a new ``App`` on the same home."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from gateway.app import App
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .killed import killed, quiet
from .test_e2e_feishu import _app, feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import until
from .test_recall_stop_e2e import _push, _revisions, _start
from .test_resume_e2e import KEY, _echo
from .test_telegram_forwards_e2e import FEB_27
from .test_vision_e2e import _telegram

ALICE = "ou_alice0000000000000000000000000"
BOB = "ou_bob00000000000000000000000000"
GROUP = -100600


def _jobs(home: Path) -> list[tuple[str, str]]:
    """The scheduled jobs: (user, chat)."""
    with sqlite3.connect(home / "data" / "cron.db") as db:
        return sorted((str(u), str(c)) for u, c in db.execute(
            "SELECT user, chat_id FROM cron_jobs WHERE kind != 'internal'"))


async def _two_jobs(app: App, channel: str, chat: str, alice: str, bob: str) -> None:
    store = app._cron_store  # type: ignore[attr-defined]
    for user in (alice, bob):
        await store.add(message=f"standup for {user}", channel=channel, chat_id=chat, user=user, schedule="0 8 * * *")


async def _started(app: App) -> None:
    await app.open()
    await asyncio.wait_for(app.start(), 15)


async def test_a_telegram_member_leaving_queued_behind_a_turn_when_a_stop_comes_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Telegram's offset passed the service message (it was on the bus):
    it is never sent again, so the next start takes Alice's job away."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            await _two_jobs(app, "telegram", str(GROUP), "telegram:7", "telegram:8")
            llm.queue_hold("never sent")
            tg.push_text(GROUP, 8, "what is on today?", chat_type="supergroup", first_name="Bob", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_left(GROUP, 7)  # queued behind Bob's turn
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
        finally:
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        assert _jobs(tmp_path) == [("telegram:7", str(GROUP)), ("telegram:8", str(GROUP))]  # the stop cut it
        assert _revisions(tmp_path) == [("left", "7")]

        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            assert app.revised.left == 1
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert _jobs(tmp_path) == [("telegram:8", str(GROUP))]
    assert _revisions(tmp_path) == []


async def test_a_feishu_member_leaving_taken_just_before_a_crash_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Feishu had its 200 for the member event, and the gateway is killed
    before the loop reached it (queued behind a turn in the group)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await _started(app)
            await _two_jobs(app, "feishu", "oc_team", f"feishu:{ALICE}", f"feishu:{BOB}")
            llm.queue_hold("never sent")
            await _push(app, feishu, feishu.message_event("@_user_1 what is on today?", chat_id="oc_team",
                                                          chat_type="group", open_id=BOB,
                                                          mentions=[feishu.mention()]))
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await _push(app, feishu, feishu.member_left_event("oc_team", ALICE))
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await _started(app)
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
        assert _jobs(tmp_path) == [(f"feishu:{BOB}", "oc_team")]
        assert _revisions(tmp_path) == []
        # Feishu sends the event again (its own retry): nothing more goes, nothing fails.
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await _started(app)
            await _push(app, feishu, feishu.member_left_event("oc_team", ALICE))
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert _jobs(tmp_path) == [(f"feishu:{BOB}", "oc_team")]
    assert _revisions(tmp_path) == []


async def test_an_edit_whose_application_failed_is_applied_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """memory.db fails while the edit is applied (closed here): the edit
    stays for the next start, which changes the stored words and the line
    memory is still to learn."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            sent = tg.push_text(42, 42, "my vault password is tulip-4471")
            await tg.wait_sent(1, timeout=15)
            assert app.loop is not None and await app.loop.drain(10)
            await app.backend.engine.close()  # type: ignore[attr-defined]
            tg.push_edit(42, sent["message_id"], "my vault password is in the safe")
            await until(lambda: app.loop is not None and app.loop.stats.errors == 1, timeout=15)
            assert app.inbox is not None
            await app.inbox.flush()
            assert _revisions(tmp_path) == [("edit", str(sent["message_id"]))]
        finally:
            await asyncio.wait_for(app.close(), 30)
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            assert app.revised.edits == 1 and app.revised.failed == 0
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    with sqlite3.connect(tmp_path / "data" / "memory.buffer.db") as db:
        assert [c for (c,) in db.execute("SELECT content FROM extraction_buffer WHERE role = 'user'")] \
            == ["my vault password is in the safe"]
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        assert db.execute("SELECT content FROM session_messages WHERE role = 'user'").fetchall() \
            == [("my vault password is in the safe",)]
    assert _revisions(tmp_path) == []


async def test_an_edit_of_a_comment_sent_with_forwards_waiting_in_the_inbox_at_a_crash_is_answered_as_edited(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The forwards and their comment wait behind a turn (kept in the inbox,
    not begun) when the comment is edited, and the gateway is killed: the
    next start answers the comment's new words with the forwards."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            llm.queue_hold("never sent")
            tg.push_text(9, 9, "first things first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            comment = tg.push_text(9, 9, "what does she wnat?")
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", "Kim", date=FEB_27))
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            tg.push_edit(9, comment["message_id"], "what does she want from me?")
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            assert app.inbox is not None
            await app.inbox.flush()
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        tg.sent.clear()  # what the test's stop (not a kill) sent
        first = len(llm.requests)
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            await until(lambda: any("want from me" in m.text for m in tg.sent), timeout=15)
            await quiet(app)
        finally:
            await asyncio.wait_for(app.close(), 30)
    later = json.dumps(llm.requests[first:], ensure_ascii=False)
    assert "want from me" in later and "launch moves to Friday" in later and "wnat" not in later
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        [(row,)] = db.execute("SELECT content FROM session_messages WHERE role = 'user' AND content LIKE '%Friday%'")
    assert row.endswith("\n\nwhat does she want from me?")
    assert _revisions(tmp_path) == []


async def test_an_edit_of_a_message_still_queued_is_what_gets_answered_and_learnt(
    tmp_path: Path, clock: ManualClock
) -> None:
    """No stop: a plain message and a comment sent with forwards wait behind
    a turn when their words are edited; each is answered, stored and handed
    to memory with the edited words, the forwards kept."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            release = llm.queue_hold("first things done")
            tg.push_text(9, 9, "first things first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            plain = tg.push_text(9, 9, "my pin is 8812")
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            comment = tg.push_text(9, 9, "what does she wnat?")
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=origin_user(5, "Dana", "Kim", date=FEB_27))
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            tg.push_edit(9, plain["message_id"], "my pin is in the safe")
            tg.push_edit(9, comment["message_id"], "what does she want from me?")
            await until(lambda: app.loop is not None and app.loop.stats.received == 5, timeout=15)
            release.set()
            await tg.wait_sent(3, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    later = json.dumps(llm.requests[1:], ensure_ascii=False)
    assert "in the safe" in later and "want from me" in later and "launch moves to Friday" in later
    assert "8812" not in later and "wnat" not in later
    assert not any("8812" in m.text or "wnat" in m.text for m in tg.sent)
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        rows = [str(c) for (c,) in db.execute("SELECT content FROM session_messages WHERE role = 'user' ORDER BY id")]
    assert rows[1] == "my pin is in the safe" and rows[2].endswith("\n\nwhat does she want from me?")
    assert "launch moves to Friday" in rows[2]
    with sqlite3.connect(tmp_path / "data" / "memory.buffer.db") as db:
        learnt = " ".join(str(c) for (c,) in db.execute("SELECT content FROM extraction_buffer WHERE role = 'user'"))
    assert "in the safe" in learnt and "want from me" in learnt and "8812" not in learnt and "wnat" not in learnt
    assert _revisions(tmp_path) == []
