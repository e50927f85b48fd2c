"""A Telegram group upgraded to a supergroup, end to end: Telegram gives
the chat a new id; the conversation goes on there with its history (the
model still reads what was said before the upgrade), and the replies go to
the new id. Memory is each user's, whatever the chat's id: nothing of it
is moved, nothing lost."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from gateway.bus import MOVED, Document, InboundMessage
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, text_of
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app, _until
from .test_quoted_e2e import _telegram, answering


def _chats(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        return list(db.execute(
            "SELECT s.chat_id, m.content FROM session_messages m JOIN sessions s ON s.id = m.session_id ORDER BY m.id"
        ))


async def test_the_conversation_moves_with_the_group_to_its_supergroup(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(-500, 7, "the launch codename is Bluebird", chat_type="group", first_name="Alice",
                         mention=True)
            [first] = await tg.wait_sent(1, timeout=10)
            assert first.chat_id == -500
            assert app._cron_store is not None and app.recent_files is not None
            job = await app._cron_store.add(schedule="0 9 * * *", message="standup", channel="telegram",
                                            chat_id="-500", user="telegram:7")
            await app.recent_files.keep("telegram:-500", "telegram:7", [Document(name="plan.txt", text="the plan",
                                                                                 total_chars=8)])
            tg.migrate_group(-500, -100500, 7)
            tg.push_text(-100500, 7, "what was the codename?", chat_type="supergroup", first_name="Alice",
                         mention=True)
            [_, second] = await tg.wait_sent(2, timeout=10)
            assert second.chat_id == -100500 and second.text == "re: what was the codename?"
            # The model read the conversation from before the upgrade.
            said = [text_of(m["content"]) for m in llm.last_chat()["messages"]]
            assert any("the launch codename is Bluebird" in s for s in said[:-1])
            assert any("re: the launch codename is Bluebird" in s for s in said[:-1])
            assert app.loop is not None and await app.loop.drain(5)
            # Its scheduled jobs and recent files went along.
            moved = await app._cron_store.get(job.id)
            assert moved is not None and moved.chat_id == "-100500"
            assert [f.name for f in app.recent_files.files("telegram:-100500")] == ["plan.txt"]
            assert app.recent_files.files("telegram:-500") == []
        finally:
            await asyncio.wait_for(app.close(), 15)
    # One conversation, under the new id, in order.
    assert _chats(tmp_path) == [
        ("-100500", "the launch codename is Bluebird"),
        ("-100500", "re: the launch codename is Bluebird"),
        ("-100500", "what was the codename?"),
        ("-100500", "re: what was the codename?"),
    ]


async def test_a_turn_under_way_at_the_upgrade_is_stored_under_the_new_id(tmp_path: Path, clock: ManualClock) -> None:
    # The upgrade comes while the old group's message is still with the
    # model: the move waits for that turn, so its reply is not left behind.
    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            hold = llm.queue_hold("noted: Bluebird")
            tg.push_text(-500, 7, "the launch codename is Bluebird", chat_type="group", first_name="Alice",
                         mention=True)
            await _until(lambda: len(llm.requests) == 1)
            loop = app.loop
            assert loop is not None
            tg.migrate_group(-500, -100500, 7)
            await _until(lambda: loop.stats.received == 2)  # the move is in the loop's hands
            # The supergroup speaks before the move is done: answered after it, with the whole history.
            tg.push_text(-100500, 7, "what was the codename?", chat_type="supergroup", first_name="Alice",
                         mention=True)
            await _until(lambda: loop.stats.received == 3)
            hold.set()
            [reply, second] = await tg.wait_sent(2, timeout=10)
            assert reply.chat_id == -100500 and reply.text == "noted: Bluebird"
            assert second.chat_id == -100500 and second.text == "re: what was the codename?"
            said = [text_of(m["content"]) for m in llm.last_chat()["messages"]]
            assert any("noted: Bluebird" in s for s in said[:-1])
            assert await loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _chats(tmp_path) == [
        ("-100500", "the launch codename is Bluebird"),
        ("-100500", "noted: Bluebird"),
        ("-100500", "what was the codename?"),
        ("-100500", "re: what was the codename?"),
    ]


async def test_a_turn_of_the_new_id_under_way_at_the_upgrade_ends_before_the_move(
    tmp_path: Path, clock: ManualClock
) -> None:
    # The supergroup spoke before the move was told (the service messages
    # missed; the move comes from a refused send, or just later): its turn
    # under way ends before the rows move, and its next message waits for
    # the move, so it reads the whole conversation.
    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            loop = app.loop
            assert loop is not None
            turns_at_move: list[set[str]] = []

            async def seen(channel: str, old: str, new: str) -> int:
                turns_at_move.append(set(loop._current))
                return 0

            loop.chat_moves["seen"] = seen
            tg.push_text(-500, 7, "the launch codename is Bluebird", chat_type="group", first_name="Alice",
                         mention=True)
            await tg.wait_sent(1, timeout=10)
            hold = llm.queue_hold("hello there")
            tg.push_text(-100500, 7, "hello from the supergroup", chat_type="supergroup", first_name="Alice",
                         mention=True)
            await _until(lambda: len(llm.requests) == 2)
            # The move is told only now (as the channel tells it), the supergroup's turn still with the model.
            await app.bus.publish_inbound(InboundMessage(channel="telegram", chat_id="-100500", sender_id="", text="",
                                                         is_group=True, kind=MOVED, metadata={"moved_from": "-500"}))
            tg.push_text(-100500, 7, "what was the codename?", chat_type="supergroup", first_name="Alice",
                         mention=True)
            await _until(lambda: loop.stats.received >= 4)
            await asyncio.sleep(0.2)  # a move running alongside the turn would have run by now
            hold.set()
            [_, hello, second] = await tg.wait_sent(3, timeout=10)
            assert hello.text == "hello there" and second.text == "re: what was the codename?"
            said = [text_of(m["content"]) for m in llm.last_chat()["messages"]]
            assert any("the launch codename is Bluebird" in s for s in said[:-1])
            assert any("hello there" in s for s in said[:-1])
            assert await loop.drain(5)
            # No turn of the new id under way while the rows moved (the old id's is the move itself).
            assert turns_at_move == [{"telegram:-500"}]
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _chats(tmp_path) == [
        ("-100500", "the launch codename is Bluebird"),
        ("-100500", "re: the launch codename is Bluebird"),
        ("-100500", "hello from the supergroup"),
        ("-100500", "hello there"),
        ("-100500", "what was the codename?"),
        ("-100500", "re: what was the codename?"),
    ]


async def test_a_move_that_fails_lets_the_new_id_s_waiting_messages_go_on(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            loop = app.loop
            assert loop is not None

            async def broken(channel: str, old: str, new: str) -> int:
                raise OSError("cron.db is gone")

            loop.chat_moves["broken"] = broken
            hold = llm.queue_hold("hello there")
            tg.push_text(-100500, 7, "hello from the supergroup", chat_type="supergroup", first_name="Alice",
                         mention=True)
            await _until(lambda: len(llm.requests) == 1)
            await app.bus.publish_inbound(InboundMessage(channel="telegram", chat_id="-100500", sender_id="", text="",
                                                         is_group=True, kind=MOVED, metadata={"moved_from": "-500"}))
            tg.push_text(-100500, 7, "still there?", chat_type="supergroup", first_name="Alice", mention=True)
            await _until(lambda: loop.stats.received >= 3)
            hold.set()
            [hello, second] = await tg.wait_sent(2, timeout=10)
            assert hello.text == "hello there" and second.text == "re: still there?"
            assert await loop.drain(5) and loop.stats.errors == 1
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_the_supergroup_s_own_message_ids_never_meet_the_old_group_s(tmp_path: Path, clock: ManualClock) -> None:
    # A supergroup numbers its messages from 1, a basic group took its ids
    # from the bot's counter: the old group's ids come back in the new chat,
    # meaning other messages. Its history's rows keep the old ids apart, so
    # a supergroup message is not taken for one answered before the upgrade,
    # and an edit in the supergroup changes only the message edited.
    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            old_ids = []
            for i, text in enumerate(["one", "two", "three"]):
                old_ids.append(tg.push_text(-500, 7, text, chat_type="group", first_name="Alice",
                                            mention=True)["message_id"])
                await tg.wait_sent(i + 1, timeout=10)
            tg.migrate_group(-500, -100500, 7)
            tg.push_text(-100500, 8, "hi all", chat_type="supergroup", first_name="Bob")  # not to the bot
            new_ids = []
            for i, text in enumerate(["four", "five", "six"]):
                new_ids.append(tg.push_text(-100500, 7, text, chat_type="supergroup", first_name="Alice",
                                            mention=True)["message_id"])
                await tg.wait_sent(4 + i, timeout=10)
            assert set(old_ids) & set(new_ids)  # the fake numbers them as Telegram does
            assert [m.text for m in tg.sent[3:]] == ["re: four", "re: five", "re: six"]
            # An edit of "four" whose id an old message had: only "four" changes.
            tg.push_edit(-100500, new_ids[0], "four, edited")
            loop = app.loop
            assert loop is not None
            await _until(lambda: loop.stats.revised == 1)
            assert await loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    said = [text for _, text in _chats(tmp_path) if not text.startswith("re: ")]
    assert said == ["one", "two", "three", "four, edited", "five", "six"]


async def test_what_was_learnt_in_the_group_is_still_read_in_its_supergroup(tmp_path: Path, clock: ManualClock) -> None:
    """A group reads only what its members said in it (memory/scope.py):
    the memories, events and buffered turns of the old id take the new one,
    or the supergroup would lose them."""
    from memory import NewMemory, Provenance

    async with FakeOpenAI(api_key="sk-super-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            engine = app.backend.engine  # type: ignore[union-attr]
            await engine.add(NewMemory(owner="telegram:7", content="The Bluebird launch codename was chosen by Alice",
                                       provenance=Provenance(channel="telegram", chat_id="-500")))
            await engine.add_event("telegram:7", "2026-02-28", "Alice picked the Bluebird codename",
                                   channel="telegram", chat_id="-500")
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(-500, 7, "hello", chat_type="group", first_name="Alice", mention=True)
            await tg.wait_sent(1, timeout=10)
            tg.migrate_group(-500, -100500, 7)
            tg.push_text(-100500, 7, "who chose the Bluebird codename?", chat_type="supergroup", first_name="Alice",
                         mention=True)
            await tg.wait_sent(2, timeout=10)
            assert "chosen by Alice" in json.dumps(llm.last_chat()["messages"])
            [event] = await engine.events("telegram:7")
            assert event.chat_id == "-100500"
        finally:
            await asyncio.wait_for(app.close(), 15)
