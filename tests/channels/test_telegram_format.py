"""Replies reach Telegram formatted (channels/markdown.py through
TelegramChannel.send), against the fake Bot API server, which reads the
HTML as Telegram does."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.bus import Attachment, MessageBus, OutboundMessage
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


# -- a document's caption (/export's file) ---------------------------------------------------


async def test_a_documents_caption_with_markup_is_shown_formatted(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await _chat(fake, bus, make_channel, 5010, "/export")
    file = Attachment("myclaw-memory-2026-11-22.md", b"# kept")
    await within(ch.send(OutboundMessage("telegram", "5010", "Everything, as **Markdown**; `/forget` erases.", attachment=file)))
    await within(ch.send(OutboundMessage("telegram", "5010", "Plain words: a < b & snake_case.", attachment=file)))
    formatted, plain = fake.documents
    assert formatted.parse_mode == "HTML"
    assert formatted.params["caption"] == "Everything, as <b>Markdown</b>; <code>/forget</code> erases."
    assert formatted.caption == "Everything, as Markdown; /forget erases."  # what the user reads
    assert (plain.parse_mode, plain.caption) == (None, "Plain words: a < b & snake_case.")
    assert fake.sent == []


async def test_a_documents_caption_is_limited_on_its_visible_text(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Telegram counts 1024 characters of what the caption shows: markup
    that fits once rendered stays formatted; a caption that does not fit
    goes as its words, cut."""
    ch = await _chat(fake, bus, make_channel, 5011, "/export")
    file = Attachment("f.md", b"x")
    fits = " ".join(["**ok**"] * 200)  # 1,399 characters written, 599 shown
    await within(ch.send(OutboundMessage("telegram", "5011", fits, attachment=file)))
    too_long = "**" + "b" * 1100 + "**"
    await within(ch.send(OutboundMessage("telegram", "5011", too_long, attachment=file)))
    shown, cut = fake.documents
    assert (shown.parse_mode, shown.caption) == ("HTML", " ".join(["ok"] * 200))
    assert cut.parse_mode is None and cut.caption == too_long[:1023] + "…"


async def test_a_caption_whose_formatting_telegram_refuses_goes_as_its_words(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    from channels.telegram import TelegramSendError

    ch = await _chat(fake, bus, make_channel, 5012, "/export")
    file = Attachment("f.md", b"secret file")
    fake.fail_next("sendDocument", 400, description="Bad Request: can't parse entities: Unsupported start tag \"x\"")
    with capture_logs() as logs:
        await within(ch.send(OutboundMessage("telegram", "5012", "Your **file**", attachment=file)))
    [doc] = fake.documents
    assert (doc.parse_mode, doc.caption, doc.data) == (None, "Your **file**", b"secret file")
    assert any(e["event"].startswith("Telegram refused the caption's formatting") for e in logs)
    assert all("file**" not in str(e) for e in logs)
    fake.fail_next("sendDocument", 403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(TelegramSendError) as refused:  # not a formatting matter: not sent again as plain
        await within(ch.send(OutboundMessage("telegram", "5012", "Your **file**", attachment=file)))
    assert not refused.value.retryable and len(fake.documents) == 1
