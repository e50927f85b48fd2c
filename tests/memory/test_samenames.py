"""Which names two members of a group have gone by (memory/samenames.py),
kept between a group's flushes (``SameNames``): what it returns is what a
full read (``shared_names``) returns, after a name is learnt, after every
way a name is erased, and after another process's write."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.extraction import ExtractionService, _speaker_label
from memory.groupnotes import forget_group, group_owner
from memory.llm import MemoryLLM
from memory.merge import move_owner
from memory.samenames import SameNames, shared_names
from memory.service import SqliteMemory
from memory.types import Status
from tests.fakes.openai_server import FakeOpenAI

from ._writepath import fake, llm, reply  # noqa: F401

FAMILY = ("telegram", "-100900")
FRIENDS = ("telegram", "-100901")
GROUP, OTHER = group_owner(*FAMILY), group_owner(*FRIENDS)
DAD1, DAD2, MOM = "telegram:11", "telegram:15", "telegram:12"


def _note(content: str, chat: tuple[str, str] = FAMILY, *speakers: tuple[str, str]) -> NewMemory:
    return NewMemory(owner=group_owner(*chat), content=content, provenance=Provenance(
        channel=chat[0], chat_id=chat[1], group=True, message_ids=("1",),
        speakers=tuple(s for s, _ in speakers), said_by=tuple(n for _, n in speakers)))


async def _both(engine: MemoryEngine, names: SameNames, owner: str = GROUP) -> set[str]:
    """The cached read, checked against a full one."""
    got = await names.read(engine.db, owner, _speaker_label)
    assert got == await shared_names(engine.db, owner, _speaker_label)
    return got


async def _two_dads(engine: MemoryEngine, names: SameNames) -> tuple[int, int]:
    a = await engine.add(_note("Dad is booking the hotel", FAMILY, (DAD1, "Dad")))
    await engine.add(_note("Mom packs the snacks", FAMILY, (MOM, "Mom")))
    assert await _both(engine, names) == set()  # warm: one Dad so far
    b = await engine.add(_note("Dad drives to the lake", FAMILY, (DAD2, "Dad")))
    assert await _both(engine, names) == {"dad"}
    return a.id, b.id


async def test_a_name_learnt_after_the_cache_is_warm_is_shared_at_the_next_read(engine: MemoryEngine) -> None:
    names = SameNames()
    await _two_dads(engine, names)
    # A tagged label in a day's provenance: its name was two members' when written.
    await engine.add_event(GROUP, "2026-03-01", "The group planned the trip", channel=FAMILY[0], chat_id=FAMILY[1],
                           provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                                                 speakers=(MOM, "telegram:19"), said_by=("Mom #1a2b", "Mom")))
    assert await _both(engine, names) == {"dad", "mom"}
    # Another group's notes are not this one's.
    await engine.add(_note("Leo hikes", FRIENDS, ("telegram:21", "Leo")))
    await engine.add(_note("Leo swims", FRIENDS, ("telegram:22", "Leo")))
    assert await _both(engine, names) == {"dad", "mom"}
    assert await _both(engine, names, OTHER) == {"leo"}


async def test_a_waiting_line_is_read_every_time(engine: MemoryEngine) -> None:
    names = SameNames()
    await engine.add(_note("Dad is booking the hotel", FAMILY, (DAD1, "Dad")))
    assert await _both(engine, names) == set()
    mem = SqliteMemory(engine)
    await mem.buffer([Turn(owner=DAD2, channel=FAMILY[0], chat_id=FAMILY[1], role="user", content="I'll drive",
                           message_id="5", sender_id="15", group=True, speaker_name="Dad")])
    assert await _both(engine, names) == {"dad"}


async def test_a_members_erasure_takes_the_name_from_every_groups_entry(engine: MemoryEngine) -> None:
    """/forget all of the second Dad: his notes in both groups go
    (forget_speaker), and neither group's entry keeps his name."""
    names = SameNames()
    await _two_dads(engine, names)
    await engine.add(_note("Dad likes tea", FRIENDS, (DAD1, "Dad")))
    await engine.add(_note("Dad likes coffee", FRIENDS, (DAD2, "Dad")))
    assert await _both(engine, names, OTHER) == {"dad"}
    counts = await engine.forget_owner(DAD2)
    assert counts["group notes"] == 2
    assert await _both(engine, names, OTHER) == set()
    assert await _both(engine, names) == set()


