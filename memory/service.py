"""``SqliteMemory``: the :class:`~memory.backend.MemoryBackend` the gateway
uses when ``memory.enabled`` is true.

The read path (``profile``, ``recall``) only reads. ``buffer`` durably
appends turns to ``extraction_buffer`` and then tells the write path (a
callback, set by the extraction service) that a user has new messages; it
never waits on an LLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from .backend import MemoryBackend, Turn
from .batch import RowBatcher, insert_statement
from .clock import format_ts
from .engine import MemoryEngine, more_source_text
from .hybrid import HybridRetriever
from .retrieval import Retriever
from .tokens import estimate_tokens
from .types import Category, Hit, NewMemory, Provenance, Source

__all__ = ["SqliteMemory"]

log = structlog.get_logger(component="memory")

BufferListener = Callable[[str], Awaitable[None] | None]

_INSERT_BUFFER = """INSERT OR IGNORE INTO extraction_buffer
    (owner, channel, chat_id, sender_id, message_id, role, content, token_count, created_at)"""
_ONE_STATEMENT_ROWS = 100  # x 9 parameters, far below SQLite's limit of 32,766


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
        if private:
            return await self.engine.profile_markdown(user)
        return await self.engine.profile_markdown("_global", include_global=False)

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
