"""Text -> search terms, the same way for the index and for queries.

FTS5's ``unicode61`` tokenizer makes a whole run of Han characters one token
(``我的部署密码是`` is a single "word"), so a query for ``部署`` finds nothing;
``trigram`` cannot match two-character words at all. We therefore tokenise in
Python and store space-separated terms, which ``unicode61`` then splits on
spaces only:

* Latin/digit words: NFKC, lower-cased, English Snowball stem (so "prefers"
  finds "preferred" and "preference").
* CJK runs (Han, kana, hangul): every character *and* every overlapping
  bigram. A 2-character word inside a sentence (密码, 部署) is an exact
  term, a longer word is a run of consecutive bigrams, a 1-character query
  (猫) still matches, and no dictionary can miss a new project name. Measured
  against jieba in docs/RETRIEVAL.md (scripts/compare_zh_tokenizers.py).

Queries go through :func:`query_terms`, which drops stop words and weights
terms; the retriever quotes every term, so no user text reaches the FTS5
query parser as syntax.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer

__all__ = [
    "GLUE_BIGRAM_WEIGHT",
    "TOKENIZER_VERSION",
    "UNIGRAM_WEIGHT",
    "ZH_CONTENT_BIGRAMS",
    "index_terms",
    "index_text",
    "normalize",
    "query_terms",
    "quote",
    "stem",
]

TOKENIZER_VERSION = "unibigram-snowball-irregular-mood-3"

# Han (CJK unified + ext A + compatibility), kana and hangul are "CJK runs";
# everything alphanumeric otherwise is a "word".
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)?)", re.UNICODE)

# Function words that carry no topic; dropped from queries only (the index
# keeps everything, so a stop list change never needs a re-index).
STOP_EN = frozenset(
    """a an the and or but if then so of to in on at by for with from as is am are was were be been being
    do does did done doing have has had having i me my mine myself you your yours we our ours us he him his
    she her hers they them their theirs it its this that these those what which who whom whose when where why
    how there here not no yes can could would should will shall may might must just also too very really about
    into over than again ever any some all tell told know knew remember recall said say says please let lets
    go goes going went gone come comes coming came hey hi ok okay thing things something anything get got like s t don't doesn't didn't i'm i've i'd you're""".split()
)
# Multi-character Chinese function words, as query bigrams; the
# conjunctions and adverbs among them (因为, 所以, 但是, 如果, 已经, 非常,
# 真的…) as SMART's English list drops because, so, but, if, already, very,
# really.
STOP_ZH_WORDS = frozenset(
    """我的 你的 他的 她的 我们 你们 他们 她们 之前 以前 记得 还记 说过 什么 怎么 为什 么么 一下 一个 这个 那个
    是不 不是 有没 没有 可以 告诉 知道 是什 的是 了吗 是吗 吗我 请问 那么 这么 还是 就是 时候 的时 候的 的话
    么时 么样 怎样 哪个 哪些 多少 上次 以后 然后 我想 我要 你好 谢谢 记住 记不 不记 得我 得你 我上 你还
    帮我 一些 这些 那些 因为 所以 但是 可是 如果 已经 特别 非常 真的 应该 而且 好像""".split()
)
# Single characters that are grammar, not topic.
STOP_ZH_CHARS = frozenset("的了是吗呢吧啊么我你他她它在有和就也都这那个一不要会说过来去很还想把被给让上下中里到得地着们吧呀哦嗯")
# Common content words with one grammar character, which weigh as words,
# not as glue: 上 of 上面 is grammar, of 上海 and 上班 it is not. Written
# from general knowledge of the language (places, things, events,
# feelings), not from any data set; function compounds (一起, 起来, 觉得,
# 有点), relative time words (上周, 去年: §7 reads them) and words that
# often straddle two others (有名 of 没有名字, 心得 of 开心得, 个人 of
# 一个人) are left out. No grammar character is a content word's part
# more often than glue's: 地 in 0.34 of its bigrams in MADial's Chinese
# texts, 上 0.20 (docs/RETRIEVAL.md §9, session 36).
ZH_CONTENT_BIGRAMS = frozenset(
    """上海 上班 上学 上课 上网 上山 上衣 上司 上市 楼上 网上 下班 下课 下雨 下雪 下载 下棋 楼下 乡下 中国
    中文 中学 中心 中秋 中药 中医 中餐 高中 初中 会议 开会 聚会 晚会 机会 社会 约会 宴会 舞会 会员 会计
    大会 地方 地铁 地图 地址 地球 地震 地板 草地 土地 场地 工地 地点 难过 过敏 过期 过年 过节 过程 有趣
    想法 想念 理想 梦想 思想 幻想 想象 小说 传说 摘要 纪要 未来 将来 迟到 了解 着急 个性 个子 和平 暖和
    不安 公里 家里 说明 被子 要求 主要 重要""".split()
)

