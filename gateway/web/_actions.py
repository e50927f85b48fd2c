"""What the memory page and its JSON API can do, in one place.

Both the HTML routes and ``/memory/api/...`` call these methods, so the two
cannot drift apart. The semantics follow ``myclaw memory`` (the CLI):

* ``add`` keeps an existing identical memory instead of adding a second
  one; a hand-added fact defaults to ``identity`` (tier 1) or ``decision``
  (tier 2) so it does not fade in weeks, importance 0.7, source ``manual``;
* ``archive`` is recoverable (``restore``), ``erase`` deletes for good:
  the one row, or with ``cascade`` also its older versions and the Core
  Memory entries built on it, as ``memory_forget`` does
  (:mod:`memory.forgetting`, one implementation for the tool, this page
  and the CLI); single-row stays the default, so an API client or a
  click never erases more than it names; a cascade also drops the lines
  waiting for extraction and (``forget_history``) the conversation history
  messages that said it;
* an action on a memory given together with a user only proceeds when the
  memory is that user's (a stale page cannot change someone else's fact);
* ``unshare`` takes a member's fact back from every group it was shared
  with (``/share``, memory/sharing.py); :meth:`MemoryAdmin.reshare`, its
  undo, puts the same places back only if none was set since;
* an edit and its status change happen in one transaction; an edit of a
  fact's words supersedes the Core Memory entries the weekly refresh built
  on it (they would state the old words in every prompt until then; the
  next refresh writes the profile again), as a replaced fact does
  (:func:`memory.forgetting.retire_entries_on`).

Every change made here is written to the change log (``memory_log``,
``job="web"``) without the memory's text, so ``myclaw memory log`` shows
who changed what even after an erase.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, tzinfo
from typing import Any

from memory import Category, MemoryEngine, MemoryNotFound, NewMemory, Provenance, Source, Status
from memory.clock import ZoneOf, owner_zone
from memory.changelog import LogEntry, read_log, write_log
from memory.extraction import retry_set_aside
from memory.cues import parse_terms
from memory.engine import MAX_CONTENT_CHARS, Stats, row_to_memory
from memory.forgetting import Erasure, erase_planned, plan_erasure, retire_entries_on
from memory.groupnotes import chat_of, forget_group, forget_speaker, group_owner, is_group_owner
from memory.retrieval import Retriever
from memory.service import ImportedFiles
from memory.types import GLOBAL_OWNER, Hit, Memory

__all__ = [
    "EDITABLE",
    "GROUP_NOTE_EDITABLE",
    "AdminError",
    "Conflict",
    "Edited",
    "ForgetHistory",
    "GroupSummary",
    "Invalid",
    "MemoryAdmin",
    "NotFound",
    "SearchResult",
    "UserSummary",
    "editable_values",
    "parse_group",
    "person",
]

JOB = "web"
EDITABLE = ("content", "category", "importance", "tier", "project", "topic", "search_terms")
GROUP_NOTE_EDITABLE = ("content", "search_terms")  # a group's note: its words; who said it is not the page's to change
DEFAULT_IMPORTANCE = 0.7  # as `myclaw memory add`


class AdminError(Exception):
    """A request the page or API cannot carry out; ``status`` is the HTTP code.
    ``key`` and ``fields``: the same words in the page's catalogue
    (gateway/web/_i18n.py ``err_*``), for a page in Chinese; the message
    itself is the API's (English)."""

    status = 400

    def __init__(self, message: str, *, key: str = "", **fields: object) -> None:
        super().__init__(message)
        self.key = key
        self.fields = fields


class Invalid(AdminError):
    status = 400


class NotFound(AdminError):
    status = 404


class Conflict(AdminError):
    """The page's view is stale: an undo over a later change, or used already."""

    status = 409


@dataclass(frozen=True)
class Edited:
    """What :meth:`MemoryAdmin.edit` did: the memory as it is now, and the
    Core Memory entries built on its old words, superseded by it."""

    memory: Memory
    entries: builtins.list[Memory]  # as they were (active) before the edit
    before: Memory | None = None  # the memory before the edit; None when nothing changed


@dataclass(frozen=True)
class UserSummary:
    name: str
    active: int
    archived: int
    superseded: int

    @property
    def total(self) -> int:
        return self.active + self.archived + self.superseded


