"""What goes with a fact when it is erased, and which stored lines went
with it. One implementation for every way of erasing: the ``memory_forget``
tool (:meth:`SqliteMemory.forget`), the memory page and ``myclaw memory
delete --purge --cascade``.

* :func:`plan_erasure` reads, inside the erasing transaction, what named
  rows of one user take with them (their older rows, the Core Memory
  entries built on them) and which linked records stay (named, not erased);
* :func:`erase_planned` deletes what was planned and logs every row;
* :func:`repeats_forgotten` is pure, so the gateway's history store (Tier 0)
  can match its lines against the erased words too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import aiosqlite

from .buffer import NOT_GONE, drop_lines
from .changelog import write_log
from .engine import MemoryEngine, row_to_memory
from .erasedlines import remember_erased
from .types import Event, Hit, Memory, Provenance, Source

__all__ = [
    "Erasure", "Forgotten", "batch_refs", "drop_buffered", "erase_planned", "hold_events", "plan_erasure",
    "repeats_forgotten",
    "retire_entries_on",
]


@dataclass
class Forgotten:
    """What :meth:`SqliteMemory.forget` did with the refs it was given."""

    erased: list[Hit] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # ``_global``: everyone's, not the user's to erase
    unknown: list[str] = field(default_factory=list)  # no such id of this user (another's looks the same)
    buffered_lines: int = 0  # waiting lines the erased facts were drawn from, dropped too
    versions: int = 0  # older rows of the same facts erased with them (merged originals, earlier versions)
    entries: list[Hit] = field(default_factory=list)  # Core Memory entries built on them, erased too
    # Records linked to an erased one and kept (:func:`kept_links`):
    # what it was drawn from, which could write it again, or what was drawn from it.
    kept: list[Hit] = field(default_factory=list)
    # The erased facts' words and the words they were drawn from (whitespace
    # collapsed), for :func:`repeats_forgotten` over other stores (Tier 0).
    texts: list[str] = field(default_factory=list)


@dataclass
class Erasure:
    """What erasing ``named`` memories and ``events`` of ``owner`` takes
    with it and what it leaves linked (:func:`plan_erasure`)."""

    owner: str
    named: list[Memory] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    versions: list[Memory] = field(default_factory=list)  # merged into or superseded by a named row, at any remove
    entries: list[Memory] = field(default_factory=list)  # Core Memory entries built on a named row or a version
    kept: list[Hit] = field(default_factory=list)  # linked records that stay
    buffered_lines: int = 0  # waiting lines that said it, dropped by erase_planned(buffered=True)
    history_lines: int = 0  # Tier 0 messages that said it, erased by the caller (gateway.db is not ours)

    @property
    def memory_ids(self) -> list[int]:
        return sorted({m.id for m in (*self.named, *self.versions, *self.entries)})

    def texts(self) -> list[str]:
        """The erased words and those they were drawn from (whitespace
        collapsed), for :func:`repeats_forgotten`."""
        out = [" ".join(t.split()) for m in (*self.named, *self.versions) for t in (m.source_text, m.content) if t.strip()]
        return out + [" ".join(m.content.split()) for m in self.entries]


def batch_refs(p: Provenance) -> set[str]:
    """The extraction batch a fact or daily event came from: the buffered
    messages it cites (``buf:<id>``), shared by the batch's facts and its event."""
    return {r for r in p.refs if r.startswith("buf:")}


def event_hit(ev: Event) -> Hit:
    return Hit(kind="event", id=ev.id, content=ev.summary, score=1.0, date=ev.event_date)