# Time-frame words say when, not what: "what should I cook right now?" is
# about cooking, not about every fact that says "now". Cut from a query
# (not the index) before it is split, so no bigram straddles them (现在 of
# 实现在线, 目前 of 节目前 are other words); the period a frame names (today,
# 今天) is still read by memory/timeref.py from the message itself. A
# message of frame words only ("what now?") keeps them.
_FRAME = re.compile(
    r"\b(?:right now|for now|at the moment|at present|now|currently|nowadays|presently|today|tonight)\b"
    r"|(?<![实表体出发呈显展兑再重浮])现在|(?<![节题项科盲])目前|当前|此刻|眼下|如今|今天|今晚|今儿|这会儿"
)

UNIGRAM_WEIGHT = 0.3  # a character inside a longer run: weak evidence on its own
# A bigram straddling a grammar character (喜欢的 -> 欢的): no more evidence
# than one character of it (0.4 until session 36: MADial zh one query up
# anywhere from 0.1 to 0.3, docs/RETRIEVAL.md §9).
GLUE_BIGRAM_WEIGHT = 0.3
# Public, with ZH_CONTENT_BIGRAMS: memory/filestore.py weighs its query terms with them too.

_stemmer = snowballstemmer.stemmer("english")

# Irregular English forms -> base form, so "where did I buy it?" finds "I
# bought it": Snowball leaves these unrelated (went/go, bought/buy). A
# closed, general list of the language, not of any data set; forms that are
# also common other words (left, lay, found, felt, saw, wound, ...) are left out.
_IRREGULAR_BASES = {
    "be": "was were been", "become": "became", "begin": "began begun", "bite": "bit bitten",
    "blow": "blew blown", "break": "broke broken", "bring": "brought", "build": "built", "buy": "bought",
    "catch": "caught", "choose": "chose chosen", "come": "came", "do": "did done", "draw": "drew drawn",
    "dream": "dreamt", "drink": "drank drunk", "drive": "drove driven", "eat": "ate eaten", "fall": "fell fallen",
    "feed": "fed", "feel": "felt", "fight": "fought", "find": "found", "fly": "flew flown",
    "forget": "forgot forgotten", "forgive": "forgave forgiven", "freeze": "froze frozen", "get": "got gotten",
    "give": "gave given", "go": "went gone", "grow": "grew grown", "hang": "hung", "have": "had",
    "hear": "heard", "hide": "hid hidden", "hold": "held", "keep": "kept", "know": "knew known",
    "lead": "led", "lose": "lost", "make": "made", "mean": "meant", "meet": "met", "pay": "paid",
    "ride": "rode ridden", "ring": "rang rung", "rise": "rose risen", "run": "ran", "say": "said",
    "see": "seen", "seek": "sought", "sell": "sold", "send": "sent", "shake": "shook shaken",
    "shoot": "shot", "sing": "sang sung", "sink": "sank sunk", "sit": "sat", "sleep": "slept",
    "speak": "spoke spoken", "spend": "spent", "stand": "stood", "steal": "stole stolen", "stick": "stuck",
    "swim": "swam swum", "take": "took taken", "teach": "taught", "tear": "tore torn", "tell": "told",
    "think": "thought", "throw": "threw thrown", "understand": "understood", "wake": "woke woken",
    "wear": "wore worn", "win": "won", "write": "wrote written",
    "child": "children", "man": "men", "woman": "women", "person": "people", "foot": "feet",
    "tooth": "teeth", "mouse": "mice",
}  # fmt: skip
_IRREGULAR = {form: base for base, forms in _IRREGULAR_BASES.items() for form in forms.split()}
_IRREGULAR.pop("found", None)  # also "to found (a company)"
_IRREGULAR.pop("felt", None)  # also the fabric


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """English Snowball stem of a lower-case word; other words pass through."""
    if not word.isascii() or not word.isalpha() or len(word) < 3:
        return word
    return str(_stemmer.stemWord(word))


