"""The SQLite memory engine: Tier 1/2 facts, Tier 3 events, FTS upkeep.

Every write method takes an optional ``conn``: inside
``async with engine.db.transaction() as conn`` a caller (the extraction
service, a compression job) can combine several writes into one atomic step;
without it the method opens its own transaction.

Reads never write. Access reinforcement (``last_accessed`` / ``access_count``)
is queued in memory by :meth:`note_access` and written in batches off the
reply path by :meth:`flush_access`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import sqlite3
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import structlog

from .clock import Clock, SystemClock, ZoneOf, ZoneUnread, format_ts, local_day
from .cues import CUE_MARK, cue_text, join_terms, split_terms
from .buffer import NOT_GONE, continue_ids, drop_owner_lines, reconcile
from .db import Database
from .errorlog import error_fields
from .format import truncate
from .groupowner import is_group_owner, logged_owner
from .lru import LRU
from .pastplan import passed
from .projects import ALIASES, Aliased, Unaliased, move_facts, remove_alias, set_alias
from .schema import open_memory_db
from .scope import Chat, shown_in
from .tokenize import TOKENIZER_VERSION, index_terms, index_text, normalize
from .tokens import estimate_tokens
from .types import (
    GLOBAL_OWNER,
    Category,
    Event,
    Memory,
    NewMemory,
    Provenance,
    Source,
    Status,
)
from .zonehistory import (
    Lived, Span, drop_zones, fill, gateway_started, read_gateway_spans, read_spans, record_change, record_return,
)

__all__ = [
    "Backlog",
    "MemoryEngine",
    "MemoryNotFound",
    "clean_source_text",
    "content_hash",
    "INDEX_VERSION",
    "memory_index_text",
    "replaced_words",
    "row_cues",
    "more_source_text",
    "owner_key",
]

log = structlog.get_logger(component="memory")

_W = TypeVar("_W", bound=Callable[..., Awaitable[Any]])

TIER1 = "tier1"  # Database.stamp name of what the profile cache holds
INDEX = "index"  # Database.stamp name of the FTS indexes' content (retrieval's statistics cache)
# Database.stamp name of who a group's rows name, changed other than by a new
# row: one erased, rows moved between owners, a note's speakers rewritten
# (memory/samenames.py's cache). A user's own row erased does not move it.
SPEAKERS = "speakers"
PROFILE_CACHE_SIZE = 4096  # owners whose Tier 1 markdown is kept
# Tier 1 is in every system prompt (seed 000: ~100 entries), so it has a
# budget like the other injections (seed 001): an entry is a short fact; one
# pasted into the memory page at length is cut in the prompt, not stored cut.
PROFILE_ENTRY_CHARS = 300
PROFILE_TOKEN_BUDGET = 3000
REFRESH = "refresh"  # Database.stamp name of the weekly refresh's last run (see :meth:`MemoryEngine.refreshed_upto`)
# What the user just said about themselves ("always answer me in
# English", "call me Yang") is in Core Memory from the next message on,
# not only from the weekly refresh on (seed 000 §4.2: Tier 1 is refreshed
# weekly): the Tier 2 facts of these categories that refresh would read
# (its importance threshold, Compressor.profile_min_importance's default)
# and has not read yet. Never a credential: it is not for every prompt.
NEWER_CATEGORIES = ("identity", "config")
NEWER_MIN_IMPORTANCE = 0.7
NEWER_LIMIT = 20  # of them, the newest: beside ~100 entries, a week's worth of standing instructions

MAX_CONTENT_CHARS = 4000
"""A memory is a fact, not a document; longer text is cut at write time."""
MAX_SOURCE_CHARS = 600
"""The source words indexed with a memory (a message or two); see clean_source_text."""


class MemoryNotFound(LookupError):
    pass


def owner_key(owner: str) -> str:
    """A single FTS token standing for an owner (owner names contain ':')."""
    return "o" + hashlib.sha1(owner.encode("utf-8")).hexdigest()[:16]


_WS = re.compile(r"\s+")


def _said_on(m: Memory, tz: tzinfo | None = None) -> str:
    """The day (or days) a Core Memory entry's facts were said, as its
    provenance keeps them (the weekly refresh, a migrated line); else the
    day it was written. Its line carries it: when a question's words find
    no fact to recall ("when did we pick that?"), the line is all there is.
    On the calendar of ``tz``, the user's (UTC's when None): 21:00 in New
    York is the next day in UTC; a provenance that is a date already stays."""
    a, b = local_day(m.provenance.date_from, tz), local_day(m.provenance.date_to, tz)
    if not a:
        return local_day(m.created_at, tz)
    return a if not b or b == a else f"{a} to {b}"


def _zone_key(tz: tzinfo | None) -> str:
    """A profile cache key's zone: its name, or its offset now (a fixed one)."""
    if isinstance(tz, Lived):
        return tz.cache_key
    if tz is None:
        return ""
    return str(getattr(tz, "key", None) or tz.utcoffset(None) or tz.tzname(None))


def content_hash(text: str) -> str:
    """Identity of a fact's wording, ignoring case, width and spacing."""
    return hashlib.sha256(_WS.sub(" ", normalize(text)).strip().encode("utf-8")).hexdigest()


def _clean_content(text: str) -> str:
    text = text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "").strip()
    if not text:
        raise ValueError("memory content is empty")
    return text[:MAX_CONTENT_CHARS]


def clean_source_text(text: str) -> str:
    """A memory's source words, cut to ``MAX_SOURCE_CHARS``: enough for the
    message a fact came from, short enough not to bury the fact's own words
    (BM25 normalises by the length of the indexed text)."""
    text = " ".join(text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "").split())
    if len(text) <= MAX_SOURCE_CHARS:
        return text
    cut = text[:MAX_SOURCE_CHARS]
    space = cut.rfind(" ")
    return cut[:space] if space >= MAX_SOURCE_CHARS // 2 else cut


def more_source_text(have: str, said: str) -> str | None:
    """``have`` with ``said`` added (a fact said again in other words), or
    ``None`` when that adds nothing; once full, the first words said stay."""
    more = clean_source_text(said)
    if not more or more in have:
        return None
    return clean_source_text(f"{have}\n{more}" if have else more)


def memory_index_text(content: str, source_text: str = "", replaced: str = "", cues: str = "") -> str:
    """What the FTS row of a memory holds: its content's terms, then those of
    the words it was drawn from, then those of the facts it replaced
    (:func:`replaced_words`); then, after :data:`~memory.cues.CUE_MARK`, the
    terms of its cues (labels and search terms, :func:`~memory.cues.cue_text`),
    which the retriever counts at a low weight."""
    text = index_text("\n".join(t for t in (content, source_text, replaced) if t))
    extra = index_terms(cues) if cues else []
    return f"{text} {CUE_MARK} {' '.join(extra)}".lstrip() if extra else text


def row_cues(row: sqlite3.Row) -> str:
    """:func:`~memory.cues.cue_text` of a ``memories`` row."""
    return cue_text(row["project"], row["topic"], split_terms(row["search_terms"]))


INDEX_VERSION = f"{TOKENIZER_VERSION}+replaced-1+cues-1"
"""What the FTS rows hold (the tokenizer's terms of a fact's words, its
source words, since ``+replaced`` the replaced facts' words, and since
``+cues`` its labels and search terms); a file indexed otherwise is
reindexed on open (``meta.tokenizer``)."""

REPLACED_DEPTH = 8
"""How many replacements back a fact's index reaches (a chain of moves)."""

