"""Learning from a group's turns: the memory model sees only what that group
may read of the member (memory/scope.py), and learns their facts from their
own lines, not from the bot's reply to everyone."""

from __future__ import annotations

from datetime import timedelta

from memory import ManualClock, MemoryEngine
from memory.backend import Turn
from memory.extraction import ExtractionService
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from memory.types import Category, NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401

GROUP = ("feishu", "oc_team")  # a Feishu chat id says nothing of its kind: the turn does


def said(owner: str, text: str, *, chat: tuple[str, str], group: bool, mid: str, role: str = "user") -> Turn:
    return Turn(owner=owner, channel=chat[0], chat_id=chat[1], role=role, content=text, message_id=mid, group=group)


async def fact(engine: MemoryEngine, owner: str, text: str, chat: tuple[str, str], *, group: bool = False) -> int:
    m = await engine.add(NewMemory(owner=owner, content=text, category=Category.IDENTITY, importance=0.9,
                                   provenance=Provenance(channel=chat[0], chat_id=chat[1], group=group)))
    return m.id


async def test_a_group_batch_shows_the_model_only_that_groups_facts_of_the_member(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    await fact(engine, "alice", "Alice takes sertraline 50mg every morning", ("feishu", "ou_alice"))
    await fact(engine, "alice", "Alice's sertraline dose was raised by Dr. Wu", ("feishu", "oc_family"), group=True)
    here = await fact(engine, "alice", "Alice is cutting down on sertraline and coffee", GROUP, group=True)
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([
        said("alice", "I'm switching off sertraline next month", chat=GROUP, group=True, mid="m1"),
        said("alice", "Good luck with it!", chat=GROUP, group=True, mid="m1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([{"content": "Alice is switching off sertraline next month", "category": "event",
                             "lines": [1]}], "Alice plans to stop sertraline"))
    [rep] = await svc.tick()
    assert rep.ok and len(rep.added) == 1
    prompt = user_prompt(fake.requests[0])
    # Only what the group itself heard from her, as context for merging.
    assert "cutting down on sertraline" in prompt
    assert "50mg" not in prompt and "Dr. Wu" not in prompt
    new = (await engine.get_many(rep.added))[rep.added[0]]
    assert new.provenance.chat_id == "oc_team" and new.provenance.group
    assert here not in rep.reinforced


async def test_a_private_batch_still_sees_all_of_the_users_facts(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    await fact(engine, "alice", "Alice takes sertraline 50mg every morning", ("feishu", "ou_alice"))
    await fact(engine, "alice", "Alice is cutting down on sertraline and coffee", GROUP, group=True)
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    me = ("feishu", "ou_alice")
    await mem.buffer([
        said("alice", "I'm switching off sertraline next month", chat=me, group=False, mid="p1"),
        said("alice", "Noted.", chat=me, group=False, mid="p1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([], "s"))
    [rep] = await svc.tick()
    prompt = user_prompt(fake.requests[0])
    assert "50mg" in prompt and "cutting down" in prompt
    assert "group chat" not in prompt.lower()


async def test_in_a_group_the_reply_repeating_another_member_is_not_the_askers_fact(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    # Bob said "I'm moving to Tokyo" in the group earlier (his own turn, his
    # own buffer); the bot's reply to Alice repeats it.
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([
        said("alice", "What should I bring to the farewell dinner on Friday?", chat=GROUP, group=True, mid="a1"),
        said("alice", "Since Bob is moving to Tokyo, a small travel gift would be nice.", chat=GROUP, group=True,
             mid="a1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    # A model that takes the reply's words for Alice's.
    fake.queue_reply(reply([
        {"content": "Alice is moving to Tokyo", "category": "identity", "importance": 1, "lines": [2]},
        {"content": "Alice goes to a farewell dinner on Friday", "category": "event", "lines": [1, 2]},
    ], "Alice asked what to bring to a farewell dinner"))
    [rep] = await svc.tick()
    assert rep.ok
    system = fake.requests[0]["messages"][0]["content"]
    prompt = user_prompt(fake.requests[0])
    # The model is told whose words are whose.
    assert "group chat" in prompt.lower() and "other members" in prompt
    reply_line = next(line for line in prompt.splitlines() if "Tokyo" in line)
    assert "not the user's words" in reply_line
    assert "other members" in system
    stored = [m.content for m in await engine.list_memories("alice")]
    assert stored == ["Alice goes to a farewell dinner on Friday"]


async def test_in_a_group_the_reply_still_tells_what_the_askers_photo_shows(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([
        said("alice", "[photo] my new desk setup", chat=GROUP, group=True, mid="p1"),
        said("alice", "Nice: a standing desk with two monitors.", chat=GROUP, group=True, mid="p1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([{"content": "Alice has a standing desk", "category": "identity", "lines": [2]}], "s"))
    [rep] = await svc.tick()
    assert [m.content for m in await engine.list_memories("alice")] == ["Alice has a standing desk"]
