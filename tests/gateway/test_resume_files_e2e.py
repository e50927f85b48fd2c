"""A message that carried a file, a photo or a voice note, cut by a crash,
is answered once after the restart (gateway/resume.py), end to end: the
fake Telegram server, the OpenAI-compatible fake, SQLite files. A file
kept in recent files is read again as the first turn read it; a photo
(its bytes are never stored) or a file no longer kept gets one note asking
for it again; a voice note is answered as its transcript."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.files import pdf
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .killed import crash, killed, quiet, running
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import _history
from .test_vision_e2e import PHOTO, _telegram
from .test_voice_e2e import RECORDING

KEY = "sk-resume-files-e2e-0123456789"
AGENT = {"model": "test-model", "vision": True, "transcription": {"enabled": True, "model": "whisper-1"}}


def _latest(body: dict[str, Any]) -> str:
    """The latest message as the model read it, less the time put first (a minute on at the restart)."""
    return re.sub(r"^<time>[^<]*</time>\n", "", text_of(body["messages"][-1]["content"]))


def _echo(body: dict[str, Any]) -> Reply:
    return Reply(content="re: " + said(body))


def _running(
    home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram
) -> contextlib.AbstractAsyncContextManager[App]:
    """A gateway on ``home`` that reads files, pictures and voice notes; stopped as a crash stops it."""
    return running(_app(home, clock, llm, {"telegram": _telegram(tg)}, agent=AGENT))


async def _cut(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram, push: Any) -> None:
    """``push`` a message, hold the model on it, crash."""
    async with _running(home, clock, llm, tg) as app:
        llm.queue_hold("never sent")
        push()
        await until(lambda: len(llm.requests) == 1, timeout=15)
        assert app.recent_files is not None
        await app.recent_files.flush()  # the file's row written, as it is within milliseconds
        await crash(app)
    assert tg.sent == []


async def _restart_twice(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> None:
    """Restart: whatever it sends is all; a second restart sends nothing more."""
    clock.advance(60)
    async with _running(home, clock, llm, tg) as again:
        await tg.wait_sent(1, timeout=15)
        await quiet(again)
        assert again.resumed is not None and len(again.resumed.answered) == 1
    sent, asked = len(tg.sent), len(llm.requests)
    async with _running(home, clock, llm, tg) as third:
        await quiet(third)
        assert third.resumed is not None and third.resumed.answered == []
    assert (len(tg.sent), len(llm.requests)) == (sent, asked)


async def test_a_file_cut_by_a_crash_is_read_again_as_the_first_turn_read_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    plan = pdf(["Q3 plan", "Ship on Friday; budget 40k"])
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_document(
            42, 42, plan, mime_type="application/pdf", file_name="q3.pdf", caption="what budget did we agree?"))
        await _restart_twice(tmp_path, clock, llm, tg)
        [reply] = tg.sent
        assert reply.text == "re: [file q3.pdf] what budget did we agree?"
        first, resumed = (_latest(r) for r in llm.chat_requests()[:2])
        assert "budget 40k" in first and resumed == first
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # kept once, not again by the resumed turn
            assert db.execute("SELECT name FROM recent_files").fetchall() == [("q3.pdf",)]
        mid = _history(tmp_path)[0][1]
        assert _history(tmp_path) == [("user", mid, "[file q3.pdf] what budget did we agree?"),
                                      ("assistant", mid, "re: [file q3.pdf] what budget did we agree?")]


async def test_a_file_no_longer_kept_gets_one_note_asking_for_it_again(tmp_path: Path, clock: ManualClock) -> None:
    """The file's row in recent files was not written (the crash came
    first) or is gone: the words alone would answer something else."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_document(
            42, 42, b"budget 40k\n", mime_type="text/plain", file_name="notes.txt", caption="what budget?"))
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("DELETE FROM recent_files")
        await _restart_twice(tmp_path, clock, llm, tg)
        [note] = tg.sent
        assert "notes.txt" in note.text and "send it again" in note.text
        assert len(llm.requests) == 1  # no model call for the note
        assert [r for r, _, _ in _history(tmp_path)] == ["user"]


