"""Daily and weekly compression (seed 7) and forgetting (seed 8.4).

* :meth:`Compressor.daily`: uncompressed Tier 3 events of earlier days ->
  Tier 2 facts (deduplicated like any extraction), events marked compressed
  in the same transaction (not ``_global``'s: the legacy top-level logs
  the import made events of stay the operator's record, never facts); a day's events go to the model in batches of at
  most ``daily_batch_tokens``.
* :meth:`Compressor.weekly`: archive decayed ``temp``/``debug`` facts; merge
  each project/topic partition with >= 10 active facts; refresh Tier 1
  (<= 100 entries) from high-importance Tier 2.

Safety, because peers lose facts exactly here:

* a merge must account for every input (merged ``from`` it, or dropped with
  a reason); if more than 25% of a partition is unaccounted for, the merge
  is rejected and nothing changes. Unaccounted facts of an accepted merge
  stay active.
* nothing is deleted: merged rows are archived with ``superseded_by``
  pointing at the merged fact; dropped and decayed rows are archived.
* every change, and every rejection, is a line in ``memory_log``
  (``myclaw memory log``).
* both jobs hold the same lease, so they never run together; a job past its
  time limit is stopped and releases the lease.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

import aiosqlite
import structlog

from .changelog import write_log
from .clock import ZoneOf, format_ts, local_day, owner_zone, parse_ts, weekday
from .consolidate import Consolidator, Voices
from .cues import safe_terms
from .decay import decay_factor
from .engine import REFRESH, TIER1, MemoryEngine, content_hash, row_to_memory
from .errorlog import error_fields
from .forgetting import repeats_forgotten
from .groupowner import is_group_owner
from .lease import Lease, Leases
from .scope import in_group
from .llm import Candidate, MemoryLLM, MemoryLLMError, ProfileEntry
from .tokens import estimate_tokens
from .types import GLOBAL_OWNER, Category, Memory, NewMemory, Provenance, Source
from .zonehistory import lived_wall

__all__ = ["COMPRESS_LEASE", "Compressor", "DailyReport", "WeeklyReport"]

log = structlog.get_logger(component="memory")

COMPRESS_LEASE = "memory:compress"
"""One lease for both jobs: daily and weekly never run at the same time."""


@dataclass
class DailyReport:
    events: int = 0
    added: int = 0
    reinforced: int = 0
    superseded: int = 0
    failed_groups: int = 0
    # Events of a day not over yet in their owner's zone (today's): compressed
    # by the first run after it ends, not this one.
    waiting: int = 0


@dataclass
class WeeklyReport:
    partitions: int = 0
    merged: int = 0  # input rows archived into merged facts
    created: int = 0  # merged facts written
    dropped: int = 0
    rejected: int = 0  # merges refused by the safety gate
    failed: int = 0  # LLM failures (nothing changed for that unit)
    decayed: int = 0
    promoted: int = 0
    demoted: int = 0
    unchanged: int = 0  # merges and profile refreshes not asked again: what the last one kept whole
    notes: list[str] = field(default_factory=list)


def _said(m: Memory, zone: tzinfo) -> str:
    """``said 2026-03-01`` (and ``, last said 2026-06-02`` when it was said
    again later), on the owner's calendar: the profile model tells by it
    which of two contradicting facts holds."""
    first, last = local_day(m.created_at, zone), local_day(m.updated_at, zone)
    return f"said {first}" + (f", last said {last}" if last != first else "")


def _batches(events: Sequence[tuple[int, str, str]], max_tokens: int) -> list[list[tuple[int, str, str]]]:
    """A day's events in order, grouped so each group's summaries stay
    within ``max_tokens`` (an event larger than that goes alone)."""
    out: list[list[tuple[int, str, str]]] = []
    size = 0
    for ev in events:
        n = estimate_tokens(ev[2])
        if not out or (size + n > max_tokens and out[-1]):
            out.append([])
            size = 0
        out[-1].append(ev)
        size += n
    return out


def _one_chat(mems: Sequence[Memory]) -> tuple[str, str]:
    """(channel, chat_id) the memories were all said in, or ('', '')."""
    chats = {(m.provenance.channel, m.provenance.chat_id) for m in mems}
    return chats.pop() if len(chats) == 1 else ("", "")


def _reader(m: Memory) -> tuple[str, str]:
    """Who may read a fact besides its owner: the group it was said in, or
    ('', '') for a fact no group reads (private, several chats, notes)."""
    p = m.provenance
    return (p.channel, p.chat_id) if in_group(p) and p.chat_id else ("", "")


def _provenance(text: str | None, channel: str, chat_id: str) -> Provenance:
    """An event's provenance; one unreadable (hand-edited) as its chat alone."""
    try:
        return Provenance.from_json(text)
    except (ValueError, TypeError):
        return Provenance(channel=channel, chat_id=chat_id)


