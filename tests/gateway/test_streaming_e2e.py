"""Streamed replies end to end (``agent.streaming``): the fake LLM streams
server-sent events slowly, the gateway shows the reply as Telegram drafts
(``sendMessageDraft``) while it is written and then sends it whole; a
quick reply, a group, a scheduled job and a broken stream each behave.
On Feishu the draft is a message the reply becomes, also when the reply
goes out after a restart (from the outbox); a draft whose reply never
comes (the gateway stopped mid-turn) is withdrawn at the next start."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.feishu import FeishuChannel
from gateway.app import App, ChannelSpec
from gateway.config import Paths
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import running
from .test_e2e_feishu import ALICE, ENCRYPT_KEY, _app, _feishu_section, _until
from .test_quoted_e2e import _telegram

KEY = "sk-stream-e2e-0123456789"
# Drafts from the first piece on, one per piece at most: the pieces come
# 0.3 s apart, further apart than the interval, so each one is a draft.
STREAM: dict[str, Any] = {"agent": {"model": "test-model", "streaming": {"delay": "0s", "interval": "0.2s"}}}
PIECES = ["The ", "launch ", "moved ", "to ", "**Thursday**."]
# Feishu giving up on a send at once (tests/gateway/test_e2e_feishu_outbox.py), its drafts kept in gateway.db.
FAST_FEISHU = ChannelSpec("feishu", "tests.gateway.test_e2e_feishu_outbox", "FastFeishu", lambda c: c.channels.feishu,
                          needs_http=lambda c: True, keeps_replies=True, keeps_seen=True, keeps_drafts=True)


@contextlib.asynccontextmanager
async def _telegram_app(
    tmp_path: Path, clock: ManualClock, *, retries: int = 0, **more: Any
) -> AsyncIterator[tuple[FakeOpenAI, FakeTelegram, App]]:
    """The gateway on Telegram's and the LLM's fakes, started; closed after."""
    async with FakeOpenAI(api_key=KEY) as llm, FakeTelegram() as tg:
        provider = {"baseUrl": llm.url, "apiKey": KEY, "maxRetries": retries, "timeout": "5s"}
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, provider=provider, **more)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            yield llm, tg, app
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_slow_reply_shows_as_drafts_then_comes_whole(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue_stream(PIECES, delay=0.3)
        tg.push_text(42, 42, "when is the launch?")
        [reply] = await tg.wait_sent(1, timeout=15)
        assert app.loop is not None and await app.loop.drain(5)
    assert llm.chat_requests()[0]["stream"] is True
    assert reply.text == "The launch moved to Thursday." and reply.parse_mode == "HTML"
    texts = [d.text for d in tg.drafts]
    assert len(texts) >= 2 and texts == sorted(texts, key=len)  # it grows
    assert all("The launch moved to Thursday.".startswith(t) for t in texts)
    # One draft, animated: the same id each time, in the chat the reply went to.
    assert {d.draft_id for d in tg.drafts} != {0} and len({d.draft_id for d in tg.drafts}) == 1
    assert {d.chat_id for d in tg.drafts} == {42}
    # Words without markup go as they are (the bold piece may come formatted, or not at all: the reply follows it).
    assert all(d.parse_mode is None for d in tg.drafts if "Thursday" not in d.text)


async def test_a_quick_reply_has_no_drafts(tmp_path: Path, clock: ManualClock) -> None:
    """The default waits a second before the first draft: the fake's
    instant reply comes whole, as without streaming."""
    async with _telegram_app(tmp_path, clock) as (llm, tg, app):
        llm.queue_stream(["Quick ", "answer."])
        tg.push_text(42, 42, "hi")
        [reply] = await tg.wait_sent(1, timeout=15)
    assert llm.chat_requests()[0]["stream"] is True and reply.text == "Quick answer." and tg.drafts == []


async def test_a_group_sees_typing_not_drafts_and_the_reply_still_quotes(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue_stream(PIECES, delay=0.3)
        asked = tg.push_text(-100777, 7, "when is the launch?", chat_type="supergroup", mention=True)
        [reply] = await tg.wait_sent(1, timeout=15)
    assert reply.text == "The launch moved to Thursday." and reply.reply_to == asked["message_id"]
    # Telegram takes drafts in private chats only: the group sees "typing…" meanwhile.
    assert tg.drafts == [] and tg.counts["sendmessagedraft"] == 0 and tg.counts["sendchataction"] >= 1


async def test_a_stream_broken_off_starts_over_and_the_reply_is_the_whole_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with _telegram_app(tmp_path, clock, retries=1, **STREAM) as (llm, tg, app):
        llm.queue_stream(["Wrong ", "half ", "answer"], delay=0.3, cut_after=2)
        llm.queue_stream(["Right ", "answer."], delay=0.3)
        tg.push_text(42, 42, "tell me")
        [reply] = await tg.wait_sent(1, timeout=15)
    assert reply.text == "Right answer." and len(llm.requests) == 2
    texts = [d.text for d in tg.drafts]
    assert "Wrong half" in texts and texts[-1] in ("Right", "Right answer.")


async def test_drafts_the_platform_refuses_stop_and_the_reply_still_goes(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        tg.fail_next("sendMessageDraft", 400, description="Bad Request: method is not available")
        llm.queue_stream(PIECES, delay=0.3)
        tg.push_text(42, 42, "when is the launch?")
        [reply] = await tg.wait_sent(1, timeout=15)
    assert reply.text == "The launch moved to Thursday."
    assert tg.counts["sendmessagedraft"] == 1 and tg.drafts == []  # the first refused, no more asked


async def test_a_rate_limited_draft_ends_the_drafts_not_the_reply(tmp_path: Path, clock: ManualClock) -> None:
    """Telegram's 429 on ``sendMessageDraft`` (``retry_after``): no wait and no
    retry for a draft; the reply itself still goes out whole, once."""
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        tg.fail_next("sendMessageDraft", 429, retry_after=5)
        llm.queue_stream(PIECES, delay=0.3)
        tg.push_text(42, 42, "when is the launch?")
        [reply] = await tg.wait_sent(1, timeout=15)
        assert app.loop is not None and await app.loop.drain(5)
    assert reply.text == "The launch moved to Thursday." and tg.texts() == ["The launch moved to Thursday."]
    assert tg.counts["sendmessagedraft"] == 1 and tg.drafts == []


async def test_tool_rounds_stream_and_the_last_round_is_the_reply(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue_stream(["Let ", "me ", "look."], delay=0.3,
                         tool_calls=[{"name": "memory_search", "arguments": {"query": "launch"}}])
        llm.queue_stream(["Nothing ", "saved ", "about it."], delay=0.3)
        tg.push_text(42, 42, "what did I say about the launch?")
        [reply] = await tg.wait_sent(1, timeout=15)
    assert reply.text == "Nothing saved about it."
    assert all(r["stream"] is True for r in llm.requests) and len(llm.requests) == 2
    texts = [d.text for d in tg.drafts]
    assert "Let me look." in texts and texts[-1].startswith("Nothing")


async def test_a_scheduled_job_is_not_streamed(tmp_path: Path, clock: ManualClock) -> None:
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        tg.push_text(42, 42, "hello")
        await tg.wait_sent(1, timeout=15)
        assert app.loop is not None
        await app.loop.run_job(channel="telegram", chat_id="42", user="telegram:42", text="Remind me to stretch",
                               private=True)
        await tg.wait_sent(2, timeout=15)
    assert llm.chat_requests()[0].get("stream") is True and "stream" not in llm.chat_requests()[1]


async def test_a_slow_start_shows_the_thinking_placeholder_first(tmp_path: Path, clock: ManualClock) -> None:
    """Before any words come (the model still reading, a tool running), a
    private chat gets Telegram's empty draft, its "thinking" placeholder."""
    async with _telegram_app(tmp_path, clock, **STREAM) as (llm, tg, app):
        llm.queue_delay(0.6, "Done thinking.")
        tg.push_text(42, 42, "think hard")
        [reply] = await tg.wait_sent(1, timeout=15)
    assert reply.text == "Done thinking."
    assert tg.drafts and tg.drafts[0].text == "" and tg.drafts[0].chat_id == 42


