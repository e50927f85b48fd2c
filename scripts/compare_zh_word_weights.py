"""Chinese query bigrams weighted by whether they are words: measured.

The index keeps characters and bigrams (docs/RETRIEVAL.md §2); this script
changes only the *query* weight of a CJK bigram, by one of three signals of
"is it a word", and scores each setting with ``scripts/bench_recall.py``
against the current weights, query by query:

* ``dict``: jieba's dictionary (its two-character entries, ``--min-freq``):
  a glue bigram (beside a grammar character: 中午, 上海, 起来) that is an
  entry (of the part-of-speech ``--tags``, when given) weighs
  ``--glue-word`` instead of 0.4; a bigram with no grammar
  character that is no entry (午吃, 学考) weighs ``--non-word``.
* ``seg``: jieba's segmentation of each CJK run of the message (``cut``,
  no HMM): a bigram straddling two segments weighs ``--non-word`` (a glue
  one stays 0.4), a glue bigram inside one segment ``--glue-word``.
* ``cohesion``: the collection's own counts: r = df(bigram) / the smallest
  df of its non-grammar characters; a glue bigram with r >= ``--theta``
  weighs ``--glue-word``, a bigram without grammar characters with
  r < ``--theta`` weighs ``--non-word`` of its weight.

The grammar characters themselves (session 36, branch stopzh36):

* ``words``: a glue bigram in a hand-written list of common content words
  with a grammar character (``tokenize.ZH_CONTENT_BIGRAMS``: 上海, 上班,
  会议, 地铁, 难过, 有趣 …; with ``--times``, also the times of day 上午,
  中午, 晚上 …)
  weighs ``--glue-word`` instead of 0.4, the other glue bigrams
  ``--glue-rest``.
* ``drop``: the characters ``--chars`` are no grammar characters in the
  query (their bigrams weigh 1, the character itself 0.3).
* ``cohesion --chars``: cohesion (above) only for glue bigrams whose
  grammar character is one of ``--chars``.
* ``glue``: every glue bigram weighs ``--glue-word`` instead of 0.4 (the
  tokenizer's constant); with ``--context-glue``, those of the context
  turns weigh that instead (then x 0.4, as every context term) and the
  message's stay as ``--glue-word`` gives them.

And the characters (session 36), by the collection's counts:

* ``rare-char``: a CJK character of a longer run (weight 0.3) held by under
  ``--theta`` of the rows weighs ``--char-word`` (message; x 0.4 in context).
* ``char-syn``: the same for a character in at most ``--max-df`` rows,
  counted only in a memory holding none of the query's bigrams with it
  (狗狗 for 小狗: the word in another form).

A measurement, not a product path: it replaces the tokenizer's query
weighting (``cohesion`` and ``rare-char`` wrap the retriever's candidate
step, ``char-syn`` its relevance) in this process only. Needs jieba for
``dict`` and ``seg`` (the ``bench`` extra). Results: docs/RETRIEVAL.md §9,
sessions 35 and 36.

    python scripts/compare_zh_word_weights.py dict --glue-word 0.6
    python scripts/compare_zh_word_weights.py seg --non-word 0.6 --locomo
    python scripts/compare_zh_word_weights.py char-syn --max-df 4 --char-word 0.6
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recall  # noqa: E402

from memory import retrieval, tokenize  # noqa: E402
from memory.tokenize import STOP_ZH_CHARS, STOP_ZH_WORDS  # noqa: E402

Weigher = Callable[[str, int], float | None]  # (run, bigram start) -> weight, None = as now
_BIGRAM = re.compile(rf"^[{tokenize._CJK}]{{2}}$")


def jieba_words(min_freq: int, tags: frozenset[str] = frozenset()) -> dict[str, int]:
    """jieba's two-character dictionary entries with their counts (only
    those of the part-of-speech ``tags``, when given: n, ns, t …)."""
    import jieba

    with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf-8") as f:
        rows = [line.split() for line in f]
    return {
        r[0]: int(r[1])
        for r in rows
        if len(r[0]) == 2 and int(r[1]) >= min_freq and (not tags or len(r) > 2 and r[2] in tags)
    }


def _glue(bg: str) -> bool:
    return bg[0] in STOP_ZH_CHARS or bg[1] in STOP_ZH_CHARS


# The tokenizer's list since session 36 (``tokenize.ZH_CONTENT_BIGRAMS``:
# measured here before it was the tokenizer's; at that commit and after,
# ``words --glue-word 0.4 --glue-rest 0.4`` is the weighting before it).
CONTENT_GLUE_WORDS = tokenize.ZH_CONTENT_BIGRAMS
TIMES_OF_DAY = frozenset("上午 中午 下午 早上 晚上".split())


def weigh_by_dict(words: dict[str, int], glue_word: float, non_word: float) -> Weigher:
    def weigh(run: str, i: int) -> float | None:
        bg = run[i : i + 2]
        if _glue(bg):
            return glue_word if bg in words else None
        return None if bg in words else non_word

    return weigh


def weigh_by_segments(glue_word: float, non_word: float) -> Weigher:
    import jieba

    jieba.setLogLevel(60)
    cache: dict[str, set[int]] = {}

    def inside(run: str) -> set[int]:
        if run not in cache:
            starts: set[int] = set()
            pos = 0
            for seg in jieba.cut(run, HMM=False):
                starts.update(range(pos, pos + len(seg) - 1))
                pos += len(seg)
            cache[run] = starts
        return cache[run]

    def weigh(run: str, i: int) -> float | None:
        within = i in inside(run)
        if _glue(run[i : i + 2]):
            return glue_word if within else None
        return None if within else non_word

    return weigh


def patch_glue(glue_word: float, context_glue: float | None) -> None:
    """The glue weight (``tokenize.GLUE_BIGRAM_WEIGHT``) set to
    ``glue_word``; the context turns' glue bigrams (not the known content
    words) to ``context_glue`` when given (0: left out)."""
    tokenize.GLUE_BIGRAM_WEIGHT = glue_word
    if context_glue is None:
        return
    turn_terms = retrieval._turn_terms

    def context_terms(turn: str) -> tuple[tuple[str, float], ...]:
        out = [(t, context_glue if _BIGRAM.match(t) and _glue(t) and t not in CONTENT_GLUE_WORDS else w)
               for t, w in turn_terms(turn)]
        return tuple((t, w) for t, w in out if w > 0)

    context_terms.cache_clear = turn_terms.cache_clear  # type: ignore[attr-defined]
    retrieval._turn_terms = context_terms  # type: ignore[assignment]


def patch_query_weights(weigh: Weigher) -> None:
    """The tokenizer's query weighting, with ``weigh`` deciding each bigram."""
    base = tokenize._query_terms

    def query_terms(text: str) -> list[tuple[str, float]]:
        out = dict(base(text))
        best: dict[str, float] = {}  # a bigram said twice keeps its best weight, as the tokenizer does
        for m in tokenize._TOKEN_RE.finditer(text):
            run = m.group(1)
            for i in range(len(run or "") - 1):
                bg = run[i : i + 2]
                if bg in out:
                    w = weigh(run, i)
                    w = out[bg] if w is None else w
                    best[bg] = max(best.get(bg, 0.0), w)
        out.update(best)
        return list(out.items())

    tokenize._query_terms = query_terms


