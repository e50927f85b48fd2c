"""Feishu shows a reply while it is written: its drafts as one message,
edited, which the finished reply becomes; against the fake Open API."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels.feishu import FeishuApiError, FeishuChannel, FeishuClient
from channels.feishu.client import part_uuids, split_text
from channels.feishu.drafts import DRAFT_EDITS, DRAFT_KEEP, DRAFT_TTL, RATE_LIMIT_PAUSE, Drafts, StoredDraft
from gateway.bus import InboundMessage, MessageBus, OutboundMessage
from gateway.draftmessages import DraftMessages
from gateway.http import HttpServer
from gateway.outbox import Outbox
from gateway.sessions import SessionStore
from memory import ManualClock
from tests.channels.test_feishu import Clock, config, fake, hook, http, next_inbound  # noqa: F401 (fixtures)
from tests.fakes.feishu_server import FakeFeishu


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def channel(fake: FakeFeishu, http: HttpServer, clock: Clock) -> AsyncIterator[FeishuChannel]:
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, clock=clock)
    await ch.start()
    yield ch
    await ch.stop()


async def asked(fake: FakeFeishu, http: HttpServer, ch: FeishuChannel, text: str = "question", **event: Any
                ) -> InboundMessage:
    assert (await fake.push_event(hook(http, ch), fake.message_event(text, **event))).status_code == 200
    return await next_inbound(ch.bus)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DraftMessages]:
    """Feishu's draft messages in a real gateway.db."""
    sessions = await SessionStore.open(tmp_path / "gateway.db", ManualClock(datetime(2026, 3, 1, tzinfo=UTC)))
    try:
        yield DraftMessages(sessions.db, "feishu")
    finally:
        await sessions.close()


async def started(fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages) -> FeishuChannel:
    """A channel keeping its drafts in ``store`` (a gateway's next run is another one)."""
    ch = FeishuChannel(config(fake), MessageBus(), http, backoff=0.01, clock=clock, draft_store=store)
    await ch.start()
    return ch


def edits_asked(fake: FakeFeishu) -> int:
    return sum(method == "PUT" for method, _ in fake.requests)


def draft(reply: OutboundMessage, text: str) -> OutboundMessage:
    """A draft of ``reply`` (the same send_key) saying ``text``."""
    return dataclasses.replace(reply, text=text, draft=True)


async def test_drafts_then_the_reply_leave_one_message_with_the_reply_s_words(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel, "what is the plan?")
    reply = OutboundMessage.answering(msg, "The plan: ship on Friday, then rest.")
    assert await channel.send_draft(draft(reply, "The plan:"))
    [shown] = fake.sent
    assert (shown["kind"], shown["chat_id"], shown["text"]) == ("create", msg.chat_id, "The plan:")
    clock.now += 2
    assert await channel.send_draft(draft(reply, "The plan: ship on Friday"))
    assert fake.texts() == ["The plan: ship on Friday"]
    clock.now += 2
    await channel.send(reply)
    assert len(fake.sent) == 1 and fake.visible() == fake.sent
    assert fake.texts() == ["The plan: ship on Friday, then rest."]
    assert [e["text"] for e in fake.edits] == ["The plan: ship on Friday", "The plan: ship on Friday, then rest."]
    # A late draft of the same reply changes nothing.
    assert not await channel.send_draft(draft(reply, "The plan: ship"))
    assert len(fake.edits) == 2
    # The message is the bot's: a reply to it is a reply to the bot.
    follow = await asked(fake, http, channel, "and after?", parent_id=shown["message_id"])
    assert follow.reply_to_bot


async def test_a_draft_coming_after_its_reply_shows_nothing(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "Quick answer.")
    await channel.send(reply)
    assert not await channel.send_draft(draft(reply, "Quick"))
    assert fake.texts() == ["Quick answer."] and fake.edits == []


async def test_a_reply_no_longer_than_its_last_draft_is_not_edited_again(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "**Done.**")
    assert await channel.send_draft(draft(reply, "**Done.**"))
    await channel.send(reply)
    assert fake.edits == [] and [(m["msg_type"], m["text"]) for m in fake.sent] == [("post", "**Done.**")]


