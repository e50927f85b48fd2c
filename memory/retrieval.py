"""The read path: message -> ranked, cited memories. No LLM call.

Always uses the query (the seed's SQL ranked by importance and only looked at
FTS when fewer than five rows came back, so it ignored the question).

1. Query terms (:func:`memory.tokenize.query_terms`): stop words dropped,
   CJK unigrams weak, recent conversation turns (``context``) at
   :data:`CONTEXT_WEIGHT` of the message's own terms.
2. Candidates: the :attr:`Retriever.candidates` rows of the asking user and
   ``_global`` holding the most telling terms, pre-ranked from one FTS5
   MATCH per term (:mod:`memory.prerank`). Very common terms are left out
   of the MATCH (they would make it slow and add nothing), never out of
   the scoring.
3. Per-hit relevance, computed here rather than by FTS5's ``bm25()`` (FTS5
   clamps IDF to ~1e-6 once a term is in half the rows, so a user with one
   memory got no signal at all): a BM25 sum with our own IDF
   ``ln(1 + (N - df + .5) / (df + .5))`` (always > 0), divided by the IDF
   mass of the message's terms. 1.0 means "every term of the message, once,
   in a memory of average length"; the value depends on the hit and the
   query only, never on what else came back.
4. Score = relevance x (0.8 + 0.2 x importance x category decay) x project
   factor: decay and importance can only reorder hits whose relevance is
   within 25%, so an important but unrelated memory never outranks the one
   that answers the question.
5. Neighbours: a memory of a conversation (same owner, channel, chat and
   session in its provenance) gets :data:`NEIGHBOUR_WEIGHT` of the score of
   each memory written up to :data:`NEIGHBOUR_SPAN` before or after it in
   the same conversation, and one that follows a question turn
   :data:`REPLY_WEIGHT` more of the question's score; the neighbours of the
   best :data:`NEIGHBOUR_SEEDS` hits are fetched with a second statement.
6. Time references in the message ("last week", "in July 2023", 上个月;
   :mod:`memory.timeref`) act as one more query term, held by the memories
   written in that period (its document count = how many there are), so
   they join the candidates and score like a message word.
7. Mood: a negative feeling the message names ("I'm scared", 我很难过;
   :mod:`memory.mood`) is one more query term, held by the memories whose
   text names a feeling of the same class (indexed with them), weight
   :data:`MOOD_WEIGHT`, not counted where the memory holds the message's
   own word of that class.

Scope: the asking user's active rows plus ``_global``; in a group chat
(``private=False``) only what the user said in that group (``chat``) and
the shared rows, never a credential (memory/scope.py); a member's fact
shared there from another chat is matched on its own words, not the ones
it was drawn from (:class:`_IndexedHere`).
See docs/RETRIEVAL.md for the measurements behind the constants.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, tzinfo
from functools import lru_cache

import sqlite3

from .clock import format_ts, local_day, parse_ts
from .cues import CUE_MARK
from .decay import decay_factor
from .dormant import DORMANT_FACTOR, FADING, live_projects
from .engine import INDEX, MemoryEngine, memory_index_text, owner_key, row_cues
from .format import fit_budget
from .groupowner import readers
from .lru import LRU
from . import prerank
from .projects import linked_projects
from .saidthen import replaced_then
from .mood import LEXICON, MOOD_TERMS, NEGATIVE, is_mood_term, mood_class, mood_term, moods
from .timeref import Period, periods
from .tokenize import normalize, query_terms, quote
from .scope import Chat, shown_in
from .sharedreads import current as shared
from .types import GLOBAL_OWNER, Hit, Provenance
from .zonehistory import current, lived_periods

__all__ = ["CONTEXT_WEIGHT", "QueryTerm", "Retriever", "build_match", "build_query"]

CONTEXT_WEIGHT = 0.4
"""A term that only occurs in recent turns counts this much of a message term."""

MAX_QUERY_CHARS = 2000  # a pasted 1 MB message is not a 1 MB query
MAX_CONTEXT_TURNS = 4
MAX_CONTEXT_CHARS = 600
CONTEXT_TURNS_KEPT = 16
"""Recent turns whose query terms are kept between messages: a turn is
context for the next MAX_CONTEXT_TURNS messages of its chat: building the
query of a message with two turns took 0.18 ms, 0.11 with them kept
(docs/BENCHMARKS.md, session 32).
At most 600 characters each: ~2.5 MB if all were 600 CJK characters."""
MAX_TERMS = 128  # terms scored (a cap for huge messages: a long conversation's terms all count)
MAX_MATCH_TERMS = 12  # terms sent to the FTS5 MATCH
MATCH_DF_BUDGET = 2000  # summed document counts of the MATCH terms (bounds its cost)
MATCH_DF_SHARE = 0.1
"""Below 20,000 rows the budget is this share of the collection (at least
MATCH_DF_MIN): at 10k, 2,000 postings were a fifth of the rows and cost
~0.2 ms a query, for the same top hit on all 600 benchmark queries."""
MATCH_DF_MIN = 1000
WHOLE_RANKING = 200
"""Up to this many postings, the owner of every ranked row is checked
(see Retriever._in_scope)."""
TOP_MARGIN = 2.5
"""Ranked rows whose owner is checked, as a multiple of the rows expected to
hold the wanted candidates at the user's share (see Retriever._in_scope)."""
SCOPED_TERMS_SHARE = 0.2
"""Below this share of the collection in the asking user's scope, each
term's MATCH is scoped to the owner (see _candidates)."""
DF_CACHE_MIN_ROWS = 5000  # below this, counting is cheaper than being stale
TERM_CACHE_MAX = 20_000
"""Terms each document-count cache holds before it starts over: a chat's
vocabulary fits, and a gateway left running for weeks between index writes
keeps at most ~2-3 MB per cache rather than the ~16 MB that 100,000 took."""
PREFETCH_TERMS = 500  # terms one prefetch asks about at most (SQLite allows 32,766 variables)
OWN_TERMS_KEPT = 4096
"""Facts whose own terms (read in a group they were not said in) are kept
between queries; tokenizing them again cost ~15 % of a group's query."""
PRIOR_ROWS = 200
MIN_RELEVANCE = 0.0  # a floor cost recall on long queries (docs/RETRIEVAL.md §4)
OTHER_PROJECT_FACTOR = 0.8
REPLY_WEIGHT = 0.5
"""Share of a question turn's score passed on to the next memory of the same
conversation (its answer), on top of NEIGHBOUR_WEIGHT; docs/RETRIEVAL.md §6."""
NEIGHBOUR_WEIGHT = 0.2
"""Share of a memory's score passed on to each memory of the same
conversation written up to NEIGHBOUR_SPAN before or after it: a short turn
borrows a little of the match of the turns around it (docs/RETRIEVAL.md §6)."""
NEIGHBOUR_SPAN = 2
NEIGHBOUR_SEEDS = 10  # best hits whose neighbours are fetched
WHEN_TERM = "\x00when"  # never an index term: normalize() drops NUL
WHEN_WEIGHT = 1.0
"""Weight of a time reference in the message ("last week", "in July 2023",
上个月), matched by the memory's date; it counts like one message word."""
LOOSE_WHEN_WEIGHT = 0.5
"""Weight of a loose time word (最近, 前阵子, "recently", "lately"; memory/timeref.py)
as a term of events: said of anything ("最近怎么样", how have you been), it
is half a word, and never a term of facts."""
DATED_EVENTS_MAX = 62
"""Events of a time reference's period read besides those its words find:
a month of days in two chats ("上个月我们聊了什么"); the newest first."""
MOOD_WEIGHT = 1.0
"""Weight of each negative mood class the message names ("I'm scared",
我很害怕; :mod:`memory.mood`): one query term held by the memories of that
class, so a memory that shares only the feeling is a candidate
(mood-congruent recall). It counts like one message word, adds without
normalising (like a context term), and not in a memory that holds the
message's own word of that class (no double count). docs/RETRIEVAL.md §9,
fifth session."""

