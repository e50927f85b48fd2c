from __future__ import annotations

import pytest

from memory.tokenize import index_terms, index_text, normalize, query_terms, quote, stem


def test_cjk_run_gives_characters_and_bigrams() -> None:
    assert index_terms("部署密码") == ["部", "部署", "署", "署密", "密", "密码", "码"]


def test_two_character_word_inside_sentence_is_an_index_term() -> None:
    terms = set(index_terms("我的部署密码是hunter2，每天早上喝咖啡"))
    assert {"部署", "密码", "咖啡", "hunter2"} <= terms


def test_mixed_chinese_english_splits_at_script_boundary() -> None:
    assert index_terms("用pnpm管理") == ["用", "pnpm", "管", "管理", "理"]


def test_english_is_stemmed_the_same_way_in_index_and_query() -> None:
    assert stem("prefers") == stem("preferred") == stem("preference") == "prefer"
    idx = set(index_terms("Alice prefers pnpm"))
    q = {t for t, _ in query_terms("what package manager do I prefer?")}
    assert "prefer" in idx & q


def test_possessive_is_dropped() -> None:
    assert index_terms("Alice's laptop") == ["alic", "laptop"]


def test_normalize_full_width_and_case() -> None:
    assert index_terms("ＭｙＣｌａｗ　ＶＥＲＳＩＯＮ ２") == ["myclaw", "version", "2"]


def test_query_drops_stop_words_in_both_languages() -> None:
    assert [t for t, _ in query_terms("what did I say about the deployment?")] == ["deploy"]
    terms = dict(query_terms("我之前说过的部署密码是什么"))
    assert "之前" not in terms and "什么" not in terms and "说过" not in terms
    assert terms["部署"] == 1.0 and terms["密码"] == 1.0


def test_single_character_query_is_full_weight_and_inner_characters_weak() -> None:
    assert query_terms("猫") == [("猫", 1.0)]
    terms = dict(query_terms("烤鸭"))
    assert terms["烤鸭"] == 1.0 and terms["烤"] < 0.5 and terms["鸭"] < 0.5


def test_bigram_across_a_grammar_character_is_weak() -> None:
    terms = dict(query_terms("喜欢的咖啡"))
    assert terms["咖啡"] == 1.0 and terms["欢的"] < 1.0


def test_hostile_text_is_only_ever_data() -> None:
    assert normalize("a\x00b\ud800c") == "a bc"
    assert index_text('NEAR("x" y) * ^col: AND OR NOT 🤖') == "near x y col and or not"
    assert query_terms("\ud800\x00") == []


def test_quote_doubles_quotes() -> None:
    assert quote('say "hi"') == '"say ""hi"""'


def test_irregular_forms_meet_their_base_form() -> None:
    assert index_terms("I bought shoes and met the children") == ["i", "buy", "shoe", "and", "meet", "the", "child"]
    q = {t for t, _ in query_terms("where did I buy the shoes? when did I meet the kids' children?")}
    assert {"buy", "meet", "child"} <= q
    # Forms that are also other words stay as they are.
    assert index_terms("found felt") == ["found", "felt"]


def test_light_verbs_are_query_stop_words() -> None:
    assert query_terms("when did we go there? she went home") == [("home", 1.0)]


def test_a_stop_word_with_s_is_still_a_stop_word() -> None:
    # "it's", "she's", "that's" are a stop word and "is" / "has": the
    # possessive strip made them "it", "she", "that" after the stop list.
    assert query_terms("It's really frustrating, she's still angry and that’s it") == [
        ("frustrat", 1.0), ("still", 1.0), ("angri", 1.0)
    ]
    # A name's possessive is the name, as before.
    assert query_terms("Caroline's dog") == [("carolin", 1.0), ("dog", 1.0)]


