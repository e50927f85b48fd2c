"""Transcriber against the OpenAI-compatible fake's /audio/transcriptions."""

from __future__ import annotations

import pytest

from gateway.bus import Audio
from gateway.transcription import Transcriber, TranscriptionError
from tests.fakes.openai_server import FakeOpenAI

VOICE = Audio(data=b"OggS\x00\x02" + bytes(300) + b"SAY:remind me to water the plants", mime="audio/ogg",
              filename="voice.ogg")


async def test_a_recording_becomes_its_words() -> None:
    async with FakeOpenAI(api_key="sk-voice-0123456789") as fake:
        t = Transcriber(base_url=fake.url, api_key="sk-voice-0123456789", model="whisper-1")
        try:
            assert await t.transcribe(VOICE) == "remind me to water the plants"
            [call] = fake.transcriptions
            assert (call["model"], call["filename"], call["content_type"], call["data"]) == (
                "whisper-1", "voice.ogg", "audio/ogg", VOICE.data)
        finally:
            await t.aclose()
            await t.aclose()  # safe twice


async def test_failures_are_one_error_without_the_key() -> None:
    async with FakeOpenAI(api_key="sk-voice-0123456789") as fake:
        wrong = Transcriber(base_url=fake.url, api_key="sk-wrong-key-000000", model="whisper-1")
        with pytest.raises(TranscriptionError, match="HTTP 401") as err:
            await wrong.transcribe(VOICE)
        assert "sk-wrong" not in str(err.value)
        await wrong.aclose()
        fake.queue_transcription_error(500)
        t = Transcriber(base_url=fake.url, api_key="sk-voice-0123456789", model="whisper-1")
        with pytest.raises(TranscriptionError, match="HTTP 500"):
            await t.transcribe(VOICE)
        await t.aclose()
    gone = Transcriber(base_url="http://127.0.0.1:9/v1", api_key="", model="whisper-1", timeout=2)
    with pytest.raises(TranscriptionError, match="not reached"):
        await gone.transcribe(VOICE)
    await gone.aclose()


NAMED = Audio(data=b"OggS\x00\x02" + bytes(300), mime="audio/mp4", filename="Okonkwo-biopsy-results.m4a",
              name="Okonkwo biopsy results")


async def test_an_endpoint_that_quotes_the_files_name_is_logged_without_it() -> None:
    # A file's name is the user's words: an endpoint's error may quote it
    # (the one the error is about), and that error is logged.
    from gateway.bus import Forwarded
    from gateway.transcription import hear_forwarded
    from tests.logjson import debug_json_log, lines

    async with FakeOpenAI(api_key="sk-voice-0123456789") as fake:
        fake.queue_transcription_error(400, body="Could not decode Okonkwo-biopsy-results.m4a: unsupported codec")
        t = Transcriber(base_url=fake.url, api_key="sk-voice-0123456789", model="whisper-1")
        try:
            with debug_json_log() as out:
                _, missed = await hear_forwarded(t, [Forwarded("Ada", "[audio Okonkwo biopsy results]", audio=NAMED)])
        finally:
            await t.aclose()
    assert missed == [NAMED]
    [line] = lines(out, "forwarded recording not transcribed")
    assert "HTTP 400" in line["error"] and "unsupported codec" in line["error"], line
    for words in ("Okonkwo", "biopsy"):
        assert words not in out.getvalue()
