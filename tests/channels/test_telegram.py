"""TelegramChannel against the fake Bot API: real python-telegram-bot, real
HTTP on 127.0.0.1, a real MessageBus; nothing patched."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

import pytest
import structlog
from pydantic import SecretStr
from structlog.testing import capture_logs

from channels.base import UNREADABLE_REPLY, ChannelFatalError
from channels.telegram import (
    INVALID_TOKEN_MESSAGE,
    NOT_FOUND_MESSAGE,
    Backoff,
    TelegramChannel,
    TelegramSendError,
    split_message,
)
from gateway.bus import EDIT, MESSAGE, MOVED, Attachment, InboundMessage, MessageBus, OutboundMessage, Quoted
from gateway.config import TelegramConfig
from gateway.logging import configure_logging
from tests.logjson import all_lines, debug_json_log, lines
from tests.fakes.telegram_server import (
    FakeTelegram,
    Upload,
    origin_channel,
    origin_chat,
    origin_hidden_user,
    origin_user,
    sticker,
    utf16_len,
)

T = TypeVar("T")
FAST = Backoff(initial=0.05, maximum=0.3)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def bus() -> MessageBus:
    return MessageBus(maxsize=100)


def config_for(fake: FakeTelegram, *, token: str | None = None, allow_from: list[str] | None = None) -> TelegramConfig:
    return TelegramConfig(
        enabled=True,
        token=SecretStr(token or fake.token),
        allow_from=allow_from or [],
        base_url=fake.base_url,
        poll_timeout=1,  # short long-polls keep the suite quick
    )


@pytest.fixture
async def make_channel(fake: FakeTelegram, bus: MessageBus) -> AsyncIterator[Any]:
    """Start channels (and optionally their sender); stop them all afterwards."""
    channels: list[TelegramChannel] = []
    senders: list[asyncio.Task[None]] = []

    async def make(*, sender: bool = False, start: bool = True, **kw: Any) -> TelegramChannel:
        cfg = config_for(fake, token=kw.pop("token", None), allow_from=kw.pop("allow_from", None))
        kw.setdefault("backoff", FAST)
        ch = TelegramChannel(cfg, bus, **kw)
        channels.append(ch)
        if start:
            await asyncio.wait_for(ch.start(), 10)
        if sender:
            senders.append(asyncio.create_task(ch.run_sender()))
        return ch

    yield make
    for task in senders:
        task.cancel()
    if senders:
        await asyncio.wait(senders)
    for ch in channels:
        await asyncio.wait_for(ch.stop(), 10)


async def within(aw: Awaitable[T], seconds: float = 15.0) -> T:
    """Every await on the channel is bounded: a hang fails the test."""
    return await asyncio.wait_for(aw, seconds)


async def next_inbound(bus: MessageBus, timeout: float = 5.0) -> InboundMessage:
    return await asyncio.wait_for(bus.consume_inbound(), timeout)


async def test_the_command_menu_is_published_per_chat_type(fake: FakeTelegram, make_channel: Any) -> None:
    await make_channel()
    await fake.wait_until(lambda: sum(c.method == "setmycommands" for c in fake.calls) == 4, 5)
    menus = {(c.params["scope"]["type"], c.params.get("language_code")): [x["command"] for x in c.params["commands"]]
             for c in fake.calls if c.method == "setmycommands"}
    private = ["new", "memory", "forget", "export", "timezone", "incognito", "project", "jobs", "share", "help"]
    groups = ["new", "share", "help"]
    assert menus == {
        ("all_private_chats", None): private, ("all_group_chats", None): groups,
        ("all_private_chats", "zh"): private, ("all_group_chats", "zh"): groups,
    }
    [zh] = [c for c in fake.calls if c.method == "setmycommands" and c.params.get("language_code") == "zh"
            and c.params["scope"]["type"] == "all_private_chats"]
    assert zh.params["commands"][0]["description"] == "开始新的对话（记得的事仍然保留）"


async def test_a_refused_command_menu_does_not_stop_the_channel(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    fake.fail_next("setMyCommands", 400)  # Telegram refused it: asking again would be refused again
    await make_channel()
    fake.push_text(1001, 1001, "still listening", username="alice", first_name="Alice")
    assert (await next_inbound(bus)).text == "still listening"
    await asyncio.sleep(0.5)  # FAST's backoff: a retry would have come
    assert [c.status for c in fake.calls if c.method == "setmycommands"] == [400]  # the rest not tried


async def test_a_command_menu_cut_by_a_server_error_is_set_later_without_holding_the_messages(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    # A first start with Feishu too: importing lark-oapi held the loop past
    # the menu's 10 s, and the "/" menu stayed unset until the next restart.
    fake.fail_next("setMyCommands", 500, times=2)
    await make_channel()
    fake.push_text(1001, 1001, "still listening", username="alice", first_name="Alice")
    assert (await next_inbound(bus)).text == "still listening"
    await fake.wait_until(lambda: [c.status for c in fake.calls if c.method == "setmycommands"] == [500, 500, 200, 200, 200, 200], 5)


# -- receiving ----------------------------------------------------------------------------


async def test_private_message_becomes_inbound(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel()
    sent = fake.push_text(1001, 1001, "hello there", username="alice", first_name="Alice")
    msg = await next_inbound(bus)
    assert msg.channel == "telegram"
    assert msg.chat_id == "1001"
    assert msg.sender_id == "1001"
    assert msg.sender_name == "Alice"
    assert msg.text == "hello there"
    assert msg.message_id == str(sent["message_id"])
    assert msg.timestamp.tzinfo is not None and abs(msg.timestamp.timestamp() - time.time()) < 60
    assert (msg.is_group, msg.mentioned, msg.reply_to_bot) == (False, False, False)
    assert msg.metadata["username"] == "alice"


async def test_group_flags_and_mention_stripping(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await make_channel()
    group = -100123

    fake.push_text(group, 7, "just chatting", chat_type="supergroup")
    plain = await next_inbound(bus)
    assert plain.is_group and not plain.mentioned and not plain.reply_to_bot
    assert plain.chat_id == str(group) and plain.sender_id == "7"

    fake.push_text(group, 7, "what is the time?", chat_type="supergroup", mention=True)
    mentioned = await next_inbound(bus)
    assert mentioned.mentioned
    assert mentioned.text == "what is the time?"

    fake.push_text(group, 7, "hey @MyClaw_Bot, again", chat_type="supergroup")
    mid = await next_inbound(bus)
    assert mid.mentioned and mid.text == "hey again"

    fake.push_text(group, 7, "/new@myclaw_bot", chat_type="supergroup")
    command = await next_inbound(bus)
    assert command.mentioned and command.text == "/new"

    fake.push_text(group, 7, "ask @someone_else", chat_type="supergroup")
    other = await next_inbound(bus)
    assert not other.mentioned and other.text == "ask @someone_else"

    await within(ch.send(OutboundMessage("telegram", str(group), "a bot answer")))
    fake.push_text(group, 7, "thanks!", chat_type="supergroup", reply_to_bot=True)
    reply = await next_inbound(bus)
    assert reply.reply_to_bot and not reply.mentioned and reply.text == "thanks!"


async def test_a_chat_of_a_type_we_never_expect_is_taken_as_shared_not_private(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Only a private chat is one person's (their memories, /memory, /export
    answer there): a message from any other kind of chat (a channel's, or a
    type a later Bot API adds) is handled as a group's, failing closed."""
    await make_channel()
    fake.push_text(-100777, 7, "my pin is 4411", chat_type="channel")
    msg = await next_inbound(bus)
    assert msg.is_group
    fake.push_text(1001, 1001, "hello there")
    assert not (await next_inbound(bus)).is_group


