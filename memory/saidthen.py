"""What was true in a period the message names, and has been replaced
since: "what did we decide back in February?" of a decision replaced in
March. The replaced fact is out of the index (its words are in the fact
that replaced it, whose row is long and dated March), so the period term
alone would find February's trivia. Recall scores the fact said then on its
own words and shows it under the fact that replaced it (docs/RETRIEVAL.md
§6a).

The user changed their mind (``superseded``), not a merge (``archived``),
never a credential nor a fact a credential replaced (an old key filed as
config is still a key), and not a slip an edit corrected (the fact that
replaced it is drawn from an edited message): as the replaced line of
:meth:`MemoryEngine.replaced_facts`. Private chats only (the caller's).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlite3

from .clock import format_ts
from .db import Database
from .engine import REPLACED_DEPTH
from .timeref import Period

__all__ = ["SAID_THEN_MAX", "replaced_then"]

SAID_THEN_MAX = 50
"""Replaced facts of a period read at most (the newest): a user changes
their mind a few times a month, not fifty."""


def _sql(periods: int) -> str:
    within = " OR ".join(["(o.created_at >= ? AND o.created_at < ?)"] * periods)
    return f"""WITH RECURSIVE up(old, id, depth) AS (
        SELECT o.id, o.superseded_by, 1 FROM memories o JOIN memories n ON n.id = o.superseded_by
         WHERE o.owner = ? AND o.status = 'superseded' AND o.tier = 2 AND o.category <> 'credential'
           AND ({within}) AND instr(n.source_text, '(edited) ') = 0
        UNION ALL SELECT up.old, m.superseded_by, up.depth + 1 FROM up JOIN memories m ON m.id = up.id
         WHERE m.owner = ? AND m.status <> 'active' AND m.superseded_by IS NOT NULL AND up.depth < ?)
    SELECT up.id AS heir, o.id, o.owner, o.category, o.content, o.source_text, o.importance, o.project, o.topic,
           o.search_terms, o.created_at, o.last_accessed
      FROM up JOIN memories h ON h.id = up.id JOIN memories o ON o.id = up.old
     WHERE h.owner = ? AND h.status = 'active' AND h.tier = 2 AND h.category <> 'credential'
     ORDER BY o.created_at DESC, o.id DESC LIMIT ?"""


async def replaced_then(db: Database, owner: str, when: Sequence[Period]) -> list[sqlite3.Row]:
    """``owner``'s Tier 2 facts written in one of the periods ``when`` and
    replaced since, each with ``heir``: the active fact that holds its
    place now (at the end of a chain of up to :data:`REPLACED_DEPTH`
    replacements). The newest :data:`SAID_THEN_MAX`."""
    if not when:
        return []
    bounds: list[object] = []
    for a, b in when:
        bounds += [format_ts(a), format_ts(b)]
    return list(await db.fetchall(
        _sql(len(when)), (owner, *bounds, owner, REPLACED_DEPTH, owner, SAID_THEN_MAX)))
