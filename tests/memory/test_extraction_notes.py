"""A group's own batch (memory/groupnotes.py): the memory model reads the
group's lines under who said them, with the notes' prompt; each note keeps
who spoke the lines it came from, and is checked against the group's own
notes only."""

from __future__ import annotations

from datetime import timedelta

from memory import ManualClock, MemoryEngine
from memory.backend import Turn
from memory.extraction import ExtractionService
from memory.groupnotes import group_owner
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from memory.types import NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401

FAMILY = ("telegram", "-100900")
GROUP = group_owner(*FAMILY)


def line(owner: str, name: str, text: str, mid: str, role: str = "user") -> Turn:
    return Turn(owner=owner, channel=FAMILY[0], chat_id=FAMILY[1], role=role, content=text, message_id=mid,
                sender_id=owner.split(":")[1], group=True, speaker_name=name if role == "user" else "")


async def _group_batch(mem: SqliteMemory, svc: ExtractionService, clock: ManualClock, fake: FakeOpenAI,
                       turns: tuple[Turn, ...], fact: str) -> list[int]:
    """``turns`` buffered and learnt in one tick, the group's notes batch
    answered with ``fact`` (the members' private batches with nothing);
    the ids of the group's notes added."""
    await mem.buffer(list(turns))
    clock.advance(timedelta(minutes=5))
    fake.responder = lambda body: Reply(reply([], "x") if "GROUP's own notes" not in user_prompt(body)
                                        else reply([{"content": fact, "category": "decision", "lines": [1]}], "x"))
    reports = await svc.tick()
    [done] = [r for r in reports if r.owner == GROUP]
    assert done.ok and done.added
    return done.added


async def test_the_groups_batch_is_learnt_as_its_notes_each_naming_who_said_it(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)  # the batches asked in order
    # Another group's note and Dad's private fact: never shown to the group's batch.
    await engine.add(NewMemory(owner=group_owner("telegram", "-100901"), content="Sam is booking the ski hotel",
                               provenance=Provenance(channel="telegram", chat_id="-100901", group=True,
                                                     speakers=("telegram:30",))))
    await engine.add(NewMemory(owner="telegram:11", content="Dad's hotel loyalty number is 5521",
                               provenance=Provenance(channel="telegram", chat_id="11", group=False)))
    await mem.buffer([
        line("telegram:11", "Dad", "I'll book the hotel for the lake trip", "1"),
        line("telegram:11", "Dad", "Great, Dad books the hotel.", "1", role="assistant"),
        line("telegram:12", "Mom", "Mia is allergic to peanuts, remember that", "2"),
        line("telegram:12", "Mom", "Noted.", "2", role="assistant"),
    ])
    clock.advance(timedelta(minutes=5))
    # Dad's and Mom's own batches first (in buffer order), then the group's.
    fake.queue_reply(reply([], "Dad offered to book the hotel"))
    fake.queue_reply(reply([], "Mom told about Mia's allergy"))
    fake.queue_reply(reply([
        {"content": "Dad is booking the hotel for the lake trip", "category": "decision", "lines": [1]},
        {"content": "Mia is allergic to peanuts (said by Mom)", "category": "identity", "lines": [3]},
        {"content": "The bot agreed Dad books the hotel", "category": "event", "lines": [2]},  # the bot's alone
    ], "Dad will book the hotel; Mom told about Mia's allergy"))
    reports = await svc.tick()
    assert [r.owner for r in reports] == ["telegram:11", "telegram:12", GROUP] and all(r.ok for r in reports)
    prompt = user_prompt(fake.requests[2])
    assert "learnt as the GROUP's own notes" in prompt
    assert "] Dad: I'll book the hotel" in prompt and "] Mom: Mia is allergic" in prompt
    assert "] assistant (the bot, to the group; not a member's words): Noted." in prompt
    assert "ski hotel" not in prompt and "5521" not in prompt
    notes = await engine.get_many(reports[2].added)
    assert sorted(m.content for m in notes.values()) == ["Dad is booking the hotel for the lake trip",
                                                          "Mia is allergic to peanuts (said by Mom)"]
    by = {m.content[:3]: m.provenance for m in notes.values()}
    assert by["Dad"].speakers == ("telegram:11",) and by["Dad"].said_by == ("Dad",)
    assert by["Mia"].speakers == ("telegram:12",) and by["Mia"].said_by == ("Mom",)
    assert all(m.owner == GROUP and m.provenance.chat_id == "-100900" for m in notes.values())
    # The group's day, by everyone it heard.
    event = await engine.db.fetchone("SELECT owner, provenance FROM daily_events WHERE id = ?", (reports[2].event_id,))
    assert event[0] == GROUP and set(Provenance.from_json(event[1]).speakers) == {"telegram:11", "telegram:12"}