async def test_a_group_wipe_leaves_no_name(engine: MemoryEngine) -> None:
    names = SameNames()
    await _two_dads(engine, names)
    await forget_group(engine, *FAMILY)
    assert await _both(engine, names) == set()
    await engine.add(_note("Dad is back", FAMILY, (DAD1, "Dad")))  # learnt again from nothing
    assert await _both(engine, names) == set()


async def test_a_note_or_day_erased_alone_takes_its_name(engine: MemoryEngine) -> None:
    """The page's erase and memory_forget go through MemoryEngine.delete; a
    day's erasure through delete_event."""
    names = SameNames()
    _, second = await _two_dads(engine, names)
    await engine.delete(second)
    assert await _both(engine, names) == set()
    day = await engine.add_event(GROUP, "2026-03-01", "Dad talked", channel=FAMILY[0], chat_id=FAMILY[1],
                                 provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                                                       speakers=(DAD2,), said_by=("Dad",)))
    assert await _both(engine, names) == {"dad"}
    await engine.delete_event(day.id)
    assert await _both(engine, names) == set()


async def test_merged_identities_are_one_member(engine: MemoryEngine) -> None:
    """merge-identities: the second Dad's handle is the first's; the group's
    notes name one member, and the name is no longer two members'."""
    names = SameNames()
    await _two_dads(engine, names)
    await engine.add(NewMemory(owner=DAD2, content="I like tea"))  # a row of his own: the merge has rows to move
    await move_owner(engine, DAD2, DAD1, job="merge")
    assert await _both(engine, names) == set()


async def test_a_superseded_note_still_counts_as_the_full_read_does(engine: MemoryEngine) -> None:
    """A note replaced keeps its row and who said it; the full read never
    looked at a row's status, nor does the cache."""
    names = SameNames()
    _, second = await _two_dads(engine, names)
    newer = await engine.add(_note("Dad drives to the lake on Sunday", FAMILY, (DAD1, "Dad")))
    await engine.set_status(second, Status.SUPERSEDED, superseded_by=newer.id)
    assert await _both(engine, names) == {"dad"}


async def test_a_quiet_group_reads_its_own_rows_after_many_others(engine: MemoryEngine) -> None:
    """Many rows of other owners since a group's last read: read by the
    owner's index, not walked by id; the same names either way."""
    names = SameNames()
    await engine.add(_note("Dad is booking the hotel", FAMILY, (DAD1, "Dad")))
    assert await _both(engine, names) == set()
    await engine.add_many([(NewMemory(owner=MOM, content=f"Mom's fact number {i}"), None) for i in range(150)])
    await engine.add(_note("Dad drives to the lake", FAMILY, (DAD2, "Dad")))
    assert await _both(engine, names) == {"dad"}


async def test_groups_beyond_the_bound_are_read_again(engine: MemoryEngine) -> None:
    names = SameNames(max_groups=1)
    await _two_dads(engine, names)
    await engine.add(_note("Leo hikes", FRIENDS, ("telegram:21", "Leo")))
    assert await _both(engine, names, OTHER) == set()
    assert await _both(engine, names) == {"dad"}  # dropped for the other group, read in full again
    await engine.add(_note("Leo swims", FRIENDS, ("telegram:22", "Leo")))
    assert await _both(engine, names, OTHER) == {"leo"}


_FORGET_IN_ANOTHER_PROCESS = """
import asyncio, sys
from memory import ManualClock, MemoryEngine

async def main() -> None:
    engine = await MemoryEngine.open(sys.argv[1], ManualClock("2026-03-01T12:00:00Z"))
    try:
        await engine.forget_owner(sys.argv[2])
    finally:
        await engine.close()

asyncio.run(main())
"""


