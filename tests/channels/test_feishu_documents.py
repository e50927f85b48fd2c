"""Feishu file messages are read as text (agent.documents), against the
fake Feishu server: fetched by the message resource API, refused with a
note that says why, and left alone when documents are off."""

from __future__ import annotations

import asyncio

from channels.base import UNREADABLE_REPLY
from channels.feishu import FeishuChannel
from gateway.bus import MessageBus
from gateway.http import HttpServer
from tests.channels.test_feishu import config, fake, hook, http, next_inbound  # noqa: F401 (fixtures)
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.files import docx


async def test_a_file_message_is_read_as_text(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_document_bytes=100_000)
    await ch.start()
    try:
        key = fake.add_file(docx(["周会纪要", "决定：周五发布，预算四万"]))
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "周会.docx"})
        await fake.push_event(hook(http, ch), event)
        msg = await next_inbound(ch.bus)
        [doc] = msg.documents
        assert (doc.name, doc.text) == ("周会.docx", "周会纪要\n决定：周五发布，预算四万")
        assert (msg.text, msg.history_text) == ("", "[file 周会.docx]")
        assert fake.requests[-1] == ("GET", f"/open-apis/im/v1/messages/{msg.message_id}/resources/{key}")
        assert fake.sent == []
    finally:
        await ch.stop()


async def test_a_file_that_cannot_be_read_gets_a_note(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_document_bytes=100_000)
    await ch.start()
    try:
        key = fake.add_file(b"PK\x03\x04" + bytes(500))
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "photos.zip"})
        await fake.push_event(hook(http, ch), event)
        note = await asyncio.wait_for(ch.bus.outbound_queue("feishu").get(), 5)
        assert "text files, PDFs and Word documents" in note.text
        assert ch.bus.inbound.empty()
    finally:
        await ch.stop()


async def test_with_documents_off_a_file_gets_the_only_text_note(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01)
    await ch.start()
    try:
        key = fake.add_file(b"notes")
        event = fake.message_event(message_type="file", content={"file_key": key, "file_name": "n.txt"})
        await fake.push_event(hook(http, ch), event)
        note = await asyncio.wait_for(ch.bus.outbound_queue("feishu").get(), 5)
        assert note.text == UNREADABLE_REPLY and fake.resource_downloads == []
    finally:
        await ch.stop()
