"""memory/chatkinds.py: Feishu facts from before the chat kind was kept are
labelled private where the gateway knows the chat was a private one."""

from __future__ import annotations

from datetime import timedelta

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log
from memory.chatkinds import label_private, unlabelled_chats
from memory.extraction import ExtractionService
from memory.llm import MemoryLLM
from memory.scope import in_group
from memory.service import SqliteMemory, Turn
from memory.types import NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI

from ._writepath import fake, llm, reply  # noqa: F401


def old_feishu(chat_id: str) -> Provenance:
    return Provenance.from_json(f'{{"channel":"feishu","chat_id":"{chat_id}"}}')


async def test_a_feishu_private_fact_from_before_kinds_takes_its_owners_private_words_once_labelled(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Taken for a group's (fail closed), an old fact of Alice's Feishu
    private chat never gained the words a private restatement was said in,
    so she could not find it by them. The gateway knows that chat was a
    private one: labelled so, it does."""
    dm = await engine.add(NewMemory(owner="alice", content="Alice drinks chamomile tea", provenance=old_feishu("oc_dm")))
    team = await engine.add(NewMemory(owner="alice", content="Alice likes green tea", provenance=old_feishu("oc_team")))
    tg = await engine.add(NewMemory(owner="alice", content="Alice rides a bike",
                                    provenance=Provenance(channel="telegram", chat_id="42")))
    assert await unlabelled_chats(engine) == ["oc_dm", "oc_team"]

    assert await label_private(engine, ["oc_dm", "oc_nowhere"]) == 1
    got = await engine.get_many([dm.id, team.id, tg.id])
    assert got[dm.id].provenance.group is False and not in_group(got[dm.id].provenance)
    assert got[team.id].provenance.group is None and in_group(got[team.id].provenance)  # not known: still a group's
    assert got[tg.id].provenance == Provenance(channel="telegram", chat_id="42")
    assert [e.memory_id for e in await read_log(engine.db, actions=["relabel"])] == [dm.id]
    assert await unlabelled_chats(engine) == ["oc_team"]
    assert await label_private(engine, ["oc_dm"]) == 0  # once only

    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Alice drinks chamomile tea", "same_as": 1, "lines": [1]}]))
    await mem.buffer([
        Turn(owner="alice", channel="telegram", chat_id="42", role=r, content=c, message_id="1", group=False)
        for r, c in (("user", "chamomile tea calms my panic attacks"), ("assistant", "ok"))
    ])
    clock.advance(timedelta(minutes=5))
    [rep] = await svc.flush_now("alice")
    assert rep.reinforced == [dm.id]
    assert [h.id for h in await mem.search("alice", "panic attacks")] == [dm.id]


async def test_nothing_left_to_label_is_not_looked_for_again(engine: MemoryEngine) -> None:
    await engine.add(NewMemory(owner="alice", content="Alice drinks tea", provenance=old_feishu("oc_dm")))
    await label_private(engine, ["oc_dm"])
    assert await unlabelled_chats(engine) == []
    # A row written by hand after that is not looked for: new rows always say their kind.
    await engine.add(NewMemory(owner="alice", content="Alice drinks coffee", provenance=old_feishu("oc_x")))
    assert await unlabelled_chats(engine) == []


async def test_old_feishu_events_of_a_chat_known_private_are_labelled_private_too(engine: MemoryEngine) -> None:
    """A Tier 3 event from before the chat kind was kept is taken for a
    group's as a fact is: its day's summary would be one the group reads.
    Where the gateway knows the chat was private, it is labelled so too."""
    dm = await engine.add_event("alice", "2026-01-05", "Alice talked about her panic attacks",
                                channel="feishu", chat_id="oc_dm", provenance=old_feishu("oc_dm"))
    team = await engine.add_event("alice", "2026-01-05", "Alice planned the team lunch",
                                  channel="feishu", chat_id="oc_team", provenance=old_feishu("oc_team"))
    assert await unlabelled_chats(engine) == ["oc_dm", "oc_team"]  # events' chats, no fact needed

    assert await label_private(engine, ["oc_dm"]) == 1
    rows = {r[0]: r[1] for r in await engine.db.fetchall("SELECT id, provenance FROM daily_events")}
    assert Provenance.from_json(rows[dm.id]).group is False
    assert not in_group(Provenance.from_json(rows[dm.id]))
    assert Provenance.from_json(rows[team.id]).group is None  # not known: still a group's
    assert await unlabelled_chats(engine) == ["oc_team"]
    await label_private(engine, ["oc_team"])
    assert await unlabelled_chats(engine) == []
