"""The Feishu channel by webhook, against the fake Open API over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels.base import UNREADABLE_REPLY, UNREADABLE_REPLY_ZH, ChannelFatalError
from channels.feishu import FeishuApiError, FeishuChannel, FeishuClient, RecentIds, Withdrawal, app_locale
from gateway.bus import MESSAGE, RECALL, Attachment, InboundMessage, MessageBus, OutboundMessage
from gateway.config import FeishuConfig
from gateway.http import HttpServer
from memory.errorlog import error_brief
from tests.fakes.feishu_server import FakeFeishu
from tests.logjson import debug_json_log, lines

ENCRYPT_KEY = "fake-encrypt-key-Zx81kQ"


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as f:
        yield f


@pytest.fixture
async def http() -> AsyncIterator[HttpServer]:
    async with HttpServer("127.0.0.1", 0) as server:
        yield server


def config(fake: FakeFeishu, **over: Any) -> FeishuConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "app_id": fake.app_id,
        "app_secret": fake.app_secret,
        "verification_token": fake.verification_token,
        "mode": "webhook",
        "domain": fake.url,
    }
    values.update(over)
    return FeishuConfig(**values)


@pytest.fixture
async def channel(fake: FakeFeishu, http: HttpServer) -> AsyncIterator[FeishuChannel]:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01)
    await ch.start()
    yield ch
    await ch.stop()


def hook(http: HttpServer, ch: FeishuChannel) -> str:
    return http.url + ch.config.webhook_path


async def next_inbound(bus: MessageBus, timeout: float = 5.0) -> InboundMessage:
    return await asyncio.wait_for(bus.consume_inbound(), timeout)


# -- receive and reply ---------------------------------------------------------------
async def test_webhook_message_reaches_bus_and_reply_reaches_same_chat(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    event = fake.message_event("你好 myclaw", chat_id="oc_room1", open_id="ou_alice")
    r = await fake.push_event(hook(http, channel), event)
    assert r.status_code == 200
    msg = await next_inbound(channel.bus)
    assert (msg.channel, msg.chat_id, msg.sender_id, msg.text) == ("feishu", "oc_room1", "ou_alice", "你好 myclaw")
    assert msg.message_id == event["event"]["message"]["message_id"]
    assert msg.metadata["event_id"] == event["header"]["event_id"]
    assert not msg.is_group
    assert abs(msg.timestamp.timestamp() - time.time()) < 60

    sender = asyncio.create_task(channel.run_sender())
    try:
        await channel.bus.publish_outbound(OutboundMessage("feishu", msg.chat_id, "hi Alice", reply_to=msg.message_id))
        await asyncio.wait_for(channel.bus.outbound_queue("feishu").join(), 5)
    finally:
        sender.cancel()
    [sent] = fake.sent
    assert (sent["kind"], sent["chat_id"], sent["reply_to"], sent["text"]) == ("reply", "oc_room1", msg.message_id, "hi Alice")

    # A reply to the bot's message is flagged as such.
    follow = fake.message_event("and?", chat_id="oc_room1", parent_id=sent["message_id"])
    assert (await fake.push_event(hook(http, channel), follow)).status_code == 200
    assert (await next_inbound(channel.bus)).reply_to_bot


async def test_send_without_reply_to_creates_in_chat_and_splits_long_text(fake: FakeFeishu, channel: FeishuChannel) -> None:
    paragraphs = [f"paragraph {i} " + "x" * 1500 for i in range(6)]
    await channel.send(OutboundMessage("feishu", "oc_room9", "\n\n".join(paragraphs)))
    assert [m["kind"] for m in fake.sent] == ["create"] * len(fake.sent)
    assert len(fake.sent) > 1 and all(m["chat_id"] == "oc_room9" for m in fake.sent)
    assert all(len(t) <= 4000 for t in fake.texts())
    assert "\n\n".join(fake.texts()) == "\n\n".join(paragraphs)  # split only at paragraph breaks
    assert len({m["uuid"] for m in fake.sent}) == len(fake.sent)


async def test_a_markdown_reply_goes_as_a_post_feishu_renders(fake: FakeFeishu, channel: FeishuChannel) -> None:
    await channel.send(OutboundMessage("feishu", "oc_room9", "## 明天的安排\n\n- **9:00** 站会\n- 写 `retrieval.py`"))
    await channel.send(OutboundMessage("feishu", "oc_room9", "好的，明天见。"))
    post, text = fake.sent
    assert (post["msg_type"], text["msg_type"]) == ("post", "text")  # plain words stay a text message
    # Headings have no md syntax in a post: made bold; the rest is Feishu's own Markdown.
    assert post["text"] == "**明天的安排**\n\n- **9:00** 站会\n- 写 `retrieval.py`"
    assert fake.texts() == [post["text"], "好的，明天见。"]


async def test_a_table_goes_as_a_post_with_its_columns_aligned_in_a_code_block(
    fake: FakeFeishu, channel: FeishuChannel
) -> None:
    await channel.send(OutboundMessage("feishu", "oc_room9", "本周:\n\n| 任务 | owner |\n|---|---|\n| 部署 | bob |"))
    [post] = fake.sent  # the fake refuses a post Feishu would (an md element alone in its paragraph)
    assert post["msg_type"] == "post"
    assert post["text"] == "本周:\n\n```\n任务 | owner\n-----+------\n部署 | bob\n```"


async def test_a_code_block_split_across_messages_is_code_in_each(fake: FakeFeishu, channel: FeishuChannel) -> None:
    code = "\n".join(f"row {i:03d} " + "y" * 60 for i in range(120))  # ~8,500 characters: three messages
    await channel.send(OutboundMessage("feishu", "oc_room9", f"Log:\n\n```text\n{code}\n```\n\nEnd."))
    parts = fake.texts()
    assert len(parts) == 3 and all(m["msg_type"] == "post" for m in fake.sent)
    assert parts[0].startswith("Log:\n\n```text\nrow 000")
    assert all(p.startswith("```text\nrow ") for p in parts[1:]) and parts[-1].endswith("```\n\nEnd.")
    assert "\n".join(parts).count("row ") == 120


async def test_a_table_split_across_messages_keeps_its_header_in_each(fake: FakeFeishu, channel: FeishuChannel) -> None:
    rows = "\n".join(f"| host-{i:03d} | {'ok' if i % 7 else 'down'} | " + "note " * 10 + "|" for i in range(150))
    await channel.send(OutboundMessage("feishu", "oc_room9", f"Hosts:\n\n| host | state | note |\n|---|:-:|---|\n{rows}"))
    parts = fake.texts()
    assert len(parts) >= 2 and all(m["msg_type"] == "post" for m in fake.sent)
    for part in parts:  # every part an aligned block whose first row names the columns, no raw pipes left
        block = part.split("```\n", 1)[1]
        assert block.startswith("host     | state | note") and "| host-" not in part
    assert "\n".join(parts).count("host-") == 150


async def test_url_verification_challenge_answered(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    r = await fake.push_challenge(hook(http, channel), "chal-123")
    assert (r.status_code, r.json()) == (200, {"challenge": "chal-123"})
    r = await fake.push_challenge(hook(http, channel), "chal-123", verification_token="wrong-token")
    assert r.status_code == 401


# -- verification, encryption --------------------------------------------------------------
async def test_encrypted_signed_event_is_decrypted(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY), MessageBus(), http)
    await ch.start()
    try:
        r = await fake.push_challenge(hook(http, ch), "enc-chal", encrypt_key=ENCRYPT_KEY)
        assert r.json() == {"challenge": "enc-chal"}
        r = await fake.push_event(hook(http, ch), fake.message_event("secret plans"), encrypt_key=ENCRYPT_KEY)
        assert r.status_code == 200
        assert (await next_inbound(ch.bus)).text == "secret plans"
    finally:
        await ch.stop()


@pytest.mark.parametrize(
    ("push", "status"),
    [
        ({"encrypt_key": ENCRYPT_KEY, "bad_signature": True}, 401),
        ({"encrypt_key": ENCRYPT_KEY, "verification_token": "forged"}, 401),
        ({"encrypt_key": "some-other-key-123"}, 401),  # signed with another key: refused before decrypting
        ({}, 401),  # plaintext (so unsigned) while an encrypt key is configured
    ],
    ids=["bad-signature", "bad-token", "wrong-key", "unencrypted"],
)
async def test_rejected_webhook_requests_reach_nothing(
    fake: FakeFeishu, http: HttpServer, push: dict[str, Any], status: int
) -> None:
    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY), MessageBus(), http)
    await ch.start()
    try:
        with capture_logs() as logs:
            r = await fake.push_event(hook(http, ch), fake.message_event("let me in"), **push)
        assert r.status_code == status
        assert ch.bus.inbound.empty()
        assert any(e["event"] == "feishu webhook request rejected" and e["status"] == status for e in logs)
    finally:
        await ch.stop()


async def test_wrong_verification_token_rejected_without_encryption(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    r = await fake.push_event(hook(http, channel), fake.message_event("hi"), verification_token="nope")
    assert r.status_code == 401
    r = await fake.push_event(hook(http, channel), {"not": "json object"} | {"schema": "2.0"}, verification_token="nope")
    assert r.status_code == 401
    assert channel.bus.inbound.empty()


async def test_an_event_for_another_app_is_refused_with_a_log_line(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    """Defence in depth behind the token and the signature: an event whose
    ``header.app_id`` is not ours reaches nothing, and the log says why."""
    foreign = fake.message_event("from another app")
    foreign["header"]["app_id"] = "cli_someone_else"
    with capture_logs() as logs:
        r = await fake.push_event(hook(http, channel), foreign)
    assert r.status_code == 200  # taken and dropped: a redelivery would be refused again
    assert channel.bus.inbound.empty()
    [refused] = [e for e in logs if e["event"] == "feishu event for another app refused"]
    assert refused["app_id"] == "cli_someone_else" and refused["log_level"] == "warning"
    assert (await fake.push_event(hook(http, channel), fake.message_event("ours"))).status_code == 200
    assert (await next_inbound(channel.bus)).text == "ours"


# -- dedup, parsing, mentions, allow-list ---------------------------------------------------
async def test_duplicate_event_id_gives_one_message(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    event = fake.message_event("once")
    for _ in range(3):
        assert (await fake.push_event(hook(http, channel), event)).status_code == 200
    await next_inbound(channel.bus)
    await asyncio.sleep(0.05)
    assert channel.bus.inbound.empty()


async def test_a_recall_reaches_the_bus_once_naming_the_message(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    sent = fake.message_event("my password is hunter2", chat_id="oc_room1", open_id="ou_alice")
    await fake.push_event(hook(http, channel), sent)
    original = await next_inbound(channel.bus)
    recall = fake.recall_event(original.message_id)
    for _ in range(2):  # redelivered: dedup by event_id, as for messages
        assert (await fake.push_event(hook(http, channel), recall)).status_code == 200
    msg = await next_inbound(channel.bus)
    assert (msg.kind, msg.channel, msg.chat_id, msg.message_id) == (RECALL, "feishu", "oc_room1", original.message_id)
    assert (msg.sender_id, msg.text, msg.metadata["recall_type"]) == ("", "", "message_owner")
    await asyncio.sleep(0.05)
    assert channel.bus.inbound.empty()
    # Malformed: no message id. Answered (Feishu would only retry it), dropped.
    bad = fake.recall_event("")
    assert (await fake.push_event(hook(http, channel), bad)).status_code == 200
    await asyncio.sleep(0.05)
    assert channel.bus.inbound.empty() and fake.sent == []


async def test_an_encrypted_recall_passes_the_allow_list(fake: FakeFeishu, http: HttpServer) -> None:
    """A recall names no sender: it is not held to allowFrom (it can only
    erase what an allowed sender stored), but it is decrypted and its
    signature checked like any event."""
    cfg = config(fake, encrypt_key=ENCRYPT_KEY, verification_token="", allow_from=["ou_boss"])
    ch = FeishuChannel(cfg, MessageBus(), http)
    await ch.start()
    try:
        recall = fake.recall_event("om_x1", chat_id="oc_room2", recall_type="group_manager")
        forged = await fake.push_event(hook(http, ch), recall, encrypt_key=ENCRYPT_KEY, bad_signature=True)
        assert forged.status_code == 401
        assert (await fake.push_event(hook(http, ch), recall, encrypt_key=ENCRYPT_KEY)).status_code == 200
        msg = await next_inbound(ch.bus)
        assert (msg.kind, msg.chat_id, msg.message_id, msg.metadata["recall_type"]) == (
            RECALL, "oc_room2", "om_x1", "group_manager")
    finally:
        await ch.stop()


async def test_post_rich_text_is_flattened(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    post = {
        "title": "周报",
        "content": [
            [{"tag": "at", "user_id": "@_user_1", "user_name": "myclaw"}, {"tag": "text", "text": " 请看 "},
             {"tag": "a", "text": "文档", "href": "https://example.com/doc"}],
            [{"tag": "text", "text": "抄送 "}, {"tag": "at", "user_id": "@_user_2", "user_name": "Alice"},
             {"tag": "img", "image_key": "img_v2_x"}],
        ],
    }
    event = fake.message_event(
        message_type="post", content=post, chat_type="group",
        mentions=[fake.mention("@_user_1"), fake.mention("@_user_2", bot=False, name="Alice")],
    )
    await fake.push_event(hook(http, channel), event)
    msg = await next_inbound(channel.bus)
    assert msg.text == "周报\n请看 文档 (https://example.com/doc)\n抄送 @Alice[image]"
    assert msg.is_group and msg.mentioned
    # A locale-wrapped post (the shape used when sending) reads the same way.
    wrapped = fake.message_event(message_type="post", content={"en_us": {"title": "T", "content": [[{"tag": "text", "text": "body"}]]}})
    await fake.push_event(hook(http, channel), wrapped)
    assert (await next_inbound(channel.bus)).text == "T\nbody"


async def test_group_mentions(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    url = hook(http, channel)
    assert channel.bot_open_id == fake.bot_open_id
    await fake.push_event(url, fake.message_event("just chatting", chat_type="group"))
    plain = await next_inbound(channel.bus)
    assert plain.is_group and not plain.mentioned

    other = fake.message_event("@_user_1 can you check", chat_type="group", mentions=[fake.mention("@_user_1", bot=False, name="Bob")])
    await fake.push_event(url, other)
    msg = await next_inbound(channel.bus)
    assert not msg.mentioned and msg.text == "@Bob can you check"

    at_bot = fake.message_event(
        "@_user_1 what's up with @_user_2 ?", chat_type="group",
        mentions=[fake.mention("@_user_1"), fake.mention("@_user_2", bot=False, name="Bob")],
    )
    await fake.push_event(url, at_bot)
    msg = await next_inbound(channel.bus)
    assert msg.mentioned and msg.text == "what's up with @Bob ?"


async def test_a_bare_command_of_ours_in_a_group_is_addressed_to_the_bot(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel,
) -> None:
    # Feishu has no command menu and no /cmd@bot: a group's "/help" reaches
    # the app at all only with the read-all-group-messages permission, and
    # then it is ours to answer, as Telegram's bare menu commands are.
    url = hook(http, channel)
    for text in ("/help", "/帮助", "/share m3", "/memory", "/NEW"):
        await fake.push_event(url, fake.message_event(text, chat_type="group"))
        msg = await next_inbound(channel.bus)
        assert msg.is_group and msg.mentioned, text
    # Words for the model, or someone else's command: not addressed.
    for text in ("/help me with this", "/deploy now", "/shrug", "please /help"):
        await fake.push_event(url, fake.message_event(text, chat_type="group"))
        msg = await next_inbound(channel.bus)
        assert not msg.mentioned, text


async def test_a_reply_to_a_message_brings_its_words(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    from gateway.bus import Quoted

    url = hook(http, channel)
    note = fake.message_event("@_user_1 发布改到周四 14:00", chat_type="group", open_id="ou_alice",
                              mentions=[fake.mention("@_user_1", bot=False, name="Bob")])
    await fake.push_event(url, note)
    assert (await next_inbound(channel.bus)).quoted is None  # not a reply
    parent = note["event"]["message"]["message_id"]
    ask = fake.message_event("@_user_1 这对我们意味着什么？", chat_type="group", parent_id=parent,
                             mentions=[fake.mention("@_user_1")])
    await fake.push_event(url, ask)
    msg = await next_inbound(channel.bus)
    assert msg.text == "这对我们意味着什么？" and msg.quoted == Quoted(author="", text="@Bob 发布改到周四 14:00")
    # A reply to the bot's own message: "you" wrote it (a post's words read as text).
    [bot_id] = await channel.api.send_text("oc_chat0001", "**明天** 九点")
    await fake.push_event(url, fake.message_event("为什么？", parent_id=bot_id))
    assert (await next_inbound(channel.bus)).quoted == Quoted(author="you", text="**明天** 九点")
    # A group message not addressed to the bot is not worth a request; a failed read costs the quote only.
    reads = fake.message_reads
    await fake.push_event(url, fake.message_event("+1", chat_type="group", parent_id=parent))
    assert (await next_inbound(channel.bus)).quoted is None and fake.message_reads == reads
    await fake.push_event(url, fake.message_event("这是什么？", parent_id="om_gone"))
    gone = await next_inbound(channel.bus)
    assert gone.text == "这是什么？" and gone.quoted is None


async def test_a_quoted_message_names_its_author_from_the_contact_directory(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    from gateway.bus import Quoted

    url = hook(http, channel)
    fake.contacts["ou_alice"] = "Alice Wang"
    said = []
    for open_id in ("ou_alice", "ou_carol", "ou_me"):
        note = fake.message_event(f"note by {open_id}", chat_type="group", open_id=open_id)
        await fake.push_event(url, note)
        await next_inbound(channel.bus)
        said.append(note["event"]["message"]["message_id"])
    got = []
    for parent in said:
        await fake.push_event(url, fake.message_event("@_user_1 why?", chat_type="group", open_id="ou_me",
                                                      parent_id=parent, mentions=[fake.mention("@_user_1")]))
        got.append((await next_inbound(channel.bus)).quoted)
    # A name when the directory has one, none rather than a guess, and the asker's own message is theirs.
    assert got == [Quoted("Alice Wang", "note by ou_alice"), Quoted("", "note by ou_carol"),
                   Quoted("the user", "note by ou_me")]


async def test_a_sender_without_open_id_is_named_by_the_id_type_it_has(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    """A member named by union_id, or by user_id within the app's tenant, is
    looked up by that id's type; another tenant's user_id is not asked of
    the directory at all (it names nobody there)."""
    url = hook(http, channel)
    fake.contacts.update({"ou_lei": "Li Lei", "ou_mei": "Han Mei", "ou_far": "Far Away"})
    fake.contact_user_ids.update({"u0042": "ou_mei", "u0099": "ou_far"})
    senders = [dict(open_id="", union_id="on_lei", user_id=""), dict(open_id="", union_id="", user_id="u0042"),
               dict(open_id="", union_id="", user_id="u0099")]
    got = []
    for n, ids in enumerate(senders):
        event = fake.message_event(f"@_user_1 hi {n}", chat_type="group", mentions=[fake.mention()], **ids)
        if ids["user_id"] == "u0099":
            event["event"]["sender"]["tenant_key"] = "other-tenant"
        await fake.push_event(url, event)
        msg = await next_inbound(channel.bus)
        got.append((msg.sender_id, msg.sender_name))
    assert got == [("on_lei", "Li Lei"), (f"u0042@{fake.tenant_key}", "Han Mei"), ("u0099@other-tenant", "")]
    assert fake.contact_lookups == [("union_id", "on_lei"), ("user_id", "u0042")]


async def test_allow_list_by_open_union_or_user_id(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake, allow_from=["on_friend", "ou_boss"]), MessageBus(), http)
    await ch.start()
    try:
        url = hook(http, ch)
        with capture_logs() as logs:
            await fake.push_event(url, fake.message_event("stranger", open_id="ou_x", union_id="on_x"))
        await fake.push_event(url, fake.message_event("friend", open_id="ou_y", union_id="on_friend"))
        await fake.push_event(url, fake.message_event("boss", open_id="ou_boss", union_id="on_z"))
        assert [(await next_inbound(ch.bus)).text for _ in range(2)] == ["friend", "boss"]
        assert ch.bus.inbound.empty()
        assert any("not in allowFrom" in e["event"] and e["sender_id"] == "ou_x" for e in logs)
    finally:
        await ch.stop()


async def test_messages_from_apps_and_without_text_are_ignored(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    url = hook(http, channel)
    await fake.push_event(url, fake.message_event("from a bot", sender_type="app"))
    await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": "img_1"}))
    await fake.push_event(url, fake.message_event("after"))
    assert (await next_inbound(channel.bus)).text == "after"


async def test_an_image_or_sticker_gets_a_note_where_a_text_would_be_answered(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    url = hook(http, channel)
    sender = asyncio.create_task(channel.run_sender())
    try:
        await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": "img_1"}))
        await fake.push_event(url, fake.message_event(message_type="sticker", content={"file_key": "st_1"},
                                                      chat_id="oc_group", chat_type="group"))  # not @-mentioned
        await fake.push_event(url, fake.message_event("after"))
        assert (await next_inbound(channel.bus)).text == "after"  # the image never reached the loop
        await asyncio.wait_for(channel.bus.outbound_queue("feishu").join(), 5)
    finally:
        sender.cancel()
    assert [(m["chat_id"], m["text"]) for m in fake.sent] == [("oc_chat0001", UNREADABLE_REPLY)]
    assert channel.bus.inbound.empty()


# -- tenant token, errors, non-blocking --------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_tenant_token_cached_refreshed_on_expiry_and_on_invalid_code(fake: FakeFeishu) -> None:
    clock = Clock()
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, clock=clock)
    try:
        await asyncio.gather(*(api.send_text("oc_1", f"m{i}") for i in range(5)))
        assert fake.token_requests == 1 and len(fake.sent) == 5

        clock.now += 7200  # past expiry: a new token before the next call
        await api.send_text("oc_1", "after expiry")
        assert fake.token_requests == 2

        fake.revoke_tokens()  # Feishu answers 99991663: refetch once, then succeed
        await api.send_text("oc_1", "after revoke")
        assert fake.token_requests == 3
        assert fake.texts()[-1] == "after revoke"
    finally:
        await api.aclose()


@pytest.mark.parametrize("code", [99991663, 99991668])
async def test_a_token_refused_mid_run_is_fetched_again_once_and_the_message_sent_once(
    fake: FakeFeishu, code: int
) -> None:
    """Feishu refusing the tenant token (invalid 99991663, or 99991668) on a
    send: one new token, the send once more, one message in the chat; a
    second refusal in a row is an error, not a loop."""
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        await api.send_text("oc_1", "first")
        fake.fail_next(code, "Invalid access token for authorization. Please make a request with token attached.")
        await api.send_text("oc_1", "after the refusal")
        assert fake.token_requests == 2 and fake.texts() == ["first", "after the refusal"]
        fake.fail_next(code, "Invalid access token for authorization.", times=2)
        with pytest.raises(FeishuApiError) as err:
            await api.send_text("oc_1", "refused twice")
        assert err.value.code == code and err.value.retryable is False
        assert fake.token_requests == 3 and fake.texts() == ["first", "after the refusal"]
    finally:
        await api.aclose()


async def test_rate_limit_retried_other_errors_raised_with_code(fake: FakeFeishu) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        fake.fail_next(99991400, "request trigger frequency limit", status=429, times=2)
        assert len(await api.send_text("oc_1", "eventually")) == 1
        assert fake.texts() == ["eventually"]

        fake.fail_next(230002, "Bot/User can NOT be out of the chat.")
        with pytest.raises(FeishuApiError) as err:
            await api.send_text("oc_1", "nope")
        assert err.value.code == 230002
    finally:
        await api.aclose()


async def test_a_failed_send_logs_feishu_s_code_and_status_never_its_words(
    fake: FakeFeishu, channel: FeishuChannel
) -> None:
    """Feishu's ``msg`` may echo what was sent (a user's words in a reply,
    a chat's name): the log line and the error's text, which the outbox
    keeps, say the code and status only."""
    fake.fail_next(230099, "cannot send 'marmalade-zebrafinch' to this chat", status=400)
    sender = asyncio.create_task(channel.run_sender())
    try:
        with debug_json_log() as stream:
            await channel.bus.publish_outbound(OutboundMessage("feishu", "oc_gone", "a reply"))
            await asyncio.wait_for(channel.bus.outbound_queue("feishu").join(), 5)
    finally:
        sender.cancel()
    [failed] = lines(stream, "send failed")
    assert (failed["code"], failed["status"]) == (230099, 400)
    assert "zebrafinch" not in stream.getvalue()
    refused = FeishuApiError(230099, "cannot send 'marmalade-zebrafinch'", status=400, endpoint="/im/v1/messages")
    assert "zebrafinch" not in str(refused) and "230099" in str(refused) and "zebrafinch" in refused.msg
    body = FeishuApiError(-1, "non-JSON answer: 'zebrafinch'", status=502, endpoint="/im/v1/messages")
    assert "zebrafinch" not in error_brief(body)


async def test_failed_send_is_logged_with_code_and_sender_goes_on(fake: FakeFeishu, channel: FeishuChannel) -> None:
    fake.fail_next(230002, "Bot/User can NOT be out of the chat.")
    sender = asyncio.create_task(channel.run_sender())
    try:
        with capture_logs() as logs:
            await channel.bus.publish_outbound(OutboundMessage("feishu", "oc_gone", "lost"))
            await channel.bus.publish_outbound(OutboundMessage("feishu", "oc_ok", "delivered"))
            await asyncio.wait_for(channel.bus.outbound_queue("feishu").join(), 5)
    finally:
        sender.cancel()
    assert fake.texts() == ["delivered"]
    assert any(e["event"] == "send failed" and e["code"] == 230002 and "230002" in e["said"] for e in logs)


async def test_sending_does_not_block_the_event_loop(fake: FakeFeishu, channel: FeishuChannel) -> None:
    # Feishu (on this loop) holds the send until the test, also on this
    # loop, lets it go: a send that blocked the loop would never be let go.
    # How long the loop may stall is a speed, measured in scripts/bench_*.
    fake.send_gate = asyncio.Event()
    sending = asyncio.create_task(channel.send(OutboundMessage("feishu", "oc_1", "slow")))
    async with asyncio.timeout(30):
        while not any(path.endswith("/messages") for _, path in fake.requests):
            await asyncio.sleep(0.01)
    assert not sending.done() and fake.sent == []
    fake.send_gate.set()
    await asyncio.wait_for(sending, 30)
    assert fake.texts() == ["slow"]


# -- startup and shutdown ----------------------------------------------------------------------
async def test_wrong_app_secret_is_fatal_at_start(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake, app_secret="wrong-secret-xyz"), MessageBus(), http)
    with pytest.raises(ChannelFatalError, match="10014"):
        await ch.start()
    await ch.stop()


@pytest.mark.parametrize(("over", "said"), [
    ({"app_secret": "wrong-secret-xyz"}, "Feishu refused the app's login (code 10014): check appSecret"),
    ({"app_id": "cli_wrong"}, "Feishu refused the app's login (code 10003): check appId"),
], ids=["secret", "app-id"])
async def test_a_refused_login_says_the_code_and_our_hint_not_feishu_text(
    fake: FakeFeishu, http: HttpServer, over: dict[str, Any], said: str
) -> None:
    """Feishu's ``msg`` may echo what it was sent: the operator is told the
    code and what to check, in our words; the log holds no ``msg`` either."""
    ch = FeishuChannel(config(fake, **over), MessageBus(), http)
    with debug_json_log() as stream:
        with pytest.raises(ChannelFatalError) as raised:
            await ch.start()
        await ch.stop()
    assert str(raised.value).startswith(said), str(raised.value)
    for feishu_text in ("app secret invalid", "invalid param"):
        assert feishu_text not in str(raised.value) and feishu_text not in stream.getvalue()


@pytest.mark.parametrize(
    ("over", "with_http"),
    [({"app_secret": ""}, True), ({"verification_token": "", "encrypt_key": ""}, True), ({}, False)],
    ids=["no-secret", "webhook-unprotected", "webhook-without-http"],
)
async def test_unusable_config_is_fatal(fake: FakeFeishu, http: HttpServer, over: dict[str, Any], with_http: bool) -> None:
    ch = FeishuChannel(config(fake, **over), MessageBus(), http if with_http else None)
    with pytest.raises(ChannelFatalError):
        await ch.start()
    await ch.stop()


async def test_stop_twice_removes_the_route(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http)
    await ch.start()
    await ch.stop()
    await ch.stop()
    r = await fake.push_event(hook(http, ch), fake.message_event("late"))
    assert r.status_code == 404


async def test_secrets_never_logged(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY), MessageBus(), http, backoff=0.01)
    with capture_logs() as logs:
        await ch.start()
        try:
            url = hook(http, ch)
            await fake.push_event(url, fake.message_event("hi"), encrypt_key=ENCRYPT_KEY)
            await fake.push_event(url, fake.message_event("hi"), encrypt_key=ENCRYPT_KEY, bad_signature=True)
            await fake.push_event(url, fake.message_event("hi"), encrypt_key=ENCRYPT_KEY, verification_token="forged")
            fake.revoke_tokens()
            fake.fail_next(99991400, "rate limited", status=429)
            await ch.send(OutboundMessage("feishu", "oc_1", "reply"))
        finally:
            await ch.stop()
    text = json.dumps(logs, default=str)
    assert len(logs) >= 4
    assert len(fake.issued_tokens) == 2
    for secret in (fake.app_secret, fake.verification_token, ENCRYPT_KEY, *fake.issued_tokens):
        assert secret not in text


def test_importing_the_channel_does_not_load_lark_oapi() -> None:
    # The SDK costs seconds and ~170 MB; only the long connection loads it.
    code = "import sys, channels.feishu; assert 'lark_oapi' not in sys.modules, 'lark_oapi imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- a recall withdraws the bot's reply ------------------------------------------------------
async def _answered(fake: FakeFeishu, http: HttpServer, ch: FeishuChannel, text: str, reply: str,
                    **event: Any) -> tuple[InboundMessage, list[str]]:
    """Push ``text`` as a user's message, send ``reply`` as the answer to it
    (as the loop does), and return the message with the reply's message ids."""
    assert (await fake.push_event(hook(http, ch), fake.message_event(text, **event))).status_code == 200
    msg = await next_inbound(ch.bus)
    before = len(fake.sent)
    await ch.send(OutboundMessage.answering(msg, reply))
    return msg, [m["message_id"] for m in fake.sent[before:]]


