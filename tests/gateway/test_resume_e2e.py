"""A message whose turn a stop cut is answered after the restart
(gateway/resume.py), end to end: the model holds its answer, the gateway
stops without draining (``close(timeout=0)``: the turn is cancelled, as a
crash ends it; the platform is told it has the message, as the next poll
or the webhook's answer tells it), and a new ``App`` on the same home
answers it once, from the same Tier 0 row."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gateway.app import App
from memory import Category, ManualClock, NewMemory
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said, split_user_content, text_of
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app, feishu  # noqa: F401 (a fixture)
from .killed import crash, killed, quiet, running
from .test_e2e_feishu_outbox import ALICE, Gateway, until
from .test_quoted_e2e import _telegram
from .test_telegram_forwards_e2e import FEB_27

KEY = "sk-resume-e2e-0123456789"


def _history(home: Path) -> list[tuple[str, str, str]]:
    """(role, message id, words) of every Tier 0 row, in order."""
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [(r, m, c) for r, m, c in db.execute("SELECT role, message_id, content FROM session_messages ORDER BY id")]


def _echo(body: dict[str, object]) -> Reply:
    return Reply(content="re: " + said(body))  # type: ignore[arg-type]


def _telegram_app(
    home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram
) -> contextlib.AbstractAsyncContextManager[App]:
    """A gateway on ``home``, started; stopped as a crash stops it unless the block stopped it."""
    return running(_app(home, clock, llm, {"telegram": _telegram(tg)}))


async def test_a_telegram_message_cut_by_a_crash_is_answered_once_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "is the launch still on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await crash(app)
        assert tg.sent == []
        [(role, mid, words)] = _history(tmp_path)
        assert role == "user" and words == "is the launch still on Thursday?"

        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            [reply] = await tg.wait_sent(1, timeout=15)
            await quiet(again)
            assert again.resumed is not None and [r.message_id for r in again.resumed.answered] == [mid]
        assert reply.chat_id == 42 and reply.text == "re: is the launch still on Thursday?"
        # Asked once: the stored row is the question, not also in the history before it.
        prompt = llm.chat_requests()[1]["messages"]
        assert sum("launch still on Thursday" in str(m["content"]) for m in prompt) == 1
        assert _history(tmp_path) == [("user", mid, "is the launch still on Thursday?"),
                                      ("assistant", mid, "re: is the launch still on Thursday?")]

        # Answered now: the next start leaves it alone.
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
            assert third.resumed is not None and third.resumed.answered == []
        assert len(tg.sent) == 1 and len(llm.requests) == 2 and len(_history(tmp_path)) == 2


async def test_a_message_older_than_the_window_gets_nothing(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "are you there?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await crash(app)
        clock.advance(11 * 60)  # gateway.resumeWithinMinutes is 10 by default
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.resumed is not None and again.resumed.answered == []
            [(row, why)] = again.resumed.skipped
            assert row.content == "are you there?" and why == "older than gateway.resumeWithinMinutes"
        assert tg.sent == [] and len(llm.requests) == 1
        assert [r[0] for r in _history(tmp_path)] == ["user"]


async def test_a_feishu_message_cut_by_a_crash_is_answered_once_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            await g.start()
            llm.queue_hold()
            event = feishu.message_event("what did we decide about pricing?", chat_id="oc_alice", open_id=ALICE)
            await g.push(event)  # acknowledged: Feishu will not send it again
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await g.stop(timeout=0.0)
            assert feishu.sent == []
            app = await g.start()
            await until(lambda: len(feishu.sent) == 1, timeout=15)
            await g.settled()
            assert app.resumed is not None and len(app.resumed.answered) == 1
        finally:
            await g.stop()
        mid = event["event"]["message"]["message_id"]
        assert [m["text"] for m in feishu.visible()] == ["re: what did we decide about pricing?"]
        assert _history(tmp_path) == [("user", mid, "what did we decide about pricing?"),
                                      ("assistant", mid, "re: what did we decide about pricing?")]


async def test_a_reply_waiting_in_the_outbox_goes_out_once_not_answered_again(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu
) -> None:
    """The reply was written but could not go out (Feishu down), then the
    gateway died. Its row is gone too, as a build that wrote it after the
    send could leave it: the outbox row alone says the message is answered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            await g.start()
            feishu.fail_next(1, "internal error", status=500)  # Feishu down for the reply (sent once, kept)
            await g.push(feishu.message_event("when is the review?", chat_id="oc_alice", open_id=ALICE))
            await g.settled()
            assert [t for _, t in await g.waiting()] == ["re: when is the review?"]
            await g.stop(timeout=0.0)
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
                db.execute("DELETE FROM session_messages WHERE role = 'assistant'")
            app = await g.start()
            await until(lambda: len(feishu.sent) == 1, timeout=15)
            await g.settled()
            assert app.resumed is not None and app.resumed.answered == []
            assert [why for _, why in app.resumed.skipped] == ["its reply waits in the outbox"]
            assert app.delivery is not None and await app.delivery.sweep() is None
        finally:
            await g.stop()
        assert [m["text"] for m in feishu.visible()] == ["re: when is the review?"]
        assert len(llm.requests) == 1


