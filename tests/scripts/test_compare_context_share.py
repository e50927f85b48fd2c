"""scripts/compare_context_share.py scales the context terms' share by how
much the message says, and counts queries up and down against the base,
LoCoMo by conversation group."""

from __future__ import annotations

import pytest

from memory import MemoryEngine, NewMemory, retrieval
from memory.retrieval import CONTEXT_WEIGHT, QueryTerm, Retriever
from tests.scripts._load import load_script

MEMORIES = [
    "the redis cache listens on port 6380",
    "postgres listens on port 5433",
    "we baked a lemon cake for grandma",
    "the garden hose is green",
]


async def shares(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch, signal: str, message: str,
                 context: list[str]) -> set[float]:
    """The context terms' shares (weight / their weight at 0.4) once the
    patched candidate step has run."""
    script = load_script("compare_context_share")
    for text in MEMORIES:
        await engine.add(NewMemory(owner="u", content=text))
    monkeypatch.setattr(retrieval.Retriever, "_candidates",
                        script.patched(retrieval.Retriever._candidates, signal, 0.8, 0.25))
    q = retrieval.build_query(message, context)
    before = {x.term: x.weight for x in q}
    r = Retriever(engine)
    await r._candidates(retrieval._MEMORIES, q, ["u", "_global"], select=retrieval._MEMORY_COLUMNS,
                        join="memories x", where="")
    return {round(x.weight / before[x.term] * CONTEXT_WEIGHT, 6) for x in q if not x.from_query}


async def test_a_message_that_matches_nothing_raises_the_context(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "any ideas?" holds no word of any memory: the best message-only
    # relevance is 0, so the context weighs hi (0.8), not 0.4.
    got = await shares(engine, monkeypatch, "rel", "any ideas?", ["the redis cache was slow yesterday"])
    assert got == {0.8}


async def test_a_message_that_matches_well_keeps_the_fixed_share(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = await shares(engine, monkeypatch, "rel", "which port does postgres use?", ["the redis cache was slow"])
    assert got == {CONTEXT_WEIGHT}


async def test_the_message_mass_counts_only_words_some_memory_holds(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "zebras" and "xylophones" are in no memory: no mass, the context at hi.
    got = await shares(engine, monkeypatch, "mass", "zebras and xylophones?", ["the redis cache was slow"])
    assert got == {0.8}
    got = await shares(engine, monkeypatch, "mass", "lemon cake for grandma?", ["the redis cache was slow"])
    assert got == {CONTEXT_WEIGHT}


def test_a_mood_term_is_no_context_term() -> None:
    script = load_script("compare_context_share")
    assert not script._context(QueryTerm(retrieval.mood_term("fear"), 1.0, False))
    assert script._context(QueryTerm("redis", 0.4, False))


def test_summary_splits_locomo_by_group() -> None:
    script = load_script("compare_context_share")

    def row(qid: str, r5: float) -> dict[str, object]:
        return {"qid": qid, "R@5": r5, "R@1": 0.0, "R@10": r5, "MRR": 0.0}

    base = [row("conv-26#0", 1.0), row("conv-44#3", 0.0)]
    new = [row("conv-26#0", 0.0), row("conv-44#3", 1.0)]
    line = script.summary("locomo_turns", base, new)
    assert "R@5 0.5000 -> 0.5000 (1 up, 1 down)" in line
    assert "A 1.0000 -> 0.0000" in line and "B 0.0000 -> 1.0000" in line


def test_decay_counts_a_memorys_further_context_matches_less(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two context words of equal weight in one memory: with gamma 0.5 the
    # second counts half. One context word, or none, scores as before.
    script = load_script("compare_context_share")
    q = retrieval.build_query("which port?", ["the redis cache was slow"])
    assert {x.term for x in q if not x.from_query} == {"redi", "cach", "slow"}
    idf = {x.term: 3.0 for x in q}
    both, one, none = "the redi cach listen on port 6380", "the redi zzz listen on port 6380", "the yyy zzz listen on port 6380"
    base = retrieval._Relevance(q, idf, 6.0)
    monkeypatch.setattr(retrieval._Relevance, "__init__", retrieval._Relevance.__init__)  # put back after the test
    monkeypatch.setattr(retrieval._Relevance, "__call__", retrieval._Relevance.__call__)
    retrieval._Relevance.__init__, retrieval._Relevance.__call__ = script.decayed(0.5)  # type: ignore[method-assign]
    new = retrieval._Relevance(q, idf, 6.0)
    assert new(one) == base(one) and new(none) == base(none)
    assert base(both) - new(both) == pytest.approx((base(both) - base(none)) / 4)