async def plan_erasure(
    conn: aiosqlite.Connection, owner: str, named: Sequence[Memory], events: Sequence[Event] = ()
) -> Erasure:
    """What erasing ``named`` (memories of ``owner``) and ``events`` (daily
    events of ``owner``) takes with it; read on the erasing transaction's
    connection so the plan is what gets erased. Only ``owner``'s rows."""
    plan = Erasure(owner, list(named), list(events))
    # The same fact lives on in rows nobody cites any more: the originals a
    # weekly merge archived into it, the versions it superseded, and the
    # Core Memory entries built on it.
    plan.versions = await lineage(conn, owner, [m.id for m in named])
    gone = {m.id for m in (*named, *plan.versions)}
    # By the facts' own words, not their source messages: a message often
    # says several things, and the others stay.
    said = [" ".join(m.content.split()) for m in (*named, *plan.versions)]
    plan.entries = await entries_built_on(conn, owner, gone, said) if named else []
    gone |= {m.id for m in plan.entries}
    event_refs: set[str] = set()  # what the events were drawn from or stand for
    for ev in events:
        event_refs |= batch_refs(ev.provenance) | {f"event:{ev.id}"}
    plan.kept = await kept_links(conn, owner, named, event_refs, gone, {ev.id for ev in events})
    return plan


async def erase_planned(
    engine: MemoryEngine, conn: aiosqlite.Connection, plan: Erasure, *, job: str, action: str, buffered: bool = False
) -> None:
    """Delete what ``plan`` names, one change-log row per memory (without
    its words; a row erased along with a named one says which); with
    ``buffered``, also the owner's lines waiting in the extraction buffer
    that the erased words were drawn from or that repeat them
    (:func:`drop_buffered`), or extraction would write the fact again. The
    caller runs :meth:`MemoryEngine.purge_erased` after the transaction commits."""
    named = sorted(m.id for m in plan.named)
    for mid in plan.memory_ids:
        await engine.delete(mid, conn=conn)
        await write_log(
            conn, at=engine.now(), job=job, action=action, owner=plan.owner, memory_id=mid,
            detail="" if mid in named else {"with": named},
        )
    for ev in plan.events:
        await engine.delete_event(ev.id, conn=conn)
    # A stale copy of their MEMORY.md saved after this must not bring the words back (memory/erasedlines.py).
    await remember_erased(engine.db, conn, plan.owner, [m.content for m in (*plan.named, *plan.versions, *plan.entries)],
                          engine.clock.now())
    await hold_events(engine, conn, plan, job=job)
    if buffered:
        plan.buffered_lines = await drop_buffered(conn, plan.owner, plan.texts())


async def hold_events(engine: MemoryEngine, conn: aiosqlite.Connection, plan: Erasure, *, job: str) -> list[int]:
    """The daily compression's way back to an erased fact: an event of its
    extraction batch (the same ``buf:`` messages) not compressed yet would
    be read by the next daily run, and the fact written again. Such events
    are marked compressed (kept and named, as :func:`kept_links` names them:
    a summary often says more, and the batch's other facts were extracted
    with it) and logged as ``hold_event``. Returns their ids."""
    facts = [m for m in (*plan.named, *plan.versions) if m.tier == 2]
    batches = set().union(*(batch_refs(m.provenance) for m in facts)) if facts else set()
    if not batches:
        return []
    marks = ",".join("?" * len(batches))
    gone = {ev.id for ev in plan.events}
    async with conn.execute(
        f"""SELECT e.id FROM daily_events e
             WHERE e.owner = ? AND e.is_compressed = 0 AND json_valid(e.provenance) AND EXISTS (
                   SELECT 1 FROM json_each(e.provenance, '$.refs') j WHERE j.value IN ({marks}))
             ORDER BY e.id""",
        [plan.owner, *batches],
    ) as cur:
        held = [r[0] for r in await cur.fetchall() if r[0] not in gone]
    if held:
        await engine.mark_events_compressed(held, conn=conn)
    for eid in held:
        await write_log(conn, at=engine.now(), job=job, action="hold_event", owner=plan.owner,
                        detail={"event": eid, "why": "a fact drawn from it was forgotten"})
    return held


