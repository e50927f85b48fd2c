"""A query-dependent context share: measured against the fixed one.

Today every context term (the user's earlier lines) weighs
``CONTEXT_WEIGHT`` (0.4) of a message term. Here the share depends on how
much the message itself says, mapped linearly from 0.4 (the message says
enough) up to ``--hi`` (it says nothing) over ``--k``:

    share = 0.4 + (hi - 0.4) * max(0, 1 - v / k)

* ``mass``: v = the message's IDF mass over its terms found in the user's
  memories (weight x IDF, summed), in units of the IDF of a term in no
  memory: about "how many rare words the message holds that a memory
  could share". Known before the candidates are chosen, so it weighs them too.
* ``rel``: v = the best candidate's message-only relevance (its BM25 sum
  over the message's own terms / the message's IDF mass, as §4): how well
  the message alone matches. The candidates are chosen at 0.4.
* ``ratio``: v = that relevance over the best candidate's context-only
  relevance (the context terms as a query of their own, normalised by
  their own mass): whether the message finds less than its context does.

And one that keeps the share but changes how a memory adds its context
matches (session 36, branch stopzh36):

* ``decay``: a memory's context terms count in the order of their BM25
  part, the i-th (from 0) times ``--gamma`` ** i: its best context match
  counts whole, each further one less, so one rare word of the earlier
  lines is not outnumbered by several common ones of an old topic.

A measurement, not a product path: it wraps the retriever's candidate
step in this process only (the list of query terms it is given is the one
the memories are then scored with, so rescaling it there rescales both).
Every set is scored query by query against the base in one process;
LoCoMo also by group (A = conv-26/41, B = conv-44/48/50); ``--no-locomo``
skips LoCoMo, whose questions have no context (identical by construction,
measured so). Results: docs/RETRIEVAL.md §9, session 36.

    python scripts/compare_context_share.py mass --hi 0.8 --k 2
    python scripts/compare_context_share.py rel --hi 0.7 1.0 --k 0.25 0.3 --locomo-context 4
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recall  # noqa: E402

from memory import retrieval  # noqa: E402
from memory.cues import CUE_MARK  # noqa: E402
from memory.mood import MOOD_TERMS, is_mood_term  # noqa: E402
from memory.retrieval import CONTEXT_WEIGHT, QueryTerm  # noqa: E402

SETS = ("locomo_turns", "locomo_observations", "madial_zh", "madial_en")
GROUPS = {"A": ("conv-26", "conv-41"), "B": ("conv-44", "conv-48", "conv-50")}


async def per_query(data: Path, locomo_context: int, madial: bool, locomo: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Each set's per-query rows (LoCoMo: headline categories)."""
    res = {name: bench_recall.Result() for name in SETS}
    fixes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="compare_share_") as tmp:
        for conv in bench_recall.load_locomo(data) if locomo else []:
            turns, obs = bench_recall.locomo_corpora(conv, fixes)
            for corpus, key in ((turns, "locomo_turns"), (obs, "locomo_observations")):
                if locomo_context:
                    bench_recall.with_context(corpus, locomo_context)
                await bench_recall.run_corpus(corpus, Path(tmp), res[key])
        for lang in ("zh", "en") if madial else ():
            dialogues = bench_recall.madial_corpus(data, lang, fixes)
            if dialogues is not None:
                await bench_recall.run_corpus(dialogues, Path(tmp), res[f"madial_{lang}"])
    keep = bench_recall.HEADLINE_CATEGORIES
    return {k: [row for row in r.rows if k.startswith("madial") or row["category"] in keep]
            for k, r in res.items() if r.rows}


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def summary(name: str, base: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    up = sum(1 for a, b in zip(base, new, strict=True) if b["R@5"] > a["R@5"] + 1e-9)
    down = sum(1 for a, b in zip(base, new, strict=True) if b["R@5"] < a["R@5"] - 1e-9)
    line = (f"{name:20} R@5 {_mean(base, 'R@5'):.4f} -> {_mean(new, 'R@5'):.4f} ({up} up, {down} down)  "
            f"R@1 {_mean(base, 'R@1'):.4f} -> {_mean(new, 'R@1'):.4f}  "
            f"R@10 {_mean(base, 'R@10'):.4f} -> {_mean(new, 'R@10'):.4f}  "
            f"MRR {_mean(base, 'MRR'):.4f} -> {_mean(new, 'MRR'):.4f}")
    if name.startswith("locomo"):
        for g, convs in GROUPS.items():
            pick = [i for i, r in enumerate(base) if r["qid"].split("#")[0] in convs]
            line += (f"\n{'':20}   {g} {_mean([base[i] for i in pick], 'R@5'):.4f} -> "
                     f"{_mean([new[i] for i in pick], 'R@5'):.4f}")
    return line


def _context(x: QueryTerm) -> bool:
    return not x.from_query and not is_mood_term(x.term)


def patched(original: Any, signal: str, hi: float, k: float) -> Any:
    """``Retriever._candidates`` with the context terms of ``q`` rescaled
    to the share the signal gives (in place: the caller scores with ``q``)."""

    def share(v: float) -> float:
        return CONTEXT_WEIGHT + (hi - CONTEXT_WEIGHT) * max(0.0, 1.0 - v / k)

    def rescale(q: list[QueryTerm], s: float) -> None:
        f = s / CONTEXT_WEIGHT
        q[:] = [QueryTerm(x.term, x.weight * f, False) if _context(x) else x for x in q]

    async def candidates(self: Any, t: Any, q: list[QueryTerm], owners: Any, select: str, join: str, where: str,
                         when: Sequence[Any] = ()) -> Any:
        if signal == "mass" and any(map(_context, q)):
            # The document counts, as the candidate step reads them (cached, exact).
            stats, df = await self._term_stats(t, [x.term for x in q if x.term != retrieval.WHEN_TERM], owners, when)
            n = max(stats.rows, *df.values(), 0) + retrieval.PRIOR_ROWS
            top = math.log(1.0 + (n + 0.5) / 0.5)  # the IDF of a term in no memory
            idf = {x.term: math.log(1.0 + (n - df.get(x.term, 0) + 0.5) / (df.get(x.term, 0) + 0.5)) for x in q}
            mass = sum(x.weight * idf[x.term] for x in q
                       if x.from_query and x.term != retrieval.WHEN_TERM and df.get(x.term, 0) > 0)
            rescale(q, share(mass / top))
        rows, idf, stats = await original(self, t, q, owners, select, join, where, when)
        own = [x for x in q if x.from_query]
        if signal in ("rel", "ratio") and rows and own and any(map(_context, q)):
            rel = retrieval._Relevance(own, idf, stats.avg_len)  # message-only, normalised as §4
            best = max(rel(r["_terms"], bool(when) and retrieval._within(r["created_at"], when)) for r in rows)
            if signal == "ratio":
                # The context alone, normalised by its own mass (as a query of its own).
                ctx = [QueryTerm(x.term, x.weight, True) for x in q if _context(x)]
                crel = retrieval._Relevance(ctx, idf, stats.avg_len)
                best /= max(max(crel(r["_terms"]) for r in rows), 1e-9)
            rescale(q, share(best))
        return rows, idf, stats

    return candidates


def decayed(gamma: float) -> tuple[Any, Any]:
    """``_Relevance``'s ``__init__`` and ``__call__`` with each memory's
    context matches counted in decreasing order, the i-th times gamma ** i."""
    init, call = retrieval._Relevance.__init__, retrieval._Relevance.__call__
    ctx_terms: dict[int, frozenset[str]] = {}

    def new_init(self: Any, q: Sequence[QueryTerm], idf: dict[str, float], avg_len: float) -> None:
        init(self, q, idf, avg_len)
        ctx_terms[id(self)] = frozenset(x.term for x in q if _context(x) and x.term != retrieval.WHEN_TERM)

    def new_call(self: Any, doc: str, dated: bool = False) -> float:
        got: float = call(self, doc, dated)
        ctx = ctx_terms.get(id(self), frozenset())
        at = doc.find(CUE_MARK)
        text = doc[:at].rstrip(" ") if at >= 0 else doc
        toks = text.split(" ")
        held = [t for t in dict.fromkeys(toks) if t in ctx and t in self.weights]
        if len(held) < 2:
            return got
        n = len(toks) - sum(toks.count(m) for m in MOOD_TERMS)
        norm = retrieval._K1 * (1.0 - retrieval._B + retrieval._B * max(n, 1) / self.avg_len)
        parts = sorted((self.weights[t] * (f := toks.count(t)) * (retrieval._K1 + 1.0) / (f + norm) for t in held),
                       reverse=True)
        return got + float(sum(c * (gamma**i - 1.0) for i, c in enumerate(parts))) / float(self.mass)

    return new_init, new_call


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("signal", choices=["mass", "rel", "ratio", "decay"])
    ap.add_argument("--gamma", type=float, nargs="+", default=[0.5], help="decay: the i-th context match x gamma ** i")
    ap.add_argument("--hi", type=float, nargs="+", default=[0.8], help="the share when the message says nothing")
    ap.add_argument("--k", type=float, nargs="+", default=[2.0], help="v at which the share is back to 0.4")
    ap.add_argument("--no-locomo", action="store_true", help="MADial only (LoCoMo's questions have no context)")
    ap.add_argument("--locomo-context", type=int, default=0)
    ap.add_argument("--data", type=Path, default=bench_recall.default_data())
    a = ap.parse_args(argv)
    madial = a.locomo_context == 0  # the stress test is LoCoMo's
    original = retrieval.Retriever._candidates
    base = asyncio.run(per_query(a.data, a.locomo_context, madial, not a.no_locomo))
    if a.signal == "decay":
        init, call = retrieval._Relevance.__init__, retrieval._Relevance.__call__
        for g in a.gamma:
            retrieval._Relevance.__init__, retrieval._Relevance.__call__ = decayed(g)  # type: ignore[method-assign]
            new = asyncio.run(per_query(a.data, a.locomo_context, madial, not a.no_locomo))
            retrieval._Relevance.__init__, retrieval._Relevance.__call__ = init, call  # type: ignore[method-assign]
            print(f"== decay gamma {g} (locomo-context {a.locomo_context})")
            for name in base:
                print(summary(name, base[name], new[name]))
            sys.stdout.flush()
        return 0
    for hi in a.hi:
        for k in a.k:
            retrieval.Retriever._candidates = patched(original, a.signal, hi, k)  # type: ignore[method-assign]
            new = asyncio.run(per_query(a.data, a.locomo_context, madial, not a.no_locomo))
            retrieval.Retriever._candidates = original  # type: ignore[method-assign]
            print(f"== {a.signal} hi {hi} k {k} (locomo-context {a.locomo_context})")
            for name in base:
                print(summary(name, base[name], new[name]))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
