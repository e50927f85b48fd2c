"""The durable inbox end to end (gateway/inbox.py): a message Feishu or
Telegram was told arrived is in gateway.db before that, and a crash with
messages queued behind a turn loses none of them."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import structlog

from channels.feishu import FeishuChannel
from gateway.bus import MessageBus
from gateway.inbox import Inbox
from gateway.sessions import SessionStore
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import crash, killed, quiet
from .test_e2e_feishu import feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import ALICE, Gateway, until
from tests.channels.test_feishu_longconn import ws_config
from .test_resume_e2e import KEY, _echo, _history, _telegram_app


async def test_feishu_webhook_messages_queued_behind_a_crashed_turn_are_answered_in_order(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Three questions over the webhook, each answered 200 (Feishu will
    not send them again); the model holds the first and the gateway dies.
    After the restart all three are answered, in the order they came, once."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            app = await g.start()
            llm.queue_hold()
            words = ["what did we decide about pricing?", "and the launch date?", "who owns the deck?"]
            events = [feishu.message_event(w, chat_id="oc_alice", open_id=ALICE) for w in words]
            await g.push(events[0])
            await until(lambda: len(llm.requests) == 1, timeout=15)
            for e in events[1:]:
                await g.push(e)  # answered 200: in the inbox already
            assert app.inbox is not None and await app.inbox.count() == 3
            await app.inbox.flush()
            await killed(app, tmp_path)  # the stop's own writes (ProcessLoop._park) never happen
            assert feishu.sent == []
            clock.advance(60)
            app = await g.start()
            await until(lambda: len(feishu.sent) == 3, timeout=15)
            await g.settled()
            assert app.redelivered is not None and len(app.redelivered.answered) == 2
            assert app.inbox is not None
            await app.inbox.flush()
            assert await app.inbox.count() == 0
        finally:
            await g.stop()
        assert [m["text"] for m in feishu.visible()] == [f"re: {w}" for w in words]
        ids = [e["event"]["message"]["message_id"] for e in events]
        assert [(r, m) for r, m, _ in _history(tmp_path)] == [(r, i) for i in ids for r in ("user", "assistant")]
        app = await g.start()  # a third start answers nothing again
        try:
            await g.settled()
        finally:
            await g.stop()
        assert len(feishu.sent) == 3


async def test_a_feishu_long_connection_event_is_in_the_inbox_before_its_ack(tmp_path: Path, clock: ManualClock) -> None:
    """The long connection's handler returns (and the SDK ACKs the event,
    after which Feishu never sends it again) only once the message is
    written to gateway.db."""
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        ch = FeishuChannel(ws_config(fake), MessageBus(inbox=inbox))
        await ch.start()
        try:
            await fake.wait_ws_connected(60)
            event = fake.message_event("via websocket", chat_id="oc_ws", open_id="ou_ws")
            assert (await fake.push_ws_event(event))["code"] == 200
            [waiting] = await inbox.waiting()  # the ACK came after the write
            assert (waiting.msg.chat_id, waiting.msg.text) == ("oc_ws", "via websocket")
            assert waiting.msg.message_id == event["event"]["message"]["message_id"]
        finally:
            await asyncio.wait_for(ch.stop(), 20)


async def test_a_feishu_event_the_inbox_cannot_write_is_not_acked_and_is_taken_when_sent_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """gateway.db full: the long connection's handler fails, so the SDK
    does not ACK the event and Feishu sends it again; nothing went on the
    bus. Sent again once there is room, it is taken, once."""
    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        bus = MessageBus(inbox=inbox)
        ch = FeishuChannel(ws_config(fake), bus)
        await ch.start()
        try:
            await fake.wait_ws_connected(60)
            await store.db.write("CREATE TRIGGER full BEFORE INSERT ON inbox "
                                 "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
            event = fake.message_event("via websocket", chat_id="oc_ws", open_id="ou_ws")
            assert (await fake.push_ws_event(event))["code"] != 200  # not ACKed: Feishu sends it again
            assert bus.inbound.qsize() == 0 and inbox.failed == 1
            await store.db.write("DROP TRIGGER full")
            assert (await fake.push_ws_event(event))["code"] == 200  # Feishu's redelivery: not taken for a duplicate
            [waiting] = await inbox.waiting()
            assert waiting.msg.text == "via websocket"
            msg = await asyncio.wait_for(bus.consume_inbound(), 10)
            assert msg.message_id == event["event"]["message"]["message_id"] and bus.inbound.qsize() == 0
        finally:
            await asyncio.wait_for(ch.stop(), 20)


async def test_a_feishu_picture_is_in_the_inbox_with_its_key_before_its_ack_and_downloaded_after(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A picture's download may take seconds: the event is ACKed at once,
    but only once the message (with its image key, not its bytes) is in
    gateway.db. A kill during the download leaves it there, so the next
    start asks for the picture again instead of losing the message."""
    from tests.channels.test_feishu import PNG

    async with FakeFeishu() as fake, await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        bus = MessageBus(inbox=inbox)
        ch = FeishuChannel(ws_config(fake), bus, max_image_bytes=2048)
        await ch.start()
        try:
            await fake.wait_ws_connected(60)
            key = fake.add_image(PNG, "image/png")
            release = fake.hold_resource(key)
            event = fake.message_event(message_type="image", content={"image_key": key}, chat_id="oc_ws", open_id="ou_ws")
            assert (await fake.push_ws_event(event))["code"] == 200
            [waiting] = await inbox.waiting()  # kept before the ACK, the download still held
            assert (waiting.msg.message_id, waiting.pictures) == (event["event"]["message"]["message_id"], 1)
            (payload,) = await store.db.fetchone("SELECT payload FROM inbox") or ("",)
            assert key in payload and bus.inbound.qsize() == 0
            release.set()
            msg = await asyncio.wait_for(bus.consume_inbound(), 10)  # downloaded after
            assert [i.data for i in msg.images] == [PNG] and await inbox.count() == 1
        finally:
            await asyncio.wait_for(ch.stop(), 20)


