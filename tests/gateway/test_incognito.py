"""/incognito: the user's turns are answered with what is remembered but
never learnt from, in every chat, across a restart, edits included; ``off``
learns again; /forget all takes the setting with the rest."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from gateway.bus import EDIT, InboundMessage
from gateway.commands import UserCommands
from gateway.incognito import Incognito
from gateway.sessions import SessionStore
from gateway.timezones import UserTimezones
from gateway.userdata import UserData
from memory import Category, ManualClock, NewMemory
from tests.fakes.openai_server import FakeOpenAI

from .conftest import make_rig

ALICE = "telegram:100"


async def _buffered(rig: Any) -> list[str]:
    rows = await rig.engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")
    return [r[0] for r in rows]


async def _tier0(rig: Any) -> list[tuple[str, int]]:
    rows = await rig.sessions.db.fetchall("SELECT content, buffered FROM session_messages ORDER BY id")
    return [(r[0], r[1]) for r in rows]


async def test_incognito_turns_are_answered_from_memory_but_never_learnt(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice's espresso machine is a Gaggia Classic",
                                       category=Category.EVENT))
        on = (await rig.ask("/incognito")).text
        assert on.startswith("Incognito is on.") and "/incognito off" in on
        assert (await rig.ask("/incognito")).text.startswith("Incognito has been on since 2026-03-01 12:00.")
        fake_llm.queue_reply("Sorry to hear that.")
        await rig.ask("my Gaggia espresso machine leaks, and I am thinking of quitting my job", chat="1")
        body = fake_llm.requests[-1]
        assert "# Incognito" in body["messages"][0]["content"]
        assert "Gaggia Classic" in body["messages"][-1]["content"]  # what is remembered is still used
        # A group message of hers is hers too; Bob's in the same group is learnt.
        await rig.ask("I may skip the offsite", chat="-5", group=True, mentioned=True)
        await rig.ask("I booked the offsite bus", chat="-5", sender="200", group=True, mentioned=True)
        await rig.settle()
        buffered = await _buffered(rig)
        assert not any("quitting" in c or "skip the offsite" in c for c in buffered)
        assert "I booked the offsite bus" in buffered
        assert ("my Gaggia espresso machine leaks, and I am thinking of quitting my job", 2) in await _tier0(rig)
        assert "Incognito is on" in (await rig.ask("/memory")).text

        off = (await rig.ask("/incognito off")).text
        assert off.startswith("Incognito is off") and (await rig.ask("/incognito off")).text.startswith("Incognito was not")
        await rig.ask("I bought a new grinder", chat="1")
        await rig.settle()
        assert "I bought a new grinder" in await _buffered(rig)
        assert "quitting" not in " ".join(await _buffered(rig))
        assert "# Incognito" not in fake_llm.requests[-1]["messages"][0]["content"]


async def test_an_edit_of_an_incognito_message_stays_out_of_memory(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.ask("/incognito")
        # Saved because she asked in so many words: the fact cites her message...
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save",
                                                "arguments": {"content": "Alice's salary is 5000", "category": "config"}}])
        fake_llm.queue_reply("Saved, though incognito is on.")
        sent = await rig.send("remember that my salary is 5000")
        await rig.reply()
        await rig.settle()
        await rig.ask("/incognito off")  # an edit after it ended still belongs to the incognito turn
        # ... and yet its edit is not handed to extraction as a correction.
        await rig.bus.publish_inbound(replace(sent, text="remember that my salary is 6000", kind=EDIT))
        await rig.settle()
        assert ("remember that my salary is 6000", 2) in await _tier0(rig)  # Tier 0 shows the new words
        assert [m.content for m in await rig.engine.list_memories(ALICE)] == ["Alice's salary is 5000"]
        assert not any("salary" in c for c in await _buffered(rig))


async def test_incognito_survives_a_restart_and_forget_all_erases_it(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        assert "无痕模式已开启" in (await rig.ask("/无痕")).text
        assert "用法" in (await rig.ask("/incognito 也许")).text
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as sessions:
        incognito = Incognito(sessions.db)
        assert await incognito.since(ALICE) == clock.now()
        assert await incognito.move_owner(ALICE, "alice") == 1 and await incognito.since("alice") is not None
        assert await incognito.since(ALICE) is None
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.ask("/incognito")
        incognito = Incognito(rig.sessions.db)
        everything = UserData(rig.backend, rig.sessions, incognito=incognito)
        rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock, incognito=incognito)
        await rig.ask("a few words while incognito")  # kept in Tier 0, so there is something to erase
        code = (await rig.ask("/forget all")).text.rsplit(" ", 1)[1]
        await rig.ask(f"/forget all {code}")
        assert await Incognito(rig.sessions.db).since(ALICE) is None and await rig.sessions.owned(ALICE) == 0


async def test_a_turn_that_erased_memory_is_not_learnt_when_edited_later(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The same mark covers a turn that erased memory: an edit of "forget
    that my cat is Miso" must not hand the cat back to extraction."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        m = await rig.engine.add(NewMemory(owner=ALICE, content="Alice's cat is called Miso", category=Category.EVENT))
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [f"m{m}"]}}])
        fake_llm.queue_reply("Forgotten.")
        sent = await rig.send("forget that my cat is called Miso")
        await rig.reply()
        await rig.settle()
        edit = InboundMessage(sent.channel, sent.chat_id, sent.sender_id, "forget that my cat is called Miso!!",
                              message_id=sent.message_id, kind=EDIT)
        await rig.bus.publish_inbound(edit)
        await rig.settle()
        assert ("forget that my cat is called Miso!!", 2) in await _tier0(rig)
        assert not any("Miso" in c for c in await _buffered(rig))


def _with_settings(rig: Any, clock: ManualClock) -> tuple[Incognito, UserTimezones]:
    """The rig's commands with /forget all, /export and /timezone wired as
    the App wires them (one Incognito for the loop and the commands)."""
    incognito, timezones = rig.loop.incognito, UserTimezones(rig.sessions.db)
    everything = UserData(rig.backend, rig.sessions, incognito=incognito, timezones=timezones)
    rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock, incognito=incognito,
                                     timezones=timezones)
    return incognito, timezones


async def test_forget_all_lists_incognito_and_erases_it_even_when_it_is_all_there_is(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        incognito, _ = _with_settings(rig, clock)
        await rig.ask("/incognito")
        asked = (await rig.ask("/forget all")).text
        assert asked.startswith("This erases everything I keep about you, for good: ")
        assert "your incognito setting (it goes off)" in asked
        done = (await rig.ask(f"/forget all {asked.rsplit(' ', 1)[1]}")).text
        assert done.startswith("Erased for good: ") and "your incognito setting" in done
        assert await incognito.since(ALICE) is None
        assert await Incognito(rig.sessions.db).since(ALICE) is None  # the row, not only the cache
        assert (await rig.ask("/forget all")).text == "I keep nothing about you."

        await rig.ask("/无痕")
        assert "你开启的无痕模式设置" in (await rig.ask("/forget 全部")).text


async def test_export_states_incognito_in_the_users_time_zone(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        _with_settings(rig, clock)
        await rig.ask("/incognito")  # 2026-03-01 12:00 UTC
        await rig.ask("/timezone Asia/Shanghai")
        exported = await rig.ask("/export")
        assert exported.attachment is not None
        assert "Incognito: on since 2026-03-01 20:00 (/incognito off ends it)." in exported.attachment.data.decode()
        await rig.ask("/incognito off")
        clock.advance(timedelta(minutes=2))  # one export a minute
        exported = await rig.ask("/export")
        assert exported.attachment is not None
        assert "Incognito: off (/incognito turns it on)." in exported.attachment.data.decode()


async def test_the_cache_of_who_is_incognito_is_capped_and_forgets_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as sessions:
        incognito = Incognito(sessions.db, users_kept=4)
        assert await incognito.start(ALICE, at=clock.now())
        for i in range(20):  # thousands of users over months: a capped cache
            assert await incognito.since(f"telegram:{i}") is None
        assert len(incognito._cache) <= 4
        assert await incognito.since(ALICE) == clock.now()  # read again from gateway.db