CUE_WEIGHT = 0.3
"""Weight of a fact's cues (its project and topic names, the search terms
its extraction gave it; memory/cues.py) against its own words: a cue finds
a fact whose words lack the word asked, and counts only where they do lack
it, so it helps but never outranks a fact that says the word (a cue term's
most, 0.3 x 2.2 / 1.3 ~ 0.5 of a word once, in a fact of no length; the word
said, in one 3.7 times the mean length). docs/RETRIEVAL.md §6c."""

_K1 = 1.2
_B = 0.75
_MOOD_MARK = mood_term("")  # the first character of every mood term


@dataclass(frozen=True)
class QueryTerm:
    term: str
    weight: float
    from_query: bool  # False: only in context turns


def build_query(query: str, context: Sequence[str] = ()) -> list[QueryTerm]:
    """Weighted terms of the message, then of the most recent turns."""
    terms: dict[str, QueryTerm] = {}
    for t, w in query_terms(query[:MAX_QUERY_CHARS]):
        terms[t] = QueryTerm(t, w, True)
    for turn in list(context)[-MAX_CONTEXT_TURNS:][::-1]:  # newest first
        for t, w in _turn_terms(turn[:MAX_CONTEXT_CHARS]):
            if t not in terms:
                terms[t] = QueryTerm(t, w * CONTEXT_WEIGHT, False)
    ordered = sorted(terms.values(), key=lambda q: (not q.from_query, -q.weight))
    return ordered[:MAX_TERMS]


def _with_moods(query: str, q: list[QueryTerm]) -> list[QueryTerm]:
    """``q`` and the negative moods the message names, or [] when ``q`` is."""
    if q and MOOD_WEIGHT > 0:
        feel = moods(query[:MAX_QUERY_CHARS]) & NEGATIVE  # the message only: an old turn's mood is an old topic's
        q += [QueryTerm(mood_term(c), MOOD_WEIGHT, False) for c in sorted(feel)]
    return q


@lru_cache(maxsize=CONTEXT_TURNS_KEPT)
def _turn_terms(turn: str) -> tuple[tuple[str, float], ...]:
    """:func:`query_terms` of a recent turn, read once while it is recent."""
    return tuple(query_terms(turn))


@lru_cache(maxsize=OWN_TERMS_KEPT)
def _accessed(stamp: str) -> datetime:
    """:func:`parse_ts` of a memory's ``last_accessed``, kept: the same
    rows are weighed again by the next messages and a flush's lines, and
    parsing was a fifth of weighing one."""
    return parse_ts(stamp)


def build_match(owners: Sequence[str], terms: Iterable[str]) -> str:
    """An FTS5 query scoped to ``owners``; every user word is a quoted string."""
    who = " OR ".join(quote(owner_key(o)) for o in owners)
    what = " OR ".join(quote(t) for t in terms)
    return f"owner : ({who}) AND text : ({what})"


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """SQLite varint (FTS5 uses the same encoding)."""
    v = 0
    for i in range(8):
        b = buf[pos + i]
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            return v, pos + i + 1
    return (v << 8) | buf[pos + 8], pos + 9


@dataclass(frozen=True)
class _Stats:
    rows: int
    avg_len: float
    dated: int = 0  # the user's memories written in the message's time references


@dataclass
class _Snapshot:
    """What was read of an index while its stamp was ``stamp``."""

    stamp: tuple[int, int]
    stats: _Stats | None = None
    df: dict[str, int] = field(default_factory=dict)  # 0: in no row


@dataclass(frozen=True)
class _Tables:
    fts: str
    vocab: str
    owned: str  # the rows' table, with an ``owner`` column


_MEMORIES = _Tables("memories_fts", "memories_vocab", "memories")
# A memory's row, plus the conversation it was taken from: its provenance's
# channel, chat and session as one JSON array text, NULL when it has neither a
# chat nor a session (or the provenance is not JSON). Read by SQLite's JSON
# functions: json.loads in Python cost ~5 us a row, the rows of a query
# being compared to their neighbours.
# Named columns, not x.*: source_text is scored through the FTS row (_terms)
# and never shown, so reading it again per candidate is waste.
_MEMORY_COLUMNS = """x.id, x.owner, x.status, x.category, x.content, x.importance, x.project, x.topic,
    x.source, x.provenance, x.created_at, x.last_accessed, CASE WHEN json_valid(x.provenance)
    AND coalesce(json_extract(x.provenance, '$.chat_id'), json_extract(x.provenance, '$.session')) IS NOT NULL
    THEN json_extract(x.provenance, '$.channel', '$.chat_id', '$.session') END AS _conv"""
_EVENTS = _Tables("events_fts", "events_vocab", "daily_events")


@dataclass(frozen=True)
class _Ranking:
    """A retrieval's scored rows, best first, before they become hits."""

    scored: list[tuple[float, sqlite3.Row]]
    as_context: set[int]  # rows in only for the score their neighbours passed on
    then: dict[int, tuple[str, str]]  # heir id -> (day, words) of the fact said in the period
    tz: tzinfo | None  # the user's calendar the hits are dated on


