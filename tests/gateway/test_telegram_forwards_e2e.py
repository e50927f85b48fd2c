"""Forwarded messages end to end: the fake Telegram server sends a comment
and a burst of forwards (``forward_origin``) as a client does, one update
each; the App answers once, through the OpenAI-compatible fake. The model
reads the forwarded block with its authors, Tier 0 keeps it in that form
(memory then knows whose words they were), and the same burst delivered
again after a restart is not answered twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram, location, origin_channel, origin_user

from .test_e2e_feishu import _app, _until
from .test_quoted_e2e import _rows, _telegram

FEB_27 = int(datetime(2026, 2, 27, 9, 30, tzinfo=UTC).timestamp())
BLOCK = ("[forwarded: 3 messages, sent 2026-02-27]\nDana Kim: launch moves to Friday\n"
         "Dana Kim: QA needs two more days\nAcme Ops: freeze starts Thursday")


def answering(body: dict[str, Any]) -> Reply:
    return Reply(content=f"noted ({len(said(body))} chars)")


async def test_a_burst_of_forwards_is_answered_once_with_its_authors(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-fwd-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(9, 9, "what does this mean for my week?")
            first = tg.last_update_id
            dana = origin_user(5, "Dana", "Kim", date=FEB_27)
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=dana)
            tg.push_text(9, 9, "QA needs two more days", forward_origin=dana)
            tg.push_text(9, 9, "freeze starts Thursday", forward_origin=origin_channel(-1007, "Acme Ops", 4, date=FEB_27))
            await tg.wait_sent(1, timeout=10)
            content = text_of(llm.chat_requests()[0]["messages"][-1]["content"])
            assert f"{BLOCK}\n\nwhat does this mean for my week?" in content
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)

        # A crash before Telegram heard the burst was handled: it comes again,
        # one update each; it is gathered into the same message and ignored.
        assert tg.redeliver(first) == 4
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_media(9, 9, "location", content=location(52.52, 13.405))
            await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            assert app.loop.stats.redelivered == 1
        finally:
            await asyncio.wait_for(app.close(), 15)
        assert len(tg.sent) == 2 and len(llm.requests) == 2
        assert "[location 52.52000, 13.40500]" in text_of(llm.chat_requests()[1]["messages"][-1]["content"])
    # Tier 0 (and memory, which learns from it) keeps whose words they were.
    assert _rows(tmp_path) == [f"{BLOCK}\n\nwhat does this mean for my week?", "[location 52.52000, 13.40500]"]


async def test_an_edit_of_the_comment_sent_with_forwards_changes_their_message(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The comment is stored at the end of the burst's message, under the
    burst's id: its edit changes those words there, and the forwards (a
    recording's transcript too, which the channel never saw) stay."""
    transcribing = {"model": "test-model", "transcription": {"enabled": True, "model": "whisper-1"}}
    async with FakeOpenAI(api_key="sk-fwd-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=transcribing)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            comment = tg.push_text(9, 9, "what does she wnat?")
            dana = origin_user(5, "Dana", "Kim", date=FEB_27)
            tg.push_text(9, 9, "launch moves to Friday", forward_origin=dana)
            tg.push_voice(9, 9, b"OggS" + bytes(200) + b"SAY:bring the slides", forward_origin=dana)
            await tg.wait_sent(1, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            tg.push_edit(9, comment["message_id"], "what does she want?")
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 1)
            tg.push_edit(9, comment["message_id"], "what does she want from me?")  # a second edit: from the first
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 2)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path) == ["[forwarded: 2 messages, sent 2026-02-27]\nDana Kim: launch moves to Friday\n"
                               "Dana Kim: [voice] bring the slides\n\nwhat does she want from me?"]