async def _recall(fake: FakeFeishu, http: HttpServer, ch: FeishuChannel, message_id: str, **over: Any) -> InboundMessage:
    assert (await fake.push_event(hook(http, ch), fake.recall_event(message_id, **over))).status_code == 200
    recall = await next_inbound(ch.bus)
    assert recall.kind == RECALL and recall.message_id == message_id
    assert await ch.withdrawals_done(5)
    return recall


def _deletes(fake: FakeFeishu) -> list[str]:
    return [path.rsplit("/", 1)[1] for method, path in fake.requests if method == "DELETE"]


async def test_a_recall_withdraws_every_part_of_the_reply_to_it_and_nothing_else(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    long_reply = "\n\n".join(f"part {i} " + "y" * 3000 for i in range(3))
    first, parts = await _answered(fake, http, channel, "tell me everything", long_reply, chat_id="oc_room1")
    second, [other] = await _answered(fake, http, channel, "and briefly?", "briefly: yes", chat_id="oc_room1")
    group, [quoted] = await _answered(fake, http, channel, "hi all", "hello", chat_id="oc_group", chat_type="group")
    assert len(parts) == 3 and fake.sent[-1]["reply_to"] == group.message_id  # quoted in a group

    await _recall(fake, http, channel, first.message_id)
    assert fake.deleted == parts == _deletes(fake)
    assert [m["message_id"] for m in fake.visible()] == [other, quoted]
    # A group reply (sent quoting the message) goes the same way.
    await _recall(fake, http, channel, group.message_id)
    assert fake.deleted == [*parts, quoted]
    # Redelivered or recalled again: each reply is withdrawn once.
    await _recall(fake, http, channel, first.message_id)
    assert _deletes(fake) == [*parts, quoted]
    assert second.message_id not in fake.deleted and other not in fake.deleted


async def test_a_recall_of_a_message_never_answered_there_withdraws_nothing(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    answered, [reply] = await _answered(fake, http, channel, "question", "answer", chat_id="oc_room1")
    await fake.push_event(hook(http, channel), fake.message_event("just saying", chat_id="oc_room1"))
    unanswered = await next_inbound(channel.bus)
    await _recall(fake, http, channel, unanswered.message_id)
    await _recall(fake, http, channel, "om_never_seen_0001", chat_id="oc_room1")
    # The answered message's id, but named in another chat: not that reply.
    await _recall(fake, http, channel, answered.message_id, chat_id="oc_elsewhere")
    # A reply sent without naming what it answers (a scheduled message) is never withdrawn.
    await channel.send(OutboundMessage("feishu", "oc_room1", "cron says hi", reply_to=answered.message_id))
    assert _deletes(fake) == [] and fake.deleted == []
    assert [m["message_id"] for m in fake.visible()][0] == reply


async def test_a_refused_withdrawal_is_logged_and_the_recall_still_reaches_the_bus(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    old, [old_reply] = await _answered(fake, http, channel, "yesterday's", "old answer")
    denied, [denied_reply] = await _answered(fake, http, channel, "another", "another answer")
    fake.fail_next(230009, "Message can only be recalled within one days.", on="delete")
    with capture_logs() as logs:
        await _recall(fake, http, channel, old.message_id)  # on the bus all the same
    [refused] = [e for e in logs if e["event"] == "feishu refused to withdraw the reply to a recalled message"]
    assert (refused["log_level"], refused["code"], refused["message_id"]) == ("info", 230009, old_reply)
    # Any other refusal (a missing permission) is a warning, not an exception.
    fake.fail_next(230027, "Lack of necessary permissions.", on="delete")
    with capture_logs() as logs:
        await _recall(fake, http, channel, denied.message_id)
    [warned] = [e for e in logs if e["event"] == "could not withdraw the reply to a recalled message"]
    assert (warned["log_level"], warned["code"]) == ("warning", 230027)
    assert fake.deleted == [] and len(fake.visible()) == 2
    assert denied_reply in _deletes(fake)


async def test_a_withdrawal_refreshes_a_revoked_token_and_waits_out_a_rate_limit(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg, [reply] = await _answered(fake, http, channel, "q", "a")
    fake.revoke_tokens()  # 99991663: a new token, then the DELETE again
    fake.fail_next(99991400, "request trigger frequency limit", status=429, on="delete")
    tokens = fake.token_requests
    await _recall(fake, http, channel, msg.message_id)
    assert fake.deleted == [reply] and fake.token_requests == tokens + 1


async def test_the_client_withdraws_only_what_the_bot_sent(fake: FakeFeishu) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        [mine] = await api.send_text("oc_1", "mine")
        assert await api.delete_message(mine) == Withdrawal(mine, True)
        assert fake.deleted == [mine]
        again = await api.delete_message(mine)  # gone already: said, not raised
        assert (again.deleted, again.code) == (False, 230011)
        users = fake.message_event("a user's words")["event"]["message"]["message_id"]
        refused = await api.delete_message(users)
        assert (refused.deleted, refused.code) == (False, 230026)
        with pytest.raises(FeishuApiError) as err:
            await api.delete_message("om_unknown")
        assert err.value.code == 230001
        assert fake.deleted == [mine]
    finally:
        await api.aclose()


async def test_a_reply_overtaken_by_the_recall_is_held_back_or_withdrawn(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    # The recall comes while the message is still being answered: its reply is not sent.
    await fake.push_event(hook(http, channel), fake.message_event("oops", chat_id="oc_room1"))
    early = await next_inbound(channel.bus)
    await _recall(fake, http, channel, early.message_id)
    await channel.send(OutboundMessage.answering(early, "answer to oops"))
    assert fake.sent == []
    # ... or while its reply is going out, part by part: what went out is withdrawn.
    await fake.push_event(hook(http, channel), fake.message_event("long one", chat_id="oc_room1"))
    msg = await next_inbound(channel.bus)
    fake.send_delay = 0.2
    sending = asyncio.create_task(channel.send(OutboundMessage.answering(msg, "a" * 3000 + "\n\n" + "b" * 3000)))
    async with asyncio.timeout(5):
        while not fake.sent:
            await asyncio.sleep(0.01)
    await _recall(fake, http, channel, msg.message_id)  # between the parts
    await sending
    assert await channel.withdrawals_done(5)
    # Each part withdrawn once. Two withdrawals run side by side (the recall's, of the part
    # sent so far, and the send's end, of the rest): which reaches Feishu first is not a promise.
    assert len(fake.sent) == 2 and sorted(fake.deleted) == sorted(m["message_id"] for m in fake.sent)


async def test_a_failed_send_says_whether_to_retry_and_what_is_left(fake: FakeFeishu) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01, max_attempts=1)
    try:
        fake.fail_next(230002, "Bot/User can NOT be out of the chat.")
        with pytest.raises(FeishuApiError) as refused:
            await api.send_text("oc_1", "nope")
        assert refused.value.retryable is False and refused.value.remaining is None
        text = "\n\n".join(f"part {i} " + "word " * 700 for i in range(3))  # three chunks
        fake.fail_next(1, "internal error", status=502, after=2)
        went_out: list[str] = []
        with pytest.raises(FeishuApiError) as outage:
            await api.send_text("oc_1", text, on_sent=went_out.append)
        assert outage.value.retryable is True and len(went_out) == 2
        assert outage.value.remaining == text[text.index("part 2"):]
        assert [t.split()[:2] for t in fake.texts()] == [["part", "0"], ["part", "1"]]
    finally:
        await api.aclose()


# -- files (/export) -------------------------------------------------------------------
async def test_a_reply_with_a_file_is_uploaded_then_sent_as_a_file_message(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    event = fake.message_event("/导出", chat_id="oc_alice", open_id="ou_alice")
    assert (await fake.push_event(hook(http, channel), event)).status_code == 200
    msg = await next_inbound(channel.bus)
    data = "# myclaw 记忆导出\n\n- [m1] 我喜欢喝燕麦拿铁\n".encode()
    await channel.send(OutboundMessage.answering(msg, "这是我保存的关于你的一切", Attachment("myclaw-memory-2026-11-22.md", data)))
    [key] = fake.files
    assert fake.files[key] == {"file_name": "myclaw-memory-2026-11-22.md", "file_type": "stream", "data": data}
    caption, file = fake.sent
    assert (caption["msg_type"], caption["chat_id"], caption["text"]) == ("text", "oc_alice", "这是我保存的关于你的一切")
    assert (file["msg_type"], file["chat_id"], file["file_key"], file["data"]) == ("file", "oc_alice", key, data)
    assert ("POST", "/open-apis/im/v1/files") in fake.requests
    # Both parts are the reply to that message: recalling it withdraws the file too.
    await _recall(fake, http, channel, msg.message_id)
    assert fake.deleted == [caption["message_id"], file["message_id"]]


async def test_a_refused_upload_sends_nothing_and_says_why(fake: FakeFeishu) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        with pytest.raises(FeishuApiError) as empty:
            await api.upload_file("empty.md", b"")
        assert empty.value.code == 234010 and empty.value.retryable is False
        with pytest.raises(FeishuApiError) as unknown:
            await api.send_file("oc_1", "file_v3_nosuchkey")
        assert unknown.value.code == 230001
        assert fake.sent == [] and fake.files == {}
        key = await api.upload_file("notes.md", b"# notes\n")
        assert len(await api.send_file("oc_1", key)) == 1 and fake.sent[0]["file_name"] == "notes.md"
    finally:
        await api.aclose()


# -- pictures, with agent.vision (max_image_bytes) ---------------------------------------
PNG = b"\x89PNG\r\n\x1a\n" + bytes(600)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(900)


@pytest.fixture
async def seeing(fake: FakeFeishu, http: HttpServer) -> AsyncIterator[FeishuChannel]:
    """A channel whose model reads pictures up to 2 KB."""
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_image_bytes=2048)
    await ch.start()
    sender = asyncio.create_task(ch.run_sender())
    yield ch
    sender.cancel()
    await ch.stop()


async def test_an_image_message_is_fetched_from_the_message_resource_api(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    key = fake.add_image(PNG, "image/png")
    event = fake.message_event(message_type="image", content={"image_key": key})
    assert (await fake.push_event(hook(http, seeing), event)).status_code == 200
    msg = await next_inbound(seeing.bus)
    assert (msg.text, msg.history_text, [(i.mime, i.data) for i in msg.images]) == ("", "[photo]", [("image/png", PNG)])
    mid = event["event"]["message"]["message_id"]
    assert fake.resource_downloads == [(mid, key)]
    assert ("GET", f"/open-apis/im/v1/messages/{mid}/resources/{key}") in fake.requests


async def test_a_post_brings_its_pictures_and_its_words(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    a, b = fake.add_image(PNG, "image/png"), fake.add_image(JPEG)
    post = {"title": "", "content": [[{"tag": "text", "text": "which one is cheaper?"}],
                                     [{"tag": "img", "image_key": a}], [{"tag": "img", "image_key": b}]]}
    await fake.push_event(hook(http, seeing), fake.message_event(message_type="post", content=post))
    msg = await next_inbound(seeing.bus)
    assert msg.text == "which one is cheaper?\n[image]\n[image]" and msg.placeholder == "[2 photos]"
    assert [i.data for i in msg.images] == [PNG, JPEG]


async def test_a_picture_not_read_gets_a_note_and_nothing_is_lost(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    url = hook(http, seeing)
    big = fake.add_image(JPEG + bytes(4000))
    await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": big}))
    # a key that is not the message's: Feishu refuses (234001)
    await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": "img_v3_other"}))
    fine = fake.add_image(PNG)
    post = {"title": "", "content": [[{"tag": "text", "text": "and this?"}], [{"tag": "img", "image_key": big}]]}
    await fake.push_event(url, fake.message_event(message_type="post", content=post))
    await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": fine}))
    post_msg = await next_inbound(seeing.bus)
    assert (post_msg.history_text, post_msg.images) == ("[photo not read] and this?\n[image]", ())
    assert (await next_inbound(seeing.bus)).images != ()
    await asyncio.wait_for(seeing.bus.outbound_queue("feishu").join(), 5)
    too_large, failed, post_note = fake.texts()
    assert "too large" in too_large and "2 KB" in too_large
    assert "could not download" in failed
    assert "too large" in post_note and "answering your text without it" in post_note
    assert seeing.bus.inbound.empty()


async def test_notes_are_in_chinese_on_feishus_own_domain_unless_the_words_are_english(
    fake: FakeFeishu, http: HttpServer
) -> None:
    """Feishu names no sender's language: on open.feishu.cn (the default,
    reached here through the fake) a message without words gets Chinese;
    English words get English."""
    api = fake.client()
    ch = FeishuChannel(config(fake, domain="https://open.feishu.cn"), MessageBus(), http, backoff=0.01,
                       max_image_bytes=2048, api_http=api)
    await ch.start()
    sender = asyncio.create_task(ch.run_sender())
    try:
        url = hook(http, ch)
        big = fake.add_image(JPEG + bytes(4000))
        await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": big}))
        post = {"title": "", "content": [[{"tag": "text", "text": "and this?"}], [{"tag": "img", "image_key": big}]]}
        await fake.push_event(url, fake.message_event(message_type="post", content=post))
        await fake.push_event(url, fake.message_event(message_type="sticker", content={"file_key": "s"}))
        assert (await next_inbound(ch.bus)).history_text == "[photo not read] and this?\n[image]"
        await asyncio.wait_for(ch.bus.outbound_queue("feishu").join(), 5)
        chinese, english, sticker = fake.texts()
        assert chinese == "这张图片太大了，我读不了（上限 2 KB）。请发小一点的图片或截图。"
        assert english.startswith("That picture is too large") and english.endswith("your text without it.")
        assert sticker == UNREADABLE_REPLY_ZH
    finally:
        sender.cancel()
        await ch.stop()
        await api.aclose()


def test_the_apps_domain_says_its_users_language() -> None:
    assert app_locale("https://open.feishu.cn") == app_locale("https://open.feishu.cn/") == "zh"
    assert app_locale("https://open.larksuite.com") == "en"
    # A private deployment (or a test's server) says nothing: English, as Lark's.
    assert app_locale("http://127.0.0.1:8080") == app_locale("https://feishu.cn.example.com") == "en"


def test_the_apps_language_can_be_set(fake: FakeFeishu) -> None:
    # A private deployment of Feishu serves Chinese users on its own domain.
    assert FeishuChannel(config(fake, domain="https://open.feishu.corp.example"), MessageBus()).locale == "en"
    assert FeishuChannel(config(fake, domain="https://open.feishu.corp.example", language="zh"), MessageBus()).locale == "zh"
    assert FeishuChannel(config(fake, domain="https://open.feishu.cn", language="en"), MessageBus()).locale == "en"
    assert FeishuChannel(config(fake, domain="https://open.feishu.cn"), MessageBus()).locale == "zh"  # "auto"
    with pytest.raises(ValueError, match="language"):
        config(fake, language="fr")


async def test_group_pictures_are_fetched_only_when_the_bot_is_mentioned(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    url = hook(http, seeing)
    key = fake.add_image(PNG)
    await fake.push_event(url, fake.message_event(message_type="image", content={"image_key": key},
                                                  chat_id="oc_group", chat_type="group"))
    post = {"title": "", "content": [[{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " read this"}],
                                     [{"tag": "img", "image_key": key}]]}
    await fake.push_event(url, fake.message_event(message_type="post", content=post, chat_id="oc_group",
                                                  chat_type="group", mentions=[fake.mention()]))
    msg = await next_inbound(seeing.bus)
    assert (msg.mentioned, msg.text, len(msg.images)) == (True, "read this\n[image]", 1)
    assert len(fake.resource_downloads) == 1 and seeing.bus.inbound.empty() and fake.sent == []


async def test_an_audio_message_is_fetched_for_transcription(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_audio_bytes=4096)
    await ch.start()
    try:
        key = fake.add_audio(b"OggS" + bytes(700))
        event = fake.message_event(message_type="audio", content={"file_key": key, "duration": 2000})
        await fake.push_event(hook(http, ch), event)
        msg = await next_inbound(ch.bus)
        assert msg.audio is not None and msg.audio.data == b"OggS" + bytes(700) and msg.history_text == "[voice]"
        assert fake.requests[-1] == ("GET", f"/open-apis/im/v1/messages/{msg.message_id}/resources/{key}")
    finally:
        await ch.stop()


# -- intake lanes: a download holds up only its own chat ------------------------------------


async def until(check: Any, timeout: float = 5.0) -> None:
    """Wait until ``check()`` holds (the fake saw a request, ...)."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


def picture_event(fake: FakeFeishu, data: bytes, *, chat_id: str = "oc_a", **kw: Any) -> tuple[dict[str, Any], str]:
    key = fake.add_image(data)
    return fake.message_event(message_type="image", content={"image_key": key}, chat_id=chat_id, **kw), key


async def test_a_slow_download_holds_up_only_its_own_chat(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    """The webhook answers 200 while chat A's picture is still being
    downloaded; chat B's text goes on to the bus meanwhile, and A's later
    text waits behind A's picture."""
    url = hook(http, seeing)
    event, key = picture_event(fake, PNG)
    gate = fake.hold_resource(key)
    assert (await fake.push_event(url, event)).status_code == 200
    await until(lambda: fake.resource_requests)
    assert (await fake.push_event(url, fake.message_event("from B", chat_id="oc_b"))).status_code == 200
    assert (await fake.push_event(url, fake.message_event("A, later", chat_id="oc_a"))).status_code == 200
    assert (await next_inbound(seeing.bus)).text == "from B"
    assert seeing.bus.inbound.empty() and fake.resource_downloads == []  # A's text did not overtake

    gate.set()
    first = await next_inbound(seeing.bus)
    assert (first.chat_id, first.history_text, [i.data for i in first.images]) == ("oc_a", "[photo]", [PNG])
    assert (await next_inbound(seeing.bus)).text == "A, later"


async def test_a_reply_waits_for_its_quote_behind_the_chat_s_download(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    """Reading the message replied to is a job of the lane too: it keeps
    its place behind a pending picture."""
    url = hook(http, seeing)
    first = fake.message_event("the plan is Thursday", chat_id="oc_a")
    await fake.push_event(url, first)
    assert (await next_inbound(seeing.bus)).quoted is None
    event, key = picture_event(fake, PNG)
    gate = fake.hold_resource(key)
    await fake.push_event(url, event)
    ask = fake.message_event("why?", chat_id="oc_a", parent_id=first["event"]["message"]["message_id"])
    assert (await fake.push_event(url, ask)).status_code == 200
    gate.set()
    assert len((await next_inbound(seeing.bus)).images) == 1
    reply = await next_inbound(seeing.bus)
    assert reply.text == "why?" and reply.quoted is not None and reply.quoted.text == "the plan is Thursday"


async def test_a_recall_keeps_its_place_behind_the_message_it_recalls(
    fake: FakeFeishu, http: HttpServer, seeing: FeishuChannel
) -> None:
    """A recall of a message still waiting in its lane comes after it: the
    message recalled before its turn is never put on the bus, and the
    picture being downloaded when its recall came goes on before the
    recall, which then erases it (gateway/revisions.py)."""
    url = hook(http, seeing)
    event, key = picture_event(fake, PNG)
    gate = fake.hold_resource(key)
    await fake.push_event(url, event)
    await until(lambda: fake.resource_requests)
    secret = fake.message_event("my password is hunter2", chat_id="oc_a")
    await fake.push_event(url, secret)
    picture_id, secret_id = (e["event"]["message"]["message_id"] for e in (event, secret))
    for recalled in (secret_id, picture_id):
        assert (await fake.push_event(url, fake.recall_event(recalled))).status_code == 200
    assert seeing.bus.inbound.empty()

    gate.set()
    got = [await next_inbound(seeing.bus) for _ in range(3)]
    assert [(m.kind, m.message_id) for m in got] == [
        (MESSAGE, picture_id), (RECALL, secret_id), (RECALL, picture_id)]
    assert seeing.bus.inbound.empty()
    # The picture's reply, made before the recall was applied, is held back.
    await seeing.send(OutboundMessage.answering(got[0], "a cat"))
    assert fake.sent == []


async def test_stop_during_a_held_download_still_publishes_it(fake: FakeFeishu, http: HttpServer) -> None:
    """stop_receiving refuses new events (503: Feishu delivers them again
    later) and waits for the download: once it returns, the message is on
    the bus for the gateway to answer."""
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_image_bytes=2048)
    await ch.start()
    try:
        url = hook(http, ch)
        event, key = picture_event(fake, PNG)
        gate = fake.hold_resource(key)
        await fake.push_event(url, event)
        await until(lambda: fake.resource_requests)
        stopping = asyncio.create_task(ch.stop_receiving())
        await asyncio.sleep(0)  # told to stop before the download ends
        assert (await fake.push_event(url, fake.message_event("too late"))).status_code == 503
        gate.set()
        await asyncio.wait_for(stopping, 5)
        assert ch.bus.inbound.qsize() == 1
        assert [i.data for i in (await next_inbound(ch.bus)).images] == [PNG]
    finally:
        await ch.stop()


async def test_a_stop_cut_short_still_hands_over_what_was_taken_with_a_note(
    fake: FakeFeishu, http: HttpServer
) -> None:
    """The gateway bounds stop_receiving: when it stops waiting, the download
    still under way is cut short and its message goes on the bus at once,
    as after a failed download (the caption marked "[photo not read]", the
    user told), followed by what waited behind it in its chat, a recall
    included: Feishu was told all of it was taken, and nothing is lost. Its
    event id stays seen (it was handled), so a redelivery is dropped."""
    seen = RecentIds()
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, max_image_bytes=2048, dedup=seen)
    await ch.start()
    url = hook(http, ch)
    key = fake.add_image(PNG)
    post = {"title": "", "content": [[{"tag": "text", "text": "what is this?"}], [{"tag": "img", "image_key": key}]]}
    event = fake.message_event(message_type="post", content=post, chat_id="oc_a")
    gate = fake.hold_resource(key)
    try:
        await fake.push_event(url, event)
        await until(lambda: fake.resource_requests)
        await fake.push_event(url, fake.message_event("and later", chat_id="oc_a"))
        await fake.push_event(url, fake.recall_event("om_earlier0001", chat_id="oc_a"))
        assert ch.bus.inbound.empty()
        with capture_logs() as logs:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ch.stop_receiving(), 0.2)  # as gateway/app.py close() does
        got = [ch.bus.inbound.get_nowait() for _ in range(ch.bus.inbound.qsize())]
        assert [(m.kind, m.history_text) for m in got] == [
            (MESSAGE, "[photo not read] what is this?\n[image]"), (MESSAGE, "and later"), (RECALL, "")]
        assert got[0].images == () and got[2].message_id == "om_earlier0001"
        note = ch.bus.outbound_queue("feishu").get_nowait()
        assert "could not download that picture" in note.text and "answering your text without it" in note.text
        assert not [e for e in logs if e["event"] == "feishu messages still pending at shutdown are lost"]
        assert event["header"]["event_id"] in seen
    finally:
        gate.set()
        await asyncio.wait_for(ch.stop(), 5)


async def test_a_message_that_cannot_reach_the_bus_even_after_the_cut_is_lost_and_said_so(
    fake: FakeFeishu, http: HttpServer
) -> None:
    """The last resort: the bus is full and nothing takes from it (a stuck
    process loop), so even the cut-short message cannot go on. It is
    cancelled, logged as lost with how many, and its event id is forgotten,
    so Feishu's own retry of it is taken after the restart."""
    seen = RecentIds()
    ch = FeishuChannel(config(fake), MessageBus(maxsize=1), http, backoff=0.01, max_image_bytes=2048, dedup=seen)
    await ch.start()
    url = hook(http, ch)
    await fake.push_event(url, fake.message_event("fills the bus", chat_id="oc_b"))
    key = fake.add_image(PNG)
    post = {"title": "", "content": [[{"tag": "text", "text": "what is this?"}], [{"tag": "img", "image_key": key}]]}
    event = fake.message_event(message_type="post", content=post, chat_id="oc_a")
    gate = fake.hold_resource(key)
    try:
        await fake.push_event(url, event)
        await until(lambda: fake.resource_requests)
        with capture_logs() as logs:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ch.stop_receiving(), 0.2)
        assert [e.get("pending") for e in logs if e["event"] == "feishu messages still pending at shutdown are lost"] == [1]
        assert ch.bus.inbound.get_nowait().text == "fills the bus" and ch.bus.inbound.empty()
        assert event["header"]["event_id"] not in seen
    finally:
        gate.set()
        await asyncio.wait_for(ch.stop(), 5)
