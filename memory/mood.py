"""Mood classes of a text, from a small general emotion lexicon.

A message's feeling is a retrieval cue: someone upset about a bad exam is
reminded of other times they were anxious or let down, not of happy outings,
though the words barely overlap (mood-congruent recall). This module maps the
emotion words of English and Chinese to four classes:

* ``joy``: happy, glad, excited, proud, 开心, 高兴, 兴奋, 自豪 ...
* ``sad``: sad, upset, disappointed, lonely, frustrated, 难过, 伤心, 失望 ...
* ``fear``: anxious, worried, nervous, afraid, stressed, 焦虑, 紧张, 担心 ...
* ``anger``: angry, annoyed, furious, 生气, 愤怒, 恼火 ...

The lists are the common emotion words of each language, written for this
module from general knowledge of the languages (no data set's vocabulary).
Detection runs on index terms (:func:`memory.tokenize.index_terms`), so a
memory's class comes from the terms already stored with it: English words by
their stem, Chinese words as the bigram of a two-character word. A word
right after a negation ("not happy", 不开心, "not worried") counts as
nothing: reading a negated joy word as sad misread "couldn't be happier"
and "not as excited as I am" (MADial en 0.573 with it, 0.577 without).

Left out because the stem or the bigram is also a common other word:
pleased (stem "pleas", as please), grateful ("grate"), thankful ("thank"),
tears and tearful ("tear"), tense ("tens"), miserable ("miser"), cheerful
("cheer"), pride (a parade), hurt (an injury); 满足 (to meet a need), 不安
(in 不安全, unsafe).

Each negative class a memory's text names is indexed as one more term
(:func:`mood_term`, appended by :func:`memory.tokenize.index_text`), and
the retriever adds the message's negative classes to the query
(docs/RETRIEVAL.md §9).
"""

from __future__ import annotations

from collections.abc import Sequence

from .tokenize import index_terms, stem

__all__ = [
    "CLASSES",
    "LEXICON",
    "MOOD_TERMS",
    "NEGATIVE",
    "indexed_moods",
    "is_mood_term",
    "mood_class",
    "mood_term",
    "moods",
    "moods_of_terms",
]

CLASSES = ("joy", "sad", "fear", "anger")
NEGATIVE = frozenset({"sad", "fear", "anger"})

_EN = {
    "joy": """happy happier happiest happiness glad joy joyful joyous delighted delight excited excitement
        thrilled proud elated ecstatic overjoyed blissful""",
    "sad": """sad sadder saddest sadness unhappy upset disappointed disappointing disappointment depressed
        depressing depression lonely loneliness heartbroken misery sorrow grief grieving
        cry cried crying regret frustrated frustrating frustration discouraged hopeless
        gloomy homesick devastated""",
    "fear": """anxious anxiety worried worry worrying nervous afraid scared scary fear fearful frightened
        terrified panic panicked stressed stress stressful uneasy overwhelmed dread insecure""",
    "anger": """angry angrier anger annoyed annoying irritated irritating furious rage outraged resentful
        resentment hate hated mad""",
}
_ZH = {
    "joy": "开心 高兴 快乐 兴奋 愉快 欢乐 喜悦 幸福 激动 骄傲 自豪 欣喜 欣慰 愉悦 得意 期待",
    "sad": "难过 伤心 失望 悲伤 沮丧 郁闷 孤独 寂寞 痛苦 委屈 哭泣 流泪 遗憾 挫败 失落 低落 伤感 悲痛 绝望 难受 灰心 后悔 懊悔 泄气",
    "fear": "焦虑 紧张 担心 担忧 害怕 恐惧 忐忑 压力 惊慌 慌张 发愁 着急 心慌 恐慌 畏惧",
    "anger": "生气 愤怒 恼火 气愤 烦躁 讨厌 恼怒 发火 不满 厌烦",
}


def _lexicon() -> dict[str, str]:
    out: dict[str, str] = {}
    for cls, words in _EN.items():
        for w in words.split():
            out[stem(w)] = cls
    for cls, words in _ZH.items():
        for w in words.split():
            out[w] = cls
    return out


LEXICON: dict[str, str] = _lexicon()
"""Index term (English stem, Chinese bigram) -> class."""
_TERMS = frozenset(LEXICON)
_NEG_EN = frozenset(
    "not no never nor hardly isn't wasn't aren't weren't don't didn't doesn't won't can't couldn't".split()
)
_NEG_ZH = frozenset("不没")


def _negated(terms: Sequence[str], i: int) -> bool:
    t = terms[i]
    if t.isascii():  # one of the two words before
        return any(terms[j] in _NEG_EN for j in range(max(0, i - 2), i))
    # A CJK bigram at i is preceded by its first character (i - 1), then the
    # run's characters before it at i - 3, i - 5, i - 7 (index_terms order).
    return any(j >= 0 and terms[j] in _NEG_ZH for j in (i - 3, i - 5, i - 7))


def moods_of_terms(terms: Sequence[str]) -> frozenset[str]:
    """Classes of a text given as its index terms."""
    if _TERMS.isdisjoint(terms):
        return frozenset()
    out: set[str] = set()
    for i, t in enumerate(terms):
        cls = LEXICON.get(t)
        if cls is None:
            continue
        if _negated(terms, i):
            continue
        out.add(cls)
    return frozenset(out)


def moods(text: str) -> frozenset[str]:
    """Classes of ``text`` (:data:`CLASSES`), empty when it names no feeling."""
    return moods_of_terms(index_terms(text))


_MARK = "\ue000"


def mood_term(cls: str) -> str:
    """The index term standing for a class: a private-use character first,
    which :func:`memory.tokenize.index_terms` never emits (it is not a word
    character) and FTS5's ``unicode61`` keeps inside a token."""
    return _MARK + cls


def is_mood_term(term: str) -> bool:
    return term[:1] == _MARK


def mood_class(term: str) -> str:
    """The class a :func:`mood_term` stands for."""
    return term[len(_MARK) :]


MOOD_TERMS = tuple(mood_term(c) for c in sorted(NEGATIVE))
"""The terms indexed: the negative classes only. ``joy`` is the common
class (two memories in three of a companion's archive), and as a query term
it moved nothing on the benchmark once the message's own word is not
counted twice (docs/RETRIEVAL.md §9)."""


def indexed_moods(terms: Sequence[str]) -> list[str]:
    """The mood terms :func:`memory.tokenize.index_text` appends to ``terms``."""
    return [mood_term(c) for c in sorted(moods_of_terms(terms) & NEGATIVE)]
