"""Audio files (a recording sent as music, or as a file of an audio type)
heard as voice messages are (``agent.transcription``), end to end: the App,
the fake Telegram server, the OpenAI-compatible fake's chat and
/audio/transcriptions endpoints, SQLite files. Their words reach the model
marked as the named file's transcript."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app
from .test_vision_e2e import _rows, _telegram
from .test_voice_e2e import TRANSCRIBING, echo

MEETING = b"ID3\x04\x00" + bytes(1500) + b"SAY:we ship the beta on Friday and Bo owns the release notes"
SMALL = {**TRANSCRIBING, "transcription": {**TRANSCRIBING["transcription"], "maxAudioBytes": 2048}}


async def test_an_audio_file_is_transcribed_and_named(tmp_path: Path, clock: ManualClock) -> None:
    """Sent as music (title and performer from its tags) and as a file
    (audio/mp4): each is heard, under its name, its words marked as its
    transcript; the endpoint gets the file's own name, for its format."""
    async with FakeOpenAI(api_key="sk-audio-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_audio(42, 42, MEETING, title="Weekly sync", performer="Nina", file_name="sync.mp3",
                          caption="what did we decide?")
            [reply] = await tg.wait_sent(1, timeout=10)
            said = ("[audio Nina – Weekly sync] what did we decide?\n[transcript]\n"
                    "we ship the beta on Friday and Bo owns the release notes")
            assert reply.text == f"re: {said}"
            tg.push_document(42, 42, MEETING, mime_type="audio/mp4", file_name="standup 3.m4a")
            [_, second] = await tg.wait_sent(2, timeout=10)
            heard = "[audio standup 3.m4a] [transcript]\nwe ship the beta on Friday and Bo owns the release notes"
            assert second.text == f"re: {heard}"
            assert [(c["filename"], c["data"]) for c in llm.transcriptions] == [
                ("sync.mp3", MEETING), ("standup 3.m4a", MEETING)]
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [("user", said), ("assistant", f"re: {said}"),
                               ("user", heard), ("assistant", f"re: {heard}")]


async def test_an_audio_file_over_the_limit_is_told_and_its_caption_answered(tmp_path: Path, clock: ManualClock) -> None:
    """Not downloaded: the note names the file and the limit; the caption
    goes on, marked as a recording nobody heard. Alone, the note is all."""
    big = b"ID3" + bytes(4000)
    async with FakeOpenAI(api_key="sk-audio-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=SMALL)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_document(42, 42, big, mime_type="audio/mpeg", file_name="lecture.mp3", caption="summarise it")
            [told, answered] = await tg.wait_sent(2, timeout=10)
            assert told.text == ("The audio file lecture.mp3 is too large for me to transcribe (the limit is 2 KB). "
                                 "Please send a shorter recording, or split it. I am answering your text without it.")
            assert answered.text == "re: [audio lecture.mp3 not read] summarise it"
            tg.push_audio(42, 42, big, title="Lecture 2")
            [*_, alone] = await tg.wait_sent(3, timeout=10)
            assert alone.text.startswith("The audio file Lecture 2 is too large for me to transcribe (the limit is 2 KB).")
            assert app.loop is not None and await app.loop.drain(5)
            assert tg.file_downloads == [] and llm.transcriptions == [] and len(llm.requests) == 1
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_notes_on_audio_files_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    """A recording has no words to go by: the sender's app language picks
    Chinese, for a file too large and for one the endpoint could not hear."""
    async with FakeOpenAI(api_key="sk-audio-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=SMALL)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.user_languages[42] = "zh-hans"
            tg.push_document(42, 42, b"ID3" + bytes(4000), mime_type="audio/mpeg", file_name="会议.mp3")
            [big] = await tg.wait_sent(1, timeout=10)
            assert big.text == "音频文件 会议.mp3 太大了，我转写不了（上限 2 KB）。请发短一点的录音，或者分段发送。"
            llm.queue_transcription_error(500)
            tg.push_audio(42, 42, b"ID3" + bytes(500), file_name="周会.m4a", mime_type="audio/mp4")
            [_, unheard] = await tg.wait_sent(2, timeout=10)
            assert unheard.text == "抱歉，音频文件 周会.m4a 没能转写出来，请重新发送。"
            assert app.loop is not None and await app.loop.drain(5)
            assert llm.requests == []  # nothing else to answer: the model is not asked
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_forwarded_audio_file_is_its_authors_recording(tmp_path: Path, clock: ManualClock) -> None:
    """Forwarded with a comment: the transcript is Dana's, under her name
    and the file's; one not heard is told by name, and the rest answered."""
    dana = origin_user(5, "Dana", date=int(datetime(2026, 2, 27, 9, 30, tzinfo=UTC).timestamp()))
    async with FakeOpenAI(api_key="sk-audio-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "what does she want from Bo?")
            tg.push_audio(42, 42, MEETING, file_name="dana-notes.m4a", mime_type="audio/mp4", forward_origin=dana)
            [reply] = await tg.wait_sent(1, timeout=10)
            heard = ("[forwarded from Dana, sent 2026-02-27]\n[audio dana-notes.m4a] [transcript]\n"
                     "we ship the beta on Friday and Bo owns the release notes")
            assert reply.text == f"re: {heard}\n\nwhat does she want from Bo?"
            assert [c["filename"] for c in llm.transcriptions] == ["dana-notes.m4a"]

            llm.queue_transcription_error(500)
            tg.push_text(42, 42, "and this one?")
            tg.push_document(42, 42, MEETING, mime_type="audio/ogg", file_name="memo.ogg", forward_origin=dana)
            [_, told, answered] = await tg.wait_sent(3, timeout=10)
            assert told.text == ("Sorry, I could not make out the forwarded audio file memo.ogg. "
                                 "I am answering the rest without it.")
            assert answered.text == ("re: [forwarded from Dana, sent 2026-02-27]\n[audio memo.ogg not read]\n\n"
                                     "and this one?")
        finally:
            await asyncio.wait_for(app.close(), 15)
