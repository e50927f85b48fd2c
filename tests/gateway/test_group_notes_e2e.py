"""A group's own notes end to end (real App, the Telegram, Feishu and OpenAI
fakes, memory/groupnotes.py): a member's /forget all takes the notes drawn
from their lines and not the others'; the bot removed from the group takes
the group's memory."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .handtick import by_hand
from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until
from .test_erasure_e2e import files_holding
from .test_group_walk_e2e import Scripted, _note, _prompt, _recalled
from .test_quoted_e2e import _telegram

FAMILY = -100700
DAD, MOM, LEO = 21, 22, 23
NAMES = {DAD: "Dad", MOM: "Mom", LEO: "Leo"}


async def _gone(app: Any, owner: str) -> int:
    """Waits (5 s at most) for ``owner``'s rows to go; how many are left."""
    for _ in range(50):
        if not (left := await _group_rows(app, owner)):
            return 0
        await asyncio.sleep(0.1)
    return left


async def _group_rows(app: Any, owner: str) -> int:
    engine = app.backend.engine
    n = 0
    for table in ("memories", "daily_events", "extraction_buffer"):
        row = await engine.db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE owner = ?", (owner,))
        n += row[0]
    return n


async def test_a_members_forget_all_takes_the_group_notes_of_their_lines_and_the_bot_removed_takes_the_rest(
    tmp_path: Path, clock: ManualClock
) -> None:
    model = Scripted()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # the test ticks extraction itself (handtick.py)
            assert app.loop is not None and app.extraction is not None
            sent = 0

            async def say(user: int, text: str, *, group: bool = True) -> dict[str, Any]:
                nonlocal sent
                tg.push_text(FAMILY if group else user, user, text, chat_type="supergroup" if group else "private",
                             first_name=NAMES[user], mention=group)
                sent += 1
                await tg.wait_sent(sent, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                return llm.last_chat()

            await say(DAD, "I'll book the hotel for the lake trip")
            await say(MOM, "Mia is allergic to peanuts, remember that")
            model.notes.append(("book the hotel for the lake trip", {"facts": [
                _note("Dad is booking the hotel for the lake trip", ["hotel", "booking", "lake trip", "酒店"],
                      "book the hotel for the lake trip"),
                _note("Mia is allergic to peanuts (said by Mom)", ["allergy", "allergic", "peanuts", "过敏"],
                      "allergic to peanuts"),
            ], "summary": "Dad books the hotel; Mom told about Mia's allergy"}))
            clock.advance(300)
            assert all(r.ok for r in await app.extraction.tick())  # type: ignore[attr-defined]
            assert model.notes == []
            for n in range(12):  # the window moves on
                await say((DAD, MOM, LEO)[n % 3], f"what should we pack, item {n}?")
            clock.advance(300)
            await app.extraction.tick()  # type: ignore[attr-defined]

            before = await say(LEO, "who is booking the hotel?")
            # Dad erases everything, in his private chat.
            asked = (await say(DAD, "/forget all", group=False), tg.sent[-1].text)[1]
            code = re.findall(r"\b\d{4}\b", asked)[-1]
            await say(DAD, f"/forget all {code}", group=False)
            erased = tg.sent[-1].text
            after = {"hotel": await say(LEO, "who is booking the hotel?"),
                     "allergy": await say(LEO, "what is Mia allergic to?")}
            lake_trip_files = files_holding(tmp_path, "lake trip")

            # The bot is removed from the group: the group's own memory goes.
            owner = f"group:telegram:{FAMILY}"
            assert await _group_rows(app, owner) > 0
            mom_before = await app.backend.engine.db.fetchone(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM memories WHERE owner = ?", (f"telegram:{MOM}",))
            tg.push_bot_removed(FAMILY, by=MOM)
            left = await _gone(app, owner)
            mom_after = await app.backend.engine.db.fetchone(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM memories WHERE owner = ?", (f"telegram:{MOM}",))
        finally:
            await asyncio.wait_for(app.close(), 15)

    first = _recalled(before).splitlines()[0]
    assert "Dad is booking the hotel" in first and "said by Dad" in first, first
    # His reply counts the group's note (and day) drawn from his line, asked and done.
    assert re.search(r"\b[1-9]\d* group notes? drawn from what you said in groups", asked), asked
    assert re.search(r"\b[1-9]\d* group notes? drawn from what you said in groups", erased), erased
    # His notes went with him; Mom's stays, first, as the group's.
    assert "lake trip" not in _prompt(after["hotel"]) and "lake trip" not in said(after["hotel"])
    first = _recalled(after["allergy"]).splitlines()[0]
    assert "Mia is allergic to peanuts" in first and "said by Mom" in first, first
    # Nowhere on disk (memory.db, its buffer, the WAL): Tier 0 held his own rows, erased too.
    assert lake_trip_files == [], lake_trip_files
    # Removed: nothing of the group's own memory is left; Mom's own facts stay hers.
    assert left == 0
    assert mom_before[0] == mom_after[0]
    assert "group's note" in text_of(before["messages"][-1]["content"])


async def test_the_bot_removed_from_a_feishu_group_erases_its_notes(tmp_path: Path, clock: ManualClock) -> None:
    people = {"Lin": "ou_lin00000000000000000000000001", "Chen": "ou_chen0000000000000000000000001"}
    model = Scripted()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeFeishu() as feishu:
        for name, oid in people.items():
            feishu.contacts[oid] = name
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # the test ticks extraction itself (handtick.py)
            assert app.http is not None and app.loop is not None and app.extraction is not None
            hook = app.http.url + "/feishu/events"
            for n, (name, text) in enumerate([("Lin", "we ship 2.0 on March 3"), ("Chen", "when do we ship 2.0?")], 1):
                event = feishu.message_event("@_user_1 " + text, chat_id="oc_release", chat_type="group",
                                             open_id=people[name], mentions=[feishu.mention()])
                assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                await _until(lambda n=n: len(feishu.sent) == n)  # type: ignore[misc]
                assert await app.loop.drain(5)
            model.notes.append(("ship 2.0 on March 3", {"facts": [
                _note("Lin: 2.0 ships on March 3", ["release date", "ship", "发布日期"], "ship 2.0 on March 3")],
                "summary": "release date"}))
            clock.advance(300)
            assert all(r.ok for r in await app.extraction.tick())  # type: ignore[attr-defined]
            assert model.notes == []
            owner = "group:feishu:oc_release"
            had = await _group_rows(app, owner)
            assert (await app.backend.engine.db.fetchone(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM daily_events WHERE owner = ?", (f"feishu:{people['Lin']}",)))[0] == 1
            removed = feishu.bot_removed_event("oc_release", by=people["Chen"])
            assert (await feishu.push_event(hook, removed, encrypt_key=ENCRYPT_KEY)).status_code == 200
            left = await _gone(app, owner)
            lins = await app.backend.engine.db.fetchone(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM daily_events WHERE owner = ?", (f"feishu:{people['Lin']}",))
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert had >= 2 and left == 0  # the note, the group's day: all gone
    assert lins[0] == 1  # Lin's own day of that chat is hers: it stays


class Saving(Scripted):
    """A member asks the bot to keep something for the group: memory_save."""

    def chat(self, body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] != "tool" and "keep this for everyone" in said(body):
            return Reply(content=None, tool_calls=[{"name": "memory_save", "arguments": {
                "content": "The boat to the island leaves at 9:00 on Saturday", "category": "decision",
                "terms": ["boat", "ferry", "leave", "船"]}}])
        return super().chat(body)


async def test_memory_save_in_a_group_is_read_by_another_member_there_naming_who_asked(
    tmp_path: Path, clock: ManualClock
) -> None:
    model = Saving()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.loop is not None
            sent = 0

            async def say(user: int, text: str, *, group: bool = True) -> dict[str, Any]:
                nonlocal sent
                tg.push_text(FAMILY if group else user, user, text, chat_type="supergroup" if group else "private",
                             first_name=NAMES[user], mention=group)
                sent += 1
                await tg.wait_sent(sent, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                return llm.last_chat()

            await say(LEO, "keep this for everyone: the boat leaves at 9 on Saturday")
            saved = [m for m in llm.requests if m["messages"][-1]["role"] == "tool"][-1]
            asked = await say(MOM, "when does the boat leave?")
            private = await say(MOM, "when does the boat leave?", group=False)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert "Saved as the group's note" in text_of(saved["messages"][-1]["content"])
    first = _recalled(asked).splitlines()[0]
    assert "The boat to the island leaves at 9:00" in first and "the group's note, said by Leo" in first, first
    assert "boat to the island" not in _prompt(private)


async def test_the_bot_leaving_by_the_service_message_erases_that_groups_memory_only(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A basic group tells the bot's own leaving by ``left_chat_member``; a
    ``my_chat_member`` that adds it back, or of a private chat, erases nothing."""
    other = -100701
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=Scripted()) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.loop is not None
            for n, chat in enumerate((FAMILY, other), 1):
                tg.push_text(chat, DAD, "I'll book the hotel", chat_type="supergroup", first_name="Dad", mention=True)
                await tg.wait_sent(n, timeout=10)
            tg.push_text(DAD, DAD, "hello", first_name="Dad")
            await tg.wait_sent(3, timeout=10)
            assert await app.loop.drain(5)
            owners = (f"group:telegram:{FAMILY}", f"group:telegram:{other}")
            had = [await _group_rows(app, o) for o in owners]
            tg.push_bot_removed(FAMILY, by=MOM, status="member")  # added back: nothing goes
            tg.push_bot_removed(DAD, by=DAD)  # a private chat's "kicked": the user blocked the bot
            await asyncio.sleep(0.5)
            assert await app.loop.drain(5)
            kept = [await _group_rows(app, o) for o in owners]
            tg.push_left(FAMILY, tg.bot_id, by=MOM)
            left = await _gone(app, owners[0])
            still = await _group_rows(app, owners[1])
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert had == kept and all(had)  # each group's copy of Dad's line (and the reply to him)
    assert left == 0 and still == had[1]


async def test_forget_all_in_chinese_counts_the_group_notes_of_the_members_lines(
    tmp_path: Path, clock: ManualClock
) -> None:
    """/forget 全部 tells (and then says it erased) the group's notes drawn
    from the member's lines, not only their own rows."""
    model = Scripted()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # the test ticks extraction itself (handtick.py)
            assert app.loop is not None and app.extraction is not None
            sent = 0

            async def say(user: int, text: str, *, group: bool = True) -> str:
                nonlocal sent
                tg.push_text(FAMILY if group else user, user, text, chat_type="supergroup" if group else "private",
                             first_name=NAMES[user], mention=group)
                sent += 1
                await tg.wait_sent(sent, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                return tg.sent[-1].text

            await say(MOM, "周六的船九点开，我来订票")
            model.notes.append(("周六的船九点开", {"facts": [
                _note("Mom 订周六九点的船票", ["船", "票", "boat"], "周六的船九点开")], "summary": "船票"}))
            clock.advance(300)
            assert all(r.ok for r in await app.extraction.tick())  # type: ignore[attr-defined]
            assert model.notes == []
            asked = await say(MOM, "/forget 全部", group=False)
            code = re.findall(r"\b\d{4}\b", asked)[-1]
            erased = await say(MOM, f"/forget 全部 {code}", group=False)
            owner = f"group:telegram:{FAMILY}"
            left = await app.backend.engine.db.fetchone(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM memories WHERE owner = ?", (owner,))
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert re.search(r"[1-9]\d* 条根据你在群里说的话记下的群组笔记", asked), asked
    assert erased.startswith("已永久删除") and re.search(r"[1-9]\d* 条根据你在群里说的话记下的群组笔记", erased), erased
    assert left[0] == 0



async def test_the_bot_removed_while_a_stop_cuts_its_erasure_is_erased_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A kill after the channel kept the bot's removal in the inbox (so
    Telegram's offset passed it) and before the loop applied it leaves its
    revision row: the next start erases the group's memory, once."""
    from gateway.bus import BOT_LEFT, LEFT, InboundMessage
    from gateway.inbox import Inbox
    from gateway.sessions import SessionStore

    owner = f"group:telegram:{FAMILY}"
    model = Scripted()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _dad_books_the_hotel ticks extraction itself (handtick.py)
            await _dad_books_the_hotel(app, tg, model, clock, ["hotel", "lake trip"])
            had = await _group_rows(app, owner)
        finally:
            await asyncio.wait_for(app.close(), 15)
    # What the kill left: the removal kept as the channel keeps it (gateway/inbox.py), never applied.
    [gateway_db] = list(tmp_path.rglob("gateway.db"))
    async with await SessionStore.open(gateway_db, clock) as store:
        await Inbox(store.db, clock).keep(InboundMessage(
            channel="telegram", chat_id=str(FAMILY), sender_id=BOT_LEFT, text="", is_group=True, kind=LEFT,
            message_id="", metadata={}))
    stopped = await _rows_on_disk(tmp_path, clock, owner)

    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=Scripted()) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            left = await _gone(app, owner)
            assert app.inbox is not None
            kept = await app.inbox.revisions()
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert had >= 2 and stopped == had  # nothing erased before the start
    assert left == 0 and kept == []


async def test_a_group_jobs_run_recalls_that_groups_notes_and_another_groups_job_does_not(
    tmp_path: Path, clock: ManualClock
) -> None:
    owner_leo = f"telegram:{LEO}"
    model = Scripted()
    async with FakeOpenAI(api_key="sk-group-notes-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # _dad_books_the_hotel ticks extraction itself (handtick.py)
            await _dad_books_the_hotel(app, tg, model, clock, ["hotel", "booking", "lake trip"])
            ask = "Remind everyone who is booking the hotel for the lake trip"
            await app.loop.run_job(channel="telegram", chat_id=str(FAMILY), user=owner_leo, text=ask)
            here = llm.last_chat()
            await app.loop.run_job(channel="telegram", chat_id="-100799", user=owner_leo, text=ask)
            elsewhere = llm.last_chat()
        finally:
            await asyncio.wait_for(app.close(), 15)
    first = _recalled(here).splitlines()[0]
    assert "Dad is booking the hotel" in first and "the group's note, said by Dad" in first, first
    assert "Dad is booking" not in _prompt(elsewhere) and "said by Dad" not in _prompt(elsewhere)  # none elsewhere

async def _dad_books_the_hotel(app: Any, tg: FakeTelegram, model: Scripted, clock: ManualClock,
                               terms: list[str]) -> None:
    """Dad says it in the family group, and the memory model notes it as the group's."""
    assert app.loop is not None and app.extraction is not None
    tg.push_text(FAMILY, DAD, "I'll book the hotel for the lake trip", chat_type="supergroup",
                 first_name="Dad", mention=True)
    await tg.wait_sent(1, timeout=10)
    assert await app.loop.drain(5)
    model.notes.append(("book the hotel for the lake trip", {"facts": [
        _note("Dad is booking the hotel for the lake trip", terms,
              "book the hotel for the lake trip")], "summary": "Dad books the hotel"}))
    clock.advance(300)
    assert all(r.ok for r in await app.extraction.tick())


async def _rows_on_disk(tmp_path: Path, clock: ManualClock, owner: str) -> int:
    from memory import MemoryEngine

    [db] = [p for p in tmp_path.rglob("memory.db")]
    engine = await MemoryEngine.open(db, clock)
    try:
        n = 0
        for table in ("memories", "daily_events", "extraction_buffer"):
            row = await engine.db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE owner = ?", (owner,))
            n += row[0] if row else 0
        return n
    finally:
        await engine.close()
