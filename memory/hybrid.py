"""Hybrid recall: the lexical ranking fused with a vector ranking (seeds 003/004).

The lexical retriever (:mod:`memory.retrieval`) finds what shares the
message's words; the vectors find what means the same in other words ("the
server stopped answering" for "the system crashed"), and, with a good model,
what is merely *associated* (a perfect maths test recalls the ice cream that
celebrated the last one). The two rankings are fused, by default, as a
weighted sum (:data:`LEXICAL_SHARE` to the words) of the lexical score over
its best and the cosine placed within the vector hits' spread
(:func:`spread_scaled`), or by reciprocal rank (RRF, ``fusion="rrf"``): the
sum of ``1 / (k + rank)`` over the rankings that hold a memory.

The read path never waits long on the embedding endpoint: the message's
vector is requested at once and the lexical search runs meanwhile; if the
vector is not there ``timeout`` seconds after the request, or the endpoint
fails, the reply gets the lexical hits alone (and a late vector still lands
in the in-process cache for the next message). Query vectors are never
written to the database, so the read path stays read-only.

Measured on the recall benchmark in docs/RETRIEVAL.md §10.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, tzinfo
from typing import Literal, Protocol

import numpy as np
import structlog

from .engine import MemoryEngine
from .errorlog import error_brief, error_fields
from .format import fit_budget
from .groupowner import readers
from .retrieval import MAX_QUERY_CHARS, OTHER_PROJECT_FACTOR, Retriever, named_projects
from .scope import Chat
from .types import GLOBAL_OWNER, Hit
from .vectors import VectorIndex

__all__ = ["Fusion", "HybridRetriever", "query_text", "spread_scaled"]

log = structlog.get_logger(component="recall")

Fusion = Literal["weighted", "rrf"]

LEXICAL_SHARE = 0.75
"""Share of the lexical side in the weighted fusion (a convex combination
of each side's score over its best, Bruch et al. 2023). RRF, which seed 004
names, treats both rankings as equals; with a small model it let the vector
side reorder what the tuned lexical side had right (LoCoMo turns R@5 0.665
-> 0.549), while 0.75 keeps it (0.657) and still lifts MADial en (0.577 ->
0.628, with the default minimum similarity 0.2): docs/RETRIEVAL.md §10."""

RRF_K = 60
"""The usual constant of reciprocal rank fusion (Cormack et al. 2009)."""

CONTEXT_TURNS = 4
"""Earlier user messages embedded with the message, as the lexical query
uses them: a short follow-up ("when are we going?") means little alone.
The message is also embedded alone, and the query vector is the sum of the
two: with the context only, unrelated earlier turns pulled recall to the old
topic (LoCoMo with two unrelated questions as context: turns R@5 0.592,
observations 0.574, below lexical's 0.644 / 0.604; with the sum 0.617 /
0.635; the message alone 0.646 / 0.651 but MADial zh 0.556, en 0.599:
docs/RETRIEVAL.md §10)."""


class _QueryEmbedder(Protocol):
    model: str

    async def embed(self, texts: Sequence[str], *, persist: bool = True,
                    waiting: bool | None = None) -> list[np.ndarray]: ...


def spread_scaled(cosines: Sequence[float]) -> list[float]:
    """Cosines mapped to 0..1 within their own spread, mean ± 3 standard
    deviations (Weaviate's distribution-based fusion), not over the best.

    Models differ in where unrelated texts land: all-MiniLM-L6-v2 near
    0.1, m3e-small near 0.6. Over the best alone, a model of the second
    kind gave every one of its 30 hits 0.7-1.0 of the vector share, a flat bonus that
    buried weaker word matches (LoCoMo turns R@5 0.665 lexical, 0.595
    hybrid with m3e-small; 0.630 this way). A hit that stands out of the
    crowd still gets the whole share; a single hit or a flat list counts
    as the best."""
    if not cosines:
        return []
    arr = np.asarray(cosines, dtype=np.float64)
    sd = float(arr.std())
    if sd <= 1e-9:
        return [1.0] * len(cosines)
    lo = float(arr.mean()) - 3.0 * sd
    return [min(1.0, max(0.0, (c - lo) / (6.0 * sd))) for c in cosines]


def query_text(query: str, context: Sequence[str] = ()) -> str:
    """What is embedded for a message: its user's recent lines, then itself."""
    lines = [c.strip() for c in context[-CONTEXT_TURNS:] if c.strip()] + [query.strip()]
    return "\n".join(lines)[-MAX_QUERY_CHARS:]


class HybridRetriever:
    """Same interface as :class:`memory.retrieval.Retriever` (``retrieve``,
    ``search_events``), so the gateway, the tools and the memory page use
    either."""

    def __init__(
        self,
        lexical: Retriever,
        vectors: VectorIndex,
        embedder: _QueryEmbedder,
        *,
        timeout: float = 0.5,
        min_similarity: float = 0.3,
        depth: int | None = None,
        fusion: Fusion = "weighted",
        lexical_share: float = LEXICAL_SHARE,
        rrf_k: int = RRF_K,
    ) -> None:
        if fusion not in ("weighted", "rrf"):
            raise ValueError(f"unknown fusion {fusion!r} (weighted or rrf)")
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        self.timeout = timeout
        self.min_similarity = min_similarity
        self.depth = depth or lexical.candidates
        self.fusion = fusion
        self.lexical_share = lexical_share
        self.rrf_k = rrf_k
        self.fallbacks = 0  # answers given without vectors (late or failed endpoint)
        # Fallbacks since the endpoint last gave a vector in time: the first
        # of an outage is logged, the rest at debug (a down endpoint on a
        # busy gateway is one line, not one per message), and the recovery.
        self._outage = 0
        # The last query vector that came too late: while it is still out,
        # the next messages neither ask nor wait (one request in flight to a
        # hung endpoint, not one per message for the provider's timeout).
        self._late: asyncio.Task[list[np.ndarray]] | None = None
        self._pending: set[asyncio.Task[list[np.ndarray]]] = set()
        # An erased memory's vector leaves the cached matrices at once.
        lexical.engine.on_erased(vectors.drop)

    # The attributes callers read off a Retriever.
    @property
    def engine(self) -> MemoryEngine:
        return self.lexical.engine

    @property
    def max_hits(self) -> int:
        return self.lexical.max_hits

    @property
    def candidates(self) -> int:
        return self.lexical.candidates

    async def search_events(
        self, user: str, query: str, *, limit: int = 8, now: datetime | None = None, tz: tzinfo | None = None,
        period_only: bool = False,
    ) -> list[Hit]:
        return await self.lexical.search_events(user, query, limit=limit, now=now, tz=tz, period_only=period_only)

    async def _query_vector(self, task: asyncio.Task[list[np.ndarray]], started: float) -> np.ndarray | None:
        left = self.timeout - (time.perf_counter() - started)
        if not task.done():
            await asyncio.wait({task}, timeout=max(0.0, left))
        if not task.done():
            self._late = task
            self._fell_back(f"no vector within {self.timeout:g} s")
            return None  # the task goes on and fills the embedder's cache
        if task.cancelled() or task.exception() is not None:
            exc = None if task.cancelled() else task.exception()
            self._fell_back(error_brief(exc) if exc is not None else "cancelled")
            return None
        if self._outage:
            log.info("query vectors work again", fallbacks=self._outage)
            self._outage = 0
        vectors = task.result()
        if len(vectors) == 1:
            return vectors[0]
        # The conversation's vector and the message's own, equally: context
        # carries a short follow-up, the message carries a change of topic.
        both = vectors[0] + vectors[1]
        norm = float(np.linalg.norm(both))
        return both / norm if norm > 0 else vectors[1]

    def _fell_back(self, error: str) -> None:
        self.fallbacks += 1
        self._outage += 1
        say = log.warning if self._outage == 1 else log.debug
        say("query vectors unavailable; lexical recall only until they work again", error=error)

    def _start(self, texts: list[str]) -> asyncio.Task[list[np.ndarray]]:
        task = asyncio.create_task(self.embedder.embed(texts, persist=False), name="query-vector")
        self._pending.add(task)

        def done(t: asyncio.Task[list[np.ndarray]]) -> None:
            self._pending.discard(t)
            if not t.cancelled():
                t.exception()  # retrieved here, so a late failure is not "never retrieved"

        task.add_done_callback(done)
        return task

    async def prepare(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` in one request ahead of retrieving each of them
        (the write path's candidate search asks for up to 20 at a time); a
        failure is left to each retrieve's own fallback. No user waits for
        these (a background write): the vectorizer's backfill keeps its
        batches."""
        wanted = list(dict.fromkeys(t for t in (query_text(x) for x in texts) if t))
        if not wanted:
            return
        try:
            await self.embedder.embed(wanted, persist=False, waiting=False)
        except Exception as exc:  # the endpoint's trouble: recall falls back per text
            log.info("query vectors not prepared", error=error_brief(exc), texts=len(wanted))

    async def aclose(self) -> None:
        """Cancel query vectors still in flight (shutdown)."""
        for t in list(self._pending):
            t.cancel()
        for t in list(self._pending):
            with contextlib.suppress(BaseException):
                await t

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
        """As :meth:`Retriever.retrieve`; ``exclude`` leaves those ids out of
        both rankings, ``notes`` adds the group's notes to both."""
        text = query_text(query, context)
        if not text:
            return []
        started = time.perf_counter()
        message = query.strip()[-MAX_QUERY_CHARS:]
        hung = self._late is not None and not self._late.done()
        task = None if hung else self._start([text, message] if message and message != text else [text])
        lexical = await self.lexical.retrieve(
            user, query, context=context, private=private, now=now, limit=self.depth, projects=projects, tz=tz,
            exclude=exclude, chat=chat, notes=notes,
        )
        vec: np.ndarray | None = None
        if task is not None:
            vec = await self._query_vector(task, started)
        else:
            self._fell_back("the endpoint has not answered an earlier query vector yet")
        dense: list[tuple[int, float]] = []
        if vec is not None:
            owners = readers(user, private=private, chat=chat, notes=notes)
            try:
                dense = await self.vectors.search(
                    owners, vec, self.depth, private=private, chat=chat, min_similarity=self.min_similarity
                )
            except Exception as exc:  # the words alone still make a good answer
                self.fallbacks += 1
                log.warning("vector search failed; lexical recall only", **error_fields(exc))  # not its text: SQLite's may quote
            dense = [(i, c) for i, c in dense if i not in exclude]
            if dense:
                dense = await self._favour_named_project(user, query, projects, dense)
        lx = self.lexical
        hits = await self._fuse(lexical, dense, limit if limit is not None else 2 * lx.max_hits, tz)
        if limit is not None:
            return hits
        return fit_budget(hits, max_hits=lx.max_hits, max_chars=lx.max_chars, token_budget=lx.token_budget)

    async def _favour_named_project(
        self, user: str, query: str, projects: Iterable[str] | None, dense: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """As on the lexical side: when the message names a project, a
        memory of another project counts OTHER_PROJECT_FACTOR of itself."""
        named = await named_projects(self.engine, user, query, projects)
        if not named:
            return dense
        marks = ",".join("?" * len(dense))
        rows = await self.engine.db.reader.execute_fetchall(
            f"SELECT id, project FROM memories WHERE id IN ({marks})", [i for i, _ in dense]
        )
        other = {r[0] for r in rows if r[1] not in named and r[1] != GLOBAL_OWNER}
        scaled = [(i, c * OTHER_PROJECT_FACTOR if i in other else c) for i, c in dense]
        return sorted(scaled, key=lambda ic: -ic[1])

    async def _fuse(
        self, lexical: list[Hit], dense: list[tuple[int, float]], want: int, tz: tzinfo | None = None
    ) -> list[Hit]:
        if not dense:
            return lexical[:want]
        fused = self._rrf(lexical, dense) if self.fusion == "rrf" else self._weighted(lexical, dense)
        order = sorted(fused, key=lambda mid: (-fused[mid], -mid))
        by_id = {h.id: h for h in lexical}
        # Rows only for the vector-only memories that can still be shown.
        missing = [mid for mid in order[:want] if mid not in by_id]
        if missing:
            for mid, m in (await self.engine.get_many(missing)).items():
                by_id[mid] = m.to_hit(tz=tz)  # dated as the lexical hits are
        order = [mid for mid in order[:want] if mid in by_id]
        if not order:
            return []
        # Scores keep the lexical scale (the memory_search tool sorts facts
        # and events together): the best fused hit gets the best of the two
        # rankings' top scores, the rest in proportion to their fused score.
        top = max([h.score for h in lexical[:1]] + [s for _, s in dense[:1]])
        best = fused[order[0]] or 1.0
        return [replace(by_id[mid], score=top * fused[mid] / best) for mid in order]

    def _weighted(self, lexical: list[Hit], dense: list[tuple[int, float]]) -> dict[int, float]:
        # Each side scaled to 0..1 on its own (words over the best, cosines
        # within their spread), so the share means the same
        # whatever the model's cosine range and the query's BM25 range.
        a = self.lexical_share
        lmax = max((h.score for h in lexical), default=0.0) or 1.0
        fused = {h.id: a * h.score / lmax for h in lexical}
        for (mid, _), c in zip(dense, spread_scaled([c for _, c in dense]), strict=True):
            fused[mid] = fused.get(mid, 0.0) + (1.0 - a) * c
        return fused

    def _rrf(self, lexical: list[Hit], dense: list[tuple[int, float]]) -> dict[int, float]:
        fused: dict[int, float] = {}
        for rank, h in enumerate(lexical):
            fused[h.id] = fused.get(h.id, 0.0) + 1.0 / (self.rrf_k + rank + 1)
        for rank, (mid, _) in enumerate(dense):
            fused[mid] = fused.get(mid, 0.0) + 1.0 / (self.rrf_k + rank + 1)
        return fused
