"""A live reply (the first send of a fresh answer) under way when an
ordinary stop comes, end to end: a real ``App`` on a real gateway.db, the
fake Telegram taking the reply at once and holding its answer
(``slow_next``), the stop's wait for the queued replies running out
meanwhile (``close(timeout=STOP)``: STOP seconds, the 5 s of an ordinary
stop made short), and a second ``App`` on the same home.

Before, the senders were cancelled as soon as that wait ran out: the
reply Telegram had taken was kept whole in the outbox, and the next start
sent it again (Telegram has no idempotency key: the user saw it twice).
A stop now lets the send under way end (up to ``SEND_GRACE``, at most the
stop's timeout) and begins no other."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from channels.telegram import split_message
from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import KEY, _telegram_app

STOP = 2.0  # the stop's timeout: its wait for queued replies runs out after this long
QUEUED = "replies still queued at shutdown go to the outbox"  # logged as that wait runs out
# Three paragraphs of about 3,000 characters: each a Telegram message of its own (4096 at most).
LONG = "\n\n".join(f"{word} " * (3000 // (len(word) + 1)) for word in ("alpha", "bravo", "charlie"))


def _echo(body: dict[str, Any]) -> Reply:
    words = said(body)
    return Reply(content=LONG if words == "the long one, please" else "re: " + words)


async def _stop_with_the_send_under_way(app: App, answer: asyncio.Event | None) -> None:
    """Stop ``app`` while a send is under way; once the wait for queued
    replies ran out, Telegram's answer is let through (``answer``)."""
    with capture_logs() as logs:
        closing = asyncio.create_task(app.close(timeout=STOP))
        try:
            await until(lambda: any(e["event"] == QUEUED for e in logs), timeout=15)
            if answer is not None:
                answer.set()
        finally:
            await asyncio.wait_for(closing, 30)


async def _restart(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> None:
    """Start again, send what the outbox holds, stop."""
    clock.advance(60)
    async with _telegram_app(home, clock, llm, tg) as again:
        await quiet(again)
        assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
        assert await again.delivery.outbox.count() == 0


async def test_a_reply_telegram_took_as_the_stop_came_is_not_sent_again_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            answer = tg.slow_next("sendMessage")
            tg.push_text(42, 42, "hi")
            await tg.wait_sent(1, timeout=15)  # Telegram took it; its answer is not back yet
            await _stop_with_the_send_under_way(app, answer)
        await _restart(tmp_path, clock, llm, tg)
        assert tg.texts() == ["re: hi"]


async def test_a_long_reply_whose_send_the_stop_let_end_goes_out_whole_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Its second part in flight as the wait ran out: the third goes too,
    and the next start sends nothing of it again."""
    parts = split_message(LONG)
    assert len(parts) == 3
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            answer = tg.slow_next("sendMessage", after=1)
            tg.push_text(42, 42, "the long one, please")
            await tg.wait_sent(2, timeout=15)
            await _stop_with_the_send_under_way(app, answer)
        await _restart(tmp_path, clock, llm, tg)
        assert [t.strip() for t in tg.texts()] == [p.strip() for p in parts]


async def test_a_long_reply_cut_after_its_first_part_keeps_only_the_rest(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Telegram never answers the second part within the stop's grace: the
    send is cut and kept, from the part in flight on (whether Telegram
    took that one cannot be known: at least once), not from the start, so
    the first part, whose answer came back, is not sent again."""
    parts = [p.strip() for p in split_message(LONG)]
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            tg.slow_next("sendMessage", after=1)  # held until the test's fake stops
            tg.push_text(42, 42, "the long one, please")
            await tg.wait_sent(2, timeout=15)
            await _stop_with_the_send_under_way(app, None)
        await _restart(tmp_path, clock, llm, tg)
        assert [t.strip() for t in tg.texts()] == [parts[0], parts[1], parts[1], parts[2]]


async def test_a_reply_queued_behind_the_send_under_way_waits_for_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The stop begins no other send once its wait ran out: the reply
    queued behind goes to the outbox, and the next start sends it, once,
    after the one under way."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            answer = tg.slow_next("sendMessage")
            tg.push_text(42, 42, "first")
            await tg.wait_sent(1, timeout=15)
            tg.push_text(42, 42, "second")
            loop = app.loop
            assert loop is not None
            await until(lambda: loop.stats.received == 2, timeout=15)
            assert await loop.drain(15)  # answered: its reply waits on the queue behind the first's
            await _stop_with_the_send_under_way(app, answer)
        assert tg.texts() == ["re: first"]
        await _restart(tmp_path, clock, llm, tg)
        assert tg.texts() == ["re: first", "re: second"]
