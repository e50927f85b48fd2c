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
    [rep] = await svc.flush_now("alice")  # hers; the group's own batch: test_extraction_notes.py
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
    [rep] = await svc.flush_now("alice")  # hers; the group's own batch: test_extraction_notes.py
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
    [rep] = await svc.flush_now("alice")  # hers; the group's own batch: test_extraction_notes.py
    assert [m.content for m in await engine.list_memories("alice")] == ["Alice has a standing desk"]


async def test_a_group_fact_that_updates_a_shared_one_wins_in_that_group_only(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The member shared "works at Acme" from their private chat; in the
    group they say they left. The model was never shown the shared fact
    (only the group's own were candidates), so the group read both the old
    and the new. Now it is shown, and the group's newer fact stands for it
    in that group; the owner's private record is left as it was, and its
    private predecessor is never shown to the group's model."""
    from memory.retrieval import Retriever
    from memory.sharing import share

    me = ("feishu", "ou_alice")
    old = await fact(engine, "alice", "Alice lives in Hangzhou", me)
    acme = await fact(engine, "alice", "Alice works at Acme in Shanghai", me)
    await engine.set_status(old, "superseded", superseded_by=acme)
    await share(engine, "alice", [acme], None)
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([
        said("alice", "I quit Acme, I work at Globex in Shanghai now", chat=GROUP, group=True, mid="g1"),
        said("alice", "Congrats!", chat=GROUP, group=True, mid="g1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([{"content": "Alice works at Globex in Shanghai", "category": "identity", "updates": 1,
                             "lines": [1]}], "Alice changed jobs"))
    [rep] = await svc.flush_now("alice")  # hers; the group's own batch: test_extraction_notes.py
    assert rep.ok and len(rep.added) == 1
    prompt = user_prompt(fake.requests[0])
    shown = prompt.split("Existing memories:", 1)[1]
    assert "Alice works at Acme in Shanghai" in shown and "Hangzhou" not in prompt
    new = (await engine.get_many(rep.added))[rep.added[0]]
    assert new.provenance.chat_id == GROUP[1] and new.provenance.group

    r = Retriever(engine)
    in_group = [h.id for h in await r.retrieve("alice", "where does Alice work in Shanghai", private=False, chat=GROUP)]
    assert in_group == [new.id]
    # The owner's record is unchanged: still current in their private chat and in other groups.
    kept = (await engine.get_many([acme]))[acme]
    assert kept.status.value == "active" and kept.superseded_by is None
    assert acme in [h.id for h in await r.retrieve("alice", "Acme")]
    assert [h.id for h in await r.retrieve("alice", "Acme", private=False, chat=("feishu", "oc_other"))] == [acme]
    # Erased, the group's fact stops standing for it there.
    await engine.delete(new.id)
    assert [h.id for h in await r.retrieve("alice", "Acme", private=False, chat=GROUP)] == [acme]


async def test_a_shared_fact_said_again_in_the_group_is_read_there_once(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Restated in the group (``same_as`` the shared fact), it becomes the
    group's own row, standing for the shared one there: the group reads it
    once, and the owner's private row gains no group words."""
    from memory.retrieval import Retriever
    from memory.sharing import share

    acme = await fact(engine, "alice", "Alice works at Acme", ("feishu", "ou_alice"))
    await share(engine, "alice", [acme], None)
    mem = SqliteMemory(engine)
    await mem.buffer([
        said("alice", "as you know I work at Acme, we ship rockets", chat=GROUP, group=True, mid="g1"),
        said("alice", "Nice!", chat=GROUP, group=True, mid="g1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([{"content": "Alice works at Acme", "category": "identity", "same_as": 1, "lines": [1]}],
                           "s"))
    [rep] = await ExtractionService(engine, llm).flush_now("alice")
    assert rep.ok and len(rep.added) == 1 and rep.reinforced == []
    hits = await Retriever(engine).retrieve("alice", "where does Alice work", private=False, chat=GROUP)
    assert [h.id for h in hits] == rep.added
    kept = (await engine.get_many([acme]))[acme]
    assert kept.source_text == "" and kept.status.value == "active"


async def test_a_chinese_group_line_naming_a_tool_is_judged_chinese_not_by_the_labels(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The language hint is read from what was said: the English labels the
    write path puts in front of each line ("assistant (to the whole group;
    not the user's words)") outweighed a short Chinese exchange naming
    Vue 3, and its facts came back in English."""
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([
        said("alice", "我们定了用Vue 3。", chat=GROUP, group=True, mid="z1"),
        said("alice", "好的：我们定了用Vue 3。", chat=GROUP, group=True, mid="z1", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([{"content": "星河前端决定用Vue 3", "category": "decision", "lines": [1]}], "定了前端"))
    [rep] = await svc.flush_now("alice")  # hers; the group's own batch: test_extraction_notes.py
    assert rep.ok
    assert "mainly in Chinese: write the facts and the summary in Chinese" in user_prompt(fake.requests[0])