async def drop_buffered(conn: aiosqlite.Connection, owner: str, texts: Sequence[str]) -> int:
    """Delete ``owner``'s buffered lines that :func:`repeats_forgotten`
    ``texts``; returns how many went."""
    if not texts:
        return 0
    sql = f"SELECT id, content FROM extraction_buffer WHERE owner = ? AND {NOT_GONE}"
    async with conn.execute(sql, (owner,)) as cur:
        drop = [r[0] for r in await cur.fetchall() if repeats_forgotten(r[1], texts)]
    await drop_lines(conn, drop)  # recorded gone in memory.db with the erasure (memory/buffer.py)
    return len(drop)


async def lineage(conn: aiosqlite.Connection, user: str, ids: Sequence[int]) -> list[Memory]:
    """``user``'s rows that became one of ``ids``, at any remove: merged
    into it (archived) or replaced by it (superseded)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    sql = f"""WITH RECURSIVE lineage(id) AS (
            SELECT id FROM memories WHERE owner = ? AND superseded_by IN ({marks})
            UNION SELECT m.id FROM memories m JOIN lineage l ON m.superseded_by = l.id WHERE m.owner = ?)
        SELECT * FROM memories WHERE id IN (SELECT id FROM lineage) ORDER BY id"""
    async with conn.execute(sql, [user, *ids, user]) as cur:
        return [row_to_memory(r) for r in await cur.fetchall()]


async def entries_built_on(
    conn: aiosqlite.Connection, user: str, ids: set[int], texts: Sequence[str]
) -> list[Memory]:
    """``user``'s Core Memory (Tier 1) entries, of any status, not in
    ``ids`` that the weekly refresh drew from one of ``ids`` (their
    provenance cites ``m:<id>``) or that repeat ``texts``."""
    cites = {f"m:{i}" for i in ids}
    async with conn.execute("SELECT * FROM memories WHERE owner = ? AND tier = 1", (user,)) as cur:
        rows = [row_to_memory(r) for r in await cur.fetchall()]
    return [
        m for m in rows
        if m.id not in ids and (cites & set(m.provenance.refs) or repeats_forgotten(m.content, texts))
    ]


async def retire_entries_on(
    engine: MemoryEngine, conn: aiosqlite.Connection, owner: str, old: int, new: int, *, job: str, at: str
) -> list[Memory]:
    """Core Memory entries the weekly refresh drew from fact ``old`` state
    it as current in every prompt: once it is replaced (by ``new``) or
    reworded (``new`` is ``old``, as a memory page edit does) they are
    superseded by ``new`` and logged, in ``conn``'s transaction; so are
    those drawn from a row merged into ``old`` since (:func:`lineage`). An entry
    stating several facts goes as a whole: the others stay in Tier 2, and
    the next refresh writes the profile again. Returns them."""
    # A profile is at most ~100 active rows: read in Python, as
    # entries_built_on does (no JSON functions on old rows).
    async with conn.execute(
        "SELECT * FROM memories WHERE owner = ? AND tier = 1 AND status = 'active'", (owner,)
    ) as cur:
        entries = [row_to_memory(r) for r in await cur.fetchall()]
    # Cited by the fact or by a row folded into it since (a weekly merge
    # archives the facts an entry was drawn from into a new one).
    cites = {f"m:{old}"} | {f"m:{m.id}" for m in await lineage(conn, owner, [old])}
    built = [e for e in entries if e.id != old and cites & set(e.provenance.refs)]
    for e in built:
        await engine.set_status(e.id, "superseded", superseded_by=new, conn=conn)
        await write_log(
            conn, at=at, job=job, owner=owner, action="supersede", memory_id=e.id,
            detail={"old": e.content, "by": new, "built_on": old},
        )
    return built


async def kept_links(
    conn: aiosqlite.Connection,
    user: str,
    named: Sequence[Memory],
    event_refs: set[str],
    gone: set[int],
    gone_events: set[int],
) -> list[Hit]:
    """Records linked to the ``named`` memories or the erased events that
    are still kept, for the model or the administrator to weigh (not erased
    on their behalf: a summary often holds several facts, and the others stay):

    * what an erased Core Memory entry was drawn from (``m:<id>``, each
      followed to the row that replaced or absorbed it), or the next
      weekly refresh promotes it again;
    * the daily events of an erased fact's extraction batch (the same
      ``buf:`` messages) or of its compressed day (``event:<id>``), or
      the daily compression writes the fact again;
    * the days imported from the user's logs that hold an imported fact's words;
    * the facts drawn from an erased event."""
    out: dict[str, Hit] = {}
    for entry in (m for m in named if m.tier == 1):
        for ref in entry.provenance.refs:
            mid = int(ref[2:]) if ref.startswith("m:") and ref[2:].isdigit() else None
            for _ in range(32):  # a chain of merges; bounded against a cycle
                if mid is None or mid in gone:
                    break
                async with conn.execute("SELECT * FROM memories WHERE id = ? AND owner = ?", (mid, user)) as cur:
                    row = await cur.fetchone()
                if row is None:
                    break
                mem = row_to_memory(row)
                if mem.status.value == "active":
                    out.setdefault(f"m{mem.id}", mem.to_hit())
                    break
                mid = mem.superseded_by
    facts = [m for m in named if m.tier == 2]
    batches = set().union(*(batch_refs(m.provenance) for m in facts)) if facts else set()
    days = {int(r[6:]) for m in facts for r in m.provenance.refs if r.startswith("event:") and r[6:].isdigit()}
    if batches or days:
        marks, dmarks = ",".join("?" * len(batches)) or "NULL", ",".join("?" * len(days)) or "NULL"
        async with conn.execute(
            f"""SELECT DISTINCT e.id, e.event_date, e.summary FROM daily_events e
                 WHERE e.owner = ? AND (e.id IN ({dmarks}) OR (json_valid(e.provenance) AND EXISTS (
                       SELECT 1 FROM json_each(e.provenance, '$.refs') j WHERE j.value IN ({marks}))))
                 ORDER BY e.id""",
            [user, *days, *batches],
        ) as cur:
            for r in await cur.fetchall():
                if r["id"] not in gone_events:
                    hit = Hit(kind="event", id=r["id"], content=r["summary"], score=1.0, date=r["event_date"])
                    out.setdefault(hit.ref, hit)
    # A fact imported from MEMORY.md has no extraction batch: the days the
    # import read from the same user's logs that hold its words are its links.
    for m in named:
        if m.source is not Source.MIGRATION or not m.content.strip():
            continue
        async with conn.execute(
            "SELECT id, event_date, summary FROM daily_events WHERE owner = ? AND instr(summary, ?) > 0 ORDER BY id",
            (user, m.content.strip()),
        ) as cur:
            for r in await cur.fetchall():
                if r["id"] not in gone_events:
                    hit = Hit(kind="event", id=r["id"], content=r["summary"], score=1.0, date=r["event_date"])
                    out.setdefault(hit.ref, hit)
    if event_refs:
        marks = ",".join("?" * len(event_refs))
        async with conn.execute(
            f"""SELECT m.* FROM memories m WHERE m.owner = ? AND m.status = 'active' AND json_valid(m.provenance)
                  AND EXISTS (SELECT 1 FROM json_each(m.provenance, '$.refs') j WHERE j.value IN ({marks}))
                ORDER BY m.id""",
            [user, *event_refs],
        ) as cur:
            for r in await cur.fetchall():
                if r["id"] not in gone:
                    out.setdefault(f"m{r['id']}", row_to_memory(r).to_hit())
    return list(out.values())


def repeats_forgotten(line: str, texts: Sequence[str]) -> bool:
    """Whether a stored line (a buffered or Tier 0 message) is one an erased
    fact was drawn from, or repeats the fact word for word. A short line
    ("ok", "thanks") is inside many texts: it must be one whole."""
    line = " ".join(line.split())
    return bool(line) and any(
        line == t or (len(line) >= 20 and line in t) or (len(t) >= 8 and t in line) for t in texts
    )
