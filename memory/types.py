"""Value types at the memory package's boundaries."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import tzinfo
from enum import StrEnum
from typing import Any

from .clock import local_day
from .origin import origin

__all__ = [
    "GLOBAL_OWNER",
    "Category",
    "ErasedAll",
    "Event",
    "Hit",
    "Memory",
    "MemoryOverview",
    "NewMemory",
    "OwnerData",
    "OwnerIndex",
    "Provenance",
    "Source",
    "Status",
]

GLOBAL_OWNER = "_global"
"""Owner of memories every user may see (e.g. facts about the deployment)."""


class Category(StrEnum):
    """Decay classes of seed 8.2."""

    IDENTITY = "identity"
    CONFIG = "config"
    CREDENTIAL = "credential"
    DECISION = "decision"
    SOLUTION = "solution"
    EVENT = "event"
    CONVERSATION = "conversation"
    TEMP = "temp"
    DEBUG = "debug"


class Source(StrEnum):
    EXTRACTION = "extraction"
    COMPRESSION = "compression"
    MANUAL = "manual"
    MIGRATION = "migration"


class Status(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"


@dataclass(frozen=True)
class Provenance:
    """Where a memory came from, so an answer can cite it.

    ``refs`` holds source-specific ids: buffered message ids, event ids, a
    migrated file name, a dataset's dialogue id.
    """

    channel: str = ""
    chat_id: str = ""
    message_ids: tuple[str, ...] = ()
    session: str = ""
    date_from: str = ""
    date_to: str = ""
    refs: tuple[str, ...] = ()
    group: bool | None = None
    """Said in a group chat (a Feishu chat id does not tell; memory/scope.py).
    None: not recorded (a row from before it was, or of no chat); False is
    written out, so a Feishu fact from before is told from a private one."""
    shared: tuple[str, ...] = ()
    """Groups its owner let read it (``/share``, memory/sharing.py):
    ``channel:chat_id``, or ``*`` for every group they ask in."""
    replaced_in: tuple[tuple[str, int], ...] = ()
    """``(channel:chat_id, id)``: in that group, where it was shared, a
    newer fact said there (``id``) replaced it; the group reads that one
    instead while it exists, the owner's other chats still read this one
    (memory/scope.py, memory/consolidate.py)."""
    speakers: tuple[str, ...] = ()
    """A group's note (memory/groupnotes.py): the owner ids of the members
    whose lines it was drawn from (or who saved it), for their erasure."""
    said_by: tuple[str, ...] = ()
    """Their names as the group knew them, for the note's citation."""

    def to_json(self) -> str:
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
             if v or (k == "group" and v is False)}
        return json.dumps(d, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Provenance:
        if not text:
            return cls()
        d: dict[str, Any] = json.loads(text)
        for k in ("message_ids", "refs", "shared", "speakers", "said_by"):
            if k in d:
                d[k] = tuple(str(x) for x in d[k])
        if "group" in d:
            d["group"] = d["group"] is True
        if "replaced_in" in d:
            d["replaced_in"] = tuple((str(p[0]), int(p[1])) for p in d["replaced_in"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class NewMemory:
    """What a writer hands the engine; the engine assigns id and times."""

    owner: str
    content: str
    tier: int = 2
    category: Category = Category.EVENT
    importance: float = 0.5
    project: str = GLOBAL_OWNER
    topic: str = "_general"
    source: Source = Source.EXTRACTION
    provenance: Provenance = field(default_factory=Provenance)
    source_text: str = ""
    """The words the memory was drawn from (the message a fact was extracted
    from), indexed with it and never shown: a fact is a paraphrase, and people
    ask later in their own words (docs/RETRIEVAL.md §6a)."""
    search_terms: tuple[str, ...] = ()
    """Words to find it by, in both languages (memory/cues.py), indexed at a
    low weight and never shown as the memory; cleaned by the engine."""


@dataclass(frozen=True)
class Memory:
    id: int
    owner: str
    tier: int
    project: str
    topic: str
    category: Category
    content: str
    importance: float
    source: Source
    status: Status
    superseded_by: int | None
    provenance: Provenance
    created_at: str
    updated_at: str
    last_accessed: str
    access_count: int
    source_text: str = ""
    search_terms: tuple[str, ...] = ()

    def to_hit(self, score: float = 1.0, *, tz: tzinfo | None = None) -> Hit:
        """As a hit dated on ``tz``'s calendar (the owner's zone; UTC's when None)."""
        return Hit(
            kind="memory",
            id=self.id,
            content=self.content,
            score=score,
            date=local_day(self.created_at, tz),
            category=self.category.value,
            project=self.project,
            topic=self.topic,
            source=self.source.value,
            provenance=self.provenance,
            owner=self.owner,
        )


@dataclass(frozen=True)
class Event:
    """A Tier 3 daily event (a conversation summary)."""

    id: int
    owner: str
    event_date: str
    channel: str
    chat_id: str
    summary: str
    raw_tokens: int
    is_compressed: bool
    provenance: Provenance
    created_at: str


@dataclass(frozen=True)
class Hit:
    """A retrieved memory or event, ready to be shown with a citation."""

    kind: str  # "memory" (Tier 1/2) or "event" (Tier 3)
    id: int
    content: str
    score: float
    date: str  # YYYY-MM-DD the fact was recorded / the event happened
    category: str = ""
    project: str = ""
    topic: str = ""
    source: str = ""
    provenance: Provenance = field(default_factory=Provenance)
    # Holds none of the query's words: said next to a hit in the same
    # conversation and brought in as its context (memory/retrieval.py step 5).
    neighbour: bool = False
    # The newest fact this one replaced (the user changed their mind), as
    # (day it was said, its words): shown under it, marked as no longer true.
    replaced: tuple[str, str] | None = None
    # On the last chat summary recall lists for a period the message named:
    # how many more of that period's days had chats (memory_search has them).
    more_days: int = 0
    # Whose row it is (a group's notes are its group's: memory/groupnotes.py); '' when not told.
    owner: str = ""
    # The title of the group it was said in, when known and read elsewhere (a
    # private chat: "from the group chat "Family" on Telegram"); '' otherwise.
    title: str = ""

    @property
    def ref(self) -> str:
        return f"{'m' if self.kind == 'memory' else 'e'}{self.id}"

    def citation(self, *, zh: bool = False) -> str:
        """``[m12 · 2026-11-20 · from a chat on Telegram]``: the id the user
        can ``/forget``, the day it was recorded, and where it came from in
        words for a person (:func:`memory.origin.origin`; Chinese with
        ``zh``), never internal refs the model could repeat to them."""
        bits = [self.ref, self.date, origin(self.source, self.provenance, zh=zh, title=self.title)]
        return "[" + " · ".join(b for b in bits if b) + "]"


@dataclass(frozen=True)
class MemoryOverview:
    """What a user's ``/memory`` shows (:meth:`MemoryBackend.overview`):
    what is always in their prompt, the newest facts, and how much there is."""

    profile: list[Hit]  # Core Memory (Tier 1), or MEMORY.md for the file store
    recent: list[Hit]  # newest first: Tier 2 facts, or the file store's latest logged lines
    facts: int  # active facts in all (profile included)
    events: int  # daily events (Tier 3), or logged lines
    waiting: int = 0  # the user's own lines still to be learnt (set-aside ones not counted)
    # Groups' notes and days drawn from their lines (memory/groupnotes.py):
    # not theirs to list, but their erasure takes them.
    group_notes: int = 0


@dataclass(frozen=True)
class ErasedAll:
    """What :meth:`MemoryBackend.forget_all` erased of one user: everything
    memory kept about them, counted by kind."""

    memories: int = 0  # facts and profile entries, of every status (older versions too)
    events: int = 0  # daily events (Tier 3)
    waiting: int = 0  # lines still waiting for extraction
    files: int = 0  # the file store's files (MEMORY.md, daily logs)
    group_notes: int = 0  # groups' notes and days drawn from their lines (memory/groupnotes.py)


@dataclass(frozen=True)
class OwnerData:
    """Everything memory keeps about one owner, for an export
    (:meth:`MemoryBackend.owner_data`): their rows only, never ``_global``'s
    or another user's. The file store's MEMORY.md lines come as Tier 1
    memories and its logged lines as events, as ``myclaw memory migrate``
    would import them."""

    owner: str
    memories: list[Memory]  # every tier and status, oldest first
    events: list[Event]  # by date, then id
    waiting: int = 0  # lines still waiting for extraction
    set_aside: int = 0  # lines extraction set aside (too long for the memory model): kept, not waiting


@dataclass(frozen=True)
class OwnerIndex:
    """What an export must know of one owner's rows before it writes a line
    (:meth:`MemoryBackend.owner_index`), small however much is kept: the ids
    in the file's order (its "built on m1, m2" names only rows it shows),
    the words credentials were drawn from (lines saying them are hidden),
    how many rows are in Chinese (the file's language); the rows themselves
    come in pages (:meth:`MemoryBackend.owner_rows`)."""

    owner: str
    memory_ids: tuple[int, ...]  # every tier and status, by tier, project, then id
    event_ids: tuple[int, ...]  # by date, then id
    credential_sources: tuple[str, ...] = ()  # the source text of each credential fact
    chinese: int = 0  # memories and events whose words hold a CJK ideograph
    waiting: int = 0  # lines still waiting for extraction
    set_aside: int = 0  # lines extraction set aside (too long for the memory model): kept, not waiting