async def test_a_member_saying_a_note_again_is_named_by_it_too(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)  # the batches asked in order
    old = await engine.add(NewMemory(owner=GROUP, content="Dad is booking the hotel for the lake trip",
                                     provenance=Provenance(channel="telegram", chat_id="-100900", group=True,
                                                           speakers=("telegram:11",), said_by=("Dad",))))
    await mem.buffer([line("telegram:12", "Mom", "so Dad is booking the hotel for the lake trip, right?", "7")])
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([], "Mom asked about the hotel"))
    fake.queue_reply(reply([{"content": "Dad is booking the hotel for the lake trip", "category": "decision",
                             "lines": [1], "same_as": 1}], "the hotel"))
    reports = await svc.tick()
    assert reports[-1].reinforced == [old.id]
    again = await engine.get(old.id)
    assert again is not None and again.provenance.speakers == ("telegram:11", "telegram:12")
    assert again.provenance.said_by == ("Dad", "Mom")


def test_a_members_name_cannot_pass_for_another_label() -> None:
    from memory.extraction import _speaker_label

    assert _speaker_label("Dad") == "Dad" and _speaker_label("  ") == "a member"
    assert _speaker_label("assistant (the bot, to the group") == "member assistant (the bot, to the group"
    assert ":" not in _speaker_label("Mom: I said\nDad") and "\n" not in _speaker_label("Mom\nDad")


async def test_two_members_of_one_name_are_told_apart_in_the_batch_and_in_the_citation(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Two "Dad"s in one group: the memory model reads each under the tag
    the chat prompt gives him (gateway/prompt.py ``speaker_labels``), and
    each note is cited as said by the one whose line it came from."""
    from gateway.prompt import Speaker, speaker_labels
    from gateway.sessions import StoredMessage

    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)
    await mem.buffer([
        line("telegram:11", "Dad", "I'll book the hotel for the lake trip", "1"),
        line("telegram:15", "Dad", "I'll drive us to the lake", "2"),
        line("telegram:12", "Mom", "great", "3"),
    ])
    clock.advance(timedelta(minutes=5))
    for _ in range(3):  # the members' own batches
        fake.queue_reply(reply([], "x"))
    fake.queue_reply(reply([
        {"content": "Dad is booking the hotel for the lake trip", "category": "decision", "lines": [1]},
        {"content": "Dad is driving to the lake", "category": "decision", "lines": [2]},
    ], "the lake trip"))
    reports = await svc.tick()
    assert reports[-1].owner == GROUP and reports[-1].ok
    history = [StoredMessage(id=n, session_id=1, channel="telegram", chat_id=FAMILY[1], role="user", content="hi",
                             owner=f"telegram:{who}", sender_id=who, message_id=str(n), created_at="", buffered=True,
                             sender_name="Dad") for n, who in enumerate(("11", "15"), 1)]
    labels = speaker_labels(history, Speaker(sender_id="12", name="Mom"))  # as the group's chat prompt names them
    prompt = user_prompt(fake.requests[-1])
    a, b = labels["11"], labels["15"]
    assert a != b and a.startswith("Dad #") and b.startswith("Dad #")
    assert f"] {a}: I'll book the hotel" in prompt and f"] {b}: I'll drive us" in prompt, prompt
    assert "] Mom: great" in prompt  # a name no one else has stays as it is
    notes = {m.content: m.provenance for m in (await engine.get_many(reports[-1].added)).values()}
    assert notes["Dad is booking the hotel for the lake trip"].said_by == (a,)
    assert notes["Dad is booking the hotel for the lake trip"].speakers == ("telegram:11",)
    assert notes["Dad is driving to the lake"].said_by == (b,)
    hits = await mem.search("telegram:12", "who books the hotel", private=False, chat=FAMILY)
    assert hits and f"said by {a}" in hits[0].citation()


async def test_a_member_keeps_his_tag_in_a_later_batch_without_the_other_member_of_his_name(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Two "Dad"s in one group, each alone in his batch: the group has two
    members of that name, so each is "Dad #tag" in every batch, not "Dad"
    in one note and "Dad #tag" in another (the tag is the group's, not the
    batch's). A name no other member of the group had stays bare."""
    from memory.groupowner import member_tag

    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)

    async def batch(*turns: Turn, fact: str) -> str:
        [note] = (await engine.get_many(await _group_batch(mem, svc, clock, fake, turns, fact))).values()
        assert len(note.provenance.said_by) == 1
        return note.provenance.said_by[0]

    dad1, dad2 = f"Dad #{member_tag('11')}", f"Dad #{member_tag('15')}"
    # Dad (11) alone: no other Dad is known in the group yet.
    assert await batch(line("telegram:11", "Dad", "I'll book the hotel for the lake trip", "1"),
                       fact="Dad is booking the hotel for the lake trip") == "Dad"
    # Another Dad (15), alone in his batch: tagged, the group has had two.
    assert await batch(line("telegram:15", "Dad", "I'll drive us to the lake", "2"),
                       fact="Dad is driving to the lake") == dad2
    # The first Dad again, alone: tagged now too, as the chat prompt tags him.
    assert await batch(line("telegram:11", "Dad", "I'll bring the tent", "3"),
                       fact="Dad is bringing the tent") == dad1
    assert f"] {dad1}: I'll bring the tent" in user_prompt(fake.requests[-1])
    # Mom, alone of her name in the group: bare.
    assert await batch(line("telegram:12", "Mom", "I'll pack the snacks", "4"), fact="Mom packs the snacks") == "Mom"


