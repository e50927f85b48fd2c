"""scripts/compare_zh_word_weights.py re-weighs Chinese query bigrams by
whether they are words, and counts queries up and down against the base."""

from __future__ import annotations

import pytest

from memory import retrieval, tokenize
from tests.scripts._load import load_script


def test_dictionary_words_and_cross_word_bigrams_get_their_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("compare_zh_word_weights")
    monkeypatch.setattr(tokenize, "_query_terms", tokenize._query_terms)  # put back after the test
    before = dict(tokenize.query_terms("我中午吃了什么"))
    assert before["中午"] == 0.3 and before["午吃"] == 1.0  # 中 is a grammar character: glue

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


def test_a_rare_character_counts_more_only_in_a_memory_without_its_bigram(monkeypatch: pytest.MonkeyPatch) -> None:
    # 狗 of 小狗: in a memory saying 狗狗 (the word in another form) it
    # counts as char_word; in one saying 小狗 the bigram already counts.
    script = load_script("compare_zh_word_weights")
    init, call = retrieval._Relevance.__init__, retrieval._Relevance.__call__
    monkeypatch.setattr(retrieval._Relevance, "__init__", init)  # put back after the test
    monkeypatch.setattr(retrieval._Relevance, "__call__", call)
    q = retrieval.build_query("我想养小狗")
    idf = {x.term: 5.0 for x in q} | {"狗": 4.0, "小": 1.0}  # 狗 in ~1 row, 小 in many (5.0: in none)
    dog = " ".join(tokenize.index_terms("Lisa看到狗狗很开心"))
    puppy = " ".join(tokenize.index_terms("Lisa有一只小狗"))
    base = retrieval._Relevance(q, idf, 10.0)
    script.patch_char_in_another_word(max_df=2, char_word=0.6)
    new = retrieval._Relevance(q, idf, 10.0)
    assert new(dog) > base(dog)
    assert new(puppy) == base(puppy)
    monkeypatch.setattr(retrieval._Relevance, "__init__", init)
    monkeypatch.setattr(retrieval._Relevance, "__call__", call)
    script.patch_char_in_another_word(max_df=0, char_word=0.6)  # 狗 is in a row: no longer rare enough
    assert retrieval._Relevance(q, idf, 10.0)(dog) == base(dog)


def test_the_glue_weight_and_the_context_turns_glue(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("compare_zh_word_weights")
    monkeypatch.setattr(tokenize, "GLUE_BIGRAM_WEIGHT", tokenize.GLUE_BIGRAM_WEIGHT)  # put back after the test
    monkeypatch.setattr(retrieval, "_turn_terms", retrieval._turn_terms)
    retrieval._turn_terms.cache_clear()
    script.patch_glue(0.2, 0.0)
    retrieval._turn_terms.cache_clear()
    q = {x.term: x for x in retrieval.build_query("喜欢的咖啡", ["周末去爬山了吗"])}
    assert q["欢的"].weight == 0.2 and q["咖啡"].weight == 1.0  # the message's glue at 0.2
    assert "末去" not in q and "山了" not in q  # the context's glue left out
    assert q["爬山"].weight == pytest.approx(retrieval.CONTEXT_WEIGHT)
    retrieval._turn_terms.cache_clear()


def test_the_content_words_weigh_as_words_and_the_rest_of_the_glue_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("compare_zh_word_weights")
    monkeypatch.setattr(tokenize, "_query_terms", tokenize._query_terms)  # put back after the test
    monkeypatch.setattr(tokenize, "GLUE_BIGRAM_WEIGHT", tokenize.GLUE_BIGRAM_WEIGHT)
    # The weighting before session 36, from the tokenizer's own list.
    script.patch_query_weights(script.weigh_by_dict(dict.fromkeys(script.CONTENT_GLUE_WORDS, 1), 0.4, 1.0))
    tokenize.GLUE_BIGRAM_WEIGHT = 0.4
    got = dict(tokenize.query_terms("上海那边怎么样"))
    assert got["上海"] == 0.4 and got["那边"] == 0.4 and got["边怎"] == 1.0
