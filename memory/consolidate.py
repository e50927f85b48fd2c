"""Dedup and supersede: how a new fact meets the memories already stored.

* A fact that restates a stored one (same wording after normalisation, or
  the model says ``same_as``) *reinforces* it: importance up, ``updated_at``
  and access bumped, the words it was said in added to its source text; no
  new row. "User prefers Chinese" ten times is one memory. A fact said in
  a group restates only a fact of that group: in a private fact's words it
  is the group's own row, else the group would never read it. Its provenance
  gains the restatement's refs (bounded, :func:`merged_refs`), so the newer
  batch's event and messages stay linked to it (``SqliteMemory.forget``).
* A fact that replaces a stored one (the model says ``updates``) is added
  and the old row becomes ``superseded`` with ``superseded_by`` pointing at
  the new one; only active rows are indexed, so retrieval shows the current
  fact and the history stays.

The model sees candidates found by search under local numbers 1..N (never
database ids, which it could invent or mistype into someone else's row);
:class:`CandidateSet` maps the numbers back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import aiosqlite
import structlog

from .changelog import write_log
from .cues import clean_terms, safe_terms, split_terms
from .engine import SPEAKERS, MemoryEngine, content_hash, more_source_text, row_to_memory
from .forgetting import retire_entries_on
from .llm import Candidate, Fact
from .retrieval import Retriever
from .sharedreads import shared_reads
from .projects import linked_projects, read_aliases
from .scope import Chat, in_group, place, read_in, said_in, shared_with
from .slots import BY_NAME as SLOT_BY_NAME, like_patterns, slots_of
from .types import GLOBAL_OWNER, Category, Memory, NewMemory, Provenance, Source

if TYPE_CHECKING:  # numpy comes with it: imported only when memory.embedding is on (gateway/app.py)
    from .hybrid import HybridRetriever

__all__ = ["MAX_REFS", "Applied", "CandidateSet", "Consolidator", "merged_refs"]

log = structlog.get_logger(component="memory")

REINFORCE_STEP = 0.05
"""How much a restatement raises importance (capped at 1.0)."""

ONE_AT_A_TIME = frozenset({Category.IDENTITY})
"""Categories whose facts hold one value at a time (where the user lives,
works, who their partner is): a new one is shown the owner's current facts
of its category whatever their words (:meth:`Consolidator.recheck`)."""
ONE_AT_A_TIME_SHOWN = 12
"""Of those, the most recently updated this many at most; as many again
of the facts about the same one-at-a-time thing (memory/slots.py)."""
SLOT_ROWS_READ = 200
"""Rows a slot's coarse filter (``LIKE``) reads at most, newest first."""

RECHECK_MIN_SCORE = 0.3
RECHECK_STANDOUT = 1.5
"""A hit on a new fact's words is shown to the model again (:meth:`Consolidator.recheck`)
when it scores at least this, and this many times the fact's weakest hit."""

MAX_REFS = 32
"""Refs a reinforced fact keeps at most: a fact said a thousand times must
not grow a thousand-ref row that every forget scans with ``json_each``."""
FIRST_REFS = 8
"""Of those, the first ones (where the fact was first drawn from); the rest
are the most recent. One ``buf:`` ref of a batch links its whole event, so a
few of each end keep both the first and the latest batches linked."""


def _chat(p: Provenance) -> tuple[str, str]:
    return (p.channel, p.chat_id)


def _of_chat(chat: Chat | None) -> tuple[str, tuple[str, ...]]:
    """An SQL condition (and its values) on ``memories.provenance``: of ``chat``, or '' for any."""
    if chat is None:
        return "", ()
    return (" AND json_valid(provenance) AND json_extract(provenance, '$.channel') IS ?"
            " AND json_extract(provenance, '$.chat_id') IS ?", chat)


def _lent(prov: Provenance, old: Memory | None) -> Memory | None:
    """``old`` when it is a fact shared with the group ``prov`` was said in,
    not said there itself (:meth:`Consolidator._replace_in_group`)."""
    if old is None or not in_group(prov) or not all(chat := _chat(prov)):
        return None
    return old if shared_with(old.provenance, chat) and not said_in(old.provenance, chat) else None