@dataclass(frozen=True)
class GroupSummary:
    """A group's own memory (memory/groupnotes.py): listed apart from the
    users, never as a person."""

    owner: str  # group:<channel>:<chat_id>
    place: str  # <channel>:<chat_id>, as gateway/chattitles.py names it
    notes: int  # active notes
    rows: int  # notes of every status, days and lines waiting: what erasing it takes


def parse_group(place: str) -> tuple[str, str]:
    """``channel:chat_id`` (or the group owner id) -> (channel, chat_id)."""
    place = place.strip()
    chat = chat_of(place) if is_group_owner(place) else None
    if chat is None:
        channel, sep, chat_id = place.partition(":")
        chat = (channel, chat_id) if sep and channel and chat_id else None
    if chat is None:
        raise Invalid(f"a group is named <channel>:<chat_id>, not {place!r}", key="err_group_name", group=place)
    return chat


@dataclass(frozen=True)
class SearchResult:
    memories: list[tuple[Memory, float]]  # best first, as the bot would recall them
    events: list[Hit]


def person(owner: str) -> str:
    """``owner`` stripped, refused when empty or a group's own memory."""
    return _clean_owner(owner)


def _clean_owner(owner: str) -> str:
    owner = owner.strip()
    if not owner:
        raise Invalid("user is empty", key="err_user_empty")
    if is_group_owner(owner):
        # A group's notes are nobody's: never listed, edited, exported or erased as a person's.
        raise Invalid(f"{owner} is a group's own memory, not a person: see it under Groups",
                      key="err_group_owner", user=owner)
    return owner


def parse_changes(raw: dict[str, Any]) -> dict[str, Any]:
    """Typed, validated edit fields from form or JSON input (only those given)."""
    out: dict[str, Any] = {}
    for key in EDITABLE:
        v = raw.get(key)
        if v is None or (key in ("category", "importance", "tier") and isinstance(v, str) and not v.strip()):
            continue  # not given (a form's empty select / number field)
        if key == "content":
            if not str(v).strip():
                raise Invalid("content is empty", key="err_content_empty")
            # A browser sends a textarea's line breaks as CRLF: the same words, not a change of them.
            text = str(v).replace("\r\n", "\n").replace("\r", "\n").strip()
            if len(text) > MAX_CONTENT_CHARS:  # the engine would cut it without a word
                raise Invalid(f"content is {len(text)} characters; a memory holds at most {MAX_CONTENT_CHARS}",
                              key="err_content_long", n=len(text), most=MAX_CONTENT_CHARS)
            out[key] = text
        elif key == "category":
            try:
                out[key] = Category(str(v).strip())
            except ValueError:
                raise Invalid(f"unknown category {v!r} (one of {', '.join(c.value for c in Category)})",
                              key="err_category", value=repr(v), choices=", ".join(c.value for c in Category)) from None
        elif key == "importance":
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise Invalid(f"importance must be a number, got {v!r}", key="err_importance", value=repr(v)) from None
            if not 0.0 <= f <= 1.0:
                raise Invalid(f"importance must be within [0, 1], got {f}", key="err_importance", value=f)
            out[key] = f
        elif key == "tier":
            if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
                raise Invalid(f"tier must be 1 or 2, got {v!r}", key="err_tier", value=repr(v))  # int() would make true or 1.5 tier 1
            try:
                t = int(v)
            except (TypeError, ValueError, OverflowError):  # OverflowError: JSON Infinity
                raise Invalid(f"tier must be 1 or 2, got {v!r}", key="err_tier", value=repr(v)) from None
            if t not in (1, 2):
                raise Invalid(f"tier must be 1 or 2, got {t}", key="err_tier", value=t)
            out[key] = t
        elif key == "search_terms":  # memory/cues.py; a form's text or the API's list, "" / [] for none
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                v = "\n".join(v)
            if not isinstance(v, str):
                raise Invalid("search_terms must be a string or a list of strings", key="err_terms_type")
            try:
                out[key] = parse_terms(v)
            except ValueError as exc:
                raise Invalid(str(exc), key="err_terms") from None
        else:  # project, topic: empty means the default partition
            out[key] = str(v).strip()
    return out