def patch_cohesion(theta: float, glue_word: float, non_word: float, only: frozenset[str] = frozenset()) -> None:
    """Bigram weights from the collection's document counts, set before the
    retriever's candidate step (which the relevance then reads too)."""
    base = retrieval.Retriever._candidates

    async def candidates(self: retrieval.Retriever, t: Any, q: list[retrieval.QueryTerm], *a: Any, **k: Any) -> Any:
        bgs = [x.term for x in q if _BIGRAM.match(x.term)]
        if bgs:
            _, df = await self._term_stats(t, bgs + sorted({c for b in bgs for c in b}))
            for i, x in enumerate(q):
                if not _BIGRAM.match(x.term):
                    continue
                chars = [df.get(c, 0) for c in x.term if c not in STOP_ZH_CHARS]
                if not chars or min(chars) == 0:
                    continue
                r = df.get(x.term, 0) / min(chars)
                if only and not (_glue(x.term) and only & set(x.term)):
                    continue  # only the glue bigrams of these grammar characters
                if _glue(x.term) and r >= theta:
                    q[i] = retrieval.QueryTerm(x.term, x.weight * glue_word / tokenize.GLUE_BIGRAM_WEIGHT, x.from_query)
                elif not _glue(x.term) and r < theta:
                    q[i] = retrieval.QueryTerm(x.term, x.weight * non_word, x.from_query)
        return await base(self, t, q, *a, **k)

    retrieval.Retriever._candidates = candidates  # type: ignore[method-assign]