def _spoken(chat: Provenance, days: Sequence[Provenance]) -> Provenance:
    """A group owner's day (memory/groupnotes.py): a note naming none of
    its lines names every member whose lines the day's events came from
    (``speakers`` / ``said_by``), so a member's erasure (``forget_speaker``)
    finds it; one naming its lines, the members of those events only."""
    return replace(chat, speakers=tuple(dict.fromkeys(s for p in days for s in p.speakers)),
                   said_by=tuple(dict.fromkeys(n for p in days for n in p.said_by)))


class Compressor:
    def __init__(
        self,
        engine: MemoryEngine,
        llm: MemoryLLM,
        *,
        consolidator: Consolidator | None = None,
        leases: Leases | None = None,
        timezone: str = "UTC",
        min_partition: int = 10,
        max_merge_batch: int = 60,
        gate: float = 0.25,
        profile_limit: int = 100,
        profile_min_importance: float = 0.7,
        decay_floor: float = 0.01,
        lease_ttl: timedelta = timedelta(minutes=15),
        job_timeout: float | None = 2 * 3600,
        daily_batch_tokens: int = 6000,
    ) -> None:
        self.engine = engine
        self.llm = llm
        self.consolidator = consolidator or Consolidator(engine)
        self.leases = leases or Leases(engine.db, engine.clock)
        self.tz = ZoneInfo(timezone)
        self.min_partition = min_partition
        self.max_merge_batch = max_merge_batch
        self.gate = gate
        self.profile_limit = profile_limit
        self.profile_min_importance = profile_min_importance
        self.decay_floor = decay_floor
        self.lease_ttl = lease_ttl
        self.job_timeout = job_timeout
        # One LLM call reads at most this much of a day's events: a day of
        # migrated logs can be far more than a memory model takes at once.
        self.daily_batch_tokens = daily_batch_tokens
        # Each user's own zone (set by the App, as ExtractionService's): their
        # events are dated on their calendar, so their day ends at their
        # midnight, not the gateway's. None: ``timezone`` for everyone.
        self.zone_of: ZoneOf | None = None

    @asynccontextmanager
    async def _write(self, lease: Lease) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction that first proves ``lease`` is still ours.
        Renewed between steps only, a lease expired during a long model call
        (taken over by another run) was found lost after the step's write;
        checked in the write's own transaction (``BEGIN IMMEDIATE``: no
        takeover in between), a run that lost it writes nothing more."""
        async with self.engine.db.transaction() as conn:
            await lease.fence(conn)
            yield conn

    # -- daily ------------------------------------------------------------------

    async def daily(self, now: datetime | None = None) -> DailyReport:
        """Compress every uncompressed event dated before its owner's today
        (in their zone; a day still going on there waits for the next run)."""
        now = now or self.engine.clock.now()
        # No zone is ahead of UTC+14: nothing dated from that day on is done anywhere.
        latest = (now + timedelta(hours=14)).strftime("%Y-%m-%d")
        report = DailyReport()
        async with (
            self.leases.hold(COMPRESS_LEASE, "daily_compress", ttl=self.lease_ttl, timeout=self.job_timeout) as lease,
            self.engine.db.larger_cache(),
        ):
            rows = await self.engine.db.fetchall(
                # A group's own days (memory/groupnotes.py) too: retold as its
                # notes, each naming the members its day's lines came from.
                # Not _global's: its days are the legacy store's top-level logs
                # (memory/migrate.py), never shown to users, and its facts are
                # read by every user and every group.
                "SELECT id, owner, event_date, channel, chat_id, summary, provenance FROM daily_events "
                "WHERE is_compressed = 0 AND event_date < ? AND owner != ? "
                "ORDER BY owner, event_date, id",
                (latest, GLOBAL_OWNER),
            )
            later = await self.engine.db.fetchone(
                "SELECT count(*) FROM daily_events WHERE is_compressed = 0 AND event_date >= ? AND owner != ?",
                (latest, GLOBAL_OWNER))
            report.waiting = int(later[0]) if later is not None else 0
            today: dict[str, str] = {}
            # One chat's day at a time: a group's summary is then that group's
            # (memory/scope.py), and no private words are mixed into it.
            groups: dict[tuple[str, str, str, str], list[tuple[int, str, str]]] = defaultdict(list)
            said_in_group: set[tuple[str, str]] = set()
            spoke: dict[tuple[str, str, str, str], list[tuple[int, Provenance]]] = defaultdict(list)  # a group's days
            for r in rows:
                owner = r["owner"]
                if owner not in today:
                    zone = await owner_zone(self.zone_of, owner, self.tz)
                    today[owner] = now.astimezone(zone).strftime("%Y-%m-%d")
                if r["event_date"] >= today[owner]:
                    report.waiting += 1
                else:
                    key = (owner, r["event_date"], r["channel"], r["chat_id"])
                    groups[key].append((r["id"], r["channel"], r["summary"]))
                    prov = _provenance(r["provenance"], r["channel"], r["chat_id"])
                    if in_group(prov) or is_group_owner(owner):
                        said_in_group.add((r["channel"], r["chat_id"]))
                    if is_group_owner(owner):
                        spoke[key].append((r["id"], prov))
            for (owner, day, channel, chat_id), events in groups.items():
                chat = Provenance(channel=channel if channel != "unknown" else "", chat_id=chat_id,
                                  group=(channel, chat_id) in said_in_group and bool(chat_id))
                voices: dict[int, Voices] = {}
                if is_group_owner(owner):
                    chat = _spoken(chat, [p for _, p in spoke[(owner, day, channel, chat_id)]])
                    voices = {i: (p.speakers, p.said_by) for i, p in spoke[(owner, day, channel, chat_id)]}
                for batch in _batches(events, self.daily_batch_tokens):
                    await self._daily_group(owner, day, batch, report, lease, chat, voices)
                    await lease.renew()
            async with self._write(lease) as conn:
                await write_log(conn, at=self.engine.now(), job="daily_compress", action="run", detail=report.__dict__)
        log.info("daily compression done", **report.__dict__)
        return report

    async def _daily_group(
        self, owner: str, day: str, events: Sequence[tuple[int, str, str]], report: DailyReport, lease: Lease,
        chat: Provenance = Provenance(), voices: dict[int, Voices] | None = None,
    ) -> None:
        summaries = [s for _, _, s in events]
        try:
            # A group's day: only what that group may read of the member
            # (memory/scope.py), or a private fact's words end up in its facts.
            cands = await self.consolidator.candidates(
                owner, summaries, group=(chat.channel, chat.chat_id) if chat.group else None)
            # What the candidates replaced: a day that told the old fact
            # before the new one must not make the old one current again.
            replaced = [(m.content, n) for m, n in await self.consolidator.replaced(
                cands, group=(chat.channel, chat.chat_id) if chat.group else None)]
            ext = await self.llm.extract(
                # The day, so a summary's "next Wednesday" can be dated.
                [f"- {day} {weekday(date.fromisoformat(day))} [{ch}] {s}" for _, ch, s in events], cands.for_prompt(),
                source="event log", replaced=replaced,
                group=chat.group is True, words=[s for _, _, s in events], notes=is_group_owner(owner),
            )
        except MemoryLLMError as exc:
            # The events stay uncompressed; tomorrow's run picks them up.
            report.failed_groups += 1
            log.warning("daily compression of a day failed; kept for the next run", owner=owner, day=day, **error_fields(exc))
            return
        ids = [i for i, _, _ in events]
        marks = ",".join("?" * len(ids))
        # A fact cites the events of the lines it names (``lines``, as its
        # source words); one naming none cites the whole day's, as before.
        line_refs = [f"event:{i}" for i in ids]
        prov = replace(chat, date_from=day, date_to=day, refs=tuple(line_refs))
        async with self._write(lease) as conn:
            async with conn.execute(
                f"SELECT COUNT(*) FROM daily_events WHERE is_compressed = 0 AND id IN ({marks})", ids
            ) as cur:
                row = await cur.fetchone()
            assert row is not None  # COUNT(*) always returns a row
            if row[0] != len(ids):
                return  # compressed meanwhile by another run
            # Dated when said (seed 002), not this morning: an event's last
            # line, else the day's noon on its owner's calendar.
            async with conn.execute(f"SELECT id, provenance FROM daily_events WHERE id IN ({marks})", ids) as cur:
                said = {r["id"]: _provenance(r["provenance"], "", "").date_to for r in await cur.fetchall()}
            zone = await self.engine.lived(owner, await owner_zone(self.zone_of, owner, self.tz)) or self.tz
            noon = lived_wall(date.fromisoformat(day), time(12), zone)  # where they were that day
            applied = await self.consolidator.apply(
                conn, owner, ext.facts, cands, provenance=prov, source=Source.COMPRESSION, job="daily_compress",
                said=summaries, line_refs=line_refs, revive=False,
                line_times=[t if len(t := said.get(i, "")) > 10 else "" for i in ids], said_at=format_ts(noon),
                # A group's note names the members of the events it retells (memory/groupnotes.py).
                line_voices=[voices.get(i, ((), ())) for i in ids] if voices else (),
            )
            await self.engine.mark_events_compressed(ids, conn=conn)
        report.events += len(ids)
        report.added += len(applied.added)
        report.reinforced += len(applied.reinforced)
        report.superseded += len(applied.superseded)

    # -- weekly -------------------------------------------------------------------

    async def weekly(self, now: datetime | None = None) -> WeeklyReport:
        now = now or self.engine.clock.now()
        report = WeeklyReport()
        async with (
            self.leases.hold(COMPRESS_LEASE, "weekly_compress", ttl=self.lease_ttl, timeout=self.job_timeout) as lease,
            self.engine.db.larger_cache(),
        ):
            owners = [r[0] for r in await self.engine.db.fetchall(
                "SELECT DISTINCT owner FROM memories WHERE status = 'active' ORDER BY owner")]
            for owner in owners:
                await self._archive_decayed(owner, now, report, lease)
                if is_group_owner(owner):
                    # A group's notes fade as anyone's, but are never merged (a
                    # merged note would not name who spoke each, which their
                    # erasure needs) nor made anyone's Core Memory.
                    continue
                parts = await self.engine.db.fetchall(
                    "SELECT project, topic FROM memories WHERE owner = ? AND tier = 2 AND status = 'active' "
                    "GROUP BY project, topic HAVING COUNT(*) >= ? ORDER BY project, topic",
                    (owner, self.min_partition),
                )
                for p in parts:
                    report.partitions += 1
                    await self._merge_partition(owner, p["project"], p["topic"], report, lease)
                await self._refresh_profile(owner, report, lease)
                await lease.renew()
            async with self._write(lease) as conn:
                summary = {k: v for k, v in report.__dict__.items() if k != "notes"}
                # Each user's refresh logged what it read (profile_read): per_owner
                # tells engine.refreshed_upto this line holds no cutoff for all.
                await write_log(conn, at=self.engine.now(), job="weekly_compress", action="run",
                                detail={**summary, "per_owner": True})
        log.info("weekly compression done", **{k: v for k, v in report.__dict__.items() if k != "notes"})
        return report

    async def _archive_decayed(self, owner: str, now: datetime, report: WeeklyReport, lease: Lease) -> None:
        rows = await self.engine.db.fetchall(
            "SELECT id, category, importance, last_accessed FROM memories "
            "WHERE owner = ? AND status = 'active' AND category IN ('temp', 'debug')",
            (owner,),
        )
        gone = []
        for r in rows:
            days = (now - parse_ts(r["last_accessed"])).total_seconds() / 86400
            score = r["importance"] * decay_factor(r["category"], days)
            if score < self.decay_floor:
                gone.append((r["id"], round(score, 4), round(days)))
        if not gone:
            return
        async with self._write(lease) as conn:
            for mid, score, days in gone:
                await self.engine.set_status(mid, "archived", conn=conn)
                await write_log(
                    conn, at=self.engine.now(), job="weekly_compress", owner=owner, action="decay", memory_id=mid,
                    detail={"score": score, "days_unused": days},
                )
        report.decayed += len(gone)

    async def _partition_rows(self, owner: str, project: str, topic: str) -> list[Memory]:
        rows = await self.engine.db.fetchall(
            "SELECT * FROM memories WHERE owner = ? AND tier = 2 AND status = 'active' AND project = ? AND topic = ? "
            "ORDER BY created_at, id",
            (owner, project, topic),
        )
        return [row_to_memory(r) for r in rows]

    async def _merge_partition(
        self, owner: str, project: str, topic: str, report: WeeklyReport, lease: Lease
    ) -> None:
        rows = await self._partition_rows(owner, project, topic)
        # One group's facts apart from the rest: a merge shown a private
        # fact beside a group's may write its words into a fact it says
        # comes from the group's alone, which the group then reads.
        readers: dict[tuple[str, str], list[Memory]] = defaultdict(list)
        for m in rows:
            readers[_reader(m)].append(m)
        for part in readers.values():
            # Oldest first, so "higher number is newer" holds; a huge partition is
            # merged in slices so a prompt stays small and one bad answer costs
            # only its slice.
            for start in range(0, len(part), self.max_merge_batch):
                chunk = part[start : start + self.max_merge_batch]
                if len(chunk) < 2:
                    continue
                await self._merge_chunk(owner, f"{project}/{topic}", chunk, report, lease)
                await lease.renew()

    async def _merge_chunk(
        self, owner: str, partition: str, rows: Sequence[Memory], report: WeeklyReport, lease: Lease
    ) -> None:
        cands = [Candidate(i, m.content, m.category.value, m.importance) for i, m in enumerate(rows, start=1)]
        # The merge's prompt holds no date: facts it kept whole last time get
        # the same answer, and a finished project's were sent every Monday.
        asked = _chunk_key(partition, rows, self.llm.model)
        if await self.engine.db.fetchone(
            "SELECT 1 FROM memory_log WHERE owner = ? AND action = 'merge_kept' AND job = 'weekly_compress' "
            "AND detail = ? LIMIT 1", (owner, asked),
        ) is not None:
            report.unchanged += 1
            return
        try:
            res = await self.llm.merge(cands, partition=partition)
        except MemoryLLMError as exc:
            report.failed += 1
            log.warning("merge failed; partition unchanged", owner=owner, partition=partition, **error_fields(exc))
            return
        n = len(rows)
        merged_from = {s for mf in res.facts for s in mf.sources}
        dropped = {k: v for k, v in res.dropped.items() if k not in merged_from}
        unaccounted = sorted(set(range(1, n + 1)) - merged_from - set(dropped))
        at = self.engine.now()
        kept = not dropped and not unaccounted and all(
            len(mf.sources) == 1 and content_hash(mf.fact.content) == content_hash(rows[mf.sources[0] - 1].content)
            for mf in res.facts)
        if kept:
            async with self._write(lease) as conn:
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="merge_kept", detail=asked)
            return
        if len(unaccounted) > self.gate * n:
            report.rejected += 1
            note = f"{partition}: merge rejected, {len(unaccounted)} of {n} facts unaccounted for"
            report.notes.append(note)
            log.warning("merge rejected by the safety gate", owner=owner, partition=partition,
                        unaccounted=len(unaccounted), total=n)
            async with self._write(lease) as conn:
                await write_log(
                    conn, at=at, job="weekly_compress", owner=owner, action="merge_rejected",
                    detail={"partition": partition, "total": n, "unaccounted": [rows[i - 1].id for i in unaccounted]},
                )
            return
        project, topic = rows[0].project, rows[0].topic
        # The span is dated on the owner's calendar, as their events are (each day where they were).
        zone = await self.engine.lived(owner, await owner_zone(self.zone_of, owner, self.tz)) or self.tz
        # A fact is written as one chat's only when the whole call read that
        # chat's facts alone: the model may put any fact's words it was
        # shown into any fact it writes, whatever it says it merged.
        read = _one_chat(rows)
        async with self._write(lease) as conn:
            if not await self._all_active(conn, [m.id for m in rows]):
                return  # changed while the model was thinking; next week
            done: set[int] = set()
            for mf in res.facts:
                srcs = [rows[i - 1] for i in mf.sources if i not in done]
                if not srcs:
                    continue
                if len(srcs) == 1 and content_hash(mf.fact.content) == content_hash(srcs[0].content):
                    done.add(mf.sources[0])
                    continue  # kept as is: no churn
                new = await self.engine.add(
                    NewMemory(
                        owner=owner,
                        content=mf.fact.content,
                        category=mf.fact.category,
                        importance=max([mf.fact.importance, *(s.importance for s in srcs)]),
                        project=project,
                        topic=topic,
                        source=Source.COMPRESSION,
                        provenance=Provenance(
                            # Merged from one chat's facts: still that chat's (memory/scope.py).
                            *read,
                            group=bool(read[1]) and all(in_group(s.provenance) for s in srcs),
                            date_from=local_day(min(s.created_at for s in srcs), zone),
                            date_to=local_day(max(s.created_at for s in srcs), zone),
                            refs=tuple(f"m:{s.id}" for s in srcs),
                        ),
                        # What the merged facts were drawn from (cut to MAX_SOURCE_CHARS).
                        source_text="\n".join(dict.fromkeys(s.source_text for s in srcs if s.source_text)),
                        # Its search terms as the merge gave them (memory/cues.py), else
                        # the words the merged facts were asked by; a credential has none.
                        search_terms=safe_terms(mf.fact.terms or [t for s in srcs for t in s.search_terms],
                                                credential=mf.fact.category is Category.CREDENTIAL),
                    ),
                    conn=conn,
                )
                report.created += 1
                for s in srcs:
                    await self.engine.set_status(s.id, "archived", superseded_by=new.id, conn=conn)
                    report.merged += 1
                done.update(mf.sources)
                await write_log(
                    conn, at=at, job="weekly_compress", owner=owner, action="merge", memory_id=new.id,
                    detail={"partition": partition, "from": [s.id for s in srcs],
                            "old": [s.content for s in srcs], "new": mf.fact.content},
                )
            for num, reason in dropped.items():
                m = rows[num - 1]
                await self.engine.set_status(m.id, "archived", conn=conn)
                report.dropped += 1
                await write_log(
                    conn, at=at, job="weekly_compress", owner=owner, action="drop", memory_id=m.id,
                    detail={"partition": partition, "reason": reason, "content": m.content},
                )

    async def _all_active(self, conn: aiosqlite.Connection, ids: Sequence[int]) -> bool:
        async with conn.execute(
            f"SELECT COUNT(*) FROM memories WHERE status = 'active' AND id IN ({','.join('?' * len(ids))})", ids
        ) as cur:
            row = await cur.fetchone()
        assert row is not None  # COUNT(*) always returns a row
        return bool(row[0] == len(ids))

    async def _refresh_profile(self, owner: str, report: WeeklyReport, lease: Lease) -> None:
        # What this refresh reads is written by now (a merge of this run's
        # too): what is written or said again after, Core Memory shows until
        # a refresh of theirs reads it (engine.newer_facts). Read first: a
        # fact written meanwhile is shown once more, never missed.
        read = await self.engine.db.fetchone(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM memories), (SELECT COALESCE(MAX(id), 0) FROM memory_log)")
        upto = {"newest_id": read[0], "log_id": read[1]} if read is not None else {"newest_id": 0, "log_id": 0}
        high = [
            row_to_memory(r)
            for r in await self.engine.db.fetchall(
                "SELECT * FROM memories WHERE owner = ? AND tier = 2 AND status = 'active' AND importance >= ? "
                "ORDER BY importance DESC, updated_at DESC LIMIT 200",
                (owner, self.profile_min_importance),
            )
        ]
        current = await self.engine.profile(owner, limit=1000, include_global=False)
        if not high:
            return  # nothing to promote; the profile stays as it is
        zone = await self.engine.lived(owner, await owner_zone(self.zone_of, owner, self.tz)) or self.tz
        cands = [Candidate(i, m.content, m.category.value, m.importance, _said(m, zone))
                 for i, m in enumerate(high, start=1)]
        # Its prompt holds no date: a profile and facts the last refresh
        # changed nothing of get the same answer (most weeks of a year).
        asked = _profile_key(current, high, cands, self.llm.model)
        if await self.engine.db.fetchone(
            "SELECT 1 FROM memory_log WHERE owner = ? AND action = 'profile_kept' AND job = 'weekly_compress' "
            "AND detail = ? AND id > COALESCE((SELECT MAX(id) FROM memory_log WHERE owner = ? AND "
            "action IN ('promote', 'demote', 'promote_held', 'demote_held')), 0) LIMIT 1",
            (owner, asked, owner),
        ) is not None:
            report.unchanged += 1
            async with self._write(lease) as conn:
                await _read_upto(self.engine, conn, owner, upto)
            return
        try:
            entries = await self.llm.profile([m.content for m in current], cands)
        except MemoryLLMError as exc:
            report.failed += 1
            log.warning("profile refresh failed; profile unchanged", owner=owner, **error_fields(exc))
            return
        at = self.engine.now()
        if not entries:
            report.notes.append(f"{owner}: empty profile from the model rejected")
            async with self._write(lease) as conn:
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="profile_rejected",
                                detail="the model returned no entries")
            return
        entries = entries[: self.profile_limit]
        cur_by_hash = {content_hash(m.content): m for m in current}
        imp_by_hash = {content_hash(m.content): m.importance for m in high}
        id_by_hash = {content_hash(m.content): m.id for m in high}
        keep: set[str] = set()
        async with self._write(lease) as conn:
            if not await self._all_active(conn, [m.id for m in (*high, *current)]):
                # Erased (the user's /forget) or replaced while the model was
                # thinking: its entries could restate what is gone. Next week.
                report.notes.append(f"{owner}: profile refresh skipped, memories changed meanwhile")
                return
            new: list[tuple[int, ProfileEntry]] = []
            for rank, e in enumerate(entries):
                h = content_hash(e.content)
                if h in keep:
                    continue
                keep.add(h)
                if h not in cur_by_hash:
                    new.append((rank, e))
            # The gate, for the profile: one refresh demotes at most a quarter
            # of it (at least one entry), the least important first; the rest
            # stays until a later refresh agrees again. A model that loses
            # half of someone's profile in one answer is more likely wrong
            # than the person changed that much in a week.
            dropped = sorted((m for h, m in cur_by_hash.items() if h not in keep), key=lambda m: (m.importance, m.id))
            # An entry whose facts were replaced is no slip of the model: it
            # goes now, outside the gate (which takes the least important
            # first, so a replaced identity entry waited behind every other).
            stale = await _stale_entries(conn, owner, dropped)
            dropped = [m for m in dropped if m.id not in {s.id for s in stale}]
            allowed = max(1, int(self.gate * len(current)))
            # The cap holds too: what the gate keeps takes its room, so new
            # entries (in the model's order) wait for the weeks the old ones
            # they replace may go (a full profile grew past 100 here).
            room = max(0, self.profile_limit - (len(current) - len(stale) - min(len(dropped), allowed)))
            if len(new) > room:
                report.notes.append(f"{owner}: {len(new) - room} new profile entries wait for room")
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="promote_held",
                                detail={"limit": self.profile_limit, "waiting": len(new) - room})
            for rank, e in new[:room]:
                h = content_hash(e.content)
                # Importance keeps the model's order in a profile read by importance.
                importance = imp_by_hash.get(h, round(1.0 - rank / 1000, 3))
                # The Tier 2 facts it states, as a merge cites its sources
                # ("m:<id>"): forgetting one of them erases the entry too.
                drawn = [high[n - 1].id for n in e.facts] + ([id_by_hash[h]] if h in id_by_hash else [])
                refs = ("weekly", *(f"m:{i}" for i in dict.fromkeys(drawn)))
                # The days its facts were said, as a merge keeps them: the
                # entry's own date is the refresh's, and a question whose
                # words recall no fact ("when did we pick that?") has only
                # its Core Memory line to go by.
                said = [m.created_at for m in high if m.id in drawn]
                days = (local_day(min(said), zone), local_day(max(said), zone)) if said else ("", "")
                m = await self.engine.add(
                    NewMemory(owner=owner, tier=1, content=e.content, category=e.category, importance=importance,
                              source=Source.COMPRESSION,
                              provenance=Provenance(refs=refs, date_from=days[0], date_to=days[1])),
                    conn=conn,
                )
                report.promoted += 1
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="promote", memory_id=m.id,
                                detail=e.content)
            for m in stale:
                await self.engine.set_status(m.id, "archived", conn=conn)
                report.demoted += 1
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="demote",
                                memory_id=m.id, detail={"content": m.content, "why": "its facts were replaced"})
            for m in dropped[:allowed]:
                await self.engine.set_status(m.id, "archived", conn=conn)
                report.demoted += 1
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="demote",
                                memory_id=m.id, detail=m.content)
            if len(dropped) > allowed:
                held = dropped[allowed:]
                report.notes.append(f"{owner}: {len(held)} profile demotions over the {self.gate:.0%} gate held back")
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="demote_held",
                                detail={"gate": self.gate, "held": [m.id for m in held]})
            if not new and not stale and not dropped:
                await write_log(conn, at=at, job="weekly_compress", owner=owner, action="profile_kept", detail=asked)
            await _read_upto(self.engine, conn, owner, upto)


def _profile_key(current: Sequence[Memory], high: Sequence[Memory], cands: Sequence[Candidate], model: str) -> str:
    """What a profile refresh is asked, as the ``profile_kept`` log line
    keeps it: the entries' and facts' ids and what the model reads of them
    (a hash, no words in the log), and of which memory model, as
    ``_chunk_key``: another may judge them otherwise, so it is asked once."""
    text = "\n".join([model, *(f"{m.id}|{m.content}" for m in current),
                      *(f"{m.id}|{c.category}|{c.importance}|{c.said}|{c.content}" for m, c in zip(high, cands))])
    return json.dumps({"entries": len(current), "facts": len(high),
                       "input": hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]}, separators=(",", ":"))


def _chunk_key(partition: str, rows: Sequence[Memory], model: str) -> str:
    """What a merge of ``rows`` is asked, as the ``merge_kept`` log line
    keeps it: the partition and each fact's id, category, importance and
    words (a hash, no words in the log), and of which memory model: another
    may judge them otherwise, so it is asked once. (A line written before
    the model was in it matches none: each such partition is asked once more.)"""
    text = "\n".join([model, partition, *(f"{m.id}|{m.category.value}|{m.importance}|{m.content}" for m in rows)])
    return json.dumps({"partition": partition, "facts": len(rows),
                       "input": hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]}, separators=(",", ":"))


async def _read_upto(engine: MemoryEngine, conn: aiosqlite.Connection, owner: str, upto: dict[str, int]) -> None:
    """Log what ``owner``'s refresh read (engine.refreshed_upto): only when
    it succeeded, so a failed one's facts stay in Core Memory."""
    await write_log(conn, at=engine.now(), job="weekly_compress", owner=owner, action="profile_read", detail=upto)
    engine.db.bump(REFRESH)
    engine.db.bump(TIER1)  # the Core Memory block it shapes