class _Relevance:
    """BM25 sum over the query's terms found in a memory, divided by the IDF
    mass of the message's own terms (context terms add, never normalise,
    unless there is nothing else). Built once per query: the mass and each
    term's weight x IDF are the same for every memory."""

    __slots__ = ("weights", "when", "mass", "avg_len", "syn")

    def __init__(self, q: Sequence[QueryTerm], idf: dict[str, float], avg_len: float) -> None:
        self.weights = {x.term: x.weight * idf[x.term] for x in q if x.term != WHEN_TERM}
        # A mood term -> the message's own words of that class: a memory
        # holding one of them already scores the feeling through the word.
        self.syn = {
            x.term: frozenset(y.term for y in q if y.from_query and LEXICON.get(y.term) == mood_class(x.term))
            for x in q
            if is_mood_term(x.term)
        }
        self.when = sum(x.weight * idf[x.term] for x in q if x.term == WHEN_TERM)
        mass = sum(x.weight * idf[x.term] for x in q if x.from_query)
        if mass == 0.0:  # only context terms: normalise by them instead
            mass = sum(x.weight * idf.get(x.term, 0.0) for x in q) or 1.0
        self.mass = mass
        self.avg_len = avg_len

    def __call__(self, doc: str, dated: bool = False) -> float:
        # Cues (memory/cues.py) after their mark: out of the length, as moods.
        cues = ""
        at = doc.find(CUE_MARK)
        if at >= 0:
            doc, cues = doc[:at].rstrip(" "), doc[at + len(CUE_MARK) :]
        # A fact indexed with its source words has ~180 terms and holds a
        # few of the query's: counting only those (one C-level filter) cost
        # ~20 % less than counting every term (docs/BENCHMARKS.md, session 32).
        toks = doc.split(" ")
        n = len(toks)
        if _MOOD_MARK in doc:  # indexed with the text, not text: out of its length
            for m in MOOD_TERMS:
                n -= toks.count(m)
        w = self.weights
        held = list(filter(w.__contains__, toks))
        norm = _K1 * (1.0 - _B + _B * max(n, 1) / self.avg_len)
        got = 0.0
        if held:
            syn = self.syn
            # The few query terms the memory holds, in first-seen order (as
            # Counter's, so the sum adds in the same order): a Counter cost
            # more to build than counting a handful of terms.
            for t in dict.fromkeys(held) if len(held) > 1 else held:
                if t in syn and not syn[t].isdisjoint(toks):
                    continue
                f = held.count(t)
                got += w[t] * f * (_K1 + 1.0) / (f + norm)
        if cues:
            ctf = Counter(cues.split())
            said = set(held)  # a word its own text says counts there, once
            # In the order the terms were written, not a set's: a set's
            # follows the process's string hashing, and the sum with it
            # (same query, same memory, a last bit apart between runs).
            for t, f in ctf.items():
                if t in w and t not in said:
                    got += CUE_WEIGHT * w[t] * f * (_K1 + 1.0) / (f + norm)
        if dated:
            got += self.when * (_K1 + 1.0) / (1.0 + norm)
        return got / self.mass


class _Postings:
    """The candidates' posting lists, one statement returning each as one
    text of comma-separated row ids (memory/prerank.py sums and ranks them):
    one list per MATCH term, and the rows written in the message's time
    references (already the owners' only)."""

    def __init__(self, fts: str) -> None:
        self._fts = fts
        self._terms: list[tuple[float, str]] = []  # (weight, MATCH)
        self._dated: tuple[float, Sequence[str], Sequence[Period]] | None = None
        self.checked = False  # the ranked rows' owners must be checked (other users' rows are in the lists)
        self.size = 0  # postings of the terms (their document counts, summed)

    @property
    def empty(self) -> bool:
        return not self._terms and self._dated is None

    def add_term(self, weight: float, match: str, df: int) -> None:
        self._terms.append((weight, match))
        self.size += df

    def add_dated(self, weight: float, owners: Sequence[str], when: Sequence[Period], rows: int) -> None:
        self._dated = (weight, owners, when)
        self.size += rows

    def sql(self) -> str:
        # Each list's index first: the rows of a UNION ALL are summed in
        # this order whatever order SQLite returns them in.
        fts = self._fts
        arms = [f"SELECT {i}, group_concat(rowid) FROM {fts} WHERE {fts} MATCH ?" for i in range(len(self._terms))]
        if self._dated is not None:
            _, owners, when = self._dated
            arms.append(f"SELECT {len(arms)}, group_concat(DISTINCT id) FROM ({_dated_sql(owners, when)})")
        return " UNION ALL ".join(arms)

    def args(self) -> list[object]:
        out: list[object] = [match for _, match in self._terms]
        if self._dated is not None:
            _, owners, when = self._dated
            out += _dated_args(owners, when)
        return out

    def ranked(self, rows: Iterable[sqlite3.Row]) -> list[int]:
        """Every row of the lists :meth:`sql` returned, best first."""
        weights = [w for w, _ in self._terms]
        if self._dated is not None:
            weights.append(self._dated[0])
        ids: dict[int, str | None] = {r[0]: r[1] for r in rows}
        return prerank.ranked((w, ids.get(i)) for i, w in enumerate(weights))