async def per_query(data: Path, only: Sequence[str], locomo_context: int) -> dict[str, list[dict[str, Any]]]:
    """Each set's per-query scores (bench_recall's rows; LoCoMo's headline
    categories), set up as ``bench_recall.run_benchmark`` sets them up."""
    res = {name: bench_recall.Result() for name in only}
    fixes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="compare_zh_") as tmp:
        if "locomo_turns" in only:
            for conv in bench_recall.load_locomo(data):
                turns, obs = bench_recall.locomo_corpora(conv, fixes)
                for corpus, key in ((turns, "locomo_turns"), (obs, "locomo_observations")):
                    if locomo_context:
                        bench_recall.with_context(corpus, locomo_context)
                    await bench_recall.run_corpus(corpus, Path(tmp), res[key])
        zh = bench_recall.madial_corpus(data, "zh", fixes)
        if zh is None:
            raise SystemExit(f"no MADial zh data under {data / 'madial'}")
        await bench_recall.run_corpus(zh, Path(tmp), res["madial_zh"])
    keep = bench_recall.HEADLINE_CATEGORIES
    return {k: [row for row in r.rows if k == "madial_zh" or row["category"] in keep] for k, r in res.items()}


def summary(name: str, base: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in rows) / len(rows) if rows else 0.0

    up = sum(1 for a, b in zip(base, new, strict=True) if b["R@5"] > a["R@5"] + 1e-9)
    down = sum(1 for a, b in zip(base, new, strict=True) if b["R@5"] < a["R@5"] - 1e-9)
    return (
        f"{name:22} R@5 {mean(base, 'R@5'):.4f} -> {mean(new, 'R@5'):.4f} ({up} up, {down} down)  "
        f"R@1 {mean(base, 'R@1'):.4f} -> {mean(new, 'R@1'):.4f}  MRR {mean(base, 'MRR'):.4f} -> {mean(new, 'MRR'):.4f}"
    )


_CHAR = re.compile(rf"^[{tokenize._CJK}]$")


def patch_rare_chars(theta: float, char_word: float) -> None:
    """A CJK character of a longer run (weight 0.3: 狗 of 小狗) held by
    under ``theta`` of the collection's rows weighs ``char_word`` instead:
    a rare character is a content character (狗, 购, 笑, 画), a common one
    the template's or grammar's (感, 开, 心, 好). Session 36."""
    base = retrieval.Retriever._candidates

    async def candidates(self: retrieval.Retriever, t: Any, q: list[retrieval.QueryTerm], *a: Any, **k: Any) -> Any:
        chars = [x.term for x in q if _CHAR.match(x.term)]
        if chars:
            stats, df = await self._term_stats(t, chars)
            for i, x in enumerate(q):
                if _CHAR.match(x.term) and stats.rows and 0 < df.get(x.term, 0) < theta * stats.rows:
                    w = x.weight / tokenize.UNIGRAM_WEIGHT * char_word if x.weight < 1.0 or not x.from_query else x.weight
                    q[i] = retrieval.QueryTerm(x.term, min(w, 1.0 if x.from_query else retrieval.CONTEXT_WEIGHT),
                                               x.from_query)
        return await base(self, t, q, *a, **k)

    retrieval.Retriever._candidates = candidates  # type: ignore[method-assign]