def _no_terms_on_credential(changes: dict[str, Any], category: Category) -> None:
    if changes.get("search_terms") and changes.get("category", category) is Category.CREDENTIAL:
        raise Invalid("a credential is found by its own words only; give it no search terms",
                      key="err_terms_credential")


def editable_values(m: Memory) -> dict[str, Any]:
    """The fields an edit can change, as :meth:`MemoryEngine.update` takes them."""
    return {"content": m.content, "category": m.category, "importance": m.importance, "tier": m.tier,
            "project": m.project, "topic": m.topic, "search_terms": m.search_terms}


def _filters(owner: str, status: Status | None, category: Category | None, has: str) -> tuple[str, list[object]]:
    where: list[str] = ["owner = ?"]
    args: list[object] = [_clean_owner(owner)]
    if status is not None:
        where.append("status = ?")
        args.append(status.value)
    if category is not None:
        where.append("category = ?")
        args.append(category.value)
    if has:
        # instr, not LIKE: "%", "_" and a backslash typed by the user match as themselves.
        # lower() folds ASCII only; Chinese has no case. A user's rows are
        # few thousand at most: the scan is fine without an index.
        where.append("instr(lower(content), lower(?)) > 0")
        args.append(has)
    return " AND ".join(where), args


ForgetHistory = Callable[[str, Sequence[str]], Awaitable[int]]
"""``(owner, texts) -> how many``: erase the owner's Tier 0 messages that
repeat ``texts`` (the gateway's ``SessionStore.erase_matching``)."""