async def test_feishu_shows_one_message_that_grows_into_the_reply(tmp_path: Path, clock: ManualClock) -> None:
    """Feishu takes no drafts of its own: the first goes out as a message,
    later ones edit it (at least 1.5 s apart), and the reply edits it into
    its words: one message in the chat, the reply's."""
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as feishu:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, **STREAM)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            llm.queue_stream(["The ", "launch ", "moved ", "to ", "Thursday, ", "after ", "the ", "review."], delay=0.4)
            event = feishu.message_event("when is the launch?", chat_id="oc_alice", open_id=ALICE)
            r = await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)
            assert r.status_code == 200
            await _until(lambda: bool(feishu.sent) and feishu.sent[-1]["text"].endswith("review."), timeout=15)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    [message] = feishu.visible()
    assert message["text"] == "The launch moved to Thursday, after the review." and message["chat_id"] == "oc_alice"
    assert feishu.edits and feishu.edits[-1]["text"] == message["text"]
    assert all(e["message_id"] == message["message_id"] for e in feishu.edits)


def _fast_feishu_app(tmp_path: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu) -> App:
    """A gateway on ``tmp_path`` (the next one, on the same home, is a restart)."""
    cfg = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, **STREAM).cfg
    return App(cfg, Paths(tmp_path), clock=clock, channel_specs=[FAST_FEISHU])


