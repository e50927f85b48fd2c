"""scripts/compare_zh_word_weights.py re-weighs Chinese query bigrams by
whether they are words, and counts queries up and down against the base."""

from __future__ import annotations

import pytest

from memory import tokenize
from tests.scripts._load import load_script


def test_dictionary_words_and_cross_word_bigrams_get_their_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("compare_zh_word_weights")
    monkeypatch.setattr(tokenize, "_query_terms", tokenize._query_terms)  # put back after the test
    before = dict(tokenize.query_terms("我中午吃了什么"))
    assert before["中午"] == 0.4 and before["午吃"] == 1.0  # 中 is a grammar character: glue

    script.patch_query_weights(script.weigh_by_dict({"中午": 1449}, glue_word=1.0, non_word=0.5))
    after = dict(tokenize.query_terms("我中午吃了什么"))
    assert after["中午"] == 1.0  # a word, though beside a grammar character
    assert after["午吃"] == 0.5  # no word: straddles 中午 / 吃了
    assert {t: w for t, w in after.items() if len(t) == 1} == {t: w for t, w in before.items() if len(t) == 1}
    assert dict(tokenize.query_terms("postgres port")) == {"postgr": 1.0, "port": 1.0}  # English untouched


def test_summary_counts_queries_up_and_down() -> None:
    script = load_script("compare_zh_word_weights")
    def row(r5: float, r1: float, rr: float) -> dict[str, float]:
        return {"R@5": r5, "R@1": r1, "MRR": rr}

    base = [row(0.5, 0.0, 0.5), row(1.0, 1.0, 1.0), row(0.0, 0.0, 0.0)]
    new = [row(1.0, 1.0, 1.0), row(0.5, 0.0, 0.5), row(0.0, 0.0, 0.0)]
    line = script.summary("madial_zh", base, new)
    assert "R@5 0.5000 -> 0.5000 (1 up, 1 down)" in line and "R@1 0.3333 -> 0.3333" in line
