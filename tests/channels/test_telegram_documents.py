"""Files sent to the bot on Telegram are read as text (agent.documents),
against the fake Bot API server: downloaded with getFile like a photo,
refused with a note that says why, and not fetched at all for a group
message that is not addressed to the bot."""

from __future__ import annotations

from typing import Any

from channels.base import UNREADABLE_REPLY
from gateway.bus import MessageBus
from tests.channels.test_telegram import bus, fake, make_channel, next_inbound  # noqa: F401 (fixtures)
from tests.fakes.files import pdf
from tests.fakes.telegram_server import FakeTelegram


async def test_a_file_is_read_with_its_caption(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(sender=True, max_document_bytes=100_000)
    fake.push_document(7, 7, b"- ship on Friday\n- budget 40k\n", mime_type="text/markdown",
                       file_name="plan.md", caption="what did we decide?")
    msg = await next_inbound(bus)
    [doc] = msg.documents
    assert (doc.name, doc.text, doc.cut) == ("plan.md", "- ship on Friday\n- budget 40k", False)
    assert (msg.text, msg.history_text) == ("what did we decide?", "[file plan.md] what did we decide?")
    fake.push_document(7, 7, pdf(["Invoice 2026-118", "Total: 1,250 EUR"]), mime_type="application/pdf",
                       file_name="invoice.pdf")  # no caption: the file alone is read too
    alone = await next_inbound(bus)
    assert (alone.text, alone.history_text) == ("", "[file invoice.pdf]")
    assert alone.documents[0].text == "[page 1]\nInvoice 2026-118\n\n[page 2]\nTotal: 1,250 EUR"
    assert alone.documents[0].pages == 2 and fake.sent == []


async def test_a_file_not_read_gets_a_note_and_its_caption_goes_on(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_document_bytes=2048)
    fake.push_document(7, 7, b"x" * 5000, mime_type="text/plain", file_name="big.log", caption="why does it crash?")
    [note] = await fake.wait_sent(1)
    assert "too large" in note.text and "2 KB" in note.text and "answering your text without it" in note.text
    msg = await next_inbound(bus)
    assert (msg.documents, msg.history_text) == ((), "[file not read] why does it crash?")
    assert fake.file_downloads == []  # its stated size was over the limit: not fetched
    fake.push_document(7, 7, b"\x7fELF\x02\x01" + bytes(300), mime_type="application/octet-stream",
                       file_name="tool")
    [_, kind] = await fake.wait_sent(2)
    assert "text files, PDFs and Word documents" in kind.text and "answering" not in kind.text
    fake.push_text(7, 7, "after")
    assert (await next_inbound(bus)).text == "after" and bus.inbound.empty()  # the refused file put nothing on


async def test_group_files_are_read_only_when_addressed_to_the_bot(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(max_document_bytes=100_000)
    fake.push_document(-300, 8, b"minutes", mime_type="text/plain", file_name="a.txt", chat_type="group")
    fake.push_document(-300, 8, b"minutes", mime_type="text/plain", file_name="b.txt", caption="fyi",
                       chat_type="group")
    fake.push_document(-300, 8, b"the minutes", mime_type="text/plain", file_name="c.txt",
                       caption="summarise this", chat_type="group", mention=True)
    unaddressed = await next_inbound(bus)
    asked = await next_inbound(bus)
    assert (unaddressed.text, unaddressed.documents) == ("fyi", ())
    assert (asked.text, asked.documents[0].text) == ("summarise this", "the minutes")
    assert len(fake.file_downloads) == 1


async def test_with_documents_off_a_file_gets_the_only_text_note(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True)
    fake.push_document(7, 7, b"notes", mime_type="text/plain", file_name="n.txt")
    [note] = await fake.wait_sent(1)
    assert note.text == UNREADABLE_REPLY and fake.file_downloads == []