async def test_a_message_answered_with_an_apology_is_not_answered_again_after_a_crash(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The model failed, the user read the apology, then the gateway died:
    the apology was their one answer, the next start does not add another."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_error(400, body="unsupported parameter")  # not retried: the apology at once
            tg.push_text(42, 42, "what's on my list today?")
            [apology] = await tg.wait_sent(1, timeout=15)
            await crash(app)
        assert apology.text.startswith("Sorry")
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.resumed is not None and again.resumed.answered == []
            [(row, why)] = again.resumed.skipped
            assert row.content == "what's on my list today?" and why == "answered with an apology"
        assert len(tg.sent) == 1 and len(llm.requests) == 1
        # Tier 0 keeps the question alone: the apology is not part of the conversation.
        assert [(r, w) for r, _, w in _history(tmp_path)] == [("user", "what's on my list today?")]


def _obeying(body: dict[str, Any]) -> Reply:
    """A model that does what the message's text says: "remember: X" saves X."""
    if body["messages"][-1]["role"] == "tool":
        return Reply(content="Saved.")
    text = text_of(body["messages"][-1]["content"])
    if "remember:" in text:
        fact = text.rsplit("remember:", 1)[1].split("\n", 1)[0].strip()
        return Reply(content=None, tool_calls=[{"name": "memory_save", "arguments": {"content": fact}}])
    return Reply(content="ok")


async def test_a_forwarded_message_cut_by_a_crash_is_answered_as_the_forward_it_was(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A comment with forwards, cut by a crash: the resumed turn reads what
    the first one did (the same words, the same memories recalled, the same
    tools), and a fact the forward makes the model save is cited as the
    forward's, not as the user's own ("told by you")."""
    async with FakeOpenAI(api_key=KEY, responder=_obeying) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            engine = app.backend.engine  # type: ignore[attr-defined]
            await engine.add(NewMemory(owner="telegram:9", content="Dana Kim runs the Friday launch",
                                       category=Category.EVENT))
            llm.queue_hold()
            tg.push_text(9, 9, "what does this mean for my week?")
            dana = origin_user(5, "Dana", "Kim", date=FEB_27)
            tg.push_text(9, 9, "remember: the launch moves to Friday", forward_origin=dana)
            tg.push_text(9, 9, "freeze starts Thursday", forward_origin=dana)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await crash(app)
        assert tg.sent == []

        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(1, timeout=15)
            await quiet(again)
            assert again.resumed is not None and len(again.resumed.answered) == 1
        first, resumed = llm.chat_requests()[0], llm.chat_requests()[1]
        assert split_user_content(text_of(first["messages"][-1]["content"])) == split_user_content(
            text_of(resumed["messages"][-1]["content"]))
        assert "Dana Kim runs the Friday launch" in text_of(resumed["messages"][-1]["content"])
        assert [t["function"]["name"] for t in first.get("tools", [])] == [
            t["function"]["name"] for t in resumed.get("tools", [])]
        [saved] = [m["content"] for r in llm.requests for m in r["messages"] if m["role"] == "tool"]
        assert "from a message you forwarded on Telegram]" in saved and "told by you" not in saved


def _quote(body: dict[str, Any]) -> str:
    content = text_of(body["messages"][-1]["content"])
    return content[content.index("<quoted"):content.index("</quoted>")] if "<quoted" in content else ""


async def test_a_reply_to_a_message_cut_by_a_crash_is_answered_with_what_it_replies_to(
    tmp_path: Path, clock: ManualClock
) -> None:
    """In a private chat a reply quotes the bot's words or the user's own
    (or a post they chose to bring): kept with the row until answered, the
    resumed turn reads the same quote. In a group the quote may be another
    member's words, never kept: that message is not answered blind."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            tg.push_text(42, 42, "is the launch on Thursday?")
            await tg.wait_sent(1, timeout=15)
            llm.queue_hold()
            tg.push_text(42, 42, "why Thursday?", reply_to_bot=True, quote="re: is the launch")
            await until(lambda: len(llm.requests) == 2, timeout=15)
            group = -100500
            alice = tg.push_text(group, 7, "we ship Friday", chat_type="supergroup", first_name="Alice")
            llm.queue_hold()
            tg.push_text(group, 8, "is that right?", chat_type="supergroup", first_name="Bob", mention=True,
                         reply_to=alice)
            await until(lambda: len(llm.requests) == 3, timeout=15)
            await crash(app)
        assert len(tg.sent) == 1
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            [_, reply] = await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.resumed is not None and [r.content for r in again.resumed.answered] == ["why Thursday?"]
            assert [(r.content, why) for r, why in again.resumed.skipped] == [
                ("is that right?", "not kept whole (a job's, a group's quote, or from before)")]
        assert reply.text == "re: why Thursday?" and len(llm.requests) == 4
        assert _quote(llm.chat_requests()[3]) == _quote(llm.chat_requests()[1]) != ""


async def test_a_message_sent_while_the_gateway_was_down_does_not_hide_the_cut_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The user asked again while the gateway was down: at the start both
    are answered, once each, the cut one first (the new one's row must not
    make it look answered, nor be taken for a cut turn itself)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "is the launch on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await crash(app)
        tg.push_text(42, 42, "hello? are you there?")  # while down: the first poll brings it
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.resumed is not None and [r.content for r in again.resumed.answered] == [
                "is the launch on Thursday?"]
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?", "re: hello? are you there?"]
        assert [r for r, _, _ in _history(tmp_path)] == ["user", "assistant", "user", "assistant"]


async def test_a_resumed_turn_over_the_rate_limit_is_not_tried_again_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Two turns of one user cut (their private chat, a group): resumed
    under a limit of one a minute, one is answered and the other refused
    with the limit's note. That was its answer: a restart within the
    window answered it again (a fresh limiter), after the note."""
    limited = {"gateway": {"host": "127.0.0.1", "port": 0, "rateLimit": {"perMinute": 1}}}
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "is the launch still on Thursday?")
            tg.push_text(-100500, 42, "who brings the slides?", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 2, timeout=15)
            await crash(app)
        assert tg.sent == []

        clock.advance(60)
        async with running(_app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, **limited), drain=10.0) as app:
            await tg.wait_sent(2, timeout=15)
            await quiet(app)
        assert app.resumed is not None and len(app.resumed.answered) == 2
        answered = len(llm.requests)
        assert answered == 3  # one resumed turn reached the model; the other got the note
        notes = [m for m in tg.sent if not m.text.startswith("re: ")]
        assert len(notes) == 1

        clock.advance(60)
        async with running(_app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, **limited), drain=10.0) as app:
            await quiet(app)
        assert app.resumed is not None and app.resumed.answered == []
        assert len(llm.requests) == answered and len(tg.sent) == 2


async def test_a_message_queued_behind_a_cut_turn_is_answered_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Two questions in a row; the model is slow on the first and the
    gateway stops (SIGTERM past its timeout, or a crash) with the second
    still waiting its turn: taken from Telegram (its update confirmed), not
    yet in Tier 0. After the restart each is answered, once, in order."""
    for stop in (1.0, 0.0):  # a stop past its drain timeout; a crash
        home = tmp_path / f"stop-{stop}"
        home.mkdir()
        async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
            async with _telegram_app(home, clock, llm, tg) as app:
                llm.queue_hold("never sent")
                tg.push_text(42, 42, "is the launch still on Thursday?")
                await until(lambda: len(llm.requests) == 1, timeout=15)
                tg.push_text(42, 42, "and who brings the slides?")
                assert app.loop is not None
                loop = app.loop
                await until(lambda: loop.stats.received == 2, timeout=15)
                await asyncio.wait_for(app.close(timeout=stop), 30)
            assert tg.sent == []
            clock.advance(60)
            async with _telegram_app(home, clock, llm, tg) as again:
                await tg.wait_sent(2, timeout=15)
                await quiet(again)
            assert [m.text for m in tg.sent] == ["re: is the launch still on Thursday?", "re: and who brings the slides?"]
            # The second was written at the stop, after the first, and is answered knowing the first's reply.
            assert [r for r, _, _ in _history(home)] == ["user", "user", "assistant", "assistant"]
            assert "re: is the launch still on Thursday?" in str(llm.last_chat()["messages"])


async def test_a_command_a_stop_left_unanswered_gets_a_note_asking_for_it_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """/export waiting behind a slow turn when the gateway stops: commands
    are kept out of Tier 0 and not run again unasked, but the user hears
    it was not done (at the stop, or from the outbox at the next start),
    once, rather than nothing."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold("never sent")
            tg.push_text(42, 42, "is the launch still on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "/export")
            assert app.loop is not None
            loop = app.loop
            await until(lambda: loop.stats.received == 2, timeout=15)
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        texts = [m.text for m in tg.sent]
        assert "re: is the launch still on Thursday?" in texts and len(texts) == 2
        [note] = [t for t in texts if not t.startswith("re: ")]
        assert "/export" in note and "send it again" in note and tg.documents == []
        assert [r for r, _, _ in _history(tmp_path)] == ["user", "assistant"]  # the command is not in Tier 0


async def test_a_reminder_whose_turn_a_stop_cut_comes_once_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A one-time job's model call is under way when the gateway stops
    past its timeout: nothing of it is in Tier 0 (a job's prompt is written
    once the model answered), so it is not a cut turn; the scheduler runs
    it again at the next start, and the chat gets it once."""
    from datetime import timedelta

    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            assert app._cron_store is not None and app.cron is not None
            tg.push_text(42, 42, "hi")  # the chat, as Telegram knows it
            await tg.wait_sent(1, timeout=15)
            await app._cron_store.add(at=clock.now() + timedelta(minutes=1), message="call mom", channel="telegram",
                                      chat_id="42", user="telegram:42", private=True)
            llm.queue_hold("never sent")
            clock.advance(61)
            await app.cron.run_due(wait=False)  # type: ignore[attr-defined]
            await until(lambda: len(llm.requests) == 2, timeout=15)
            await asyncio.wait_for(app.close(timeout=1.0), 30)
        assert len(tg.sent) == 1
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.resumed is not None and again.resumed.answered == []
            assert again._cron_store is not None and await again._cron_store.list("telegram:42") == []
        async with _telegram_app(tmp_path, clock, llm, tg) as third:
            await quiet(third)
        assert [m.text for m in tg.sent] == ["re: hi", "re: call mom"]


async def test_a_cron_job_missed_while_down_does_not_hide_the_cut_turn_of_its_chat(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Found by scripts/chaos_kill.py: the scheduler's catch-up at start (a
    job whose minute passed while the gateway was down) ran before the cut
    turns were looked for, and its rows, written in the same chat, left the
    cut message no longer its chat's last row: never answered. Now both are
    answered, once each, the cut turn first."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            assert app._cron_store is not None
            await app._cron_store.add(message="how is the garden?", channel="telegram", chat_id="42",
                                      user="telegram:42", schedule="* * * * *", job_id="garden")
            llm.queue_hold()
            tg.push_text(42, 42, "is the launch on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await crash(app)
        clock.advance(120)  # the job's minute passed while down: it runs once at the start
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            assert again.resumed is not None and [r.content for r in again.resumed.answered] == [
                "is the launch on Thursday?"]
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?", "re: how is the garden?"]


@pytest.mark.parametrize("end", ["stop", "kill"])
async def test_messages_queued_behind_a_cut_turn_are_answered_after_the_restart(
    tmp_path: Path, clock: ManualClock, end: str
) -> None:
    """The user sent two more messages while the model wrote the first
    reply; Telegram was told the gateway has them (the next poll). A stop
    with no time left (``close(timeout=0)``) writes the waiting ones to
    Tier 0 (ProcessLoop._park); a kill runs no stop, and the durable inbox,
    written before Telegram's offset passed them, has them (found by
    scripts/chaos_kill.py). Either way all three are answered after the
    restart, the cut turn first, in order, once."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "is the launch on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "and who runs the demo?")
            tg.push_text(42, 42, "also, book the room")
            await until(lambda: tg.pending_updates == 0, timeout=15)  # confirmed: Telegram will not send them again
            await (crash(app) if end == "stop" else killed(app, tmp_path))
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            with contextlib.suppress(TimeoutError):
                await tg.wait_sent(3, timeout=5)
            await quiet(again)
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?", "re: and who runs the demo?",
                                             "re: also, book the room"]
        roles = [r for r, _, _ in _history(tmp_path)]
        if end == "stop":  # the stop wrote the waiting rows before their replies (the prompt reads them in order)
            assert sorted(roles) == ["assistant"] * 3 + ["user"] * 3
        else:
            assert roles == ["user", "assistant"] * 3
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as third:  # answered once: nothing again
            await quiet(third)
            assert third.inbox is not None and await third.inbox.count() == 0
        assert len(tg.sent) == 3


async def test_a_reply_sent_whose_row_could_not_be_written_is_not_answered_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Found by scripts/chaos_kill.py --disk-full: the reply's Tier 0 row
    failed (the disk full), the reply went out all the same, and the next
    start took the message for a cut turn and answered it a second time.
    The user row is marked answered instead (an update, which a full disk
    still takes where an insert fails)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # only the reply's row fails, for real
                db.execute("CREATE TRIGGER full BEFORE INSERT ON session_messages WHEN NEW.role = 'assistant' "
                           "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
            tg.push_text(42, 42, "is the launch on Thursday?")
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            await crash(app)
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("DROP TRIGGER full")  # space is back
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.resumed is not None and again.resumed.answered == []
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?"]


async def test_after_a_stop_the_next_turn_reads_each_answer_after_its_question(tmp_path: Path, clock: ManualClock) -> None:
    """A stop with a message queued behind a cut turn writes both questions
    before either answer (ProcessLoop._park); after the restart answers
    them, the model is sent the conversation as it happened: each answer
    right after its question, on the next turn."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "is the launch on Thursday?")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "and who runs the demo?")
            await until(lambda: tg.pending_updates == 0, timeout=15)
            await crash(app)  # a stop with no time left: the waiting one is written after the cut one
        assert [r for r, _, _ in _history(tmp_path)] == ["user", "user"]
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
            tg.push_text(42, 42, "thanks")
            await tg.wait_sent(3, timeout=15)
            await quiet(again)
        turns = [(m["role"], text_of(m["content"])) for m in llm.last_chat()["messages"][1:-1]]
        assert turns == [
            ("user", "is the launch on Thursday?"), ("assistant", "re: is the launch on Thursday?"),
            ("user", "and who runs the demo?"), ("assistant", "re: and who runs the demo?"),
        ]