def patch_char_in_another_word(max_df: int, char_word: float) -> None:
    """A CJK character of a query bigram (狗 of 小狗) held by at most
    ``max_df`` rows counts as ``char_word`` (instead of 0.3) in a memory
    that holds none of the query's bigrams with that character (狗狗, not
    小狗): the same word said in another form, as Indri's ``#syn`` counts
    an expansion only without its source. Session 36."""
    init, call = retrieval._Relevance.__init__, retrieval._Relevance.__call__
    extra: dict[int, dict[str, tuple[float, frozenset[str]]]] = {}

    def new_init(self: Any, q: Sequence[retrieval.QueryTerm], idf: dict[str, float], avg_len: float) -> None:
        init(self, q, idf, avg_len)
        bgs = [x.term for x in q if _BIGRAM.match(x.term)]
        top = max(idf.values(), default=0.0)  # a term in no row
        chars: dict[str, tuple[float, frozenset[str]]] = {}
        for x in q:
            # idf = ln(1 + (N - df + .5) / (df + .5)) ~ ln((N + 1) / (df + .5)): top - idf ~ ln(2 df + 1).
            if _CHAR.match(x.term) and x.weight < 1.0 and 1e-9 < top - idf[x.term] <= math.log(2 * max_df + 1.5):
                w = x.weight / tokenize.UNIGRAM_WEIGHT * (char_word - tokenize.UNIGRAM_WEIGHT)
                chars[x.term] = (w * idf[x.term], frozenset(b for b in bgs if x.term in b))
        extra[id(self)] = chars

    def new_call(self: Any, doc: str, dated: bool = False) -> float:
        got: float = call(self, doc, dated)
        chars = extra.get(id(self), {})
        if chars:
            toks = doc.split(" ")
            norm = retrieval._K1 * (1.0 - retrieval._B + retrieval._B * max(len(toks), 1) / self.avg_len)
            held = set(toks)
            for c, (w, bgs) in chars.items():
                if c in held and held.isdisjoint(bgs):
                    f = toks.count(c)
                    got += w * f * (retrieval._K1 + 1.0) / (f + norm) / self.mass
        return got

    retrieval._Relevance.__init__ = new_init  # type: ignore[method-assign]
    retrieval._Relevance.__call__ = new_call  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("signal", choices=["dict", "seg", "cohesion", "rare-char", "char-syn", "words", "drop", "glue"])
    ap.add_argument("--context-glue", type=float, default=None, help="glue: the context turns' glue bigrams")
    ap.add_argument("--chars", default="", help="drop: characters that are no grammar; cohesion: only these")
    ap.add_argument("--times", action="store_true", help="words: also the times of day (上午, 中午, 晚上 …)")
    ap.add_argument("--glue-rest", type=float, default=0.4, help="words: the glue bigrams not in the list")
    ap.add_argument("--exclude", default="", help="words: leave these out of the list (space-separated)")
    ap.add_argument("--max-df", type=int, default=2, help="char-syn: rows a rare character is in at most")
    ap.add_argument("--char-word", type=float, default=0.3, help="rare-char: a rare character's weight (0.3: as now)")
    ap.add_argument("--glue-word", type=float, default=0.4, help="a glue bigram that is a word (0.4: as now)")
    ap.add_argument("--non-word", type=float, default=1.0, help="a bigram without grammar characters that is no word")
    ap.add_argument("--theta", type=float, default=0.5, help="cohesion: r at which a bigram is a word")
    ap.add_argument("--min-freq", type=int, default=1, help="dict: jieba's count an entry needs")
    ap.add_argument("--tags", default="", help="dict: only entries of these part-of-speech tags (comma-separated)")
    ap.add_argument("--locomo", action="store_true", help="also LoCoMo turns and observations (English: unchanged)")
    ap.add_argument("--locomo-context", type=int, default=0)
    ap.add_argument("--data", type=Path, default=bench_recall.default_data())
    a = ap.parse_args(argv)
    only = ["madial_zh"] + (["locomo_turns", "locomo_observations"] if a.locomo else [])
    base = asyncio.run(per_query(a.data, only, a.locomo_context))
    if a.signal == "dict":
        patch_query_weights(weigh_by_dict(jieba_words(a.min_freq, frozenset(filter(None, a.tags.split(",")))), a.glue_word, a.non_word))
    elif a.signal == "seg":
        patch_query_weights(weigh_by_segments(a.glue_word, a.non_word))
    elif a.signal == "char-syn":
        patch_char_in_another_word(a.max_df, a.char_word)
    elif a.signal == "words":
        listed = (CONTENT_GLUE_WORDS | (TIMES_OF_DAY if a.times else frozenset())) - set(a.exclude.split())
        patch_query_weights(weigh_by_dict(dict.fromkeys(listed, 1), a.glue_word, 1.0))
        tokenize.GLUE_BIGRAM_WEIGHT = a.glue_rest
    elif a.signal == "glue":
        patch_glue(a.glue_word, a.context_glue)
    elif a.signal == "drop":
        tokenize.STOP_ZH_CHARS = frozenset(STOP_ZH_CHARS - set(a.chars))
    elif a.signal == "rare-char":
        patch_rare_chars(a.theta, a.char_word)
    else:
        patch_cohesion(a.theta, a.glue_word, a.non_word, frozenset(a.chars))
    retrieval._turn_terms.cache_clear()
    new = asyncio.run(per_query(a.data, only, a.locomo_context))
    for name in base:
        print(summary(name, base[name], new[name]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
