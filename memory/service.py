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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from datetime import tzinfo
from typing import TYPE_CHECKING, Protocol

import aiosqlite
import structlog

from .backend import MemoryBackend, Turn
from .batch import RowBatcher, insert_statement
from .buffer import NOT_GONE, drop_lines
from .changelog import write_log
from .clock import format_ts, local_day
from .cues import clean_terms, safe_terms
from .engine import MemoryEngine, more_source_text, row_to_event, row_to_memory
from .format import fit_budget
from .forgetting import Forgotten, erase_planned, event_hit, plan_erasure, repeats_forgotten
from .neighbours import earned
from .groupnotes import citing, forget_group, move_group
from .groupowner import group_owner, is_group_owner, logged_owner
from .namesakes import GroupNames, Namesakes
from .scope import Chat
from .redact import redact_credentials
from .retrieval import DATED_EVENTS_MAX, MAX_QUERY_CHARS, Retriever
from .tokenize import index_terms, query_terms
from .tokens import estimate_tokens
from .types import (
    GLOBAL_OWNER,
    Category,
    ErasedAll,
    Event,
    Hit,
    Memory,
    MemoryOverview,
    NewMemory,
    OwnerData,
    OwnerIndex,
    Provenance,
    Source,
)

# Rows "in Chinese" for an export's language: a CJK ideograph anywhere, the
# same ranges as gateway/export.py's ``mostly_chinese`` (GLOB compares code points).
_CJK_GLOB = "*[\u3400-\u4dbf\u4e00-\u9fff]*"

if TYPE_CHECKING:  # numpy comes with it: imported only when memory.embedding is on (gateway/app.py)
    from .hybrid import HybridRetriever

__all__ = ["EDITED_MARK", "EDITED_SUFFIX", "Retracted", "SqliteMemory", "original_message_id"]

log = structlog.get_logger(component="memory")

RECALL_EVENTS = 3
"""Places of the prompt's memory block (of 5) a time reference's chat
summaries may take: a week's days, with room left for the facts."""

BufferListener = Callable[[str], Awaitable[None] | None]

# With who spoke, for a group's own copy of a line (memory/groupnotes.py); '' for a member's own.
_INSERT_LINE = """INSERT OR IGNORE INTO extraction_buffer
    (owner, channel, chat_id, sender_id, message_id, role, content, token_count, created_at, in_group,
     speaker, speaker_name)"""
_LINE_VALUES = f"{_INSERT_LINE} VALUES ({', '.join('?' * 12)})"
_ONE_STATEMENT_ROWS = 100  # x 12 parameters, far below SQLite's limit of 32,766
_REF = re.compile(r"^\[?\s*([me])(\d{1,12})\b", re.IGNORECASE)

EDITED_MARK = "(edited)"
"""How a corrected message is buffered when the original was already
extracted: ``(edited) <new words>``; the extraction prompt (memory/llm.py)
reads such a line as replacing what the earlier message said."""
EDITED_SUFFIX = "#edited"
"""The buffered correction's message id: the original's plus this, so it is
one line per message (a second edit replaces a correction still waiting)."""

# A fact or event whose provenance names this platform message, in this chat.
_CITES = """json_valid(provenance)
    AND json_extract(provenance, '$.channel') = ? AND json_extract(provenance, '$.chat_id') = ?
    AND EXISTS (SELECT 1 FROM json_each(provenance, '$.message_ids') j WHERE j.value = ?)"""
_CITES_MESSAGE = f"owner = ? AND {_CITES}"


def original_message_id(message_id: str) -> str:
    """The platform id a buffered line stands for (a correction's included)."""
    return message_id.removesuffix(EDITED_SUFFIX)


@dataclass
class Retracted:
    """What :meth:`SqliteMemory.retract` erased for one recalled message."""

    owners: list[str] = field(default_factory=list)  # whose rows cited it
    buffered_lines: int = 0  # waiting lines of the message (and the reply to it)
    erased: list[Hit] = field(default_factory=list)  # facts and daily events drawn from it
    versions: int = 0  # older rows of those facts, erased with them
    entries: int = 0  # Core Memory entries built on them, erased too
    kept: list[Hit] = field(default_factory=list)  # linked records that stay (drawn from other messages too)
    scrubbed: int = 0  # kept facts whose source words lost the recalled message's


