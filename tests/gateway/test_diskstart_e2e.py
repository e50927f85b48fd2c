"""A gateway started on a full disk comes up (gateway/app.py ``App.start``),
end to end: the real App, the fake Telegram server and model on
127.0.0.1, a real gateway.db whose writes fail (``PRAGMA query_only`` on
the gateway's own connection, SQLite's SQLITE_READONLY; or a full disk's
refusal of the statements named, tests/disk.py). Before, the start's
first delete (the inbox rows of turns already begun) raised and the
gateway did not come up at all. Now it answers what it can, keeps what it
could not delete, says so once by type and code, and catches up when
there is room; nothing is answered twice."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from gateway.app import App
from gateway.logging import configure_logging
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet, running
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_quoted_e2e import _telegram
from .test_resume_e2e import KEY, _echo, _telegram_app

FIRST, SECOND = "is the launch still on Thursday?", "and who brings the slides?"


async def _cut_with_one_waiting(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> None:
    """A turn cut by a kill, a second message waiting behind it in the inbox."""
    async with _telegram_app(home, clock, llm, tg) as app:
        llm.queue_hold("never sent")
        tg.push_text(42, 42, FIRST)
        await until(lambda: len(llm.requests) == 1, timeout=15)
        tg.push_text(42, 42, SECOND)
        loop = app.loop
        assert loop is not None
        await until(lambda: loop.stats.received == 2, timeout=15)
        await killed(app, home)
    assert tg.sent == []


async def test_a_gateway_started_on_a_read_only_gateway_db_comes_up_and_answers_once_there_is_room(
    tmp_path: Path, clock: ManualClock
) -> None:
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _cut_with_one_waiting(tmp_path, clock, llm, tg)
        clock.advance(60)
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            assert app.sessions is not None and app.inbox is not None and app.loop is not None
            app.inbox.drop_retry = app.loop.mark_retry = 0.05  # tried again often: the test frees the space
            await app.sessions.db.write("PRAGMA query_only = 1")  # every write from here fails
            await asyncio.wait_for(app.start(), 15)  # raised: the gateway did not come up
            loop = app.loop
            assert loop is not None and app.channels
            # Both answered, held: nothing durable can say so (sent now, a restart would answer them again).
            await until(lambda: loop.stats.held >= 1, timeout=15)
            await asyncio.sleep(0.3)
            assert tg.sent == [] and await app.inbox.count() == 2
            await app.sessions.db.write("PRAGMA query_only = 0")  # space is back: the same gateway goes on
            await tg.wait_sent(2, timeout=15)
            await quiet(app)
            inbox = app.inbox
            count = 2
            while count:  # the begun row, kept by the refused delete, goes too
                await asyncio.sleep(0.05)
                count = await asyncio.wait_for(inbox.count(), 5)
        finally:
            await asyncio.wait_for(app.close(), 30)
        async with _telegram_app(tmp_path, clock, llm, tg) as third:  # nothing left to answer
            await quiet(third)
            assert third.resumed is not None and third.resumed.answered == []
            assert third.redelivered is not None and third.redelivered.answered == []
        assert [m.text for m in tg.sent] == [f"re: {FIRST}", f"re: {SECOND}"]
        assert len(llm.requests) == 3
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    [kept] = [e for e in events if e["event"].startswith("inbox rows not to be answered could not be deleted")]
    assert kept["level"] == "error" and kept["sqlite_error"] == "SQLITE_READONLY"
    assert not any(FIRST in line or SECOND in line for line in stream.getvalue().splitlines())


async def test_a_gateway_whose_housekeeping_writes_a_full_disk_refuses_comes_up_and_answers(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The writes before any message is answered that are housekeeping,
    not the answer: memory.db's import lease (the files the file store
    wrote while memory was off), recent files past the day, cron.db's
    catch-up. Each refused raised, and the gateway did not come up."""
    from tests.disk import refuse

    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    data = tmp_path / "data"
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        more = {"cron": {"enabled": True}}
        async with running(_app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, **more)) as app:
            tg.push_document(42, 42, b"budget 40k\n", mime_type="text/plain", file_name="notes.txt", caption="budget?")
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.recent_files is not None
            await app.recent_files.flush()
        clock.advance(60 * 60 * 25)  # the file's day is over; the daily compression's slot passed
        refuse(data / "memory.db", "leases", "BEFORE INSERT ON job_leases")
        refuse(data / "gateway.db", "files", "BEFORE DELETE ON recent_files")
        refuse(data / "cron.db", "jobs", "BEFORE UPDATE ON cron_jobs")
        async with running(_app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, **more)) as again:
            assert again.channels
            tg.push_text(42, 42, FIRST)
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        assert tg.texts(42)[-1] == f"re: {FIRST}"
    errors = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith('{"')]
    said = {e["event"] for e in errors if e["level"] == "error"}
    assert {"memory files not imported at start (memory.db cannot be written); the next start or `myclaw memory "
            "migrate` imports them",
            "recent files past the day not deleted at start (gateway.db cannot be written); the sweeper tries again",
            "cron: jobs missed while down not run at start (cron.db cannot be written); the poll tries again"} <= said
