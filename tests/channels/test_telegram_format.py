"""Replies reach Telegram formatted (channels/markdown.py through
TelegramChannel.send), against the fake Bot API server, which reads the
HTML as Telegram does."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.bus import MessageBus, OutboundMessage
from tests.channels.test_telegram import bus, fake, make_channel, next_inbound, within  # noqa: F401 (fixtures)
from tests.fakes.telegram_server import FakeTelegram


async def _chat(fake: FakeTelegram, bus: MessageBus, make_channel: Any, chat: int, said: str) -> Any:
    """A running channel that ``chat`` has written to (Telegram sends only to such chats)."""
    ch = await make_channel()
    fake.push_text(chat, chat, said)
    await next_inbound(bus)
    return ch


async def test_a_markdown_reply_is_shown_formatted(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await _chat(fake, bus, make_channel, 5005, "how do I install it?")
    await within(ch.send(OutboundMessage("telegram", "5005", "**Step 1:** run `pip install myclaw` & wait.")))
    [sent] = fake.sent
    assert sent.parse_mode == "HTML"
    assert sent.params["text"] == "<b>Step 1:</b> run <code>pip install myclaw</code> &amp; wait."
    assert sent.text == "Step 1: run pip install myclaw & wait."  # what the user reads


async def test_plain_words_go_as_plain_text(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await _chat(fake, bus, make_channel, 5006, "hi")
    await within(ch.send(OutboundMessage("telegram", "5006", "Fine, thanks: a < b & snake_case.")))
    [sent] = fake.sent
    assert (sent.parse_mode, sent.text) == (None, "Fine, thanks: a < b & snake_case.")


async def test_a_long_code_block_split_in_two_is_code_in_both_parts(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await _chat(fake, bus, make_channel, 5007, "show me the log")
    lines = [f"line {i:04d} " + "x" * 40 for i in range(150)]  # ~7,800 characters of code
    reply = "Here it is:\n\n```text\n" + "\n".join(lines) + "\n```\n\nThat is all."
    await within(ch.send(OutboundMessage("telegram", "5007", reply)))
    first, second = fake.sent
    assert first.params["text"].startswith("Here it is:\n\n<pre><code class=\"language-text\">line 0000")
    assert second.params["text"].startswith("<pre><code class=\"language-text\">line 0")
    assert second.text.endswith("line 0149 " + "x" * 40 + "\n\nThat is all.")
    assert (first.text + "\n" + second.text).count("line 0") == 150  # every line once, none lost at the cut


async def test_formatting_telegram_refuses_falls_back_to_the_words(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await _chat(fake, bus, make_channel, 5008, "hi")
    fake.fail_next("sendMessage", 400, description="Bad Request: can't parse entities: Unsupported start tag \"x\"")
    with capture_logs() as logs:
        await within(ch.send(OutboundMessage("telegram", "5008", "Use **bold** here")))
    [sent] = fake.sent
    assert (sent.parse_mode, sent.text) == (None, "Use **bold** here")
    assert any(e["event"].startswith("Telegram refused the reply's formatting") for e in logs)
    assert all("bold" not in str(e) for e in logs)  # the reply's words stay out of the log


async def test_other_refusals_are_not_retried_as_plain(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    from channels.telegram import TelegramSendError

    ch = await _chat(fake, bus, make_channel, 5009, "hi")
    fake.fail_next("sendMessage", 403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(TelegramSendError) as refused:
        await within(ch.send(OutboundMessage("telegram", "5009", "Use **bold** here")))
    assert not refused.value.retryable
    assert fake.sent == []