class Retriever:
    def __init__(
        self,
        engine: MemoryEngine,
        *,
        max_hits: int = 5,
        token_budget: int = 2048,
        max_chars: int = 300,
        candidates: int = 30,
    ) -> None:
        self.engine = engine
        self.max_hits = max_hits
        self.token_budget = token_budget
        self.max_chars = max_chars
        self.candidates = candidates
        # vocab table -> term -> (document count, collection rows then)
        self._df_cache: dict[str, dict[str, tuple[int, int]]] = {}
        self._snapshots: dict[str, _Snapshot] = {}  # vocab table -> since the index last changed
        self._own_terms: LRU[str, str] = LRU(OWN_TERMS_KEPT)  # a shared fact's words -> its terms (_IndexedHere)
        # owners -> (INDEX stamp, day, their live projects): memory/dormant.py
        self._live: LRU[tuple[str, ...], tuple[tuple[int, int], str, frozenset[str]]] = LRU(OWN_TERMS_KEPT)

    # -- collection statistics ---------------------------------------------

    async def _fetch(self, sql: str, params: Sequence[object]) -> list[sqlite3.Row]:
        # One thread hop (execute + fetch + close would be three): the hops,
        # not SQLite, dominate a small collection's latency.
        if self.engine.db.closed:
            raise RuntimeError("database is closed")
        return list(await self.engine.db.reader.execute_fetchall(sql, params))

    async def _term_stats(
        self, t: _Tables, terms: Sequence[str], owners: Sequence[str] = (), when: Sequence[Period] = ()
    ) -> tuple[_Stats, dict[str, int]]:
        """Collection size, mean indexed length and document counts of ``terms``.

        Size and length come from FTS5's "averages" record (id 1 of the
        ``_data`` table: row count, then token totals per column; documented
        file format, O(1) to read); document counts from the fts5vocab table,
        which walks a term's whole doclist. With ``when``, also how many of
        ``owners``' memories were written in those periods (capped just above
        :data:`MATCH_DF_BUDGET`).

        Two caches: what was read since the indexes last changed (the
        engine's ``INDEX`` stamp: exact, terms in no row included), so a
        message whose words were all seen before costs no statement at all;
        and, in a large collection, document counts until the collection has
        grown or shrunk by 2% (a busy write path changes the stamp often).
        """
        stamp = await self.engine.db.stamp(INDEX)
        snap = self._snapshots.get(t.vocab)
        if snap is None or snap.stamp != stamp or len(snap.df) > TERM_CACHE_MAX:
            snap = self._snapshots[t.vocab] = _Snapshot(stamp)
        ask = [x for x in terms if x not in snap.df]
        if ask or when or snap.stats is None:
            stats, df = await self._counted(t, ask, owners, when)
            snap.stats = _Stats(stats.rows, stats.avg_len)
            snap.df.update((x, df.get(x, 0)) for x in ask)
        else:
            stats = snap.stats
        return stats, {x: d for x in terms if (d := snap.df[x]) > 0}

    async def _counted(
        self, t: _Tables, terms: Sequence[str], owners: Sequence[str] = (), when: Sequence[Period] = ()
    ) -> tuple[_Stats, dict[str, int]]:
        cache = self._df_cache.setdefault(t.vocab, {})
        known = {x: cache[x] for x in terms if x in cache}
        ask = [x for x in terms if x not in known]
        stats, df = await self._lookup(t, ask, owners, when)
        stale = [x for x, (_, then) in known.items() if abs(stats.rows - then) > 0.02 * then]
        df.update((x, d) for x, (d, _) in known.items() if x not in stale)
        if stale:
            _, more = await self._lookup(t, stale)
            df.update(more)
            ask += stale
        if stats.rows >= DF_CACHE_MIN_ROWS:
            if len(cache) > TERM_CACHE_MAX:
                cache.clear()
            cache.update((x, (df[x], stats.rows)) for x in ask if x in df)  # never cache "absent"
        return stats, df

    async def _lookup(
        self, t: _Tables, terms: Sequence[str], owners: Sequence[str] = (), when: Sequence[Period] = ()
    ) -> tuple[_Stats, dict[str, int]]:
        marks = ",".join("?" * len(terms))
        vocab = f"SELECT term, doc, NULL FROM {t.vocab} WHERE term IN ({marks}) UNION ALL " if terms else ""
        args: list[object] = list(terms)
        dated = ""
        if when:  # WHEN_TERM is never an index term
            dated = f" UNION ALL SELECT ?, (SELECT count(DISTINCT id) FROM ({_dated_sql(owners, when)})), NULL"
            args += [WHEN_TERM, *_dated_args(owners, when)]
        rows = await self._fetch(f"{vocab}SELECT NULL, NULL, block FROM {t.fts}_data WHERE id = 1{dated}", args)
        df = {r[0]: r[1] for r in rows if r[0] is not None}
        d = df.pop(WHEN_TERM, 0)
        block = next((r[2] for r in rows if r[0] is None), None)
        if not block:
            return _Stats(0, 1.0, d), df
        buf = bytes(block)
        n, pos = _varint(buf, 0)
        _, pos = _varint(buf, pos)  # owner column
        text_tokens, _ = _varint(buf, pos)
        return _Stats(n, max(1.0, text_tokens / n) if n else 1.0, d), df

    # -- scoring -------------------------------------------------------------

    async def _candidates(
        self,
        t: _Tables,
        q: list[QueryTerm],
        owners: Sequence[str],
        select: str,
        join: str,
        where: str,
        when: Sequence[Period] = (),
    ) -> tuple[list[sqlite3.Row], dict[str, float], _Stats]:
        """Matching rows (with their indexed text), the IDF of every term and
        the collection statistics.

        IDF is ``ln(1 + (N - df + .5) / (df + .5))`` with ``N`` = rows +
        :data:`PRIOR_ROWS`: a few hundred imagined rows without the term, so
        that in a collection of one memory a word it shares with the query
        still counts (plain BM25 IDF goes to ~0 there). A term in no row keeps
        its (high) IDF: it is part of what was asked, and a memory that lacks
        it answers only part of the question.
        """
        if not q:
            return [], {}, _Stats(0, 1.0)
        keys = [owner_key(o) for o in owners]
        asked = {x.term for x in q}
        stats, df = await self._term_stats(
            t, [*(x.term for x in q if x.term != WHEN_TERM), *keys, *(m for m in MOOD_TERMS if m not in asked)], owners, when
        )
        if stats.rows:  # mood terms are not text: out of the mean length as out of each row's (_Relevance)
            moods_held = sum(df.get(m, 0) if m in asked else df.pop(m, 0) for m in MOOD_TERMS)
            stats = _Stats(stats.rows, max(1.0, stats.avg_len - moods_held / stats.rows), stats.dated)
        # The share of the collection in scope (the owner tokens' document
        # counts): one user of many, or a personal gateway's only user.
        in_scope = sum(df.pop(k, 0) for k in keys)
        share = in_scope / stats.rows if stats.rows else 1.0
        present = [x for x in q if df.get(x.term, 0) > 0]
        if (not present and not when) or stats.rows == 0:
            return [], {}, stats
        # Candidates: the user's rows holding the most telling terms,
        # pre-ranked by the IDF mass of the terms they hold: one unscoped
        # MATCH per term (which terms a row holds), each list returned as
        # one text and summed per row by memory/prerank.py (a row a posting
        # returned to Python cost ~1 us; a GROUP BY in SQL ~0.8 us; FTS5's
        # bm25() ranking ~3 us a matched row), then the best rows in scope
        # (_in_scope). A time reference adds the rows
        # written in the period as one more posting list (when there are at
        # most MATCH_DF_BUDGET of them). docs/RETRIEVAL.md §3.
        n = max(stats.rows, *df.values(), 0) + PRIOR_ROWS
        idf = {x.term: math.log(1.0 + (n - df.get(x.term, 0) + 0.5) / (df.get(x.term, 0) + 0.5)) for x in q}
        if when:
            d = stats.dated
            n = max(n, d + PRIOR_ROWS)
            idf[WHEN_TERM] = math.log(1.0 + (n - d + 0.5) / (d + 0.5))
        if in_scope <= self.candidates:
            # A user with a few memories: all of them are candidates anyway,
            # read by owner rather than matched term by term in an index
            # that holds everyone's (gateway bench, 1,000 users x 5).
            return await self._all_in_scope(t, owners, present, when, select, join, where), idf, stats
        weight = {x.term: x.weight * idf[x.term] for x in q}
        # One user among many: each term's MATCH is scoped to the owner, so
        # a word every user has returns this user's rows only (unscoped, it
        # returned every user's, up to the MATCH budget), and the budget is
        # spent on the user's expected share of each term's rows.
        scoped = share < SCOPED_TERMS_SHARE
        sizes = {x: max(1, round(d * share)) for x, d in df.items()} if scoped else df
        match = _match_terms(present, idf, sizes, _match_budget(round(stats.rows * share) if scoped else stats.rows))
        postings = _Postings(t.fts)
        if match:
            for m in match:
                postings.add_term(weight[m], build_match(owners, [m]) if scoped else f"text : {quote(m)}", sizes[m])
            postings.checked = not scoped and in_scope < stats.rows  # a personal gateway's rows are all in scope
        if when and 0 < stats.dated <= MATCH_DF_BUDGET:
            postings.add_dated(weight[WHEN_TERM], owners, when, stats.dated)
        if postings.empty:
            return [], idf, stats
        order = postings.ranked(await self._fetch(postings.sql(), postings.args()))
        if postings.checked:
            best = await self._in_scope(t, order, postings.size, owners, share)
        else:
            best = order[: self.candidates]
        if not best:
            return [], idf, stats
        rows = await self._rows(t, "x.id", best, select, join, where)
        if not postings.checked and not scoped and match and any(r["owner"] not in owners for r in rows):
            # Ranked unscoped on the word of a count that every row is the
            # owners' (a personal gateway), read before another user's rows
            # came (counts are cached within 2 % in a large index): the
            # owners' rows of the same ranking.
            best = await self._in_scope(t, order, postings.size, owners, share)
            rows = await self._rows(t, "x.id", best, select, join, where) if best else []
        # The owner is checked on each row, whatever the counts said: no
        # statistic may let another user's row in.
        return [r for r in rows if r["owner"] in owners], idf, stats

    async def _all_in_scope(
        self,
        t: _Tables,
        owners: Sequence[str],
        present: Sequence[QueryTerm],
        when: Sequence[Period],
        select: str,
        join: str,
        where: str,
    ) -> list[sqlite3.Row]:
        """Every indexed row of ``owners`` that holds a query term or was
        written in one of the message's time references."""
        rows = await self._rows(t, "x.owner", owners, select, join, where)
        terms = {x.term for x in present}
        return [r for r in rows if not terms.isdisjoint(r["_terms"].split(" ")) or (when and _within(r["created_at"], when))]

    async def _in_scope(
        self, t: _Tables, order: Sequence[int], postings: int, owners: Sequence[str], share: float
    ) -> list[int]:
        """The best :attr:`candidates` rows of ``owners`` in ``order`` (every
        row of the posting lists, best first): the owners of the first
        ``top`` rows checked by id (``top`` sized by the owners' share of the
        collection), then of the next ``top`` while too few were theirs (as
        when the other users all wrote last and win the ties).

        With up to :data:`WHOLE_RANKING` postings every ranked row is
        checked at once.

        Checking the owner of the top rows instead of scoping every posting,
        10k memories 83 % one user's: the candidates' statement 1.28 -> 0.91
        ms mean, p95 2.47 -> 1.89 ms (docs/BENCHMARKS.md, read path, third
        session); at 100k, mean 2.40 -> 1.80 ms, p95 4.21 -> 4.56 ms. Until
        the ranking was done in Python (memory/prerank.py), a top that held
        too few ran the whole ranking again with every posting scoped.
        """
        want = self.candidates
        top = len(order) if postings <= WHOLE_RANKING else math.ceil(want / max(share, 0.01) * TOP_MARGIN) + 16
        marks = ",".join("?" * len(owners))
        best: list[int] = []
        for at in range(0, len(order), top):
            part = order[at : at + top]
            # "+owner": by id, not by a range of the owner index (a user's
            # 10k rows, ~1.5 ms, where 100 ids cost ~0.1).
            held = await self._fetch(
                f"SELECT id FROM {t.owned} WHERE id IN ({','.join('?' * len(part))}) AND +owner IN ({marks})",
                [*part, *owners],
            )
            mine = {r[0] for r in held}
            best += [i for i in part if i in mine]
            if len(best) >= want:
                break
        return best[:want]

    async def _rows(
        self, t: _Tables, column: str, values: Sequence[object], select: str, join: str, where: str
    ) -> list[sqlite3.Row]:
        """Indexed rows (with their indexed text) whose ``column`` is one of
        ``values``; of memories, inside :func:`~memory.sharedreads.shared_reads`,
        each read once for the batch (in any order: callers rank by score and id)."""
        memo = shared()
        if memo is None or t is not _MEMORIES:
            return await self._read_rows(t, column, values, select, join, where)
        memo = memo.valid_at(await self.engine.db.stamp(INDEX))
        if column != "x.id":
            key = (select, join, where, column, tuple(values))
            if key not in memo.listed:
                memo.listed[key] = await self._read_rows(t, column, values, select, join, where)
            return memo.listed[key]
        known = memo.by_id.setdefault((select, join, where), {})
        ids = [v for v in dict.fromkeys(values) if isinstance(v, int)]
        if missing := [i for i in ids if i not in known]:
            read = await self._read_rows(t, column, missing, select, join, where)
            known.update((r["id"], r) for r in read)
            known.update((i, None) for i in missing if i not in known)
        return [r for i in ids if (r := known[i]) is not None]

    async def _read_rows(
        self, t: _Tables, column: str, values: Sequence[object], select: str, join: str, where: str
    ) -> list[sqlite3.Row]:
        return await self._fetch(
            f"""SELECT {select}, f.text AS _terms FROM {join} JOIN {t.fts} f ON f.rowid = x.id
                WHERE {column} IN ({",".join("?" * len(values))}) {where}""",
            list(values),
        )

    async def prefetch(self, user: str, queries: Sequence[str], *, private: bool = True,
                       chat: Chat | None = None, notes: bool = False) -> None:
        """Read the document counts of every term ``queries`` hold in one
        statement, so that their :meth:`retrieve` calls (same arguments,
        no context) find them cached (:meth:`_term_stats`, exact while the
        index stamp holds) instead of each reading its own."""
        terms: dict[str, None] = {}
        memo = shared()
        for query in queries:
            q = _with_moods(query, build_query(query))
            if memo is not None:  # retrieve() takes it from there rather than build it again
                memo.queries[query] = tuple(q)
            terms.update((x.term, None) for x in q if x.term != WHEN_TERM)
        if not terms:
            return
        terms.update((owner_key(o), None) for o in readers(user, private=private, chat=chat, notes=notes))
        terms.update((m, None) for m in MOOD_TERMS)
        await self._term_stats(_MEMORIES, list(terms)[:PREFETCH_TERMS])

    async def _neighbours(
        self, scored: list[tuple[float, sqlite3.Row]], owners: Sequence[str], where: str
    ) -> list[sqlite3.Row]:
        """Memories written just before or after the best hits that come from
        a conversation, not yet among the hits, in scope.

        Fetched by id and scoped here in Python: an owner filter in SQL made
        the planner walk all of the owner's rows (+1.5 ms at 10k, +20 ms at
        100k). A second statement rather than part of the candidates' one,
        so that hits from no conversation (notes, facts without a chat or
        session) fetch nothing.
        """
        best = heapq.nlargest(NEIGHBOUR_SEEDS, scored, key=lambda sr: (sr[0], sr[1]["id"]))
        have = {r["id"] for _, r in scored}
        span = range(-NEIGHBOUR_SPAN, NEIGHBOUR_SPAN + 1)
        ids = sorted({r["id"] + o for _, r in best if _conversation(r) is not None for o in span} - have)
        if not ids:
            return []
        rows = await self._rows(_MEMORIES, "x.id", ids, _MEMORY_COLUMNS, "memories x", where)
        return [r for r in rows if r["owner"] in owners and r["status"] == "active"]

    # -- public API ----------------------------------------------------------

    async def retrieve(
        self,
        user: str,
        query: str,
        *,
        context: Sequence[str] = (),
        private: bool = True,
        now: datetime | None = None,
        limit: int | None = None,
        projects: Iterable[str] | None = None,
        tz: tzinfo | None = None,
        exclude: Collection[int] = (),
        chat: Chat | None = None,
        notes: bool = False,
    ) -> list[Hit]:
        """Top memories (Tier 1 and 2) for ``query``, best first.

        ``private=False``: a group, ``chat``, which reads only what the user
        said there and the shared rows (memory/scope.py).
        ``notes``: there, the group's own notes too (memory/groupnotes.py).

        ``exclude``: memory ids the prompt already holds (the Core Memory
        entries it shows): never returned, and they pass no score to their
        neighbours, so the places go to the next best.

        ``tz``: the user's zone, for the days of "yesterday" or "上周" (UTC's
        when None).

        ``projects``: the user's known project names (default: looked up);
        when the message names one, that project's partition and
        ``_global`` are favoured over other projects. With ``limit=None``
        the result also fits the injection budget (seed 001).
        """
        got = await self._ranking(user, query, context=context, private=private, now=now, projects=projects, tz=tz,
                                  exclude=exclude, chat=chat, notes=notes)
        # Build Hits for the few that can be returned only.
        hits = [_memory_hit(sc, r, got.tz, neighbour=r["id"] in got.as_context, replaced=got.then.get(r["id"]))
                for sc, r in got.scored[: limit if limit is not None else self.max_hits]]
        if limit is not None:
            return hits
        return fit_budget(
            hits, max_hits=self.max_hits, max_chars=self.max_chars, token_budget=self.token_budget
        )

    async def ranked(
        self, user: str, query: str, *, limit: int, private: bool = True, chat: Chat | None = None
    ) -> list[tuple[int, float]]:
        """The ids and scores of ``retrieve(user, query, limit=limit, ...)``,
        best first, without the hits: all the write path's consolidation
        reads of them (memory/consolidate.py), and building a hit (its
        provenance parsed, its day in the user's zone) was a tenth of a
        flush's retrieval."""
        got = await self._ranking(user, query, private=private, chat=chat)
        return [(r["id"], sc) for sc, r in got.scored[:limit]]

    async def _ranking(
        self,
        user: str,
        query: str,
        *,
        context: Sequence[str] = (),
        private: bool = True,
        now: datetime | None = None,
        projects: Iterable[str] | None = None,
        tz: tzinfo | None = None,
        exclude: Collection[int] = (),
        chat: Chat | None = None,
        notes: bool = False,
    ) -> _Ranking:
        """Every scored memory, best first (see :meth:`retrieve`)."""
        memo = shared()
        built = memo.queries.get(query) if memo is not None and not context else None
        q = list(built) if built is not None else _with_moods(query, build_query(query, context))
        if not q:
            return _Ranking([], set(), {}, tz)
        now = now or self.engine.clock.now()
        # A fact is dated, and "yesterday" finds it, on the day it was where it was said (memory/zonehistory.py).
        tz = await self.engine.lived(user, tz)
        when = periods(normalize(query[:MAX_QUERY_CHARS]), now, current(tz)) if WHEN_WEIGHT > 0 else []
        when = lived_periods(when, tz)
        if when:
            q.append(QueryTerm(WHEN_TERM, WHEN_WEIGHT, True))
        named = await named_projects(self.engine, user, query, projects)
        # A renamed project's other names are searched too: its old facts
        # say "atlas", the message "orion" (memory/projects.py).
        have = {t.term for t in q}
        for name in sorted(named - _named_projects(query, named)):
            q += [QueryTerm(t, w, True) for t, w in query_terms(name) if t not in have]
        owners = readers(user, private=private, chat=chat, notes=notes)
        where = shown_in(private=private, chat=chat)
        rows, idf, stats = await self._candidates(
            _MEMORIES, q, owners, select=_MEMORY_COLUMNS, join="memories x", where=where, when=when
        )
        if not rows:
            return _Ranking([], set(), {}, tz)
        relevance = _Relevance(q, idf, stats.avg_len)
        terms = _IndexedHere(private, chat, self._own_terms)
        if not private:
            # A fact read in a group it was not said in (shared) matched
            # on its source words: not what it holds itself.
            asked = {x.term for x in q}
            rows = [r for r in rows if not asked.isdisjoint(terms(r).split(" "))
                    or (when and _within(r["created_at"], when))]

        def weigh(rel: float, r: sqlite3.Row) -> float:
            days = (now - _accessed(r["last_accessed"])).total_seconds() / 86400.0
            weight = r["importance"] * decay_factor(r["category"], days)
            sc: float = rel * (0.8 + 0.2 * weight)
            if named and r["project"] not in named and r["project"] != GLOBAL_OWNER:
                sc *= OTHER_PROJECT_FACTOR
            return sc

        def score(rs: Iterable[sqlite3.Row]) -> list[tuple[float, sqlite3.Row]]:
            out: list[tuple[float, sqlite3.Row]] = []
            for r in rs:
                if exclude and r["id"] in exclude:
                    continue
                dated = bool(when) and _within(r["created_at"], when)
                rel = relevance(terms(r), dated)
                if rel < MIN_RELEVANCE:
                    continue
                out.append((weigh(rel, r), r))
            return out

        scored = score(rows)
        as_context: set[int] = set()  # rows in only for the score their neighbours passed on
        if NEIGHBOUR_SPAN > 0 and (NEIGHBOUR_WEIGHT > 0 or REPLY_WEIGHT > 0):
            near = score(await self._neighbours(scored, owners, where))
            as_context = {r["id"] for sc, r in near if sc <= 0.0}
            scored = _credit_neighbours(scored, near)
        then: dict[int, tuple[str, str]] = {}  # heir id -> (day, words) of the fact said in the period
        if when and private:
            scored, then = await self._said_then(user, when, scored, relevance, weigh, exclude, tz)
        if any(r["category"] in FADING and r["project"] != GLOBAL_OWNER for _, r in scored):
            scored = await self._faded(scored, owners, named, now)
        scored.sort(key=lambda sr: (-sr[0], -sr[1]["id"]))
        return _Ranking(scored, as_context, then, tz)

    async def _faded(
        self, scored: list[tuple[float, sqlite3.Row]], owners: Sequence[str], named: frozenset[str], now: datetime
    ) -> list[tuple[float, sqlite3.Row]]:
        """The events of a dormant project the message does not name at
        :data:`~memory.dormant.DORMANT_FACTOR` of their score, the score
        their neighbours passed on included (memory/dormant.py)."""
        key, stamp, day = tuple(owners), await self.engine.db.stamp(INDEX), format_ts(now)[:10]
        cached = self._live.get(key)
        if cached is None or cached[:2] != (stamp, day):
            cached = (stamp, day, await live_projects(self.engine.db, owners, now))
            self._live[key] = cached
        live = cached[2] | named
        return [(sc * DORMANT_FACTOR if r["category"] in FADING and r["project"] != GLOBAL_OWNER
                 and r["project"] not in live else sc, r) for sc, r in scored]

    async def _said_then(
        self,
        user: str,
        when: Sequence[Period],
        scored: list[tuple[float, sqlite3.Row]],
        relevance: _Relevance,
        weigh: Callable[[float, sqlite3.Row], float],
        exclude: Collection[int],
        tz: tzinfo | None,
    ) -> tuple[list[tuple[float, sqlite3.Row]], dict[int, tuple[str, str]]]:
        """The facts said in the period and replaced since (memory/saidthen.py),
        each scored on its own words as it was indexed then (not the long row
        of the fact that replaced it, which holds its words and a later
        date): the fact that holds its place now takes that score if it is
        better than its own, and shows it under it, dated (format_hit's
        replaced line). It was true then: "what did we decide back in
        February?" is answered by it, and by what replaced it."""
        best: dict[int, tuple[float, sqlite3.Row]] = {}  # heir -> the best of its period's replaced facts
        for o in await replaced_then(self.engine.db, user, when):
            text = memory_index_text(o["content"], o["source_text"], "", row_cues(o))
            sc = weigh(relevance(text, True), o)
            if o["heir"] not in best or sc > best[o["heir"]][0]:
                best[o["heir"]] = (sc, o)
        if in_core := [h for h in best if h in exclude]:
            # The prompt's Core Memory shows the heir with the newest fact it
            # replaced under it: left out here when that is the period's,
            # else recalled with the period's (February's under June's, not
            # March's, which Core shows): the answer was nowhere.
            core = await self.engine.replaced_facts(user, in_core)
            for h in in_core:
                if core.get(h) == (best[h][1]["created_at"], best[h][1]["content"]):
                    del best[h]
        if not best:
            return scored, {}
        have = {r["id"]: k for k, (_, r) in enumerate(scored)}
        out = list(scored)
        missing = [h for h in best if h not in have]
        if missing:
            rows = await self._rows(_MEMORIES, "x.id", missing, _MEMORY_COLUMNS, "memories x", "")
            for r in rows:
                if r["owner"] == user and r["status"] == "active":
                    have[r["id"]] = len(out)
                    out.append((weigh(relevance(r["_terms"], False), r), r))
        then: dict[int, tuple[str, str]] = {}
        for heir, (sc, o) in best.items():
            if heir in have:
                k = have[heir]
                out[k] = (max(out[k][0], sc), out[k][1])
                then[heir] = (local_day(o["created_at"], tz), o["content"])
        return out, then

    async def search_events(
        self, user: str, query: str, *, limit: int = 5, now: datetime | None = None, tz: tzinfo | None = None,
        period_only: bool = False,
    ) -> list[Hit]:
        """Tier 3 events of ``user`` matching ``query``, best first, scored
        like memories (event-category decay by the event's date).

        A time reference in the query ("上周", "last Wednesday"; days of
        ``tz``, the user's zone, as the events' dates are) is one more term,
        held by the events of that period, and those events rank above the
        rest: "what did we talk about last week?" is answered by last week's
        summaries even when they share no word with it. ``period_only``:
        only the events of the query's periods (none without one)."""
        now = now or self.engine.clock.now()
        tz = current(tz)  # an event keeps the day it was said on: the query's days are today's calendar's
        text = normalize(query[:MAX_QUERY_CHARS])
        when = periods(text, now, tz, loose=True) if WHEN_WEIGHT > 0 else []
        if period_only and not when:
            return []
        # Only loose words (最近, "lately"): a gentler term, no rank above the rest.
        strict = bool(when) and bool(periods(text, now, tz))
        when_weight = WHEN_WEIGHT if strict else LOOSE_WHEN_WEIGHT
        days = _event_days(when, tz)
        q = build_query(query)
        if period_only:  # the period's rows are all the candidates: its words only score them
            rows = await self._events_on(user, days)
            stats, df = await self._term_stats(_EVENTS, [x.term for x in q]) if rows else (_Stats(0, 1.0), {})
            n = max(stats.rows, *df.values(), 0) + PRIOR_ROWS
            idf = {x.term: math.log(1.0 + (n - df.get(x.term, 0) + 0.5) / (df.get(x.term, 0) + 0.5)) for x in q}
        else:
            rows, idf, stats = await self._candidates(
                _EVENTS, q, [user], select="x.*", join="daily_events x", where=""
            )
            if days:
                have = {r["id"] for r in rows}
                rows += [r for r in await self._events_on(user, days) if r["id"] not in have]
        if not rows:
            return []
        if days:
            # The period as a term (as for memories): its document count is
            # how many of the user's events fall in it.
            dated = sum(1 for r in rows if _on_days(r["event_date"], days))
            n = max(stats.rows, len(rows)) + PRIOR_ROWS
            idf = {**{x.term: idf.get(x.term, math.log(1.0 + (n + 0.5) / 0.5)) for x in q},
                   WHEN_TERM: math.log(1.0 + (n - dated + 0.5) / (dated + 0.5))}
            q = [*q, QueryTerm(WHEN_TERM, when_weight, True)]
        relevance = _Relevance(q, idf, stats.avg_len)
        hits: list[Hit] = []
        for r in rows:
            rel = relevance(r["_terms"], _on_days(r["event_date"], days))
            if rel < MIN_RELEVANCE:
                continue
            days_ago = (now - parse_ts(r["event_date"] + "T00:00:00Z")).total_seconds() / 86400.0
            prov = Provenance.from_json(r["provenance"])
            if not prov.channel:
                prov = Provenance(
                    channel=r["channel"] if r["channel"] != "unknown" else "",
                    chat_id=r["chat_id"],
                    message_ids=prov.message_ids,
                    session=prov.session,
                    date_from=prov.date_from or r["event_date"],
                    date_to=prov.date_to or r["event_date"],
                    refs=prov.refs,
                )
            hits.append(
                Hit(
                    kind="event",
                    id=r["id"],
                    content=r["summary"],
                    score=rel * (0.8 + 0.2 * 0.5 * decay_factor("event", days_ago)),
                    date=r["event_date"],
                    category="event",
                    source="event",
                    provenance=prov,
                )
            )
        hits.sort(key=lambda h: (strict and not _on_days(h.date, days), -h.score, -h.id))
        return hits[:limit]

    async def _events_on(self, user: str, days: Sequence[tuple[str, str]]) -> list[sqlite3.Row]:
        """``user``'s events dated in ``days`` (newest first, capped): one
        range scan of ``(owner, event_date)`` each."""
        on = " OR ".join("(x.event_date >= ? AND x.event_date < ?)" for _ in days)
        return await self._fetch(
            f"""SELECT x.*, f.text AS _terms FROM daily_events x JOIN {_EVENTS.fts} f ON f.rowid = x.id
                WHERE x.owner = ? AND ({on}) ORDER BY x.event_date DESC, x.id DESC LIMIT ?""",
            [user, *(d for pair in days for d in pair), DATED_EVENTS_MAX],
        )


