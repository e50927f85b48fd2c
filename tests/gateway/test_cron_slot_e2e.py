"""A scheduled job's reply exactly once across a kill that falls between
the reply's outbox row (gateway.db) and cron's record of the run (cron.db),
end to end: the next start sends the reply from the outbox, and the
catch-up finds the slot answered (``job_replies``, written in the same
transaction as the row) and does not run the job again. Before, the user
got the reminder twice: once from the outbox, once from the re-run.

The kill is taken as the files see it: gateway.db as it was once the
reply's row was written (its send cut, ``cut_next``; cron.db's write lock
held meanwhile, so the record and the mark's clearing after it wait),
cron.db as it was before the run was recorded (nothing writes it between
the job's add and that record)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

from gateway.app import App
from gateway.cron import FALLBACK_SENT
from memory import ManualClock
from memory.clock import parse_ts
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram

from .killed import as_killed_now, crash, quiet, undo_since
from .test_resume_e2e import KEY, _echo, _telegram_app


@contextlib.asynccontextmanager
async def _killed_before_the_run_is_recorded(app: App, home: Path) -> AsyncIterator[None]:
    """The block runs a job until its reply's send is cut; then the kill,
    as the files see it: gateway.db as it is at the block's end (the
    reply's outbox row written), cron.db as it was before the block (the
    job still due). cron.db's write lock is held meanwhile: the run cannot
    be recorded (nor its mark cleared, which follows the record) before
    gateway.db is taken."""
    as_killed_now(home, "cron.db")
    holder = sqlite3.connect(home / "data" / "cron.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        as_killed_now(home)
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    await crash(app)
    undo_since(home)
    undo_since(home, "cron.db")


async def test_a_reminder_a_kill_cut_before_its_run_was_recorded_comes_once_and_is_not_run_again(
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
            async with _killed_before_the_run_is_recorded(app, tmp_path):
                cut = tg.cut_next("sendMessage")
                clock.advance(61)
                await app.cron.run_due(wait=False)  # type: ignore[attr-defined]
                await asyncio.wait_for(cut.wait(), 15)  # the reply's outbox row is written before its send
        assert [m.text for m in tg.sent] == ["re: hi"]
        assert len(llm.requests) == 2
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
            assert again._cron_store is not None and await again._cron_store.list("telegram:42") == []
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
        assert [m.text for m in tg.sent] == ["re: hi", "re: call mom"]
        assert len(llm.requests) == 2  # the catch-up found its slot answered: not run again


async def test_a_fallback_a_kill_cut_before_its_run_was_recorded_is_recorded_as_a_fallback(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The last attempt's model call fails and the job's own words are the
    reply (⏰); a kill falls before cron.db has the run. The next start
    sends it from the outbox and records the slot, as a fallback, with the
    words a live fallback run gets: ``myclaw cron list`` must not say the
    run went fine. Before, the skipped slot was recorded "ok"."""
    cron_db = tmp_path / "data" / "cron.db"
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            store = app._cron_store
            assert store is not None and app.cron is not None
            tg.push_text(42, 42, "hi")
            await tg.wait_sent(1, timeout=15)
            job = await store.add(schedule="0 * * * *", message="call mom", channel="telegram", chat_id="42",
                                  user="telegram:42", private=True)
            # Its retries spent: the next attempt is the last, with the fallback.
            with sqlite3.connect(cron_db) as db:
                db.execute("UPDATE cron_jobs SET attempts = 3, due_at = next_run_at WHERE id = ?", (job.id,))
            async with _killed_before_the_run_is_recorded(app, tmp_path):
                llm.down = Reply(content=None, status=500)
                cut = tg.cut_next("sendMessage")
                clock.advance((parse_ts(job.next_run_at) - clock.now()).total_seconds() + 60)
                await app.cron.run_due(wait=False)  # type: ignore[attr-defined]
                await asyncio.wait_for(cut.wait(), 15)
        llm.down = None
        asked = len(llm.requests)
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again._cron_store is not None
            row = await again._cron_store.get(job.id)
        assert tg.sent[-1].text.startswith("⏰ call mom\n")
        assert len(llm.requests) == asked  # not run again
        assert row is not None and row.last_status == "fallback" and row.attempts == 0
        assert row.last_error == FALLBACK_SENT  # as a live fallback run records it
