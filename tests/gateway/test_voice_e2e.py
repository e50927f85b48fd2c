"""Voice messages as the user's words (``agent.transcription``), end to end:
the App, the fake Telegram server, the OpenAI-compatible fake's chat and
/audio/transcriptions endpoints, SQLite files."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from channels.base import UNREADABLE_REPLY
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app
from .test_vision_e2e import _rows, _telegram

RECORDING = b"OggS\x00\x02" + bytes(2000) + b"SAY:what did I say about my sister's birthday?"
TRANSCRIBING = {"model": "test-model", "transcription": {"enabled": True, "model": "whisper-1"}}


def echo(body: dict[str, Any]) -> Reply:
    return Reply(content="re: " + said(body))


async def test_a_voice_message_is_answered_as_its_transcript(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-voice-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_voice(42, 42, RECORDING)
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == "re: [voice] what did I say about my sister's birthday?"
            [call] = llm.transcriptions
            assert (call["model"], call["data"]) == ("whisper-1", RECORDING)
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.retrievals == 1  # the transcript is the query

            llm.queue_transcription_error(500)
            tg.push_voice(42, 42, RECORDING)
            [_, failed] = await tg.wait_sent(2, timeout=10)
            assert failed.text.startswith("Sorry, I could not make out that voice message")
            assert len(llm.requests) == 1  # nothing to answer: the model is not asked
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [
        ("user", "[voice] what did I say about my sister's birthday?"),
        ("assistant", "re: [voice] what did I say about my sister's birthday?"),
    ]


async def test_a_voice_not_heard_is_told_in_the_senders_language(tmp_path: Path, clock: ManualClock) -> None:
    """A recording has no words to go by: the client's language says
    Chinese; a caption in English says English."""
    async with FakeOpenAI(api_key="sk-voice-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.user_languages[42] = "zh-hans"
            llm.queue_transcription_error(500)
            tg.push_voice(42, 42, RECORDING)
            [failed] = await tg.wait_sent(1, timeout=10)
            assert failed.text == "抱歉，这条语音我没听清。请重新发送，或者直接打字。"
            llm.queue_transcription_error(500)
            tg.push_voice(42, 42, RECORDING, caption="about my sister")
            [_, english, _answer] = await tg.wait_sent(3, timeout=10)
            assert english.text.startswith("Sorry, I could not make out that voice message")
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_without_transcription_a_voice_message_gets_the_note(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-voice-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_voice(42, 42, RECORDING)
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == UNREADABLE_REPLY and llm.transcriptions == [] and tg.file_downloads == []
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_forwarded_voice_message_is_answered_as_its_authors_words(tmp_path: Path, clock: ManualClock) -> None:
    """Transcribed as the user's own would be, but kept as Dana's: the
    model and the history read it under her name, marked a voice message.
    One not made out is told; alone, the model is not asked."""
    dana = origin_user(5, "Dana", date=int(datetime(2026, 2, 27, 9, 30, tzinfo=UTC).timestamp()))
    async with FakeOpenAI(api_key="sk-voice-e2e-0123456789", responder=echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "what does she need?")
            tg.push_voice(42, 42, b"OggS\x00\x02" + bytes(500) + b"SAY:bring the slides on Friday",
                          forward_origin=dana)
            [reply] = await tg.wait_sent(1, timeout=10)
            heard = "[forwarded from Dana, sent 2026-02-27]\n[voice] bring the slides on Friday"
            assert reply.text == f"re: {heard}\n\nwhat does she need?"
            assert len(llm.transcriptions) == 1

            llm.queue_transcription_error(500)
            tg.push_voice(42, 42, RECORDING, forward_origin=dana)
            [_, failed] = await tg.wait_sent(2, timeout=10)
            assert failed.text == "Sorry, I could not make out the forwarded voice message."
            assert len(llm.requests) == 1  # nothing else to answer: the model is not asked

            llm.queue_transcription_error(500)
            tg.push_text(42, 42, "and this?")
            tg.push_voice(42, 42, RECORDING, forward_origin=dana)
            [*_, told, answered] = await tg.wait_sent(4, timeout=10)
            assert told.text == "Sorry, I could not make out the forwarded voice message. I am answering the rest without it."
            assert answered.text == "re: [forwarded from Dana, sent 2026-02-27]\n[voice not read]\n\nand this?"
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == [
        ("user", f"{heard}\n\nwhat does she need?"),
        ("assistant", f"re: {heard}\n\nwhat does she need?"),
        ("user", "[forwarded from Dana, sent 2026-02-27]\n[voice not read]\n\nand this?"),
        ("assistant", "re: [forwarded from Dana, sent 2026-02-27]\n[voice not read]\n\nand this?"),
    ]
