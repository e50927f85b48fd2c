"""Streamed replies end to end (``agent.streaming``): the fake LLM streams
server-sent events slowly, the gateway shows the reply as Telegram drafts
(``sendMessageDraft``) while it is written and then sends it whole; a
quick reply, a group, a scheduled job and a broken stream each behave."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import ALICE, ENCRYPT_KEY, _app, _feishu_section, _until
from .test_quoted_e2e import _telegram

KEY = "sk-stream-e2e-0123456789"
# Drafts from the first piece on, one per piece at most: the pieces come
# 0.3 s apart, further apart than the interval, so each one is a draft.
STREAM: dict[str, Any] = {"agent": {"model": "test-model", "streaming": {"delay": "0s", "interval": "0.2s"}}}
PIECES = ["The ", "launch ", "moved ", "to ", "**Thursday**."]


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
    assert llm.requests[0]["stream"] is True
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
    assert llm.requests[0]["stream"] is True and reply.text == "Quick answer." and tg.drafts == []


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
    assert llm.requests[0].get("stream") is True and "stream" not in llm.requests[1]


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