class MemoryAdmin:
    def __init__(
        self, engine: MemoryEngine, retriever: Retriever | None = None, *, forget_history: ForgetHistory | None = None,
        on_written: Callable[[str], None] | None = None, files: ImportedFiles | None = None, tz: tzinfo = UTC,
    ) -> None:
        self.engine = engine
        self.retriever = retriever or Retriever(engine)
        # Whose calendar a search's "昨天" is read on: the user's /timezone
        # (set once gateway.db is open), else the gateway's, as recall reads it.
        self.tz = tz
        self.zone_of: ZoneOf | None = None
        self.forget_history = forget_history
        # The file store's folders (memory was off once): a cascade erase
        # takes an imported fact's MEMORY.md line too, as /forget does.
        self.files = files
        # Called with the owner after an add, an edit of the words or a
        # restore committed: the gateway wakes the vectorizer, so hybrid
        # recall finds the new words now, not at its next interval.
        self.on_written = on_written
        # The gateway's group wipe (``SqliteMemory.forget_group``): it first
        # drains the buffer writes queued in that process, whose group lines
        # would otherwise land after the erasure. None: memory.db alone.
        self.wipe_group: Callable[[str, str], Awaitable[int]] | None = None
        # The gateway's queued buffer writes, written now (``SqliteMemory.drained``):
        # a group note's erasure takes the lines that repeat it, and one queued
        # would land after it. None: memory.db alone.
        self.drain_lines: Callable[[], Awaitable[None]] | None = None
        # Who the gateway keeps anything of beside memory (its UserData.owners,
        # cached: gateway/web/_kept_owners.py), listed by users() too. None: memory.db alone.
        self.kept_owners: Callable[[], Awaitable[builtins.list[str]]] | None = None

    def _written(self, owner: str) -> None:
        if self.on_written is not None:
            self.on_written(owner)

    # -- reading -----------------------------------------------------------------

    async def users(self) -> list[UserSummary]:
        """Every owner with memories, events or buffered messages, those the
        gateway keeps anything else of (:attr:`kept_owners`), and ``_global``."""
        counts: dict[str, dict[str, int]] = {GLOBAL_OWNER: {}}
        kept = await self.kept_owners() if self.kept_owners is not None else []
        for name in [*await self.engine.owners(), *kept]:
            if not is_group_owner(name):  # a group's own memory: groups(), never a person
                counts.setdefault(name, {})
        rows = await self.engine.db.fetchall("SELECT owner, status, COUNT(*) FROM memories GROUP BY owner, status")
        for r in rows:
            if not is_group_owner(r[0]):
                counts.setdefault(r[0], {})[r[1]] = r[2]
        return [
            UserSummary(name, c.get("active", 0), c.get("archived", 0), c.get("superseded", 0))
            for name, c in sorted(counts.items(), key=lambda kv: (kv[0] != GLOBAL_OWNER, kv[0]))
        ]

    async def groups(self) -> builtins.list[GroupSummary]:
        """Every group with memory of its own (memory/groupnotes.py)."""
        rows = await self.engine.db.fetchall(
            """SELECT owner, SUM(active), COUNT(*) FROM (
                   SELECT owner, status = 'active' AS active FROM memories WHERE owner LIKE 'group:%'
                   UNION ALL SELECT owner, 0 FROM daily_events WHERE owner LIKE 'group:%'
                   UNION ALL SELECT owner, 0 FROM extraction_buffer WHERE owner LIKE 'group:%')
                GROUP BY owner ORDER BY owner""")
        out = []
        for r in rows:
            if (chat := chat_of(r[0])) is not None:
                out.append(GroupSummary(r[0], f"{chat[0]}:{chat[1]}", int(r[1] or 0), int(r[2])))
        return out

    async def forget_group(self, place: str) -> int:
        """Erase one group's own memory for good, as the bot's removal from
        it does (memory/groupnotes.py ``forget_group``): its notes, days and
        waiting lines; its members' own memories stay. How many rows."""
        channel, chat_id = parse_group(place)
        if group_owner(channel, chat_id) not in await self.engine.owners():
            raise NotFound(f"no memory is kept for the group {channel}:{chat_id}", key="err_group_unknown",
                           group=f"{channel}:{chat_id}")
        if self.wipe_group is not None:
            return await self.wipe_group(channel, chat_id)
        return sum((await forget_group(self.engine, channel, chat_id)).values())

    async def group_notes(self, place: str, *, limit: int = 200) -> builtins.list[Memory]:
        """One group's active notes, newest first (memory/groupnotes.py)."""
        owner = group_owner(*parse_group(place))
        rows = await self.engine.db.fetchall(
            "SELECT * FROM memories WHERE owner = ? AND status = 'active' ORDER BY id DESC LIMIT ?", (owner, limit))
        return [row_to_memory(r) for r in rows]

    async def group_note(self, memory_id: int, place: str) -> Memory:
        """The note ``memory_id`` of the group ``place``; refused when it is
        not that group's (a stale page, a person's memory)."""
        channel, chat_id = parse_group(place)
        m = await self.engine.get(memory_id)
        if m is None or m.owner != group_owner(channel, chat_id):
            raise NotFound(f"no note m{memory_id} of the group {channel}:{chat_id}", key="err_group_note",
                           id=memory_id, group=f"{channel}:{chat_id}")
        return m

    async def edit_group_note(self, memory_id: int, place: str, fields: dict[str, Any]) -> Edited:
        """A group note's words (and search terms) changed, as a user's are
        (:meth:`edit`, logged without the words); who said it stays as it was."""
        changes = {k: v for k, v in parse_changes(fields).items() if k in GROUP_NOTE_EDITABLE}
        if not changes:
            raise Invalid("nothing to change: give " + ", ".join(GROUP_NOTE_EDITABLE), key="err_nothing",
                          fields=", ".join(GROUP_NOTE_EDITABLE))
        m = await self.group_note(memory_id, place)
        _no_terms_on_credential(changes, m.category)
        current = editable_values(m)
        changes = {k: v for k, v in changes.items() if v != current[k]}
        if not changes:
            return Edited(m, [])
        entries = await self._changed(m, changes)  # none: Core Memory is a person's, not a group's
        return Edited(await self.group_note(memory_id, place), entries, before=m)

    async def group_note_plan(self, memory_id: int, place: str) -> tuple[Memory, Erasure]:
        """What erasing a group note takes with it (its older versions, the
        lines waiting that repeat it); changes nothing."""
        m = await self.group_note(memory_id, place)
        async with self.engine.db.transaction() as conn:
            return m, await plan_erasure(conn, m.owner, [m])

    async def erase_group_note(self, memory_id: int, place: str) -> Erasure:
        """For good: the note with its older versions and the group's lines
        waiting that repeat it (as a member's ``memory_forget`` there does),
        every row logged. Beside the gateway, its queued buffer writes land
        first (:attr:`drain_lines`, as the group wipe's), not after."""
        await self.group_note(memory_id, place)
        if self.drain_lines is not None:
            await self.drain_lines()
        m = await self.group_note(memory_id, place)
        try:
            async with self.engine.db.transaction() as conn:
                plan = await plan_erasure(conn, m.owner, [m])
                await erase_planned(self.engine, conn, plan, job=JOB, action="erase", buffered=True)
        except MemoryNotFound as exc:
            raise NotFound(str(exc)) from None
        await self.engine.purge_erased()
        return plan

    async def stats(self, owner: str) -> Stats:
        return await self.engine.stats(_clean_owner(owner))

    async def list(
        self, owner: str, *, status: Status | None = Status.ACTIVE, category: Category | None = None, has: str = "",
        limit: int = 20, offset: int = 0,
    ) -> list[Memory]:
        """Newest first; ``has``: only memories whose words hold it (any case)."""
        where, args = _filters(owner, status, category, has)
        rows = await self.engine.db.fetchall(
            f"SELECT * FROM memories WHERE {where} ORDER BY id DESC LIMIT ? OFFSET ?", [*args, limit, offset]
        )
        return [row_to_memory(r) for r in rows]

    async def count(
        self, owner: str, *, status: Status | None = Status.ACTIVE, category: Category | None = None, has: str = ""
    ) -> int:
        """How many :meth:`list` pages through (the pager's "of N")."""
        where, args = _filters(owner, status, category, has)
        row = await self.engine.db.fetchone(f"SELECT COUNT(*) FROM memories WHERE {where}", args)
        return int(row[0]) if row is not None else 0

    async def search(self, owner: str, query: str, *, limit: int = 20) -> SearchResult:
        """What the bot would recall for ``query`` as ``owner`` (their active
        memories plus ``_global``), with the same :class:`Retriever`. Reading
        here does not count as an access (no reinforcement)."""
        owner = _clean_owner(owner)
        tz = await owner_zone(self.zone_of, owner, self.tz)
        hits = await self.retriever.retrieve(owner, query, limit=limit, tz=tz)
        found = await self.engine.get_many([h.id for h in hits])
        events = await self.retriever.search_events(owner, query, limit=min(limit, 10), tz=tz)
        return SearchResult([(found[h.id], h.score) for h in hits if h.id in found], events)

    async def get(self, memory_id: int, owner: str | None = None) -> Memory:
        m = await self.engine.get(memory_id)
        if m is None or (owner is not None and m.owner != owner):
            raise NotFound(f"no memory with id {memory_id}" + (f" for user {owner}" if owner else ""),
                           key="err_not_found_for" if owner else "err_not_found", id=memory_id, user=owner)
        person(m.owner)  # a group's note is not shown, edited or erased as a person's memory
        return m

    async def replaced(self, ids: Sequence[int]) -> dict[int, builtins.list[Memory]]:  # `list` is a method here
        """For each id: the memories it superseded (``superseded_by`` = id)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.engine.db.fetchall(
            f"SELECT * FROM memories WHERE superseded_by IN ({marks}) ORDER BY id DESC", list(ids)
        )
        out: dict[int, list[Memory]] = {}
        for r in rows:
            out.setdefault(r["superseded_by"], []).append(row_to_memory(r))
        return out

    async def chain(self, memory_id: int) -> tuple[builtins.list[Memory], builtins.list[Memory]]:
        """(what this memory replaced, transitively, newest first;
        what replaced it, in order). Cycles are cut."""
        seen = {memory_id}
        older: list[Memory] = []
        frontier = [memory_id]
        while frontier and len(older) < 200:
            found = await self.replaced(frontier)
            frontier = []
            for items in found.values():
                for m in items:
                    if m.id not in seen:
                        seen.add(m.id)
                        older.append(m)
                        frontier.append(m.id)
        newer: list[Memory] = []
        current = await self.engine.get(memory_id)
        while current is not None and current.superseded_by is not None and current.superseded_by not in seen:
            seen.add(current.superseded_by)
            current = await self.engine.get(current.superseded_by)
            if current is not None:
                newer.append(current)
        return older, newer

    async def log(self, owner: str, *, limit: int = 200, before: int | None = None) -> builtins.list[LogEntry]:
        """Newest first; ``before``: only entries older than that id (the
        page's next page: by id, so entries written meanwhile shift nothing)."""
        if before is None:
            return await read_log(self.engine.db, owner=_clean_owner(owner), limit=limit)
        rows = await self.engine.db.fetchall(
            "SELECT * FROM memory_log WHERE owner = ? AND id < ? ORDER BY id DESC LIMIT ?",
            [_clean_owner(owner), before, limit],
        )
        return [LogEntry(r["id"], r["at"], r["job"], r["owner"], r["action"], r["memory_id"], r["detail"]) for r in rows]

    async def memory_log(self, memory_ids: Sequence[int], *, limit: int = 100) -> builtins.list[LogEntry]:
        if not memory_ids:
            return []
        marks = ",".join("?" * len(memory_ids))
        rows = await self.engine.db.fetchall(
            f"SELECT * FROM memory_log WHERE memory_id IN ({marks}) ORDER BY id DESC LIMIT ?", [*memory_ids, limit]
        )
        return [LogEntry(r["id"], r["at"], r["job"], r["owner"], r["action"], r["memory_id"], r["detail"]) for r in rows]

    # -- writing ---------------------------------------------------------------

    async def add(self, owner: str, fields: dict[str, Any]) -> tuple[Memory, bool]:
        """Store a hand-written memory; returns (memory, added). An active
        memory of ``owner`` with the same wording is returned instead."""
        owner = _clean_owner(owner)
        f = parse_changes(fields)
        if "content" not in f:
            raise Invalid("content is empty", key="err_content_empty")
        tier = f.get("tier", 2)
        category = f.get("category") or (Category.IDENTITY if tier == 1 else Category.DECISION)
        _no_terms_on_credential(f, category)
        same = await self.engine.find_same(owner, f["content"])
        if same is not None:
            return same, False
        new = NewMemory(
            owner=owner,
            content=f["content"],
            tier=tier,
            category=category,
            importance=f.get("importance", DEFAULT_IMPORTANCE),
            project=f.get("project") or GLOBAL_OWNER,
            topic=f.get("topic") or "_general",
            source=Source.MANUAL,
            provenance=Provenance(channel="web"),
            search_terms=f.get("search_terms", ()),
        )
        try:
            async with self.engine.db.transaction() as conn:
                m = await self.engine.add(new, conn=conn)
                await write_log(conn, at=self.engine.now(), job=JOB, owner=owner, action="add", memory_id=m.id,
                                detail=m.content)  # the words, as extraction logs them
        except ValueError as exc:
            raise Invalid(str(exc)) from None
        self._written(owner)
        return m, True

    async def edit(self, memory_id: int, owner: str | None, fields: dict[str, Any]) -> Edited:
        changes = parse_changes(fields)
        if not changes:
            raise Invalid("nothing to change: give " + ", ".join(EDITABLE), key="err_nothing", fields=", ".join(EDITABLE))
        m = await self.get(memory_id, owner)
        _no_terms_on_credential(changes, m.category)
        # A form sends every field; change (and log) only what differs.
        current = editable_values(m)
        defaults = {"project": GLOBAL_OWNER, "topic": "_general"}
        changes = {k: v for k, v in changes.items() if (v or defaults.get(k, v)) != current[k]}
        if not changes:
            return Edited(m, [])
        entries = await self._changed(m, changes)
        return Edited(await self.get(memory_id), entries, before=m)

    async def _changed(self, m: Memory, changes: dict[str, Any]) -> builtins.list[Memory]:
        """Write an edit's ``changes`` to ``m``, logged by field names (never
        the words); the Core Memory entries built on its old words go with
        them, as when a fact is replaced. Returns those entries."""
        try:
            async with self.engine.db.transaction() as conn:
                await self.engine.update(m.id, conn=conn, **changes)
                at = self.engine.now()
                await write_log(conn, at=at, job=JOB, owner=m.owner, action="edit", memory_id=m.id,
                                detail={"fields": sorted(changes)})
                entries = (await retire_entries_on(self.engine, conn, m.owner, m.id, m.id, job=JOB, at=at)
                           if "content" in changes else [])
        except ValueError as exc:
            raise Invalid(str(exc)) from None
        except MemoryNotFound as exc:
            raise NotFound(str(exc)) from None
        if "content" in changes:
            self._written(m.owner)
            await self.engine.purge_erased()  # an edit can be a redaction: the old words leave the file
        return entries

    async def undo_edit(self, memory_id: int, owner: str, before: dict[str, Any], after: dict[str, Any],
                        entries: Sequence[int]) -> Memory:
        """Put back the fields an edit changed (``before``) and the Core
        Memory entries it superseded, if the memory is still as the edit
        left it (``after``): an undo never overwrites a later change."""
        m = await self.get(memory_id, owner)
        if editable_values(m) != after:
            raise Conflict(f"memory m{memory_id} was changed since; nothing was changed",
                           key="err_undo_changed", id=memory_id)
        try:
            async with self.engine.db.transaction() as conn:
                await self.engine.update(memory_id, conn=conn, **before)
                at = self.engine.now()
                await write_log(conn, at=at, job=JOB, owner=m.owner, action="edit", memory_id=memory_id,
                                detail={"fields": sorted(before), "undo": True})
                for entry_id in entries:
                    async with conn.execute("SELECT status, superseded_by FROM memories WHERE id = ?", (entry_id,)) as cur:
                        row = await cur.fetchone()
                    if row is None or row[0] != Status.SUPERSEDED.value or row[1] != memory_id:
                        continue  # erased or changed since: left as it is
                    await self.engine.set_status(entry_id, Status.ACTIVE, conn=conn)
                    await write_log(conn, at=at, job=JOB, owner=m.owner, action="restore", memory_id=entry_id,
                                    detail={"was": Status.SUPERSEDED.value, "undo": "edit"})
        except MemoryNotFound as exc:
            raise NotFound(str(exc)) from None
        if "content" in before:
            await self.engine.purge_erased()  # the undone words leave the file as an edit's do
        return await self.get(memory_id)

    async def _set_shared(self, m: Memory, places: tuple[str, ...], action: str, detail: dict[str, Any]) -> Memory:
        async with self.engine.db.transaction() as conn:
            await conn.execute("UPDATE memories SET provenance = ? WHERE id = ?",
                               (replace(m.provenance, shared=places).to_json(), m.id))
            # The places only (channel:chat id), never the words.
            await write_log(conn, at=self.engine.now(), job=JOB, owner=m.owner, action=action, memory_id=m.id,
                            detail=detail)
        return await self.get(m.id)

    async def unshare(self, memory_id: int, owner: str | None = None) -> tuple[Memory, tuple[str, ...]]:
        """Take the memory back from every group it is shared with (as
        ``/unshare`` in the private chat); returns it and the places it
        was shared with (none: nothing changed)."""
        m = await self.get(memory_id, owner)
        was = m.provenance.shared
        if not was:
            return m, ()
        return await self._set_shared(m, (), "unshare", {"was": list(was)}), was

    async def reshare(self, memory_id: int, owner: str, places: Sequence[str]) -> Memory:
        """The undo of :meth:`unshare`: ``places`` again, if the memory is
        still shared nowhere (a later ``/share`` is never overwritten)."""
        m = await self.get(memory_id, owner)
        if m.provenance.shared:
            raise Conflict(f"memory m{memory_id} was changed since; nothing was changed",
                           key="err_undo_changed", id=memory_id)
        return await self._set_shared(m, tuple(places), "share", {"places": list(places), "undo": "unshare"})

    async def _set_status(self, memory_id: int, owner: str | None, status: Status, action: str) -> Memory:
        m = await self.get(memory_id, owner)
        try:
            async with self.engine.db.transaction() as conn:
                await self.engine.set_status(memory_id, status, conn=conn)
                await write_log(
                    conn, at=self.engine.now(), job=JOB, owner=m.owner, action=action, memory_id=memory_id,
                    detail={"was": m.status.value},
                )
        except MemoryNotFound as exc:
            raise NotFound(str(exc)) from None
        return await self.get(memory_id)

    async def archive(self, memory_id: int, owner: str | None = None) -> Memory:
        """Recoverable: the memory leaves search and the profile, stays in the DB."""
        m = await self.get(memory_id, owner)
        if m.status is Status.ARCHIVED:
            return m
        return await self._set_status(memory_id, owner, Status.ARCHIVED, "archive")

    async def restore(self, memory_id: int, owner: str | None = None) -> Memory:
        m = await self.get(memory_id, owner)
        if m.status is Status.ACTIVE:
            return m
        restored = await self._set_status(memory_id, owner, Status.ACTIVE, "restore")
        self._written(m.owner)  # its vector may be missing or of an older model
        return restored

    async def erase_plan(self, memory_id: int, owner: str | None = None) -> tuple[Memory, Erasure]:
        """What erasing the memory with ``cascade`` would take with it and
        which linked records would stay; changes nothing."""
        m = await self.get(memory_id, owner)
        async with self.engine.db.transaction() as conn:  # one consistent read of the lineage
            return m, await plan_erasure(conn, m.owner, [m])

    async def erase(self, memory_id: int, owner: str | None = None, *, cascade: bool = False) -> Erasure:
        """For good: the memory only, or with ``cascade`` its older versions
        and the Core Memory entries built on it too (planned again inside
        the erasing transaction). Every erased row is logged. Returns what
        was erased (``named`` holds the memory as it was) and, with
        ``cascade``, the linked records kept."""
        m = await self.get(memory_id, owner)
        try:
            async with self.engine.db.transaction() as conn:
                plan = await plan_erasure(conn, m.owner, [m]) if cascade else Erasure(m.owner, [m])
                await erase_planned(self.engine, conn, plan, job=JOB, action="erase", buffered=cascade)
        except MemoryNotFound as exc:
            raise NotFound(str(exc)) from None
        await self.engine.purge_erased()
        if cascade and self.forget_history is not None:
            # The next prompt's history would still show it.
            plan.history_lines = await self.forget_history(plan.owner, plan.texts())
        if cascade and self.files is not None:
            await self.files.forget_words(plan.owner, [m.content for m in (*plan.named, *plan.versions, *plan.entries)])
        return plan

    async def archive_all(self, owner: str) -> builtins.list[int]:
        """Archive every active memory of ``owner`` (recoverable one by one,
        or together with :meth:`restore_archived`); returns their ids."""
        owner = _clean_owner(owner)
        async with self.engine.db.transaction() as conn:
            async with conn.execute("SELECT id FROM memories WHERE owner = ? AND status = 'active'", (owner,)) as cur:
                ids = [r[0] for r in await cur.fetchall()]
            for mid in ids:
                await self.engine.set_status(mid, Status.ARCHIVED, conn=conn)
            await write_log(
                conn, at=self.engine.now(), job=JOB, owner=owner, action="archive_all", detail={"count": len(ids)}
            )
        return ids

    async def restore_archived(self, owner: str, ids: Sequence[int]) -> int:
        """Restore those of ``ids`` (``owner``'s) still archived, in one
        transaction: the undo of :meth:`archive_all`. Returns how many."""
        owner = _clean_owner(owner)
        n = 0
        async with self.engine.db.transaction() as conn:
            at = self.engine.now()
            for mid in ids:
                async with conn.execute("SELECT owner, status FROM memories WHERE id = ?", (mid,)) as cur:
                    row = await cur.fetchone()
                if row is None or row[0] != owner or row[1] != Status.ARCHIVED.value:
                    continue  # erased, restored or changed since
                await self.engine.set_status(mid, Status.ACTIVE, conn=conn)
                await write_log(conn, at=at, job=JOB, owner=owner, action="restore", memory_id=mid,
                                detail={"was": Status.ARCHIVED.value, "undo": "archive_all"})
                n += 1
        return n

    async def retry_set_aside(self, owner: str) -> int:
        """Clear the set-aside mark of ``owner``'s buffered lines, so the
        next extraction run tries them again (after the memory model was
        changed for one that takes them). Returns how many lines."""
        return await retry_set_aside(self.engine, _clean_owner(owner), job=JOB)

    async def erase_all(self, owner: str) -> int:
        """Erase every memory of ``owner`` (all statuses) for good, and the
        groups' notes drawn from their lines (memory/groupnotes.py)."""
        owner = _clean_owner(owner)
        await forget_speaker(self.engine, owner)
        async with self.engine.db.transaction() as conn:
            async with conn.execute("SELECT id FROM memories WHERE owner = ?", (owner,)) as cur:
                ids = [r[0] for r in await cur.fetchall()]
            for mid in ids:
                await self.engine.delete(mid, conn=conn)
            await write_log(
                conn, at=self.engine.now(), job=JOB, owner=owner, action="erase_all", detail={"count": len(ids)}
            )
        await self.engine.purge_erased()
        return len(ids)