async def _stale_entries(conn: aiosqlite.Connection, owner: str, entries: Sequence[Memory]) -> list[Memory]:
    """The Core Memory ``entries`` (left out by the model) that state what
    is no longer current: every fact they cite (``m:<id>``) has left the
    active ones (replaced, merged into another, dropped), or their words
    repeat a replaced fact's. :func:`~memory.forgetting.retire_entries_on`
    retires entries when their fact is replaced, but only those citing it:
    an entry kept from an older profile cites none, and a weekly merge that
    folds "manager is Li" into "manager is now Zhang" replaces nothing."""
    if not entries:
        return []
    async with conn.execute(
        "SELECT content FROM memories WHERE owner = ? AND tier = 2 AND status = 'superseded'", (owner,)
    ) as cur:
        replaced = {" ".join(r[0].split()) for r in await cur.fetchall()}
    # Words the user went back to (dark mode, light mode, dark mode again)
    # are current in the fact that says them now, whatever an older row said.
    async with conn.execute(
        "SELECT content FROM memories WHERE owner = ? AND tier = 2 AND status = 'active'", (owner,)
    ) as cur:
        replaced -= {" ".join(r[0].split()) for r in await cur.fetchall()}
    out = []
    for e in entries:
        cited = [int(r[2:]) for r in e.provenance.refs if r.startswith("m:") and r[2:].isdigit()]
        if cited:
            marks = ",".join("?" * len(cited))
            async with conn.execute(
                f"SELECT COUNT(*) FROM memories WHERE owner = ? AND status = 'active' AND id IN ({marks})",
                (owner, *cited),
            ) as cur:
                row = await cur.fetchone()
            if row is not None and row[0] == 0:
                out.append(e)
                continue
        if repeats_forgotten(e.content, sorted(replaced)):
            out.append(e)
    return out
