"""A batch's retrievals share their reads (memory/sharedreads.py) and return
what they returned each on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.consolidate import Consolidator
from memory.retrieval import Retriever
from memory.sharedreads import current, shared_reads
from memory.types import Category

TOPICS = ["coffee", "Postgres database", "cat named Mochi", "hiking weekends", "Berlin flat", "guitar lessons",
          "咖啡 燕麦拿铁", "数据库 选型", "周末 西湖 散步", "猫 年糕"]
LINES = ["which coffee do I like again?", "remind me of the database we chose", "my cat Mochi is sick",
         "ok", "thanks", "ok", "what about hiking this weekend", "我喜欢的咖啡是什么", "数据库选了什么",
         "guitar lessons start soon", "thanks"]


async def _store(engine: MemoryEngine, clock: ManualClock) -> None:
    """alice: more memories than the retriever's candidates, a small share
    of all (each term's MATCH scoped to her); bob: a few (read by owner);
    carol: a group's and a private chat's."""
    await engine.add_many((NewMemory(owner=f"other{k}", content=f"other said {TOPICS[i % len(TOPICS)]} {i}"), None)
                          for k in range(6) for i in range(60))
    for owner, n in (("alice", 60), ("bob", 6), ("carol", 12)):
        for i in range(n):
            clock.advance(1)
            chat = "-100" if owner == "carol" and i % 2 else owner
            await engine.add(NewMemory(
                owner=owner, content=f"{owner} said {TOPICS[i % len(TOPICS)]} note {i}",
                category=Category.IDENTITY if i % 3 == 0 else Category.EVENT,
                provenance=Provenance(channel="telegram", chat_id=chat, group=chat.startswith("-")),
                source_text=f"{TOPICS[(i * 7) % len(TOPICS)]} and {TOPICS[i % len(TOPICS)]}",
            ))


@contextmanager
def statements(engine: MemoryEngine) -> Iterator[list[str]]:
    """The SQL the retriever runs on the event loop's connection."""
    seen: list[str] = []
    inline = engine.db._inline  # the connection retrieval reads through
    assert inline is not None
    inline.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        inline.set_trace_callback(None)


async def test_a_batch_of_retrievals_returns_what_each_returned_alone(engine: MemoryEngine, clock: ManualClock) -> None:
    await _store(engine, clock)
    scopes = [("alice", True, None), ("bob", True, None), ("carol", True, None), ("carol", False, ("telegram", "-100"))]
    alone = {s: [[(h.id, h.score) for h in await Retriever(engine).retrieve(s[0], line, limit=5, private=s[1], chat=s[2])]
                 for line in LINES] for s in scopes}
    r = Retriever(engine)
    with shared_reads():  # one batch after another, and all of them in one
        for s in scopes:
            await r.prefetch(s[0], LINES, private=s[1], chat=s[2])
            got = [[(h.id, h.score) for h in await r.retrieve(s[0], line, limit=5, private=s[1], chat=s[2])]
                   for line in LINES]
            assert got == alone[s], s
            assert any(got), s  # the lines find something: the comparison is not of empty lists
        mixed = {s: [[(h.id, h.score) for h in await r.retrieve(s[0], line, limit=5, private=s[1], chat=s[2])]
                     for line in LINES] for s in scopes[::-1]}
    assert mixed == alone
    assert alone[scopes[2]] != alone[scopes[3]]  # a group reads less of carol's than her private chat


async def test_ranked_gives_retrieve_s_ids_and_scores_without_the_hits(engine: MemoryEngine, clock: ManualClock) -> None:
    """What the consolidator reads (Retriever.ranked): retrieve's ids and
    scores, to the bit and in its order, alone and in a batch, in a group."""
    await _store(engine, clock)
    clock.advance(86400 * 40)  # the events' decay counts in the scores
    scopes = [("alice", True, None), ("bob", True, None), ("carol", True, None), ("carol", False, ("telegram", "-100"))]
    r = Retriever(engine)
    for limit in (1, 5, 30):
        for s in scopes:
            for line in LINES:
                want = [(h.id, h.score) for h in await r.retrieve(s[0], line, limit=limit, private=s[1], chat=s[2])]
                assert await r.ranked(s[0], line, limit=limit, private=s[1], chat=s[2]) == want, (s, line)
    with shared_reads():
        await r.prefetch("alice", LINES)
        got = [await r.ranked("alice", line, limit=5) for line in LINES]
    assert got == [[(h.id, h.score) for h in await Retriever(engine).retrieve("alice", line, limit=5)] for line in LINES]
    assert sum(map(len, got)) > len(LINES)  # not a comparison of empty lists


async def test_a_flush_s_candidates_read_the_owner_s_rows_and_term_counts_once(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    await _store(engine, clock)
    alone = Retriever(engine)
    best: dict[int, float] = {}
    for line in LINES:
        for h in await alone.retrieve("bob", line, limit=5):
            best[h.id] = max(best.get(h.id, 0.0), h.score)
    c = Consolidator(engine)
    with statements(engine) as seen:
        cands = await c.candidates("bob", LINES)
    assert [m.id for m in cands.memories] == sorted(best, key=lambda i: -best[i])
    assert len([s for s in seen if "x.owner IN" in s]) == 1  # bob's few rows, once for 11 lines (8 distinct)
    assert len([s for s in seen if "memories_vocab" in s]) == 1


async def test_a_write_during_the_batch_is_seen_by_the_retrievals_after_it(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    await _store(engine, clock)
    r = Retriever(engine)
    with shared_reads():
        asked = "which trumpet or guitar did I buy"
        await r.prefetch("bob", [asked])
        before = [h.id for h in await r.retrieve("bob", asked, limit=5)]
        assert before  # bob's rows were read (his guitar note)
        new = await engine.add(NewMemory(owner="bob", content="bob bought a Yamaha trumpet",
                                         category=Category.EVENT))
        hits = await r.retrieve("bob", asked, limit=5)
    assert hits[0].id == new.id and new.id not in before


async def test_another_task_does_not_see_a_batch_s_reads() -> None:
    started, seen = asyncio.Event(), asyncio.Event()
    outside: list[object] = []

    async def reply_path() -> None:
        await started.wait()
        outside.append(current())
        seen.set()

    task = asyncio.create_task(reply_path())
    with shared_reads() as reads:
        assert current() is reads
        started.set()
        await seen.wait()
    await task
    assert outside == [None] and current() is None