def _event_days(when: Sequence[Period], tz: tzinfo | None) -> list[tuple[str, str]]:
    """Each period as the half-open range of the user's calendar days it
    touches (``YYYY-MM-DD``, the dates events are written under)."""
    out = []
    for a, b in when:
        first, end = a.astimezone(tz or UTC), b.astimezone(tz or UTC)
        last = end.date() if end.time() == time(0) else end.date() + timedelta(days=1)  # 刚才: a part of a day
        out.append((first.date().isoformat(), last.isoformat()))
    return out


def _on_days(day: str, days: Sequence[tuple[str, str]]) -> bool:
    return any(a <= day < b for a, b in days)


class _IndexedHere:
    """The indexed terms a memory is scored by where it is read.

    Its FTS row holds the words it was drawn from and those of the facts it
    replaced (docs/RETRIEVAL.md §6a), said where it was said: a private
    message may hold what the fact leaves out ("I take sertraline and I'm
    moving to Berlin"). In a group other than its own chat (a fact the
    member shared, memory/sharing.py) it is matched on its own words only,
    so a group's "sertraline" does not bring up the move. ``_global`` rows
    are everyone's: their whole row counts.
    """

    __slots__ = ("private", "chat", "_own", "_cache")

    def __init__(self, private: bool, chat: Chat | None, cache: LRU[str, str]) -> None:
        self.private = private
        self.chat = list(chat) if chat is not None else None
        self._own: dict[int, str] = {}
        self._cache = cache  # content -> its terms, across queries (the Retriever's)

    def __call__(self, r: sqlite3.Row) -> str:
        if self.private or r["owner"] == GLOBAL_OWNER:
            return str(r["_terms"])
        own = self._own.get(r["id"])
        if own is None:
            # _conv: [channel, chat_id, session] (_MEMORY_COLUMNS), cheaper than the whole provenance.
            here = r["_conv"] is not None and self.chat is not None and json.loads(r["_conv"])[:2] == self.chat
            if here:
                own = str(r["_terms"])
            else:
                content = str(r["content"])
                own = self._cache.get(content)
                if own is None:
                    own = self._cache[content] = memory_index_text(content)
            self._own[r["id"]] = own
        return own


