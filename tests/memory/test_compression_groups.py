"""A group's own days (memory/groupnotes.py) compressed by the daily run:
once each, under the same lease as a user's, into the group's notes that
name who spoke, so a member's erasure still finds them."""

from __future__ import annotations

from datetime import date, timedelta

from memory import ManualClock, MemoryEngine, Provenance
from memory.compression import Compressor
from memory.groupnotes import forget_speaker, group_owner
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401

FAMILY = ("telegram", "-100900")
DAD, MOM = "telegram:11", "telegram:12"


async def _group_day(engine: MemoryEngine, day: str, summary: str, *speakers: tuple[str, str]) -> int:
    event = await engine.add_event(
        group_owner(*FAMILY), day, summary, channel=FAMILY[0], chat_id=FAMILY[1],
        provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                              speakers=tuple(s for s, _ in speakers), said_by=tuple(n for _, n in speakers)))
    return event.id


async def test_a_week_of_a_groups_days_is_compressed_once_each_into_notes_naming_who_spoke(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    owner = group_owner(*FAMILY)
    first = date(2026, 2, 22)
    for n in range(7):  # a week of the group's traffic: two batches a day
        day = (first + timedelta(days=n)).isoformat()
        await _group_day(engine, day, f"Dad planned stop {n} of the lake trip", (DAD, "Dad"))
        await _group_day(engine, day, f"Mom packed bag {n} for the lake trip", (MOM, "Mom"))
    today = await _group_day(engine, "2026-03-01", "Mom is still chatting", (MOM, "Mom"))

    def answer(body: dict[str, object]) -> Reply:
        text = user_prompt(body)  # type: ignore[arg-type]
        stop = text.split("Dad planned stop ")[1][0]
        return Reply(reply([{"content": f"Dad plans stop {stop} of the lake trip", "category": "decision",
                             "lines": [1]}], "x"))

    fake.responder = answer
    rep = await Compressor(engine, llm).daily()
    # One memory model call a day of the group's, each day's events marked done.
    assert (rep.events, rep.failed_groups) == (14, 0) and len(fake.requests) == 7
    assert "GROUP's own notes" in user_prompt(fake.requests[0])  # the notes' prompt: facts name the person
    assert [e.id for e in await engine.events(owner, uncompressed_only=True)] == [today]
    notes = {m.content: m for m in await engine.list_memories(owner, limit=100)}
    assert len(notes) == 7
    note = notes["Dad plans stop 3 of the lake trip"]
    # Named by the members of the event it retells (Dad's), not by everyone heard that day.
    assert (note.provenance.speakers, note.provenance.said_by) == ((DAD,), ("Dad",))
    assert (note.provenance.chat_id, note.provenance.group) == (FAMILY[1], True)
    # Read in that group only, cited as the group's note.
    hits = await SqliteMemory(engine).search(MOM, "lake trip stop 3", private=False, chat=FAMILY)
    assert hits and hits[0].owner == owner and "said by Dad" in hits[0].citation()
    assert not [h for h in await SqliteMemory(engine).search(MOM, "lake trip stop 3") if h.owner == owner]

    # A second run (and the next day's, once today's is over) re-reads nothing done.
    assert (await Compressor(engine, llm).daily()).events == 0 and len(fake.requests) == 7
    clock.advance(86400)
    fake.responder = lambda body: Reply(reply([], "x"))
    assert (await Compressor(engine, llm).daily()).events == 1 and len(fake.requests) == 8

    # Mom erases everything: no note of Dad's goes with her. Dad does: his go.
    assert (await forget_speaker(engine, MOM))["notes"] == 0
    assert len(await engine.list_memories(owner, limit=100)) == 7
    gone = await forget_speaker(engine, DAD)
    assert gone["notes"] == 7
    assert not [m for m in await engine.list_memories(owner, limit=100) if DAD in m.provenance.speakers]


async def test_a_groups_day_prompt_says_its_lines_are_summaries_tagged_by_channel_not_members_lines(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A group's day is its summaries, each tagged ``[channel]``: the notes'
    prompt must not tell the model each line is labelled with the member
    who said it (the batch's wording), which a summary is not."""
    await _group_day(engine, "2026-02-27", "Dad planned the lake trip's first stop", (DAD, "Dad"))
    fake.responder = lambda body: Reply(reply([], "x"))
    await Compressor(engine, llm).daily()
    [request] = fake.requests
    text = user_prompt(request)
    assert "GROUP's own notes" in text and "- 2026-02-27 Fri [telegram] Dad planned" in text
    assert "labelled with the member who said it" not in text and "bot's replies" not in text
    assert "summary of the group's talk" in text and "tagged with the channel" in text