async def _ask(app: App, feishu: FakeFeishu, text: str) -> None:
    assert app.http is not None
    event = feishu.message_event(text, chat_id="oc_alice", open_id=ALICE)
    assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200


async def _rows(app: App, table: str) -> int:
    assert app.sessions is not None
    row = await app.sessions.db.fetchone(f"SELECT COUNT(*) FROM {table}")
    return int(row[0]) if row else 0


async def test_a_feishu_reply_kept_in_the_outbox_becomes_its_draft_after_a_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    words = ["The ", "launch ", "moved ", "to ", "Thursday, ", "after ", "the ", "review."]
    whole = "".join(words)
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as feishu:
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=10.0) as app:
            feishu.fail_edits(1, "internal error", status=502, times=100, text=whole)  # Feishu down for the reply's edit
            llm.queue_stream(words, delay=0.4)
            await _ask(app, feishu, "when is the launch?")
            assert app.delivery is not None
            await _until(lambda: app.delivery is not None and app.delivery.waiting == 1, timeout=15)
            [draft] = feishu.visible()
            assert draft["text"] != whole and whole.startswith(draft["text"])
            assert await _rows(app, "draft_messages") == 1
        feishu.clear_edit_failures()
        # The kept reply goes out at once.
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=10.0) as again:
            await _until(lambda: feishu.visible()[0]["text"] == whole, timeout=15)
            assert again.delivery is not None and await again.delivery.sweep() is None
            assert await _rows(again, "outbox") == 0 and await _rows(again, "draft_messages") == 0
    assert feishu.visible() == [draft] and feishu.deleted == []
    assert feishu.edits[-1] == {"message_id": draft["message_id"], "msg_type": "text", "text": whole}