async def test_in_a_group_the_draft_answers_the_question_as_the_reply_does(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel, "@_user_1 status?", chat_id="oc_group", chat_type="group",
                      mentions=[fake.mention()])
    reply = OutboundMessage.answering(msg, "All green.")
    assert reply.reply_to == msg.message_id
    assert await channel.send_draft(draft(reply, "All"))
    clock.now += 2
    await channel.send(reply)
    [sent] = fake.sent
    assert (sent["kind"], sent["chat_id"], sent["reply_to"], sent["text"]) == (
        "reply", "oc_group", msg.message_id, "All green.")


async def test_edits_are_spaced_and_stop_before_feishu_s_limit(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "word " * 40 + "end.")
    assert await channel.send_draft(draft(reply, "word"))
    clock.now += 1.0  # too soon after the send: skipped, and said to be handled
    assert await channel.send_draft(draft(reply, "word word"))
    assert fake.edits == []
    clock.now += 0.5
    assert await channel.send_draft(draft(reply, "word word"))
    assert fake.texts() == ["word word"]
    assert await channel.send_draft(draft(reply, "word word"))  # unchanged: nothing to edit
    assert len(fake.edits) == 1
    for n in range(3, 40):
        clock.now += 1.5
        assert await channel.send_draft(draft(reply, " ".join(["word"] * n)))
    assert len(fake.edits) == DRAFT_EDITS < fake.edit_limit  # the rest were skipped
    await channel.send(reply)  # the reply still has its edit
    assert len(fake.edits) == DRAFT_EDITS + 1
    assert fake.texts() == [reply.text] and len(fake.sent) == 1


async def test_a_long_draft_shows_one_message_s_worth_and_an_open_code_block_closed(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "Run:\n\n```python\nprint(1)\nprint(2)\n```\n\nThat's it.")
    assert await channel.send_draft(draft(reply, "Run:\n\n```python\nprint(1)"))
    [shown] = fake.sent
    assert (shown["msg_type"], shown["text"]) == ("post", "Run:\n\n```python\nprint(1)\n```")
    clock.now += 2
    long = "\n\n".join(f"part {i} " + "y" * 3000 for i in range(3))
    assert await channel.send_draft(draft(reply, long))
    [edit] = fake.edits
    assert (edit["msg_type"], edit["text"]) == ("text", split_text(long)[0] + "…")  # a post turns into a text
    await channel.send(reply)
    assert fake.texts() == [reply.text] and fake.sent[0]["msg_type"] == "post"


