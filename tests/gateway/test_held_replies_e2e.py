"""Replies other than the model's answer under the outbox too (gateway/loop.py,
``_reply(hold=True)``; gateway/delivery.py, "A reply on its way"), end to
end: a command's answer and a scheduled job's reply are written to the
outbox before they are published, so a kill that cuts their send (the
fake Telegram holds it unanswered, ``cut_next``; gateway.db taken as the
kill leaves it) leaves them for the next start to send, once. Before,
a cut command got silence (it is not run again unasked) and a cut
reminder was lost (its run was recorded before the send)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import KEY, _echo, _telegram_app


async def test_a_command_answer_whose_send_a_kill_cut_goes_out_once_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            cut = tg.cut_next("sendMessage")
            tg.push_text(42, 42, "/help")
            await asyncio.wait_for(cut.wait(), 15)
            await killed(app, tmp_path)
        assert tg.sent == []
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(1, timeout=15)
            await quiet(again)
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
        [help_text] = [m.text for m in tg.sent]
        assert "/memory" in help_text and llm.requests == []


async def test_a_reminder_whose_send_a_kill_cut_after_its_run_was_recorded_comes_once_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            store = app._cron_store
            assert store is not None and app.cron is not None
            tg.push_text(42, 42, "hi")  # the chat, as Telegram knows it
            await tg.wait_sent(1, timeout=15)
            await store.add(at=clock.now() + timedelta(minutes=1), message="call mom", channel="telegram",
                            chat_id="42", user="telegram:42", private=True)
            cut = tg.cut_next("sendMessage")
            clock.advance(61)
            await app.cron.run_due(wait=False)  # type: ignore[attr-defined]
            await asyncio.wait_for(cut.wait(), 15)
            async with asyncio.timeout(15):  # its run recorded (a one-time job: gone), its send still cut
                while await store.list("telegram:42"):
                    await asyncio.sleep(0.02)
            await killed(app, tmp_path)
        assert [m.text for m in tg.sent] == ["re: hi"]
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
        assert [m.text for m in tg.sent] == ["re: hi", "re: call mom"]
        assert len(llm.requests) == 2  # sent as written: the job did not run again


async def test_a_command_a_kill_left_waiting_gets_a_note_asking_for_it_again_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """/memory waits behind a slow turn when a kill comes (no stop runs to
    write its note): the inbox kept it, and the next start tells the user
    it was not done (not run again unasked), once, after the cut turn's
    answer. Before, it was dropped at start in silence."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "is the launch still on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "/memory")
            loop = app.loop
            assert loop is not None
            await until(lambda: loop.stats.received == 2, timeout=15)
            tg.cut_next("sendMessage")  # the stop's own note never reaches the chat: as a kill
            await killed(app, tmp_path)
        assert tg.sent == []
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
        answer, note = [m.text for m in tg.sent]
        assert answer == "re: is the launch still on Thursday?"
        assert "/memory" in note and "send it again" in note