async def test_a_photo_cut_by_a_crash_gets_one_note_in_the_users_language(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A photo's bytes are never stored: asked for again, in Chinese for a Chinese caption."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_photo(42, 42, [PHOTO], caption="这张纸条上的密码是什么？"))
        await _restart_twice(tmp_path, clock, llm, tg)
        [note] = tg.sent
        assert "图片" in note.text and "再发" in note.text
        assert len(llm.requests) == 1


async def test_a_voice_note_cut_by_a_crash_is_answered_as_its_transcript(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_voice(42, 42, RECORDING))
        await _restart_twice(tmp_path, clock, llm, tg)
        [reply] = tg.sent
        assert reply.text == "re: [voice] what did I say about my sister's birthday?"
        assert len(llm.transcriptions) == 1  # heard once: the row keeps the transcript
        first, resumed = (_latest(r) for r in llm.chat_requests()[:2])
        assert resumed == first


async def test_a_file_and_a_voice_note_waiting_behind_a_cut_turn_are_answered_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The gateway stops with a question's turn under way and a file and a
    voice note waiting behind it, taken from Telegram: the stop writes them
    to Tier 0 (the file into recent files), and the next start answers all
    three in order, once: the file read, the recording (not kept, never
    heard) asked for again."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _running(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "is the launch on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_document(42, 42, b"budget 40k\n", mime_type="text/plain", file_name="notes.txt", caption="what budget?")
            tg.push_voice(42, 42, RECORDING)
            assert app.loop is not None
            loop = app.loop
            await until(lambda: loop.stats.received == 3, timeout=15)
            await asyncio.wait_for(app.close(timeout=1.0), 30)  # SIGTERM: the turn under way is past the timeout
        assert tg.sent == [] and llm.transcriptions == []
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(3, timeout=15)
            await quiet(again)
            assert again.resumed is not None and len(again.resumed.answered) == 3
        first, file, voice = (m.text for m in tg.sent)
        assert (first, file) == ("re: is the launch on Thursday?", "re: [file notes.txt] what budget?")
        assert voice == "Sorry, I restarted before I could listen to your voice message. Please send it again."
        assert "budget 40k" in _latest(llm.last_chat()) and len(llm.requests) == 3
        async with _running(tmp_path, clock, llm, tg) as third:
            await quiet(third)
            assert third.resumed is not None and third.resumed.answered == []
        assert len(tg.sent) == 3


async def test_a_voice_note_cut_while_it_was_transcribed_gets_one_note(tmp_path: Path, clock: ManualClock) -> None:
    """The stop comes while the recording is being transcribed, before its
    row is written: the stop writes it, and the next start asks for it
    again (its bytes are not kept), once."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _running(tmp_path, clock, llm, tg) as app:
            llm.queue_transcription_hold()
            tg.push_voice(42, 42, RECORDING, caption="for the minutes")
            await until(lambda: len(llm.transcriptions) == 1, timeout=15)
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        assert tg.sent == [] and llm.requests == []
        await _restart_twice(tmp_path, clock, llm, tg)
        [note] = tg.sent
        assert note.text == "Sorry, I restarted before I could listen to your voice message. Please send it again."
        assert [(r, w) for r, _, w in _history(tmp_path)] == [("user", "[voice] for the minutes")]


async def test_a_photos_note_whose_send_a_kill_cut_comes_once_at_the_start_after(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The note is the message's one answer, marked so before it is sent:
    it goes to the outbox on its way first (gateway/loop.py), so a kill
    cutting its send leaves it for the next start. Before, the mark said
    answered and the note was never sent."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut(tmp_path, clock, llm, tg, lambda: tg.push_photo(42, 42, [PHOTO], caption="what is the code?"))
        clock.advance(60)
        cut = tg.cut_next("sendMessage")
        async with _running(tmp_path, clock, llm, tg) as again:
            await asyncio.wait_for(cut.wait(), 15)
            await killed(again, tmp_path)
        assert tg.sent == []
        async with _running(tmp_path, clock, llm, tg) as third:
            await tg.wait_sent(1, timeout=15)
            await quiet(third)
            assert third.resumed is not None and third.resumed.answered == []
        [note] = tg.sent
        assert "photo" in note.text.lower() and len(llm.requests) == 1
