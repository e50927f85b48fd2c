"""The extraction service (seed 6, 001, 003): buffered turns -> Tier 2 facts
and one Tier 3 event per batch, in the background.

Triggers, any of them (checked by :meth:`ExtractionService.tick`, which the
background loop calls every few seconds and on every new buffered turn, and
which tests call directly with a :class:`~memory.clock.ManualClock`):

* quiet gap: no new message of the user for ``quiet_gap`` (default 3 min;
  a last message more than that ahead of now, left by a clock stepped
  back, counts as quiet, as a failed batch's retry further ahead than its
  backoff is due);
* token budget: the user's buffer reached ``token_budget`` (default 6000);
* daily flush: at ``daily_flush`` (03:00 in the gateway's timezone) every
  remaining buffer is flushed.

A batch is the oldest rows of one user in one chat, at most one token budget
long; a batch never mixes two users, and one user is flushed by one task at a
time (a per-user lock). The buffer is the source of truth: the LLM call runs
outside any transaction, then one transaction writes the facts (with
provenance back to the buffered messages), one event and deletes exactly the
rows used. The transaction first checks those rows are still there, so a
flush that raced another process (``myclaw memory flush`` beside the gateway)
writes nothing twice. A crash or cancellation at any step rolls back to the
untouched buffer; a failed LLM call leaves the rows with ``attempts`` and
``next_attempt_at`` (10m, 30m, 2h, 6h, 12h; a ``backlog`` log line after
5 failures, and from then on 24h: seed 001 lengthens the wait of an outage
that lasts; the rows and their ``attempts`` stay, so the health figures
still count them as failing).

A batch that is too much for the model (its reply cut at ``max_tokens``,
the prompt over its context: :class:`~memory.llm.LLMOverflow`) would fail
the same way on every retry, and hold up every line behind it. It is split
in halves at once, down to one line; the parts are written as they succeed,
in order. A single line that still overflows is *set aside*: kept in the
buffer with ``set_aside_at`` (so ``/forget``, ``/export`` and erasure still
find it), one ``set-aside`` entry in the memory log, counted by
``MemoryEngine.backlog`` and ``stats`` (the memory page, ``myclaw memory
stats``), and never sent to the model again, unless the operator asks
(:func:`retry_set_aside`: ``myclaw memory retry-set-aside``, the memory
page), after switching to a bigger memory model.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import structlog

from .buffer import NOT_GONE, drop_lines
from .changelog import write_log
from .clock import ZoneOf, format_ts, owner_zone, parse_ts, weekday
from .consolidate import Consolidator
from .corrections import with_corrected
from .engine import MemoryEngine
from .errorlog import error_brief, error_fields
from .llm import Fact, LLMOverflow, MemoryLLM, MemoryLLMError
from .groupowner import is_group_owner, member_label, member_tag
from .retag import Retagger
from .samenames import SameNames
from .scope import in_group
from .service import SqliteMemory, original_message_id
from .types import Provenance, Source

__all__ = ["BACKOFF", "BACKLOG_AFTER", "BACKLOG_BACKOFF", "ExtractionService", "FlushReport", "backoff",
           "retry_set_aside"]

log = structlog.get_logger(component="memory")

BACKOFF: tuple[timedelta, ...] = (
    timedelta(minutes=10),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=6),
    timedelta(hours=12),
)
BACKLOG_AFTER = 5
BACKLOG_BACKOFF = timedelta(hours=24)
"""The wait after each failure past :data:`BACKLOG_AFTER`: an outage that
lasts is asked once a day, not twice."""


def backoff(attempts: int) -> timedelta:
    """How long to wait after the ``attempts``-th failure in a row."""
    return BACKOFF[min(attempts, len(BACKOFF)) - 1] if attempts <= BACKLOG_AFTER else BACKLOG_BACKOFF


def _waiting(retry_at: datetime, attempts: int, now: datetime) -> bool:
    """Whether a retry at ``retry_at`` (after ``attempts`` failures) is still
    ahead. One further ahead than its backoff is not: the clock was stepped
    back since (an NTP correction), and the step would be waited out too."""
    return now < retry_at and (attempts < 1 or retry_at - now <= backoff(attempts))


MAX_MESSAGE_CHARS = 2000
"""One pasted log must not crowd out the rest of a batch in the prompt."""

StepHook = Callable[[str, str], Awaitable[None]]

_WAITING = f"set_aside_at IS NULL AND {NOT_GONE}"
"""SQL condition on ``extraction_buffer``: a line still to extract."""

_MOVED_CHUNK = 300
"""Chats whose window moved, asked about in one query (3 variables each)."""


async def retry_set_aside(engine: MemoryEngine, owner: str | None, *, job: str) -> int:
    """Clear the set-aside mark of ``owner``'s lines (everyone's with None),
    so the next extraction run tries them again, from a fresh backoff.
    One ``retry-set-aside`` entry in the memory log per user. Returns how
    many lines were cleared."""
    where, args = ("AND owner = ?", (owner,)) if owner is not None else ("", ())
    now = format_ts(engine.clock.now())
    async with engine.db.transaction() as conn:
        async with conn.execute(
            f"SELECT owner, COUNT(*) FROM extraction_buffer WHERE set_aside_at IS NOT NULL AND {NOT_GONE} {where} "
            "GROUP BY owner ORDER BY owner", args,
        ) as cur:
            counts = [(r[0], r[1]) for r in await cur.fetchall()]
        await conn.execute(
            f"UPDATE extraction_buffer SET set_aside_at = NULL, next_attempt_at = NULL, attempts = 0 "
            f"WHERE set_aside_at IS NOT NULL AND {NOT_GONE} {where}", args,
        )
        for who, n in counts:
            await write_log(conn, at=now, job=job, owner=who, action="retry-set-aside", detail={"rows": n})
    return sum(n for _, n in counts)


@dataclass(frozen=True)
class _Row:
    id: int
    channel: str
    chat_id: str
    message_id: str
    role: str
    content: str
    token_count: int
    created_at: str
    attempts: int
    next_attempt_at: str | None
    in_group: int = 0
    speaker: str = ""  # a group's own line: the member who spoke (memory/groupnotes.py)
    speaker_name: str = ""
    sender_id: str = ""


@dataclass
class FlushReport:
    owner: str
    rows: int = 0
    added: list[int] = field(default_factory=list)
    reinforced: list[int] = field(default_factory=list)
    superseded: list[tuple[int, int]] = field(default_factory=list)
    event_id: int | None = None
    error: str | None = None
    skipped: str | None = None
    set_aside: bool = False
    """The batch's one line could not be extracted even alone: kept, never retried."""
    overflow: bool = False
    """The batch was too much for the model; it is split (internal: its parts report)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.skipped is None


class _AlreadyFlushed(Exception):
    pass


class ExtractionService:
    """Give it the engine and the memory LLM; the gateway calls
    :meth:`attach` (register on ``SqliteMemory.on_buffered``), :meth:`start`
    and :meth:`stop`, and may call :meth:`flush_now` before Tier 0 drops
    messages."""

    def __init__(
        self,
        engine: MemoryEngine,
        llm: MemoryLLM,
        *,
        consolidator: Consolidator | None = None,
        quiet_gap: timedelta = timedelta(minutes=3),
        token_budget: float = 6000,
        daily_flush: str = "03:00",
        timezone: str = "UTC",
        interval: float = 5.0,
        wake_gap: float = 1.0,
        max_concurrency: int = 4,
        window_pace: float = 1.0,
        on_step: StepHook | None = None,
    ) -> None:
        self.engine = engine
        self.llm = llm
        self.consolidator = consolidator or Consolidator(engine)
        self.quiet_gap = quiet_gap
        self.token_budget = int(token_budget)
        hh, mm = (int(x) for x in daily_flush.split(":"))
        self._daily_at = (hh, mm)
        self.tz = ZoneInfo(timezone)
        # Each user's own zone (the gateway's /timezone), set by the App once
        # gateway.db is open: the model reads their messages' times, and a
        # day's event is dated, on their clock ("tomorrow" said at 01:00 in
        # Shanghai is not UTC's tomorrow). None: ``timezone`` for everyone.
        self.zone_of: ZoneOf | None = None
        self.interval = interval
        self.wake_gap = wake_gap
        # After a flush of lines that left a window, wait this many times
        # as long as it took before the next (:meth:`_flush_paced`).
        self.window_pace = window_pace
        self.on_step = on_step
        self._sem = asyncio.Semaphore(max_concurrency)
        # One flush of a user at a time: their lock, while a flush holds or
        # waits for it (how many do), then gone; not one per user ever seen.
        self._locks: dict[str, asyncio.Lock] = {}
        self._lockers: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_daily = self._daily_slot(engine.clock.now())
        self._written: list[Callable[[str], None]] = []
        # owner -> (attempts, retry at) of a failure memory.db could not
        # record (full disk, write lock held elsewhere): the backoff holds
        # anyway, or every tick would ask the model again and log again.
        self._held: dict[str, tuple[int, datetime]] = {}
        self._retag = Retagger()  # a group's notes from before a namesake came, tagged once (memory/retag.py)
        # (channel, chat id) -> the time of the oldest message its prompt
        # still shows (:meth:`left_window`), until the next tick reads it.
        self._left: dict[tuple[str, str], str] = {}
        # Which names two members of a group have had, kept between its flushes (memory/samenames.py).
        self._same_names = SameNames()

    # -- lifecycle ------------------------------------------------------------

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-user state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"locks": self._locks, "held": self._held}

    def attach(self, memory: SqliteMemory) -> None:
        """Register on ``SqliteMemory.on_buffered`` so a new turn wakes the loop."""
        memory.on_buffered(self.notify)

    def notify(self, owner: str) -> None:
        self._wake.set()

    def left_window(self, channel: str, chat_id: str, since: str) -> None:
        """The chat's prompt now shows its messages from ``since`` on: its
        lines buffered before then reach the model only once extracted, so
        their owners are due at the next tick, pause or not (the
        pre-compaction flush, seed 003). A line in the window waits as usual:
        one flush each time the window has moved past the last one's lines,
        not one a turn."""
        if self._left.get((channel, chat_id), "") < since:
            self._left[(channel, chat_id)] = since
            self._wake.set()

    def on_memories_written(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(owner)`` after a flush committed new or replaced
        facts of ``owner`` (the vectorizer embeds them at once)."""
        self._written.append(listener)

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("extraction service already started")
        self._task = asyncio.create_task(self._run(), name="memory-extraction")

    async def stop(self) -> None:
        """Cancel the loop; an in-flight flush rolls back, its rows stay buffered."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                await self.tick()
            except Exception as exc:
                # The loop outlives a locked or full disk, and a bug: it is
                # the write path's only driver, and the buffer keeps every
                # row, so the next tick simply tries again.
                log.error("extraction tick failed; will retry", **error_fields(exc))
            # Every buffered turn wakes the loop, and a tick scans the whole
            # buffer: under load that was a scan per message, queued on the
            # memory database ahead of recalls. One tick per wake_gap still
            # catches a buffer over budget within a second.
            await asyncio.sleep(self.wake_gap)

    # -- triggers ---------------------------------------------------------------

    def _daily_slot(self, now: datetime) -> datetime:
        local = now.astimezone(self.tz)
        slot = local.replace(hour=self._daily_at[0], minute=self._daily_at[1], second=0, microsecond=0)
        if slot > local:
            slot -= timedelta(days=1)
        return slot

    async def due_owners(self, now: datetime | None = None) -> list[str]:
        """Users whose buffer is due now (quiet gap, token budget, or lines
        that left their chat's window: :meth:`left_window`, read once),
        not in backoff."""
        return [owner for owner, _ in await self._due(now)]

    async def _due(self, now: datetime | None = None) -> list[tuple[str, bool]]:
        """Each due user, and whether only lines that left a window make
        them due (the pre-compaction flush, which :meth:`tick` paces)."""
        now = now or self.engine.clock.now()
        left, self._left = self._left, {}
        compacted: set[str] = set()
        moved = list(left.items())
        # One query for every chat whose window moved (under load, most of
        # them in a second), not one each; chunked under SQLite's variable limit.
        for at in range(0, len(moved), _MOVED_CHUNK):
            chunk = moved[at:at + _MOVED_CHUNK]
            compacted.update(r["owner"] for r in await self.engine.db.fetchall(
                f"""WITH moved(channel, chat_id, since) AS (VALUES {",".join(["(?, ?, ?)"] * len(chunk))})
                    SELECT DISTINCT owner FROM extraction_buffer b WHERE {_WAITING} AND EXISTS (
                        SELECT 1 FROM moved m
                        WHERE m.channel = b.channel AND m.chat_id = b.chat_id AND b.created_at < m.since)""",
                [v for (channel, chat_id), since in chunk for v in (channel, chat_id, since)]))
        rows = await self.engine.db.fetchall(
            """SELECT b.owner, MAX(b.created_at) AS last, SUM(b.token_count) AS tokens,
                      (SELECT h.next_attempt_at FROM extraction_buffer h
                        WHERE h.owner = b.owner AND h.set_aside_at IS NULL ORDER BY h.id LIMIT 1) AS retry_at
               FROM extraction_buffer b WHERE b.set_aside_at IS NULL GROUP BY b.owner ORDER BY MIN(b.id)"""
        )
        stamp = format_ts(now)
        # In backoff: still, unless the clock was stepped back since (_waiting).
        # Few owners are; their heads' attempts are read only for them.
        backing: set[str] = set()
        for r in rows:
            if r["retry_at"] is not None and r["retry_at"] > stamp:
                head = await self.engine.db.fetchone(
                    "SELECT attempts FROM extraction_buffer WHERE owner = ? AND set_aside_at IS NULL ORDER BY id LIMIT 1",
                    (r["owner"],))
                if _waiting(parse_ts(r["retry_at"]), int(head[0]) if head is not None else 0, now):
                    backing.add(r["owner"])
        quiet_before = format_ts(now - self.quiet_gap)
        # A last line more than a gap ahead: the clock was stepped back since
        # (an NTP correction). How long the user has been quiet is not known;
        # waiting the step out would keep what they said from memory that long.
        stepped = format_ts(now + self.quiet_gap)
        due: list[tuple[str, bool]] = []
        for r in rows:
            if r["owner"] in backing:
                continue
            urgent = r["last"] <= quiet_before or r["last"] > stepped or r["tokens"] >= self.token_budget
            if urgent or r["owner"] in compacted:
                due.append((r["owner"], not urgent))
        return due

    async def tick(self, now: datetime | None = None) -> list[FlushReport]:
        """Flush every user that is due; the daily sweep when its time passed."""
        now = now or self.engine.clock.now()
        slot = self._daily_slot(now)
        if slot > self._last_daily:
            self._last_daily = slot
            owners = [r["owner"] for r in await self.engine.db.fetchall(
                f"SELECT owner FROM extraction_buffer WHERE {_WAITING} GROUP BY owner ORDER BY MIN(id)")]
            stamp = format_ts(now)
            retry = {r["owner"]: r["n"] for r in await self.engine.db.fetchall(
                "SELECT owner, COUNT(*) AS n FROM extraction_buffer WHERE next_attempt_at > ? GROUP BY owner",
                (stamp,))}
            owners = [o for o in owners if o not in retry]
            log.info("daily flush", owners=len(owners))
            paced: set[str] = set()
        else:
            due = await self._due(now)
            owners = [o for o, _ in due]
            paced = {o for o, window_only in due if window_only}
        todo = [o for o in owners if not (o in self._locks and self._locks[o].locked())]
        results = await asyncio.gather(*(self._flush_due(o) for o in todo if o not in paced),
                                       self._flush_paced([o for o in todo if o in paced]))
        return [r for batch in results for r in batch]

    async def _flush_due(self, owner: str) -> list[FlushReport]:
        """One due user's flush in a tick. A failure the flush does not
        record itself (a bug, memory.db refusing a read) is this user's
        only: it raised out of the tick, and the rest of a paced wave, due
        only because their window moved, waited for it to move again. The
        buffer is kept (the flush's transaction rolled back) and retried
        after the backoff, held in memory like a failure memory.db could not record."""
        try:
            return await self._flush_owner(owner, force=False)
        except Exception as exc:  # noqa: BLE001 - logged without its text; kept and retried
            attempts = (self._held[owner][0] if owner in self._held else 0) + 1
            retry_at = self.engine.clock.now() + backoff(attempts)
            self._held[owner] = (attempts, retry_at)
            log.error("extraction flush failed; buffer kept, retried after the backoff", owner=owner,
                      attempts=attempts, retry_at=format_ts(retry_at), **error_fields(exc))
            return [FlushReport(owner=owner, error=error_brief(exc))]

    async def _flush_paced(self, owners: Sequence[str]) -> list[FlushReport]:
        """Owners due only because lines left their chat's window: one at a
        time, each followed by a pause of ``window_pace`` times as long as it
        took (the last one's skipped). Under load many chats' windows move
        within a second, and a flush is 11-13 ms of the event loop's CPU
        (its candidates' retrievals, the model call): flushed together they
        held the loop from replies in a burst (docs/BENCHMARKS.md,
        "Pre-compaction flush", its "Paced" part). A flush takes longer when replies
        keep the loop busy, so the pauses grow with them. Every one is
        still flushed in this tick."""
        loop = asyncio.get_running_loop()
        reports: list[FlushReport] = []
        took = 0.0
        for i, owner in enumerate(owners):
            if i and self.window_pace > 0:
                await asyncio.sleep(self.window_pace * took)
            began = loop.time()
            reports.extend(await self._flush_due(owner))
            took = loop.time() - began
        return reports

    # -- flushing -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _owner_lock(self, owner: str) -> AsyncIterator[None]:
        lock = self._locks.get(owner)
        if lock is None:
            lock = self._locks[owner] = asyncio.Lock()
        self._lockers[owner] = self._lockers.get(owner, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lockers[owner] -= 1
            if not self._lockers[owner]:  # nobody holds or waits for it
                del self._lockers[owner], self._locks[owner]

    async def flush_now(self, owner: str) -> list[FlushReport]:
        """Extract everything ``owner`` has buffered, now: the pre-compaction
        flush and ``myclaw memory flush``. Ignores quiet gap and backoff;
        waits for a flush of the same user already running."""
        return await self._flush_owner(owner, force=True)

    async def flush_all(self) -> list[FlushReport]:
        owners = [r["owner"] for r in await self.engine.db.fetchall(
            f"SELECT owner FROM extraction_buffer WHERE {_WAITING} GROUP BY owner ORDER BY MIN(id)")]
        out: list[FlushReport] = []
        for o in owners:
            out.extend(await self.flush_user(o))
        return out

    async def flush_user(self, owner: str) -> list[FlushReport]:
        """:meth:`flush_now` for an operator (`myclaw memory flush`): an
        error the flush does not record itself is that user's report, not a
        traceback, and the users after them still flush."""
        try:
            return await self.flush_now(owner)
        except Exception as exc:  # noqa: BLE001 - that user's report says it; the others still flush
            log.error("extraction flush failed; buffer kept", owner=owner, **error_fields(exc))
            # The lines it could not flush, all still buffered (its transaction rolled back).
            waiting = await self.engine.db.fetchone(
                f"SELECT COUNT(*) FROM extraction_buffer WHERE owner = ? AND {_WAITING}", (owner,))
            return [FlushReport(owner=owner, rows=int(waiting[0]) if waiting else 0, error=error_brief(exc))]

    async def _flush_owner(self, owner: str, *, force: bool) -> list[FlushReport]:
        reports: list[FlushReport] = []
        async with self._telling(owner, reports), self._owner_lock(owner), self._sem:
            seen: set[int] = set()
            while True:
                rows = await self._next_batch(owner, force=force)
                if not rows or rows[0].id in seen:
                    break  # empty, in backoff, or a batch that failed in this call
                seen.add(rows[0].id)
                done = await self._flush_split(owner, rows)
                reports.extend(done)
                aside = [r for r in done if r.set_aside]
                if aside:  # one line a batch, however many were set aside (each is in the memory log)
                    log.warning(
                        "extraction set aside lines the memory model cannot take even alone; kept, not retried",
                        owner=owner, lines=len(aside), error=(aside[0].error or "")[:200],
                    )
                if any(r.error is not None and not r.set_aside for r in done):
                    break
        return reports

    @contextlib.asynccontextmanager
    async def _telling(self, owner: str, reports: list[FlushReport]) -> AsyncIterator[None]:
        """On the way out of a flush, raised or not: the listeners are told
        of what ``reports`` committed. A later batch that raised (a bug, a
        read memory.db refused) left the facts of those before it written;
        the vectorizer embeds them now, not whenever something else wakes it."""
        try:
            yield
        finally:
            if any(r.added or r.superseded for r in reports):
                for listener in self._written:
                    listener(owner)

    async def _next_batch(self, owner: str, *, force: bool) -> list[_Row]:
        raw = await self.engine.db.fetchall(
            f"""SELECT id, channel, chat_id, message_id, role, content, token_count, created_at,
                      attempts, next_attempt_at, in_group, speaker, speaker_name, sender_id
               FROM extraction_buffer WHERE owner = ? AND {_WAITING} ORDER BY id LIMIT 2000""",
            (owner,),
        )
        rows = [_Row(**dict(r)) for r in raw]
        if not rows:
            return []
        head = rows[0]
        now = self.engine.clock.now()
        if not force and head.next_attempt_at and _waiting(parse_ts(head.next_attempt_at), head.attempts, now):
            return []
        held = self._held.get(owner)
        if not force and held is not None and _waiting(held[1], held[0], now):
            return []
        batch: list[_Row] = []
        tokens = 0
        tz = await self._zone(owner)
        first_day = parse_ts(head.created_at).astimezone(tz).date()
        for r in rows:
            if (r.channel, r.chat_id) != (head.channel, head.chat_id):
                # Another chat's turns (the same person in a group and in
                # private) wait for their own batch; skipping rather than
                # stopping keeps interleaved chats from making tiny batches.
                continue
            if batch and tokens + r.token_count > self.token_budget:
                break
            if batch and r.role == "user" and parse_ts(r.created_at).astimezone(tz).date() != first_day:
                break  # the user's next day is its own batch: each day log on its day (a reply stays with its line)
            batch.append(r)
            tokens += r.token_count
        return batch

    async def _step(self, name: str, owner: str) -> None:
        if self.on_step is not None:
            await self.on_step(name, owner)

    async def _zone(self, owner: str) -> tzinfo:
        # Each line dated where the user was when they said it (memory/zonehistory.py).
        return await self.engine.lived(owner, await owner_zone(self.zone_of, owner, self.tz)) or self.tz

    def _conversation(self, rows: Sequence[_Row], tz: tzinfo, *, group: bool = False, notes: bool = False,
                      shared: Set[str] = frozenset()) -> list[str]:
        """One line per message (the model sees them numbered L1..LN). In a
        group the bot's replies are marked as not the user's: they answer
        everyone and may repeat another member's words. A group's own batch
        (``notes``) shows each member's line under their name."""
        lines = []
        day = None
        labels = _speaker_labels(rows, shared) if notes else []
        for i, r in enumerate(rows):
            at = parse_ts(r.created_at).astimezone(tz)
            # The day heads a line only where it changes (rule 6): repeated on
            # every line it was most of a short line's label tokens.
            when = f"{at:%H:%M}" if at.date() == day else f"{at:%Y-%m-%d} {weekday(at)} {at:%H:%M}"
            day = at.date()
            text = r.content if len(r.content) <= MAX_MESSAGE_CHARS else r.content[:MAX_MESSAGE_CHARS] + " […]"
            role = _GROUP_REPLY if group and r.role == "assistant" else r.role
            if notes:
                role = _NOTES_REPLY if r.role == "assistant" else labels[i]
            lines.append(f"[{when}] {role}: {text}")
        return lines

    async def _flush_split(self, owner: str, rows: Sequence[_Row]) -> list[FlushReport]:
        """Flush ``rows``; when they are too much for the model, each half
        in turn, down to one line, which is then set aside. A part that
        fails otherwise (an outage) stops here: what follows it waits,
        in order, behind its backoff."""
        report = await self._flush_batch(owner, rows)
        if not report.overflow:
            return [report]
        if len(rows) == 1:
            return [await self._set_aside(owner, rows[0], report)]
        log.debug("extraction batch too much for the memory model; split", owner=owner, rows=len(rows))
        mid = len(rows) // 2
        out = await self._flush_split(owner, rows[:mid])
        if any(r.error is not None and not r.set_aside for r in out):
            return out
        return out + await self._flush_split(owner, rows[mid:])

    async def _set_aside(self, owner: str, row: _Row, report: FlushReport) -> FlushReport:
        error = report.error or "too much for the memory model"
        now = format_ts(self.engine.clock.now())
        try:
            async with self.engine.db.transaction() as conn:
                await conn.execute(
                    f"UPDATE extraction_buffer SET set_aside_at = ?, last_error = ?, attempts = attempts + 1 "
                    f"WHERE id = ? AND {NOT_GONE}",
                    (now, error[:500], row.id),
                )
                # Its size and the failure's class, never its words.
                await write_log(
                    conn, at=now, job="extraction", owner=owner, action="set-aside",
                    detail={"rows": 1, "line": row.id, "role": row.role, "chars": len(row.content),
                            "error": error[:200]},
                )
        except sqlite3.Error as unrecorded:
            self._hold(owner, [row], error, unrecorded)
            return report
        self._held.pop(owner, None)
        report.set_aside = True
        return report

    async def _flush_batch(self, owner: str, rows: Sequence[_Row]) -> FlushReport:
        report = FlushReport(owner=owner, rows=len(rows))
        ids = [r.id for r in rows]
        try:
            await self._step("read", owner)
            first, last = rows[0], rows[-1]
            # The buffer keeps the kind (v3; a Feishu line from before is marked a
            # group's by v4, fail closed); a Telegram group's line from before v3 by its id.
            group = any(r.in_group for r in rows) or (first.channel == "telegram" and first.chat_id.startswith("-"))
            notes = is_group_owner(owner)  # the group's own batch: its notes (memory/groupnotes.py)
            group = group or notes
            cands = await self.consolidator.candidates(
                owner, [r.content for r in rows if r.role == "user"],
                group=(first.channel, first.chat_id) if group else None,
            )
            cands = await with_corrected(self.engine, owner, rows, cands)
            await self._step("candidates", owner)
            tz = await self._zone(owner)
            # A name two members of the group have had is tagged in every batch (memory/samenames.py).
            named_twice = await self._same_names.read(self.engine.db, owner, _speaker_label) if notes else set()
            conversation = self._conversation(rows, tz, group=group, notes=notes, shared=named_twice)
            labels = _speaker_labels(rows, named_twice) if notes else []
            said = [r.content for r in rows]
            extraction = await self.llm.extract(conversation, cands.for_prompt(), group=group, words=said, notes=notes)
            chat = (first.channel, first.chat_id) if group else None
            more = await self.consolidator.recheck(owner, extraction.facts, cands, group=chat)
            if more is not None:
                # A second look, with what the facts it wrote may replace
                # (Consolidator.recheck); the first answer stands if it fails.
                try:
                    added = range(len(cands.memories) + 1, len(more.memories) + 1)
                    extraction = await self.llm.extract(conversation, more.for_prompt(), group=group,
                                                        found_for_facts=added, words=said, notes=notes)
                    cands = more
                except MemoryLLMError as exc:
                    log.warning("extraction's second look failed; the first answer is kept", owner=owner,
                                **error_fields(exc))
            if group:
                extraction = replace(extraction, facts=_the_askers(extraction.facts, rows))
            await self._step("llm", owner)
            prov = Provenance(
                channel=first.channel,
                chat_id=first.chat_id,
                # Platform ids (a buffered correction's is its original's).
                message_ids=tuple(dict.fromkeys(original_message_id(r.message_id) for r in rows if r.message_id)),
                date_from=first.created_at,
                date_to=last.created_at,
                # The buffer ids the facts came from: the batch's identity.
                refs=tuple(f"buf:{i}" for i in ids),
                group=group,
                # A group's note names every member its batch heard, until
                # a fact names its lines (Consolidator.apply narrows it).
                speakers=tuple(dict.fromkeys(r.speaker for r in rows if r.speaker)) if notes else (),
                said_by=tuple(dict.fromkeys(label for r, label in zip(rows, labels, strict=True)
                                            if r.speaker and r.role == "user")) if notes else (),
            )
            summary = extraction.summary or _fallback_summary(rows)
            marks = ",".join("?" * len(ids))
            async with self.engine.db.transaction() as conn:
                async with conn.execute(
                    f"SELECT COUNT(*) FROM extraction_buffer WHERE id IN ({marks}) AND {NOT_GONE}", ids
                ) as cur:
                    row = await cur.fetchone()
                assert row is not None  # COUNT(*) always returns a row
                if row[0] != len(ids):
                    raise _AlreadyFlushed()
                for old, new in extraction.renamed:  # before the facts, which go under the new name
                    await self.engine.set_project_alias(owner, old, new, source="extraction", conn=conn)
                    await write_log(conn, at=self.engine.now(), job="extraction", owner=owner, action="alias",
                                    detail={"from": old, "to": new})
                applied = await self.consolidator.apply(
                    conn, owner, extraction.facts, cands, provenance=prov, source=Source.EXTRACTION,
                    said=[r.content for r in rows],
                    line_messages=[original_message_id(r.message_id) for r in rows],
                    line_times=[r.created_at for r in rows], said_at=last.created_at,
                    line_speakers=[(r.speaker, label if r.role == "user" else "")
                                   for r, label in zip(rows, labels, strict=True)] if notes else (),
                )
                await self._step("facts", owner)
                event = await self.engine.add_event(
                    owner,
                    parse_ts(first.created_at).astimezone(tz).strftime("%Y-%m-%d"),
                    summary,
                    channel=first.channel,
                    chat_id=first.chat_id,
                    raw_tokens=sum(r.token_count for r in rows),
                    provenance=prov,
                    conn=conn,
                )
                await self._step("event", owner)
                await drop_lines(conn, ids)
                await self._step("delete", owner)
        except _AlreadyFlushed:
            report.skipped = "rows already flushed by another worker"
            log.info("extraction batch already flushed elsewhere", owner=owner, rows=len(ids))
            return report
        except LLMOverflow as exc:
            # The same call would fail the same way: no backoff, the caller splits.
            report.error, report.overflow = error_brief(exc), True
            return report
        except (MemoryLLMError, sqlite3.Error, ValueError) as exc:
            report.error = error_brief(exc)  # kept as the batch's last error: never a ValueError's words
            if isinstance(exc, sqlite3.Error):  # which file: there are several
                report.error += f" ({self.engine.db.path.name})"
            try:
                await self._record_failure(owner, rows, report.error)
            except sqlite3.Error as unrecorded:
                self._hold(owner, rows, report.error, unrecorded)
            return report
        self._held.pop(owner, None)
        if named_twice:  # the group's older bare notes of a name now shared (memory/retag.py)
            try:
                senders = {r.speaker: r.sender_id for r in rows if r.speaker and r.role == "user"}
                await self._retag.run(self.engine, owner, named_twice, senders)
            except sqlite3.Error as exc:  # the batch stands; tried again at the group's next batch
                log.warning("group notes not tagged apart", **error_fields(exc))
        report.added, report.reinforced, report.superseded = applied.added, applied.reinforced, applied.superseded
        report.event_id = event.id
        log.info(
            "extracted", owner=owner, messages=len(rows), added=len(applied.added),
            reinforced=len(applied.reinforced), superseded=len(applied.superseded),
        )
        return report

    def _attempts(self, owner: str, rows: Sequence[_Row]) -> int:
        held = self._held.get(owner)
        return max(max(r.attempts for r in rows), held[0] if held is not None else 0) + 1

    def _hold(self, owner: str, rows: Sequence[_Row], error: str, unrecorded: sqlite3.Error) -> None:
        attempts = self._attempts(owner, rows)
        retry_at = self.engine.clock.now() + backoff(attempts)
        self._held[owner] = (attempts, retry_at)
        log.error(
            "extraction failed and the failure could not be recorded; buffer kept, retried after the backoff",
            file=str(self.engine.db.path), owner=owner, rows=len(rows), attempts=attempts,
            retry_at=format_ts(retry_at), error=error[:200], unrecorded=error_brief(unrecorded),
        )

    async def _record_failure(self, owner: str, rows: Sequence[_Row], error: str) -> None:
        attempts = self._attempts(owner, rows)
        now = self.engine.clock.now()
        retry_at = format_ts(now + backoff(attempts))
        ids = [r.id for r in rows]
        async with self.engine.db.transaction() as conn:
            await conn.execute(
                f"UPDATE extraction_buffer SET attempts = ?, next_attempt_at = ?, last_error = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                (attempts, retry_at, error[:500], *ids),
            )
            if attempts == BACKLOG_AFTER:
                await write_log(
                    conn, at=format_ts(now), job="extraction", owner=owner, action="backlog",
                    detail={"rows": len(ids), "attempts": attempts, "error": error[:200]},
                )
        self._held.pop(owner, None)  # the backoff is on disk now
        (log.warning if attempts >= BACKLOG_AFTER else log.info)(
            "extraction failed; buffer kept", owner=owner, rows=len(ids), attempts=attempts,
            retry_at=retry_at, error=error[:200],
        )


_GROUP_REPLY = "assistant (to the whole group; not the user's words)"
"""How a bot's reply in a group is labelled for the memory model."""

_NOTES_REPLY = "assistant (the bot, to the group; not a member's words)"
"""How a bot's reply is labelled in a group's own batch (its notes)."""


def _speaker_labels(rows: Sequence[_Row], shared: Set[str] = frozenset()) -> list[str]:
    """Each line's label in a group's own batch ('' for the bot's replies):
    the member's name (:func:`_speaker_label`), and when two members of the
    batch, or of the group ever (``shared``, casefolded: memory/samenames.py),
    had it, the tag the chat prompt tells them apart by (``Dad #3f9a``,
    memory/groupowner.py ``member_tag``), so a note is never read as the
    other one's, nor one member named two ways."""
    names = [_speaker_label(r.speaker_name) if r.role == "user" else "" for r in rows]
    who: dict[str, set[str]] = {}
    for r, name in zip(rows, names, strict=True):
        if name:
            who.setdefault(name.casefold(), set()).add(r.sender_id or r.speaker)
    return [f"{name} #{member_tag(r.sender_id or r.speaker)}"
            if name and (len(who[name.casefold()]) > 1 or name.casefold() in shared) else name
            for r, name in zip(rows, names, strict=True)]


_speaker_label = member_label  # a member's name as a line's label (memory/groupowner.py)

# A user line showing pictures or a file the model read (gateway/bus.py's
# marks): the reply after it says what they show, which counts as the user's.
_SHOWN = re.compile(r"^\[(?:photo|[1-9]\d* photos|file [^\]\n]+)\]")


def _the_askers(facts: Sequence[Fact], rows: Sequence[_Row]) -> list[Fact]:
    """Of a group batch's facts, those the member's own lines may have
    said: a fact the model drew only from the bot's replies (which repeat
    what other members said: "Bob is moving to Tokyo" became the asker's
    move) is dropped, unless the reply tells what the member's picture or
    file shows. A fact naming no line is left to the prompt's rule."""
    def theirs(i: int) -> bool:
        r = rows[i - 1]
        if r.role == "user":
            return True
        before = rows[i - 2] if i >= 2 else None
        return before is not None and before.role == "user" and _SHOWN.match(before.content) is not None

    kept = []
    for f in facts:
        valid = [i for i in f.lines if 1 <= i <= len(rows)]
        if valid and not any(theirs(i) for i in valid):
            # Its length, not its words (logs outlive erasure).
            log.info("group fact drawn only from the bot's reply dropped", chars=len(f.content))
            continue
        kept.append(f)
    return kept


def _fallback_summary(rows: Sequence[_Row]) -> str:
    """When the model gave no summary, the event still says what was said."""
    first_user = next((r.content for r in rows if r.role == "user"), rows[0].content)
    text = " ".join(first_user.split())
    return (text[:200] + "…") if len(text) > 200 else (text or f"{len(rows)} messages")
