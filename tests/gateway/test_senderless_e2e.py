"""A message that names no sender, end to end: a Feishu event whose
``sender_id`` holds no open_id, union_id or user_id, a Telegram message
with neither ``from`` nor ``sender_chat``. Taken, it would be owned by
``feishu:`` (or nobody), one owner shared by every such sender: refused,
logged once without its words, and acknowledged so it is not redelivered."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from structlog.testing import capture_logs

from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until
from .test_quoted_e2e import _telegram

SECRET = "my locker code is 8812"


def _user_rows(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        return [(o, c) for (o, c) in db.execute(
            "SELECT owner, content FROM session_messages WHERE role = 'user' ORDER BY id")]


async def test_a_feishu_event_without_sender_ids_is_refused_and_acknowledged(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-senderless-0123456789", responder=lambda b: Reply(content="re: " + said(b))) \
            as llm, FakeFeishu() as feishu:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            hook = app.http.url + "/feishu/events"
            nameless = feishu.message_event(SECRET, chat_id="oc_nameless", open_id="", union_id="", user_id="")
            with capture_logs() as logs:
                # Acknowledged (a 200), so Feishu does not deliver it again and again.
                assert (await feishu.push_event(hook, nameless, encrypt_key=ENCRYPT_KEY)).status_code == 200
                assert (await feishu.push_event(hook, nameless, encrypt_key=ENCRYPT_KEY)).status_code == 200
            # A named sender after it is answered: the chat goes on.
            named = feishu.message_event("hello", chat_id="oc_nameless", open_id="ou_named0001")
            assert (await feishu.push_event(hook, named, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 1)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert feishu.texts() == ["re: hello"]
    assert _user_rows(tmp_path) == [("feishu:ou_named0001", "hello")]
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1, warned  # once, though Feishu delivered it twice
    assert "no open_id" in warned[0]["error"] and warned[0]["event_id"] == nameless["header"]["event_id"]
    assert all("8812" not in str(e) for e in logs)  # never its words


async def test_a_telegram_message_without_from_or_sender_chat_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-senderless-0123456789", responder=lambda b: Reply(content="re: " + said(b))) \
            as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            with capture_logs() as logs:
                tg.push_text(-100777, 0, SECRET, chat_type="supergroup", mention=True, without_sender=True)
                tg.push_text(-100777, 42, "hello", chat_type="supergroup", mention=True)
                await tg.wait_sent(1, timeout=10)
                await tg.wait_until(lambda: tg.pending_updates == 0)  # confirmed, not fetched again
                assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _user_rows(tmp_path) == [("telegram:42", "hello")]
    assert len(tg.sent) == 1
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and "sender" in warned[0]["event"], warned
    assert all("8812" not in str(e) for e in logs)


async def test_two_tenants_feishu_senders_named_by_the_same_user_id_are_two_people(
    tmp_path: Path, clock: ManualClock
) -> None:
    """An external chat holds users of two tenants, and a user_id is unique
    within one tenant only. Two senders Feishu names by user_id "u0001"
    alone (no open_id, no union_id), each with their own tenant_key, are two
    owners: what the bot remembers of Alice is not recalled for Bob."""
    from memory import Provenance

    async with FakeOpenAI(api_key="sk-senderless-0123456789", responder=lambda b: Reply(content="re: " + said(b))) \
            as llm, FakeFeishu() as feishu:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None and app.backend is not None
            hook = app.http.url + "/feishu/events"
            alice = f"feishu:u0001@{feishu.tenant_key}"
            await app.backend.remember(alice, f"Alice's {SECRET}",
                                       provenance=Provenance(channel="feishu", chat_id="oc_alice", group=False))
            for chat, tenant in (("oc_alice", feishu.tenant_key), ("oc_bob", "3f0a77c1e2d45b90")):
                event = feishu.message_event("what is my locker code?", chat_id=chat, open_id="", union_id="",
                                             user_id="u0001")
                event["event"]["sender"]["tenant_key"] = tenant  # the sender's tenant; the header's is the app's
                assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                await _until(lambda chat=chat: any(m["chat_id"] == chat for m in feishu.sent))  # type: ignore[misc]
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert [o for o, _ in _user_rows(tmp_path)] == [alice, "feishu:u0001@3f0a77c1e2d45b90"]
    assert [("8812" in str(r["messages"])) for r in llm.requests] == [True, False]  # Alice's turn, Bob's
