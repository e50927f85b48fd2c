#!/usr/bin/env python3
"""Recall benchmark: does ``Retriever.retrieve`` bring back the right memory?

Usage (from anywhere; the repo root is put on ``sys.path``)::

    python scripts/bench_recall.py [--data DIR] [--json FILE]
                                   [--only SET ...] [--limit-conversations N]
                                   [--locomo-context N] [--no-source-text]
                                   [--embed-url URL [--embed-model NAME]
                                    [--fusion weighted|rrf] [--lexical-share F]
                                    [--min-similarity F]]

``DIR`` defaults to ``$MYCLAW_BENCH_DATA``, else ``../shared/bench`` next to
the repo (next to the main checkout from a git worktree) and may be any folder
with the same layout, so the same command scores the held-out split:

* ``locomo/*.json``: each file a LoCoMo conversation or a list of them;
* ``madial/madial-{zh,en}-dialogue-*.jsonl`` with
  ``madial/madial-{zh,en}-memory.jsonl``.

A set whose files are missing is skipped with a note. No LLM is involved.

``--embed-url`` (an OpenAI-compatible base URL ending in ``/v1``, e.g.
``scripts/embed_server.py``'s) scores hybrid recall instead: every memory is
embedded through ``Vectorizer`` after it is written, and queries go through
``HybridRetriever`` (``--fusion``, ``--lexical-share``, ``--min-similarity``)
with a generous timeout, so a quality run never falls back to lexical (the
count of fallbacks is reported, with a warning if it is not 0). The latency
figures then include the query's embedding call. Without the flag nothing
changes.

Method
------
Memories go in through the engine's own write API (``MemoryEngine.add_many``,
``created_at`` = the date the memory was made) into a real SQLite file in a
temp directory, and queries go through ``Retriever.retrieve`` (what the
gateway calls) with a ``ManualClock`` set to the conversation's time, so decay
behaves as in real use. We ask for the top ``TOP_K = 10``.

How the data is read
--------------------
LoCoMo (``conversation``, ``observation``, ``qa``, ``sample_id``):

* ``conversation`` holds ``speaker_a``/``speaker_b``, ``session_<n>`` (a list
  of turns ``{speaker, dia_id, text}``, some with ``blip_caption`` for a
  shared image) and ``session_<n>_date_time`` ("1:56 pm on 8 May, 2023").
  Date keys without a session (conv-26 has 35 dates for 19 sessions) are
  ignored. One database and one user (``locomo:<sample_id>``) per
  conversation; the clock is the date of its last session.
* turns set: each turn is a memory ``"{speaker}: {text}"`` plus
  ``" [image: {blip_caption}]"`` when there is a caption, dated by its
  session, category ``conversation``, provenance refs ``(dia_id,)``.
* observations set: ``observation["session_<n>_observation"][speaker]`` is a
  list of ``[fact, dia_id]``; the dia_id is sometimes a list or a
  comma-joined string. Each fact is a Tier 2 ``event`` memory dated by its
  session whose provenance refs are all the dia_ids it cites, and whose
  ``source_text`` is the text of those turns (as ``turns`` above, joined by
  newlines): the write path keeps the messages each extracted fact cites
  and indexes their words with it. ``--no-source-text`` leaves it empty, to
  score the facts' own words alone.
* ``qa`` items: ``question``, ``evidence`` (gold dia_ids), ``category``
  (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).
  Questions without evidence are dropped. Evidence ids are normalised
  (:func:`normalise_evidence`): lists joined by spaces/commas/semicolons are
  split, ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``; pieces with no
  id in them (``"D"``) and ids of turns that do not exist are dropped; a
  question left with no usable evidence is dropped. All of it is counted and
  reported. Observations get the same treatment for their dia_ids.
* Headline = categories 1-4; category 5 (adversarial: the answer is not in
  the conversation) is reported apart.
* ``--locomo-context N`` (a stress test, not the headline): each question
  gets the N questions before it in the file as ``context=``, oldest first,
  as a gateway passes the user's recent messages, which are mostly about
  something else. How much recall drops measures how far context can pull
  retrieval off the message (the topic switch).

MADial-Bench (``madial-<lang>-memory.jsonl``, ``madial-<lang>-dialogue-*.jsonl``):

* memory lines are ``{id: {time, scene, emotion, event, user-id}}``; en lines
  lack ``user-id``, so it is taken from the zh line with the same id. A
  memory's content is the ``event`` plus its emotion
  (``"... (emotion: Happy)"`` / ``"...（情绪：开心）"``), its ``scene`` is the
  topic, it is dated by ``time``, category ``event``, refs ``(id,)``.
* dialogue lines: ``dialogue`` is a list of lines ``<Name>:"text"`` framed by
  ``<BOD>``/``<EOD>`` (index 0 is ``<BOD>``); ``test-turn`` lists indexes of
  the assistant lines that draw on a memory (zh sometimes lists alternative
  assistant lines back to back); ``relevant-id`` lists the gold memory ids
  for the dialogue; ``user-id`` the owner. A few en lines lack a
  ``<Name>:`` tag.
* One query per dialogue, at its first test turn: the query is the latest
  line of the user (the first non-Assistant speaker) before it, and
  ``context=`` gets the user's own up to ``MADIAL_CONTEXT_LINES`` lines
  before that (text only, oldest first): the gateway passes recall the
  user's recent messages, never the assistant's replies. (It passes the
  user's messages among its last 4 stored messages, about two: see
  docs/RETRIEVAL.md §9.) The dialogues carry no time, so the clock is the
  user's latest memory time. One database per language holding both users.

Metrics (per query, then averaged)
-----------------------------------
A hit "cites" the ids in its provenance refs; ``gold`` is the set of gold ids.

* R@k: share of gold ids cited by the top k hits. All@10: 1 if all are.
* MRR: 1 / rank of the first hit citing a gold id (0 if none in the top 10).
* nDCG@10: binary gains; a hit gains 1 if it cites a gold id no earlier hit
  cited (so two facts citing the same turn are not counted twice); the ideal
  ranking covers one gold id per rank.
* prefilter pass: share of queries ``should_retrieve`` lets through. Recall
  is computed over all queries regardless.
* latency: p50/p95 of ``retrieve`` wall time over every query of the run.

``--json FILE`` writes::

    {"locomo_turns": {"headline": {"R@1", "R@5", "R@10", "All@10", "MRR",
                                   "nDCG@10", "n"},
                      "by_category": {"1": {...}, ..., "5": {...}},
                      "prefilter_pass": float, "evidence_fixes": {...}},
     "locomo_observations": {... same ...},
     "madial_zh": {"headline": {...}, "prefilter_pass": float},
     "madial_en": {...},
     "latency_ms": {"p50", "p95"},
     "hybrid": {"model", "fusion", "lexical_share", "min_similarity",
                "fallbacks"}}         # only with --embed-url
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance, Source  # noqa: E402
from memory.clock import format_ts  # noqa: E402
from memory.embedding import CachedEmbedder, HttpEmbedder  # noqa: E402
from memory.hybrid import HybridRetriever  # noqa: E402
from memory.prefilter import should_retrieve  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402
from memory.schema import buffer_path  # noqa: E402
from memory.vectorize import Vectorizer  # noqa: E402
from memory.vectors import VectorIndex  # noqa: E402

DATA_ENV = "MYCLAW_BENCH_DATA"


def default_data(repo_root: Path = REPO_ROOT, env: Mapping[str, str] = os.environ) -> Path:
    """The benchmark folder when ``--data`` is not given: ``$MYCLAW_BENCH_DATA``;
    else ``../shared/bench`` next to the checkout; else, in a git worktree
    (``/work/wt/X``, whose ``..`` holds no ``shared``), next to the main
    checkout (the git common dir's parent); else the plain one, which then
    does not exist (``--data``'s error names it, the smoke tests skip)."""
    if named := env.get(DATA_ENV):
        return Path(named)
    plain = repo_root.parent / "shared" / "bench"
    if plain.is_dir():
        return plain
    try:
        common = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=repo_root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return plain  # no git, or not a repository: a copied tree
    main = (repo_root / common).resolve().parent  # relative to repo_root when git says it so
    found = main.parent / "shared" / "bench"
    return found if found.is_dir() else plain


DEFAULT_DATA = default_data()
TOP_K = 10
MADIAL_CONTEXT_LINES = 4
METRICS = ("R@1", "R@5", "R@10", "All@10", "MRR", "nDCG@10")
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
HEADLINE_CATEGORIES = frozenset({"1", "2", "3", "4"})
SETS = ("locomo_turns", "locomo_observations", "madial_zh", "madial_en")
EMBED_TIMEOUT = 300.0  # per embeddings request (a batch of 256 on a CPU model)
QUERY_TIMEOUT = 120.0  # HybridRetriever's wait for the query vector: never fall back
EMBED_BATCH = 256

# --------------------------------------------------------------------------
# Metrics: pure functions over "ranked" = the ids each hit cites, best first.

Ranked = Sequence[Collection[str]]


def covered(ranked: Ranked, gold: Collection[str], k: int) -> set[str]:
    """Gold ids cited by the top ``k`` hits."""
    found: set[str] = set()
    for refs in ranked[:k]:
        found.update(r for r in refs if r in gold)
    return found


def recall_at_k(ranked: Ranked, gold: Collection[str], k: int) -> float:
    if not gold:
        raise ValueError("a query needs at least one gold id")
    return len(covered(ranked, gold, k)) / len(set(gold))


def all_at_k(ranked: Ranked, gold: Collection[str], k: int) -> float:
    return 1.0 if recall_at_k(ranked, gold, k) == 1.0 else 0.0


def reciprocal_rank(ranked: Ranked, gold: Collection[str]) -> float:
    for i, refs in enumerate(ranked, start=1):
        if any(r in gold for r in refs):
            return 1.0 / i
    return 0.0


def ndcg_at_k(ranked: Ranked, gold: Collection[str], k: int) -> float:
    """Binary-gain nDCG; a hit gains only if it cites a gold id not yet seen."""
    gold = set(gold)
    if not gold:
        raise ValueError("a query needs at least one gold id")
    seen: set[str] = set()
    dcg = 0.0
    for i, refs in enumerate(ranked[:k], start=1):
        new = {r for r in refs if r in gold} - seen
        if new:
            dcg += 1.0 / math.log2(i + 1)
            seen |= new
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def score_query(ranked: Ranked, gold: Collection[str]) -> dict[str, float]:
    return {
        "R@1": recall_at_k(ranked, gold, 1),
        "R@5": recall_at_k(ranked, gold, 5),
        "R@10": recall_at_k(ranked, gold, 10),
        "All@10": all_at_k(ranked, gold, 10),
        "MRR": reciprocal_rank(ranked[:TOP_K], gold),
        "nDCG@10": ndcg_at_k(ranked, gold, 10),
    }


def aggregate(scores: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Mean of each metric over queries, plus ``n``; metrics are None if n = 0."""
    out: dict[str, Any] = {}
    for m in METRICS:
        out[m] = round(sum(s[m] for s in scores) / len(scores), 4) if scores else None
    out["n"] = len(scores)
    return out


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolation percentile (p in [0, 100])."""
    if not values:
        raise ValueError("no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --------------------------------------------------------------------------
# Evidence ids

_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def normalise_evidence(raw: object, known: Collection[str], fixes: Counter[str]) -> list[str]:
    """LoCoMo dia_ids from a messy ``evidence`` (or observation) value.

    Accepts a string or a list of strings; splits joined lists, rewrites ids
    to ``D<session>:<turn>`` without leading zeros, drops what is not an id or
    names no known turn. Every change is counted in ``fixes``.
    """
    pieces = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, list | tuple) else [raw]
    out: list[str] = []
    for piece in pieces:
        text = str(piece).strip()
        matches = _DIA_ID.findall(text)
        if not matches:
            fixes["unparseable"] += 1
            continue
        if len(matches) > 1:
            fixes["split"] += 1
        for s, t in matches:
            did = f"D{int(s)}:{int(t)}"
            if len(matches) == 1 and did != text:
                fixes["reformatted"] += 1
            if did not in known:
                fixes["dangling"] += 1
                continue
            if did not in out:
                out.append(did)
    return out


# --------------------------------------------------------------------------
# Corpora


@dataclass(frozen=True)
class Query:
    qid: str
    user: str
    text: str
    gold: frozenset[str]
    now: datetime
    category: str = ""
    context: tuple[str, ...] = ()


@dataclass
class Corpus:
    """What goes into one database: memories, and the queries asked of it."""

    name: str
    memories: list[tuple[NewMemory, str]] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


_SESSION = re.compile(r"session_(\d+)")


def parse_locomo_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> aware UTC datetime."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_locomo(data_dir: Path) -> list[dict[str, Any]]:
    convs: list[dict[str, Any]] = []
    for path in sorted((data_dir / "locomo").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        convs.extend(data if isinstance(data, list) else [data])
    return convs


def locomo_sessions(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(number, date, turns) of every session that has turns, in order."""
    c = conv["conversation"]
    out = []
    for key, turns in c.items():
        m = _SESSION.fullmatch(key)
        if not m or not isinstance(turns, list) or not turns:
            continue
        when = c.get(f"{key}_date_time")
        if not when:
            raise ValueError(f"{conv.get('sample_id')}: {key} has no {key}_date_time")
        out.append((int(m.group(1)), parse_locomo_date(when), turns))
    return sorted(out, key=lambda s: s[0])


def turn_content(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {str(turn.get('text', '')).strip()}"
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [image: {caption}]" if caption else text


def locomo_corpora(
    conv: dict[str, Any], fixes: Counter[str], *, source_text: bool = True
) -> tuple[Corpus, Corpus]:
    """The turns corpus and the observations corpus of one conversation.

    ``source_text=False`` indexes each observation's own words only (how the
    figures before source_text were measured)."""
    sid = str(conv.get("sample_id", "conv"))
    user = f"locomo:{sid}"
    sessions = locomo_sessions(conv)
    if not sessions:
        raise ValueError(f"{sid}: no sessions with turns")
    dates = {n: d for n, d, _ in sessions}
    now = sessions[-1][1]
    turns = Corpus(f"locomo_turns-{sid}")
    known: set[str] = set()
    for n, when, session_turns in sessions:
        for t in session_turns:
            known.add(t["dia_id"])
            turns.memories.append(
                (
                    NewMemory(
                        owner=user,
                        content=turn_content(t),
                        category=Category.CONVERSATION,
                        source=Source.MIGRATION,
                        provenance=Provenance(channel="locomo", chat_id=sid, session=f"session_{n}",
                                              refs=(t["dia_id"],)),
                    ),
                    format_ts(when),
                )
            )
    obs = Corpus(f"locomo_observations-{sid}")
    said = {t["dia_id"]: turn_content(t) for _, _, st in sessions for t in st}
    obs_fixes: Counter[str] = Counter()
    for key, by_speaker in sorted((conv.get("observation") or {}).items()):
        m = re.fullmatch(r"session_(\d+)_observation", key)
        if not m or int(m.group(1)) not in dates:
            fixes["observation_sessions_unknown"] += 1
            continue
        n = int(m.group(1))
        for facts in by_speaker.values():
            for item in facts:
                text, refs = str(item[0]).strip(), normalise_evidence(item[1], known, obs_fixes)
                if not text or not refs:
                    fixes["observations_dropped"] += 1
                    continue
                obs.memories.append(
                    (
                        NewMemory(
                            owner=user,
                            content=text,
                            category=Category.EVENT,
                            source=Source.MIGRATION,
                            provenance=Provenance(channel="locomo", chat_id=sid, session=f"session_{n}",
                                                  refs=tuple(refs)),
                            # The turns it cites, as extraction keeps the
                            # message(s) each fact came from.
                            source_text="\n".join(said[r] for r in refs) if source_text else "",
                        ),
                        format_ts(dates[n]),
                    )
                )
    for k, v in obs_fixes.items():
        fixes[f"observation_ids_{k}"] += v
    for i, qa in enumerate(conv.get("qa", [])):
        raw = qa.get("evidence")
        if not raw:
            fixes["questions_without_evidence"] += 1
            continue
        q_fixes: Counter[str] = Counter()
        gold = normalise_evidence(raw, known, q_fixes)
        for k, v in q_fixes.items():
            fixes[f"evidence_{k}"] += v
        if q_fixes:
            fixes["questions_with_fixed_evidence"] += 1
        if not gold:
            fixes["questions_without_usable_evidence"] += 1
            continue
        q = Query(f"{sid}#{i}", user, str(qa["question"]), frozenset(gold), now, str(qa.get("category", "")))
        turns.queries.append(q)
        obs.queries.append(q)
    return turns, obs


_LINE = re.compile(r"^\s*<([^<>:]{1,40})>\s*[:：]\s*(.*)$", re.DOTALL)
_MARKER = re.compile(r"^\s*<(BOD|EOD)>\s*$")


def parse_madial_line(line: str) -> tuple[str | None, str]:
    """``<Bart>:"text"`` -> ("Bart", "text"); an untagged line -> (None, text)."""
    m = _LINE.match(line)
    speaker, text = (m.group(1).strip(), m.group(2)) if m else (None, line)
    text = text.strip().strip("<>").strip().strip('"“”').strip()
    return speaker, text


def madial_query(dialogue: Sequence[str], test_turns: Sequence[int]) -> tuple[str, tuple[str, ...]] | None:
    """(latest user message before the first test turn, the user's own
    earlier messages, at most ``MADIAL_CONTEXT_LINES``, oldest first)."""
    lines = [(i, *parse_madial_line(ln)) for i, ln in enumerate(dialogue) if not _MARKER.match(ln)]
    user = next((s for _, s, _ in lines if s and s.lower() != "assistant"), None)
    if user is None or not test_turns:
        return None
    first = min(test_turns)
    before = [(i, s, t) for i, s, t in lines if i < first and t]
    for j in range(len(before) - 1, -1, -1):
        if before[j][1] == user:
            mine = [t for _, s, t in before[:j] if s == user]
            return before[j][2], tuple(mine[-MADIAL_CONTEXT_LINES:])
    return None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _madial_memories(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in _jsonl(path):
        for mid, rec in line.items():
            out[str(mid)] = rec
    return out


def madial_corpus(data_dir: Path, lang: str, fixes: Counter[str]) -> Corpus | None:
    folder = data_dir / "madial"
    mem_path = folder / f"madial-{lang}-memory.jsonl"
    dia_paths = sorted(folder.glob(f"madial-{lang}-dialogue-*.jsonl"))
    if not mem_path.exists() or not dia_paths:
        return None
    memories = _madial_memories(mem_path)
    zh_path = folder / "madial-zh-memory.jsonl"
    zh = memories if lang == "zh" else (_madial_memories(zh_path) if zh_path.exists() else {})
    corpus = Corpus(f"madial_{lang}")
    latest: dict[str, date] = {}
    for mid, rec in memories.items():
        uid = rec.get("user-id", zh.get(mid, {}).get("user-id"))
        if uid is None:
            fixes[f"madial_{lang}_memories_without_user"] += 1
            continue
        user = f"madial:{uid}"
        day = date.fromisoformat(str(rec["time"]).strip())
        latest[user] = max(day, latest.get(user, day))
        emotion = str(rec.get("emotion", "")).strip()
        event = str(rec["event"]).strip()
        if emotion:
            event += f"（情绪：{emotion}）" if lang == "zh" else f" (emotion: {emotion})"
        corpus.memories.append(
            (
                NewMemory(
                    owner=user,
                    content=event,
                    category=Category.EVENT,
                    topic=str(rec.get("scene") or "_general"),
                    source=Source.MIGRATION,
                    provenance=Provenance(channel="madial", refs=(mid,)),
                ),
                f"{day.isoformat()}T00:00:00Z",
            )
        )
    for path in dia_paths:
        for i, d in enumerate(_jsonl(path)):
            user = f"madial:{d.get('user-id')}"
            gold = frozenset(str(r) for r in d.get("relevant-id", []) if str(r) in memories)
            if len(gold) < len(d.get("relevant-id", [])):
                fixes[f"madial_{lang}_dangling_relevant_ids"] += len(d.get("relevant-id", [])) - len(gold)
            q = madial_query(d.get("dialogue", []), d.get("test-turn", []))
            if q is None or not gold or user not in latest:
                fixes[f"madial_{lang}_dialogues_dropped"] += 1
                continue
            now = datetime.combine(latest[user], datetime.min.time(), UTC).replace(hour=23, minute=59)
            qid = f"{path.stem}#{i}"
            corpus.queries.append(Query(qid, user, q[0], gold, now, context=q[1]))
    return corpus


def with_context(corpus: Corpus, n: int) -> None:
    """Give each query the ``n`` queries before it as context (oldest first)."""
    qs = corpus.queries
    corpus.queries = [replace(q, context=tuple(p.text for p in qs[max(0, i - n) : i])) for i, q in enumerate(qs)]


# --------------------------------------------------------------------------
# Running


@dataclass
class Result:
    """Per-query rows of one set, plus the latencies of its retrieve calls."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    fallbacks: int = 0  # hybrid queries answered without the vector


@dataclass(frozen=True)
class HybridOptions:
    """How to score hybrid recall (``--embed-url``)."""

    url: str
    model: str = "local"
    fusion: str = "weighted"
    lexical_share: float = 0.75
    min_similarity: float = 0.2

    def report(self, fallbacks: int) -> dict[str, Any]:
        return {
            "model": self.model,
            "fusion": self.fusion,
            "lexical_share": self.lexical_share,
            "min_similarity": self.min_similarity,
            "fallbacks": fallbacks,
        }


async def run_corpus(corpus: Corpus, db_dir: Path, result: Result, hybrid: HybridOptions | None = None) -> None:
    clock = ManualClock()
    path = db_dir / f"{corpus.name}.db"
    for db in (path, buffer_path(path)):
        for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            stale.unlink(missing_ok=True)  # a kept --db-dir from an earlier run
    engine = await MemoryEngine.open(path, clock)
    try:
        await engine.add_many(corpus.memories)
        lexical = Retriever(engine, max_hits=TOP_K)
        retriever: Retriever | HybridRetriever = lexical
        http: HttpEmbedder | None = None
        try:
            if hybrid is not None:
                http = HttpEmbedder(base_url=hybrid.url, api_key="", model=hybrid.model,
                                    timeout=EMBED_TIMEOUT, batch_size=EMBED_BATCH)
                index = VectorIndex(engine.db, hybrid.model)
                cached = CachedEmbedder(http, engine.db, clock)
                await Vectorizer(index, cached, batch_size=EMBED_BATCH).drain()  # every memory, before any query
                retriever = HybridRetriever(
                    lexical, index, cached, timeout=QUERY_TIMEOUT, min_similarity=hybrid.min_similarity,
                    fusion=hybrid.fusion,  # type: ignore[arg-type]
                    lexical_share=hybrid.lexical_share,
                )
            for q in corpus.queries:
                clock.set(q.now)
                t0 = time.perf_counter()
                hits = await retriever.retrieve(q.user, q.text, context=q.context, limit=TOP_K)
                result.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
                ranked = [frozenset(h.provenance.refs) for h in hits]
                row: dict[str, Any] = score_query(ranked, q.gold)
                row.update(category=q.category, prefilter=should_retrieve(q.text), qid=q.qid)
                result.rows.append(row)
        finally:
            if isinstance(retriever, HybridRetriever):
                result.fallbacks += retriever.fallbacks
                await retriever.aclose()
            if http is not None:
                await http.aclose()
    finally:
        await engine.close()


def summarise(result: Result, *, locomo: bool) -> dict[str, Any]:
    rows = result.rows
    out: dict[str, Any] = {}
    if locomo:
        out["headline"] = aggregate([r for r in rows if r["category"] in HEADLINE_CATEGORIES])
        cats = sorted({r["category"] for r in rows}, key=lambda c: (len(c), c))
        out["by_category"] = {c: aggregate([r for r in rows if r["category"] == c]) for c in cats}
    else:
        out["headline"] = aggregate(rows)
    out["prefilter_pass"] = round(sum(r["prefilter"] for r in rows) / len(rows), 4) if rows else None
    return out


async def run_benchmark(
    data_dir: Path,
    *,
    only: Iterable[str] = SETS,
    limit_conversations: int | None = None,
    db_dir: Path | None = None,
    locomo_context: int = 0,
    source_text: bool = True,
    embed_url: str | None = None,
    embed_model: str = "local",
    fusion: str = "weighted",
    lexical_share: float = 0.75,
    min_similarity: float = 0.2,
) -> dict[str, Any]:
    """Score every set; ``embed_url`` (off by default) scores hybrid recall
    with the embeddings endpoint there instead of lexical recall alone."""
    hybrid = (
        HybridOptions(embed_url, embed_model, fusion, lexical_share, min_similarity) if embed_url else None
    )
    fallbacks = 0
    only = set(only)
    report: dict[str, Any] = {}
    notes: list[str] = []
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench_recall_") as tmp:
        where = db_dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        if only & {"locomo_turns", "locomo_observations"}:
            convs = load_locomo(data_dir)[:limit_conversations]
            if not convs:
                notes.append(f"no LoCoMo data under {data_dir / 'locomo'}: skipped")
            else:
                fixes: Counter[str] = Counter()
                res = {"locomo_turns": Result(), "locomo_observations": Result()}
                for conv in convs:
                    turns, obs = locomo_corpora(conv, fixes, source_text=source_text)
                    if locomo_context:
                        with_context(turns, locomo_context)
                        with_context(obs, locomo_context)
                    for corpus, key in ((turns, "locomo_turns"), (obs, "locomo_observations")):
                        if key in only:
                            await run_corpus(corpus, where, res[key], hybrid)
                for key, r in res.items():
                    if key in only:
                        report[key] = summarise(r, locomo=True) | {"evidence_fixes": dict(sorted(fixes.items()))}
                        latencies += r.latencies_ms
                        fallbacks += r.fallbacks
        for lang in ("zh", "en"):
            key = f"madial_{lang}"
            if key not in only:
                continue
            mfixes: Counter[str] = Counter()
            madial = madial_corpus(data_dir, lang, mfixes)
            if madial is None:
                notes.append(f"no MADial {lang} data under {data_dir / 'madial'}: skipped")
                continue
            r = Result()
            await run_corpus(madial, where, r, hybrid)
            report[key] = summarise(r, locomo=False) | ({"data_fixes": dict(mfixes)} if mfixes else {})
            latencies += r.latencies_ms
            fallbacks += r.fallbacks
    report["latency_ms"] = (
        {"p50": round(percentile(latencies, 50), 3), "p95": round(percentile(latencies, 95), 3)}
        if latencies
        else {"p50": None, "p95": None}
    )
    if hybrid is not None:
        report["hybrid"] = hybrid.report(fallbacks)
        if fallbacks:
            notes.append(
                f"WARNING: {fallbacks} hybrid queries fell back to lexical recall (the query vector was late or"
                " failed): these figures are not a clean hybrid measurement"
            )
    if notes:
        report["_notes"] = notes
    return report


# --------------------------------------------------------------------------
# Output


def _fmt(v: Any) -> str:
    return "   -  " if v is None else f"{v:6.3f}"


def format_table(report: dict[str, Any]) -> str:
    head = f"{'set':<34}{'n':>6} " + " ".join(f"{m:>7}" for m in METRICS) + f" {'pass':>6}"
    lines = [head, "-" * len(head)]

    def row(label: str, agg: dict[str, Any], passed: Any = None) -> None:
        cells = " ".join(f"{_fmt(agg[m]):>7}" for m in METRICS)
        lines.append(f"{label:<34}{agg['n']:>6} {cells} {_fmt(passed) if passed is not None else '':>6}")

    for key in SETS:
        block = report.get(key)
        if not block:
            continue
        if "by_category" in block:
            row(f"{key} (cat 1-4)", block["headline"], block.get("prefilter_pass"))
            for c, agg in block["by_category"].items():
                apart = "  (apart)" if c not in HEADLINE_CATEGORIES else ""
                row(f"  {c} {CATEGORY_NAMES.get(c, '?')}{apart}", agg)
        else:
            row(key, block["headline"], block.get("prefilter_pass"))
    lat = report["latency_ms"]
    hy = report.get("hybrid")
    if lat["p50"] is not None:
        lines.append(f"retrieve latency: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms")
    if hy:
        lines.append(
            f"hybrid recall on: model {hy['model']}, fusion {hy['fusion']}, lexical_share {hy['lexical_share']:g}, "
            f"min_similarity {hy['min_similarity']:g}, fallbacks {hy['fallbacks']}; "
            "latency includes the query's embedding call"
        )
    lines.append("pass = share of queries should_retrieve lets through (recall counts all queries)")
    for key in ("locomo_turns", "locomo_observations"):
        if key in report and report[key].get("evidence_fixes"):
            fx = ", ".join(f"{k}={v}" for k, v in report[key]["evidence_fixes"].items())
            lines.append(f"LoCoMo data fixes: {fx}")
            break
    for key in ("madial_zh", "madial_en"):
        if key in report and report[key].get("data_fixes"):
            lines.append(f"{key} data fixes: " + ", ".join(f"{k}={v}" for k, v in report[key]["data_fixes"].items()))
    lines.extend(report.get("_notes", []))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"benchmark folder (default {DEFAULT_DATA})")
    ap.add_argument("--json", type=Path, help="write the results as JSON to this file")
    ap.add_argument("--only", action="append", choices=SETS, help="run only this set (repeatable)")
    ap.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N LoCoMo conversations")
    ap.add_argument("--db-dir", type=Path, help="keep the SQLite files here instead of a temp dir (overwritten per run)")
    ap.add_argument("--locomo-context", type=int, default=0, metavar="N",
                    help="stress test: each LoCoMo question gets the N questions before it as context")
    ap.add_argument("--no-source-text", action="store_true",
                    help="index LoCoMo observations by their own words only, without the turns they cite")
    ap.add_argument("--embed-url", metavar="URL",
                    help="score hybrid recall with this OpenAI-compatible embeddings endpoint (base URL ending in /v1)")
    ap.add_argument("--embed-model", default="local", metavar="NAME", help="embedding model name (default: local)")
    ap.add_argument("--fusion", choices=("weighted", "rrf"), default="weighted",
                    help="hybrid fusion (default: weighted)")
    ap.add_argument("--lexical-share", type=float, default=0.75, metavar="F",
                    help="lexical share of the weighted fusion (default: 0.75)")
    ap.add_argument("--min-similarity", type=float, default=0.2, metavar="F",
                    help="cosine below which vector hits are dropped (default: 0.2)")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        ap.error(f"--data {args.data} is not a directory")
    if args.limit_conversations is not None and args.limit_conversations < 1:
        ap.error("--limit-conversations must be >= 1")
    if args.locomo_context < 0:
        ap.error("--locomo-context must be >= 0")
    if not 0.0 <= args.lexical_share <= 1.0:
        ap.error("--lexical-share must be in [0, 1]")
    report = asyncio.run(
        run_benchmark(args.data, only=args.only or SETS, limit_conversations=args.limit_conversations,
                      db_dir=args.db_dir, locomo_context=args.locomo_context,
                      source_text=not args.no_source_text, embed_url=args.embed_url,
                      embed_model=args.embed_model, fusion=args.fusion, lexical_share=args.lexical_share,
                      min_similarity=args.min_similarity)
    )
    print(format_table(report))
    if args.json:
        out = {k: v for k, v in report.items() if not k.startswith("_")}
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
