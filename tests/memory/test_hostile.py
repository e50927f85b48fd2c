"""Hostile text is data: nothing a user types may raise from the read path."""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import MemoryEngine, NewMemory
from memory.prefilter import should_retrieve
from memory.retrieval import MAX_CONTEXT_CHARS, MAX_QUERY_CHARS, MAX_TERMS, Retriever, build_query

FTS_SYNTAX = ['"', "NEAR(", "*", "^", "col:", "owner:", "text:", "AND", "OR", "NOT", "(", ")", "-", "+", "{", "}", ":"]
EXPLICIT = [
    '"',
    '""',
    'NEAR("a" "b", 2)',
    "pass*",
    "^start",
    "owner: o123 OR text: x",
    "a AND OR NOT b",
    "NOT",
    "密码 OR 1=1; DROP TABLE memories; --",
    "🤖🔥 emoji only 👍🏽",
    "\ud800 lone surrogate \udfff",
    "nul\x00inside",
    "\x00",
    "   ",
    "",
    "' OR ''='",
    "{owner text}: x",
    "col:密码",
    "x" * 200,
    "部署" * 5000,
]

# Text drawn from FTS5 syntax, CJK, emoji, controls and lone surrogates.
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(FTS_SYNTAX),
        st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12),
        st.sampled_from(["密码", "部署", "咖啡", "pnpm", "prefers", "🤖", "\ud800", "\x00", " "]),
    ),
    max_size=12,
).map("".join)


@pytest.fixture
async def seeded(engine: MemoryEngine) -> MemoryEngine:
    for owner, text in [
        ("u", "我的部署密码是 hunter2"),
        ("u", "Alice prefers pnpm"),
        ("_global", 'quotes " and NEAR( and * and ^ stored as data'),
        ("v", "other user's coffee order"),
    ]:
        await engine.add(NewMemory(owner=owner, content=text))
    await engine.add_event("u", "2026-02-01", "talked about AND OR NOT operators")
    return engine


@pytest.mark.parametrize("text", EXPLICIT)
async def test_explicit_hostile_queries_never_raise(seeded: MemoryEngine, text: str) -> None:
    r = Retriever(seeded)
    hits = await r.retrieve("u", text, context=[text, text])
    assert all(h.id for h in hits)
    await r.search_events("u", text)
    assert isinstance(should_retrieve(text, [text, "myclaw"]), bool)


async def test_hostile_text_stored_and_found_as_data(seeded: MemoryEngine) -> None:
    hits = await Retriever(seeded).retrieve("u", 'NEAR( quotes "')
    assert hits and hits[0].content.startswith("quotes")


async def test_hostile_owner_names_are_data(engine: MemoryEngine) -> None:
    weird = 'telegram:"x" OR owner:*'
    m = await engine.add(NewMemory(owner=weird, content="secret plan"))
    await engine.add(NewMemory(owner="telegram:x", content="secret plan b"))
    assert [h.id for h in await Retriever(engine).retrieve(weird, "secret plan")] == [m.id]


async def test_a_one_megabyte_query_is_cut_to_the_caps(seeded: MemoryEngine) -> None:
    # Speed is measured by scripts/bench_latency.py, not timed here: what this
    # pins is that a pasted megabyte is read no further than the caps.
    big = ("密码 pnpm NEAR( * " + "x" * 50 + " ") * (1_000_000 // 70)
    terms = build_query(big, [big, big])
    assert terms == build_query(big[:MAX_QUERY_CHARS], [big[:MAX_CONTEXT_CHARS]] * 2)
    assert 0 < len(terms) <= MAX_TERMS
    r = Retriever(seeded)
    hits = await r.retrieve("u", big, context=[big, big])
    assert [h.id for h in hits] == [h.id for h in await r.retrieve("u", big[:MAX_QUERY_CHARS], context=[big[:MAX_CONTEXT_CHARS]] * 2)]
    assert should_retrieve(big) is True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text, ctx=st.lists(hostile_text, max_size=3))
async def test_any_text_never_raises(seeded: MemoryEngine, text: str, ctx: list[str]) -> None:
    r = Retriever(seeded)
    hits = await r.retrieve("u", text, context=ctx, private=False)
    # Whatever comes back is the user's or shared, never user v's.
    assert all(h.content != "other user's coffee order" for h in hits)
    await r.search_events("u", text)
    assert isinstance(should_retrieve(text, ["myclaw", text]), bool)