_REPLACED_SQL = """WITH RECURSIVE replaced(id, depth) AS (
        SELECT id, 1 FROM memories WHERE owner = ? AND superseded_by = ? AND tier = 2 AND status <> 'active'
        UNION SELECT m.id, r.depth + 1 FROM memories m JOIN replaced r ON m.superseded_by = r.id
         WHERE m.owner = ? AND m.tier = 2 AND m.status <> 'active' AND r.depth < ?)
    SELECT content FROM memories WHERE id IN (SELECT id FROM replaced) ORDER BY id DESC"""


async def replaced_words(conn: aiosqlite.Connection, owner: str, memory_id: int) -> str:
    """The words of the owner's Tier 2 facts that ``memory_id`` replaced or
    absorbed (``superseded_by``, at up to :data:`REPLACED_DEPTH` removes),
    newest first, cut as source text is. "User moved to Berlin" shares no
    word with "where do I live?"; the "User lives in Shanghai" it replaced
    does. Indexed, never shown; gone with the old fact when it is erased."""
    async with conn.execute(_REPLACED_SQL, (owner, memory_id, owner, REPLACED_DEPTH)) as cur:
        rows = await cur.fetchall()
    return clean_source_text("\n".join(r[0] for r in rows))


def row_to_memory(r: sqlite3.Row) -> Memory:
    return Memory(
        id=r["id"],
        owner=r["owner"],
        tier=r["tier"],
        project=r["project"],
        topic=r["topic"],
        category=Category(r["category"]),
        content=r["content"],
        importance=r["importance"],
        source=Source(r["source"]),
        status=Status(r["status"]),
        superseded_by=r["superseded_by"],
        provenance=Provenance.from_json(r["provenance"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        last_accessed=r["last_accessed"],
        access_count=r["access_count"],
        source_text=r["source_text"],
        search_terms=split_terms(r["search_terms"]),
    )


def row_to_event(r: sqlite3.Row) -> Event:
    return Event(
        id=r["id"],
        owner=r["owner"],
        event_date=r["event_date"],
        channel=r["channel"],
        chat_id=r["chat_id"],
        summary=r["summary"],
        raw_tokens=r["raw_tokens"],
        is_compressed=bool(r["is_compressed"]),
        provenance=Provenance.from_json(r["provenance"]),
        created_at=r["created_at"],
    )


@dataclass(frozen=True)
class Stats:
    total: int
    by_status: dict[str, int]
    by_tier: dict[str, int]
    by_category: dict[str, int]
    by_source: dict[str, int]
    events: int
    events_uncompressed: int
    buffered: int
    owners: int
    # Active memories with a current vector, by embedding model (hybrid
    # recall; empty when it is off or nothing is embedded yet).
    vectors: dict[str, int] = field(default_factory=dict)
    # Of ``buffered``, the lines set aside: extraction could not take them
    # even one at a time (memory/extraction.py); kept, never retried.
    set_aside: int = 0


@dataclass(frozen=True)
class Backlog:
    """The write path's queue (:meth:`MemoryEngine.backlog`), for health
    checks and metrics: words are never read."""

    lines: int  # waiting for extraction
    retrying: int  # of them, whose extraction failed at least once
    stuck: int  # of them, failed ``stuck_after`` times or more (the ``backlog`` log line)
    oldest: str | None  # created_at of the oldest waiting line
    set_aside: int = 0  # lines extraction could not take even alone: kept, not waiting, not retried


async def _scrub_log(conn: aiosqlite.Connection, memory_id: int, content: str) -> None:
    """An erased memory's words must not survive in the change log: entries
    about it, or quoting it (merges and drops record content), are emptied."""
    quoted = json.dumps(content, ensure_ascii=False)[1:-1]
    await conn.execute(
        """UPDATE memory_log SET detail = '{"erased":true}'
           WHERE memory_id = ? OR instr(detail, ?) > 0 OR instr(detail, ?) > 0""",
        (memory_id, content, quoted),
    )


async def _scrub_reworded(conn: aiosqlite.Connection, owner: str, content: str) -> None:
    """A memory's old words, edited away (a redaction, often), leave the
    change log too: the owner's entries quoting them (an add or a merge
    records the words) say only that they were reworded."""
    quoted = json.dumps(content, ensure_ascii=False)[1:-1]
    await conn.execute(
        """UPDATE memory_log SET detail = '{"reworded":true}'
           WHERE owner = ? AND (instr(detail, ?) > 0 OR instr(detail, ?) > 0)""",
        (owner, content, quoted),
    )


async def _drop_cached_vectors(conn: aiosqlite.Connection, contents: Iterable[str]) -> None:
    """Erased or overwritten words lose their cached vectors too: a vector
    can be inverted back to much of its text. The cache is keyed by the
    SHA-256 of the exact text (``memory.embedding.text_hash``, not imported:
    that module loads numpy); a live memory with the same words keeps its
    own vector in ``memory_vectors``."""
    hashes = [(hashlib.sha256(c.encode("utf-8")).hexdigest(),) for c in dict.fromkeys(contents)]
    if hashes:
        await conn.executemany("DELETE FROM embedding_cache WHERE text_hash = ?", hashes)


def _in_transaction(method: _W) -> _W:
    """A write method given no ``conn`` runs in a transaction of its own;
    given one, it joins the caller's (several writes, one atomic step)."""

    @functools.wraps(method)
    async def wrapper(self: MemoryEngine, *args: Any, conn: aiosqlite.Connection | None = None, **kwargs: Any) -> Any:
        if conn is not None:
            return await method(self, *args, conn=conn, **kwargs)
        async with self.db.transaction() as c:
            return await method(self, *args, conn=c, **kwargs)

    return wrapper  # type: ignore[return-value]


def _in_core(tier: int, *categories: str | None) -> bool:
    """Can a row of ``tier`` with these categories (before and after a
    change) be in a Core Memory block: a Tier 1 entry, or a Tier 2 fact of
    :data:`NEWER_CATEGORIES` (the profile cache then changes with it)."""
    return tier == 1 or any(c in NEWER_CATEGORIES for c in categories)


class MemoryEngine:
    def __init__(self, db: Database, clock: Clock | None = None, *, owners_kept: int = PROFILE_CACHE_SIZE) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        self._pending_access: Counter[int] = Counter()
        # owner -> their projects, for the most recent `owners_kept` owners (read again once forgotten)
        self._projects: LRU[str, frozenset[str]] = LRU(owners_kept)
        # owner -> (stamp, alias -> current project name)
        self._aliases: LRU[str, tuple[tuple[int, int], dict[str, str]]] = LRU(owners_kept)
        # owner -> the zones they were in before their current one (memory/zonehistory.py)
        self._zones: LRU[str, tuple[Span, ...]] = LRU(owners_kept)
        self._gateway_zones: tuple[Span, ...] | None = None  # gateway.timezone's before its current one
        # Who set a zone of their own (the gateway's: gateway/timezones.py); when
        # None, no one is taken to be on the gateway's, its history unused.
        self.zone_of: ZoneOf | None = None
        # (owner, include_global, ids, zone) -> ((stamp, day), Tier 1 markdown,
        # the ids it shows): the system prompt reads it for every message,
        # recall leaves out what it shows, and it changes rarely (a tier-1
        # write bumps the "tier1" stamp; see Database.stamp).
        self._profiles: OrderedDict[
            tuple[str, bool, bool, str], tuple[tuple[tuple[int, int], date], str, frozenset[int]]
        ] = OrderedDict()
        # (REFRESH stamp, owner -> refreshed_upto); emptied when a refresh ends.
        self._refreshed: tuple[tuple[int, int], dict[str, tuple[int, int]]] | None = None
        self._owners_kept = owners_kept
        self._erased: set[int] = set()  # memories erased or reworded since the last purge_erased
        self._erase_listeners: list[Callable[[Sequence[int]], object]] = []

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-owner caches, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"projects": self._projects.view(), "profiles": self._profiles}

    @classmethod
    async def open(
        cls, path: Path | str, clock: Clock | None = None, *, owners_kept: int = PROFILE_CACHE_SIZE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> MemoryEngine:
        """``monotonic``: how often to look for another process's commits
        (:meth:`Database.stamp`); tests move it by hand."""
        db = await open_memory_db(path, monotonic=monotonic)
        engine = cls(db, clock, owners_kept=owners_kept)
        try:
            await engine._check_tokenizer()
            left = await reconcile(db)
            if left:
                log.warning("buffered lines left by a crash after they were extracted or erased: deleted", lines=left)
            if after := await continue_ids(db):
                log.warning("the extraction buffer's file started over; its ids continue after the cited ones",
                            after=after)
        except BaseException:
            await db.close()
            raise
        return engine

    async def close(self) -> None:
        if self.db.closed:
            return
        try:
            await self.flush_access()
        except sqlite3.Error as exc:
            # A full disk at shutdown: the counts only rank recall, and the
            # caller still has files to close; given up, said so.
            log.warning("access counts not written at close", memories=len(self._pending_access), **error_fields(exc))
        finally:
            await self.db.close()

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def now(self) -> str:
        return format_ts(self.clock.now())

    # -- FTS upkeep -------------------------------------------------------

    async def _check_tokenizer(self) -> None:
        row = await self.db.fetchone("SELECT value FROM meta WHERE key = 'tokenizer'")
        if row is None or row["value"] != INDEX_VERSION:
            await self.reindex()

    async def reindex(self) -> int:
        """Rebuild both FTS indexes from the rows (after a tokenizer change)."""
        async with self.db.transaction() as conn:
            self.db.bump(INDEX)
            await conn.execute("DELETE FROM memories_fts")
            await conn.execute("DELETE FROM events_fts")
            n = 0
            async with conn.execute(
                "SELECT id, owner, content, source_text, EXISTS (SELECT 1 FROM memories o "
                "WHERE o.owner = m.owner AND o.superseded_by = m.id), project, topic, search_terms "
                "FROM memories m WHERE status = 'active'"
            ) as cur:
                rows = list(await cur.fetchall())
            await conn.executemany(
                "INSERT INTO memories_fts(rowid, owner, text) VALUES (?, ?, ?)",
                [
                    (r[0], owner_key(r[1]),
                     memory_index_text(r[2], r[3], await replaced_words(conn, r[1], r[0]) if r[4] else "", row_cues(r)))
                    for r in rows
                ],
            )
            n += len(rows)
            async with conn.execute("SELECT id, owner, summary FROM daily_events") as cur:
                erows = list(await cur.fetchall())
            await conn.executemany(
                "INSERT INTO events_fts(rowid, owner, text) VALUES (?, ?, ?)",
                [(r[0], owner_key(r[1]), index_text(r[2])) for r in erows],
            )
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES ('tokenizer', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (INDEX_VERSION,),
            )
        if n or erows:
            log.info("fts reindexed", memories=n, events=len(erows), tokenizer=INDEX_VERSION)
        return n + len(erows)

    # -- Tier 1 / Tier 2 writes --------------------------------------------

    @_in_transaction
    async def add(self, m: NewMemory, *, conn: aiosqlite.Connection | None = None, at: str | None = None) -> Memory:
        """Insert one memory (active) and index it."""
        assert conn is not None  # opened by @_in_transaction when not given
        content = _clean_content(m.content)
        source_text = clean_source_text(m.source_text)
        terms = join_terms(m.search_terms)
        if not 0.0 <= m.importance <= 1.0:
            raise ValueError(f"importance must be within [0, 1], got {m.importance}")
        now = at or self.now()
        cur = await conn.execute(
            """INSERT INTO memories (owner, tier, project, topic, category, content, content_hash,
                   importance, source, status, provenance, created_at, updated_at, last_accessed, source_text,
                   search_terms)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?)""",
            (
                m.owner,
                m.tier,
                m.project or GLOBAL_OWNER,
                m.topic or "_general",
                Category(m.category).value,
                content,
                content_hash(content),
                float(m.importance),
                Source(m.source).value,
                m.provenance.to_json(),
                now,
                now,
                now,
                source_text,
                terms,
            ),
        )
        mid = cur.lastrowid
        assert mid is not None
        cues = cue_text(m.project or GLOBAL_OWNER, m.topic or "_general", split_terms(terms))
        await conn.execute(
            "INSERT INTO memories_fts(rowid, owner, text) VALUES (?, ?, ?)",
            (mid, owner_key(m.owner), memory_index_text(content, source_text, cues=cues)),
        )
        self.db.bump(INDEX)
        self._projects.pop(m.owner, None)
        if _in_core(m.tier, Category(m.category).value):
            self.db.bump(TIER1)
        async with conn.execute("SELECT * FROM memories WHERE id = ?", (mid,)) as c2:
            row = await c2.fetchone()
        assert row is not None
        return row_to_memory(row)

    async def add_many(self, items: Iterable[tuple[NewMemory, str | None]]) -> list[int]:
        """Bulk insert (ingest, migration, benchmarks) in one transaction.

        Each item is ``(memory, created_at or None)``.
        """
        ids: list[int] = []
        async with self.db.transaction() as conn:
            for m, at in items:
                ids.append((await self.add(m, conn=conn, at=at)).id)
        return ids

    @_in_transaction
    async def update(
        self,
        memory_id: int,
        *,
        content: str | None = None,
        category: Category | str | None = None,
        importance: float | None = None,
        project: str | None = None,
        topic: str | None = None,
        tier: int | None = None,
        source_text: str | None = None,
        search_terms: Sequence[str] | None = None,
        touch: bool = False,
        conn: aiosqlite.Connection | None = None,
    ) -> Memory:
        """Change fields of a memory; the FTS row follows the content.

        An edited content keeps the memory's ``source_text`` (the words it
        was drawn from still say what it is about) and ``search_terms``
        unless they are given.
        """
        assert conn is not None  # opened by @_in_transaction when not given
        async with conn.execute("SELECT * FROM memories WHERE id = ?", (memory_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory with id {memory_id}")
        sets: dict[str, Any] = {"updated_at": self.now()}
        if content is not None:
            sets["content"] = _clean_content(content)
            sets["content_hash"] = content_hash(sets["content"])
        if category is not None:
            sets["category"] = Category(category).value
        if importance is not None:
            if not 0.0 <= importance <= 1.0:
                raise ValueError(f"importance must be within [0, 1], got {importance}")
            sets["importance"] = float(importance)
        if project is not None:
            sets["project"] = project or GLOBAL_OWNER
            if sets["project"] != row["project"]:
                sets["renamed_from"] = None  # filed by hand: no rename's to undo
        if topic is not None:
            sets["topic"] = topic or "_general"
        if tier is not None:
            if tier not in (1, 2):
                raise ValueError(f"tier must be 1 or 2, got {tier}")
            sets["tier"] = tier
        if source_text is not None:
            sets["source_text"] = clean_source_text(source_text)
        if search_terms is not None:
            sets["search_terms"] = join_terms(search_terms)
        if (sets.get("category") == Category.CREDENTIAL.value or sets.get("tier") == 1) and row["provenance"]:
            # A credential or a profile entry is never read in a group
            # (memory/sharing.py): what the member shared ends here, so an
            # edit back to an ordinary fact does not share it again unasked.
            prov = Provenance.from_json(row["provenance"])
            if prov.shared:
                sets["provenance"] = replace(prov, shared=()).to_json()
        if touch:
            sets["last_accessed"] = sets["updated_at"]
        cols = ", ".join(f"{k} = ?" for k in sets)
        extra = ", access_count = access_count + 1" if touch else ""
        await conn.execute(f"UPDATE memories SET {cols}{extra} WHERE id = ?", (*sets.values(), memory_id))
        if sets.get("content", row["content"]) != row["content"]:
            # An edit can be a redaction: the old words' vectors go (the
            # vectorizer embeds the new words), on disk and in RAM.
            await _drop_cached_vectors(conn, [row["content"]])
            await _scrub_reworded(conn, row["owner"], row["content"])
            await conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
            self._erased.add(memory_id)
        if sets.keys() & {"content", "source_text", "search_terms", "project", "topic"} and row["status"] == "active":
            text = memory_index_text(
                sets.get("content", row["content"]),
                sets.get("source_text", row["source_text"]),
                await replaced_words(conn, row["owner"], memory_id),
                cue_text(sets.get("project", row["project"]), sets.get("topic", row["topic"]),
                         split_terms(sets.get("search_terms", row["search_terms"]))),
            )
            await conn.execute("UPDATE memories_fts SET text = ? WHERE rowid = ?", (text, memory_id))
            self.db.bump(INDEX)
        self._projects.pop(row["owner"], None)
        if (_in_core(row["tier"], row["category"], sets.get("category")) or sets.get("tier") == 1
                or row["superseded_by"] is not None):  # its words may be under the newer fact's line
            self.db.bump(TIER1)
        async with conn.execute("SELECT * FROM memories WHERE id = ?", (memory_id,)) as cur:
            new = await cur.fetchone()
        assert new is not None
        return row_to_memory(new)

    @_in_transaction
    async def set_status(
        self,
        memory_id: int,
        status: Status | str,
        *,
        superseded_by: int | None = None,
        conn: aiosqlite.Connection | None = None,
    ) -> None:
        """Activate, supersede or archive; only active rows stay searchable."""
        assert conn is not None  # opened by @_in_transaction when not given
        status = Status(status)
        async with conn.execute(
            "SELECT owner, content, source_text, status, tier, category, superseded_by, project, topic, search_terms "
            "FROM memories WHERE id = ?", (memory_id,)
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory with id {memory_id}")
        await conn.execute(
            "UPDATE memories SET status = ?, superseded_by = ?, updated_at = ? WHERE id = ?",
            (status.value, superseded_by, self.now(), memory_id),
        )
        was_active = row["status"] == "active"
        if was_active != (status is Status.ACTIVE):
            self.db.bump(INDEX)
        if was_active and status is not Status.ACTIVE:
            await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        elif not was_active and status is Status.ACTIVE:
            replaced = await replaced_words(conn, row["owner"], memory_id)
            await conn.execute(
                "INSERT INTO memories_fts(rowid, owner, text) VALUES (?, ?, ?)",
                (memory_id, owner_key(row["owner"]),
                 memory_index_text(row["content"], row["source_text"], replaced, row_cues(row))),
            )
        # The fact it now points at (or pointed at) carries its words, or no longer does.
        for target in {row["superseded_by"], superseded_by} - {None, memory_id}:
            await self._reindex_one(conn, target)
        self._projects.pop(row["owner"], None)
        if _in_core(row["tier"], row["category"]) or row["superseded_by"] is not None or superseded_by is not None:
            self.db.bump(TIER1)

    async def _reindex_one(self, conn: aiosqlite.Connection, memory_id: int) -> None:
        """Rewrite the FTS row of ``memory_id``, or of the active fact that
        replaced it since (what it carries changed: :func:`replaced_words`)."""
        for _ in range(REPLACED_DEPTH):
            async with conn.execute(
                "SELECT owner, content, source_text, status, superseded_by, project, topic, search_terms "
                "FROM memories WHERE id = ?", (memory_id,)
            ) as cur:
                row = await cur.fetchone()
            if row is None or row["status"] == "active" or row["superseded_by"] is None:
                break
            memory_id = row["superseded_by"]
        if row is None or row["status"] != "active":
            return
        text = memory_index_text(
            row["content"], row["source_text"], await replaced_words(conn, row["owner"], memory_id), row_cues(row)
        )
        await conn.execute("UPDATE memories_fts SET text = ? WHERE rowid = ?", (text, memory_id))
        self.db.bump(INDEX)

    @_in_transaction
    async def delete(self, memory_id: int, *, conn: aiosqlite.Connection | None = None) -> None:
        """Erase a memory for good (the user's right to have it gone); call
        :meth:`purge_erased` once the erasing transaction has committed."""
        assert conn is not None  # opened by @_in_transaction when not given
        async with conn.execute(
            "SELECT owner, tier, category, content, superseded_by FROM memories WHERE id = ?", (memory_id,)
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory with id {memory_id}")
        content = row["content"]
        self.db.bump(INDEX)
        if is_group_owner(row["owner"]):
            self.db.bump(SPEAKERS)  # a group's note erased: who it named goes with it
        await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        await conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        if row["superseded_by"] is not None:  # its words leave the fact that replaced it
            await self._reindex_one(conn, row["superseded_by"])
        await _scrub_log(conn, memory_id, content)
        await _drop_cached_vectors(conn, [content])
        self._erased.add(memory_id)
        self._projects.pop(row["owner"], None)
        if _in_core(row["tier"], row["category"]) or row["superseded_by"] is not None:
            self.db.bump(TIER1)

    async def purge_erased(self) -> None:
        """Make erasures final on disk. FTS5 keeps a deleted row's words in
        its index segments until they merge (SQLite 3.42's secure-delete
        option is newer than many Pythons' SQLite), and the merge leaves
        dead copies in the pages it rewrites: merge the segments, then
        rewrite the file (:meth:`Database.compact`). Erasing callers run
        this after their transaction commits."""
        async with self.db.transaction() as conn:
            for table in ("memories_fts", "events_fts"):
                await conn.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")
        await self.db.compact()
        erased, self._erased = sorted(self._erased), set()
        for listener in self._erase_listeners:
            listener(erased)

    def on_erased(self, listener: Callable[[Sequence[int]], object]) -> None:
        """Call ``listener(memory_ids)`` from :meth:`purge_erased` with the
        memories erased or reworded since the last one (in-process caches of
        their vectors: :meth:`memory.vectors.VectorIndex.drop`)."""
        self._erase_listeners.append(listener)

    async def forget_owner(self, owner: str) -> dict[str, int]:
        """Erase everything stored about ``owner``: memories of every status,
        events, buffered messages, change-log entries and the import
        ledger's entries of their memory files, in one transaction; then
        :meth:`purge_erased`. Before it, the groups' notes and events drawn
        from their lines and their lines waiting under a group
        (memory/groupnotes.py ``forget_speaker``; ``group notes`` and ``group lines`` counted). Their file store folder is the caller's
        (:meth:`memory.filestore.FileMemory.forget_all`), before this."""
        counts: dict[str, int] = {}
        # groupnotes imports this module: imported here, not at the top.
        from .groupnotes import forget_speaker

        # First the groups' notes drawn from their lines (their own transaction; purged below).
        said = await forget_speaker(self, owner)
        async with self.db.transaction() as conn:
            self.db.bump(TIER1)
            self.db.bump(INDEX)
            if is_group_owner(owner):  # a group wipe (a member's notes in groups went by delete, above)
                self.db.bump(SPEAKERS)
            await conn.execute(
                "DELETE FROM memories_fts WHERE rowid IN (SELECT id FROM memories WHERE owner = ?)", (owner,)
            )
            await conn.execute(
                "DELETE FROM events_fts WHERE rowid IN (SELECT id FROM daily_events WHERE owner = ?)", (owner,)
            )
            # Other users' rows never point at these, but clear links first so
            # the ON DELETE SET NULL does not depend on row order.
            await conn.execute(
                "UPDATE memories SET superseded_by = NULL WHERE owner = ? AND superseded_by IS NOT NULL", (owner,)
            )
            async with conn.execute("SELECT id, content FROM memories WHERE owner = ?", (owner,)) as cur:
                rows = list(await cur.fetchall())
            await _drop_cached_vectors(conn, [r[1] for r in rows])
            self._erased.update(r[0] for r in rows)
            self.db.bump(ALIASES)
            await conn.execute("DELETE FROM project_aliases WHERE owner = ?", (owner,))
            for table, key in (("memories", "memories"), ("daily_events", "events"), ("memory_log", "log")):
                cur = await conn.execute(f"DELETE FROM {table} WHERE owner = ?", (owner,))
                counts[key] = cur.rowcount
            counts["buffered"] = await drop_owner_lines(conn, owner)
            # migrate imports this module: imported here, not at the top.
            from .migrate import drop_ledger

            await drop_ledger(conn, owner)  # their files' import record (the caller erases the files)
            await drop_zones(conn, owner)  # where they were (memory/zonehistory.py)
        self._zones.pop(owner)
        self._projects.pop(owner, None)
        await self.purge_erased()
        if said["notes"] or said["events"]:
            counts["group notes"] = said["notes"] + said["events"]
        if said["buffered"]:
            counts["group lines"] = said["buffered"]  # their lines (and the replies to them) waiting under a group
        log.info("owner forgotten", owner=logged_owner(owner), **counts)  # a group by its tag
        return counts

    async def lived(self, owner: str, tz: tzinfo | None) -> tzinfo | None:
        """``owner``'s calendar: ``tz`` (their zone now; UTC when None) and the
        zones they were in before, each for the moments said there
        (memory/zonehistory.py); ``tz`` itself when they never moved."""
        if isinstance(tz, Lived):
            return tz
        spans = self._zones.get(owner)
        if spans is None:
            spans = await read_spans(self.db, owner)
            self._zones[owner] = spans
        if self.zone_of is not None:
            if self._gateway_zones is None:
                self._gateway_zones = await read_gateway_spans(self.db)
            if self._gateway_zones and await self._on_gateway_zone(owner):
                spans = fill(spans, self._gateway_zones)  # what they said under gateway.timezone's old zones
        return Lived(tz or UTC, spans) if spans else tz

    async def _on_gateway_zone(self, owner: str) -> bool:
        assert self.zone_of is not None
        try:
            return await self.zone_of(owner) is None
        except ZoneUnread:
            return False  # gateway.db trouble, said where it was read: their own spans alone date them
        except Exception as exc:  # gateway.db trouble: their own spans alone date them, as before
            log.warning("user time zone not read", owner=owner, **error_fields(exc))
            return False

    async def gateway_zone(self, tz: tzinfo, *, at: datetime) -> bool:
        """The gateway starts on ``tz``: the last run's zone, when another,
        is kept for those who set none (memory/zonehistory.py). True when it was."""
        changed = await gateway_started(self.db, tz, at=at)
        self._gateway_zones = None
        return changed

    async def zone_changed(self, owner: str, before: tzinfo, *, since: str, at: datetime) -> None:
        """``owner`` left ``before`` (in force since ``since``; "" unknown) at ``at``."""
        await record_change(self.db, owner, before, since=since, at=at)
        self._zones.pop(owner)

    async def zone_named(self, owner: str, gateway: tzinfo, *, at: datetime) -> None:
        """``owner``, on the gateway's zone (``gateway`` today) since a reset,
        names their own at ``at``: the gap keeps the gateway's days
        (:func:`memory.zonehistory.record_return`)."""
        await record_return(self.db, owner, gateway, at=at)
        self._zones.pop(owner)

    def owners_changed(self, *owners: str) -> None:
        """Rows of ``owners`` changed hands outside this engine's own write
        methods (:mod:`memory.merge`): drop what is cached about them. Call
        inside the writing transaction, as :meth:`Database.bump` wants."""
        self.db.bump(TIER1)
        self.db.bump(INDEX)
        self.db.bump(ALIASES)
        self.db.bump(SPEAKERS)  # merge renames the groups' speakers too
        for owner in owners:
            self._projects.pop(owner, None)
            self._zones.pop(owner)

    # -- Tier 1 / Tier 2 reads ------------------------------------------------

    async def get(self, memory_id: int) -> Memory | None:
        row = await self.db.fetchone("SELECT * FROM memories WHERE id = ?", (memory_id,))
        return row_to_memory(row) if row else None

    async def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.db.fetchall(f"SELECT * FROM memories WHERE id IN ({marks})", list(ids))
        return {r["id"]: row_to_memory(r) for r in rows}

    async def find_same(self, owner: str, content: str) -> Memory | None:
        """An active memory of ``owner`` with the same wording, if any."""
        row = await self.db.fetchone(
            "SELECT * FROM memories WHERE owner = ? AND content_hash = ? AND status = 'active' ORDER BY id LIMIT 1",
            (owner, content_hash(content)),
        )
        return row_to_memory(row) if row else None

    async def list_memories(
        self,
        owner: str | None = None,
        *,
        tier: int | None = None,
        status: Status | str | None = Status.ACTIVE,
        project: str | None = None,
        category: Category | str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[Memory]:
        where: list[str] = []
        args: list[object] = []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if tier is not None:
            where.append("tier = ?")
            args.append(tier)
        if status is not None:
            where.append("status = ?")
            args.append(Status(status).value)
        if project is not None:
            where.append("project = ?")
            args.append(project)
        if category is not None:
            where.append("category = ?")
            args.append(Category(category).value)
        sql = "SELECT * FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
        rows = await self.db.fetchall(sql, [*args, limit, offset])
        return [row_to_memory(r) for r in rows]

    async def profile(self, owner: str, *, limit: int = 100, include_global: bool = True) -> list[Memory]:
        """Tier 1 of ``owner`` (plus ``_global``), most important first."""
        owners = [owner, GLOBAL_OWNER] if include_global and owner != GLOBAL_OWNER else [owner]
        marks = ",".join("?" * len(owners))
        # On the loop thread (Database.reader): Tier 1 is small and indexed,
        # and a thread hop cost a user's first prompt ~2 ms.
        rows = await self.db.reader.execute_fetchall(
            f"""SELECT * FROM memories
                WHERE tier = 1 AND status = 'active' AND owner IN ({marks})
                ORDER BY importance DESC, updated_at DESC, id DESC LIMIT ?""",
            [*owners, limit],
        )
        return [row_to_memory(r) for r in rows]

    async def profile_markdown(
        self, owner: str, *, limit: int = 100, include_global: bool = True, ids: bool = False,
        tz: tzinfo | None = None,
    ) -> str:
        """Tier 1 as a markdown list for the system prompt ('' when empty);
        with ``ids``, each line starts with its citation (``- [m9] ...``), so
        the model can name an entry to forget, and the day it was said, on
        the calendar of ``tz`` (the user's; UTC's when None).

        Cached per owner (the default ``limit`` only) until a tier-1 row
        changes here or another process writes the file (within a second)."""
        return (await self._profile_shown(owner, limit, include_global, ids, tz))[0]

    async def replaced_facts(
        self, owner: str, ids: Sequence[int], *, private: bool = True, chat: Chat | None = None
    ) -> dict[int, tuple[str, str]]:
        """For each of ``ids`` that replaced one of ``owner``'s Tier 2 facts
        (``updates``: the user changed their mind, not a merge, which
        archives), the newest it replaced as (created_at, words). Never a
        credential: an old password stays out of the prompt. Not for a fact
        drawn from an edited message (``(edited) ...``): the words it
        replaced were a slip, never true, so no history. In a group
        (``private`` False) only one that group may read (memory/scope.py):
        the decision it heard before, never one said elsewhere."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.db.fetchall(
            f"SELECT o.superseded_by, o.content, o.created_at FROM memories o JOIN memories n ON n.id = o.superseded_by "
            f"WHERE o.owner = ? AND o.status = 'superseded' AND o.tier = 2 AND o.category <> 'credential' "
            f"{shown_in(private=private, chat=chat, prefix='o.')} "
            f"AND o.superseded_by IN ({marks}) AND instr(n.source_text, '(edited) ') = 0 ORDER BY o.created_at, o.id",
            (owner, *ids),
        )
        return {r["superseded_by"]: (r["created_at"], r["content"]) for r in rows}  # the newest wins

    async def profile_ids(self, owner: str, *, include_global: bool = True, ids: bool = False,
                          tz: tzinfo | None = None) -> frozenset[int]:
        """The Tier 1 entries :meth:`profile_markdown` shows with the same
        arguments (what its token budget left out is not among them): recall
        for a prompt that holds them need not return them again. From the
        same cache: no statement when the profile is cached."""
        return (await self._profile_shown(owner, 100, include_global, ids, tz))[1]

    async def _profile_shown(
        self, owner: str, limit: int, include_global: bool, ids: bool, tz: tzinfo | None = None
    ) -> tuple[str, frozenset[int]]:
        tz = await self.lived(owner, tz)  # each entry's day where it was said
        key = (owner, include_global, ids, _zone_key(tz))
        now = self.clock.now()
        today = (now.astimezone(tz) if tz is not None else now).date()
        stamp = await self.db.stamp(TIER1)
        cached = self._profiles.get(key) if limit == 100 else None
        if cached is not None and cached[0] == (stamp, today):  # a new day may have passed an entry's date
            self._profiles.move_to_end(key)
            return cached[1], cached[2]
        # An entry about a day well past leaves the block (memory/pastplan.py).
        items = [m for m in await self.profile(owner, limit=limit, include_global=include_global)
                 if not passed(m.content, _said_on(m, tz), today)]
        # A group reads the shared profile (owner _global): no member's own facts.
        newer = await self.newer_facts(owner, items) if owner != GLOBAL_OWNER else []
        newer = [m for m in newer if not passed(m.content, _said_on(m, tz), today)]

        def line_of(m: Memory) -> str:
            return (f"- [m{m.id} · {_said_on(m, tz)}] " if ids else "- ") + truncate(m.content, PROFILE_ENTRY_CHARS)

        # The newer facts first within the budget: they are what the user
        # just said about themselves, and the prompt's rule lets the later
        # of two disagreeing memories hold; the entries take the rest.
        # A newer fact that replaced one shows it under it, dated and marked
        # as no longer true, as recall would have (docs/RETRIEVAL.md §6a),
        # which leaves it out now. Only here: a group's block has no newer
        # facts; never a credential (replaced_facts); within the budget.
        old = await self.replaced_facts(owner, [m.id for m in newer])
        after: list[str] = []
        shown: list[int] = []
        used = 0
        for m in newer:
            line = line_of(m)
            if m.id in old:
                day, words = old[m.id]
                more = f"{line}\n  (it replaced what was said on {local_day(day, tz)}, no longer true: " \
                       f"{truncate(words, PROFILE_ENTRY_CHARS // 2)})"
                line = more if used + estimate_tokens(more) <= PROFILE_TOKEN_BUDGET else line
            if used + estimate_tokens(line) > PROFILE_TOKEN_BUDGET:
                break
            after.append(line)
            shown.append(m.id)
            used += estimate_tokens(line)
        lines: list[str] = []
        for m in items:  # most important first: what the budget leaves out matters least
            line = line_of(m)
            cost = estimate_tokens(line)
            if used + cost > PROFILE_TOKEN_BUDGET:
                break
            lines.append(line)
            shown.append(m.id)
            used += cost
        # Recall leaves out what the block shows (a Tier 2 fact an entry
        # states in the same words is still recalled: with the fact it
        # replaced under it, docs/RETRIEVAL.md §6a, which an entry lacks).
        text, held = "\n".join([*lines, *after]), frozenset(shown)
        if limit == 100 and await self.db.stamp(TIER1) == stamp:  # nothing changed while reading
            self._profiles[key] = ((stamp, today), text, held)
            self._profiles.move_to_end(key)
            while len(self._profiles) > PROFILE_CACHE_SIZE:
                self._profiles.popitem(last=False)
        return text, held

    async def newer_facts(self, owner: str, entries: Sequence[Memory] = ()) -> list[Memory]:
        """``owner``'s Tier 2 facts for Core Memory until their weekly
        refresh has read them (:data:`NEWER_CATEGORIES`, written or said
        again since that refresh read: :meth:`refreshed_upto`), newest first;
        not one that ``entries`` (the Tier 1 shown) states in the same words
        or was drawn from. A replaced fact is no longer active: it leaves at once."""
        upto, log_upto = await self.refreshed_upto(owner)
        cats = ",".join("?" * len(NEWER_CATEGORIES))
        # Said again (reinforced) since: the user repeating it is a strong
        # signal, and the row it reinforced is older than the marker.
        rows = await self.db.reader.execute_fetchall(
            f"""SELECT * FROM memories
                WHERE owner = ? AND status = 'active' AND tier = 2
                  AND (id > ? OR id IN (SELECT memory_id FROM memory_log
                                        WHERE owner = ? AND action = 'reinforce' AND id > ?))
                  AND category IN ({cats}) AND importance >= ?
                ORDER BY updated_at DESC, id DESC LIMIT ?""",  # newest said first: a reinforced fact anew
            [owner, upto, owner, log_upto, *NEWER_CATEGORIES, NEWER_MIN_IMPORTANCE, NEWER_LIMIT + len(entries)],
        )
        hashes = {content_hash(e.content) for e in entries}
        cited = {r[2:] for e in entries for r in e.provenance.refs if r.startswith("m:")}
        out = [row_to_memory(r) for r in rows]
        return [m for m in out if str(m.id) not in cited and content_hash(m.content) not in hashes][:NEWER_LIMIT]

    async def refreshed_upto(self, owner: str) -> tuple[int, int]:
        """What ``owner``'s last weekly refresh read, as (the newest memory
        id, the newest change-log id) when it read: the facts written, or
        said again, since, it has not read. Its ``profile_read`` log line
        keeps them; one that failed (the model erred) writes none, so its
        facts stay. With none, the last run that logged one cutoff for all
        (before per-user lines), else 0. Cached until a refresh ends (:data:`REFRESH`)."""
        stamp = await self.db.stamp(REFRESH)
        if self._refreshed is None or self._refreshed[0] != stamp:
            self._refreshed = (stamp, {})
        known = self._refreshed[1]
        if owner in known:
            return known[owner]
        row = await self.db.fetchone(
            "SELECT detail FROM memory_log WHERE owner = ? AND action = 'profile_read' AND job = 'weekly_compress' "
            "ORDER BY id DESC LIMIT 1", (owner,),
        )
        try:
            got = json.loads(row["detail"]) if row is not None else None
            upto = (int(got["newest_id"]), int(got["log_id"])) if got is not None else await self._run_upto()
        except (ValueError, TypeError, KeyError):
            upto = await self._run_upto()
        if len(known) >= self._owners_kept:
            known.clear()
        known[owner] = upto
        return upto

    async def _run_upto(self) -> tuple[int, int]:
        """The cutoff of the last weekly run that logged one for all users
        (an older version's: its ``run`` line has no ``per_owner``), as
        :meth:`refreshed_upto`: no fact said again counts after it."""
        row = await self.db.fetchone(
            "SELECT id, at, detail FROM memory_log WHERE job = 'weekly_compress' AND action = 'run' "
            "AND json_extract(CASE WHEN json_valid(detail) THEN detail END, '$.per_owner') IS NULL "
            "ORDER BY id DESC LIMIT 1"
        )
        if row is None:
            return 0, 0
        try:
            return int(json.loads(row["detail"])["newest_id"]), int(row["id"])
        except (ValueError, TypeError, KeyError):
            # A run logged before it kept the id: what was said by its end.
            got = await self.db.fetchone("SELECT COALESCE(MAX(id), 0) FROM memories WHERE created_at <= ?",
                                         (row["at"],))
            return (int(got[0]) if got is not None else 0), int(row["id"])

    async def same_words_as(self, owner: str, entries: Sequence[Memory]) -> frozenset[int]:
        """Ids of ``owner``'s active Tier 2 facts worded as one of ``entries``."""
        hashes = list({content_hash(e.content) for e in entries if e.owner == owner})
        if not hashes:
            return frozenset()
        marks = ",".join("?" * len(hashes))
        rows = await self.db.reader.execute_fetchall(
            f"SELECT id FROM memories WHERE owner = ? AND content_hash IN ({marks}) AND tier = 2 AND status = 'active'",
            [owner, *hashes],
        )
        return frozenset(int(r[0]) for r in rows)

    async def known_projects(self, owner: str) -> frozenset[str]:
        """Project partitions ``owner`` (or ``_global``) has memories in,
        and every name of theirs (:meth:`project_aliases`)."""
        cached, aliases = await self.projects_and_aliases(owner)
        return cached | frozenset(aliases) | frozenset(aliases.values()) if aliases else cached

    async def projects_and_aliases(self, owner: str) -> tuple[frozenset[str], dict[str, str]]:
        """Project partitions ``owner`` (or ``_global``) has memories in,
        and :meth:`project_aliases`: for a caller that needs both (recall's
        named projects), one read of each."""
        cached = self._projects.get(owner)
        if cached is None:
            rows = await self.db.fetchall(
                "SELECT DISTINCT project FROM memories WHERE owner IN (?, ?) AND status = 'active'",
                (owner, GLOBAL_OWNER),
            )
            cached = frozenset(r["project"] for r in rows if r["project"] and r["project"] != GLOBAL_OWNER)
            self._projects[owner] = cached
        return cached, await self.project_aliases(owner)

    async def project_aliases(self, owner: str) -> dict[str, str]:
        """alias -> current name of ``owner``'s projects (and ``_global``'s;
        the owner's win), read again when any process changed them."""
        stamp = await self.db.stamp(ALIASES)
        cached = self._aliases.get(owner)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        rows = await self.db.fetchall(
            "SELECT alias, project FROM project_aliases WHERE owner IN (?, ?) ORDER BY owner = ?, alias",
            (owner, GLOBAL_OWNER, owner),
        )
        found = {r["alias"]: r["project"] for r in rows}
        self._aliases[owner] = (stamp, found)
        return found

    async def owned_project_aliases(self, owner: str) -> list[tuple[str, str]]:
        """``owner``'s own aliases (not ``_global``'s), as (alias, current name)."""
        rows = await self.db.fetchall(
            "SELECT alias, project FROM project_aliases WHERE owner = ? ORDER BY alias", (owner,)
        )
        return [(r["alias"], r["project"]) for r in rows]

    @_in_transaction
    async def set_project_alias(
        self, owner: str, old: str, new: str, *, source: str, conn: aiosqlite.Connection | None = None
    ) -> Aliased:
        """``owner``'s project ``old`` is now ``new``: the old name's facts
        are filed under the new one and recall counts the old name for it
        (memory/projects.py). Returns both as slugs and how many facts
        moved; ``ValueError`` for a name that is none or a rename to itself."""
        assert conn is not None  # opened by @_in_transaction when not given
        self.db.bump(ALIASES)
        old, new = await set_alias(conn, owner, old, new, source=source, at=self.now())
        moved = await move_facts(conn, owner, old, new)
        if moved:
            self._moved_projects(owner)
            await self._reindex_filed(conn, owner, new)  # found by the name they are filed under
        return Aliased(old, new, moved)

    @_in_transaction
    async def remove_project_alias(
        self, owner: str, alias: str, *, conn: aiosqlite.Connection | None = None
    ) -> Unaliased | None:
        """Drop ``owner``'s alias, filing the facts its rename moved under
        the alias's name again (memory/projects.py); None when there was none."""
        assert conn is not None  # opened by @_in_transaction when not given
        self.db.bump(ALIASES)
        gone = await remove_alias(conn, owner, alias)
        if gone is not None and gone.moved:
            self._moved_projects(owner)
            await self._reindex_filed(conn, owner, gone.name)
        return gone

    async def _reindex_filed(self, conn: aiosqlite.Connection, owner: str, project: str) -> None:
        """Rewrite the FTS rows of ``owner``'s active facts filed under
        ``project`` (moved there: the project's name is one of their cues)."""
        async with conn.execute(
            "SELECT id FROM memories WHERE owner = ? AND project = ? AND status = 'active'", (owner, project)
        ) as cur:
            ids = [r[0] for r in await cur.fetchall()]
        for mid in ids:
            await self._reindex_one(conn, mid)

    def _moved_projects(self, owner: str) -> None:
        """Caches after ``owner``'s facts changed project."""
        self.db.bump(INDEX)
        self.db.bump(TIER1)  # Core Memory entries of the project moved too
        if owner == GLOBAL_OWNER:
            self._projects.clear()  # every owner's known projects include _global's
        else:
            self._projects.pop(owner, None)

    async def owners(self) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT owner FROM memories UNION SELECT owner FROM daily_events "
            "UNION SELECT owner FROM extraction_buffer ORDER BY 1"
        )
        return [r[0] for r in rows]

    # -- access reinforcement (off the reply path) -------------------------

    def note_access(self, ids: Iterable[int]) -> None:
        """Remember that these memories were shown; written later in a batch."""
        self._pending_access.update(ids)

    async def flush_access(self) -> int:
        if not self._pending_access:
            return 0
        pending, self._pending_access = self._pending_access, Counter()
        now = self.now()
        try:
            async with self.db.transaction() as conn:
                await conn.executemany(
                    "UPDATE memories SET last_accessed = ?, access_count = access_count + ? WHERE id = ?",
                    [(now, n, mid) for mid, n in pending.items()],
                )
        except BaseException:
            self._pending_access.update(pending)  # keep them for the next try
            raise
        return len(pending)

    async def run_access_flusher(self, interval: float = 5.0) -> None:
        """Background task: write queued access counts every ``interval`` s."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.flush_access()
            except sqlite3.Error as exc:
                log.warning("access flush failed; will retry", **error_fields(exc))

    @_in_transaction
    async def move_chat(
        self, channel: str, old_chat: str, new_chat: str, *, conn: aiosqlite.Connection | None = None
    ) -> int:
        """A chat that got a new id (a Telegram group upgraded to a
        supergroup): its memories, events and buffered turns name the new
        id, so the group still reads what was said in it (memory/scope.py).
        The number of memories moved."""
        assert conn is not None  # opened by @_in_transaction when not given
        said_there = ("CASE WHEN json_valid(provenance) THEN json_extract(provenance, '$.channel') = ?"
                      " AND json_extract(provenance, '$.chat_id') = ? ELSE 0 END")
        moved = 0
        for table in ("memories", "daily_events"):
            cur = await conn.execute(
                f"UPDATE {table} SET provenance = json_set(provenance, '$.chat_id', ?) WHERE {said_there}",
                (new_chat, channel, old_chat),
            )
            moved = moved or cur.rowcount
        # What members shared with the group, and where its newer fact stands
        # for a shared one (memory/scope.py), name it by place: renamed too,
        # or the shared fact is no longer read there and the outdated one is.
        was, now = f"{channel}:{old_chat}", f"{channel}:{new_chat}"
        async with conn.execute(
            "SELECT id, provenance FROM memories WHERE json_valid(provenance) AND instr(provenance, ?) > 0",
            (json.dumps(was),),
        ) as cur:
            named = list(await cur.fetchall())
        for row in named:
            p = Provenance.from_json(row["provenance"])
            shared = tuple(now if s == was else s for s in p.shared)
            replaced_in = tuple((now if g == was else g, i) for g, i in p.replaced_in)
            if (shared, replaced_in) != (p.shared, p.replaced_in):
                await conn.execute("UPDATE memories SET provenance = ? WHERE id = ?",
                                   (replace(p, shared=tuple(dict.fromkeys(shared)), replaced_in=replaced_in).to_json(),
                                    row["id"]))
        await conn.execute("UPDATE daily_events SET chat_id = ? WHERE channel = ? AND chat_id = ?",
                           (new_chat, channel, old_chat))
        await conn.execute("UPDATE extraction_buffer SET chat_id = ? WHERE channel = ? AND chat_id = ?",
                           (new_chat, channel, old_chat))
        return moved

    # -- Tier 3 -------------------------------------------------------------

    @_in_transaction
    async def add_event(
        self,
        owner: str,
        event_date: str,
        summary: str,
        *,
        channel: str = "unknown",
        chat_id: str = "",
        raw_tokens: int = 0,
        provenance: Provenance | None = None,
        compressed: bool = False,
        conn: aiosqlite.Connection | None = None,
    ) -> Event:
        assert conn is not None  # opened by @_in_transaction when not given
        summary = summary.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "").strip()
        if not summary:
            raise ValueError("event summary is empty")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", event_date):
            raise ValueError(f"event_date must be YYYY-MM-DD, got {event_date!r}")
        cur = await conn.execute(
            """INSERT INTO daily_events (owner, event_date, channel, chat_id, summary, raw_tokens,
                   is_compressed, provenance, created_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                owner,
                event_date,
                channel,
                chat_id,
                summary,
                raw_tokens,
                int(compressed),
                (provenance or Provenance()).to_json(),
                self.now(),
            ),
        )
        eid = cur.lastrowid
        assert eid is not None
        await conn.execute(
            "INSERT INTO events_fts(rowid, owner, text) VALUES (?, ?, ?)",
            (eid, owner_key(owner), index_text(summary)),
        )
        self.db.bump(INDEX)
        async with conn.execute("SELECT * FROM daily_events WHERE id = ?", (eid,)) as c2:
            row = await c2.fetchone()
        assert row is not None
        return row_to_event(row)

    async def events(
        self,
        owner: str,
        *,
        date_from: str | None = None,
        date_to: str | None = None,
        uncompressed_only: bool = False,
        limit: int = 1000,
    ) -> list[Event]:
        where, args = ["owner = ?"], [owner]
        if date_from:
            where.append("event_date >= ?")
            args.append(date_from)
        if date_to:
            where.append("event_date <= ?")
            args.append(date_to)
        if uncompressed_only:
            where.append("is_compressed = 0")
        rows = await self.db.fetchall(
            f"SELECT * FROM daily_events WHERE {' AND '.join(where)} ORDER BY event_date, id LIMIT ?",
            [*args, limit],
        )
        return [row_to_event(r) for r in rows]

    @_in_transaction
    async def mark_events_compressed(self, ids: Sequence[int], *, conn: aiosqlite.Connection | None = None) -> None:
        assert conn is not None  # opened by @_in_transaction when not given
        await conn.executemany("UPDATE daily_events SET is_compressed = 1 WHERE id = ?", [(i,) for i in ids])

    @_in_transaction
    async def delete_event(self, event_id: int, *, conn: aiosqlite.Connection | None = None) -> None:
        assert conn is not None  # opened by @_in_transaction when not given
        async with conn.execute("SELECT owner FROM daily_events WHERE id = ?", (event_id,)) as c:
            row = await c.fetchone()
        if row is not None and is_group_owner(row[0]):
            self.db.bump(SPEAKERS)  # a group's day erased: who it named goes with it
        cur = await conn.execute("DELETE FROM daily_events WHERE id = ?", (event_id,))
        if cur.rowcount == 0:
            raise MemoryNotFound(f"no event with id {event_id}")
        await conn.execute("DELETE FROM events_fts WHERE rowid = ?", (event_id,))
        self.db.bump(INDEX)

    # -- overview -----------------------------------------------------------

    async def backlog(self, stuck_after: int = 5) -> Backlog:
        """How much waits for extraction; one pass over the buffer's rows,
        which stay few (a flush deletes them), on the reader connection."""
        row = await self.db.fetchone(
            f"""SELECT COALESCE(SUM(w), 0), COALESCE(SUM(w AND attempts > 0), 0),
                       COALESCE(SUM(w AND attempts >= ?), 0), MIN(CASE WHEN w THEN created_at END),
                       COALESCE(SUM(NOT w), 0)
                  FROM (SELECT set_aside_at IS NULL AS w, attempts, created_at
                          FROM extraction_buffer WHERE {NOT_GONE})""",
            (stuck_after,),
        )
        if row is None:
            return Backlog(0, 0, 0, None)
        return Backlog(lines=row[0], retrying=row[1], stuck=row[2], oldest=row[3], set_aside=row[4])

    async def stats(self, owner: str | None = None) -> Stats:
        w, a = ("WHERE owner = ?", [owner]) if owner is not None else ("", [])

        async def grouped(col: str) -> dict[str, int]:
            rows = await self.db.fetchall(f"SELECT {col}, COUNT(*) FROM memories {w} GROUP BY {col}", a)
            return {str(r[0]): r[1] for r in rows}

        by_status = await grouped("status")
        active_w = (w + " AND" if w else "WHERE") + " status = 'active'"
        by_tier = {
            str(r[0]): r[1]
            for r in await self.db.fetchall(f"SELECT tier, COUNT(*) FROM memories {active_w} GROUP BY tier", a)
        }
        by_cat = {
            r[0]: r[1]
            for r in await self.db.fetchall(f"SELECT category, COUNT(*) FROM memories {active_w} GROUP BY category", a)
        }
        by_src = {
            r[0]: r[1]
            for r in await self.db.fetchall(f"SELECT source, COUNT(*) FROM memories {active_w} GROUP BY source", a)
        }
        ev = await self.db.fetchone(
            f"SELECT COUNT(*), COALESCE(SUM(is_compressed = 0), 0) FROM daily_events {w}", a
        )
        buf = await self.db.fetchone(
            f"SELECT COUNT(*), COALESCE(SUM(set_aside_at IS NOT NULL), 0) FROM extraction_buffer {w}", a)
        owners = await self.db.fetchone(
            "SELECT COUNT(*) FROM (SELECT owner FROM memories UNION SELECT owner FROM daily_events)"
        )
        vw = " AND m.owner = ?" if owner is not None else ""
        vectors = {
            r[0]: r[1]
            for r in await self.db.fetchall(
                f"""SELECT v.model, COUNT(*) FROM memory_vectors v JOIN memories m ON m.id = v.memory_id
                     WHERE m.status = 'active' AND v.content_hash = m.content_hash{vw} GROUP BY v.model""",
                a,
            )
        }
        return Stats(
            total=sum(by_status.values()),
            by_status=by_status,
            by_tier=by_tier,
            by_category=by_cat,
            by_source=by_src,
            events=ev[0] if ev else 0,
            events_uncompressed=ev[1] if ev else 0,
            buffered=buf[0] if buf else 0,
            owners=owners[0] if owners else 0,
            vectors=vectors,
            set_aside=buf[1] if buf else 0,
        )
