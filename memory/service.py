"""``SqliteMemory``: the :class:`~memory.backend.MemoryBackend` the gateway
uses when ``memory.enabled`` is true.

The read path (``profile``, ``recall``) only reads. ``buffer`` durably
appends turns to ``extraction_buffer`` and then tells the write path (a
callback, set by the extraction service) that a user has new messages; it
never waits on an LLM.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence

import aiosqlite
import structlog

from .backend import MemoryBackend, Turn
from .batch import RowBatcher, insert_statement
from .changelog import write_log
from .clock import format_ts
from .engine import MemoryEngine, more_source_text, row_to_memory
from .forgetting import Forgotten, repeats_forgotten
from .hybrid import HybridRetriever
from .retrieval import Retriever
from .tokens import estimate_tokens
from .types import GLOBAL_OWNER, Category, Hit, Memory, NewMemory, Provenance, Source

__all__ = ["SqliteMemory"]

log = structlog.get_logger(component="memory")

BufferListener = Callable[[str], Awaitable[None] | None]

_INSERT_BUFFER = """INSERT OR IGNORE INTO extraction_buffer
    (owner, channel, chat_id, sender_id, message_id, role, content, token_count, created_at)"""
_ONE_STATEMENT_ROWS = 100  # x 9 parameters, far below SQLite's limit of 32,766
_REF = re.compile(r"^\[?\s*([me])(\d{1,12})\b", re.IGNORECASE)


def _batch_refs(p: Provenance) -> set[str]:
    """The extraction batch a fact or daily event came from: the buffered
    messages it cites (``buf:<id>``), shared by the batch's facts and its event."""
    return {r for r in p.refs if r.startswith("buf:")}