def _conversation(r: sqlite3.Row) -> tuple[str, str] | None:
    """(owner, [channel, chat, session]) of a memory taken from a
    conversation, else None (see :data:`_MEMORY_COLUMNS`)."""
    c = r["_conv"]
    return None if c is None else (r["owner"], c)


def _dated_sql(owners: Sequence[str], when: Sequence[Period]) -> str:
    """Ids of ``owners``' active memories written in each period (one range
    scan of ``(owner, status, created_at)`` each, capped), with repeats."""
    one = f"""SELECT id FROM (SELECT id FROM memories WHERE owner IN ({",".join("?" * len(owners))})
              AND status = 'active' AND created_at >= ? AND created_at < ? LIMIT ?)"""
    return " UNION ALL ".join([one] * len(when))


def _dated_args(owners: Sequence[str], when: Sequence[Period]) -> list[object]:
    args: list[object] = []
    for a, b in when:
        args += [*owners, format_ts(a), format_ts(b), MATCH_DF_BUDGET + 1]
    return args


def _within(created_at: str, when: Sequence[Period]) -> bool:
    return any(format_ts(a) <= created_at < format_ts(b) for a, b in when)


def _asks(text: str) -> bool:
    return "?" in text or "？" in text


def _credit_neighbours(
    scored: list[tuple[float, sqlite3.Row]], near: list[tuple[float, sqlite3.Row]]
) -> list[tuple[float, sqlite3.Row]]:
    """Each memory of a conversation gets :data:`NEIGHBOUR_WEIGHT` of the
    score of every memory of the same conversation written up to
    :data:`NEIGHBOUR_SPAN` before or after it, and :data:`REPLY_WEIGHT` more
    of the one just before it when that one asks a question.

    Turns are short: the answer to a question is often the next turn or the
    one after (the other speaker in between) and shares no word with the
    question ("What are their names?" / "Luna and Oliver!"). Scores passed on
    are the memories' own, never what they received. Rows in ``near`` were
    fetched only as neighbours and are kept only when they received some.
    """
    both = [*scored, *near]
    ids = [r["id"] for _, r in both]
    conv = {i: _conversation(r) for i, (_, r) in zip(ids, both)}
    if not near and all(c is None for c in conv.values()):
        return list(scored)  # notes and facts from no conversation: nothing to pass on
    own = {i: sc for i, (sc, _) in zip(ids, both)}
    asks = {i: _asks(r["content"]) for i, (_, r) in zip(ids, both) if i + 1 in own}
    offsets = [o for o in range(-NEIGHBOUR_SPAN, NEIGHBOUR_SPAN + 1) if o]
    kept = len(scored)  # rows after these were fetched as neighbours only
    out = []
    for k, (i, (sc, r)) in enumerate(zip(ids, both)):
        here = conv[i]
        bonus = 0.0
        if here is not None:
            for o in offsets:
                j = i + o
                if j in own and conv[j] == here:
                    bonus += (NEIGHBOUR_WEIGHT + (REPLY_WEIGHT if o == -1 and asks[j] else 0.0)) * own[j]
        if bonus > 0.0 or k < kept:
            out.append((sc + bonus, r))
    return out


