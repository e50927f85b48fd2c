"""An edit or a recall that comes while its message's model call is under
way: the bot answers what the message says now. A Telegram edit cancels
the call (its drafts taken away) and the edited words are answered,
stored and learnt, the old ones nowhere; a Feishu recall cancels it and
nothing is answered. A turn whose model already ran a tool that changes
something (a scheduled job) is not begun again: it ends as it was, and
the edit applies to what was stored after it, as before, so no job is
made twice.

Real ``App`` on a home directory, the fake Telegram / Feishu / OpenAI
servers (the model's answer held, so the edit lands mid-call), real SQLite."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from gateway.app import App
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu import _app, _feishu_section, feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import until
from .test_recall_stop_e2e import _push, _revisions, _start
from .test_resume_e2e import KEY, _echo
from .test_streaming_e2e import STREAM
from .test_vision_e2e import _telegram
from .test_voice_e2e import RECORDING, TRANSCRIBING

ALICE = "ou_alice0000000000000000000000000"


async def _started(app: App) -> None:
    await app.open()
    await asyncio.wait_for(app.start(), 15)


def _rows(home: Path, role: str) -> list[str]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [str(c) for (c,) in db.execute("SELECT content FROM session_messages WHERE role = ? ORDER BY id",
                                              (role,))]


def _learnt(home: Path) -> str:
    with sqlite3.connect(home / "data" / "memory.buffer.db") as db:
        return " ".join(str(c) for (c,) in db.execute("SELECT content FROM extraction_buffer"))


def _jobs(home: Path) -> list[str]:
    with sqlite3.connect(home / "data" / "cron.db") as db:
        return [str(m) for (m,) in db.execute("SELECT message FROM cron_jobs WHERE kind != 'internal'")]


async def test_a_telegram_edit_during_the_model_call_is_what_gets_answered_stored_and_learnt(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            first = llm.queue_hold("see you at 5")
            sent = tg.push_text(9, 9, "shall we meet at 5 tomorrow?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_edit(9, sent["message_id"], "shall we meet at 6 tomorrow?")
            await until(lambda: len(llm.requests) == 2, timeout=15)  # asked again, with the edited words
            first.set()  # the first call was given up: its answer, should it come, goes nowhere
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0 and app.loop.stats.redone == 1
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "meet at 6" in reply.text and "see you at 5" not in reply.text
    assert len(tg.sent) == 1
    again = json.dumps(llm.chat_requests()[1]["messages"], ensure_ascii=False)
    assert "meet at 6" in again and "meet at 5" not in again  # the old words are not in its history either
    assert _rows(tmp_path, "user") == ["shall we meet at 6 tomorrow?"]
    assert _rows(tmp_path, "assistant") == [reply.text]
    learnt = _learnt(tmp_path)
    assert "meet at 6" in learnt and "meet at 5" not in learnt and "see you at 5" not in learnt
    assert _revisions(tmp_path) == []


async def test_a_telegram_edit_while_drafts_show_takes_them_away_and_answers_the_edited_words(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A reply half shown as drafts is not delivered: it is given up as well."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, **STREAM)
        try:
            await _started(app)
            held = llm.queue_stream(["See ", "you ", "at ", "five."], delay=0.1, hold_after=2)
            assert held is not None
            sent = tg.push_text(9, 9, "shall we meet at 5 tomorrow?")
            await tg.wait_until(lambda: any(d.text.startswith("See") for d in tg.drafts), timeout=15)
            tg.push_edit(9, sent["message_id"], "shall we meet at 6 tomorrow?")
            await until(lambda: len(llm.requests) == 2, timeout=15)
            held.set()
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "meet at 6" in reply.text and "five" not in reply.text and len(tg.sent) == 1
    assert _rows(tmp_path, "user") == ["shall we meet at 6 tomorrow?"]


async def test_an_edit_that_leaves_the_words_as_they_were_does_not_begin_the_turn_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Telegram sends an edited_message for a link preview's change too."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            held = llm.queue_hold("see you there")
            sent = tg.push_text(9, 9, "shall we meet at 5 tomorrow?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_edit(9, sent["message_id"], "shall we meet at 5 tomorrow?")
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            held.set()
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.redone == 0 and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert reply.text == "see you there" and len(llm.requests) == 1


async def test_a_crash_while_the_edited_words_are_at_the_model_answers_them_once_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            llm.queue_hold("see you at 5")
            llm.queue_hold("never sent")
            sent = tg.push_text(9, 9, "shall we meet at 5 tomorrow?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_edit(9, sent["message_id"], "shall we meet at 6 tomorrow?")
            await until(lambda: len(llm.requests) == 2, timeout=15)  # begun again, and held
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        assert tg.sent == []
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "meet at 6" in reply.text and len(tg.sent) == 1
    assert "meet at 5" not in json.dumps(llm.requests[1:], ensure_ascii=False)
    assert _rows(tmp_path, "user") == ["shall we meet at 6 tomorrow?"]
    assert _rows(tmp_path, "assistant") == [reply.text]
    assert "meet at 5" not in _learnt(tmp_path)
    assert _revisions(tmp_path) == []


async def test_a_turn_whose_model_made_a_job_is_not_begun_again_for_an_edit(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The job is made once; the answer that says so is sent; the edit
    then changes the stored words, as an edit after the answer does."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await _started(app)
            llm.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
                "schedule": "0 17 * * 1", "message": "remind me of the meeting at 5"}}])
            second = llm.queue_hold("Done: every Monday at 17:00 I will remind you.")
            # What the model would do if the turn were begun again: the job a second time.
            llm.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
                "schedule": "0 18 * * 1", "message": "remind me of the meeting at 6"}}])
            llm.queue_reply("Done again.")
            sent = tg.push_text(9, 9, "remind me every monday of the meeting at 5")
            await until(lambda: len(llm.requests) == 2, timeout=15)  # the job is made, the model asked on
            tg.push_edit(9, sent["message_id"], "remind me every monday of the meeting at 6")
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            second.set()
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0 and app.loop.stats.redone == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert reply.text == "Done: every Monday at 17:00 I will remind you."
    assert len(llm.requests) == 2 and len(tg.sent) == 1
    assert _jobs(tmp_path) == ["remind me of the meeting at 5"]  # once
    assert _rows(tmp_path, "user") == ["remind me every monday of the meeting at 6"]


async def test_a_feishu_recall_during_the_model_call_leaves_it_unanswered(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await _started(app)
            held = llm.queue_hold("the code is 4471")
            event = feishu.message_event("what is the door code? I think it's 4471", chat_id="oc_alice", open_id=ALICE)
            await _push(app, feishu, event)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await _push(app, feishu, feishu.recall_event(event["event"]["message"]["message_id"]))
            await until(lambda: app.loop is not None and app.loop.stats.revised == 1, timeout=15)
            held.set()
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
            # Given up, not waited out to the provider's timeout and an apology no one would see.
            assert app.loop.stats.recalled == 1 and app.loop.stats.failed == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert feishu.sent == [] and len(llm.requests) == 1
    assert _rows(tmp_path, "user") == [] and _rows(tmp_path, "assistant") == []
    assert "4471" not in _learnt(tmp_path)
    assert _revisions(tmp_path) == []


async def test_a_feishu_recall_while_a_draft_shows_withdraws_the_draft(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, **STREAM)
        try:
            await _started(app)
            held = llm.queue_stream(["The ", "code ", "is ", "4471."], delay=0.1, hold_after=2)
            assert held is not None
            event = feishu.message_event("what is the door code?", chat_id="oc_alice", open_id=ALICE)
            await _push(app, feishu, event)
            await until(lambda: len(feishu.sent) == 1, timeout=15)  # the draft message
            await _push(app, feishu, feishu.recall_event(event["event"]["message"]["message_id"]))
            await until(lambda: feishu.visible() == [], timeout=15)
            held.set()
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
            assert app.loop.stats.recalled == 1 and app.loop.stats.failed == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert feishu.visible() == [] and len(feishu.sent) == 1 and len(llm.requests) == 1
    assert _rows(tmp_path, "user") == [] and _rows(tmp_path, "assistant") == []


async def test_a_feishu_recall_of_a_message_still_queued_leaves_it_unanswered(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Queued behind a slow answer in the same chat: never asked of the model."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        app = _start(tmp_path, clock, llm, feishu)
        try:
            await _started(app)
            held = llm.queue_hold("Good morning!")
            await _push(app, feishu, feishu.message_event("good morning", chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(llm.requests) == 1, timeout=15)
            event = feishu.message_event("my pin is 8812", chat_id="oc_alice", open_id=ALICE)
            await _push(app, feishu, event)
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            await _push(app, feishu, feishu.recall_event(event["event"]["message"]["message_id"]))
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            held.set()
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert feishu.texts() == ["Good morning!"] and len(llm.requests) == 1  # its words never went to the model
    assert _rows(tmp_path, "user") == ["good morning"]
    assert "8812" not in _learnt(tmp_path)
    assert _revisions(tmp_path) == []


async def test_a_voice_message_begun_again_for_its_caption_s_edit_is_not_transcribed_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The redo answers the edited caption with the transcript it had: the
    recording is not sent to the transcriber twice (a paid call)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await _started(app)
            first = llm.queue_hold("about your sister")
            sent = tg.push_voice(9, 9, RECORDING, caption="about my sister")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_edit(9, sent["message_id"], "about my brother")
            await until(lambda: len(llm.requests) == 2, timeout=15)
            first.set()
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0 and app.loop.stats.redone == 1
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert len(llm.transcriptions) == 1
    again = json.dumps(llm.chat_requests()[1]["messages"], ensure_ascii=False)
    assert "about my brother" in again and "birthday" in again and "my sister\\n" not in again
    assert _rows(tmp_path, "user") == ["[voice] about my brother\nwhat did I say about my sister's birthday?"]
    assert "about my brother" in reply.text


async def test_a_voice_message_not_heard_is_told_once_when_begun_again_for_an_edit(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await _started(app)
            llm.queue_transcription_error(500)
            first = llm.queue_hold("about your sister")
            sent = tg.push_voice(9, 9, RECORDING, caption="about my sister")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_edit(9, sent["message_id"], "about my brother")
            await until(lambda: len(llm.requests) == 2, timeout=15)
            first.set()
            [note, reply] = await tg.wait_sent(2, timeout=15)
            await quiet(app)
            assert app.loop is not None and app.loop.stats.errors == 0 and app.loop.stats.redone == 1
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert note.text.startswith("Sorry, I could not make out that voice message")
    assert "about my brother" in reply.text and len(tg.sent) == 2
    assert len(llm.transcriptions) == 1  # the failed one: not asked again
    assert "birthday" not in json.dumps(llm.chat_requests()[1]["messages"], ensure_ascii=False)
