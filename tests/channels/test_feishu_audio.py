"""A Feishu ``file`` message holding an audio file (a meeting recording
sent as a file) is heard as an ``audio`` message is (agent.transcription),
against the fake Feishu server: fetched under its own name, named in its
mark and in the note when it is too large; read as a document when
transcription is off."""

from __future__ import annotations

import asyncio

from channels.feishu import FeishuChannel
from gateway.bus import MessageBus
from gateway.http import HttpServer
from tests.channels.test_feishu import config, fake, hook, http, next_inbound  # noqa: F401 (fixtures)
from tests.fakes.feishu_server import FakeFeishu

RECORDING = b"ID3\x04\x00" + bytes(1500)


async def test_an_audio_file_is_fetched_for_transcription_under_its_name(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_audio_bytes=4096,
                       max_document_bytes=100_000)
    await ch.start()
    try:
        key = fake.add_file(RECORDING, "audio/mpeg")
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "周会 录音.mp3"})
        await fake.push_event(hook(http, ch), event)
        msg = await next_inbound(ch.bus)
        assert msg.audio is not None and msg.documents == ()
        assert (msg.audio.data, msg.audio.filename, msg.audio.name) == (RECORDING, "周会 录音.mp3", "周会 录音.mp3")
        assert msg.history_text == "[audio 周会 录音.mp3]"
        assert fake.requests[-1] == ("GET", f"/open-apis/im/v1/messages/{msg.message_id}/resources/{key}")
    finally:
        await ch.stop()


async def test_an_audio_file_over_the_limit_is_told_by_name(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_audio_bytes=1024)
    await ch.start()
    try:
        key = fake.add_file(RECORDING, "audio/mp4")
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "sync.m4a"})
        await fake.push_event(hook(http, ch), event)
        note = await asyncio.wait_for(ch.bus.outbound_queue("feishu").get(), 5)
        assert note.text.startswith("The audio file sync.m4a is too large for me to transcribe (the limit is 1 KB).")
        assert ch.bus.inbound.empty()
    finally:
        await ch.stop()


async def test_without_transcription_an_audio_file_is_a_file(fake: FakeFeishu, http: HttpServer) -> None:
    """Documents on, transcription off: it goes the way of any file (which
    says it cannot read that type); nothing is taken for a recording."""
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_document_bytes=100_000)
    await ch.start()
    try:
        key = fake.add_file(RECORDING, "audio/mpeg")
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "sync.mp3"})
        await fake.push_event(hook(http, ch), event)
        note = await asyncio.wait_for(ch.bus.outbound_queue("feishu").get(), 5)
        assert note.text.endswith("but not that kind of file.") and ch.bus.inbound.empty()
        assert fake.resource_downloads != []  # fetched as a file, read as one
    finally:
        await ch.stop()