def _memory_hit(
    score: float, r: sqlite3.Row, tz: tzinfo | None, *, neighbour: bool = False, replaced: tuple[str, str] | None = None
) -> Hit:
    # Dated on the user's calendar (``tz``), as their events are, not UTC's.
    return Hit(
        kind="memory",
        id=r["id"],
        content=r["content"],
        score=score,
        date=local_day(r["created_at"], tz),
        category=r["category"],
        project=r["project"],
        topic=r["topic"],
        source=r["source"],
        provenance=Provenance.from_json(r["provenance"]),
        neighbour=neighbour,
        replaced=replaced,
        owner=r["owner"],
    )


def _match_budget(rows: int) -> int:
    return min(MATCH_DF_BUDGET, max(MATCH_DF_MIN, int(rows * MATCH_DF_SHARE)))


def _match_terms(present: list[QueryTerm], idf: dict[str, float], df: dict[str, int], budget: int) -> list[str]:
    """The terms the FTS5 MATCH is run on: the most telling ones (weight x
    IDF) while their summed document counts stay within ``budget``
    (:func:`_match_budget`), and at least the best one.

    The cost of the MATCH and of ranking it grows with the rows it matches,
    so a very common term is left out of the MATCH when rarer ones exist;
    it still counts when the candidates are scored.
    """
    ranked = sorted(present, key=lambda x: (-x.weight * idf[x.term], x.term))
    out: list[str] = []
    total = 0
    for x in ranked:
        d = df[x.term]
        if out and total + d > budget:
            continue
        out.append(x.term)
        total += d
        if len(out) == MAX_MATCH_TERMS:
            break
    return out


async def named_projects(
    engine: MemoryEngine, user: str, query: str, projects: Iterable[str] | None = None
) -> frozenset[str]:
    """The projects the message names (``projects``, default the user's
    known ones), with every other name of theirs (memory/projects.py): a
    fact filed under a project's old name counts as the named project's."""
    if projects is None:  # one read of the aliases (known_projects would read them again)
        known, aliases = await engine.projects_and_aliases(user)
    else:
        known, aliases = frozenset(projects), await engine.project_aliases(user)
    named = _named_projects(query, known | frozenset(aliases) | frozenset(aliases.values()))
    return linked_projects(aliases, named) if named and aliases else named


def _named_projects(query: str, projects: Iterable[str]) -> frozenset[str]:
    """Known projects whose name occurs in the message (case-insensitive)."""
    low = normalize(query[:MAX_QUERY_CHARS])
    return frozenset(p for p in projects if len(p) >= 2 and normalize(p) in low)