class ImportedFiles(Protocol):
    """The file store's folders (:class:`memory.filestore.FileMemory`, which
    imports this module): what it wrote while memory was off stays on disk
    after the import, and an erasure of what came from there erases it there."""

    async def forget_words(self, user: str, facts: Sequence[str]) -> int: ...

    async def forget_days(self, user: str, days: Sequence[tuple[str, str]]) -> int: ...


class SqliteMemory(MemoryBackend):
    kind = "sqlite"

    def __init__(self, engine: MemoryEngine, retriever: Retriever | HybridRetriever | None = None, *,
                 files: ImportedFiles | None = None) -> None:
        self.engine = engine
        self.files = files
        self.retriever = retriever or Retriever(engine)
        self._listeners: list[BufferListener] = []
        self._saved: list[Callable[[str], None]] = []
        # Group commit (memory/batch.py): the turns concurrent chats buffer
        # now are one multi-row INSERT, one round trip to the writer thread.
        self._buffer_rows = RowBatcher(engine.db, insert_statement(_INSERT_LINE, 12), 12)
        self.namesakes = Namesakes(engine.db)  # for the chat prompt's same-name tags (memory/namesakes.py)

    def on_buffered(self, listener: BufferListener) -> None:
        """Call ``listener(owner)`` after turns of ``owner`` were buffered."""
        self._listeners.append(listener)

    def on_remembered(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` after :meth:`remember` wrote a memory of ``owner``."""
        self._saved.append(listener)

    async def profile(self, user: str, *, private: bool = True, tz: tzinfo | None = None) -> str:
        # A group chat gets only the shared (_global) profile.
        # With ids, so the model can name an entry to forget (memory_forget).
        if private:
            return await self.engine.profile_markdown(user, ids=True, tz=tz)
        return await self.engine.profile_markdown(GLOBAL_OWNER, include_global=False, ids=True, tz=tz)

    async def recall(
        self, user: str, query: str, *, context: Sequence[str] = (), private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,
    ) -> list[Hit]:
        """Hits for the prompt: the Core Memory entries :meth:`profile` shows
        in the same prompt are left out, so they do not take the block's few
        places twice (an entry its token budget left out can be recalled).
        ``search`` (the memory_search tool, ``/memory <words>``) still finds them."""
        tz = await self.engine.lived(user, tz)  # each fact dated where it was said (memory/zonehistory.py)
        if private:
            shown = await self.engine.profile_ids(user, ids=True, tz=tz)
        else:
            shown = await self.engine.profile_ids(GLOBAL_OWNER, include_global=False, ids=True, tz=tz)
        lx = self.retriever if isinstance(self.retriever, Retriever) else self.retriever.lexical
        # In a group, the group's own notes too (memory/groupnotes.py).
        # More than the block holds, so a neighbour that earns no place
        # there leaves it to the next best (memory/neighbours.py).
        ranked = await self.retriever.retrieve(user, query, context=context, private=private, tz=tz, exclude=shown,
                                               chat=chat, limit=2 * lx.max_hits, notes=not private)
        hits = earned(ranked, partial(fit_budget, max_hits=lx.max_hits, max_chars=lx.max_chars,
                                      token_budget=lx.token_budget))
        # An entry Core Memory no longer shows (its day passed, its budget)
        # is recalled beside the fact it was drawn from, in the same words.
        hits = _once(hits)
        self.engine.note_access(h.id for h in hits if h.kind == "memory")
        # What it replaced: in a group, only what that group may read.
        hits = await self._with_replaced(user, hits, tz, private=private, chat=chat)
        if private:
            hits = await self._with_period_events(user, query, hits, tz)
        elif chat is not None and all(chat):  # "what did we talk about last week?": the group's own days
            hits = await self._with_period_events(group_owner(*chat), query, hits, tz)
        return hits

    async def _with_period_events(self, user: str, query: str, hits: list[Hit], tz: tzinfo | None) -> list[Hit]:
        """A message that names a time ("上周我们聊了什么？", "what did we
        talk about last Wednesday?") gets the summaries of that period's
        chats (Tier 3) in the block, up to :data:`RECALL_EVENTS` of its
        places, ranked with the facts: the log answers it, and the model
        need not think of calling memory_search. Otherwise Tier 3 stays
        on demand (seed 000), as the private chat's only."""
        # All of the period's (they are scored anyway): their days are counted.
        events = await self.retriever.search_events(user, query, limit=DATED_EVENTS_MAX, tz=tz, period_only=True)
        if not events:
            return hits
        lx = self.retriever if isinstance(self.retriever, Retriever) else self.retriever.lexical
        kept = fit_budget(_merged(query, hits, events[:RECALL_EVENTS]), max_hits=lx.max_hits, max_chars=lx.max_chars,
                          token_budget=lx.token_budget)
        listed = [i for i, h in enumerate(kept) if h.kind == "event"]
        more = len({e.date for e in events} - {kept[i].date for i in listed})
        if not listed or not more:
            return kept
        # A busy week: the block says there is more (its words within the budget).
        kept[listed[-1]] = replace(kept[listed[-1]], more_days=more)
        return fit_budget(kept, max_hits=lx.max_hits, max_chars=lx.max_chars, token_budget=lx.token_budget)

    async def _with_replaced(
        self, user: str, hits: list[Hit], tz: tzinfo | None, *, private: bool = True, chat: Chat | None = None
    ) -> list[Hit]:
        """Each recalled fact that replaced one (the user changed their mind)
        carries the fact it replaced, dated: "what did we decide, and when
        had we picked the other?" needs both (seed 002: why a plan was
        dropped). In a group, only a replaced fact that group may read (said
        there: it heard it). A hit recalled for a fact said in the period
        the message names keeps that one (memory/saidthen.py)."""
        ids = [h.id for h in hits if h.kind == "memory" and h.category != "credential" and h.replaced is None]
        old = await self.engine.replaced_facts(user, ids, private=private, chat=chat)
        notes = [h.id for h in hits if h.id in ids and is_group_owner(h.owner)]
        if notes and chat is not None and all(chat) and not private:  # a group's note: what it replaced there
            old.update(await self.engine.replaced_facts(group_owner(*chat), notes, private=False, chat=chat))
        return [replace(h, replaced=(local_day(old[h.id][0], tz), old[h.id][1])) if h.kind == "memory" and h.id in old
                else h for h in hits]

    async def search(
        self, user: str, query: str, *, limit: int = 8, private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,
    ) -> list[Hit]:
        tz = await self.engine.lived(user, tz)
        facts = await self.retriever.retrieve(user, query, private=private, limit=limit, tz=tz, chat=chat,
                                              notes=not private)
        # In a group, the group's own days (memory/groupnotes.py), never the member's.
        events = (await self.retriever.search_events(user, query, limit=limit, tz=tz) if private else
                  await self.retriever.search_events(group_owner(*chat), query, limit=limit, tz=tz)
                  if chat is not None and all(chat) else [])
        hits = _once(sorted([*facts, *events], key=lambda h: -h.score))[:limit]
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
        search_terms: Sequence[str] = (),
    ) -> Hit:
        cat = Category(category) if category in Category._value2member_map_ else Category.EVENT
        content, source_text = redact_credentials(content), redact_credentials(source_text)
        same = await self.engine.find_same(user, content)
        if same is not None:
            # Saying it again reinforces the existing memory instead of duplicating it,
            # and its new terms find it too (the first ones kept, up to the cap);
            # logged as the extraction's are: Core Memory shows it again (engine.newer_facts).
            more = safe_terms(search_terms, credential=same.category is Category.CREDENTIAL)
            terms = clean_terms([*same.search_terms, *more])
            async with self.engine.db.transaction() as conn:
                m = await self.engine.update(
                    same.id, importance=max(same.importance, importance), touch=True,
                    source_text=more_source_text(same.source_text, source_text),
                    search_terms=terms if terms != same.search_terms else None, conn=conn,
                )
                await write_log(conn, at=self.engine.now(), job="chat", owner=user, action="reinforce",
                                memory_id=m.id, detail={"restated": content})
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
                    search_terms=safe_terms(search_terms, credential=cat is Category.CREDENTIAL),
                )
            )
        log.info("memory saved", owner=user, memory_id=m.id, reinforced=same is not None)
        for listener in self._saved:
            listener(user)
        return m.to_hit()

    async def overview(self, user: str, *, limit: int = 10, tz: tzinfo | None = None) -> MemoryOverview:
        engine = self.engine
        tz = await engine.lived(user, tz)
        entries = await engine.profile(user, include_global=False)
        # As their prompt's Core Memory: the entries and what they said of
        # themselves since the weekly refresh (engine.newer_facts), that
        # first: /memory lists a few, and it is what they just told. Each
        # memory once: "Newest" leaves out those, and a fact an entry
        # states in the same words (a decision lifted into Core Memory).
        profile = [*await engine.newer_facts(user, entries), *entries]
        shown = {m.id for m in profile} | await engine.same_words_as(user, entries)
        recent = [m for m in await engine.list_memories(user, tier=2, limit=limit + len(shown))
                  if m.id not in shown][:limit]
        await self._buffer_rows.drain()  # the message just before /memory counts as waiting
        counts = await engine.db.fetchone(
            f"""SELECT (SELECT COUNT(*) FROM memories WHERE owner = ? AND status = 'active'),
                      (SELECT COUNT(*) FROM daily_events WHERE owner = ?),
                      (SELECT COUNT(*) FROM extraction_buffer WHERE owner = ? AND role = 'user'
                       AND set_aside_at IS NULL AND {NOT_GONE})""",
            [user, user, user],
        )
        return MemoryOverview(
            profile=[m.to_hit(tz=tz) for m in profile],
            recent=[m.to_hit(tz=tz) for m in recent],
            facts=counts[0] if counts else 0,
            events=counts[1] if counts else 0,
            waiting=counts[2] if counts else 0,
            group_notes=await citing(engine, user),
        )

    async def owner_data(self, user: str) -> OwnerData:
        """``user``'s rows of every status, read on the reader connection;
        turns still queued for the buffer's group commit are written first,
        so the count of waiting lines includes the last message."""
        await self._buffer_rows.drain()
        db = self.engine.db
        memories = [row_to_memory(r) for r in await db.fetchall("SELECT * FROM memories WHERE owner = ? ORDER BY id", [user])]
        events = [
            row_to_event(r)
            for r in await db.fetchall("SELECT * FROM daily_events WHERE owner = ? ORDER BY event_date, id", [user])
        ]
        row = await db.fetchone(
            f"SELECT COALESCE(SUM(set_aside_at IS NULL), 0), COALESCE(SUM(set_aside_at IS NOT NULL), 0) "
            f"FROM extraction_buffer WHERE owner = ? AND {NOT_GONE}", [user])
        waiting, aside = (row[0], row[1]) if row else (0, 0)
        return OwnerData(owner=user, memories=memories, events=events, waiting=waiting, set_aside=aside)

    async def owner_index(self, user: str) -> OwnerIndex:
        """Ids and counts only (the words of credentials aside), in a few
        queries on the reader connection; as :meth:`owner_data`, queued turns
        are written first."""
        await self._buffer_rows.drain()
        db = self.engine.db
        mids = await db.fetchall("SELECT id FROM memories WHERE owner = ? ORDER BY tier, project, id", [user])
        eids = await db.fetchall("SELECT id FROM daily_events WHERE owner = ? ORDER BY event_date, id", [user])
        secrets = await db.fetchall(
            "SELECT source_text FROM memories WHERE owner = ? AND category = 'credential' ORDER BY id", [user]
        )
        row = await db.fetchone(
            f"""SELECT (SELECT COUNT(*) FROM memories WHERE owner = ? AND content GLOB '{_CJK_GLOB}'),
                       (SELECT COUNT(*) FROM daily_events WHERE owner = ? AND summary GLOB '{_CJK_GLOB}'),
                       (SELECT COUNT(*) FROM extraction_buffer WHERE owner = ? AND {NOT_GONE}
                        AND set_aside_at IS NULL),
                       (SELECT COUNT(*) FROM extraction_buffer WHERE owner = ? AND {NOT_GONE}
                        AND set_aside_at IS NOT NULL)""",
            [user, user, user, user],
        )
        chinese, waiting, aside = (row[0] + row[1], row[2], row[3]) if row else (0, 0, 0)
        return OwnerIndex(
            owner=user, memory_ids=tuple(r[0] for r in mids), event_ids=tuple(r[0] for r in eids),
            credential_sources=tuple(r[0] or "" for r in secrets), chinese=chinese, waiting=waiting,
            set_aside=aside,
        )

    async def owner_rows(self, user: str, ids: OwnerIndex, *, page: int = 500) -> AsyncIterator[Memory | Event]:
        """By primary key, ``page`` ids a query: no query sorts the whole
        set again, and only a page of rows (with their source text) is held."""
        db = self.engine.db
        for table, wanted, convert in (("memories", ids.memory_ids, row_to_memory),
                                       ("daily_events", ids.event_ids, row_to_event)):
            for k in range(0, len(wanted), page):
                chunk = wanted[k : k + page]
                marks = ",".join("?" * len(chunk))
                rows = await db.fetchall(f"SELECT * FROM {table} WHERE owner = ? AND id IN ({marks})", [user, *chunk])
                found: dict[int, Memory | Event] = {r["id"]: convert(r) for r in rows}
                for i in chunk:
                    got = found.get(i)
                    if got is not None:
                        yield got

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
            log.info("memories forgotten at the user's request", owner=logged_owner(user), erased=len(out.erased),
                     buffered_lines=out.buffered_lines)
            if self.files is not None:
                # What was imported from their files goes there too: a MEMORY.md
                # line with the erased words, an imported day's logged lines.
                await self.files.forget_words(user, [m.content for m in (*plan.named, *plan.versions, *plan.entries)])
                await self.files.forget_days(user, [(e.event_date, e.summary) for e in plan.events
                                                    if e.channel == Source.MIGRATION])
        return out

    async def forget_all(self, user: str) -> ErasedAll:
        """Everything of ``user`` goes, in one transaction
        (:meth:`MemoryEngine.forget_owner`), their words out of the file too."""
        if user == GLOBAL_OWNER:
            raise ValueError("_global is shared by everyone; its memories are erased one by one")
        # Turns queued for the buffer's group commit would land after the
        # erasure and be learnt again.
        await self._buffer_rows.drain()
        counts = await self.engine.forget_owner(user)
        return ErasedAll(memories=counts["memories"], events=counts["events"], waiting=counts["buffered"],
                         group_notes=counts.get("group notes", 0))

    async def drained(self) -> None:
        """The turns queued for the buffer's group commit, written now: an
        erasure made next (the memory page's of a group note) sees them."""
        await self._buffer_rows.drain()

    async def forget_group(self, channel: str, chat_id: str) -> int:
        """The bot was removed from the group: its own memory (notes, days,
        waiting lines; memory/groupnotes.py) goes, for good. How many rows."""
        await self._buffer_rows.drain()  # its lines queued now would land after the erasure
        return sum((await forget_group(self.engine, channel, chat_id)).values())

    async def shared_names(self, channel: str, chat_id: str) -> GroupNames:
        """What the group's memory says of its members' names, for the chat
        prompt's same-name tags (memory/namesakes.py: read once per change)."""
        return await self.namesakes.shared(group_owner(channel, chat_id))

    async def forget_group_notes(self, chat: Chat, refs: Sequence[str], *, by: str) -> Forgotten:
        """A member asked, in the group, to forget notes of the group's own
        (``memory_forget`` there): only that group's rows (:meth:`forget`
        as its owner), never a member's; the memory log names who asked."""
        owner = group_owner(*chat)
        done = await self.forget(owner, refs)
        if done.erased:
            async with self.engine.db.transaction() as conn:
                await write_log(conn, at=self.engine.now(), job="chat", owner=owner, action="forget-in-group",
                                detail={"by": by, "refs": [h.ref for h in done.erased]})
        return done

    async def move_group(self, channel: str, old_chat: str, new_chat: str) -> int:
        """The group's own memory follows it to a new id (memory/groupnotes.py)."""
        return await move_group(self.engine, channel, old_chat, new_chat)

    async def revise(self, turn: Turn, *, before: str = "") -> str:
        """The user edited message ``turn.message_id`` (their own, ``turn.role``
        "user") into ``turn.content``. Returns what memory did:

        * ``"replaced"``: the message was still waiting for extraction; its
          line is replaced by one with the new words (a new line, the old
          one dropped as gone: an extraction batch already reading the old
          words finds its rows changed and writes nothing, memory/buffer.py);
        * ``"corrected"``: it was already extracted (a fact or event of the
          user cites it); the new words are buffered as a correction,
          ``(edited) ...`` (:data:`EDITED_MARK`), whose facts supersede the
          old ones (the extraction prompt's rule);
        * ``"untracked"``: memory never had it (not learnt from), nothing done.

        ``before`` (the message's words until now) is not needed here: the
        buffer knows its lines by message id; the file store's log does not
        (:meth:`FileMemory.revise <memory.filestore.FileMemory.revise>`)."""
        owner, mid = turn.owner, turn.message_id
        content = _clean(turn.content)
        if not mid or not content:
            return "untracked"
        # A group's own copy of the line (memory/groupnotes.py) is edited the same way, in the same transaction.
        group = (group_owner(turn.channel, turn.chat_id)
                 if turn.channel and turn.chat_id and not is_group_owner(owner) else "")
        async with self.engine.db.transaction() as conn:
            outcome = await self._revise_lines(conn, owner, turn, content)
            if group and await self._revise_lines(conn, group, turn, content, speaker=owner) != "untracked":
                notified = [owner, group]
            else:
                notified = [owner]
        if outcome == "untracked" and len(notified) == 1:
            return outcome
        log.info("edited message handed to memory", owner=owner, outcome=outcome)
        for who in notified:
            await self._notify(who)
        return outcome

    async def _revise_lines(
        self, conn: aiosqlite.Connection, owner: str, turn: Turn, content: str, *, speaker: str = ""
    ) -> str:
        """:meth:`revise` for ``owner``'s lines (a group's copy: those
        ``speaker`` said, kept with their speaker)."""
        mid = turn.message_id
        correction = f"{mid}{EDITED_SUFFIX}"
        mine = " AND speaker = ?" if speaker else ""
        async with conn.execute(
            f"""SELECT id, sender_id, message_id, created_at, in_group, speaker_name FROM extraction_buffer
                WHERE owner = ? AND channel = ? AND chat_id = ? AND message_id IN (?, ?) AND role = 'user'
                  AND {NOT_GONE}{mine} ORDER BY id DESC LIMIT 1""",
            (owner, turn.channel, turn.chat_id, mid, correction, *((speaker,) if speaker else ())),
        ) as cur:
            waiting = await cur.fetchone()
        if waiting is not None:
            words = content if waiting["message_id"] == mid else f"{EDITED_MARK} {content}"
            await drop_lines(conn, [waiting["id"]])
            row = (owner, turn.channel, turn.chat_id, waiting["sender_id"], waiting["message_id"], "user",
                   words, estimate_tokens(words), waiting["created_at"], waiting["in_group"] or int(turn.group),
                   speaker, waiting["speaker_name"])
            outcome = "replaced"
        elif await _cites(conn, "daily_events", owner, turn.channel, turn.chat_id, mid) or await _cites(
            conn, "memories", owner, turn.channel, turn.chat_id, mid
        ):
            words = f"{EDITED_MARK} {content}"
            row = (owner, turn.channel, turn.chat_id, turn.sender_id, correction, "user",
                   words, estimate_tokens(words), self.engine.now(), int(turn.group),
                   speaker, turn.speaker_name if speaker else "")
            outcome = "corrected"
        else:
            return "untracked"
        await conn.execute(_LINE_VALUES, row)
        return outcome

    async def retract(
        self, channel: str, chat_id: str, message_id: str, *, owner: str | None, text: str = ""
    ) -> Retracted:
        """The sender withdrew (recalled) platform message ``message_id`` of
        ``chat_id``: erase what memory holds of it, for good.

        * its lines still waiting for extraction (and the reply's, which
          carries its id) are dropped;
        * facts drawn only from it (their provenance names no other message)
          are erased with their older versions and the Core Memory entries
          built on them (:func:`~memory.forgetting.plan_erasure`, as
          ``memory_forget`` does), logged as ``recall`` without their words;
          so are facts drawn from it and other messages whose words repeat
          the recalled ``text`` (when the caller still has it): erasing the
          whole fact is the safe side, its other messages are kept;
        * a daily event goes by the same rule (a day's summary of several
          messages stays and is named in ``kept``);
        * a kept fact the message restated loses the message's words from
          its source text.

        ``owner``: whose message it was (the gateway's history knows); None
        when that row is gone: then the owners of the rows citing this very
        message in this chat, each erasing only their own."""
        out = Retracted()
        if not message_id:
            return out
        ids = (message_id, f"{message_id}{EDITED_SUFFIX}")
        # A group's own copy of the sender's line goes too, and the group's
        # notes drawn from it (memory/groupnotes.py): the sender withdrew it.
        group = group_owner(channel, chat_id) if channel and chat_id else ""
        mine = " AND (owner = ? OR (owner = ? AND speaker = ?))" if owner is not None else ""
        who = (owner, group, owner) if owner is not None else ()
        async with self.engine.db.transaction() as conn:
            async with conn.execute(
                f"""SELECT id, owner, role, message_id, content FROM extraction_buffer
                    WHERE channel = ? AND chat_id = ? AND message_id IN (?, ?) AND {NOT_GONE}{mine}""",
                (channel, chat_id, *ids, *who),
            ) as cur:
                lines = list(await cur.fetchall())
            if not text:
                text = next((r["content"] for r in lines if r["role"] == "user" and r["message_id"] == message_id), "")
            await drop_lines(conn, [r["id"] for r in lines])
            out.buffered_lines = len(lines)
            owners = dict.fromkeys(r["owner"] for r in lines) if owner is None else {owner: None}
            # The group's own copy, or its notes citing it (a group's message only).
            if owner is not None and group and (
                    any(r["owner"] == group for r in lines)
                    or await _cites(conn, "memories", group, channel, chat_id, message_id)
                    or await _cites(conn, "daily_events", group, channel, chat_id, message_id)):
                owners[group] = None
            if owner is None:
                for table in ("memories", "daily_events"):
                    async with conn.execute(
                        f"SELECT DISTINCT owner FROM {table} WHERE {_CITES}",
                        (channel, chat_id, message_id),
                    ) as cur:
                        owners.update(dict.fromkeys(r[0] for r in await cur.fetchall()))
            said = " ".join(redact_credentials(text).split())  # as its lines and facts were kept
            for who_ in owners:
                await self._retract_owner(conn, who_, channel, chat_id, message_id, said, out)
            out.owners = list(owners)
        if out.erased or out.scrubbed:
            await self.engine.purge_erased()
        elif out.buffered_lines:
            await self.engine.db.checkpoint()  # the dropped lines' old pages leave the WAL (secure_delete)
        if out.owners:
            log.info("recalled message erased from memory", owners=len(out.owners), buffered_lines=out.buffered_lines,
                     erased=len(out.erased), versions=out.versions, entries=out.entries, kept=len(out.kept))
        return out

    async def _retract_owner(
        self, conn: aiosqlite.Connection, owner: str, channel: str, chat_id: str, message_id: str, said: str,
        out: Retracted,
    ) -> None:
        def drawn_from_it(ids: Sequence[str], words: Sequence[str]) -> bool:
            others = {original_message_id(i) for i in ids} - {message_id}
            return not others or bool(said) and any(repeats_forgotten(said, [w]) for w in words if w.strip())

        args = (owner, channel, chat_id, message_id)
        async with conn.execute(f"SELECT * FROM memories WHERE {_CITES_MESSAGE} ORDER BY id", args) as cur:
            facts = [row_to_memory(r) for r in await cur.fetchall()]
        async with conn.execute(f"SELECT * FROM daily_events WHERE {_CITES_MESSAGE} ORDER BY id", args) as cur:
            events = [row_to_event(r) for r in await cur.fetchall()]
        named = [m for m in facts if drawn_from_it(m.provenance.message_ids, (m.source_text, m.content))]
        gone_events = [e for e in events if drawn_from_it(e.provenance.message_ids, (e.summary,))]
        plan = await plan_erasure(conn, owner, named, gone_events)
        # The message's own lines are dropped already; lines of other
        # messages that repeat the fact stay: the user withdrew this one.
        await erase_planned(self.engine, conn, plan, job="chat", action="recall", buffered=False)
        out.erased += [m.to_hit() for m in named] + [event_hit(e) for e in gone_events]
        out.versions += len(plan.versions)
        out.entries += len(plan.entries)
        gone = set(plan.memory_ids)
        out.kept += [m.to_hit() for m in facts if m.id not in gone]
        out.kept += [event_hit(e) for e in events if e not in gone_events]
        out.kept += [h for h in plan.kept if h.ref not in {k.ref for k in out.kept}]
        if not said:
            return
        # Restated by the message (reinforced): the fact stands on its other
        # messages, but the recalled words leave its source text.
        async with conn.execute(
            "SELECT id, source_text FROM memories WHERE owner = ? AND instr(source_text, ?) > 0", (owner, said)
        ) as cur:
            rows = [(r[0], r[1]) for r in await cur.fetchall() if r[0] not in gone]
        whole = re.compile(rf"(?<!\S){re.escape(said)}(?!\S)")  # as words, not inside one
        for mid, source in rows:
            left = " ".join(whole.sub(" ", source).split())
            if left != source:
                await self.engine.update(mid, source_text=left, conn=conn)
                out.scrubbed += 1

    async def _notify(self, owner: str) -> None:
        for listener in self._listeners:
            res = listener(owner)
            if asyncio.iscoroutine(res):
                await res

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
                _clean(t.content),
                estimate_tokens(t.content),
                format_ts(t.at) if t.at else now,
                int(t.group),
            )
            for t in turns
        ]
        # A group's line is the group's too: its copy under the group's
        # owner says who spoke (the bot's reply: the member it answered),
        # in the same INSERT as the member's own.
        heard = [(group_owner(t.channel, t.chat_id), *row[1:], t.owner, t.speaker_name if t.role == "user" else "")
                 for t, row in zip(turns, rows, strict=True)
                 if t.group and t.channel and t.chat_id and not is_group_owner(t.owner) and t.owner != GLOBAL_OWNER]
        lines = [*((*row, "", "") for row in rows), *heard]
        if len(lines) <= _ONE_STATEMENT_ROWS:
            # A turn (two rows) is part of one multi-row INSERT: atomic on
            # its own, shared with the other chats buffering now.
            await self._buffer_rows.write(lines)
        else:
            async with self.engine.db.transaction() as conn:
                await conn.executemany(_LINE_VALUES, lines)
        for h in heard:
            if h[5] == "user":
                self.namesakes.heard(h[0], h[-1], h[-2])  # committed: a read from now on sees it
        for owner in dict.fromkeys([*(t.owner for t in turns), *(h[0] for h in heard)]):
            await self._notify(owner)

    async def close(self) -> None:
        await self._buffer_rows.drain()
        await self.engine.close()


def _clean(text: str) -> str:
    """Chat text as memory keeps it: valid UTF-8, no NUL, and no credential
    (memory/redact.py): what the buffer holds is what the memory model
    reads, and what facts, events and Core Memory are made from."""
    return redact_credentials(text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", ""))


async def _cites(conn: aiosqlite.Connection, table: str, owner: str, channel: str, chat_id: str, mid: str) -> bool:
    sql = f"SELECT 1 FROM {table} WHERE {_CITES_MESSAGE} LIMIT 1"
    async with conn.execute(sql, (owner, channel, chat_id, mid)) as cur:
        return await cur.fetchone() is not None


def _merged(query: str, facts: Sequence[Hit], events: Sequence[Hit]) -> list[Hit]:
    """Facts and a period's events in one ranking by score (an event first
    on a tie): a fact that scored more keeps its place, a weaker one gives
    it up. A fact holding no word of the message is in by its date alone,
    as the events are, and for "上周我们聊了什么？" the summaries are the
    answer: it counts for no more than the weakest of them."""
    asked = {t for t, _ in query_terms(query[:MAX_QUERY_CHARS]) if len(t) > 1}  # a lone 周 is no word of it
    floor = min((e.score for e in events), default=0.0)

    def rank(h: Hit) -> tuple[float, bool]:
        score = h.score
        if h.kind == "memory" and asked.isdisjoint(index_terms(h.content)):
            score = min(score, floor)
        return -score, h.kind != "event"

    return sorted([*events, *facts], key=rank)


def _once(hits: Sequence[Hit]) -> list[Hit]:
    """Memories of the same words listed once, in the place of the best
    ranked, as the earliest of them: a Core Memory entry the weekly refresh
    wrote in a fact's words is that fact again (which carries the day it
    was said and where), and showed the line twice under two ids."""
    earliest: dict[str, Hit] = {}
    for h in hits:
        if h.kind == "memory" and (h.content not in earliest or h.id < earliest[h.content].id):
            earliest[h.content] = h
    out: list[Hit] = []
    listed: set[str] = set()
    for h in hits:
        if h.kind != "memory":
            out.append(h)
        elif h.content not in listed:
            listed.add(h.content)
            out.append(earliest[h.content])
    return out