class SqliteMemory(MemoryBackend):
    kind = "sqlite"

    def __init__(self, engine: MemoryEngine, retriever: Retriever | HybridRetriever | None = None) -> None:
        self.engine = engine
        self.retriever = retriever or Retriever(engine)
        self._listeners: list[BufferListener] = []
        self._saved: list[Callable[[str], None]] = []
        # Group commit (memory/batch.py): the turns concurrent chats buffer
        # now are one multi-row INSERT, one round trip to the writer thread.
        self._buffer_rows = RowBatcher(engine.db, insert_statement(_INSERT_BUFFER, 9), 9)

    def on_buffered(self, listener: BufferListener) -> None:
        """Call ``listener(owner)`` after turns of ``owner`` were buffered."""
        self._listeners.append(listener)

    def on_remembered(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` after :meth:`remember` wrote a memory of ``owner``."""
        self._saved.append(listener)

    async def profile(self, user: str, *, private: bool = True) -> str:
        # A group chat gets only the shared (_global) profile.
        # With ids, so the model can name an entry to forget (memory_forget).
        if private:
            return await self.engine.profile_markdown(user, ids=True)
        return await self.engine.profile_markdown("_global", include_global=False, ids=True)

    async def recall(
        self, user: str, query: str, *, context: Sequence[str] = (), private: bool = True
    ) -> list[Hit]:
        hits = await self.retriever.retrieve(user, query, context=context, private=private)
        self.engine.note_access(h.id for h in hits if h.kind == "memory")
        return hits

    async def search(self, user: str, query: str, *, limit: int = 8, private: bool = True) -> list[Hit]:
        facts = await self.retriever.retrieve(user, query, private=private, limit=limit)
        events = await self.retriever.search_events(user, query, limit=limit) if private else []
        hits = sorted([*facts, *events], key=lambda h: -h.score)[:limit]
        self.engine.note_access(h.id for h in hits if h.kind == "memory")
        return hits

    async def remember(
        self,
        user: str,
        content: str,
        *,
        provenance: Provenance,
        category: str = "event",
        importance: float = 0.7,
        source_text: str = "",
    ) -> Hit:
        cat = Category(category) if category in Category._value2member_map_ else Category.EVENT
        same = await self.engine.find_same(user, content)
        if same is not None:
            # Saying it again reinforces the existing memory instead of duplicating it.
            m = await self.engine.update(
                same.id, importance=max(same.importance, importance), touch=True,
                source_text=more_source_text(same.source_text, source_text),
            )
        else:
            m = await self.engine.add(
                NewMemory(
                    owner=user,
                    content=content,
                    category=cat,
                    importance=min(1.0, max(0.0, importance)),
                    source=Source.MANUAL,
                    provenance=provenance,
                    source_text=source_text,
                )
            )
        log.info("memory saved", owner=user, memory_id=m.id, reinforced=same is not None)
        for listener in self._saved:
            listener(user)
        return m.to_hit()

    async def forget(self, user: str, refs: Sequence[str]) -> Forgotten:
        """Erase, for good, the memories (``m12``) and daily events (``e3``)
        of ``user`` that ``refs`` name, as cited to them; with each fact, its
        older rows (merged or superseded into it), the Core Memory entries
        built on it, and the lines waiting in the extraction buffer that it
        was drawn from or that repeat it
        (:func:`~memory.forgetting.repeats_forgotten`), so extraction does
        not bring it back. ``Forgotten.kept`` names the linked records left
        for the model to weigh (:meth:`_kept_links`). ``Forgotten.texts`` lets the
        caller do the same to Tier 0. Never touches another user's rows or
        the shared ``_global`` ones. The erased words leave the file too
        (:meth:`MemoryEngine.purge_erased`)."""
        out = Forgotten()
        mids: dict[int, str] = {}
        eids: dict[int, str] = {}
        for ref in refs:
            m = _REF.match(ref.strip()) if isinstance(ref, str) else None
            if m is None:
                out.unknown.append(str(ref))
                continue
            (mids if m.group(1).lower() == "m" else eids)[int(m.group(2))] = f"{m.group(1).lower()}{m.group(2)}"
        async with self.engine.db.transaction() as conn:
            named: list[Memory] = []
            if mids:
                marks = ",".join("?" * len(mids))
                async with conn.execute(f"SELECT * FROM memories WHERE id IN ({marks})", list(mids)) as cur:
                    found = {r["id"]: row_to_memory(r) for r in await cur.fetchall()}
                for mid, ref in mids.items():
                    mem = found.get(mid)
                    if mem is None or mem.owner not in (user, GLOBAL_OWNER):
                        out.unknown.append(ref)
                    elif mem.owner == GLOBAL_OWNER:
                        out.shared.append(ref)
                    else:
                        named.append(mem)
                        out.erased.append(mem.to_hit())
            events: list[Hit] = []
            event_refs: set[str] = set()  # what the named events were drawn from or stand for
            if eids:
                marks = ",".join("?" * len(eids))
                async with conn.execute(
                    f"SELECT id, event_date, summary, provenance FROM daily_events WHERE id IN ({marks}) AND owner = ?",
                    [*eids, user],
                ) as cur:
                    rows = {r["id"]: r for r in await cur.fetchall()}
                for eid, ref in eids.items():
                    ev = rows.get(eid)
                    if ev is None:
                        out.unknown.append(ref)
                        continue
                    events.append(Hit(kind="event", id=eid, content=ev["summary"], score=1.0, date=ev["event_date"]))
                    event_refs |= _batch_refs(Provenance.from_json(ev["provenance"])) | {f"event:{eid}"}
            out.erased += events
            # The same fact lives on in rows nobody cites any more: the
            # originals a weekly merge archived into it, the versions it
            # superseded, and the Core Memory entries built on it.
            versions = await self._lineage(conn, user, [m.id for m in named])
            for mem in (*named, *versions):
                out.texts += [" ".join(t.split()) for t in (mem.source_text, mem.content) if t.strip()]
            gone = {m.id for m in (*named, *versions)}
            # By the facts' own words, not their source messages: a
            # message often says several things, and the others stay.
            said = [" ".join(m.content.split()) for m in (*named, *versions)]
            entries = await self._entries_built_on(conn, user, gone, said) if named else []
            out.versions = len(versions)
            out.entries = [m.to_hit() for m in entries]
            out.texts += [" ".join(m.content.split()) for m in entries]
            gone |= {m.id for m in entries}
            out.kept = await self._kept_links(conn, user, named, event_refs, gone, {h.id for h in events})
            for mid in sorted(gone):
                await self.engine.delete(mid, conn=conn)
                await write_log(conn, at=self.engine.now(), job="chat", action="forget", owner=user, memory_id=mid)
            for ev in events:
                await self.engine.delete_event(ev.id, conn=conn)
            out.buffered_lines = await self._drop_buffered_sources(conn, user, out.texts)
        if out.erased:
            await self.engine.purge_erased()
            log.info("memories forgotten at the user's request", owner=user, erased=len(out.erased),
                     buffered_lines=out.buffered_lines)
        return out

    @staticmethod
    async def _lineage(conn: aiosqlite.Connection, user: str, ids: Sequence[int]) -> list[Memory]:
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

    @staticmethod
    async def _entries_built_on(
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

    @staticmethod
    async def _kept_links(
        conn: aiosqlite.Connection,
        user: str,
        named: Sequence[Memory],
        event_refs: set[str],
        gone: set[int],
        gone_events: set[int],
    ) -> list[Hit]:
        """Records linked to the ``named`` memories or the erased events that
        are still kept, for the model to weigh (not erased on its behalf: a
        summary often holds several facts, and the others stay):

        * what an erased Core Memory entry was drawn from (``m:<id>``, each
          followed to the row that replaced or absorbed it), or the next
          weekly refresh promotes it again;
        * the daily events of an erased fact's extraction batch (the same
          ``buf:`` messages) or of its compressed day (``event:<id>``), or
          the daily compression writes the fact again;
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
        batches = set().union(*(_batch_refs(m.provenance) for m in facts)) if facts else set()
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

    @staticmethod
    async def _drop_buffered_sources(conn: aiosqlite.Connection, user: str, texts: Sequence[str]) -> int:
        """Delete ``user``'s buffered lines that :func:`repeats_forgotten`."""
        if not texts:
            return 0
        async with conn.execute("SELECT id, content FROM extraction_buffer WHERE owner = ?", (user,)) as cur:
            drop = [(r[0],) for r in await cur.fetchall() if repeats_forgotten(r[1], texts)]
        if drop:
            await conn.executemany("DELETE FROM extraction_buffer WHERE id = ?", drop)
        return len(drop)

    async def buffer(self, turns: Sequence[Turn]) -> None:
        if not turns:
            return
        now = self.engine.now()
        rows = [
            (
                t.owner,
                t.channel,
                t.chat_id,
                t.sender_id,
                t.message_id,
                t.role,
                t.content.encode("utf-8", "ignore").decode("utf-8").replace("\x00", ""),
                estimate_tokens(t.content),
                format_ts(t.at) if t.at else now,
            )
            for t in turns
        ]
        if len(rows) <= _ONE_STATEMENT_ROWS:
            # A turn (two rows) is part of one multi-row INSERT: atomic on
            # its own, shared with the other chats buffering now.
            await self._buffer_rows.write(rows)
        else:
            async with self.engine.db.transaction() as conn:
                await conn.executemany(f"{_INSERT_BUFFER} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        for owner in dict.fromkeys(t.owner for t in turns):
            for listener in self._listeners:
                res = listener(owner)
                if asyncio.iscoroutine(res):
                    await res

    async def close(self) -> None:
        await self._buffer_rows.drain()
        await self.engine.close()
