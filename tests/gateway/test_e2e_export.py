"""``/export`` end to end through the whole gateway: ``App`` built from a
config, the fake Telegram and Feishu servers on 127.0.0.1, both memory
stores. Each user gets a file of their own rows only; the file's words
never reach a log line, the outbox or the model."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta
from typing import Any

import pytest
from gateway.logging import configure_logging
from memory import ManualClock, Provenance
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until

WHERE = Provenance(channel="telegram", chat_id="42")


@pytest.mark.parametrize("store", ["sqlite", "files"])
async def test_export_over_telegram_gives_each_user_their_own_file(
    tmp_path: Any, clock: ManualClock, fake_llm: FakeOpenAI, store: str
) -> None:
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeTelegram() as tg:
        telegram = {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}
        more: dict[str, Any] = {"memory": {"enabled": False}} if store == "files" else {}
        app = _app(tmp_path, clock, fake_llm, {"telegram": telegram}, **more)
        try:
            await app.open()
            assert app.backend is not None and app.backend.kind == store
            await app.backend.remember("telegram:42", "Alice's cat is called Miso", provenance=WHERE)
            await app.backend.remember("telegram:43", "Bob keeps bees on his roof", provenance=WHERE)
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "/export")
            tg.push_text(43, 43, "/导出")
            await tg.wait_until(lambda: len(tg.documents) == 2, 10)
            tg.push_text(-100, 42, "/export", chat_type="group", mention=True)
            await tg.wait_sent(1, timeout=10)
            docs = {d.chat_id: d for d in tg.documents}
            name = f"myclaw-memory-{clock.now().date().isoformat()}.md"
            alice, bob = docs[42], docs[43]
            assert (alice.filename, bob.filename) == (name, name)
            assert alice.caption is not None and alice.caption.startswith("Everything I keep about you")
            assert "Alice's cat is called Miso" in alice.data.decode() and "bees" not in alice.data.decode()
            assert bob.data.decode().startswith("# myclaw 记忆导出") and "Bob keeps bees on his roof" in bob.data.decode()
            assert "Miso" not in bob.data.decode()
            [refused] = tg.texts(-100)
            assert refused.startswith("This command works only in a private chat with me")
            logged = stream.getvalue()
            assert "Telegram bot connected" in logged and "Miso" not in logged and "bees" not in logged
            assert fake_llm.requests == []
            assert app.delivery is not None and await app.delivery.outbox.count() == 0
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_export_over_feishu_uploads_the_file_and_sends_it(
    tmp_path: Any, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    alice = "ou_alice0000000000000000000000000"
    async with FakeFeishu() as feishu:
        app = _app(tmp_path, clock, fake_llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            assert app.backend is not None
            await app.backend.remember(f"feishu:{alice}", "我喜欢喝燕麦拿铁咖啡", provenance=Provenance(channel="feishu"))
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            hook = app.http.url + "/feishu/events"
            event = feishu.message_event("/导出", chat_id="oc_alice", open_id=alice)
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 2)
            caption, file = feishu.sent
            assert caption["msg_type"] == "text" and caption["text"].startswith("这是我保存的关于你的一切")
            assert file["msg_type"] == "file" and file["chat_id"] == "oc_alice"
            assert file["file_name"] == f"myclaw-memory-{clock.now().date().isoformat()}.md"
            assert "我喜欢喝燕麦拿铁咖啡" in file["data"].decode("utf-8")
            assert fake_llm.requests == []
        finally:
            await asyncio.wait_for(app.close(), 30)


async def test_a_large_export_goes_out_from_a_temporary_file_whole(
    tmp_path: Any, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Past the spool's limit the file is written to disk and streamed to
    Telegram: what arrives is the same text as a small export's, every row."""
    async with FakeTelegram() as tg:
        telegram = {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}
        app = _app(tmp_path, clock, fake_llm, {"telegram": telegram})
        try:
            await app.open()
            assert app.backend is not None and app.loop is not None
            for i in range(40):
                await app.backend.remember("telegram:42", f"Alice's fact number {i}", provenance=WHERE,
                                           source_text=f"I said fact {i}")
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "/export")  # in memory: the default limit is far above this
            await tg.wait_until(lambda: len(tg.documents) == 1, 10)
            clock.advance(timedelta(minutes=1))
            app.loop.commands.spool_bytes = 256
            tg.push_text(42, 42, "/export")
            await tg.wait_until(lambda: len(tg.documents) == 2, 10)
            small, large = (d.data.decode("utf-8") for d in tg.documents)
            assert len(large.encode("utf-8")) > 256 * 4
            assert all(f"Alice's fact number {i} _(" in large and f"> drawn from: I said fact {i}" in large
                       for i in range(40))
            # Only the time in the title differs.
            assert large.split("\n", 1)[1] == small.split("\n", 1)[1]
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_large_export_is_uploaded_to_feishu_from_a_temporary_file(
    tmp_path: Any, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    alice = "ou_alice0000000000000000000000000"
    async with FakeFeishu() as feishu:
        app = _app(tmp_path, clock, fake_llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            assert app.backend is not None and app.loop is not None
            for i in range(40):
                await app.backend.remember(f"feishu:{alice}", f"我喜欢第 {i} 种咖啡", provenance=Provenance(channel="feishu"))
            app.loop.commands.spool_bytes = 256
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            event = feishu.message_event("/导出", chat_id="oc_alice", open_id=alice)
            assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 2)
            file = feishu.sent[1]
            assert file["msg_type"] == "file"
            doc = file["data"].decode("utf-8")
            assert len(file["data"]) > 256 * 4 and doc.startswith("# myclaw 记忆导出")
            assert all(f"我喜欢第 {i} 种咖啡 _(" in doc for i in range(40))
        finally:
            await asyncio.wait_for(app.close(), 30)


async def test_export_holds_what_the_users_handles_stored_before_they_were_mapped(
    tmp_path: Any, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """memory.identities maps telegram:42 to alice after telegram:42 had
    talked (merge-identities not run yet): her /export left those rows out,
    so a data access request missed them. They are in it, under a heading
    naming the handle, credentials by id only; bob's (mapped too) are not."""
    identities = {"identities": {"alice": ["telegram:42", "feishu:ou_a"], "bob": ["telegram:43"]}}
    async with FakeTelegram() as tg:
        telegram = {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}
        app = _app(tmp_path, clock, fake_llm, {"telegram": telegram}, memory=identities)
        try:
            await app.open()
            assert app.backend is not None
            await app.backend.remember("telegram:42", "Alice's cat is called Miso", provenance=WHERE)
            await app.backend.remember("telegram:42", "Alice's wifi password is tulip-4471", provenance=WHERE,
                                       category="credential", source_text="my wifi password is tulip-4471")
            await app.backend.remember("alice", "Alice moved to Porto", provenance=WHERE)
            await app.backend.remember("telegram:43", "Bob keeps bees on his roof", provenance=WHERE)
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "/export")
            await tg.wait_until(lambda: len(tg.documents) == 1, 10)
            text = tg.documents[0].data.decode("utf-8")
            assert "Everything I keep about you: 3 memories" in text, text
            porto, heading = text.index("Alice moved to Porto"), text.index("## Stored under telegram:42")
            assert porto < heading < text.index("Alice's cat is called Miso"), text
            assert "before it was linked to you" in text
            assert "tulip-4471" not in text and "(a credential, not shown here)" in text
            assert "bees" not in text and "telegram:43" not in text
        finally:
            await asyncio.wait_for(app.close(), 15)
