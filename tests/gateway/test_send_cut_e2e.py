"""A reply whose send a kill cut goes out at the next start (gateway/delivery.py,
"A reply on its way"), end to end: the platform's fake holds the send
unanswered (``cut_next``), gateway.db is taken as it is at that moment
(the reply's Tier 0 row and its outbox row written), the gateway stops
with no drain and the files are put back as the kill left them; a new
``App`` on the same home sends the reply from the outbox, without asking
the model again. Found by scripts/chaos_kill.py: such a message was never
answered (its Tier 0 row said it was)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.app import App
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import killed, quiet, running
from .test_e2e_feishu import feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import ALICE, Gateway
from .test_resume_e2e import KEY, _echo, _history, _telegram_app
from .test_streaming_e2e import _ask, _fast_feishu_app, _rows, _until

QUESTION = "is the launch on Thursday?"
ANSWER = "re: is the launch on Thursday?"


async def _outbox(app: App) -> list[tuple[str, str]]:
    assert app.sessions is not None
    return [(str(r[0]), str(r[1])) for r in await app.sessions.db.fetchall("SELECT text, sending FROM outbox")]


async def test_a_telegram_reply_whose_send_a_kill_cut_goes_out_once_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            cut = tg.cut_next("sendMessage")
            tg.push_text(42, 42, QUESTION)
            await asyncio.wait_for(cut.wait(), 15)
            # On its way: the reply's row says answered, its outbox row says not sent yet.
            assert [r for r, _, _ in _history(tmp_path)] == ["user", "assistant"]
            [(text, sending)] = await _outbox(app)
            assert text == ANSWER and sending
            await killed(app, tmp_path)
        assert tg.sent == []

        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(1, timeout=15)
            await quiet(again)
            assert again.resumed is not None and again.resumed.answered == []  # not asked again: sent as written
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
            assert await _outbox(again) == []
        assert [(m.chat_id, m.text) for m in tg.sent] == [(42, ANSWER)]
        assert len(llm.requests) == 1

        async with _telegram_app(tmp_path, clock, llm, tg) as third:  # sent: the next start leaves it alone
            await quiet(third)
        assert len(tg.sent) == 1 and len(llm.requests) == 1


async def test_a_telegram_reply_telegram_took_before_the_kill_comes_at_least_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Telegram has no idempotency key: a kill between Telegram taking the
    reply and the outbox row's removal sends it again at the next start (at
    least once beats never; the window is one write wide, logged)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            cut = tg.cut_next("sendMessage", accepted=True)
            tg.push_text(42, 42, QUESTION)
            await asyncio.wait_for(cut.wait(), 15)
            await killed(app, tmp_path)
        assert [m.text for m in tg.sent] == [ANSWER]
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        assert {m.text for m in tg.sent} == {ANSWER} and len(llm.requests) == 1


@pytest.mark.parametrize("accepted", [False, True], ids=["before-feishu-took-it", "after-feishu-took-it"])
async def test_a_feishu_reply_whose_send_a_kill_cut_is_shown_exactly_once(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, accepted: bool  # noqa: F811
) -> None:
    """Sent again under the same ``uuid``: Feishu drops a repeat of one it
    took within the hour, so the chat shows the reply once either way."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            app = await g.start()
            cut = feishu.cut_next(accepted=accepted)
            await g.push(feishu.message_event("when is the review?", chat_id="oc_alice", open_id=ALICE))
            await asyncio.wait_for(cut.wait(), 15)
            await killed(app, tmp_path)
            app = await g.start()
            await _until(lambda: len(feishu.sent) == 1, timeout=15)
            await g.settled()
            assert app.delivery is not None and await asyncio.wait_for(app.delivery.sweep(), 10) is None
            assert app.resumed is not None and app.resumed.answered == []
            assert await g.waiting() == []
        finally:
            await g.stop()
        assert [m["text"] for m in feishu.visible()] == ["re: when is the review?"]
        assert feishu.deduplicated == (1 if accepted else 0) and len(llm.requests) == 1


@pytest.mark.parametrize("accepted", [False, True], ids=["edit-not-made", "edit-made"])
async def test_a_feishu_draft_whose_reply_a_kill_cut_becomes_the_reply_at_the_next_start(
    tmp_path: Path, clock: ManualClock, accepted: bool
) -> None:
    """The draft message already shows part of the answer: the next start
    edits it into the reply, no second message, nothing withdrawn."""
    words = ["The ", "launch ", "moved ", "to ", "Thursday, ", "after ", "the ", "review."]
    whole = "".join(words)
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as fake:
        async with running(_fast_feishu_app(tmp_path, clock, llm, fake)) as app:
            cut = fake.cut_next(on="edit", text=whole, accepted=accepted)
            llm.queue_stream(words, delay=0.4)
            await _ask(app, fake, "when is the launch?")
            await asyncio.wait_for(cut.wait(), 15)
            [draft] = fake.visible()
            await killed(app, tmp_path)
        edits = len(fake.edits)
        async with running(_fast_feishu_app(tmp_path, clock, llm, fake), drain=10.0) as again:
            await _until(lambda: len(fake.edits) > edits, timeout=15)  # edited again: the first edit's fate is unknown
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
            assert await _rows(again, "outbox") == 0 and await _rows(again, "draft_messages") == 0
    assert [m["message_id"] for m in fake.visible()] == [draft["message_id"]] and fake.deleted == []
    assert fake.visible()[0]["text"] == whole and len(llm.requests) == 1


async def test_a_feishu_drafted_reply_whose_outbox_row_outlived_a_kill_is_still_shown_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The reply was edited into its draft message; its draft row and its
    outbox row go in one transaction, so a kill cannot leave the outbox row
    without the draft row (the next start sent it as a new message: the
    reply shown twice). gateway.db refuses the removal (a trigger), and the
    gateway is killed with the send done and that removal not."""
    import sqlite3

    words = ["The ", "launch ", "moved ", "to ", "Thursday, ", "after ", "the ", "review."]
    whole = "".join(words)
    async with FakeOpenAI(api_key=KEY) as llm, FakeFeishu() as fake:
        async with running(_fast_feishu_app(tmp_path, clock, llm, fake)) as app:
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
                db.execute("CREATE TRIGGER full BEFORE DELETE ON outbox "
                           "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
            llm.queue_stream(words, delay=0.4)
            await _ask(app, fake, "when is the launch?")
            delivery = app.delivery
            assert delivery is not None
            await _until(lambda: bool(delivery._unremoved), timeout=15)  # sent; its row's removal refused
            [draft] = fake.visible()
            assert draft["text"] == whole
            await killed(app, tmp_path)
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("DROP TRIGGER full")  # space is back
        async with running(_fast_feishu_app(tmp_path, clock, llm, fake), drain=10.0) as again:
            assert again.delivery is not None and await asyncio.wait_for(again.delivery.sweep(), 10) is None
            assert await _rows(again, "outbox") == 0 and await _rows(again, "draft_messages") == 0
    assert [m["message_id"] for m in fake.visible()] == [draft["message_id"]] and fake.deleted == []
    assert fake.visible()[0]["text"] == whole and len(llm.requests) == 1
