"""The read path: message -> ranked, cited memories. No LLM call.

Always uses the query (the seed's SQL ranked by importance and only looked at
FTS when fewer than five rows came back, so it ignored the question). Each
candidate's score combines

* text relevance: FTS5 BM25 mapped to [0, 1) per hit with ``r / (r + K)``,
  so a hit's score does not depend on what else came back;
* importance after category decay (seed 8.2), which only re-orders hits
  of similar relevance.

Candidates are the asking user's active rows plus ``_global``; in a group
chat (``private=False``) ``credential`` memories are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import structlog

from .clock import parse_ts
from .decay import decay_factor
from .engine import MemoryEngine, owner_key, row_to_memory
from .tokenize import query_terms, quote
from .types import GLOBAL_OWNER, Hit

__all__ = ["Retriever", "build_match"]

log = structlog.get_logger().bind(component="memory")

# Function words that carry no topic; dropped from queries only.
STOP_EN = frozenset(
    """a an the and or but if then so of to in on at by for with from as is am are was were be been being
    do does did done have has had i me my mine you your yours we our us he him his she her they them their it its
    this that these those what which who whom whose when where why how there here not no yes can could would
    should will shall may might must just also too very really about into over than again ever any some all
    tell know remember recall said say says please let lets me hey hi ok okay""".split()
)
STOP_ZH = frozenset(
    """的了 我的 你的 之前 以前 记得 还记 说过 什么 怎么 为什么 是什 么么 一下 一个 这个 那个 我们 你们 他们
    是不 不是 有没 没有 可以 告诉 吗 呢 吧 啊 的 了 是 我 你 他 她 它 在 有 和 就 也 都 说 过 么""".split()
)
_MAX_TERMS = 24
_K = 4.0  # BM25 value at which relevance reaches 0.5


def _terms(text: str) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for unit in query_terms(text):
        for t in unit:
            if t in seen or t in STOP_EN or t in STOP_ZH:
                continue
            if len(t) == 1 and t.isascii():
                continue
            seen.add(t)
            out.append(t)
    return out[:_MAX_TERMS]


def build_match(owners: Sequence[str], terms: Sequence[str]) -> str:
    """An FTS5 query scoped to ``owners``; every user word is a quoted string."""
    who = " OR ".join(quote(owner_key(o)) for o in owners)
    what = " OR ".join(quote(t) for t in terms)
    return f"owner : ({who}) AND text : ({what})"


class Retriever:
    def __init__(
        self,
        engine: MemoryEngine,
        *,
        max_hits: int = 5,
        token_budget: int = 2048,
        max_chars: int = 300,
        candidates: int = 50,
    ) -> None:
        self.engine = engine
        self.max_hits = max_hits
        self.token_budget = token_budget
        self.max_chars = max_chars
        self.candidates = candidates

    async def retrieve(
        self,
        user: str,
        query: str,
        *,
        context: Sequence[str] = (),
        private: bool = True,
        now: datetime | None = None,
        limit: int | None = None,
    ) -> list[Hit]:
        """Top memories (Tier 1 and 2) for ``query``, best first."""
        terms = _terms(query)
        if not terms:
            return []
        owners = [user] if user == GLOBAL_OWNER else [user, GLOBAL_OWNER]
        rows = await self.engine.db.fetchall(
            f"""SELECT m.*, -bm25(memories_fts, 0.0, 1.0) AS rel
                FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
                WHERE memories_fts MATCH ? {"" if private else "AND m.category != 'credential'"}
                ORDER BY bm25(memories_fts, 0.0, 1.0) LIMIT ?""",
            (build_match(owners, terms), self.candidates),
        )
        now = now or self.engine.clock.now()
        hits: list[Hit] = []
        for r in rows:
            m = row_to_memory(r)
            rel = max(0.0, r["rel"])
            rel = rel / (rel + _K)
            days = (now - parse_ts(m.last_accessed)).total_seconds() / 86400.0
            weight = m.importance * decay_factor(m.category.value, days)
            score = rel * (0.75 + 0.25 * weight)
            hits.append(
                Hit(
                    kind="memory",
                    id=m.id,
                    content=m.content,
                    score=score,
                    date=m.created_at[:10],
                    category=m.category.value,
                    project=m.project,
                    topic=m.topic,
                    source=m.source.value,
                    provenance=m.provenance,
                )
            )
        hits.sort(key=lambda h: (-h.score, -h.id))
        return hits[: limit or self.max_hits]

    async def search_events(self, user: str, query: str, *, limit: int = 5) -> list[Hit]:
        """Tier 3 events of ``user`` matching ``query``, best first."""
        terms = _terms(query)
        if not terms:
            return []
        rows = await self.engine.db.fetchall(
            """SELECT e.*, -bm25(events_fts, 0.0, 1.0) AS rel
               FROM events_fts JOIN daily_events e ON e.id = events_fts.rowid
               WHERE events_fts MATCH ? ORDER BY bm25(events_fts, 0.0, 1.0) LIMIT ?""",
            (build_match([user], terms), limit),
        )
        return [
            Hit(
                kind="event",
                id=r["id"],
                content=r["summary"],
                score=max(0.0, r["rel"]) / (max(0.0, r["rel"]) + _K),
                date=r["event_date"],
                category="event",
                source="event",
            )
            for r in rows
        ]

