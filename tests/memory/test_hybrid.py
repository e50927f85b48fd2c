"""memory/hybrid.py: the lexical ranking fused with vectors from the fake
OpenAI server over real HTTP, on a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memory.clock import ManualClock
from memory.embedding import CachedEmbedder, HttpEmbedder
from memory.engine import MemoryEngine
from memory.hybrid import HybridRetriever, query_text, spread_scaled
from memory.retrieval import Retriever
from memory.types import Category, Hit, NewMemory
from memory.vectorize import Vectorizer
from memory.service import SqliteMemory
from memory.vectors import VectorIndex
from tests.fakes.openai_server import FakeOpenAI

# The fake embeds a word as its concept: what a real model does for synonyms.
CONCEPTS = {"automobile": "car", "vehicle": "car", "汽车": "car", "车子": "car", "crashed": "outage", "unresponsive": "outage"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    # Wide enough that hashed words rarely collide, as distinct words rarely look alike to a model.
    async with FakeOpenAI(embedding_concepts=CONCEPTS, embedding_dim=1024) as server:
        yield server


@pytest.fixture
async def parts(
    fake: FakeOpenAI, engine: MemoryEngine, clock: ManualClock
) -> AsyncIterator[tuple[CachedEmbedder, VectorIndex]]:
    raw = HttpEmbedder(base_url=fake.url, api_key="", model="m1", timeout=2.0)
    try:
        yield CachedEmbedder(raw, engine.db, clock), VectorIndex(engine.db, "m1")
    finally:
        await raw.aclose()


def hybrid(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], **kw: object) -> HybridRetriever:
    cached, index = parts
    kw.setdefault("min_similarity", 0.1)  # one shared concept in seven words is ~0.17 here
    return HybridRetriever(Retriever(engine), index, cached, **kw)  # type: ignore[arg-type]


async def remember(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], *facts: tuple[str, str]) -> list[int]:
    ids = [(await engine.add(NewMemory(owner=owner, content=text))).id for owner, text in facts]
    cached, index = parts
    await Vectorizer(index, cached).drain()
    return ids


async def test_a_memory_in_other_words_is_found_by_meaning(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    car, _, _ = await remember(
        engine, parts,
        ("alice", "Alice's automobile is a blue Tesla"),
        ("alice", "Alice's sister lives in Lisbon"),
        ("alice", "Alice prefers tea to coffee"),
    )
    query = "which car do I drive?"
    assert car not in [h.id for h in await Retriever(engine).retrieve("alice", query)]  # no shared word
    hits = await hybrid(engine, parts).retrieve("alice", query)
    assert hits[0].id == car
    assert hits[0].content == "Alice's automobile is a blue Tesla" and hits[0].date


async def test_chinese_paraphrase_found_by_meaning(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    car, _ = await remember(engine, parts, ("alice", "用户的汽车是蓝色的"), ("alice", "用户喜欢喝绿茶"))
    hits = await hybrid(engine, parts).retrieve("alice", "我的车子什么颜色")
    assert hits[0].id == car


async def test_the_exact_words_stay_first(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    exact, _ = await remember(
        engine, parts,
        ("alice", "the staging server crashed on Friday after the redis upgrade"),
        ("alice", "the build server was unresponsive during the demo"),
    )
    hits = await hybrid(engine, parts).retrieve("alice", "when did the staging server crash after the redis upgrade?")
    assert hits[0].id == exact
    assert len(hits) == 2  # the paraphrase still comes along, after it


async def test_another_users_memory_never_comes_back(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    _, bobs = await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("bob", "Bob owns a red vehicle"))
    for fusion in ("weighted", "rrf"):
        hits = await hybrid(engine, parts, fusion=fusion).retrieve("bob", "which automobile do I have")
        assert [h.id for h in hits] == [bobs]


async def test_credentials_stay_out_of_group_chats(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    secret = (await engine.add(NewMemory(owner="alice", content="the garage code for the vehicle is 4711",
                                         category=Category.CREDENTIAL))).id
    await remember(engine, parts)
    h = hybrid(engine, parts)
    assert [x.id for x in await h.retrieve("alice", "car", private=True)] == [secret]
    assert await h.retrieve("alice", "car", private=False) == []


async def test_a_failing_endpoint_answers_with_the_words_alone(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts)
    fake.queue_embedding_error(500)
    hits = await h.retrieve("alice", "does Alice drink tea?")
    assert hits == await Retriever(engine).retrieve("alice", "does Alice drink tea?")
    assert hits[0].content == "Alice drinks tea"
    assert h.fallbacks == 1
    assert (await h.retrieve("alice", "which car?"))[0].content == "Alice's automobile is a blue Tesla"
    assert h.fallbacks == 1
    fake.queue_embedding_error(500)
    assert len(await h.retrieve("alice", "Alice", limit=1)) == 1  # the limit holds without vectors too
    assert h.fallbacks == 2


async def test_a_late_vector_does_not_hold_the_reply(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts, timeout=0.05)
    fake.embedding_delay = 1.0
    hits = await h.retrieve("alice", "which car? and tea?")
    assert [x.content for x in hits] == [x.content for x in await Retriever(engine).retrieve("alice", "which car? and tea?")]
    assert "Alice's automobile is a blue Tesla" not in [x.content for x in hits]
    assert h.fallbacks == 1
    await h.aclose()  # the late request is cancelled, nothing left running


async def test_fit_budget_and_limit(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    await remember(engine, parts, *[("alice", f"Alice's vehicle number {i} is parked outside") for i in range(12)])
    h = hybrid(engine, parts)
    assert len(await h.retrieve("alice", "car")) == Retriever(engine).max_hits
    assert len(await h.retrieve("alice", "car", limit=8)) == 8


async def test_rrf_fusion_and_bad_fusion(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    car, _ = await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    assert (await hybrid(engine, parts, fusion="rrf").retrieve("alice", "my car"))[0].id == car
    with pytest.raises(ValueError, match="fusion"):
        hybrid(engine, parts, fusion="max")


def test_query_text_joins_recent_user_lines() -> None:
    assert query_text("when are we going?", ["I love ice cream", "  "]) == "I love ice cream\nwhen are we going?"
    assert query_text("x", [str(i) for i in range(10)]).split("\n") == ["6", "7", "8", "9", "x"]


async def test_the_write_path_sees_a_restatement_in_other_words(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    """Seed 003's dedup: a new fact's candidates (what it may restate or
    replace, shown to the memory model) are found by meaning too."""
    from memory.consolidate import Consolidator

    car, _ = await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    said = ["I just got my car washed", "it looks brand new again", "and the tea was cold"]
    lexical = await Consolidator(engine, Retriever(engine)).candidates("alice", said)
    assert car not in [m.id for m in lexical.memories]
    before = len(fake.embedding_requests)
    hybrid_cands = await Consolidator(engine, hybrid(engine, parts)).candidates("alice", said)
    assert car in [m.id for m in hybrid_cands.memories]
    assert fake.embedding_requests[before:] == [said]  # one request for all the lines


async def test_a_failing_vector_search_answers_with_the_words_alone(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    class BrokenIndex(VectorIndex):
        async def search(self, *a: object, **kw: object) -> list[tuple[int, float]]:
            raise OSError("disk I/O error")

    await remember(engine, parts, ("alice", "Alice drinks tea"))
    cached, _ = parts
    h = HybridRetriever(Retriever(engine), BrokenIndex(engine.db, "m1"), cached)
    assert [x.content for x in await h.retrieve("alice", "does Alice drink tea?")] == ["Alice drinks tea"]
    assert h.fallbacks == 1


async def test_a_named_project_is_favoured_on_the_vector_side_too(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    ids = []
    for project in ("atlas", "webshop"):
        ids.append((await engine.add(NewMemory(owner="alice", content="the automobile fleet reboots nightly",
                                               project=project))).id)
    cached, index = parts
    await Vectorizer(index, cached).drain()
    h = hybrid(engine, parts)
    for project, own in (("atlas", ids[0]), ("webshop", ids[1])):
        hits = await h.retrieve("alice", f"is the {project} car down?")  # no word in common: vectors alone
        assert hits[0].id == own


async def test_the_message_counts_as_much_as_its_context(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    car, _ = await remember(
        engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice's sister lives in Lisbon near the harbour")
    )
    context = ["my sister lives in Lisbon", "her flat in Lisbon is near the harbour"]
    # At 0.25 the conversation's vector alone misses the car (cosine ~0.18 in
    # this fake), the message and the conversation together find it (~0.27).
    hits = await hybrid(engine, parts, min_similarity=0.25).retrieve("alice", "which car?", context=context)
    assert fake.embedding_requests[-1] == ["my sister lives in Lisbon\nher flat in Lisbon is near the harbour\nwhich car?",
                                           "which car?"]
    assert car in [h.id for h in hits[:2]]


def test_spread_scaled_places_cosines_within_their_own_spread() -> None:
    assert spread_scaled([]) == []
    assert spread_scaled([0.7]) == [1.0] and spread_scaled([0.8, 0.8]) == [1.0, 1.0]
    crowd = [0.80 + 0.06 * i / 28 for i in range(29)]
    scaled = spread_scaled([0.95, *crowd])
    assert scaled[0] == 1.0  # stands out of the crowd: the whole share
    assert max(scaled[1:]) < 0.7 and min(scaled[1:]) > 0.2
    # Only where a cosine sits among the others matters, not the model's range.
    low = spread_scaled([c - 0.6 for c in [0.95, *crowd]])
    assert low == pytest.approx(scaled)


async def test_a_crowd_of_near_equal_cosines_does_not_bury_a_word_match(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    """A model whose unrelated texts all score ~0.8 (m3e, bge) used to give
    each of its 30 hits at least 0.93 of the vector share: more than a real,
    weaker word match gets from the words."""
    h = hybrid(engine, parts)
    lexical = [Hit("memory", 1, "best word match", 10.0, "2026-01-01"), Hit("memory", 2, "weaker word match", 3.0, "2026-01-01")]
    crowd = [(100 + i, 0.80 + 0.06 * i / 29) for i in range(30)]
    crowd.sort(key=lambda ic: -ic[1])
    fused = h._weighted(lexical, crowd)
    order = sorted(fused, key=lambda mid: -fused[mid])
    assert order[:2] == [1, 2]
    # One memory the model clearly prefers still goes before the weaker word match.
    standout = [(200, 0.95), *crowd[:29]]
    fused = h._weighted(lexical, standout)
    order = sorted(fused, key=lambda mid: -fused[mid])
    assert order[:3] == [1, 200, 2]


async def test_a_forgotten_memorys_vector_leaves_ram_with_it(engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]) -> None:
    h = hybrid(engine, parts)
    door, tea = await remember(engine, parts, ("alice", "alice parks her automobile in bay 4"), ("alice", "alice adopted a kitten"))
    assert (await h.retrieve("alice", "where is my vehicle?"))[0].id == door
    index = parts[1]
    assert sorted(index._matrices["alice"].ids.tolist()) == [door, tea]
    await SqliteMemory(engine, h).forget("alice", [f"m{door}"])
    assert index._matrices["alice"].ids.tolist() == [tea]


async def test_core_memory_the_prompt_shows_is_left_out_of_both_rankings(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    # The entry shares no word with the question: only its vector finds it.
    entry = (await engine.add(NewMemory(owner="alice", tier=1, content="Alice's automobile is a blue Tesla",
                                        category=Category.IDENTITY))).id
    charged, _ = await remember(engine, parts, ("alice", "Alice's vehicle is charged at work"), ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts)
    assert entry in [x.id for x in await h.retrieve("alice", "which car do I drive?")]
    mem = SqliteMemory(engine, h)
    assert [x.id for x in await mem.recall("alice", "which car do I drive?")] == [charged]
    assert entry in [x.id for x in await mem.search("alice", "which car do I drive?")]  # the user's search finds it


async def test_a_down_endpoint_logs_one_line_not_one_per_message(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    from structlog.testing import capture_logs

    await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts)
    fake.queue_embedding_error(500, times=20)
    with capture_logs() as logs:
        for i in range(20):
            assert (await h.retrieve("alice", f"does Alice drink tea? ({i})"))[0].content == "Alice drinks tea"
        assert h.fallbacks == 20
        assert (await h.retrieve("alice", "which car?"))[0].content == "Alice's automobile is a blue Tesla"
    said = [(e["log_level"], e["event"]) for e in logs if e["log_level"] != "debug"]
    assert said == [("warning", "query vectors unavailable; lexical recall only until they work again"),
                    ("info", "query vectors work again")]
    first, back = (e for e in logs if e["log_level"] != "debug")
    assert "HTTP 500" in first["error"] and back["fallbacks"] == 20


async def test_late_vectors_log_once_per_episode_too(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    from structlog.testing import capture_logs

    await remember(engine, parts, ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts, timeout=0.02)
    fake.embedding_delay = 0.3
    with capture_logs() as logs:
        for i in range(3):
            await h.retrieve("alice", f"tea {i}?")
    await h.aclose()
    said = [e for e in logs if e["log_level"] != "debug"]
    assert [e["event"] for e in said] == ["query vectors unavailable; lexical recall only until they work again"]
    assert said[0]["error"] == "no vector within 0.02 s" and h.fallbacks == 3


async def test_a_hung_endpoint_has_one_query_vector_in_flight_not_one_per_message(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex], fake: FakeOpenAI
) -> None:
    """While the last message's vector is still not back, the next message
    does not ask (and wait) again: a hung endpoint would otherwise hold a
    request per message for the provider's whole timeout, and make every
    reply wait its queryTimeout."""
    import asyncio

    await remember(engine, parts, ("alice", "Alice's automobile is a blue Tesla"), ("alice", "Alice drinks tea"))
    h = hybrid(engine, parts, timeout=0.05)
    asked = len(fake.embedding_requests)
    fake.embedding_delay = 0.5
    for i in range(5):
        assert (await h.retrieve("alice", f"does Alice drink tea? ({i})"))[0].content == "Alice drinks tea"
    assert len(fake.embedding_requests) == asked + 1 and h.fallbacks == 5
    fake.embedding_delay = 0.0
    while h._pending:  # the late one lands (in the cache), then the endpoint is asked again
        await asyncio.sleep(0.01)
    assert (await h.retrieve("alice", "which car?"))[0].content == "Alice's automobile is a blue Tesla"
    assert len(fake.embedding_requests) == asked + 2 and h.fallbacks == 5


async def test_a_shared_fact_is_not_found_in_a_group_by_its_source_words_on_either_side(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    """A vector is of the fact's own words, never its source words: in a
    group a member's shared fact is found by what it says, not by the
    private message it came from (memory/retrieval.py ``_IndexedHere``)."""
    from memory.sharing import share
    from memory.types import Provenance

    moving = await engine.add(NewMemory(
        owner="alice", content="alice is moving to Berlin", source_text="I take sertraline and crashed my automobile",
        provenance=Provenance(channel="telegram", chat_id="42", group=False)))
    await share(engine, "alice", [moving.id], None)
    await remember(engine, parts)
    h = hybrid(engine, parts)
    group = ("telegram", "-100123")
    assert [x.id for x in await h.retrieve("alice", "sertraline", private=True)] == [moving.id]
    for asked in ("sertraline", "which vehicle", "outage"):
        assert await h.retrieve("alice", asked, private=False, chat=group) == [], asked
    assert [x.id for x in await h.retrieve("alice", "Berlin", private=False, chat=group)] == [moving.id]


async def test_a_groups_note_is_found_by_meaning_in_that_group_only(
    engine: MemoryEngine, parts: tuple[CachedEmbedder, VectorIndex]
) -> None:
    """The vector side reads the group's notes as the words side does
    (memory/groupnotes.py): in that group, never in another or in private."""
    from memory.groupowner import group_owner
    from memory.types import Provenance

    family, friends = ("telegram", "-100900"), ("telegram", "-100901")

    def note(chat: tuple[str, str], text: str) -> NewMemory:
        return NewMemory(owner=group_owner(*chat), content=text, provenance=Provenance(
            channel=chat[0], chat_id=chat[1], group=True, speakers=("telegram:11",), said_by=("Dad",)))

    car = await engine.add(note(family, "Dad's automobile takes the family to the lake"))
    other = await engine.add(note(friends, "Sam's automobile takes the friends skiing"))
    await remember(engine, parts)
    h = hybrid(engine, parts)
    query = "which vehicle do we use?"  # no word of the note's
    assert car.id not in [x.id for x in await Retriever(engine).retrieve("telegram:14", query, private=False,
                                                                         chat=family, notes=True)]
    hits = await h.retrieve("telegram:14", query, private=False, chat=family, notes=True)
    assert [x.id for x in hits] == [car.id] and hits[0].owner == group_owner(*family)
    assert [x.id for x in await h.retrieve("telegram:14", query, private=False, chat=friends, notes=True)] == [other.id]
    assert await h.retrieve("telegram:14", query) == []  # his private chat
    assert await h.retrieve("telegram:14", query, private=False, chat=family) == []  # a member's own learning
