"""Projects nobody has said anything of for a while, whose work events fade.

Seed 000 §8 lets events and conversation summaries decay to a floor (10 %
of their importance) and archives only ``temp``/``debug``: an episode
stays findable. But recall weighs decay gently (score = relevance x (0.8 +
0.2 x importance x decay), docs/RETRIEVAL.md §4), so a year of "worked on
Atlas task N" lines of a project shipped in May kept coming back in
December beside the current project's, as neighbours of its facts and for
"which project am I on?". A project is **dormant** when none of the
owner's (or ``_global``'s) active memories filed under it was written in
the last :data:`DORMANT_DAYS`: its ``event``/``conversation`` memories
then score :data:`DORMANT_FACTOR` of their score, unless the message
names it (memory/retrieval.py). A fact of the project said again (a
``reinforce`` in the memory log) is the user speaking of it too; an
update is not (``updated_at`` moves on any edit or relabel). Not archived: "what did I do on Atlas in
March?" names it and finds them as before, and a word said of it again
makes it live. Its decisions and solutions do not fade with it (what was
picked for Atlas may still be asked). No model, no language: the dates.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .clock import format_ts
from .db import Database

__all__ = ["DORMANT_DAYS", "DORMANT_FACTOR", "FADING", "live_projects"]

DORMANT_DAYS = 60
"""Days without a new memory filed under a project after which it is
dormant: two months, past a holiday and a slow month."""
DORMANT_FACTOR = 0.8
"""A dormant project's event's share of its score: as a project the message
is not about (retrieval's ``OTHER_PROJECT_FACTOR``)."""
FADING = frozenset({"event", "conversation"})
"""The categories that fade with their project: what happened, not what was decided."""


async def live_projects(db: Database, owners: Sequence[str], now: datetime) -> frozenset[str]:
    """Projects with an active memory of ``owners`` written, or said again
    (reinforced), in the last :data:`DORMANT_DAYS`: one range scan of
    ``(owner, status, created_at)`` and the owners' reinforce lines of the
    log (``(owner, action)``)."""
    marks = ",".join("?" * len(owners))
    since = format_ts(now - timedelta(days=DORMANT_DAYS))
    rows = await db.fetchall(
        f"""SELECT project FROM memories WHERE owner IN ({marks}) AND status = 'active' AND created_at >= ?
            UNION
            SELECT m.project FROM memory_log l JOIN memories m ON m.id = l.memory_id
             WHERE l.owner IN ({marks}) AND l.action = 'reinforce' AND l.at >= ?
               AND m.owner IN ({marks}) AND m.status = 'active'""",
        (*owners, since, *owners, since, *owners),
    )
    return frozenset(r[0] for r in rows)
