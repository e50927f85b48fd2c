"""A turn in only for what its neighbours passed on (it holds none of the
message's words) is shown in the prompt's block when it earns its place:
the reply to a matched question shown there ("what is your cat called?" /
"Miso, she is three"). A line said next to a match that shares nothing
with the message took one of the block's five places (last session's
walks). The ranking (and retrieval's neighbour credit) is unchanged:
this is about what the prompt shows."""

from __future__ import annotations

from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.retrieval import Retriever
from memory.service import SqliteMemory


async def _turns(engine: MemoryEngine, session: str, texts: list[str], chat: str = "42") -> list[int]:
    prov = Provenance(channel="telegram", chat_id=chat, session=session)
    return [(await engine.add(NewMemory(owner="alice", content=t, category=Category.CONVERSATION,
                                        provenance=prov))).id for t in texts]


async def test_a_neighbour_sharing_nothing_with_the_message_is_not_shown(engine: MemoryEngine) -> None:
    bought, sister = await _turns(engine, "s1", ["We bought tomato seedlings at the garden centre",
                                                 "My sister called about her exam results"])
    fact = (await engine.add(NewMemory(owner="alice", content="The garden centre opens at nine on Sundays",
                                       category=Category.CONFIG))).id
    query = "which seedlings did we buy at the garden centre?"
    # Ranked as before: retrieval still credits and returns it (LoCoMo's turns need it).
    ranked = await Retriever(engine).retrieve("alice", query, limit=10)
    assert sister in [h.id for h in ranked if h.neighbour]
    hits = await SqliteMemory(engine).recall("alice", query)
    assert [h.id for h in hits] == [bought, fact], hits


async def test_the_reply_to_a_matched_question_is_shown_as_its_context(engine: MemoryEngine) -> None:
    ask, answer, after = await _turns(engine, "s1", ["what is your cat called?", "Miso, she is three",
                                                     "I should water the plants later"])
    hits = await SqliteMemory(engine).recall("alice", "cat")
    assert [(h.id, h.neighbour) for h in hits] == [(ask, False), (answer, True)], hits
    assert after not in [h.id for h in hits]


async def test_a_reply_whose_question_is_another_conversations_is_not_shown(engine: MemoryEngine) -> None:
    # The id after a question, but another chat: no reply to it.
    [ask] = await _turns(engine, "s1", ["what is your cat called?"])
    [other] = await _turns(engine, "s9", ["Miso, she is three"], chat="77")
    hits = await SqliteMemory(engine).recall("alice", "cat")
    assert [h.id for h in hits] == [ask], hits
    assert other not in [h.id for h in await Retriever(engine).retrieve("alice", "cat", limit=10)]
