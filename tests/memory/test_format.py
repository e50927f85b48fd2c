from __future__ import annotations

from memory.format import fit_budget, format_hits, truncate
from memory.tokens import estimate_tokens
from memory.types import Hit, Provenance


def hit(i: int, text: str, **kw: object) -> Hit:
    return Hit(kind="memory", id=i, content=text, score=1.0 / i, date="2026-02-20", source="manual", **kw)  # type: ignore[arg-type]


def test_each_line_cites_source_and_date() -> None:
    out = format_hits([hit(1, "likes tea", provenance=Provenance(channel="telegram", chat_id="42")), hit(2, "x")])
    assert out.splitlines() == ["- [m1 · 2026-02-20 · telegram chat 42] likes tea", "- [m2 · 2026-02-20 · manual] x"]


def test_at_most_five_hits() -> None:
    assert len(format_hits([hit(i, f"fact {i}") for i in range(1, 10)]).splitlines()) == 5


def test_each_hit_cut_at_300_characters() -> None:
    line = format_hits([hit(1, "长" * 1000)])
    body = line.split("] ", 1)[1]
    assert len(body) == 300 and body.endswith("…")


def test_block_stays_within_token_budget() -> None:
    hits = [hit(i, "中文内容" * 100) for i in range(1, 6)]  # ~300 tokens a line
    out = format_hits(hits, token_budget=700)
    assert len(out.splitlines()) == 2 and estimate_tokens(out) <= 700
    default = format_hits(hits)
    assert len(default.splitlines()) == 5 and estimate_tokens(default) <= 2048


def test_budget_keeps_rank_order_and_first_hit() -> None:
    big, small = hit(1, "word " * 80), hit(2, "tiny")
    assert fit_budget([big, small], token_budget=5) == [big]  # never skip ahead to a smaller one


def test_truncate_collapses_whitespace() -> None:
    assert truncate("a \n\t b", 10) == "a b"
    assert truncate("abcdef", 4) == "abc…"
    assert format_hits([]) == ""
