"""An erasure reaches the turns the process loop holds that have no inbox
row: a scheduled job of the erased user already queued (its cron entry
goes with the erasure, but the loop held its run), and a turn a stop left
unanswered, resumed at the next start. Before, both still went to the
model after ``/forget all`` and their replies reached the chat. Real
``App``, the real scheduler, the fake Telegram and OpenAI servers; a
crash is gateway.db as it was at a moment (tests/gateway/killed.py)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet
from .test_e2e_feishu_outbox import until
from .test_erasure_e2e import files_holding
from .test_erasure_inbox_e2e import _left_by_a_crash
from .test_erasure_queued_e2e import ALICE, GROUP, _forget_all, _gateway
from .test_resume_e2e import KEY, _echo

PLUMBER = "PLUMBER8812"  # in Alice's reminder, queued in the group when she erases
CUT = "first things first"  # Alice's group message a crash cut under way, resumed at the next start
BOB = 1002


async def test_her_reminder_queued_behind_a_slow_turn_is_not_run_after_forget_all(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Bob's turn holds the group when Alice's reminder there comes due: its
    run waits behind it. She erases everything in her private chat; Bob is
    still answered, her reminder's prompt never reaches the model and
    nothing of it reaches the chat or any file."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            store, loop = app._cron_store, app.loop
            assert store is not None and app.cron is not None and loop is not None
            tg.push_text(ALICE, ALICE, "hi")  # her private chat, as Telegram knows it
            await tg.wait_sent(1, timeout=15)
            await store.add(at=clock.now() + timedelta(minutes=1), message=f"remind the team: {PLUMBER} at 5",
                            channel="telegram", chat_id=str(GROUP), user=f"telegram:{ALICE}")
            slow = llm.queue_hold("the ferry runs at noon")
            tg.push_text(GROUP, BOB, "is the ferry running today?", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 2, timeout=15)
            clock.advance(61)
            await app.cron.run_due(wait=False)  # type: ignore[attr-defined]
            await until(lambda: len(loop._queues.get(f"telegram:{GROUP}", ())) == 1, timeout=15)
            _, done = await asyncio.wait_for(_forget_all(tg, "all"), 30)
            assert done.startswith("Erased for good") and "1 scheduled job" in done, done
            slow.set()
            await until(lambda: any("ferry runs at noon" in m.text for m in tg.sent), timeout=15)
            await asyncio.wait_for(quiet(app), 30)
            await until(lambda: not app.cron._running, timeout=15)  # type: ignore[attr-defined]
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert PLUMBER not in "\n".join(str(r) for r in llm.requests)
    assert not any(PLUMBER in m.text for m in tg.sent)
    assert files_holding(tmp_path, PLUMBER) == []


async def test_her_turn_resumed_after_a_crash_is_not_answered_once_she_erased_everything(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A crash cut Alice's group turn under way; the next start resumes it
    (its row is in Tier 0, it has none in the inbox) and the model is slow
    to answer. She erases everything in her private chat meanwhile: the
    resumed turn's answer never reaches the chat nor any file; Bob's
    message waiting behind it in the group is answered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _left_by_a_crash(tmp_path, clock, llm, tg)
        first, sent = len(llm.requests), len(tg.sent)  # (tg.sent is not cleared: wait_sent counts them)
        clock.advance(60)
        slow = asyncio.Event()

        async def held(body: dict[str, Any]) -> Reply:
            if CUT in said(body):
                await slow.wait()
            return _echo(body)

        llm.responder = held
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.resumed is not None
            await until(lambda: any(CUT in said(r) for r in llm.requests[first:]), timeout=15)
            # Her private chat's turns, resumed and kept, come before her /forget all there.
            await until(lambda: any("spare key" in m.text for m in tg.sent[sent:]), timeout=15)
            _, done = await asyncio.wait_for(_forget_all(tg, "all"), 30)
            assert done.startswith("Erased for good"), done
            slow.set()
            await until(lambda: any("ferry" in m.text for m in tg.sent[sent:]), timeout=15)
            await asyncio.wait_for(quiet(app), 30)
        finally:
            slow.set()
            await asyncio.wait_for(app.close(), 30)
    assert not any(CUT in m.text for m in tg.sent[sent:])
    assert files_holding(tmp_path, CUT) == []