async def test_a_bare_command_of_the_bots_own_is_addressed_to_it_in_a_group(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A Telegram client sends a command picked from the group's "/" menu
    without @bot when the group has no other bot, and privacy mode passes
    every "/" message on: the bot's own commands are then addressed to it
    (they went unanswered). Another bot's, a word after a slash, a command
    with words the model would read, or a photo's caption stay unaddressed."""
    await make_channel()
    group = -100321
    for text in ("/help", "/new", "/share", "/unshare m12", "/memory", "/帮助", "/help@myclaw_bot"):
        fake.push_text(group, 7, text, chat_type="supergroup")
        msg = await next_inbound(bus)
        assert msg.mentioned, text
    for text in ("/help@other_bot", "/shrug", "/help me with this", "see /help", "/helpme"):
        fake.push_text(group, 7, text, chat_type="supergroup")
        msg = await next_inbound(bus)
        assert not msg.mentioned and msg.text == text, text
    fake.push_text(7, 7, "/help")  # a private chat: never "mentioned", as before
    assert not (await next_inbound(bus)).mentioned


async def test_allow_list_by_id_and_username(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    with capture_logs() as logs:
        await make_channel(allow_from=["42", "@Alice"])
        fake.push_text(99, 99, "let me in", username="mallory")
        fake.push_text(42, 42, "by id")
        fake.push_text(55, 55, "by username", username="alice")
        first = await next_inbound(bus)
        second = await next_inbound(bus)
    # Updates are handled in order: the stranger's came first and was dropped.
    assert [first.text, second.text] == ["by id", "by username"]
    assert bus.inbound.empty()
    assert any("dropped" in e["event"] and e.get("sender_id") == "99" for e in logs)
    assert fake.sent == []  # the stranger gets nothing


async def test_an_edit_arrives_as_an_edit_of_the_same_message(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """getUpdates asks for edited messages too; an edit names the message it
    changes and carries the new text, mention stripped as for a new one."""
    await make_channel()
    sent = fake.push_text(1001, 1001, "my birthday is 3 May", username="alice")
    first = await next_inbound(bus)
    assert first.kind == MESSAGE
    fake.push_edit(1001, sent["message_id"], "my birthday is 4 May")
    edit = await next_inbound(bus)
    assert (edit.kind, edit.message_id, edit.sender_id) == (EDIT, first.message_id, "1001")
    assert edit.text == "my birthday is 4 May"
    assert any(c.method == "getupdates" and "edited_message" in c.params.get("allowed_updates", []) for c in fake.calls)

    group = -100555
    sent = fake.push_text(group, 7, "deploy to ams", chat_type="supergroup", mention=True)
    assert (await next_inbound(bus)).mentioned
    fake.push_edit(group, sent["message_id"], "deploy to fra", mention=True)
    edit = await next_inbound(bus)
    assert (edit.kind, edit.is_group, edit.mentioned, edit.text) == (EDIT, True, True, "deploy to fra")
    assert fake.sent == []  # an edit is not answered by the channel


async def test_a_reply_to_a_message_of_another_chat_brings_its_author_and_quote(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Telegram sends such a reply as ``external_reply``: who wrote the
    source message and its media, never its text; the words are the
    part the user quoted, a media message is named by a stand-in."""
    await make_channel()
    post = "Release 2.0 ships on Friday; the beta closes Wednesday."
    fake.push_external_reply(7, 7, "should we wait for this?", origin=origin_channel(-1001, "Acme News", 88),
                             original=post, quote="ships on Friday",
                             source_chat={"id": -1001, "type": "channel", "title": "Acme News"}, source_message_id=88)
    assert (await next_inbound(bus)).quoted == Quoted(author="Acme News", text="ships on Friday", partial=True)
    fake.push_external_reply(7, 7, "nice?", origin=origin_channel(-1001, "Acme News", 89, signature="Dana"),
                             media="photo")
    assert (await next_inbound(bus)).quoted == Quoted(author="Dana (Acme News)", text="[photo]")
    fake.push_external_reply(7, 7, "and you?", origin=origin_user(5, "Carol", "Lee"), original="lunch at 12?",
                             quote="lunch", source_chat={"id": -200, "type": "supergroup", "title": "Team"})
    assert (await next_inbound(bus)).quoted == Quoted(author="Carol Lee in Team", text="lunch", partial=True)
    fake.push_external_reply(7, 7, "vote?", origin=origin_hidden_user("Mallory"), media="poll")
    assert (await next_inbound(bus)).quoted == Quoted(author="Mallory", text="[poll] Lunch at noon?")
    fake.push_external_reply(7, 7, "what?", origin=origin_chat(-300, "Ops", signature="admin"), media="video",
                             original="deploy log", quote="log")
    assert (await next_inbound(bus)).quoted == Quoted(author="admin (Ops)", text="[video] log", partial=True)
    fake.push_external_reply(7, 7, "yours?", origin=origin_user(fake.bot_id, "myclaw"), original="hi", quote="hi")
    assert (await next_inbound(bus)).quoted == Quoted(author="you", text="hi", partial=True)
    # A text message of another chat without a quote: Telegram sends no words to show.
    fake.push_external_reply(7, 7, "hm", origin=origin_user(5, "Carol"))
    msg = await next_inbound(bus)
    assert (msg.text, msg.quoted) == ("hm", None)


async def test_an_edit_respects_the_allow_list(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(allow_from=["42"])
    stranger = fake.push_text(99, 99, "let me in")
    fake.push_edit(99, stranger["message_id"], "let me in, please")
    fake.push_text(42, 42, "by id")
    assert (await next_inbound(bus)).text == "by id"
    assert bus.inbound.empty()


async def test_stop_confirms_offset_so_restart_does_not_redeliver(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await make_channel()
    for i in range(3):
        fake.push_text(1, 1, f"m{i}")
    assert [(await next_inbound(bus)).text for _ in range(3)] == ["m0", "m1", "m2"]
    await within(ch.stop())
    await within(ch.stop())  # safe twice
    assert fake.pending_updates == 0

    await make_channel()
    fake.push_text(1, 1, "after restart")
    assert (await next_inbound(bus)).text == "after restart"


async def test_a_stop_confirms_the_offset_only_within_the_time_it_is_given(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The gateway's stop hands the channel what is left of its deadline
    (App.close): a confirmation Telegram does not answer is cut there, not
    after the channel's own 5 s (what it would confirm comes again after a
    restart, and the loop ignores what it answered)."""
    ch = await make_channel()
    fake.push_text(1, 1, "taken")
    assert (await next_inbound(bus)).text == "taken"
    await within(ch.stop_receiving())
    fake.cut_next("getUpdates")  # the confirmation: never answered
    with capture_logs() as logs:
        await within(ch.stop(timeout=0.2), 2.0)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "could not confirm handled Telegram updates; they may be delivered again"]


# -- sending ------------------------------------------------------------------------------


async def test_reply_in_a_forum_topic_goes_back_to_that_topic(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True)
    fake.push_text(-100777, 5, "@bot status?", chat_type="supergroup", mention=True, message_thread_id=42, topic=True)
    msg = await next_inbound(bus)
    assert msg.metadata.get("message_thread_id") == 42
    await bus.publish_outbound(
        OutboundMessage("telegram", msg.chat_id, "all good", reply_to=msg.message_id, metadata=dict(msg.metadata))
    )
    [sent] = await fake.wait_sent(1)
    assert (sent.chat_id, sent.text, sent.message_thread_id) == (-100777, "all good", 42)
    assert sent.reply_to == int(msg.message_id)


async def test_reply_on_outbound_queue_reaches_same_chat(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(sender=True)
    fake.push_text(2002, 2002, "ping")
    msg = await next_inbound(bus)
    await bus.publish_outbound(OutboundMessage("telegram", msg.chat_id, "pong", reply_to=msg.message_id))
    [sent] = await fake.wait_sent(1)
    assert sent.chat_id == 2002
    assert sent.text == "pong"
    assert sent.reply_to == int(msg.message_id)
    assert sent.parse_mode is None  # plain text: LLM output is not valid MarkdownV2


async def test_long_reply_is_split_in_order(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await make_channel()
    fake.push_text(3003, 3003, "tell me a story")
    await next_inbound(bus)
    paragraphs = [" ".join(f"p{p}w{w}" for w in range(150)) for p in range(10)]
    text = "\n\n".join(paragraphs)[:9000]
    assert len(text) == 9000
    await within(ch.send(OutboundMessage("telegram", "3003", text)))
    sent = fake.sent
    assert len(sent) == 3
    assert all(utf16_len(m.text) <= 4096 for m in sent)
    assert " ".join(m.text for m in sent).split() == text.split()
    assert sent[0].text.endswith(paragraphs[3])  # split at a paragraph boundary


async def test_typing_indicator(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await make_channel()
    await within(ch.send_typing("4004"))
    [call] = [c for c in fake.calls if c.method == "sendchataction"]
    assert (call.params["chat_id"], call.params["action"]) == ("4004", "typing")
    fake.fail_next("sendChatAction", 500)
    await within(ch.send_typing("4004"))  # best effort: no exception


async def test_send_waits_out_429(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await make_channel()
    fake.push_text(4004, 4004, "hi")
    await next_inbound(bus)
    fake.fail_next("sendMessage", 429, retry_after=1)
    started = time.monotonic()
    await asyncio.wait_for(ch.send(OutboundMessage("telegram", "4004", "after the flood")), 10)
    assert time.monotonic() - started >= 0.9
    assert fake.texts() == ["after the flood"]
    assert [c.status for c in fake.calls if c.method == "sendmessage"] == [429, 200]


async def test_send_retries_through_a_short_outage(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    ch = await make_channel(send_attempts=30)
    fake.push_text(5005, 5005, "hi")
    await next_inbound(bus)
    await fake.go_offline()
    sending = asyncio.create_task(ch.send(OutboundMessage("telegram", "5005", "eventually")))
    await asyncio.sleep(0.8)
    assert not sending.done()
    await fake.go_online()
    await asyncio.wait_for(sending, 10)
    assert fake.texts() == ["eventually"]


async def test_unsendable_reply_is_logged(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    with capture_logs() as logs:
        await make_channel(sender=True, send_attempts=2)
        fake.push_text(6006, 6006, "hi")
        await next_inbound(bus)
        fake.fail_next("sendMessage", 500, times=2)
        await bus.publish_outbound(OutboundMessage("telegram", "6006", "lost?"))
        await bus.publish_outbound(OutboundMessage("telegram", "6006", "next one"))
        await fake.wait_until(lambda: any(c.method == "sendmessage" and c.status == 200 for c in fake.calls), 5)
    failures = [e for e in logs if e["event"] == "send failed"]
    assert len(failures) == 1 and failures[0]["error"] == "channels.telegram.TelegramSendError"
    assert failures[0]["chat_id"] == "6006" and "chat 6006" in failures[0]["said"]  # its text: written for the log
    assert fake.texts() == ["next one"]


# -- resilience -----------------------------------------------------------------------------


async def test_polling_survives_429_and_500(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel()
    fake.fail_next("getUpdates", 500, times=2)
    fake.fail_next("getUpdates", 429, retry_after=1)
    await fake.wait_until(lambda: sum(c.status != 200 for c in fake.calls if c.method == "getupdates") == 3, 10)
    fake.push_text(7007, 7007, "still there?")
    msg = await next_inbound(bus, timeout=10)
    assert msg.text == "still there?"


async def test_polling_survives_network_loss(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel()
    fake.push_text(8008, 8008, "before")
    assert (await next_inbound(bus)).text == "before"
    await fake.go_offline()
    fake.push_text(8008, 8008, "during")  # Telegram keeps it until we are back
    await asyncio.sleep(2)
    await fake.go_online()
    assert (await next_inbound(bus, timeout=10)).text == "during"
    fake.push_text(8008, 8008, "after")
    assert (await next_inbound(bus, timeout=10)).text == "after"


async def test_another_instance_polling_is_named_and_neither_crashes(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Two gateways on one token: Telegram answers the older long poll with
    409 Conflict. Each says so as an error, keeps trying with backoff, and
    once the other is gone reads on."""
    with capture_logs() as logs:
        first = await make_channel()
        second = await make_channel()
        await fake.wait_until(lambda: any(c.status == 409 for c in fake.calls if c.method == "getupdates"), 10)
        await within(second.stop())
        fake.push_text(7007, 7007, "who reads this?")
        assert (await next_inbound(bus, timeout=10)).text == "who reads this?"
    assert first.failure is None and second.failure is None
    conflicts = [e for e in logs if "conflict" in e["event"]]
    assert conflicts and all(e["log_level"] == "error" and "another bot instance" in e["event"] for e in conflicts)


@pytest.mark.parametrize(
    ("token", "message"),
    [("123456789:wrong-token-abcdefghijklmnop", INVALID_TOKEN_MESSAGE), ("not-a-token", NOT_FOUND_MESSAGE)],
)
async def test_invalid_token_fails_start(fake: FakeTelegram, make_channel: Any, token: str, message: str) -> None:
    ch = await make_channel(token=token, start=False)
    with pytest.raises(ChannelFatalError) as err:
        await asyncio.wait_for(ch.start(), 30)
    assert fake.refused == ["getme"]  # fatal at once: not asked again
    assert str(err.value) == message
    assert token not in str(err.value) and err.value.__cause__ is None and err.value.__suppress_context__
    await within(ch.stop())


async def test_empty_token_fails_start(fake: FakeTelegram, bus: MessageBus) -> None:
    cfg = TelegramConfig(enabled=True, base_url=fake.base_url)
    with pytest.raises(ChannelFatalError, match="token is empty"):
        await TelegramChannel(cfg, bus).start()


async def test_token_revoked_while_running_is_surfaced(fake: FakeTelegram, make_channel: Any) -> None:
    ch = await make_channel()
    assert ch.failure is None
    fake.revoke_token()
    failure = await asyncio.wait_for(ch.wait_failed(), 10)
    assert str(failure) == INVALID_TOKEN_MESSAGE
    assert ch.failure is failure


async def test_unreachable_at_boot_keeps_trying(bus: MessageBus) -> None:
    fake = await FakeTelegram().start()
    try:
        await fake.go_offline()
        ch = TelegramChannel(config_for(fake), bus, backoff=FAST, startup_wait=0.3)
        await asyncio.wait_for(ch.start(), 5)  # returns: does not hold up the gateway
        await fake.go_online()
        fake.push_text(9009, 9009, "late but here")
        assert (await next_inbound(bus, timeout=10)).text == "late but here"
        await within(ch.stop())
    finally:
        await fake.stop()


# -- secrets ------------------------------------------------------------------------------------


@pytest.fixture
def debug_log_stream() -> Iterator[io.StringIO]:
    """The gateway's logging pipeline at DEBUG, libraries included; restored after."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    libs = ("httpx", "httpcore", "telegram", "telegram.ext")
    saved_libs = {n: logging.getLogger(n).level for n in libs}
    stream = io.StringIO()
    configure_logging(level="DEBUG", stream=stream, json_output=True)
    for name in libs:
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield stream
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved_handlers:
        root.addHandler(h)
    root.setLevel(saved_level)
    for name, level in saved_libs.items():
        logging.getLogger(name).setLevel(level)
    structlog.reset_defaults()


async def test_token_never_logged(fake: FakeTelegram, bus: MessageBus, debug_log_stream: io.StringIO) -> None:
    # Raw events, before any redaction: our own log calls must not carry it.
    with capture_logs() as events:
        bad = TelegramChannel(config_for(fake, token="123456789:rejected-token-abcdefghijk"), bus, backoff=FAST)
        with pytest.raises(ChannelFatalError):
            await within(bad.start())
    assert "rejected-token" not in repr(events)

    # The whole pipeline, libraries at DEBUG: errors, retries, a revocation.
    ch = TelegramChannel(config_for(fake), bus, backoff=FAST)
    await asyncio.wait_for(ch.start(), 10)
    fake.fail_next("getUpdates", 500)
    fake.push_text(1, 1, "hi")
    await next_inbound(bus)
    fake.fail_next("sendMessage", 502)
    await within(ch.send(OutboundMessage("telegram", "1", "reply")))
    fake.revoke_token()
    await asyncio.wait_for(ch.wait_failed(), 10)
    await within(ch.stop())
    output = debug_log_stream.getvalue()
    assert "getUpdates" in output or "getupdates" in output.lower()  # the libraries did log
    secret_part = fake.token.split(":", 1)[1]
    assert secret_part not in output


# -- splitting ------------------------------------------------------------------------------------


def test_split_prefers_paragraphs_then_lines_then_words() -> None:
    a, b, c = "a" * 40, "b" * 10, "c" * 30
    assert split_message(f"{a}\n\n{b}\n{b} {c}", 70) == [a, f"{b}\n{b} {c}"]
    assert split_message(f"{a}\n{b} {c}", 70) == [a, f"{b} {c}"]
    assert split_message(f"{a} {a}", 70) == [a, a]
    # A boundary early in the window would waste a part; cut later instead.
    assert split_message(f"{b}\n\n{a} {c}", 70) == [f"{b}\n\n{a}", c]
    assert split_message("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert split_message("short") == ["short"]
    assert split_message("   ") == []


def test_split_counts_utf16_and_keeps_surrogate_pairs_whole() -> None:
    text = "😀" * 5000  # 2 UTF-16 units each
    parts = split_message(text)
    assert all(utf16_len(p) <= 4096 for p in parts)
    assert "".join(parts) == text
    assert len(parts) == 3


async def test_a_photo_sticker_or_voice_gets_a_note_not_silence(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Where a text would be answered (private chat, or a group message
    replying to the bot), a message without text gets a short note; it never
    reaches the loop, and a group's stickers not addressed to the bot stay
    unanswered. (A sticker with an emoji is read as words:
    test_telegram_forwards.py.)"""
    await make_channel(sender=True, allow_from=["7", "8"])
    kinds = ("photo", "sticker", "voice", "video", "video_note", "animation", "audio")
    for kind in kinds:
        fake.push_media(7, 7, kind, content=sticker(None) if kind == "sticker" else None)
    sent = await fake.wait_sent(len(kinds))
    assert [(m.chat_id, m.text) for m in sent] == [(7, UNREADABLE_REPLY)] * len(kinds)
    fake.push_media(-300, 8, "sticker", content=sticker(None), chat_type="group")  # not addressed to the bot
    fake.push_media(9, 9, "photo")  # not in allowFrom
    fake.push_media(-300, 8, "sticker", content=sticker(None), chat_type="group", reply_to_bot=True)
    [*_, last] = await fake.wait_sent(len(kinds) + 1)
    assert (last.chat_id, last.text) == (-300, UNREADABLE_REPLY) and last.reply_to is not None
    fake.push_text(7, 7, "and a text")
    assert (await next_inbound(bus)).text == "and a text"  # nothing else came through the bus
    assert bus.inbound.empty() and len(fake.sent) == len(kinds) + 1


async def test_a_failed_send_says_whether_to_retry_and_what_is_left(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await make_channel(send_attempts=1)
    fake.push_text(7007, 7007, "hi")
    await next_inbound(bus)
    fake.fail_next("sendMessage", 403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(TelegramSendError) as refused:
        await within(ch.send(OutboundMessage("telegram", "7007", "blocked")))
    assert refused.value.retryable is False and refused.value.remaining is None
    with pytest.raises(TelegramSendError) as unknown_chat:
        await within(ch.send(OutboundMessage("telegram", "999", "nobody here")))  # 400 chat not found
    assert unknown_chat.value.retryable is False
    text = "\n\n".join(" ".join(f"p{p}w{w}" for w in range(150)) for p in range(10))[:9000]
    parts = split_message(text)
    fake.fail_next("sendMessage", 502, after=1)
    with pytest.raises(TelegramSendError) as outage:
        await within(ch.send(OutboundMessage("telegram", "7007", text)))
    assert outage.value.retryable is True and "p0w0" not in str(outage.value)
    assert fake.texts() == parts[:1] and outage.value.remaining == text[text.index(parts[1]):]
    await ch.stop()
    with pytest.raises(TelegramSendError) as stopped:
        await within(ch.send(OutboundMessage("telegram", "7007", "after stop")))
    assert stopped.value.retryable is True


async def test_a_group_upgraded_to_a_supergroup_is_told_once_as_a_move_and_replies_follow(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Telegram gives the supergroup a new id: the gateway is told the chat
    moved (so its history follows), with no words to answer; a reply still
    addressed to the old id goes to the new one."""
    ch = await make_channel()
    before = fake.push_text(-500, 7, "before the upgrade", chat_type="group")
    assert (await next_inbound(bus)).chat_id == "-500"
    fake.migrate_group(-500, -100500, 7)
    fake.push_text(-100500, 7, "after the upgrade", chat_type="supergroup")
    moved = await next_inbound(bus)
    assert moved.kind == MOVED and moved.chat_id == "-100500" and moved.metadata["moved_from"] == "-500"
    assert moved.text == "" and not moved.mentioned
    after = await next_inbound(bus)  # the old group's own notice is the same move: not told twice
    assert after.kind == MESSAGE and after.text == "after the upgrade" and after.chat_id == "-100500"
    # Answering the old group's message: the supergroup numbers its own
    # messages, where that id is another one (here its first), so the reply
    # quotes nothing rather than the wrong message.
    await within(ch.send(OutboundMessage("telegram", "-500", "late answer", reply_to=str(before["message_id"]))))
    assert [(m.chat_id, m.text, m.reply_to) for m in fake.sent] == [(-100500, "late answer", None)]


async def test_in_the_supergroup_a_reply_to_the_bot_s_answer_from_before_the_upgrade_is_answered(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The supergroup shows the old group's messages above its own; a reply
    to the bot's answer there comes as a reply to another chat's message
    (``external_reply``, the old group): it is addressed to the bot as a
    reply in the chat would be. Another's message quoted so is not."""
    await make_channel()
    fake.push_text(-500, 7, "before the upgrade", chat_type="group")
    await next_inbound(bus)
    fake.migrate_group(-500, -100500, 7)
    assert (await next_inbound(bus)).kind == MOVED
    old_group = {"id": -500, "type": "group", "title": "Group -500"}
    by_bot = {"type": "user", "date": int(time.time()) - 60, "sender_user": fake.bot_user}
    fake.push_external_reply(-100500, 7, "and why?", origin=by_bot, original="Launch is on Friday.",
                             quote="Friday", source_chat=old_group, source_message_id=2, chat_type="supergroup")
    asked = await next_inbound(bus)
    assert asked.reply_to_bot and asked.quoted is not None and asked.quoted.author == "you"
    fake.push_external_reply(-100500, 7, "agreed", origin=origin_user(8, "Bob"), original="lunch at 12?",
                             source_chat=old_group, source_message_id=3, chat_type="supergroup")
    assert not (await next_inbound(bus)).reply_to_bot


# -- files (/export) ------------------------------------------------------------------------


async def test_a_reply_with_a_file_is_sent_as_a_document_with_its_caption(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await make_channel()
    fake.push_text(8008, 8008, "/export")
    msg = await next_inbound(bus)
    data = "# myclaw 记忆导出\n\n- [m1] 我喜欢喝燕麦拿铁\n".encode()
    file = Attachment("myclaw-memory-2026-11-22.md", data)
    await within(ch.send(OutboundMessage.answering(msg, "Everything I keep about you", file)))
    [doc] = fake.documents
    assert (doc.chat_id, doc.filename, doc.data, doc.caption) == (
        8008, "myclaw-memory-2026-11-22.md", data, "Everything I keep about you"
    )
    assert doc.mime_type.startswith("text/") and fake.sent == []  # one document, no separate text
    # The multipart upload PTB sent was parsed for real, and the answer read back as a Message.
    [call] = [c for c in fake.calls if c.method == "senddocument"]
    assert call.status == 200 and isinstance(call.params["document"], Upload)
    assert "燕麦" not in repr(file) and "燕麦" not in repr(OutboundMessage("telegram", "1", "x", attachment=file))


async def test_a_document_telegram_refuses_or_cannot_take_says_whether_to_retry(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    ch = await make_channel(send_attempts=2)
    fake.push_text(9009, 9009, "/export")
    await next_inbound(bus)
    file = Attachment("myclaw-memory-2026-11-22.md", b"secret words")
    fake.fail_next("sendDocument", 403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(TelegramSendError) as refused:
        await within(ch.send(OutboundMessage("telegram", "9009", "your file", attachment=file)))
    assert refused.value.retryable is False and "secret words" not in str(refused.value)
    fake.fail_next("sendDocument", 502, times=2)
    with pytest.raises(TelegramSendError) as outage:
        await within(ch.send(OutboundMessage("telegram", "9009", "your file", attachment=file)))
    assert outage.value.retryable is True and fake.documents == []
    fake.fail_next("sendDocument", 502)
    await within(ch.send(OutboundMessage("telegram", "9009", "your file", attachment=file)))
    assert [d.data for d in fake.documents] == [b"secret words"]


# -- pictures, with agent.vision (max_image_bytes) ---------------------------------------
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"


def jpeg(size: int, fill: int = 1) -> bytes:
    return JPEG_HEAD + bytes([fill]) * (size - len(JPEG_HEAD))


async def test_a_photo_goes_on_with_its_largest_size_within_the_limit_and_its_caption(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """getFile, then the file from /file/bot<token>/<path>, through PTB: the
    largest of Telegram's sizes that fits the limit, with the caption."""
    await make_channel(max_image_bytes=5000)
    small, large, huge = jpeg(300, 1), jpeg(4000, 2), jpeg(9000, 3)
    fake.push_photo(7, 7, [small, large, huge], caption="what is the wifi password?")
    msg = await next_inbound(bus)
    assert (msg.text, msg.placeholder, msg.history_text) == (
        "what is the wifi password?", "[photo]", "[photo] what is the wifi password?")
    [image] = msg.images
    assert (image.mime, image.data) == ("image/jpeg", large)
    assert [c.method for c in fake.calls if c.method == "getfile"] == ["getfile"]
    assert len(fake.file_downloads) == 1 and fake.file_downloads[0].startswith("photos/")
    assert "4000" not in repr(msg) and JPEG_HEAD.hex() not in repr(msg)

    fake.push_photo(7, 7, [small])  # no caption: the picture alone goes on
    alone = await next_inbound(bus)
    assert (alone.text, alone.history_text, [i.data for i in alone.images]) == ("", "[photo]", [small])


async def test_image_documents_are_read_other_files_are_not(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_image_bytes=5000)
    png = b"\x89PNG\r\n\x1a\n" + bytes(500)
    fake.push_document(7, 7, png, mime_type="image/png", file_name="receipt.png", caption="total?")
    msg = await next_inbound(bus)
    assert (msg.text, [(i.mime, i.data) for i in msg.images]) == ("total?", [("image/png", png)])
    fake.push_document(7, 7, b"%PDF-1.7", mime_type="application/pdf", file_name="a.pdf")
    fake.push_document(7, 7, b"\x00\x00\x00\x18ftypheic", mime_type="image/heic", file_name="b.heic")
    # a PNG that claims to be one but is not: read from the bytes, refused
    fake.push_document(7, 7, b"not a picture", mime_type="image/png", file_name="c.png")
    sent = await fake.wait_sent(3)
    assert sent[0].text == UNREADABLE_REPLY  # a PDF: as before
    assert "only read JPEG, PNG, GIF and WebP" in sent[1].text and "only read JPEG" in sent[2].text
    assert len(fake.file_downloads) == 2  # the HEIC is refused by its type, unfetched
    fake.push_text(7, 7, "after")
    assert (await next_inbound(bus)).text == "after" and bus.inbound.empty()


async def test_a_photo_too_large_or_not_downloaded_gets_a_note_and_its_caption_goes_on(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_image_bytes=2048)
    fake.push_photo(7, 7, [jpeg(3000), jpeg(9000)], caption="read this receipt")
    [note] = await fake.wait_sent(1)
    assert "too large" in note.text and "2 KB" in note.text and "answering your text without it" in note.text
    msg = await next_inbound(bus)
    assert (msg.text, msg.images, msg.history_text) == ("read this receipt", (), "[photo not read] read this receipt")
    assert fake.file_downloads == []  # nothing over the limit is fetched

    fake.fail_next("getFile", 400, description="Bad Request: invalid file_id")
    fake.push_photo(7, 7, [jpeg(1000)])  # no caption: only the note
    [_, failed] = await fake.wait_sent(2)
    assert "could not download that picture" in failed.text
    # a size Telegram did not state is fetched, then measured
    fake.push_photo(7, 7, [jpeg(4000)], caption="and this?", file_size_known=False)
    [*_, late] = await fake.wait_sent(3)
    assert "too large" in late.text
    assert (await next_inbound(bus)).history_text == "[photo not read] and this?" and bus.inbound.empty()


async def test_a_photo_note_is_in_chinese_for_chinese_words_or_a_chinese_client_without_words(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The caption's language first; no caption: the sender's client's
    (``language_code``); neither: English, as before."""
    await make_channel(sender=True, max_image_bytes=2048)
    fake.push_photo(7, 7, [jpeg(3000)], caption="这张收据多少钱？")
    [note] = await fake.wait_sent(1)
    assert note.text == "这张图片太大了，我读不了（上限 2 KB）。请发小一点的图片或截图。我先根据你的文字回复。"
    assert (await next_inbound(bus)).history_text == "[photo not read] 这张收据多少钱？"

    fake.user_languages[8] = "zh-hans"
    fake.push_photo(8, 8, [jpeg(3000)])
    fake.push_photo(8, 8, [jpeg(3000)], caption="and this one?")  # English words win over the client
    fake.push_photo(9, 9, [jpeg(3000)])  # no words, no language: English
    await fake.wait_sent(4)
    [quiet, english], [unknown] = fake.texts(8), fake.texts(9)  # one chat's notes in order
    assert quiet == "这张图片太大了，我读不了（上限 2 KB）。请发小一点的图片或截图。"
    assert english.startswith("That picture is too large") and english.endswith("your text without it.")
    assert unknown.startswith("That picture is too large") and "answering" not in unknown
    assert (await next_inbound(bus)).text == "and this one?" and bus.inbound.empty()


async def test_group_photos_are_fetched_only_when_addressed_to_the_bot(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(max_image_bytes=5000, allow_from=["7", "8"])
    fake.push_photo(-300, 8, [jpeg(500)], chat_type="group")  # no caption, no mention
    fake.push_photo(-300, 8, [jpeg(500)], caption="look at this", chat_type="group")  # words, no mention
    fake.push_photo(9, 9, [jpeg(500)], caption="hi")  # not in allowFrom
    fake.push_photo(-300, 8, [jpeg(600, 5)], caption="what does it say?", chat_type="group", mention=True)
    unaddressed = await next_inbound(bus)
    assert (unaddressed.text, unaddressed.images, unaddressed.mentioned) == ("look at this", (), False)
    asked = await next_inbound(bus)
    assert (asked.text, asked.mentioned, [i.data for i in asked.images]) == ("what does it say?", True, [jpeg(600, 5)])
    assert len(fake.file_downloads) == 1 and bus.inbound.empty()


async def test_an_edited_caption_keeps_its_photo_mark(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(max_image_bytes=5000)
    sent = fake.push_photo(7, 7, [jpeg(500)], caption="teh wifi")
    await next_inbound(bus)
    fake.push_edit(7, sent["message_id"], "the wifi")
    msg = await next_inbound(bus)
    assert (msg.kind, msg.history_text, msg.images) == (EDIT, "[photo] the wifi", ())
    assert len(fake.file_downloads) == 1  # an edit fetches nothing


async def test_without_vision_a_photo_is_not_fetched(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(sender=True)
    fake.push_photo(7, 7, [jpeg(500)])
    fake.push_photo(7, 7, [jpeg(500)], caption="a caption")
    assert [m.text for m in await fake.wait_sent(1)] == [UNREADABLE_REPLY]
    msg = await next_inbound(bus)
    assert (msg.history_text, msg.images) == ("a caption", ())  # as before vision
    assert fake.file_downloads == [] and not any(c.method == "getfile" for c in fake.calls)


async def test_a_voice_message_is_fetched_for_transcription(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    await make_channel(sender=True, max_audio_bytes=2048)
    recording = b"OggS" + bytes(1000)
    fake.push_voice(7, 7, recording)
    msg = await next_inbound(bus)
    assert msg.audio is not None and (msg.audio.data, msg.audio.mime, msg.audio.filename) == (
        recording, "audio/ogg", "voice.ogg")
    assert (msg.text, msg.history_text, msg.images) == ("", "[voice]", ())
    assert recording.hex() not in repr(msg)
    fake.push_voice(7, 7, b"OggS" + bytes(5000))  # over the limit: a note, nothing fetched
    [note] = await fake.wait_sent(1)
    assert "voice message is too large" in note.text and "type it" in note.text
    assert len(fake.file_downloads) == 1 and bus.inbound.empty()


# -- intake lanes: a download holds up only its own chat ------------------------------------


def photo_file(message: dict[str, Any]) -> str:
    """The file id of a pushed photo's largest size (the one fetched)."""
    return str(message["photo"][-1]["file_id"])


async def test_a_slow_download_holds_up_only_its_own_chat(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Chat B's text reaches the bus while chat A's photo is still being
    downloaded; A's later text waits behind its photo. Until the photo is on
    the bus, Telegram is not told of it, nor of what came after it."""
    await make_channel(max_image_bytes=5000, hold_poll=0.05)
    picture = jpeg(500, 4)
    photo = fake.push_photo(7, 7, [picture], caption="what is this?")
    gate = fake.hold_file(photo_file(photo))
    await fake.wait_until(lambda: len(fake.file_requests) == 1)
    fake.push_text(8, 8, "from B")
    fake.push_text(7, 7, "A, later")
    assert (await next_inbound(bus)).text == "from B"
    assert bus.inbound.empty()  # A's text did not overtake A's photo
    assert fake.pending_updates == 3  # the photo and everything after it

    gate.set()
    first = await next_inbound(bus)
    assert (first.chat_id, first.text, [i.data for i in first.images]) == ("7", "what is this?", [picture])
    assert (await next_inbound(bus)).text == "A, later"
    await fake.wait_until(lambda: fake.pending_updates == 0)  # all confirmed once on the bus


async def test_a_chat_with_a_pending_voice_message_keeps_its_order(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(max_audio_bytes=5000, hold_poll=0.05)
    voice = fake.push_voice(7, 7, b"OggS" + bytes(100))
    gate = fake.hold_file(str(voice["voice"]["file_id"]))
    await fake.wait_until(lambda: len(fake.file_requests) == 1)
    sent = fake.push_text(7, 7, "my birthday is 3 May")
    fake.push_edit(7, sent["message_id"], "my birthday is 4 May")
    fake.push_text(8, 8, "from B")
    assert (await next_inbound(bus)).text == "from B"
    gate.set()
    got = [await next_inbound(bus) for _ in range(3)]
    assert [(m.kind, m.history_text) for m in got] == [
        (MESSAGE, "[voice]"), (MESSAGE, "my birthday is 3 May"), (EDIT, "my birthday is 4 May")]


async def test_a_full_batch_behind_a_pending_download_is_confirmed_rather_than_stall(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """getUpdates returns at most 100 updates from the offset: when all are
    taken already, holding the offset at the pending photo would hide every
    new message, so polling confirms them (the photo too, still pending)."""
    await make_channel(max_image_bytes=5000, hold_poll=0.05)
    gate = fake.hold_file(photo_file(fake.push_photo(7, 7, [jpeg(500)])))
    await fake.wait_until(lambda: len(fake.file_requests) == 1)
    for i in range(120):
        fake.push_text(8, 8, f"t{i}")
    assert [(await next_inbound(bus)).text for _ in range(120)] == [f"t{i}" for i in range(120)]
    assert fake.pending_updates == 21  # the first 100, the photo's among them, confirmed
    gate.set()
    assert len((await next_inbound(bus)).images) == 1  # still read, and on the bus
    await fake.wait_until(lambda: fake.pending_updates == 0)


async def test_stop_during_a_pending_download_still_publishes_it(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """stop_receiving stops polling, then waits for the download: once it
    returns the message is on the bus, and stop confirms it, so a restart
    does not deliver it again."""
    ch = await make_channel(max_image_bytes=5000, hold_poll=0.05)
    picture = jpeg(500, 6)
    gate = fake.hold_file(photo_file(fake.push_photo(7, 7, [picture])))
    await fake.wait_until(lambda: len(fake.file_requests) == 1)
    stopping = asyncio.create_task(ch.stop_receiving())
    await asyncio.sleep(0)  # polling is told to stop before the download ends
    gate.set()
    await within(stopping)
    assert bus.inbound.qsize() == 1
    assert [i.data for i in (await next_inbound(bus)).images] == [picture]
    await within(ch.stop())
    assert fake.pending_updates == 0

    await make_channel(max_image_bytes=5000)
    fake.push_text(7, 7, "after restart")
    assert (await next_inbound(bus)).text == "after restart"  # the photo not again
    assert len(fake.file_downloads) == 1


async def test_a_stop_ends_a_waiting_long_poll_at_once_and_confirms_what_was_taken(
    fake: FakeTelegram, bus: MessageBus
) -> None:
    """With the default 30 s long poll waiting, stop_receiving ends polling
    at once (the request is dropped, as the real API allows: Telegram
    confirms updates only by a later getUpdates' offset), and stop confirms
    the message taken: a restart gets nothing again, and nothing is lost."""
    cfg = config_for(fake).model_copy(update={"poll_timeout": 30})
    ch = TelegramChannel(cfg, bus, backoff=FAST)
    await within(ch.start())
    try:
        fake.push_text(7, 7, "taken")
        assert (await next_inbound(bus)).text == "taken"
        await asyncio.sleep(0.2)  # the next long poll is waiting
        await within(ch.stop_receiving(), 2.0)  # not the poll's 30 s: the gateway gives it half its 10 s stop
        fake.push_text(7, 7, "after the stop")  # not taken: it stays with Telegram
    finally:
        await within(ch.stop())
    assert fake.pending_updates == 1
    again = TelegramChannel(config_for(fake), bus, backoff=FAST)
    await within(again.start())
    try:
        assert (await next_inbound(bus)).text == "after the stop"
        await fake.wait_until(lambda: fake.pending_updates == 0)
        assert bus.inbound.empty()
    finally:
        await within(again.stop())


async def test_a_stop_cut_short_leaves_the_pending_message_for_the_restart(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The gateway bounds stop_receiving; a download still pending then is
    cancelled, never reaches the bus, and its update is not confirmed: the
    next start gets it again and reads it."""
    ch = await make_channel(max_image_bytes=5000, hold_poll=0.05)
    fake.push_text(8, 8, "before")
    assert (await next_inbound(bus)).text == "before"
    picture = jpeg(500, 9)
    gate = fake.hold_file(photo_file(fake.push_photo(7, 7, [picture], caption="read it")))
    await fake.wait_until(lambda: len(fake.file_requests) == 1)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(ch.stop_receiving(), 0.2)  # as gateway/app.py close() does
    await within(ch.stop())
    assert bus.inbound.empty()
    assert fake.pending_updates == 1  # "before" confirmed, the photo kept

    gate.set()
    await make_channel(max_image_bytes=5000)
    again = await next_inbound(bus)
    assert (again.text, [i.data for i in again.images]) == ("read it", [picture])


# -- albums -------------------------------------------------------------------------------


async def test_an_album_becomes_one_message_with_its_pictures_and_caption(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_image_bytes=5000, album_quiet=0.05)
    pictures = [jpeg(400, 1), jpeg(500, 2), jpeg(600, 3)]
    fake.push_photo(7, 7, [pictures[0]], media_group_id="g1")
    captioned = fake.push_photo(7, 7, [pictures[1]], caption="which of these is best?", media_group_id="g1")
    fake.push_photo(7, 7, [pictures[2]], media_group_id="g1")
    fake.push_text(7, 7, "and then this")
    album = await next_inbound(bus)
    assert [i.data for i in album.images] == pictures
    assert (album.text, album.placeholder, album.history_text) == (
        "which of these is best?", "[3 photos]", "[3 photos] which of these is best?")
    assert album.message_id == str(captioned["message_id"])  # an edit of the caption finds it
    assert (await next_inbound(bus)).text == "and then this"
    assert bus.inbound.empty() and fake.sent == [] and len(fake.file_downloads) == 3


async def test_album_parts_in_a_later_batch_join_the_album(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Telegram usually sends an album in one batch, not always: the album
    waits ``album_quiet`` after its last part."""
    await make_channel(max_image_bytes=5000, album_quiet=2.0, hold_poll=0.05)
    pictures = [jpeg(400, 1), jpeg(500, 2), jpeg(600, 3)]
    fake.push_photo(7, 7, [pictures[0]], caption="compare", media_group_id="g2")
    first = fake.last_update_id
    # Taken, and held back: polling names its update as the offset.
    await fake.wait_until(lambda: any(c.method == "getupdates" and str(c.params.get("offset")) == str(first)
                                      for c in fake.calls))
    fake.push_photo(7, 7, [pictures[1]], media_group_id="g2")
    fake.push_photo(7, 7, [pictures[2]], media_group_id="g2")
    album = await next_inbound(bus)
    assert ([i.data for i in album.images], album.history_text) == (pictures, "[3 photos] compare")
    assert bus.inbound.empty()


async def test_an_album_part_not_downloaded_gets_the_note_and_the_rest_go_on(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_image_bytes=5000, album_quiet=0.05)
    pictures = [jpeg(400, 1), jpeg(500, 2), jpeg(600, 3)]
    fake.fail_next("getFile", 400, description="Bad Request: invalid file_id")
    for i, picture in enumerate(pictures):
        fake.push_photo(7, 7, [picture], caption="the receipts" if i == 0 else None, media_group_id="g3")
    album = await next_inbound(bus)
    [note] = await fake.wait_sent(1)
    # Which one failed depends on which getFile reached the fake first.
    assert re.fullmatch(r"Sorry, photo [123] of 3 could not be read: the download failed; please send it again\. "
                        r"I am answering with the others\.", note.text)
    assert len(album.images) == 2 and {i.data for i in album.images} < set(pictures)
    assert album.history_text == "[2 photos] the receipts"

    # Told by their place in the album, once for all of them.
    for i, sizes in enumerate([[jpeg(400, 7)], [jpeg(9000)], [jpeg(400, 8)], [jpeg(9100)]]):
        fake.push_photo(7, 7, sizes, caption="four" if i == 2 else None, media_group_id="g7")
    four = await next_inbound(bus)
    assert ([i.data for i in four.images], four.history_text) == ([jpeg(400, 7), jpeg(400, 8)], "[2 photos] four")
    [_, large] = await fake.wait_sent(2)
    assert large.text == ("Sorry, photos 2 and 4 of 4 could not be read: too large for me (the limit is 4 KB); "
                          "please send smaller ones or screenshots. I am answering with the others.")

    fake.fail_next("getFile", 400, description="Bad Request: invalid file_id", times=2)
    fake.push_photo(7, 7, [jpeg(400, 4)], caption="both lost", media_group_id="g4")
    fake.push_photo(7, 7, [jpeg(400, 5)], media_group_id="g4")
    lost = await next_inbound(bus)  # none read: the caption goes on, as a single photo's
    assert (lost.images, lost.history_text) == ((), "[photo not read] both lost")
    assert (await fake.wait_sent(3))[2].text == (  # told of the album, not of "that picture"
        "Sorry, I could not read either photo of that album: the download failed; please send it again. "
        "I am answering your text without them.")


async def test_an_albums_video_is_marked_and_told_not_skipped(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A photo+video album: the pictures go to the model, the video is
    marked as not watched, for the model and in the history, and the
    note says so; a picture not read is numbered by its place in the
    album, of all its parts."""
    await make_channel(sender=True, max_image_bytes=5000, album_quiet=0.05)
    fake.push_photo(7, 7, [jpeg(400, 1)], caption="which is better?", media_group_id="v1")
    fake.push_media(7, 7, "video")["media_group_id"] = "v1"
    fake.push_photo(7, 7, [jpeg(400, 2)], media_group_id="v1")
    album = await next_inbound(bus)
    assert [i.data for i in album.images] == [jpeg(400, 1), jpeg(400, 2)]
    assert album.history_text == "[2 photos] [video not watched] which is better?"
    [note] = await fake.wait_sent(1)
    assert note.text == "I cannot watch videos, so I did not see the video. I am answering with the photos."

    fake.push_media(7, 7, "video")["media_group_id"] = "v2"
    fake.push_photo(7, 7, [jpeg(9000)], media_group_id="v2")
    fake.push_photo(7, 7, [jpeg(400, 3)], caption="and these?", media_group_id="v2")
    fake.push_media(7, 7, "video")["media_group_id"] = "v2"
    album = await next_inbound(bus)
    assert album.history_text == "[photo] [2 videos not watched] and these?"
    [_, note] = await fake.wait_sent(2)
    assert note.text == ("Sorry, photo 2 of 4 could not be read: too large for me (the limit is 4 KB); please send "
                         "a smaller one or a screenshot. I cannot watch videos, so I did not see the 2 videos. "
                         "I am answering with the other photo.")


async def test_without_vision_an_album_gets_one_note_and_its_caption_goes_on_once(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A single photo without vision gets the "only text" note, or its
    caption goes on; an album is one message too: one note for a
    captionless album, not one per photo, and its caption without a note."""
    await make_channel(sender=True, album_quiet=0.05, allow_from=["7", "8"])
    for i in range(3):
        fake.push_photo(7, 7, [jpeg(400, i)], media_group_id="v1")
    fake.push_text(7, 7, "after the album")
    [note] = await fake.wait_sent(1)
    assert note.text == UNREADABLE_REPLY
    assert (await next_inbound(bus)).text == "after the album"  # in order, behind the album
    for i in range(3):
        fake.push_photo(7, 7, [jpeg(400, i)], caption="which one?" if i == 1 else None, media_group_id="v2")
    captioned = await next_inbound(bus)
    assert (captioned.text, captioned.images, captioned.history_text) == ("which one?", (), "which one?")
    # In a group, only an album addressed to the bot (here: replying to it) gets its note.
    for i in range(2):
        fake.push_photo(-300, 8, [jpeg(400, i)], chat_type="group", media_group_id="v3")
    for i in range(2):
        fake.push_photo(-300, 8, [jpeg(400, i)], chat_type="group", reply_to_bot=True, media_group_id="v4")
    [_, group_note] = await fake.wait_sent(2)
    assert (group_note.chat_id, group_note.text) == (-300, UNREADABLE_REPLY) and group_note.reply_to is not None
    assert bus.inbound.empty() and fake.file_downloads == []


async def test_group_albums_are_read_only_when_addressed_to_the_bot(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(max_image_bytes=5000, album_quiet=0.05)
    for i in range(2):
        fake.push_photo(-300, 8, [jpeg(400, i)], caption="look" if i == 0 else None, chat_type="group",
                        media_group_id="g5")
    for i in range(2):
        fake.push_photo(-300, 8, [jpeg(400, i)], caption=None if i == 0 else "which one?", chat_type="group",
                        mention=i == 1, media_group_id="g6")
    unaddressed = await next_inbound(bus)
    assert (unaddressed.text, unaddressed.images, unaddressed.mentioned) == ("look", (), False)
    asked = await next_inbound(bus)
    assert (asked.text, asked.mentioned, len(asked.images)) == ("which one?", True, 2)
    assert len(fake.file_downloads) == 2 and bus.inbound.empty()


class _BuggyPoller(TelegramChannel):
    """A bug in the polling itself, whose error quotes an update's words."""

    async def _poll(self) -> None:
        raise ValueError("could not sort 'Okonkwo biopsy results'")


async def test_a_polling_crash_is_logged_and_reported_by_type_and_place_not_its_text(
    fake: FakeTelegram, bus: MessageBus
) -> None:
    from tests.logjson import debug_json_log, lines

    ch = _BuggyPoller(config_for(fake), bus, backoff=FAST)
    with debug_json_log() as out:
        try:  # the crash may come before start() returns, which then raises it
            await asyncio.wait_for(ch.start(), 10)
            failure = await asyncio.wait_for(ch.wait_failed(), 10)
        except ChannelFatalError as exc:
            failure = exc
        finally:
            await ch.stop()
    [line] = lines(out, "Telegram polling crashed")
    assert line["error"] == "ValueError" and line["at"].endswith(" in _poll"), line
    assert str(failure) == "Telegram polling stopped: ValueError"  # the gateway logs and keeps this one
    assert "Okonkwo" not in out.getvalue()


# -- what the log keeps of Telegram's errors ---------------------------------------------------


async def test_start_and_polling_errors_log_their_type_not_telegrams_text(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Telegram's description can quote what was sent (an entity's tag, a
    chat's title): the start-up and polling lines logged it (repr). They
    keep the error's type and, from a fixed list, which refusal it was."""
    fake.fail_next("getMe", 500, description="Internal Server Error near QUOKKA")
    fake.fail_next("setMyCommands", 400, description="Bad Request: chat not found for QUOKKA")
    fake.fail_next("getUpdates", 500, description="Internal Server Error QUOKKA")
    fake.fail_next("getUpdates", 409, description="Conflict: terminated by other getUpdates request QUOKKA")
    with debug_json_log() as stream:
        ch = await make_channel()
        await fake.wait_until(lambda: sum(c.status != 200 for c in fake.calls if c.method == "getupdates") == 2, 10)
        fake.push_text(7007, 7007, "after")
        assert (await next_inbound(bus, timeout=10)).text == "after"
        await within(ch.stop())
    assert "QUOKKA" not in stream.getvalue()
    [getme] = lines(stream, "Telegram getMe failed; retrying")
    assert (getme["error"], getme["reason"]) == ("telegram.error.NetworkError", "internal server error")
    [menu] = lines(stream, "Telegram command menu not set")
    assert (menu["error"], menu["reason"]) == ("telegram.error.BadRequest", "chat not found")
    [poll] = lines(stream, "Telegram getUpdates failed; retrying")
    assert (poll["error"], poll["reason"]) == ("telegram.error.NetworkError", "internal server error")
    [conflict] = lines(stream, "Telegram getUpdates conflict: is another bot instance running?")
    assert (conflict["error"], conflict["reason"]) == ("telegram.error.Conflict", "terminated by other getupdates request")


async def test_a_refused_reply_is_told_by_its_kind_not_telegrams_text(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A refusal's text went into the send error (logged whole, as
    written for the log) and a retry's repr into its warning."""
    with debug_json_log() as stream:
        await make_channel(sender=True, send_attempts=2)
        fake.push_text(6006, 6006, "hi")
        await next_inbound(bus)
        fake.fail_next("sendMessage", 400, description="Bad Request: chat not found QUOKKA")
        fake.fail_next("sendMessage", 500, times=2, description="Internal Server Error QUOKKA")
        fake.fail_next("sendMessage", 400, description="Bad Request: can't parse entities: Unsupported start tag \"quokka\"")
        await bus.publish_outbound(OutboundMessage("telegram", "6006", "refused"))
        await bus.publish_outbound(OutboundMessage("telegram", "6006", "lost"))
        await bus.publish_outbound(OutboundMessage("telegram", "6006", "**next** one"))
        await fake.wait_until(lambda: sum(c.method == "sendmessage" and c.status == 200 for c in fake.calls) == 1, 10)
    assert "QUOKKA" not in stream.getvalue().upper()
    refused, lost = lines(stream, "send failed")
    assert refused["said"] == "Telegram refused the reply to chat 6006 (part 1 of 1, 7 chars): BadRequest: chat not found"
    assert lost["said"].endswith("after 2 attempts: NetworkError: internal server error")
    [retry] = lines(stream, "Telegram sendMessage failed; retrying")
    assert (retry["error"], retry["reason"]) == ("telegram.error.NetworkError", "internal server error")
    [markup] = [p for p in all_lines(stream) if p["event"].startswith("Telegram refused the reply's formatting")]
    assert (markup["error"], markup["reason"]) == ("telegram.error.BadRequest", "can't parse entities")