def merged_refs(have: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """``have`` then ``new``, deduplicated in order; past :data:`MAX_REFS`
    the first :data:`FIRST_REFS` and the most recent ones (``new`` last)."""
    refs = tuple(dict.fromkeys((*have, *new)))
    if len(refs) <= MAX_REFS or len(refs) == len(set(have)):
        return refs  # a row is never cut by a restatement that adds no ref
    head = refs[:FIRST_REFS]
    # A ref cited again counts as recent, so the newest batch is never cut
    # because an older copy of one of its refs sat in the middle.
    newest = tuple(r for r in dict.fromkeys(new) if r not in head)
    older = tuple(r for r in refs[FIRST_REFS:] if r not in newest)
    return head + (older + newest)[-(MAX_REFS - FIRST_REFS) :]


def _cited(
    provenance: Provenance, lines: Sequence[int], line_refs: Sequence[str], line_messages: Sequence[str] = (),
    line_speakers: Sequence[tuple[str, str]] = (), line_voices: Sequence[Voices] = (),
) -> Provenance:
    """``provenance`` with the refs of the input ``lines`` a fact names
    (``line_refs[i - 1]``), the platform messages they were
    (``line_messages[i - 1]``) and, for a group's note, who spoke them
    (``line_speakers[i - 1]``: owner id and name, '' for the bot's reply);
    all of the input's when none of them is valid."""
    refs = tuple(dict.fromkeys(line_refs[i - 1] for i in lines if 1 <= i <= len(line_refs)))
    mids = tuple(dict.fromkeys(m for i in lines if 1 <= i <= len(line_messages) and (m := line_messages[i - 1])))
    spoke = [line_speakers[i - 1] for i in lines if 1 <= i <= len(line_speakers) and line_speakers[i - 1][0]]
    if refs:
        provenance = replace(provenance, refs=refs)
    if mids:
        provenance = replace(provenance, message_ids=mids)
    if spoke:
        provenance = replace(provenance, speakers=tuple(dict.fromkeys(who for who, _ in spoke)),
                             said_by=tuple(dict.fromkeys(name for _, name in spoke if name)))
    voiced = [line_voices[i - 1] for i in lines if 1 <= i <= len(line_voices) and line_voices[i - 1][0]]
    if voiced:  # lines each retelling several members (a group's day's events)
        provenance = replace(provenance, speakers=tuple(dict.fromkeys(w for who, _ in voiced for w in who)),
                             said_by=tuple(dict.fromkeys(n for _, names in voiced for n in names)))
    return provenance


Voices = tuple[tuple[str, ...], tuple[str, ...]]
"""The owner ids and names of the members a line retells (``speakers``,
``said_by`` of a group's event, memory/compression.py)."""


@dataclass(frozen=True)
class CandidateSet:
    memories: tuple[Memory, ...] = ()

    def for_prompt(self) -> list[Candidate]:
        return [
            Candidate(n=i, content=m.content, category=m.category.value, importance=m.importance)
            for i, m in enumerate(self.memories, start=1)
        ]

    def get(self, n: int | None) -> Memory | None:
        if n is None or not 1 <= n <= len(self.memories):
            return None
        return self.memories[n - 1]


@dataclass
class Applied:
    added: list[int] = field(default_factory=list)
    reinforced: list[int] = field(default_factory=list)
    superseded: list[tuple[int, int]] = field(default_factory=list)  # (old, new)


class Consolidator:
    def __init__(
        self,
        engine: MemoryEngine,
        retriever: Retriever | HybridRetriever | None = None,
        *,
        max_candidates: int = 20,
        per_query: int = 5,
        max_queries: int = 20,
    ) -> None:
        self.engine = engine
        self.retriever = retriever or Retriever(engine)
        self.max_candidates = max_candidates
        self.per_query = per_query
        self.max_queries = max_queries

    async def candidates(self, owner: str, texts: Sequence[str], *, group: Chat | None = None) -> CandidateSet:
        """The owner's Tier 2 facts that the texts are most about. ``group``:
        the texts were said in that group chat; only the owner's facts that
        group may read are candidates (memory/scope.py): shown the member's
        private facts to merge with, the model copies their words into a
        new fact of the group ("sertraline 50mg")."""
        best: dict[int, float] = {}
        asked = list(texts)[-self.max_queries :]
        prepare = getattr(self.retriever, "prepare", None)
        if prepare is not None:  # hybrid recall: the texts' vectors in one request
            await prepare(asked)
        # One line's retrieval per line, the rows and term counts read once
        # for all of them (memory/sharedreads.py); a line said twice ("ok")
        # finds the same hits again, so it is asked once.
        with shared_reads():
            await self._lexical().prefetch(owner, asked, private=group is None, chat=group)
            for text in dict.fromkeys(asked):
                for i, score in await self._ranked(owner, text, group):
                    best[i] = max(best.get(i, 0.0), score)
        ranked = sorted(best, key=lambda i: -best[i])
        mems = await self.engine.get_many(ranked)
        # Only the owner's own active facts: a user's chat never rewrites
        # _global memories or the Tier 1 profile (refreshed weekly from Tier 2).
        chosen = [
            mems[i] for i in ranked if i in mems and mems[i].owner == owner and mems[i].tier == 2
            and mems[i].status.value == "active" and (group is None or read_in(mems[i].provenance, group))
        ]
        return CandidateSet(tuple(chosen[: self.max_candidates]))

    async def _ranked(self, owner: str, text: str, group: Chat | None) -> list[tuple[int, float]]:
        """Ids and scores of the owner's best :attr:`per_query` memories for
        ``text`` (only what ``group`` may read, when given), best first: the
        word index's without building hits; hybrid recall's from its hits."""
        private = group is None
        if isinstance(self.retriever, Retriever):
            return await self.retriever.ranked(owner, text, limit=self.per_query, private=private, chat=group)
        hits = await self.retriever.retrieve(owner, text, limit=self.per_query, private=private, chat=group)
        return [(h.id, h.score) for h in hits]

    def _lexical(self) -> Retriever:
        """The word index's retriever (hybrid recall's, under its vectors)."""
        return self.retriever if isinstance(self.retriever, Retriever) else self.retriever.lexical

    async def recheck(
        self, owner: str, facts: Sequence[Fact], cands: CandidateSet, *, group: Chat | None = None
    ) -> CandidateSet | None:
        """``cands`` and the owner's active Tier 2 facts that the model's
        new ``facts`` (neither ``same_as`` nor ``updates``) may replace but
        it was not shown; None when there are none.

        Candidates are searched by the input's words, and a change is often
        said in others ("I moved to Berlin" / "User lives in Shanghai"):
        then the model was shown nothing to replace and both facts stayed
        current. The facts it wrote say what they are about: their words
        (hits of the same category) and the facts already filed under the
        same project (any of its names, memory/projects.py) and topic (not
        ``_general``) find what they replace; at most ``per_query`` of
        those. A fact of a category that holds one value at a time
        (:data:`ONE_AT_A_TIME`: "User moved to Berlin" under ``_general``
        shares no telling word with "User lives in Shanghai") is also shown
        the owner's current facts of that category, at most
        :data:`ONE_AT_A_TIME_SHOWN`. The old numbers stay unchanged.
        ``group``: as for :meth:`candidates`, only what that group may read."""
        shown = {m.id for m in cands.memories}
        fresh = [f for f in facts if f.same_as is None and f.updates is None and not await self._stored(owner, f.content, group)]
        if not fresh:
            return None
        found: dict[int, Memory] = {}
        aliases = await self.engine.project_aliases(owner)

        def take(m: Memory, into: dict[int, Memory] = found) -> None:
            if (m.owner == owner and m.tier == 2 and m.status.value == "active" and m.id not in shown
                    and m.category != Category.CREDENTIAL and (group is None or read_in(m.provenance, group))):
                into.setdefault(m.id, m)

        prepare = getattr(self.retriever, "prepare", None)
        if prepare is not None:  # hybrid recall: the facts' vectors in one request
            await prepare([f.content for f in fresh])
        with shared_reads():
            await self._lexical().prefetch(owner, [f.content for f in fresh], private=group is None, chat=group)
            hits_of = [(f, await self._ranked(owner, f.content, group)) for f in fresh]
        for f, hits in hits_of:
            mems = await self.engine.get_many([i for i, _ in hits])
            # Facts share their subject ("User ...", "用户..."): a hit that
            # shares only that scores like all the others. One about the
            # same thing stands out (docs/RETRIEVAL.md, "Second look").
            floor = max(RECHECK_MIN_SCORE, RECHECK_STANDOUT * min(sc for _, sc in hits) if len(hits) > 1 else 0.0)
            for i, sc in hits:
                if sc >= floor and i in mems and mems[i].category == f.category:
                    take(mems[i])
            if f.topic != "_general":
                names = sorted(linked_projects(aliases, [f.project]))
                rows = await self.engine.db.fetchall(
                    "SELECT * FROM memories WHERE owner = ? AND tier = 2 AND status = 'active' "
                    f"AND project IN ({','.join('?' * len(names))}) AND topic = ? "
                    "ORDER BY updated_at DESC, id DESC LIMIT ?",
                    (owner, *names, f.topic, self.per_query),
                )
                for m in map(row_to_memory, rows):
                    take(m)
        more = list(found.values())[: self.per_query]
        alike: dict[int, Memory] = {}
        # About the same one-at-a-time thing, of any category (memory/slots.py).
        for m in await self._slot_mates(owner, fresh, aliases, set(found)):
            take(m, alike)
        for cat in sorted({f.category for f in fresh if f.category in ONE_AT_A_TIME}):
            rows = await self.engine.db.fetchall(
                "SELECT * FROM memories WHERE owner = ? AND tier = 2 AND status = 'active' AND category = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (owner, cat.value, ONE_AT_A_TIME_SHOWN + len(shown) + len(more)),
            )
            for m in map(row_to_memory, rows):
                if m.id not in found:
                    take(m, alike)
        more += list(alike.values())[:ONE_AT_A_TIME_SHOWN]
        if not more:
            return None
        return CandidateSet(cands.memories + tuple(more))

    async def _slot_mates(
        self, owner: str, fresh: Sequence[Fact], aliases: dict[str, str], skip: set[int]
    ) -> list[Memory]:
        """The owner's active Tier 2 facts about a thing one of ``fresh``
        is about that holds one value at a time (:func:`memory.slots.slots_of`;
        a project's own only under a name of the fact's project), most
        recently updated first, at most :data:`ONE_AT_A_TIME_SHOWN`."""
        out: dict[int, Memory] = {}
        args: tuple[str, ...]
        for f in fresh:
            names = slots_of(f.content)
            for scoped in (False, True):
                want = {n for n in names if SLOT_BY_NAME[n].per_project == scoped}
                if not want or (scoped and f.project == GLOBAL_OWNER):
                    continue
                likes = like_patterns(want)
                where, args = "", ()
                if scoped:
                    projects = sorted(linked_projects(aliases, [f.project]))
                    where, args = f" AND project IN ({','.join('?' * len(projects))})", tuple(projects)
                # LIKE is a coarse filter (any case, inside words); slots_of decides.
                rows = await self.engine.db.fetchall(
                    f"SELECT * FROM memories WHERE owner = ? AND tier = 2 AND status = 'active'{where} "
                    f"AND ({' OR '.join(['content LIKE ?'] * len(likes))}) "
                    "ORDER BY updated_at DESC, id DESC LIMIT ?",
                    (owner, *args, *likes, SLOT_ROWS_READ),
                )
                for m in map(row_to_memory, rows):
                    if m.id not in skip and slots_of(m.content) & want:
                        out.setdefault(m.id, m)
        ranked = sorted(out.values(), key=lambda m: (m.updated_at, m.id), reverse=True)
        return ranked[:ONE_AT_A_TIME_SHOWN]

    async def _stored(self, owner: str, content: str, group: Chat | None = None) -> bool:
        """An active Tier 2 fact in these words, of ``group`` when named (it
        is reinforced, as in :meth:`apply`)."""
        where, args = _of_chat(group)
        row = await self.engine.db.fetchone(
            "SELECT 1 FROM memories WHERE owner = ? AND content_hash = ? AND status = 'active' AND tier = 2"
            f"{where} LIMIT 1",
            (owner, content_hash(content), *args),
        )
        return row is not None

    async def replaced(self, cands: CandidateSet, *, group: Chat | None = None) -> list[tuple[Memory, int]]:
        """The facts each candidate replaced, with the candidate's number:
        what the input may still tell though it is no longer true. ``group``:
        of its own facts only; what a shared one replaced stays private."""
        numbers = {m.id: n for n, m in enumerate(cands.memories, start=1)
                   if group is None or said_in(m.provenance, group)}
        if not numbers:
            return []
        marks = ",".join("?" * len(numbers))
        rows = await self.engine.db.fetchall(
            f"SELECT * FROM memories WHERE status = 'superseded' AND tier = 2 AND superseded_by IN ({marks}) "
            "ORDER BY id",
            tuple(numbers),
        )
        return [(m, numbers[m.superseded_by]) for m in map(row_to_memory, rows) if m.superseded_by in numbers]

    async def apply(
        self,
        conn: aiosqlite.Connection,
        owner: str,
        facts: Sequence[Fact],
        cands: CandidateSet,
        *,
        provenance: Provenance,
        source: Source = Source.EXTRACTION,
        job: str = "extraction",
        said: Sequence[str] = (),
        line_refs: Sequence[str] = (),
        line_messages: Sequence[str] = (),
        line_times: Sequence[str] = (),
        said_at: str = "",
        revive: bool = True,
        line_speakers: Sequence[tuple[str, str]] = (),
        line_voices: Sequence[Voices] = (),
    ) -> Applied:
        """Write ``facts`` inside the caller's transaction.

        ``said``: the input lines the model was shown (1..N); a new fact is
        indexed with the ones its ``lines`` name (``NewMemory.source_text``).
        ``line_refs``: what each of those lines stands for (``event:<id>``);
        a fact cites the refs of its ``lines``, or ``provenance.refs`` when
        it names no valid line. A reinforced fact gains the refs it is cited with.
        ``line_messages``: the platform message id of each line; a new fact
        names only those of its ``lines`` (``Provenance.message_ids``), so a
        recalled message takes the facts drawn from it and no others
        (``SqliteMemory.retract``).
        ``line_times``: when each of those lines was said (stored stamps);
        a new fact is dated by the latest of its ``lines``, else
        ``said_at``, else now: a batch learnt late (after the memory model's
        backoff, or the next morning's compression) is still cited, and found
        by "yesterday", on the day it was said (seed 002).
        ``line_speakers`` (a group's batch: who said each line) and
        ``line_voices`` (a group's day: the members each event retells):
        a group's note names those of its ``lines`` (memory/groupnotes.py).
        ``revive=False`` (the daily compression, which retells a day already
        learnt): a fact in the very words of one already replaced, and
        replacing nothing itself, is not written back: the day told the old
        fact before the one that replaced it. In a chat (``True``) the same
        words are the user going back to it, and count as new.
        """
        out = Applied()
        at = self.engine.now()
        # A fact labelled with a renamed project's old name goes under the
        # current one (memory/projects.py); read here, so a rename learnt
        # in this transaction counts.
        aliases = await read_aliases(conn, [GLOBAL_OWNER, owner])
        for fact in facts:
            if fact.project in aliases:
                fact = replace(fact, project=aliases[fact.project])
            words = "\n".join(said[i - 1] for i in fact.lines if 1 <= i <= len(said))
            prov = _cited(provenance, fact.lines, line_refs, line_messages, line_speakers, line_voices)
            replaced = cands.get(fact.updates)
            # A fact its owner shared with this group, updated or restated
            # here: the group's fact stands for it in this group alone
            # (``replaced_in``); their own record is not rewritten unasked.
            lent = _lent(prov, replaced or cands.get(fact.same_as))
            if lent is not None:
                replaced = None
            if replaced is not None and _chat(replaced.provenance) != _chat(prov):
                # A rewrite of a fact from another chat (a private one, another
                # group) may carry its words: no group reads it (memory/scope.py).
                prov = replace(prov, chat_id="")
            # A group's fact restates only a fact that group reads: folded into
            # a private one (or another group's), no group would read it.
            here = _chat(prov) if in_group(prov) else None
            same = None if replaced or lent else cands.get(fact.same_as)
            if same is not None and (not await self._active(conn, same.id)
                                     or (here is not None and _chat(same.provenance) != here)):
                same = None
            if same is None:
                same = await self._same_wording(conn, owner, fact.content, chat=here)
            if same is None and replaced is None and lent is None and not revive:
                old = await self._same_wording(conn, owner, fact.content, status="superseded", chat=here)
                if old is not None:
                    await write_log(
                        conn, at=at, job=job, owner=owner, action="skip", memory_id=old.id,
                        detail={"restated": fact.content, "replaced_by": old.superseded_by},
                    )
                    continue
            if same is not None and (replaced is None or same.id != replaced.id):
                # A group searches its facts by their source words: another
                # chat's words (a private one) must not join a group's fact.
                heard = words if not in_group(same.provenance) or _chat(same.provenance) == _chat(prov) else ""
                await self._reinforce(conn, same, fact, heard, prov.refs, prov)
                out.reinforced.append(same.id)
                await write_log(
                    conn, at=at, job=job, owner=owner, action="reinforce", memory_id=same.id,
                    detail={"restated": fact.content},
                )
                if lent is not None:
                    await self._replace_in_group(conn, lent, same.id, _chat(prov), job=job, at=at)
                continue
            times = [t for i in fact.lines if 1 <= i <= len(line_times) and (t := line_times[i - 1])]
            new = await self.engine.add(
                NewMemory(
                    owner=owner,
                    content=fact.content,
                    category=fact.category,
                    importance=fact.importance,
                    project=fact.project,
                    topic=fact.topic,
                    source=source,
                    provenance=prov,
                    source_text=words,
                    search_terms=_terms(fact),
                ),
                conn=conn,
                at=min(max(times, default=said_at) or at, at),  # never after now
            )
            out.added.append(new.id)
            await write_log(conn, at=at, job=job, owner=owner, action="add", memory_id=new.id, detail=fact.content)
            if lent is not None:
                await self._replace_in_group(conn, lent, new.id, _chat(prov), job=job, at=at)
            if replaced is not None and await self._active(conn, replaced.id):
                await self.engine.set_status(replaced.id, "superseded", superseded_by=new.id, conn=conn)
                out.superseded.append((replaced.id, new.id))
                await write_log(
                    conn, at=at, job=job, owner=owner, action="supersede", memory_id=replaced.id,
                    detail={"old": replaced.content, "new": fact.content, "by": new.id},
                )
                await self._retire_entries_on(conn, owner, replaced.id, new.id, job=job, at=at)
        return out

    async def _replace_in_group(
        self, conn: aiosqlite.Connection, old: Memory, new: int, group: Chat, *, job: str, at: str
    ) -> None:
        """``new``, said in ``group`` where ``old`` was shared, is read there
        instead of it (memory/scope.py); ``old`` stays as it is elsewhere.
        Only its ``replaced_in`` changes: read live by every search."""
        async with conn.execute("SELECT provenance FROM memories WHERE id = ? AND status = 'active'", (old.id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            return
        prov = Provenance.from_json(row[0])
        here = place(group)
        kept = tuple(x for x in prov.replaced_in if x[0] != here)
        await conn.execute("UPDATE memories SET provenance = ? WHERE id = ?",
                           (replace(prov, replaced_in=(*kept, (here, new))).to_json(), old.id))
        await write_log(conn, at=at, job=job, owner=old.owner, action="replace_in_group", memory_id=old.id,
                        detail={"group": here, "by": new})

    async def _retire_entries_on(
        self, conn: aiosqlite.Connection, owner: str, old: int, new: int, *, job: str, at: str
    ) -> None:
        """Core Memory entries the weekly refresh drew from ``old`` state it
        as current in every prompt; once it is replaced they are superseded
        by ``new`` too (:func:`~memory.forgetting.retire_entries_on`)."""
        await retire_entries_on(self.engine, conn, owner, old, new, job=job, at=at)

    async def _active(self, conn: aiosqlite.Connection, memory_id: int) -> bool:
        async with conn.execute("SELECT status FROM memories WHERE id = ?", (memory_id,)) as cur:
            row = await cur.fetchone()
        return row is not None and row["status"] == "active"

    async def _same_wording(
        self, conn: aiosqlite.Connection, owner: str, content: str, *, status: str = "active",
        chat: Chat | None = None,
    ) -> Memory | None:
        """The oldest fact in these words; with ``chat``, of that chat only."""
        where, args = _of_chat(chat)
        # On the writer connection: sees facts added earlier in this batch.
        async with conn.execute(
            "SELECT * FROM memories WHERE owner = ? AND content_hash = ? AND status = ? AND tier = 2"
            f"{where} ORDER BY id LIMIT 1",
            (owner, content_hash(content), status, *args),
        ) as cur:
            row = await cur.fetchone()
        return row_to_memory(row) if row else None

    async def _reinforce(
        self, conn: aiosqlite.Connection, m: Memory, fact: Fact, words: str, refs: Sequence[str],
        said: Provenance | None = None,
    ) -> None:
        async with conn.execute(
            "SELECT importance, source_text, provenance, search_terms FROM memories WHERE id = ?", (m.id,)
        ) as cur:
            row = await cur.fetchone()
        current = float(row["importance"]) if row else m.importance
        importance = min(1.0, max(current + REINFORCE_STEP, fact.importance))
        # Said again in other words: those words find it too.
        source = more_source_text(row["source_text"] if row else m.source_text, words)
        # And the words it is asked by (the first ones kept, up to the cap).
        known = split_terms(row["search_terms"]) if row else m.search_terms
        terms = clean_terms([*known, *_terms(replace(fact, category=m.category))])
        await self.engine.update(m.id, importance=round(importance, 3), source_text=source,
                                 search_terms=terms if terms != known else None, touch=True, conn=conn)
        # Said again in another batch or day: its event and messages are the
        # fact's sources too. Forgetting the fact then names that event
        # (SqliteMemory._kept_links), which the daily compression would
        # otherwise turn back into the fact.
        have = Provenance.from_json(row["provenance"]) if row else m.provenance
        more = merged_refs(have.refs, refs)
        # A group's note said again by another member cites them too (their
        # erasure takes it: memory/groupnotes.py).
        speakers = tuple(dict.fromkeys([*have.speakers, *(said.speakers if said is not None else ())]))
        said_by = tuple(dict.fromkeys([*have.said_by, *(said.said_by if said is not None else ())]))
        if more != have.refs or speakers != have.speakers or said_by != have.said_by:
            if speakers != have.speakers or said_by != have.said_by:
                self.engine.db.bump(SPEAKERS)  # no longer one member's note (memory/samenames.py)
            # Same JSON shape as NewMemory's (``refs`` a list): json_each(provenance, '$.refs') reads it.
            await conn.execute(
                "UPDATE memories SET provenance = ? WHERE id = ?",
                (replace(have, refs=more, speakers=speakers, said_by=said_by).to_json(), m.id),
            )


def _terms(fact: Fact) -> tuple[str, ...]:
    """The search terms a fact is stored with (memory/cues.py)."""
    return safe_terms(fact.terms, credential=fact.category is Category.CREDENTIAL)
