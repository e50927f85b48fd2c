"""The chat prompt's view of a group's names (memory/namesakes.py): what
the group's notes and waiting lines say two members went by, read once per
change, never once per reply; a name erased is not kept."""

from __future__ import annotations

from pathlib import Path

from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.groupowner import group_owner
from memory.namesakes import GroupNames
from memory.service import SqliteMemory

FAMILY = ("telegram", "-100900")
OWNER = group_owner(*FAMILY)
GRANDPA, DAD, MOM = "telegram:31", "telegram:32", "telegram:33"


def _line(owner: str, name: str, words: str, mid: str) -> Turn:
    return Turn(owner=owner, channel="telegram", chat_id=FAMILY[1], role="user", content=words,
                sender_id=owner.split(":")[1], message_id=mid, group=True, speaker_name=name)


def _note(content: str, member: str, name: str) -> NewMemory:
    return NewMemory(owner=OWNER, content=content, provenance=Provenance(
        channel="telegram", chat_id=FAMILY[1], group=True, message_ids=("1",), speakers=(member,), said_by=(name,)))


async def test_a_groups_names_are_read_once_per_change_not_per_reply(engine: MemoryEngine) -> None:
    memory = SqliteMemory(engine)
    names = memory.namesakes
    await engine.add(_note("Grandpa brings the fishing rods", GRANDPA, "Dad"))
    known = await memory.shared_names(*FAMILY)
    assert names.reads == 1
    # Only Grandpa went by "Dad": Grandpa is not tagged, anyone else of that name is.
    assert not known.told_apart("Dad", GRANDPA) and known.told_apart("dad", DAD)
    assert not known.told_apart("Mom", MOM)
    for _ in range(5):  # replies with nothing new: no read
        assert await memory.shared_names(*FAMILY) is known
    # Another owner's fact moves the file's index stamp, not this group's rows: no read.
    await engine.add(NewMemory(owner=MOM, content="Mom's own fact", provenance=Provenance(channel="telegram",
                                                                                        chat_id="33")))
    assert await memory.shared_names(*FAMILY) is known and names.reads == 1
    # A line by a member and name already known changes nothing either.
    await memory.buffer([_line(GRANDPA, "Dad", "and the bait", "2")])
    await memory.buffer([_line(MOM, "Mom", "salad", "3")])
    assert (await memory.shared_names(*FAMILY)).shared == frozenset() and names.reads == 2  # Mom: new, read once
    await memory.buffer([_line(MOM, "Mom", "and bread", "4")])
    await memory.shared_names(*FAMILY)
    assert names.reads == 2
    # Dad's line: a second "Dad", read again, now shared.
    await memory.buffer([_line(DAD, "Dad", "I'll book the hotel", "5")])
    known = await memory.shared_names(*FAMILY)
    assert names.reads == 3 and known.shared == {"dad"} and known.told_apart("Dad", GRANDPA)
    # Another group's cache is its own.
    assert (await memory.shared_names("telegram", "-100901")) == GroupNames() and names.reads == 4


async def test_a_name_erased_is_not_kept_and_another_processs_write_is_seen(tmp_path: Path, clock: ManualClock) -> None:
    seconds = [100.0]  # the gateway's monotonic clock, moved by hand
    path = tmp_path / "memory.db"
    gateway = await MemoryEngine.open(path, clock, monotonic=lambda: seconds[0])
    cli = await MemoryEngine.open(path, clock)  # `myclaw memory ...` beside the gateway
    try:
        memory = SqliteMemory(gateway)
        await gateway.add(_note("Grandpa brings the fishing rods", GRANDPA, "Dad"))
        await memory.buffer([_line(DAD, "Dad", "I'll book the hotel", "5")])
        assert (await memory.shared_names(*FAMILY)).shared == {"dad"}
        # Grandpa erases everything: his name goes from the group's view at once.
        await gateway.forget_owner(GRANDPA)
        known = await memory.shared_names(*FAMILY)
        assert known.shared == frozenset() and not known.told_apart("Dad", DAD)
        assert GRANDPA not in {m for members in known.gone_by.values() for m in members}
        # The operator's CLI writes a note of Grandpa's again: seen within a second.
        await cli.add(_note("Grandpa brings the boat", GRANDPA, "Dad"))
        seconds[0] += 1.0
        assert (await memory.shared_names(*FAMILY)).shared == {"dad"}
    finally:
        await cli.close()
        await gateway.close()
