"""The ``_global`` facts the daily compression retold from the legacy day
logs, withdrawn (memory.db migration 12).

Until the daily job left ``_global``'s events alone (memory/compression.py),
its first nightly run retold the legacy store's top-level day logs (which
memory/migrate.py imports as ``_global``'s events: the operator's record,
never shown to users) as ``_global`` Tier 2 facts, which every user's chat
and every group reads (memory/scope.py). Which rows those are is firm: the
daily job logged an ``add`` line (``job = 'daily_compress'``) for each fact
it wrote, and no other path writes one for ``_global``. The weekly job's
own ``_global`` rows (a merge of the top-level MEMORY.md's facts, a Core
Memory entry drawn from them) are logged as ``merge`` / ``promote`` and
stay, unless they were built on a withdrawn fact (they cite it, ``m:<id>``).

Withdrawn as the system withdraws a fact: archived, never deleted (the
operator's data), each a ``withdraw`` line in ``memory_log``. A fact one of
them replaced (an operator's MEMORY.md fact superseded by a day's line, or
merged into a fact built on one) is current again, a ``restore`` line; the
engine then rebuilds the FTS index on open, which indexes it again.
"""

from __future__ import annotations

import json
import aiosqlite

from .changelog import write_log
from .types import GLOBAL_OWNER

__all__ = ["withdraw_retold_day_logs"]

WHY = "retold from the legacy top-level day logs, which users never read"


def _cited(provenance: str | None) -> set[int]:
    """The memory ids a row cites (``m:<id>``: a merge's sources, a Core
    Memory entry's facts); none for unreadable JSON (a hand edit)."""
    try:
        refs = json.loads(provenance or "{}").get("refs") or []
    except (ValueError, AttributeError):
        return set()
    return {int(r[2:]) for r in refs if isinstance(r, str) and r.startswith("m:") and r[2:].isdigit()}


def _said(text: str) -> str:
    return " ".join(text.split())


async def _retold(conn: aiosqlite.Connection) -> set[int]:
    """The daily job's ``_global`` facts and the ``_global`` rows built on them."""
    # By the log's (owner, action) index (schema v11), not a walk of the
    # whole log for each row: the daily job logged its adds under the owner.
    async with conn.execute(
        "SELECT m.id FROM memories m WHERE m.owner = ? AND m.source = 'compression' AND m.id IN "
        "(SELECT l.memory_id FROM memory_log l WHERE l.owner = ? AND l.action = 'add' AND l.job = 'daily_compress')",
        (GLOBAL_OWNER, GLOBAL_OWNER),
    ) as cur:
        out = {int(r[0]) for r in await cur.fetchall()}
    if not out:
        return out
    async with conn.execute(
        "SELECT id, tier, content, provenance FROM memories WHERE owner = ? AND source = 'compression'",
        (GLOBAL_OWNER,),
    ) as cur:
        rows = [(int(r[0]), int(r[1]), str(r[2]), _cited(r[3])) for r in await cur.fetchall()]
    # A merge of a withdrawn fact, a merge of that merge, a Core Memory entry
    # citing any of them or (an entry citing nothing) in their very words.
    while True:
        said = {_said(c) for i, _, c, _ in rows if i in out}
        more = {i for i, tier, c, cites in rows
                if i not in out and (cites & out or (tier == 1 and not cites and _said(c) in said))}
        if not more:
            return out
        out |= more


def _current_again(rows: dict[int, tuple[str, int | None]], by: int, gone: set[int]) -> bool:
    """Whether the row replaced by ``by`` is current again once ``gone`` is:
    every row it led to is withdrawn (nothing the operator wrote since stands for it)."""
    seen: set[int] = set()
    at: int | None = by
    while at is not None and at not in seen:
        if at not in gone:
            return False
        seen.add(at)
        at = rows[at][1] if at in rows else None
    return True


async def withdraw_retold_day_logs(conn: aiosqlite.Connection, at: str) -> tuple[list[int], list[int]]:
    """Archive the retold rows and make current again what they replaced;
    returns (withdrawn, restored) ids. ``at``: the stored timestamp."""
    gone = await _retold(conn)
    if not gone:
        return [], []
    async with conn.execute(
        "SELECT id, status, superseded_by FROM memories WHERE owner = ?", (GLOBAL_OWNER,)
    ) as cur:
        rows = {int(r[0]): (str(r[1]), r[2]) for r in await cur.fetchall()}
    withdrawn = sorted(i for i in gone if rows.get(i, ("", None))[0] == "active")
    restored = sorted(
        i for i, (status, by) in rows.items()
        if i not in gone and status != "active" and by is not None and _current_again(rows, by, gone)
    )
    for i in withdrawn:
        await conn.execute("UPDATE memories SET status = 'archived', updated_at = ? WHERE id = ?", (at, i))
        await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (i,))
        await write_log(conn, at=at, job="migration", owner=GLOBAL_OWNER, action="withdraw", memory_id=i,
                        detail={"why": WHY})
    for i in restored:
        await conn.execute(
            "UPDATE memories SET status = 'active', superseded_by = NULL, updated_at = ? WHERE id = ?", (at, i))
        await write_log(conn, at=at, job="migration", owner=GLOBAL_OWNER, action="restore", memory_id=i,
                        detail={"was": rows[i][0], "by": rows[i][1], "why": "what replaced it was withdrawn"})
    if restored or withdrawn:
        # The FTS rows are written by the engine (memory/engine.py): a
        # missing tokenizer mark makes its next open rebuild them, so the
        # restored rows are found again and no row carries withdrawn words.
        await conn.execute("DELETE FROM meta WHERE key = 'tokenizer'")
    return withdrawn, restored
