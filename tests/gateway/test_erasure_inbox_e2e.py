"""An erasure reaches the messages a crash left waiting in the inbox and
the edits left unapplied (gateway.db's ``inbox`` and ``revisions``): the
rows name no owner, and the next start answered the erased user's words
and learnt from them. Real ``App`` on a home directory, the fake
Telegram and OpenAI servers, the real CLI; a crash is gateway.db as it
was at a moment (tests/gateway/killed.py), a restart a new ``App``."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.app import App
from gateway.cli import main
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_erasure_e2e import files_holding
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import _telegram

SECRET = "QUOKKA7731"  # in a message left waiting
EDITED = "WOMBAT5519"  # in an edit left unapplied
GROUP, ALICE, BOB = -100, 1001, 1002


def _rows(home: Path, table: str) -> list[str]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [str(p) for (p,) in db.execute(f"SELECT payload FROM {table} ORDER BY id")]


async def _left_by_a_crash(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> None:
    """Alice's words waiting when the gateway is killed: a message in the
    group and one in her private chat, each behind a turn the model never
    answers, and an edit of her answered group message; Bob's message
    waits in the group too."""
    app = _app(home, clock, llm, {"telegram": _telegram(tg)})
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        hello = tg.push_text(GROUP, ALICE, "hello there", chat_type="supergroup", mention=True)
        await tg.wait_sent(1, timeout=15)
        assert app.loop is not None and await app.loop.drain(10)
        llm.queue_hold("never sent")
        llm.queue_hold("never sent")
        tg.push_text(GROUP, ALICE, "first things first", chat_type="supergroup", mention=True)
        tg.push_text(ALICE, ALICE, "one thing before another")
        await until(lambda: len(llm.requests) == 3, timeout=15)
        tg.push_text(GROUP, BOB, "is the ferry running today?", chat_type="supergroup", mention=True)
        tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
        tg.push_text(ALICE, ALICE, f"and the spare key is {SECRET}")
        tg.push_edit(GROUP, hello["message_id"], f"hello there, my pin is {EDITED}", mention=True)
        await until(lambda: app.loop is not None and app.loop.stats.received == 7, timeout=15)
        assert app.inbox is not None
        await app.inbox.flush()
        await killed(app, home)
    finally:
        await asyncio.wait_for(app.close(timeout=0.0), 30)
    assert sum(SECRET in p for p in _rows(home, "inbox")) == 2
    assert [EDITED in p for p in _rows(home, "revisions")] == [True]


async def _restarted(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram, answered: str) -> App:
    """The next start, until the message with ``answered`` in it had its reply."""
    app = _app(home, clock, llm, {"telegram": _telegram(tg)})
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        await until(lambda: any(answered in m.text for m in tg.sent), timeout=15)
        await quiet(app)
    finally:
        await asyncio.wait_for(app.close(), 30)
    return app


async def test_forget_user_with_the_gateway_stopped_reaches_the_messages_and_edits_a_crash_left(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``myclaw memory forget --user`` after a crash: the next start
    neither answers Alice's waiting messages (group and private) nor
    applies her edit's words, and none of them is in any file; Bob's
    message waiting beside hers is still answered."""
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _left_by_a_crash(tmp_path, clock, llm, tg)
        r = await asyncio.to_thread(CliRunner().invoke, main,
                                    ["memory", "forget", "--user", f"telegram:{ALICE}", "--yes"])
        assert r.exit_code == 0, r.output
        assert "4 messages waiting to be answered" in r.output and "1 edit waiting" in r.output  # 2 begun, cut
        assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, EDITED) == []
        tg.sent.clear()  # what the test's stop (not a kill) sent
        first = len(llm.requests)
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, tg, "ferry")
    later = "\n".join(str(r) for r in llm.requests[first:])
    assert "ferry" in later and SECRET not in later and EDITED not in later
    assert "first things first" not in later and "one thing before another" not in later  # her cut turns: erased
    assert [m.chat_id for m in tg.sent] == [GROUP] and "ferry" in tg.sent[0].text  # Bob's answer, nothing of hers
    assert _rows(tmp_path, "inbox") == [] and _rows(tmp_path, "revisions") == []
    assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, EDITED) == []


async def test_forget_all_reaches_her_messages_waiting_in_other_chats_and_her_edits(
    tmp_path: Path, clock: ManualClock
) -> None:
    """``/forget all`` in her private chat while her group message waits
    behind a turn and her edit is still queued: both rows go (not only
    history and memory), so a crash right after leaves nothing of hers to
    answer or apply; her /forget all's own turn ends as usual."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            hello = tg.push_text(GROUP, ALICE, "hello there", chat_type="supergroup", mention=True)
            await tg.wait_sent(1, timeout=15)
            assert app.loop is not None and await app.loop.drain(10)
            llm.queue_hold("never sent")
            tg.push_text(GROUP, BOB, "first things first", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 2, timeout=15)
            tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
            tg.push_edit(GROUP, hello["message_id"], f"hello there, my pin is {EDITED}", mention=True)
            tg.push_text(GROUP, BOB, "is the ferry running today?", chat_type="supergroup", mention=True)
            await until(lambda: app.loop is not None and app.loop.stats.received == 5, timeout=15)
            tg.push_text(ALICE, ALICE, "/forget all")
            [asked] = (await tg.wait_sent(2, timeout=15))[-1:]
            code = re.findall(r"\b\d{4}\b", asked.text)[-1]
            tg.push_text(ALICE, ALICE, f"/forget all {code}")
            [done] = (await tg.wait_sent(3, timeout=15))[-1:]
            assert done.text.startswith("Erased for good")
            assert app.inbox is not None
            await app.inbox.flush()
            assert not any(SECRET in p or "/forget" in p for p in _rows(tmp_path, "inbox"))
            assert _rows(tmp_path, "revisions") == []
            await killed(app, tmp_path)
        finally:
            await asyncio.wait_for(app.close(timeout=0.0), 30)
        tg.sent.clear()
        first = len(llm.requests)
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, tg, "ferry")
    later = "\n".join(str(r) for r in llm.requests[first:])
    assert "ferry" in later and SECRET not in later and EDITED not in later
    assert all(m.chat_id == GROUP and SECRET not in m.text for m in tg.sent)
    assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, EDITED) == []