async def test_another_process_erasing_a_member_is_seen_at_the_next_read(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """`myclaw memory forget --user` run beside the gateway writes the same
    memory.db from another process: the gateway's entry must not keep the
    erased member's name (PRAGMA data_version, read at every read)."""
    names = SameNames()
    await _two_dads(engine, names)
    root = str(Path(__file__).resolve().parents[2])
    await asyncio.to_thread(subprocess.run, [sys.executable, "-c", _FORGET_IN_ANOTHER_PROCESS,
                                             str(engine.db.path), DAD2], check=True, timeout=60, cwd=root)
    # At once: not a second later, as other caches' stamps see another process.
    assert await _both(engine, names) == set()


async def test_a_note_said_again_by_another_member_is_read_again(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A flush widens a note's speakers in place (Consolidator._reinforce):
    no longer one member's note, it no longer says that member went by its
    name, for the cache as for the full read."""
    # Both Dads mapped to names of their own (memory.identities) and not in
    # the batch: it cannot tag their bare rows (memory/retag.py), which would
    # keep the name shared whatever the note says; what the note says is all
    # that changes here.
    dad1, dad2 = "dad.li", "dad.wang"
    names = SameNames()
    old = await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (dad1, "Dad")))
    await engine.add_event(GROUP, "2026-02-28", "Dad talked about the drive", channel=FAMILY[0], chat_id=FAMILY[1],
                           provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                                                 speakers=(dad2,), said_by=("Dad",)))
    assert await _both(engine, names) == {"dad"}
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)
    await mem.buffer([Turn(owner=MOM, channel=FAMILY[0], chat_id=FAMILY[1], role="user", group=True,
                           content="so Dad is booking the hotel for the lake trip, right?", message_id="7",
                           sender_id="12", speaker_name="Mom")])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([], "Mom asked about the hotel"))
    fake.queue_reply(reply([{"content": "Dad is booking the hotel for the lake trip", "category": "decision",
                             "lines": [1], "same_as": 1}], "the hotel"))
    reports = await svc.tick()
    assert reports[-1].reinforced == [old.id]
    again = await engine.get(old.id)
    assert again is not None and again.provenance.speakers == (dad1, MOM)
    assert await _both(engine, names) == set()


async def test_a_name_the_batch_tagged_stays_shared_when_a_note_is_widened(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The Dads known by their platform ids: the batch that finds the name
    shared tags their bare rows (memory/retag.py), and a tag says two members
    had the name when written, so the widened note leaves it shared, for the
    cache as for the full read."""
    names = SameNames()
    old = await engine.add(_note("Dad is booking the hotel for the lake trip", FAMILY, (DAD1, "Dad")))
    day = await engine.add_event(GROUP, "2026-02-28", "Dad talked about the drive", channel=FAMILY[0],
                                 chat_id=FAMILY[1], provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1],
                                                                          group=True, speakers=(DAD2,),
                                                                          said_by=("Dad",)))
    assert await _both(engine, names) == {"dad"}
    await SqliteMemory(engine).buffer([Turn(owner=MOM, channel=FAMILY[0], chat_id=FAMILY[1], role="user",
                                            group=True, content="so Dad is booking the hotel for the lake trip?",
                                            message_id="7", sender_id="12", speaker_name="Mom")])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([], "Mom asked about the hotel"))
    fake.queue_reply(reply([{"content": "Dad is booking the hotel for the lake trip", "category": "decision",
                             "lines": [1], "same_as": 1}], "the hotel"))
    reports = await ExtractionService(engine, llm, max_concurrency=1).tick()
    assert reports[-1].reinforced == [old.id]
    again = await engine.get(old.id)
    assert again is not None and again.provenance.speakers == (DAD1, MOM)
    said = await engine.db.fetchone("SELECT json_extract(provenance, '$.said_by[0]') FROM daily_events WHERE id = ?",
                                    (day.id,))
    assert said is not None and str(said[0]).startswith("Dad #")
    assert await _both(engine, names) == {"dad"}
