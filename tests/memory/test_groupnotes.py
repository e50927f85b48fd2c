"""A group's own notes (memory/groupnotes.py): owned by the group, read
only there, erased with a member who spoke them or with the group."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from structlog.testing import capture_logs

from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.buffer import drop_lines
from memory.groupnotes import chat_of, forget_group, forget_speaker, group_owner, is_group_owner, readers
from memory.groupowner import logged_owner
from memory.merge import move_owner
from memory.scope import shown_in
from memory.service import SqliteMemory

FAMILY = ("telegram", "-100900")
FRIENDS = ("telegram", "-100901")
DAD, MOM, LEO = "telegram:11", "telegram:12", "telegram:14"
GROUP_FAMILY = "group:telegram:-100900"


def _note(content: str, chat: tuple[str, str], *speakers: tuple[str, str]) -> NewMemory:
    return NewMemory(owner=group_owner(*chat), content=content, provenance=Provenance(
        channel=chat[0], chat_id=chat[1], group=True, message_ids=("1",),
        speakers=tuple(s for s, _ in speakers), said_by=tuple(n for _, n in speakers)))


def test_a_group_owner_is_built_and_told_in_one_place() -> None:
    assert group_owner("telegram", "-1001234") == "group:telegram:-1001234"
    assert group_owner("feishu", "oc_abc") == "group:feishu:oc_abc"
    assert chat_of("group:feishu:oc_abc") == ("feishu", "oc_abc")
    assert chat_of("group:telegram:-100:9") == ("telegram", "-100:9")  # a chat id may hold a colon
    assert is_group_owner("group:telegram:-1") and not is_group_owner("telegram:11")
    assert chat_of("telegram:11") is None and chat_of("group:") is None
    with pytest.raises(ValueError):
        group_owner("telegram", "")
    # An unmapped sender is "<channel>:<sender id>": no channel is called "group".
    assert not is_group_owner("telegram:group:1")


def test_a_groups_notes_are_read_in_that_group_only() -> None:
    assert readers(LEO, private=False, chat=FAMILY, notes=True) == [LEO, "_global", "group:telegram:-100900"]
    assert readers(LEO, private=False, chat=FRIENDS, notes=True)[-1] == "group:telegram:-100901"
    assert readers(LEO, private=True, chat=FAMILY, notes=True) == [LEO, "_global"]  # a private chat: never
    assert readers(LEO, private=False, chat=None, notes=True) == [LEO, "_global"]
    assert readers(LEO, private=False, chat=FAMILY, notes=False) == [LEO, "_global"]  # a member's own learning


async def test_recall_in_a_group_reads_its_notes_and_the_askers_own_never_another_groups(
    engine: MemoryEngine,
) -> None:
    memory = SqliteMemory(engine)
    hotel = await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (DAD, "Dad")))
    other = await engine.add(_note("Sam is booking the hotel for the ski trip", FRIENDS, ("telegram:30", "Sam")))
    mine = await engine.add(NewMemory(owner=LEO, content="Leo wants a hotel with a pool", provenance=Provenance(
        channel="telegram", chat_id="-100900", group=True)))
    private = await engine.add(NewMemory(owner=DAD, content="Dad's hotel loyalty number is 55 21", provenance=Provenance(
        channel="telegram", chat_id="11", group=False)))
    hits = await memory.recall(LEO, "who is booking the hotel?", private=False, chat=FAMILY)
    assert hits[0].id == hotel.id and hits[0].owner == "group:telegram:-100900"
    assert {h.id for h in hits} == {hotel.id, mine.id}
    assert "the group's note, said by Dad" in hits[0].citation()
    found = await memory.search(LEO, "hotel", private=False, chat=FAMILY)
    assert {h.id for h in found} == {hotel.id, mine.id}
    # Another group reads its own; a private chat reads none; nobody reads Dad's private fact.
    assert {h.id for h in await memory.recall(LEO, "who is booking the hotel?", private=False, chat=FRIENDS)} == {other.id}
    assert {h.id for h in await memory.recall(LEO, "who is booking the hotel?")} == {mine.id}
    assert private.id not in {h.id for h in await memory.recall(DAD, "hotel", private=False, chat=FAMILY)}
    # Group notes are not any member's Core Memory nor their overview.
    assert "lake trip" not in await memory.profile(DAD) and "lake trip" not in await memory.profile(LEO, private=False)
    assert (await memory.overview(DAD)).facts == 1  # his private fact only


def test_the_scope_condition_reads_a_groups_note_as_said_there() -> None:
    # The note's provenance names its group: shown_in lets it in there only.
    cond = shown_in(private=False, chat=FAMILY)
    assert "'-100900'" in cond and "credential" in cond


async def test_a_group_line_is_buffered_for_the_member_and_for_the_group_with_its_speaker(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    memory = SqliteMemory(engine)
    at = datetime(2026, 3, 2, 10, tzinfo=UTC)
    await memory.buffer([
        Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="I'll book the hotel",
             sender_id="11", message_id="5", at=at, group=True, speaker_name="Dad"),
        Turn(owner=DAD, channel="telegram", chat_id="-100900", role="assistant", content="Noted!",
             sender_id="", message_id="5", at=at, group=True),
        Turn(owner=LEO, channel="telegram", chat_id="14", role="user", content="my own private words",
             sender_id="14", message_id="6", at=at, group=False),
    ])
    rows = [tuple(r) for r in await engine.db.fetchall(
        "SELECT owner, role, content, speaker, speaker_name, in_group FROM extraction_buffer ORDER BY id")]
    assert rows == [
        (DAD, "user", "I'll book the hotel", "", "", 1),
        (DAD, "assistant", "Noted!", "", "", 1),
        (LEO, "user", "my own private words", "", "", 0),
        ("group:telegram:-100900", "user", "I'll book the hotel", DAD, "Dad", 1),
        ("group:telegram:-100900", "assistant", "Noted!", DAD, "", 1),  # the bot's, answering Dad
    ]
    await memory.buffer([Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user",
                              content="I'll book the hotel", sender_id="11", message_id="5", at=at, group=True,
                              speaker_name="Dad")])
    assert (await engine.db.fetchone("SELECT COUNT(*) FROM extraction_buffer"))[0] == 5  # buffered once


async def test_a_members_erasure_takes_the_notes_citing_their_lines_and_not_others(
    engine: MemoryEngine,
) -> None:
    memory = SqliteMemory(engine)
    dads = await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (DAD, "Dad")))
    both = await engine.add(_note("Dad and Mom agreed to leave on Friday", FAMILY, (DAD, "Dad"), (MOM, "Mom")))
    moms = await engine.add(_note("Mom said Mia is allergic to peanuts", FAMILY, (MOM, "Mom")))
    elsewhere = await engine.add(_note("Dad brings the grill to the picnic", FRIENDS, (DAD, "Dad")))
    day = await engine.add_event(group_owner(*FAMILY), "2026-03-02", "Dad offered to book the hotel",
                                 provenance=Provenance(channel="telegram", chat_id="-100900", group=True,
                                                       speakers=(DAD,), said_by=("Dad",)))
    kept_day = await engine.add_event(group_owner(*FAMILY), "2026-03-03", "Mom told about the allergy",
                                      provenance=Provenance(channel="telegram", chat_id="-100900", group=True,
                                                            speakers=(MOM,), said_by=("Mom",)))
    at = datetime(2026, 3, 4, 10, tzinfo=UTC)
    await memory.buffer([
        Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="and I'll rent the boat",
             sender_id="11", message_id="9", at=at, group=True, speaker_name="Dad"),
        Turn(owner=MOM, channel="telegram", chat_id="-100900", role="user", content="I'll pack the snacks",
             sender_id="12", message_id="10", at=at, group=True, speaker_name="Mom"),
    ])
    erased = await memory.forget_all(DAD)
    assert erased.waiting == 1  # his own line; the group's copy is counted by the engine
    left = {r[0] for r in await engine.db.fetchall("SELECT id FROM memories")}
    assert left == {moms.id}  # his notes in both groups, and the one he shares with Mom, are gone
    assert {dads.id, both.id, elsewhere.id}.isdisjoint(left)
    events = {r[0] for r in await engine.db.fetchall("SELECT id FROM daily_events")}
    assert events == {kept_day.id} and day.id not in events
    lines = [tuple(r) for r in await engine.db.fetchall("SELECT owner, content FROM extraction_buffer ORDER BY id")]
    assert lines == [(MOM, "I'll pack the snacks"), ("group:telegram:-100900", "I'll pack the snacks")]
    # The words are out of the file too (purged).
    raw = engine.db.path.read_bytes()
    assert b"lake trip" not in raw and b"rent the boat" not in engine.db.path.with_name("memory.buffer.db").read_bytes()
    assert await forget_speaker(engine, group_owner(*FAMILY)) == {"notes": 0, "events": 0, "buffered": 0}


async def test_the_bot_removed_erases_the_groups_notes_events_and_lines(engine: MemoryEngine) -> None:
    memory = SqliteMemory(engine)
    await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (DAD, "Dad")))
    other = await engine.add(_note("Sam brings the grill", FRIENDS, ("telegram:30", "Sam")))
    mine = await engine.add(NewMemory(owner=DAD, content="Dad is booking the hotel", provenance=Provenance(
        channel="telegram", chat_id="-100900", group=True)))
    await engine.add_event(group_owner(*FAMILY), "2026-03-02", "the family planned the lake trip")
    await memory.buffer([Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="boat too",
                              sender_id="11", message_id="9", group=True, speaker_name="Dad")])
    counts = await forget_group(engine, *FAMILY)
    assert counts["memories"] == 1 and counts["events"] == 1 and counts["buffered"] == 1
    assert {r[0] for r in await engine.db.fetchall("SELECT id FROM memories")} == {other.id, mine.id}
    # A member's own facts and lines stay theirs.
    assert [tuple(r) for r in await engine.db.fetchall("SELECT owner FROM extraction_buffer")] == [(DAD,)]


async def test_a_handle_merged_into_its_user_is_named_so_in_the_groups_notes(engine: MemoryEngine) -> None:
    # memory.identities maps telegram:11 to "dad" after he spoke in the group:
    # his erasure, by the name he has now, still finds the notes of his lines.
    memory = SqliteMemory(engine)
    await engine.add(NewMemory(owner=DAD, content="Dad's own fact", provenance=Provenance(channel="telegram",
                                                                                        chat_id="11")))
    note = await engine.add(_note("Dad and Mom leave on Friday", FAMILY, (DAD, "Dad"), (MOM, "Mom")))
    await memory.buffer([Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="boat too",
                              sender_id="11", message_id="9", group=True, speaker_name="Dad")])
    await move_owner(engine, DAD, "dad", job="cli")
    moved = await engine.get(note.id)
    assert moved is not None and moved.provenance.speakers == ("dad", MOM)
    assert [tuple(r) for r in await engine.db.fetchall("SELECT owner, speaker FROM extraction_buffer ORDER BY id")] \
        == [("dad", ""), ("group:telegram:-100900", "dad")]
    assert await forget_speaker(engine, "dad") == {"notes": 1, "events": 0, "buffered": 1}


async def test_a_recalled_group_message_leaves_the_groups_copy_and_the_note_drawn_from_it(
    engine: MemoryEngine,
) -> None:
    memory = SqliteMemory(engine)
    at = datetime(2026, 3, 2, 10, tzinfo=UTC)
    await memory.buffer([
        Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="I'll rent the boat",
             sender_id="11", message_id="9", at=at, group=True, speaker_name="Dad"),
        Turn(owner=MOM, channel="telegram", chat_id="-100900", role="user", content="I'll pack the snacks",
             sender_id="12", message_id="10", at=at, group=True, speaker_name="Mom"),
    ])
    drawn = await engine.add(NewMemory(owner=group_owner(*FAMILY), content="Dad is booking the hotel", provenance=(
        Provenance(channel="telegram", chat_id="-100900", group=True, message_ids=("8",), speakers=(DAD,)))))
    moms = await engine.add(NewMemory(owner=group_owner(*FAMILY), content="Mom packs", provenance=(
        Provenance(channel="telegram", chat_id="-100900", group=True, message_ids=("10",), speakers=(MOM,)))))
    done = await memory.retract("telegram", "-100900", "8", owner=DAD, text="I'll book the hotel")
    assert [h.id for h in done.erased] == [drawn.id] and await engine.get(moms.id) is not None
    await memory.retract("telegram", "-100900", "9", owner=DAD)
    lines = [tuple(r) for r in await engine.db.fetchall("SELECT owner, content FROM extraction_buffer ORDER BY id")]
    assert lines == [(MOM, "I'll pack the snacks"), ("group:telegram:-100900", "I'll pack the snacks")]


async def test_last_weeks_talk_in_a_group_is_the_groups_own_days_there_only(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    memory = SqliteMemory(engine)
    said = Provenance(channel="telegram", chat_id="-100900", group=True, speakers=(DAD, MOM), said_by=("Dad", "Mom"))
    day = await engine.add_event(group_owner(*FAMILY), "2026-02-25", "The family planned the lake trip and the boat",
                                 channel="telegram", chat_id="-100900", provenance=said)
    await engine.add_event(group_owner(*FRIENDS), "2026-02-25", "The friends planned a ski weekend",
                           channel="telegram", chat_id="-100901",
                           provenance=Provenance(channel="telegram", chat_id="-100901", group=True, speakers=("s",)))
    clock.set("2026-03-02T10:00:00Z")
    hits = await memory.recall(LEO, "what did we talk about last week?", private=False, chat=FAMILY)
    assert [(h.kind, h.id) for h in hits] == [("event", day.id)]
    assert "summary of this group's chat" in hits[0].citation()
    assert [h.id for h in await memory.search(LEO, "lake trip", private=False, chat=FAMILY)] == [day.id]
    assert await memory.recall(LEO, "what did we talk about last week?") == []  # his private chat: not the group's
    assert all(h.id != day.id for h in await memory.recall(LEO, "what did we talk about last week?",
                                                           private=False, chat=FRIENDS))


async def test_an_edited_group_message_is_edited_in_the_groups_copy_too(engine: MemoryEngine) -> None:
    memory = SqliteMemory(engine)
    at = datetime(2026, 3, 2, 10, tzinfo=UTC)
    said = Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="I'll rent the boat",
                sender_id="11", message_id="9", at=at, group=True, speaker_name="Dad")
    await memory.buffer([said])
    assert await memory.revise(Turn(**{**said.__dict__, "content": "I'll rent the canoe"})) == "replaced"
    lines = [tuple(r) for r in await engine.db.fetchall(
        "SELECT owner, content, speaker, speaker_name FROM extraction_buffer ORDER BY id")]
    assert lines == [(DAD, "I'll rent the canoe", "", ""), (GROUP_FAMILY, "I'll rent the canoe", DAD, "Dad")]
    # Learnt already: the group's note citing it gets a correction under the group, by its speaker.
    async with engine.db.transaction() as conn:  # as if extracted
        await drop_lines(conn, [r[0] for r in await engine.db.fetchall("SELECT id FROM extraction_buffer")])
    await engine.add(NewMemory(owner=GROUP_FAMILY, content="Dad rents the canoe", provenance=Provenance(
        channel="telegram", chat_id="-100900", group=True, message_ids=("9",), speakers=(DAD,))))
    assert await memory.revise(Turn(**{**said.__dict__, "content": "I'll rent a kayak"})) == "untracked"
    lines = [tuple(r) for r in await engine.db.fetchall(
        "SELECT owner, message_id, content, speaker FROM extraction_buffer ORDER BY id")]
    assert lines == [(GROUP_FAMILY, "9#edited", "(edited) I'll rent a kayak", DAD)]


async def test_a_group_upgraded_to_a_supergroup_keeps_its_notes_under_the_new_id(engine: MemoryEngine) -> None:
    memory = SqliteMemory(engine)
    note = await engine.add(_note("Dad is booking the hotel for the lake trip", ("telegram", "-900"), (DAD, "Dad")))
    await engine.move_chat("telegram", "-900", "-100900")  # what the loop's chat_moves run first
    assert await memory.move_group("telegram", "-900", "-100900") >= 1
    moved = await engine.get(note.id)
    assert moved is not None and moved.owner == GROUP_FAMILY and moved.provenance.chat_id == "-100900"
    assert [h.id for h in await memory.recall(LEO, "who is booking the hotel?", private=False, chat=FAMILY)] == [note.id]
    assert await memory.recall(LEO, "who is booking the hotel?", private=False, chat=("telegram", "-900")) == []


async def test_a_handle_with_no_rows_of_its_own_merged_is_named_so_in_the_groups_notes(engine: MemoryEngine) -> None:
    # He spoke only in the group and nothing of his own was kept: the merge
    # has no rows of his to move, yet the group's notes and waiting lines
    # name him, and his erasure by the name he has now must find them.
    memory = SqliteMemory(engine)
    note = await engine.add(_note("Dad and Mom leave on Friday", FAMILY, (DAD, "Dad"), (MOM, "Mom")))
    await memory.buffer([Turn(owner=DAD, channel="telegram", chat_id="-100900", role="user", content="boat too",
                              sender_id="11", message_id="9", group=True, speaker_name="Dad")])
    async with engine.db.transaction() as conn:  # his own copy learnt, nothing kept; the group's still waits
        await drop_lines(conn, [r[0] for r in await conn.execute_fetchall(
            "SELECT id FROM extraction_buffer WHERE owner = ?", (DAD,))])
    assert not any((await move_owner(engine, DAD, "dad", job="cli")).values())
    moved = await engine.get(note.id)
    assert moved is not None and moved.provenance.speakers == ("dad", MOM)
    assert await forget_speaker(engine, "dad") == {"notes": 1, "events": 0, "buffered": 1}


async def test_a_group_erasure_logs_the_group_by_its_tag_never_its_chat_id(engine: MemoryEngine) -> None:
    # A chat id is personal data in a log (a private group's id, a Feishu
    # oc_ id): an erasure names the group the way a member is tagged.
    memory = SqliteMemory(engine)
    note = await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (DAD, "Dad")))
    await engine.add(_note("Mom brings the cake", FAMILY, (MOM, "Mom")))
    with capture_logs() as logs:
        done = await memory.forget_group_notes(FAMILY, [f"m{note.id}"], by=LEO)
        assert [h.id for h in done.erased] == [note.id]
        counts = await forget_group(engine, *FAMILY)
        assert counts["memories"] == 1
    said = [e for e in logs if e["event"] in ("owner forgotten", "memories forgotten at the user's request")]
    assert len(said) == 2
    assert all(e["owner"] == logged_owner(GROUP_FAMILY) for e in said)
    assert logged_owner(GROUP_FAMILY).startswith("group:telegram:#") and logged_owner(DAD) == DAD
    assert not [e for e in logs if "-100900" in repr(e)]