def normalize(text: str) -> str:
    """NFKC + lower case; lone surrogates and NULs are dropped, not raised on."""
    if not text:
        return ""
    text = text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", " ")
    return unicodedata.normalize("NFKC", text).lower()


def _word(raw: str) -> str:
    w = raw.replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    return stem(_IRREGULAR.get(w, w))


def _cjk_index(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    out: list[str] = []
    for i in range(len(run) - 1):
        out.append(run[i])
        out.append(run[i : i + 2])
    out.append(run[-1])
    return out


def index_terms(text: str) -> list[str]:
    """Terms for the index, in text order."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(normalize(text)):
        cjk, word = m.group(1), m.group(2)
        if cjk:
            out.extend(_cjk_index(cjk))
        elif word:
            out.append(_word(word))
    return out


def index_text(text: str) -> str:
    """The string stored in an FTS5 ``text`` column: the index terms, then
    a term for each negative mood class the text names (:mod:`memory.mood`),
    which no text can produce and which the retriever leaves out of the
    length."""
    from .mood import indexed_moods  # memory.mood imports this module

    terms = index_terms(text)
    return " ".join(terms + indexed_moods(terms))


def query_terms(text: str) -> list[tuple[str, float]]:
    """Weighted query terms in text order, stop words dropped, first
    occurrence only.

    A word or a bigram weighs 1; a character inside a longer CJK run weighs
    less (it matches many unrelated words) unless the run is that one
    character (a 1-character query such as 猫). Time-frame words (now,
    现在) are left out unless they are all the message says.
    """
    text = normalize(text)
    framed = _FRAME.sub(" ", text)
    return _query_terms(framed) or (_query_terms(text) if framed != text else [])


def _query_terms(text: str) -> list[tuple[str, float]]:
    out: dict[str, float] = {}

    def put(term: str, w: float) -> None:
        if w > out.get(term, 0.0):
            out[term] = w

    for m in _TOKEN_RE.finditer(text):
        cjk, raw = m.group(1), m.group(2)
        if raw:
            bare = raw.replace("’", "'")
            if raw in STOP_EN or bare in STOP_EN or bare.endswith("'s") and bare[:-2] in STOP_EN:
                continue  # "it's", "she's", "that's": a stop word and "is" / "has"
            w = _word(raw)
            if len(w) == 1 and not w.isdigit() and w.isascii():
                continue
            put(w, 1.0)
            continue
        if len(cjk) == 1:
            if cjk not in STOP_ZH_CHARS:
                put(cjk, 1.0)
            continue
        for i in range(len(cjk) - 1):
            bg = cjk[i : i + 2]
            if bg in STOP_ZH_WORDS:
                continue
            glue = bg[0] in STOP_ZH_CHARS or bg[1] in STOP_ZH_CHARS
            if glue and bg[0] in STOP_ZH_CHARS and bg[1] in STOP_ZH_CHARS:
                continue
            put(bg, GLUE_BIGRAM_WEIGHT if glue and bg not in ZH_CONTENT_BIGRAMS else 1.0)
        for ch in cjk:
            if ch not in STOP_ZH_CHARS:
                put(ch, UNIGRAM_WEIGHT)
    return list(out.items())


def quote(term: str) -> str:
    """An FTS5 string literal; a double quote inside is doubled."""
    return '"' + term.replace('"', '""') + '"'
