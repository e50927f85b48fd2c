from __future__ import annotations

import pytest

from memory.mood import LEXICON, MOOD_TERMS, is_mood_term, mood_term, moods
from memory.tokenize import index_terms, index_text, query_terms


@pytest.mark.parametrize(
    ("text", "classes"),
    [
        ("I'm really nervous about tomorrow's exam.", {"fear"}),
        ("She was so disappointed and lonely", {"sad"}),
        ("He got angry and annoyed", {"anger"}),
        ("We were thrilled, a happy day", {"joy"}),
        ("明天要上台演讲，我好紧张", {"fear"}),
        ("我的画没有入选比赛，好伤心", {"sad"}),
        ("他很生气", {"anger"}),
        ("今天很开心", {"joy"}),
        ("The staging server IP is 10.0.0.5", set()),
        ("部署密码存在 vault 里", set()),
    ],
)
def test_classes_of_english_and_chinese_feelings(text: str, classes: set[str]) -> None:
    assert moods(text) == classes


@pytest.mark.parametrize(
    ("text", "classes"),
    [
        ("I'm not happy about it", set()),
        ("I couldn't be happier", set()),  # why a negated joy word is not read as sad
        ("我不太开心", set()),
        ("我不开心", set()),
        ("I'm not worried", set()),
        ("我不担心", set()),
    ],
)
def test_a_negated_feeling(text: str, classes: set[str]) -> None:
    assert moods(text) == classes


@pytest.mark.parametrize(
    "text",
    ["Please deploy it", "the pride parade", "grate the cheese", "这样不安全吗", "满足需求就行", "I'm so grateful, thank you"],
)
def test_words_whose_stem_is_another_word_are_left_out(text: str) -> None:
    # pleased -> "pleas" (please), grateful -> "grate", 不安 in 不安全 ...
    assert moods(text) == set()


def test_index_text_appends_the_negative_classes_only() -> None:
    assert index_text("I was so scared").split(" ")[-1] == mood_term("fear")
    assert index_text("我好难过，也很生气").split(" ")[-2:] == [mood_term("anger"), mood_term("sad")]
    assert not any(is_mood_term(t) for t in index_text("a happy day, 很开心").split(" "))
    assert index_text("a happy day") == " ".join(index_terms("a happy day"))


def test_no_text_makes_a_mood_term() -> None:
    # The mark is a private-use character, never a word character: user text
    # holding it cannot fake a class, in the index or in a query.
    for text in [mood_term("fear"), f"x {mood_term('sad')} y", "\ue000fear \ue000sad"]:
        assert not any(is_mood_term(t) for t in index_terms(text))
        assert not any(is_mood_term(t) for t, _ in query_terms(text))
    assert all(is_mood_term(t) for t in MOOD_TERMS)
    assert not any(is_mood_term(t) for t in LEXICON)
