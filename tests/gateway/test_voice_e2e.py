"""Voice messages as the user's words (``agent.transcription``), end to end:
the App, the fake Telegram server, the OpenAI-compatible fake's chat and
/audio/transcriptions endpoints, SQLite files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from channels.base import UNREADABLE_REPLY
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

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