async def test_a_feishu_draft_of_a_turn_cut_by_a_stop_is_withdrawn_as_the_gateway_stops(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The model is still writing when the gateway stops: the turn is cut
    (it is answered at the next start), and its half-written message does
    not stay in the chat meanwhile."""
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as feishu:
        # A stop with a second to drain: the turn is cut short, no reply, none kept.
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=1.0) as app:
            llm.queue_stream(["A ", "long ", "answer ", "and ", "more."], hold_after=3)
            await _ask(app, feishu, "tell me everything")
            await _until(lambda: bool(feishu.visible()), timeout=15)
            [draft] = feishu.visible()
        assert feishu.deleted == [draft["message_id"]] and feishu.visible() == []
        again = _fast_feishu_app(tmp_path, clock, llm, feishu)
        try:
            await again.open()
            assert await _rows(again, "draft_messages") == 0
            await asyncio.wait_for(again.start(), 15)
            channel = again.channels["feishu"]
            assert isinstance(channel, FeishuChannel) and await channel.withdrawals_done(5)
            assert feishu.deleted == [draft["message_id"]]
        finally:
            await asyncio.wait_for(again.close(), 15)


async def test_a_feishu_draft_whose_reply_never_came_is_withdrawn_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Feishu could not take the draft back as the gateway stopped: the
    next start does, and answers the cut message anew (the inbox kept it):
    the chat shows that answer alone. (The test once raced that answer:
    under load it came before the draft's withdrawal was seen.)"""
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as feishu:
        # A stop with a second to drain: the turn is cut short, no reply, none kept.
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=1.0) as app:
            llm.queue_stream(["A ", "very ", "long ", "answer "] + ["and more "] * 100, delay=0.3)
            await _ask(app, feishu, "tell me everything")
            await _until(lambda: bool(feishu.visible()), timeout=15)
            feishu.fail_next(1, "internal error", status=502, times=10, on="delete")
        [draft] = feishu.visible()
        assert draft["text"].startswith("A")
        feishu.clear_failures()
        llm.queue_reply("Everything, in short.")  # the resumed turn's answer
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=10.0) as again:
            await _until(lambda: feishu.deleted == [draft["message_id"]], timeout=15)
            await _until(lambda: [m["text"] for m in feishu.visible()] == ["Everything, in short."], timeout=15)
            assert len(llm.requests) == 2
            async with asyncio.timeout(10):  # the answer's row on its way goes once Feishu has taken it
                while await _rows(again, "outbox"):
                    await asyncio.sleep(0.02)
            channel = again.channels["feishu"]
            assert isinstance(channel, FeishuChannel) and await channel.withdrawals_done(5)
            assert await _rows(again, "draft_messages") == 0


async def test_a_feishu_turn_cut_mid_draft_leaves_one_message_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Stopped with no time left while the reply shows as a draft, and
    Feishu refusing to take the draft back just then: after the restart
    the chat shows one message, the answer (the resumed turn's), and no
    half-written draft."""
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as feishu:
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu)) as app:
            llm.queue_stream(["A ", "long ", "answer ", "and ", "more."], hold_after=3)
            await _ask(app, feishu, "tell me everything")
            await _until(lambda: bool(feishu.visible()), timeout=15)
            feishu.fail_next(1, "internal error", status=502, times=10, on="delete")
        [draft] = feishu.visible()
        feishu.clear_failures()
        clock.advance(60)
        llm.queue_stream(["The ", "whole ", "answer."])
        async with running(_fast_feishu_app(tmp_path, clock, llm, feishu), drain=10.0) as again:
            await _until(lambda: [m["text"] for m in feishu.visible()] == ["The whole answer."], timeout=15)
            assert again.loop is not None and await again.loop.drain(5)
            # The reply's send ends after its edit shows: it then lets its own draft's row go.
            await asyncio.wait_for(again.bus.outbound_queue("feishu").join(), 10)
            channel = again.channels["feishu"]
            assert isinstance(channel, FeishuChannel) and await channel.withdrawals_done(5)
            assert await _rows(again, "draft_messages") == 0
    assert feishu.deleted == [draft["message_id"]] and len(llm.requests) == 2
    assert [m["text"] for m in feishu.visible()] == ["The whole answer."]