async def test_a_telegram_message_the_inbox_cannot_write_is_held_at_telegram_until_it_can(
    tmp_path: Path, clock: ManualClock
) -> None:
    """gateway.db full for the inbox (and so for Tier 0: one file): the
    update is not confirmed, so Telegram keeps it, and polling tries again
    with a growing pause, one error logged (no words of the message), no
    "not saved" note. Space back, it is answered once, nothing lost."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # only the inbox's insert fails, for real
                db.execute("CREATE TRIGGER full BEFORE INSERT ON inbox "
                           "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
            with structlog.testing.capture_logs() as logs:
                tg.push_text(42, 42, "is the launch on Thursday?")
                assert app.inbox is not None
                inbox = app.inbox
                await until(lambda: inbox.failed >= 2, timeout=15)  # tried again, after a pause
                assert tg.sent == [] and tg.pending_updates == 1  # not confirmed: Telegram still has it
                tried = inbox.failed
                await asyncio.sleep(0.3)
                assert inbox.failed <= tried + 1  # backing off, not spinning
                with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
                    db.execute("DROP TRIGGER full")
                await tg.wait_sent(1, timeout=15)
                await quiet(app)
                await until(lambda: tg.pending_updates == 0, timeout=15)
        assert [m.text for m in tg.sent] == ["re: is the launch on Thursday?"]
        assert [r for r, _, _ in _history(tmp_path)] == ["user", "assistant"]
        [err] = [e for e in logs if e["log_level"] == "error"]
        # By its type and SQLite's error name (the trigger's stand-in for SQLITE_FULL), never its text.
        assert "inbox" in err["event"] and err["error"] == "sqlite3.IntegrityError"
        assert err["sqlite_error"] == "SQLITE_CONSTRAINT_TRIGGER"
        assert "launch" not in str(logs)


async def test_a_stop_past_its_timeout_leaves_the_waiting_messages_for_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A SIGTERM whose drain times out on a slow answer, two messages
    waiting behind it in the chat and one from another chat still on the
    bus: all are answered after the restart, each chat in its order."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(42, 42, "second")
            tg.push_text(42, 42, "third")
            await until(lambda: tg.pending_updates == 0, timeout=15)
            await asyncio.wait_for(app.close(timeout=0.5), 30)
        assert tg.sent == []
        clock.advance(60)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(3, timeout=15)
            await quiet(again)
        assert [m.text for m in tg.sent] == ["re: first", "re: second", "re: third"]
        # Each answered knowing the ones before it and their replies.
        assert "re: first" in str(llm.chat_requests()[-2]["messages"]) and "re: second" in str(llm.last_chat()["messages"])


async def test_a_crash_after_the_reply_but_before_the_inbox_row_went_answers_nothing_twice(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The inbox row outlives the turn (a crash right after the reply): the
    next start finds the message's Tier 0 rows and lets it go unanswered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            tg.push_text(42, 42, "ping")
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            assert app.inbox is not None
            await app.inbox.flush()
            with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # as if its delete never ran
                db.execute("INSERT INTO inbox (channel, chat_id, message_id, received_at, payload) "
                           "SELECT 'telegram', '42', message_id, created_at, '{\"s\": \"42\", \"t\": \"ping\", "
                           "\"ts\": \"2026-03-01T12:00:00Z\"}' FROM session_messages WHERE role = 'user'")
            await crash(app)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await quiet(again)
            assert again.redelivered is not None and again.redelivered.answered == []
            assert again.inbox is not None and await again.inbox.count() == 0
        assert [m.text for m in tg.sent] == ["re: ping"]


async def test_a_photo_queued_behind_a_turn_a_crash_cut_is_asked_for_again_in_the_cut_turns_words(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A picture's bytes are never kept: a photo the inbox held when the
    gateway was killed gets the same note a cut turn's photo gets
    (resume.lost_note), once, after the cut turn's answer."""
    from .test_resume_files_e2e import _running
    from .test_vision_e2e import PHOTO

    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _running(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_photo(42, 42, [PHOTO], caption="what does this sign say?")
            await until(lambda: tg.pending_updates == 0, timeout=15)
            assert app.inbox is not None
            await until(lambda: app.bus.inbound.qsize() == 0, timeout=15)  # taken by the chat's worker, queued
            await app.inbox.flush()
            await killed(app, tmp_path)
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        # In the order they came: the note does not overtake the cut turn's answer.
        assert [m.text for m in tg.sent] == [
            "re: first",
            "Sorry, I restarted before I could answer, and the photo you sent is no longer with me. Please send it again.",
        ]


async def test_a_photos_note_whose_inbox_row_the_disk_will_not_delete_is_held_and_comes_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """As above, but the disk refuses the photo's inbox row's delete (the
    note is its one answer, and no Tier 0 row says it went). The note is
    held until the row goes; a kill meanwhile leaves it to the next start,
    which sends it once from the outbox. Before, it went at once, the row
    stayed, and every later start asked for the photo again."""
    from .test_resume_files_e2e import _running
    from .test_vision_e2e import PHOTO

    note = "Sorry, I restarted before I could answer, and the photo you sent is no longer with me. Please send it again."
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _running(tmp_path, clock, llm, tg) as app:
            llm.queue_hold()
            tg.push_text(42, 42, "first")
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_photo(42, 42, [PHOTO], caption="what does this sign say?")
            await until(lambda: tg.pending_updates == 0, timeout=15)
            assert app.inbox is not None
            await until(lambda: app.bus.inbound.qsize() == 0, timeout=15)
            await app.inbox.flush()
            await killed(app, tmp_path)
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:  # the photo's row: full disk
            db.execute("CREATE TRIGGER full_note BEFORE DELETE ON inbox WHEN OLD.payload LIKE '%sign say%' "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as again:
            loop = again.loop
            assert loop is not None
            loop.mark_retry = 0.05
            await until(lambda: loop.stats.held >= 1 or len(tg.sent) >= 2, timeout=15)
            await asyncio.sleep(0.3)  # tried again, still full
            assert [m.text for m in tg.sent] == ["re: first"]
            await killed(again, tmp_path)
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            db.execute("DROP TRIGGER full_note")
        clock.advance(60)
        async with _running(tmp_path, clock, llm, tg) as third:
            await tg.wait_sent(2, timeout=15)
            await quiet(third)
            assert third.inbox is not None and await third.inbox.count() == 0
        async with _running(tmp_path, clock, llm, tg) as fourth:
            await quiet(fourth)
        assert [m.text for m in tg.sent] == ["re: first", note]
