"""Feishu end to end through the whole gateway: ``App`` built from a config
with Feishu enabled, the fake Feishu Open API, the fake LLM, real SQLite
memory. Webhook mode (signed, encrypted events on the gateway's own HTTP
server), long-connection mode (lark-oapi's websocket client), and Feishu
next to a Telegram channel whose token is rejected."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels.feishu.longconn import preload_sdk
from gateway.app import App
from gateway.config import Paths, load_config
from gateway.sessions import SessionStore
from memory import ManualClock, Provenance
from memory.filestore import FileMemory
from tests.disk import on_disk
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

ENCRYPT_KEY = "e2e-encrypt-key-Qw81zP"
ALICE = "ou_alice0000000000000000000000000"
CONNECT_TIMEOUT = 60.0  # generous for a loaded CI machine

# As `myclaw gateway` does before its loop runs: the SDK's seconds of imports
# are not part of App.start() (which the tests bound).
preload_sdk()


@pytest.fixture
async def feishu() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as f:
        yield f


@pytest.fixture
async def echo_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(
        api_key="sk-test-feishu-e2e-0123456789",
        responder=lambda body: Reply(content="re: " + said(body)),
    ) as fake:
        yield fake


def _app(
    tmp_path: Path, clock: ManualClock, llm: FakeOpenAI, channels: dict[str, Any], **more: dict[str, Any]
) -> App:
    doc = {
        "provider": {"baseUrl": llm.url, "apiKey": llm.api_key, "maxRetries": 0, "timeout": "5s"},
        "agent": {"model": "test-model"},
        "channels": channels,
        **more,
        # A test's own gateway settings (its timezone) keep port 0: the
        # default 18790 is taken whenever another run listens on it.
        "gateway": {"host": "127.0.0.1", "port": 0, **more.get("gateway", {})},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    cfg = load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True)
    return App(cfg, Paths(tmp_path), clock=clock)


def _feishu_section(fake: FakeFeishu, mode: str) -> dict[str, Any]:
    section: dict[str, Any] = {"enabled": True, "appId": fake.app_id, "appSecret": fake.app_secret, "mode": mode, "domain": fake.url}
    if mode == "webhook":
        section.update(verificationToken=fake.verification_token, encryptKey=ENCRYPT_KEY)
    return section


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def _shown(feishu: FakeFeishu, texts: list[str], timeout: float = 10.0) -> None:
    """Until the chats read ``texts``. Not the first message's words: a
    reply that outlasts agent.streaming.delay (1 s, a loaded machine) is
    first a draft ("re:"), then edited into the reply."""
    with contextlib.suppress(TimeoutError):
        await _until(lambda: feishu.texts() == texts, timeout)
    assert feishu.texts() == texts


def _user_text(body: dict[str, Any]) -> str:
    """The latest message as the model reads it, less the time put first."""
    return str(body["messages"][-1]["content"]).removeprefix("<time>12:00</time>\n")


async def test_webhook_event_gets_a_reply_with_memory_dedup_and_signature_check(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")})
    try:
        await app.open()
        assert app.backend is not None and app.backend.kind == "sqlite"
        await app.backend.remember(
            f"feishu:{ALICE}", "我喜欢喝燕麦拿铁咖啡", provenance=Provenance(channel="feishu", chat_id="oc_alice")
        )
        await asyncio.wait_for(app.start(), 15)
        assert list(app.channels) == ["feishu"] and app.http is not None
        hook = app.http.url + "/feishu/events"

        # A trigger: the stored memory reaches the prompt, the reply the chat.
        question = feishu.message_event("我之前说过我喜欢什么咖啡？", chat_id="oc_alice", open_id=ALICE)
        r = await feishu.push_event(hook, question, encrypt_key=ENCRYPT_KEY)
        assert r.status_code == 200
        await _shown(feishu, ["re: 我之前说过我喜欢什么咖啡？"])
        [sent] = feishu.sent
        assert (sent["kind"], sent["chat_id"], sent["text"]) == ("create", "oc_alice", "re: 我之前说过我喜欢什么咖啡？")
        prompt = _user_text(echo_llm.chat_requests()[0])
        # Cited with where it came from, in the chat's language, without the chat's id.
        assert prompt.startswith("<memories>") and "· 你在飞书上告诉我的] 我喜欢喝燕麦拿铁咖啡" in prompt
        assert "oc_alice" not in prompt

        # Feishu delivers at least once: the same event_id again gets no second reply.
        assert (await feishu.push_event(hook, question, encrypt_key=ENCRYPT_KEY)).status_code == 200
        # A bad signature is refused before anything reaches the bus.
        forged = feishu.message_event("forged", chat_id="oc_alice", open_id=ALICE)
        r = await feishu.push_event(hook, forged, encrypt_key=ENCRYPT_KEY, bad_signature=True)
        assert r.status_code == 401
        # "好的" does not retrieve; the chat's messages are answered in order,
        # so once this reply is out, a duplicate or forged reply would be too.
        retrievals = app.loop.stats.retrievals if app.loop else -1
        ack = feishu.message_event("好的", chat_id="oc_alice", open_id=ALICE)
        assert (await feishu.push_event(hook, ack, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await _shown(feishu, ["re: 我之前说过我喜欢什么咖啡？", "re: 好的"])
        assert len(echo_llm.requests) == 2 and "forged" not in echo_llm.prompts_text()
        assert _user_text(echo_llm.chat_requests()[1]) == "好的" and app.loop is not None and app.loop.stats.retrievals == retrievals
    finally:
        await asyncio.wait_for(app.close(), 30)


async def test_a_recalled_message_leaves_the_history_and_memory_of_its_sender_only(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """Alice sends her password by mistake and recalls it: the next prompt's
    history no longer holds it (nor the reply to it), its line waiting for
    extraction and the fact saved from it are erased, and the bot's reply
    repeating it is withdrawn from her chat; Bob's message of the same
    words, and the reply to it, stay. A recall of an unknown id, or of Alice's id in Bob's
    chat, touches nothing. No reply is sent for a recall."""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")})
    bob = "ou_bob00000000000000000000000000"
    secret = "my vault password is tulip-4471"
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None and app.loop is not None and app.backend is not None
        hook = app.http.url + "/feishu/events"

        async def push(event: dict[str, Any]) -> None:
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200

        mine = feishu.message_event(secret, chat_id="oc_alice", open_id=ALICE)
        await push(mine)
        await push(feishu.message_event(secret, chat_id="oc_bob", open_id=bob))
        await _until(lambda: len(feishu.sent) == 2)
        assert await app.loop.drain(5)
        mid = mine["event"]["message"]["message_id"]
        # As if saved with memory_save during that turn (its provenance is the message).
        await app.backend.remember(f"feishu:{ALICE}", "Alice's vault password is tulip-4471",
                                   provenance=Provenance(channel="feishu", chat_id="oc_alice", message_ids=(mid,)),
                                   source_text=secret, category="credential")
        engine = app.backend.engine  # type: ignore[attr-defined]

        for harmless in (feishu.recall_event("om_unknown0001", chat_id="oc_alice"),
                         feishu.recall_event(mid, chat_id="oc_bob")):
            await push(harmless)
        await push(feishu.recall_event(mid))
        await _until(lambda: app.loop is not None and app.loop.stats.revised == 3)
        assert await app.loop.drain(5)
        assert len(feishu.sent) == 2  # nothing answered
        # The bot's reply to it left Alice's chat too; Bob's is still there.
        await _until(lambda: len(feishu.deleted) == 1)
        assert [m["chat_id"] for m in feishu.visible()] == ["oc_bob"]
        assert feishu.deleted == [m["message_id"] for m in feishu.sent if m["chat_id"] == "oc_alice"]

        waiting = await engine.db.fetchall("SELECT owner, content FROM extraction_buffer ORDER BY id")
        assert [tuple(r) for r in waiting] == [(f"feishu:{bob}", secret), (f"feishu:{bob}", "re: " + secret)]
        assert await engine.list_memories(f"feishu:{ALICE}") == []

        await push(feishu.message_event("what did I tell you?", chat_id="oc_alice", open_id=ALICE))
        await push(feishu.message_event("what did I tell you?", chat_id="oc_bob", open_id=bob))
        await _until(lambda: len(feishu.sent) == 4)
        prompts = [json.dumps(r["messages"], ensure_ascii=False) for r in echo_llm.requests[2:]]
        assert sum("tulip-4471" in p for p in prompts) == 1  # Bob's history still has his own message
        assert app.sessions is not None
        rows = await app.sessions.db.fetchall("SELECT owner FROM session_messages WHERE content LIKE '%tulip%'")
        assert {r[0] for r in rows} == {f"feishu:{bob}"}
    finally:
        await asyncio.wait_for(app.close(), 30)
    for name in ("gateway.db", "memory.db", "memory.buffer.db"):
        data = b"".join(f.read_bytes() for f in (tmp_path / "data").glob(name + "*"))
        assert data and data.count(b"Alice's vault") == 0


async def test_a_recalled_message_leaves_the_file_stores_log_of_its_sender_only(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """The same with memory disabled (FileMemory): Alice's logged message and
    the reply to it leave her daily log, bytes included, and the next
    prompt's recent days; Bob's log of the same words stays."""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")}, memory={"enabled": False})
    bob = "ou_bob00000000000000000000000000"
    secret = "my vault password is tulip-4471"
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None and app.loop is not None and isinstance(app.backend, FileMemory)
        hook = app.http.url + "/feishu/events"

        async def push(event: dict[str, Any]) -> None:
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200

        await push(feishu.message_event("hello", chat_id="oc_alice", open_id=ALICE))
        await _until(lambda: len(feishu.sent) == 1)
        mine = feishu.message_event(secret, chat_id="oc_alice", open_id=ALICE)
        await push(mine)
        await push(feishu.message_event(secret, chat_id="oc_bob", open_id=bob))
        await _until(lambda: len(feishu.sent) == 3)
        assert await app.loop.drain(5)
        alice_dir, bob_dir = app.backend.user_dir(f"feishu:{ALICE}"), app.backend.user_dir(f"feishu:{bob}")
        assert on_disk(alice_dir, "tulip-4471") == 2  # the message and the echoed reply

        await push(feishu.recall_event(mine["event"]["message"]["message_id"], chat_id="oc_bob"))  # not Bob's
        await push(feishu.recall_event(mine["event"]["message"]["message_id"]))
        await _until(lambda: app.loop is not None and app.loop.stats.revised == 2)
        assert await app.loop.drain(5)
        assert len(feishu.sent) == 3  # nothing answered
        assert on_disk(alice_dir, "tulip-4471") == 0 and on_disk(bob_dir, "tulip-4471") == 2
        [day] = [f for f in alice_dir.iterdir() if f.name.endswith(".md")]
        assert day.read_text(encoding="utf-8").count("hello") == 2  # the rest of her day stays

        await push(feishu.message_event("what did I tell you?", chat_id="oc_alice", open_id=ALICE))
        await _until(lambda: len(feishu.sent) == 4)
        prompt = json.dumps(echo_llm.last_chat()["messages"], ensure_ascii=False)
        assert "hello" in prompt and "tulip" not in prompt
    finally:
        await asyncio.wait_for(app.close(), 30)


async def test_a_reply_feishu_will_not_withdraw_stays_but_the_recall_still_erases(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """Past the tenant's recall window Feishu refuses the DELETE (230009):
    the reply stays visible, logged, and the recalled message and the reply
    leave the history all the same."""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")})
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None and app.loop is not None and app.sessions is not None
        hook = app.http.url + "/feishu/events"
        mine = feishu.message_event("my pin is 8812", chat_id="oc_alice", open_id=ALICE)
        assert (await feishu.push_event(hook, mine, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await _until(lambda: len(feishu.sent) == 1)
        assert await app.loop.drain(5)
        feishu.fail_next(230009, "Message can only be recalled within one days.", on="delete")
        recall = feishu.recall_event(mine["event"]["message"]["message_id"])
        assert (await feishu.push_event(hook, recall, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await _until(lambda: app.loop is not None and app.loop.stats.revised == 1)
        assert await app.loop.drain(5)
        await _until(lambda: any(m == "DELETE" for m, _ in feishu.requests))
        assert feishu.deleted == [] and len(feishu.visible()) == 1
        rows = await app.sessions.db.fetchall("SELECT content FROM session_messages WHERE content LIKE '%8812%'")
        assert rows == []
    finally:
        await asyncio.wait_for(app.close(), 30)


async def test_a_download_held_past_the_stop_is_left_for_the_next_start_and_nothing_is_lost(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """Feishu was told the picture was taken (200) while its download hangs:
    the gateway's close (the real path, its default timeout) cuts it short
    after the channel's grace, and the message stays in the inbox with its
    picture's key for the next start (tests/gateway/test_inbox_feishu_resume_e2e.py),
    the user told nothing; a recall that waited behind it in the chat is
    honoured (the message leaves the history, the reply to it the chat).
    Nothing is logged as lost."""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")}, agent={
        "model": "test-model", "vision": True})
    key = feishu.add_image(b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
    gate = feishu.hold_resource(key)
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None and app.loop is not None and app.sessions is not None
        hook = app.http.url + "/feishu/events"

        async def push(event: dict[str, Any]) -> None:
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200

        pin = feishu.message_event("my pin is 8812", chat_id="oc_alice", open_id=ALICE)
        await push(pin)
        await _until(lambda: len(feishu.sent) == 1)
        post = {"title": "", "content": [[{"tag": "text", "text": "what is this?"}], [{"tag": "img", "image_key": key}]]}
        event = feishu.message_event(message_type="post", content=post, chat_id="oc_alice", open_id=ALICE)
        post_id = event["event"]["message"]["message_id"]
        await push(event)
        await _until(lambda: bool(feishu.resource_requests))
        await push(feishu.recall_event(pin["event"]["message"]["message_id"]))  # waits behind the picture
        with capture_logs() as logs:
            await asyncio.wait_for(app.close(), 30)
    finally:
        gate.set()
        await asyncio.wait_for(app.close(), 30)
    assert not [e for e in logs if e["log_level"] == "error"]
    assert feishu.texts() == ["re: my pin is 8812"]  # no "could not download that picture"
    assert feishu.deleted == [feishu.sent[0]["message_id"]]  # the reply to the recalled pin
    async with await SessionStore.open(tmp_path / "data" / "gateway.db") as sessions:
        rows = await sessions.db.fetchall("SELECT role, content FROM session_messages ORDER BY id")
        left = await sessions.db.fetchall("SELECT message_id FROM inbox")
    assert rows == []
    assert [r[0] for r in left] == [post_id]


async def test_a_download_held_past_a_stop_with_no_time_left_is_answered_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """As above, but the stop has no time left (``close(timeout=0)``):
    the download is still cut short, and the next start answers the
    message once, its picture downloaded again. (It once went on the bus
    after the loop had closed, and was lost: Feishu had its 200.)"""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")}, agent={
        "model": "test-model", "vision": True})
    key = feishu.add_image(b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
    gate = feishu.hold_resource(key)
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None
        post = {"title": "", "content": [[{"tag": "text", "text": "what is this?"}], [{"tag": "img", "image_key": key}]]}
        event = feishu.message_event(message_type="post", content=post, chat_id="oc_alice", open_id=ALICE)
        assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await _until(lambda: bool(feishu.resource_requests))
        await asyncio.wait_for(app.close(timeout=0.0), 30)
    finally:
        gate.set()
        await asyncio.wait_for(app.close(), 30)
    clock.advance(60)
    again = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")}, agent={
        "model": "test-model", "vision": True})
    try:
        await again.open()
        await asyncio.wait_for(again.start(), 15)
        await _until(lambda: any(t.startswith("re: ") for t in feishu.texts()), timeout=15)
        assert again.loop is not None and await again.loop.drain(5)
    finally:
        await asyncio.wait_for(again.close(), 30)
    assert [t for t in feishu.texts() if t.startswith("re: ")] == ["re: [photo] what is this?\n[image]"]
    assert "could not download" not in " ".join(feishu.texts())


async def test_long_connection_event_gets_a_reply(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "websocket")})
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is None  # no HTTP endpoint needed in this mode
        await feishu.wait_ws_connected(CONNECT_TIMEOUT)
        event = feishu.message_event("hello over the long connection", chat_id="oc_ws", open_id="ou_ws")
        ack = await feishu.push_ws_event(event, timeout=CONNECT_TIMEOUT)
        assert ack["code"] == 200
        await _shown(feishu, ["re: hello over the long connection"], timeout=15)
        assert (feishu.sent[0]["chat_id"], feishu.sent[0]["text"]) == ("oc_ws", "re: hello over the long connection")
    finally:
        await asyncio.wait_for(app.close(), 40)


async def test_a_bare_help_in_a_group_is_answered_without_the_model(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    # An app with the read-all-group-messages permission gets "/help" as
    # typed: it answers, where before it stayed silent for want of an @.
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")})
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None
        hook = app.http.url + "/feishu/events"
        chatter = feishu.message_event("lunch at noon?", chat_id="oc_team", chat_type="group", open_id=ALICE)
        assert (await feishu.push_event(hook, chatter, encrypt_key=ENCRYPT_KEY)).status_code == 200
        ask = feishu.message_event("/help", chat_id="oc_team", chat_type="group", open_id=ALICE)
        assert (await feishu.push_event(hook, ask, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await _until(lambda: len(feishu.sent) == 1)
        [sent] = feishu.sent
        assert sent["chat_id"] == "oc_team" and "/forget m12" in sent["text"]
        assert echo_llm.requests == []  # neither the chatter nor the command reached the model
    finally:
        await asyncio.wait_for(app.close(), 30)


async def test_feishu_keeps_working_when_the_telegram_token_is_rejected(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        telegram = {"enabled": True, "token": "999:not-the-right-token-abcdefg", "baseUrl": tg.base_url, "pollTimeout": 1}
        app = _app(tmp_path, clock, echo_llm, {"telegram": telegram, "feishu": _feishu_section(feishu, "webhook")})
        stop = asyncio.Event()
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert "401" in app.failed_channels["telegram"] and list(app.channels) == ["feishu"]
            waiter = asyncio.create_task(app.wait(stop))
            assert app.http is not None
            event = feishu.message_event("still there?", chat_id="oc_bob", open_id="ou_bob")
            assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _shown(feishu, ["re: still there?"])
            assert not waiter.done()
            stop.set()
            assert await asyncio.wait_for(waiter, 5) == 0
        finally:
            stop.set()
            await asyncio.wait_for(app.close(), 30)


async def test_a_feishu_groups_title_is_asked_of_feishu_without_holding_up_the_reply(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI
) -> None:
    """Feishu events carry no chat title: the gateway asks Feishu for the
    group's name in the background, the reply going out while that lookup
    is still held, and from then on the group is named by its title."""
    app = _app(tmp_path, clock, echo_llm, {"feishu": _feishu_section(feishu, "webhook")})
    feishu.chats["oc_team"] = "Tea lovers"
    feishu.chat_gate = asyncio.Event()  # Feishu slow to answer the lookup
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        assert app.http is not None and app.titles is not None
        hook = app.http.url + "/feishu/events"
        with capture_logs() as logs:
            first = feishu.message_event("@_user_1 secret oolong plans", chat_id="oc_team", chat_type="group",
                                         open_id=ALICE, mentions=[feishu.mention()])
            assert (await feishu.push_event(hook, first, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 1)  # answered while the lookup waits
            assert feishu.chat_requests == ["oc_team"]
            assert await app.titles.names(["feishu:oc_team"]) == {}
            feishu.chat_gate.set()
            await asyncio.wait_for(app.titles.idle(), 10)
            assert await app.titles.names(["feishu:oc_team"]) == {"feishu:oc_team": "Tea lovers"}

            again = feishu.message_event("@_user_1 more", chat_id="oc_team", chat_type="group",
                                         open_id=ALICE, mentions=[feishu.mention()])
            assert (await feishu.push_event(hook, again, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 2)
            await asyncio.wait_for(app.titles.idle(), 10)
            assert feishu.chat_requests == ["oc_team"]  # kept: not asked with every message
        # The title is never logged beside the message's words.
        assert not [e for e in logs if "Tea lovers" in repr(e) and "oolong" in repr(e)]
    finally:
        feishu.chat_gate.set()
        await asyncio.wait_for(app.close(), 30)