async def test_a_reply_of_several_parts_edits_the_draft_into_its_first_and_sends_the_rest(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    text = "\n\n".join(f"part {i} " + "z" * 3000 for i in range(3))
    reply = OutboundMessage.answering(msg, text)
    assert await channel.send_draft(draft(reply, "part 0 zzz"))
    clock.now += 2
    await channel.send(reply)
    chunks = split_text(text)
    assert fake.texts() == chunks and fake.visible() == fake.sent
    assert [m["kind"] for m in fake.sent] == ["create"] * 3
    assert fake.edits[-1]["message_id"] == fake.sent[0]["message_id"]
    assert [m["uuid"] for m in fake.sent[1:]] == part_uuids(reply.send_key, chunks)[1:]
    # Each part is recorded under the question: a recall withdraws them all.
    await fake.push_event(hook(http, channel), fake.recall_event(msg.message_id))
    await next_inbound(channel.bus)
    assert await channel.withdrawals_done(5)
    assert sorted(fake.deleted) == sorted(m["message_id"] for m in fake.sent)


async def test_a_withdrawn_draft_message_gets_the_reply_as_a_new_message(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "The answer.")
    assert await channel.send_draft(draft(reply, "The"))
    [stale] = fake.sent
    fake.deleted.append(stale["message_id"])  # recalled by a group admin
    with capture_logs() as logs:
        await channel.send(reply)
    assert [m["text"] for m in fake.visible()] == ["The answer."]
    assert fake.visible()[0]["message_id"] != stale["message_id"] and fake.edits == []
    [warned] = [e for e in logs if e["event"] == "could not withdraw a stale feishu draft message"]
    assert warned["code"] == 230011  # gone already: nothing left to do


async def test_a_draft_out_of_edits_is_withdrawn_and_the_reply_sent_anew(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg = await asked(fake, http, channel)
    text = "\n\n".join(f"part {i} " + "q" * 3000 for i in range(2))
    reply = OutboundMessage.answering(msg, text)
    assert await channel.send_draft(draft(reply, "part 0"))
    [stale] = fake.sent
    fake.edit_limit = 0  # as if Feishu counted the edits differently
    await channel.send(reply)
    assert fake.deleted == [stale["message_id"]]
    assert [m["text"] for m in fake.visible()] == split_text(text)
    # A recall later withdraws the new parts (the stale one is gone already).
    await fake.push_event(hook(http, channel), fake.recall_event(msg.message_id))
    await next_inbound(channel.bus)
    assert await channel.withdrawals_done(5)
    assert fake.visible() == []


async def test_a_transient_edit_failure_keeps_the_reply_for_later_and_the_retry_sends_no_duplicate(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    text = "\n\n".join(f"part {i} " + "w" * 3000 for i in range(3))
    reply = OutboundMessage.answering(msg, text)
    assert await channel.send_draft(draft(reply, "part 0"))
    clock.now += 2
    fake.fail_next(1, "internal error", status=502, times=4, on="edit")  # every attempt of the client
    with pytest.raises(FeishuApiError) as outage:
        await channel.send(reply)
    assert outage.value.retryable and outage.value.remaining is None
    assert fake.texts() == ["part 0"] and len(fake.sent) == 1
    # The outbox sends it again (same send_key); the second part's answer is lost on its way back.
    fake.fail_next(1, "internal error", status=502, times=4, accepted=True)
    with pytest.raises(FeishuApiError) as cut:
        await channel.send(reply)
    assert cut.value.retryable and cut.value.remaining == text[text.index("part 1"):]
    assert cut.value.remaining is not None
    await channel.send(dataclasses.replace(reply, text=cut.value.remaining))  # what the outbox keeps
    assert fake.texts() == split_text(text) and len(fake.sent) == 3
    assert fake.deduplicated >= 1  # the lost part was answered from Feishu's uuid window, not sent twice
    assert [e["message_id"] for e in fake.edits] == [fake.sent[0]["message_id"]]


async def test_a_recalled_question_withdraws_its_draft_and_stops_the_reply(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel, "oops")
    reply = OutboundMessage.answering(msg, "An answer to oops.")
    assert await channel.send_draft(draft(reply, "An answer"))
    [shown] = fake.sent
    await fake.push_event(hook(http, channel), fake.recall_event(msg.message_id))
    await next_inbound(channel.bus)
    assert await channel.withdrawals_done(5)
    assert fake.deleted == [shown["message_id"]]
    clock.now += 2
    assert not await channel.send_draft(draft(reply, "An answer to"))
    await channel.send(reply)
    assert fake.visible() == [] and fake.edits == [] and len(fake.sent) == 1


async def test_a_stop_waits_for_a_withdrawal_only_within_the_time_it_is_given(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    """The gateway's stop hands the channel what is left of its deadline
    (App.close): a withdrawal Feishu does not answer is cut there, not
    after the channel's own 10 s."""
    msg = await asked(fake, http, channel)
    await channel.send(OutboundMessage.answering(msg, "An answer."))
    [shown] = fake.sent
    held = fake.hold_delete(shown["message_id"])
    await fake.push_event(hook(http, channel), fake.recall_event(msg.message_id))
    await next_inbound(channel.bus)
    with capture_logs() as logs:
        await asyncio.wait_for(channel.stop(timeout=0.2), 3.0)
    held.set()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "withdrawals of recalled replies left unfinished"]


async def test_a_draft_feishu_refuses_never_stops_the_reply(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "Still answered.")
    fake.fail_next(230027, "Lack of necessary permissions.")
    sender = asyncio.create_task(channel.run_sender())
    try:
        with capture_logs() as logs:
            await channel.bus.publish_outbound(draft(reply, "Still"))
            await channel.bus.publish_outbound(reply)
            await asyncio.wait_for(channel.bus.outbound_queue("feishu").join(), 5)
    finally:
        sender.cancel()
    assert fake.texts() == ["Still answered."] and fake.edits == []
    assert any(e.get("code") == 230027 for e in logs)


async def test_a_draft_that_cannot_go_out_now_is_skipped_and_the_next_one_shows(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "Three words here.")
    fake.fail_next(99991400, "request trigger frequency limit", status=429)
    assert await channel.send_draft(draft(reply, "Three"))  # one try only: a draft waits for nothing
    assert fake.sent == []
    clock.now += RATE_LIMIT_PAUSE  # a rate limit: the next draft waits this long
    assert await channel.send_draft(draft(reply, "Three words"))
    assert fake.texts() == ["Three words"]
    await channel.send(reply)
    assert fake.texts() == ["Three words here."] and len(fake.sent) == 1


async def test_a_reply_with_a_draft_forgotten_goes_out_as_new_messages(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "Much later.")
    assert await channel.send_draft(draft(reply, "Much"))
    clock.now += DRAFT_TTL  # e.g. back from the outbox long after
    await channel.send(reply)
    assert fake.texts() == ["Much", "Much later."] and fake.edits == []


def test_drafts_are_bounded_in_count_and_age() -> None:
    clock = Clock()
    drafts = Drafts(clock, maxsize=2, ttl=10)
    a = drafts.open("a")
    assert drafts.open("a") is a and drafts.get("b") is None
    drafts.open("b")
    drafts.open("c")
    assert drafts.get("a") is None and len(drafts) == 2
    clock.now += 10
    assert drafts.get("b") is None and drafts.get("c") is None
    # Age counts from the last use: a draft in use is kept past the ttl.
    d = drafts.open("d")
    for _ in range(3):
        clock.now += 6
        assert drafts.open("d") is d
    clock.now += 10
    assert drafts.get("d") is None


async def test_the_fake_edits_as_feishu_does(fake: FakeFeishu) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        [mine] = await api.send_text("oc_1", "first")
        await api.edit_message(mine, "second", msg_type="text")
        assert fake.texts() == ["second"] and fake.edits == [{"message_id": mine, "msg_type": "text", "text": "second"}]
        users = fake.message_event("a user's words")["event"]["message"]["message_id"]
        for message_id, content, msg_type, code in [
            ("om_unknown", "x", "text", 230001),
            (mine, "x", "image", 230001),  # only text and post
            (mine, '{"zh_cn": {"content": [[{"tag": "md", "text": "a"}, {"tag": "text", "text": "b"}]]}}', "post",
             230001),  # an md element alone in its paragraph
            (users, "x", "text", 230071),
        ]:
            with pytest.raises(FeishuApiError) as err:
                await api.edit_message(message_id, content, msg_type=msg_type)
            assert err.value.code == code
        for n in range(fake.edit_limit - 1):
            await api.edit_message(mine, f"edit {n}", msg_type="text")
        with pytest.raises(FeishuApiError) as spent:
            await api.edit_message(mine, "one too many", msg_type="text")
        assert (spent.value.code, spent.value.retryable) == (230072, False)
        await api.delete_message(mine)
        with pytest.raises(FeishuApiError) as gone:
            await api.edit_message(mine, "after recall", msg_type="text")
        assert gone.value.code == 230011
        assert fake.texts() == [f"edit {fake.edit_limit - 2}"]
    finally:
        await api.aclose()


# -- rate limits ----------------------------------------------------------------------------------


async def test_a_rate_limited_draft_edit_is_skipped_and_later_drafts_wait_longer_each_time(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "one two three four five six.")
    assert await channel.send_draft(draft(reply, "one"))
    clock.now += 2
    fake.fail_edits(230020)  # Feishu: "This operation triggers the frequency limit." (HTTP 400)
    assert await channel.send_draft(draft(reply, "one two"))  # skipped: the reply still comes
    assert edits_asked(fake) == 1 and fake.edits == []
    clock.now += RATE_LIMIT_PAUSE - 0.1
    assert await channel.send_draft(draft(reply, "one two three"))
    assert edits_asked(fake) == 1  # not even asked: Feishu said "too often"
    clock.now += 0.1
    fake.fail_edits(230020)  # still limited: the pause doubles
    assert await channel.send_draft(draft(reply, "one two three"))
    assert edits_asked(fake) == 2 and fake.edits == []
    clock.now += 2 * RATE_LIMIT_PAUSE - 0.1
    assert await channel.send_draft(draft(reply, "one two three four"))
    assert edits_asked(fake) == 2
    clock.now += 0.1
    assert await channel.send_draft(draft(reply, "one two three four"))
    assert fake.texts() == ["one two three four"]
    clock.now += 2  # once through, drafts go at the usual pace again
    assert await channel.send_draft(draft(reply, "one two three four five"))
    assert fake.texts() == ["one two three four five"]
    await channel.send(reply)
    assert fake.texts() == [reply.text] and len(fake.sent) == 1 and fake.deleted == []


async def test_a_rate_limited_reply_edit_is_retried_and_lands_in_the_draft(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "The answer, in full.")
    assert await channel.send_draft(draft(reply, "The answer"))
    [shown] = fake.sent
    clock.now += 2
    fake.fail_edits(230020, times=2, text=reply.text)
    await channel.send(reply)
    assert fake.visible() == [shown] and shown["text"] == reply.text
    assert edits_asked(fake) == 3 and fake.deleted == []


async def test_a_reply_edit_rate_limited_past_the_retries_goes_out_anew_and_the_draft_is_withdrawn(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "The answer, in full.")
    assert await channel.send_draft(draft(reply, "The answer"))
    [stale] = fake.sent
    clock.now += 2
    fake.fail_edits(230020, times=10, text=reply.text)
    with capture_logs() as logs:
        await channel.send(reply)
    assert edits_asked(fake) == 4  # the client's attempts, then no more
    assert fake.deleted == [stale["message_id"]]
    [new] = fake.visible()
    assert new["text"] == reply.text and new["message_id"] != stale["message_id"]
    [fell_back] = [e for e in logs if e["event"] == "feishu draft message could not become the reply; sending it anew"]
    assert fell_back["code"] == 230020


async def test_a_reply_held_back_as_new_messages_too_keeps_its_draft_for_the_next_try(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel, clock: Clock
) -> None:
    """Feishu limits the chat: the edit and the new messages are both held
    back. The draft stays in the chat (not a chat with neither) and the
    outbox's next try edits it into the reply."""
    msg = await asked(fake, http, channel)
    reply = OutboundMessage.answering(msg, "The answer, in full.")
    assert await channel.send_draft(draft(reply, "The answer"))
    [shown] = fake.sent
    clock.now += 2
    fake.fail_edits(230020, times=4, text=reply.text)
    fake.fail_next(230020, "This operation triggers the frequency limit.", times=4)
    with pytest.raises(FeishuApiError) as held:
        await channel.send(reply)
    assert held.value.rate_limited and fake.deleted == []
    assert [m["text"] for m in fake.visible()] == ["The answer"]  # the draft, still there
    await channel.send(reply)  # the outbox's next try
    [edited] = fake.visible()
    assert (edited["message_id"], edited["text"]) == (shown["message_id"], reply.text) and fake.deleted == []


async def test_feishu_s_message_rate_limit_is_transient() -> None:
    limited = FeishuApiError(230020, "This operation triggers the frequency limit.", status=400)
    assert limited.retryable and limited.rate_limited
    refused = FeishuApiError(230072, "The message has reached the number of times it can be edited.", status=400)
    assert not refused.retryable and not refused.rate_limited


# -- kept across restarts ---------------------------------------------------------------------------


async def test_a_draft_message_is_kept_on_disk_until_its_reply_is_out(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "Kept, then gone.")
        assert await ch.send_draft(draft(reply, "Kept"))
        [shown] = fake.sent
        kept = await store.get(reply.send_key)
        assert kept is not None and (kept.chat_id, kept.message_id, kept.finishing) == (
            msg.chat_id, shown["message_id"], False)
        clock.now += 2
        fake.fail_next(1, "internal error", status=502, times=4, on="edit")  # Feishu down: the outbox keeps it
        with pytest.raises(FeishuApiError):
            await ch.send(reply)
        kept = await store.get(reply.send_key)
        assert kept is not None and kept.finishing  # the edit may have landed: never withdrawn as an orphan
        await ch.send(reply)
        assert fake.texts() == [reply.text] and await store.count() == 0
        # A reply never drafted writes nothing.
        await ch.send(OutboundMessage.answering(msg, "Quick."))
        assert await store.count() == 0
    finally:
        await ch.stop()


async def test_a_reply_sent_after_a_restart_becomes_its_kept_draft(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    first = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, first)
        reply = OutboundMessage.answering(msg, "Written before the restart, sent after it.")
        assert await first.send_draft(draft(reply, "Written before"))
        [shown] = fake.sent
    finally:
        await first.stop()
    # The reply waits in the outbox, as the gateway keeps one it could not send.
    now = datetime(2026, 3, 1, tzinfo=UTC)
    await Outbox(store.db).add(reply, owner="feishu:ou_user0001", created_at=now, next_attempt_at=now)
    second = await started(fake, http, Clock(), store)
    try:
        assert await second.withdrawals_done(5) and fake.deleted == []  # its reply will come: left alone
        await second.send(reply)
    finally:
        await second.stop()
    assert fake.visible() == [shown] and shown["text"] == reply.text
    assert [e["message_id"] for e in fake.edits] == [shown["message_id"]]
    assert await store.count() == 0


async def test_drafts_whose_reply_will_never_come_are_withdrawn_at_the_next_start(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        orphan, waited_for, finishing, old = [(await api.send_text("oc_1", f"draft {i}"))[0] for i in range(4)]
    finally:
        await api.aclose()
    now = time.time()
    for key, message_id, created_at, is_finishing in [
        ("k-orphan", orphan, now - 60, False),  # the run stopped mid-turn
        ("k-waited", waited_for, now - 60, False),  # its reply waits in the outbox
        ("k-finishing", finishing, now - 60, True),  # the reply may be in it already
        ("k-old", old, now - DRAFT_KEEP - 1, False),  # past Feishu's recall window
    ]:
        await store.put(StoredDraft(key, "oc_1", message_id, created_at, is_finishing), expired_before=0)
    then = datetime(2026, 3, 1, tzinfo=UTC)
    waiting = OutboundMessage("feishu", "oc_1", "its reply", send_key="k-waited")
    await Outbox(store.db).add(waiting, owner="", created_at=then, next_attempt_at=then)
    ch = await started(fake, http, clock, store)
    try:
        with capture_logs() as logs:
            assert await ch.withdrawals_done(5)
    finally:
        await ch.stop()
    assert fake.deleted == [orphan]
    assert [d.send_key for d in await store.orphans()] == [] and await store.count() == 1
    assert await store.get("k-waited") is not None
    assert any(e["event"] == "feishu drafts left by the last run withdrawn" and e["withdrawn"] == 1 for e in logs)


async def test_a_dropped_reply_s_draft_is_withdrawn_and_later_drafts_show_nothing(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    """The turn was dropped after its drafts were shown (superseded, cut by
    a stop): its half-written message goes, and so does its row on disk."""
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "Half of an answer that never")
        assert await ch.send_draft(draft(reply, "Half of an"))
        [shown] = fake.sent
        await ch.drop_draft(dataclasses.replace(reply, text="", dropped=True))
        assert fake.deleted == [shown["message_id"]] and fake.visible() == []
        assert await store.count() == 0
        clock.now += 2
        assert not await ch.send_draft(draft(reply, "Half of an answer"))  # one late from the queue
        assert len(fake.sent) == 1 and fake.edits == []
        # A reply never drafted, or already out, is left alone.
        out = OutboundMessage.answering(msg, "Sent whole.")
        await ch.send(out)
        await ch.drop_draft(dataclasses.replace(out, text="", dropped=True))
        await ch.drop_draft(dataclasses.replace(OutboundMessage.answering(msg, ""), dropped=True))
        assert [m["text"] for m in fake.visible()] == ["Sent whole."] and len(fake.deleted) == 1
    finally:
        await ch.stop()


async def test_a_dropped_draft_feishu_cannot_withdraw_now_is_left_for_the_next_start(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "Half of an answer that never")
        assert await ch.send_draft(draft(reply, "Half of an"))
        [shown] = fake.sent
        fake.fail_next(1, "internal error", status=502, times=10, on="delete")
        await ch.drop_draft(dataclasses.replace(reply, text="", dropped=True))
        assert fake.deleted == [] and [d.message_id for d in await store.orphans()] == [shown["message_id"]]
    finally:
        await ch.stop()


async def test_a_dropped_reply_s_draft_shown_long_ago_is_withdrawn_all_the_same(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    """A turn that ran past DRAFT_TTL (a long tool call) then stopped: the
    draft is no longer in memory, but its row says which message to take."""
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "Half of an answer that never")
        assert await ch.send_draft(draft(reply, "Half of an"))
        [shown] = fake.sent
        clock.now += DRAFT_TTL + 60
        await ch.drop_draft(dataclasses.replace(reply, text="", dropped=True))
        assert fake.deleted == [shown["message_id"]] and fake.visible() == []
        assert await store.count() == 0
    finally:
        await ch.stop()


async def test_a_draft_feishu_will_not_withdraw_any_more_says_the_reply_stopped(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    """The tenant's recall window (set by its admin, possibly minutes) is
    past: the half-written words are edited into a short note instead."""
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "Half of an answer that never")
        assert await ch.send_draft(draft(reply, "Half of an"))
        [shown] = fake.sent
        fake.fail_next(230009, "can only be recalled within one day", on="delete")
        with capture_logs() as logs:
            await ch.drop_draft(dataclasses.replace(reply, text="", dropped=True))
        assert fake.deleted == []
        assert [m["text"] for m in fake.visible()] == ["(stopped)"]
        assert [e["message_id"] for e in fake.edits] == [shown["message_id"]]
        assert await store.count() == 0
        assert not any(e["log_level"] == "warning" for e in logs)
    finally:
        await ch.stop()


async def test_a_draft_left_by_the_last_run_past_the_recall_window_says_the_reply_stopped(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    api = FeishuClient(fake.app_id, fake.app_secret, fake.url, backoff=0.01)
    try:
        [orphan] = await api.send_text("oc_1", "half a draft")
    finally:
        await api.aclose()
    await store.put(StoredDraft("k-orphan", "oc_1", orphan, time.time() - 60), expired_before=0)
    fake.fail_next(230009, "can only be recalled within one day", on="delete")
    ch = await started(fake, http, clock, store)
    try:
        assert await ch.withdrawals_done(5)
    finally:
        await ch.stop()
    assert fake.deleted == [] and [m["text"] for m in fake.visible()] == ["(stopped)"]
    assert await store.count() == 0


async def test_a_turn_drafting_past_the_memory_s_ttl_keeps_to_its_one_draft_message(
    fake: FakeFeishu, http: HttpServer, clock: Clock, store: DraftMessages
) -> None:
    """A long turn (tool calls between drafts): its drafts and its reply
    stay in the one message, and no earlier draft is left standing."""
    ch = await started(fake, http, clock, store)
    try:
        msg = await asked(fake, http, ch)
        reply = OutboundMessage.answering(msg, "First, then much later the rest.")
        assert await ch.send_draft(draft(reply, "First"))
        for step in range(1, 4):  # drafting on, a draft every 4 minutes
            clock.now += 240
            assert await ch.send_draft(draft(reply, "First, then" + " much" * step))
        clock.now += DRAFT_TTL + 60  # a long quiet spell
        assert await ch.send_draft(draft(reply, reply.text))  # the whole reply shown before it is sent
        await ch.send(reply)
    finally:
        await ch.stop()
    assert len(fake.sent) == 1 and [m["text"] for m in fake.visible()] == [reply.text]
    assert fake.deleted == [] and await store.count() == 0