async def test_a_members_older_notes_are_tagged_once_a_namesake_comes(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Dad's notes from before another Dad spoke were written bare; the
    batch that first finds the name shared tags them as the new ones are
    (memory/retag.py), so no note is cited "said by Dad" beside two tagged
    Dads. A note of a member mapped to a name of their own, not in the
    batch, keeps the bare name (its tag is of a sender id it does not keep)
    until a batch of theirs."""
    from memory.groupowner import member_tag

    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm, max_concurrency=1)

    async def batch(*turns: Turn, fact: str) -> int:
        return (await _group_batch(mem, svc, clock, fake, turns, fact))[0]

    def said(prov: Provenance) -> str:
        return prov.said_by[0]

    hotel = await batch(line("telegram:11", "Dad", "I'll book the hotel for the lake trip", "1"),
                        fact="Dad is booking the hotel for the lake trip")
    [day] = [r[0] for r in await engine.db.fetchall("SELECT id FROM daily_events WHERE owner = ?", (GROUP,))]
    mom = await batch(line("telegram:12", "Mom", "I'll pack the snacks", "2"), fact="Mom packs the snacks")
    first = await engine.get(hotel)
    assert first is not None and said(first.provenance) == "Dad"  # one Dad so far: bare

    # Another Dad (15) speaks: his note is tagged, and so, now, is the first Dad's older note and day.
    await batch(line("telegram:15", "Dad", "I'll drive us to the lake", "3"), fact="Dad is driving to the lake")
    first, snacks = await engine.get(hotel), await engine.get(mom)
    assert first is not None and said(first.provenance) == f"Dad #{member_tag('11')}"
    assert snacks is not None and said(snacks.provenance) == "Mom"  # a name no one else has stays bare
    row = await engine.db.fetchone("SELECT json_extract(provenance, '$.said_by[0]') FROM daily_events WHERE id = ?",
                                   (day,))
    assert row is not None and row[0] == f"Dad #{member_tag('11')}"
    logged = await engine.db.fetchall("SELECT memory_id, job, detail FROM memory_log WHERE action = 'retag'")
    assert [(r[0], r[1]) for r in logged] == [(hotel, "extraction")] and "Dad" not in logged[0][2]
    hits = await mem.recall("telegram:12", "who is booking the hotel?", private=False, chat=FAMILY)
    assert hits and f"said by Dad #{member_tag('11')}" in hits[0].citation()

    # Nana, mapped to "nana" by memory.identities: her older note keeps its bare name
    # while no line of hers says her sender id, and is tagged at her next batch.
    rods = await engine.add(NewMemory(owner=GROUP, content="Nana brings the fishing rods", provenance=Provenance(
        channel=FAMILY[0], chat_id=FAMILY[1], group=True, message_ids=("0",), speakers=("nana",), said_by=("Nana",))))
    await batch(line("telegram:16", "Nana", "I'll bring the bait", "4"), fact="Nana brings the bait")
    old = await engine.get(rods.id)
    assert old is not None and said(old.provenance) == "Nana"
    nana = Turn(owner="nana", channel=FAMILY[0], chat_id=FAMILY[1], role="user", content="and the nets", message_id="5",
                sender_id="77", group=True, speaker_name="Nana")
    await batch(nana, fact="Nana brings the nets")
    old = await engine.get(rods.id)
    assert old is not None and said(old.provenance) == f"Nana #{member_tag('77')}"
