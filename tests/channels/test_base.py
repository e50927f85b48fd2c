"""What every channel does with a download that breaks (channels/base.py):
the user is told, their words go on, and the log line names the error by
its type and place, never by its text, which may quote the file's name or
the message."""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from channels.telegram import TelegramChannel
from gateway.bus import InboundMessage, MessageBus
from gateway.config import TelegramConfig
from tests.logjson import debug_json_log, lines

NAME = "Okonkwo-biopsy-results.pdf"


def _channel(bus: MessageBus) -> TelegramChannel:
    # Never started: nothing here talks to Telegram, only to the bus.
    cfg = TelegramConfig(enabled=True, token=SecretStr("123456:" + "a" * 35), base_url="http://127.0.0.1:9/bot")
    return TelegramChannel(cfg, bus, max_document_bytes=100_000, max_audio_bytes=100_000)


async def test_a_broken_file_download_is_logged_by_type_and_place_not_by_the_files_name() -> None:
    bus = MessageBus(maxsize=10)
    ch = _channel(bus)
    msg = InboundMessage("telegram", "7", "7", "what does it say about the tumour?", message_id="5")

    async def fetch() -> bytes:
        raise FileNotFoundError(2, "No such file or directory", f"/var/tmp/{NAME}")

    with debug_json_log() as out:
        assert await asyncio.wait_for(ch.publish_document(msg, NAME, fetch), 10)
    went_on = await asyncio.wait_for(bus.consume_inbound(), 5)
    assert went_on.text == msg.text and "not read" in went_on.placeholder
    [line] = lines(out, "file download failed")
    assert line["level"] == "error" and line["error"] == "FileNotFoundError" and line["message_id"] == "5"
    assert line["at"].startswith("tests/channels/test_base.py:") and line["at"].endswith(" in fetch"), line
    [not_read] = lines(out, "file not read")
    assert not_read["error"] == "FileNotFoundError"
    for words in ("Okonkwo", "biopsy", "tumour"):
        assert words not in out.getvalue()


async def test_a_broken_voice_download_is_logged_by_type_and_place_not_its_text() -> None:
    bus = MessageBus(maxsize=10)
    ch = _channel(bus)
    msg = InboundMessage("telegram", "7", "7", "", message_id="6")

    async def fetch() -> bytes:
        raise ValueError(f"bad header in {NAME}")

    with debug_json_log() as out:
        assert await asyncio.wait_for(ch.publish_voice(msg, fetch), 10)  # type: ignore[arg-type]
    [line] = lines(out, "voice message download failed")
    assert line["error"] == "ValueError" and line["at"].endswith(" in fetch"), line
    assert "Okonkwo" not in out.getvalue()


async def test_a_send_that_fails_is_logged_by_type_and_codes_not_the_replys_words() -> None:
    """A channel used on its own (run_sender): an exception quoting the
    reply (here a platform's refusal echoing it) leaves its words out."""
    from gateway.bus import OutboundMessage

    class Refusing(TelegramChannel):
        async def send(self, msg: OutboundMessage) -> None:
            raise OSError(104, f"Connection reset while sending {msg.text!r}")

    bus = MessageBus(maxsize=10)
    ch = Refusing(_channel(bus).config, bus)
    sender = asyncio.create_task(ch.run_sender())
    try:
        with debug_json_log() as out:
            await bus.publish_outbound(OutboundMessage("telegram", "7", f"your results from {NAME}"))
            await asyncio.wait_for(bus.outbound_queue("telegram").join(), 10)
    finally:
        sender.cancel()
    [line] = lines(out, "send failed")
    assert line["error"] == "ConnectionResetError" and line["errno_name"] == "ECONNRESET" and line["chat_id"] == "7"
    assert "Okonkwo" not in out.getvalue()


async def test_a_sender_not_in_allow_from_is_a_warning_once_an_hour_not_one_per_message() -> None:
    """A family group where one member is not listed: their every line
    (not even to the bot) was a warning. The first says who (the id to
    add to allowFrom); the next ones within the hour are debug, an hour
    later it is said again. Another sender is said on their own."""
    bus = MessageBus(maxsize=10)
    cfg = TelegramConfig(enabled=True, token=SecretStr("123456:" + "a" * 35), base_url="http://127.0.0.1:9/bot",
                         allow_from=["7"])
    ch = TelegramChannel(cfg, bus)
    now = [1000.0]
    ch.monotonic = lambda: now[0]

    def said(sender: str, text: str = "just chatting") -> InboundMessage:
        return InboundMessage("telegram", "-100", sender, text, message_id=text, is_group=True)

    with debug_json_log() as out:
        for i in range(5):
            assert not await ch.publish(said("9", f"line {i}"))
        assert not await ch.publish(said("8"))
        now[0] += 3601
        assert not await ch.publish(said("9"))
        assert await ch.publish(said("7"))
    dropped = lines(out, "message from sender not in allowFrom dropped")
    assert [(d["level"], d["sender_id"]) for d in dropped] == [
        ("warning", "9"), *[("debug", "9")] * 4, ("warning", "8"), ("warning", "9"),
    ]
    assert "line 0" not in out.getvalue()