def test_time_frame_words_are_no_topic_of_a_query() -> None:
    # "now", "right now", "currently", 现在, 目前 say when, not what: a
    # memory that happens to say "now" is not about cooking.
    assert [t for t, _ in query_terms("what should I cook right now?")] == ["cook"]
    assert [t for t, _ in query_terms("What do I currently cook at the moment, today?")] == ["cook"]
    zh = {t for t, _ in query_terms("我现在该做什么菜？")}
    assert {"做", "菜"} <= zh and not zh & {"现在", "现", "在"}, zh
    assert not {t for t, _ in query_terms("目前和当前用的编辑器")} & {"目前", "当前", "目", "当"}
    # A word that is no frame stays ("right" of "the right answer", "moment").
    assert "right" in {t for t, _ in query_terms("the right answer")}
    # A message of frame words only keeps them: "what now?" still asks something.
    assert [t for t, _ in query_terms("what now?")] == ["now"]
    assert {t for t, _ in query_terms("现在呢？")} >= {"现在"}


# (phrase, every query term in text order with its weight). The numbers are
# written out, not imported: a change of the weights or of the rules
# (docs/RETRIEVAL.md §2-3) must show here. A bigram weighs 1.0, one with a
# grammar character (的了是我上…) on one side 0.3 (0.4 until session 36),
# on both sides nothing, unless it is a known content word (上海: 1.0); a
# character of a longer run 0.3, a run of one character 1.0; grammar
# characters and function bigrams (多少, 我的) are dropped.
_ZH_QUERY_WEIGHTS: list[tuple[str, list[tuple[str, float]]]] = [
    ("猫", [("猫", 1.0)]),
    ("部署", [("部署", 1.0), ("部", 0.3), ("署", 0.3)]),
    (
        "喜欢的咖啡",
        [("喜欢", 1.0), ("欢的", 0.3), ("的咖", 0.3), ("咖啡", 1.0), ("喜", 0.3), ("欢", 0.3), ("咖", 0.3), ("啡", 0.3)],
    ),
    (
        "我的部署密码是多少",
        [
            ("的部", 0.3), ("部署", 1.0), ("署密", 1.0), ("密码", 1.0), ("码是", 0.3), ("是多", 0.3),
            ("部", 0.3), ("署", 0.3), ("密", 0.3), ("码", 0.3), ("多", 0.3), ("少", 0.3),
        ],
    ),
    (
        "周末去爬山了吗",
        [
            ("周末", 1.0), ("末去", 0.3), ("去爬", 0.3), ("爬山", 1.0), ("山了", 0.3),
            ("周", 0.3), ("末", 0.3), ("爬", 0.3), ("山", 0.3),
        ],
    ),
    # 是, 我, 的 all grammar: 是我 and 我的 go, 伟是 and 的经 stay weak.
    (
        "张伟是我的经理",
        [("张伟", 1.0), ("伟是", 0.3), ("的经", 0.3), ("经理", 1.0), ("张", 0.3), ("伟", 0.3), ("经", 0.3), ("理", 0.3)],
    ),
    # 上 is grammar in 上面, not in 上海: a known content word weighs as a
    # word, 那边 (那 a grammar character) as glue.
    (
        "上海那边怎么样",
        [("上海", 1.0), ("海那", 0.3), ("那边", 0.3), ("边怎", 1.0), ("海", 0.3), ("边", 0.3), ("怎", 0.3), ("样", 0.3)],
    ),
    # Two runs split by Latin: each run weighs its own characters.
    ("用pnpm管理", [("用", 1.0), ("pnpm", 1.0), ("管理", 1.0), ("管", 0.3), ("理", 0.3)]),
]  # fmt: skip


@pytest.mark.parametrize(("phrase", "expected"), _ZH_QUERY_WEIGHTS, ids=[p for p, _ in _ZH_QUERY_WEIGHTS])
def test_chinese_query_terms_and_their_weights(phrase: str, expected: list[tuple[str, float]]) -> None:
    assert query_terms(phrase) == expected
