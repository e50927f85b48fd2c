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

import structlog

from .backend import MemoryBackend, Turn
from .batch import RowBatcher, insert_statement
from .clock import format_ts
from .engine import MemoryEngine, more_source_text, row_to_event, row_to_memory
from .forgetting import Forgotten, erase_planned, event_hit, plan_erasure
from .hybrid import HybridRetriever
from .retrieval import Retriever
from .tokens import estimate_tokens
from .types import GLOBAL_OWNER, Category, Event, Hit, Memory, MemoryOverview, NewMemory, Provenance, Source

__all__ = ["SqliteMemory"]

log = structlog.get_logger(component="memory")

BufferListener = Callable[[str], Awaitable[None] | None]

_INSERT_BUFFER = """INSERT OR IGNORE INTO extraction_buffer
    (owner, channel, chat_id, sender_id, message_id, role, content, token_count, created_at)"""
_ONE_STATEMENT_ROWS = 100  # x 9 parameters, far below SQLite's limit of 32,766
_REF = re.compile(r"^\[?\s*([me])(\d{1,12})\b", re.IGNORECASE)


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

    async def overview(self, user: str, *, limit: int = 10) -> MemoryOverview:
        engine = self.engine
        profile = await engine.profile(user, include_global=False)
        recent = await engine.list_memories(user, tier=2, limit=limit)
        counts = await engine.db.fetchone(
            """SELECT (SELECT COUNT(*) FROM memories WHERE owner = ? AND status = 'active'),
                      (SELECT COUNT(*) FROM daily_events WHERE owner = ?)""",
            [user, user],
        )
        return MemoryOverview(
            profile=[m.to_hit() for m in profile],
            recent=[m.to_hit() for m in recent],
            facts=counts[0] if counts else 0,
            events=counts[1] if counts else 0,
        )

    async def forget(self, user: str, refs: Sequence[str]) -> Forgotten:
        """Erase, for good, the memories (``m12``) and daily events (``e3``)
        of ``user`` that ``refs`` name, as cited to them; with each fact, its
        older rows (merged or superseded into it), the Core Memory entries
        built on it, and the lines waiting in the extraction buffer that it
        was drawn from or that repeat it
        (:func:`~memory.forgetting.repeats_forgotten`), so extraction does
        not bring it back. ``Forgotten.kept`` names the linked records left
        for the model to weigh (:func:`~memory.forgetting.kept_links`). ``Forgotten.texts`` lets the
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
            events: list[Event] = []
            if eids:
                marks = ",".join("?" * len(eids))
                async with conn.execute(
                    f"SELECT * FROM daily_events WHERE id IN ({marks}) AND owner = ?", [*eids, user]
                ) as cur:
                    rows = {r["id"]: row_to_event(r) for r in await cur.fetchall()}
                for eid, ref in eids.items():
                    ev = rows.get(eid)
                    if ev is None:
                        out.unknown.append(ref)
                    else:
                        events.append(ev)
            out.erased += [event_hit(ev) for ev in events]
            # What goes with them and what stays linked: one plan for this
            # tool, the memory page and the CLI (memory/forgetting.py).
            plan = await plan_erasure(conn, user, named, events)
            out.versions = len(plan.versions)
            out.entries = [m.to_hit() for m in plan.entries]
            out.kept = plan.kept
            out.texts = plan.texts()
            await erase_planned(self.engine, conn, plan, job="chat", action="forget", buffered=True)
            out.buffered_lines = plan.buffered_lines
        if out.erased:
            await self.engine.purge_erased()
            log.info("memories forgotten at the user's request", owner=user, erased=len(out.erased),
                     buffered_lines=out.buffered_lines)
        return out

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
