"""The built-in scheduler (seed 10.5): croniter schedules, jobs persisted in
``data/cron.db``, evaluated in ``gateway.timezone``.

Two kinds of job:

* internal (``__internal:memory:daily_compress`` at ``0 3 * * *``,
  ``__internal:memory:weekly_compress`` at ``0 4 * * 1``): run a coroutine
  directly (the memory engine), never the agent;
* agent jobs: a message run through the agent, the reply sent to a chosen
  channel and chat. The scheduler does not know the agent: the gateway passes
  ``run_agent_job(job)`` in.

The database is the source of truth: ``myclaw cron add`` in another process
is seen at the next poll. Each job stores ``next_run_at``; a job whose time
passed while the gateway was down runs once at start (not once per missed
slot), then its next time is computed from now. The clock is injected, and
:meth:`CronScheduler.run_due` is what the background loop calls, so tests
drive schedules with a manual clock.

A job either recurs (``schedule``, five cron fields) or runs once (``at``,
an instant, with ``schedule`` ""): "remind me tomorrow at 9". A one-time
job comes due at ``at`` (its ``next_run_at``), runs through the same path,
and is deleted by the write that records its run. That write comes after
the run, so a one-time job is delivered *at least once*: if the gateway
stops (or dies) while the job runs, or between its reply and that write,
the row is still there and the job runs again at the next start (a
reminder sent twice is less harmful than one never sent). The reply is
written to gateway.db's outbox before it is published (gateway/loop.py,
``_on_its_way``), so a stop after the record and before the send (the
platform's round trip) sends it at the next start instead of losing it.
That row marks the run's slot answered in its own transaction
(``job_replies``, gateway/outbox.py), and a run asks the mark first
(:class:`JobReplies`): a stop between that row and the record sends the
reply at the next start and records the slot without running the job
again, as the run would have (the mark says whether the reply was the
job's fallback: then "fallback", not "ok"); the mark goes once cron.db
has the run. So only a stop before
the reply is written (during the LLM call) runs it twice. Within one
process it never runs twice: a running job is not started again, and the
row is gone before the job counts as finished.

An agent job whose run fails (the model down, timing out, rate limited) is
tried again 1, 3 and 10 minutes later (``retry_delays``), for a recurring
job never past its next slot; the row keeps the slot it is for
(``due_at``) and the attempts made. The last attempt still asks the model,
and if that fails too the job's own words are sent without it
(:func:`fallback_text`, "⏰ call mom"): a reminder must not end as an
apology for a question nobody asked. A run that starts more than
``LATE_AFTER`` after its slot (the gateway was down, or the retries took
that long) tells the model so (:func:`job_prompt`), so the reply can say
it is late. A job whose channel is not running (:class:`CronError`) is not
retried: the slot is recorded as failed (a one-time job is deleted).
Internal jobs are not retried after a failure, their work waits for the
next run, except when memory.db could not be written (full, or its write
lock held elsewhere: ``sqlite3.OperationalError``): compression wrote
nothing then (one transaction a day's batch, a merge), and a week is long
to wait for a disk to get space again, so it is tried again 10 minutes, 1
and 6 hours later (``INTERNAL_RETRY_DELAYS``), never past its next slot.
An internal job that finds the compression lease held (the other
one still running, or a holder that died and left it until it expires) is
not a failure: it tries again ``busy_retry`` later, for the same slot
(``due_at``), until the lease frees; a slot that could not run before the
next one comes is folded into it (the next run does both slots' work: the
daily job compresses every ended day, the weekly one the whole week), so a
daily run lasting past 04:00 on a Monday delays the weekly job, and never
costs it the week. It never runs twice for one slot (its next slot is
computed from the run that did its work) nor at once with the other (the
lease).

A clock stepped back (an NTP correction) neither runs a slot twice (the
next slot is computed from after the slot a run was for, as well as from
its time) nor holds a retry for the step: a retry due further ahead than
the longest retry delay is due now (:meth:`CronStore.due`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import re
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

import aiosqlite
import structlog
from croniter import croniter

from memory.clock import Clock, format_ts, parse_ts
from memory.db import SMALL_CACHE_KIB, Database, Migration, run_script
from memory.errorlog import error_brief, error_fields
from memory.lease import LeaseBusy, LeaseLost

from .bus import words_in_chinese
from .timezones import TimezoneError, parse_timezone, zone_name

if TYPE_CHECKING:  # the write path's modules: `myclaw cron list` needs none of them
    from memory.compression import Compressor

__all__ = [
    "BUSY_RETRY",
    "INTERNAL_DAILY",
    "LATE_AFTER",
    "INTERNAL_RETRY_DELAYS",
    "RETRY_DELAYS",
    "INTERNAL_WEEKLY",
    "CronError",
    "CronJob",
    "CronScheduler",
    "CronStore",
    "FALLBACK_SENT",
    "check_job_id",
    "check_message",
    "check_once",
    "InternalJob",
    "JobAttempt",
    "JobReplies",
    "fallback_text",
    "job_prompt",
    "memory_jobs",
    "next_run",
    "once_local",
    "parse_at",
    "shortest_gap",
    "validate_schedule",
]

log = structlog.get_logger(component="cron")

INTERNAL_DAILY = "__internal:memory:daily_compress"
INTERNAL_WEEKLY = "__internal:memory:weekly_compress"
INTERNAL_PREFIX = "__internal:"


class CronError(ValueError):
    """A job that cannot be added or removed; the message says why."""


def validate_schedule(expr: str) -> str:
    expr = " ".join(expr.split())
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        raise CronError(f"invalid cron schedule {expr!r} (five fields: minute hour day month weekday, e.g. '0 9 * * 1-5')")
    return expr


def check_message(message: str) -> str:
    """A job's message, stripped; empty is refused."""
    message = message.strip()
    if not message:
        raise CronError("the job's message is empty")
    return message


def check_job_id(job_id: str) -> str:
    if job_id.startswith(INTERNAL_PREFIX):
        raise CronError(f"job ids starting with {INTERNAL_PREFIX!r} are reserved")
    return job_id


ONCE_HORIZON = timedelta(days=366)


def check_once(at: datetime, now: datetime, zone: tzinfo) -> None:
    """A one-time job's instant: after ``now``, within a year."""
    if at <= now:
        raise CronError(f"{_local(at, zone)} is in the past: it is now {_local(now, zone)}")
    if at - now > ONCE_HORIZON:
        raise CronError(f"{_local(at, zone)} is more than a year ahead (it is now {_local(now, zone)})")

# After a failed agent run, the next attempts (see the module's docstring).
RETRY_DELAYS: tuple[timedelta, ...] = (timedelta(minutes=1), timedelta(minutes=3), timedelta(minutes=10))
# An internal job whose lease is held looks again this much later.
BUSY_RETRY = timedelta(minutes=1)
# An internal job that could not write memory.db tries again after these (module docstring).
INTERNAL_RETRY_DELAYS: tuple[timedelta, ...] = (timedelta(minutes=10), timedelta(hours=1), timedelta(hours=6))
# A run starting this long after its slot says it is late.
LATE_AFTER = timedelta(minutes=5)
# cron.db's last_error of a run whose reply was its fallback (``fallback_text``).
FALLBACK_SENT = "the model could not be reached; the job's own text was sent"


def parse_at(text: str, tz: tzinfo) -> datetime:
    """A one-time job's instant: a local date and time in ``tz``
    ("2026-11-23 09:00", ISO 8601 "2026-11-23T09:00"), or with an explicit
    offset ("2026-11-23T09:00+08:00", "...Z"), which wins over ``tz``."""
    s = text.strip()
    try:
        if not re.match(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}", s):
            raise ValueError(s)
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise CronError(
            # The format, not a dated example: one would be in the past some day.
            f"invalid time {s[:40]!r} for a one-time job: a date and a time of day as 'YYYY-MM-DD HH:MM'"
        ) from None
    if dt.tzinfo is None:
        return local_instant(dt, tz)
    return dt.astimezone(UTC)


def local_instant(wall: datetime, tz: tzinfo) -> datetime:
    """The instant (UTC) a naive local ``wall`` time means in ``tz``. A time
    a DST change repeats (01:30 on the fall-back night) is its first
    occurrence; one it skips (02:30 on the spring-forward night) is the
    moment the clock jumps (03:00), as cron runs a job set in the skipped
    hour, and not the hour-late instant Python's ``fold=0`` reads it as."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # Skipped: the jump lies between the wall time read with the offset
    # after the change (fold=1, earlier) and with the one before it.
    lo, hi = wall.replace(tzinfo=tz, fold=1).astimezone(UTC), first
    after = hi.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def once_local(job: CronJob) -> str:
    """A one-time job's time in the zone it was asked in: "2026-11-23 09:00 (Asia/Shanghai)"."""
    assert job.at is not None
    try:
        tz = parse_timezone(job.timezone or "UTC")
    except TimezoneError:
        tz = UTC
    return _local(parse_ts(job.at), tz)


def _local(at: datetime, tz: tzinfo) -> str:
    return f"{at.astimezone(tz):%Y-%m-%d %H:%M} ({zone_name(tz)})"


def next_run(expr: str, after: datetime, tz: tzinfo) -> datetime:
    """The first time strictly after ``after`` that ``expr`` fires in ``tz``
    (aware, UTC). A schedule at set hours ("30 1 * * *") fires once on the
    night a DST change repeats its hour, as cron does; one that runs every
    hour ("*/15 * * * *") keeps running through the repeat. In a skipped
    hour croniter fires at the jump (03:00), as :func:`local_instant` does."""
    it = croniter(expr, after.astimezone(tz))
    set_hours = "*" not in expr.split()[1]
    for _ in range(4):  # a repeated hour holds at most a few firings of a set-hours schedule
        nxt: datetime = it.get_next(datetime)
        utc = nxt.astimezone(UTC)
        if not (set_hours and _repeated(nxt, utc, tz)):
            return utc
    return utc  # pragma: no cover - four firings in one repeated hour: minutes given one by one


def _repeated(local: datetime, utc: datetime, tz: tzinfo) -> bool:
    """Whether ``utc`` is the second occurrence of its local wall time."""
    wall = local.replace(tzinfo=None)
    return wall.replace(tzinfo=tz, fold=0).astimezone(UTC) < utc


def _moved_run(expr: str, last_run: str | None, now: datetime, tz: tzinfo) -> datetime:
    """A schedule's next run on its user's new clock ``tz``. One that runs
    at most once a day does not run again on the local day its last run
    fell on there (far east, 08:00 in Honolulu is 03:00 in Tokyo: not
    08:00 Tokyo again that day)."""
    nxt = next_run(expr, now, tz)
    if last_run is not None and shortest_gap(expr, now, tz, runs=16) >= timedelta(hours=23) \
            and parse_ts(last_run).astimezone(tz).date() == nxt.astimezone(tz).date():
        nxt = next_run(expr, nxt, tz)
    return nxt


def shortest_gap(expr: str, after: datetime, tz: tzinfo, runs: int = 120) -> timedelta:
    """The shortest time between two of the next ``runs`` firings: how often
    a schedule runs at its busiest ("0,1 9 * * *" runs a minute apart once a
    day). A schedule that fires only on rare days still shows its burst,
    because the firings are consecutive, not sampled over a year."""
    it = croniter(expr, after.astimezone(tz))
    times = [it.get_next(datetime) for _ in range(runs)]
    # Compare in UTC: a DST change must not make an hourly job look like
    # one that runs twice in an hour (or never).
    utc = [t.astimezone(ZoneInfo("UTC")) for t in times]
    return min((b - a for a, b in zip(utc, utc[1:])), default=timedelta.max)


@dataclass(frozen=True)
class CronJob:
    id: str
    schedule: str  # "" for a one-time job
    message: str  # the agent's input, or the internal command (= id)
    kind: str  # "internal" | "agent"
    channel: str = ""
    chat_id: str = ""
    user: str = ""
    # True only for a job made in the user's own private chat and replying
    # there: then the agent may use their private memory (profile,
    # credentials); otherwise the reply may be read by others, as in a group.
    private: bool = False
    created_at: str = ""
    next_run_at: str = ""
    last_run_at: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    # The zone the schedule is read in: the user's own when they had set one
    # (gateway/timezones.py) as the job was made; "" for the gateway's.
    timezone: str = ""
    # A one-time job's instant (UTC, as next_run_at); None for a recurring
    # one. Its timezone is always set: the zone its time was read in.
    at: str | None = None
    # Failed runs of the current slot, and that slot while it is retried
    # (next_run_at is then the retry's time); 0 / None otherwise.
    attempts: int = 0
    due_at: str | None = None

    @property
    def internal(self) -> bool:
        return self.kind == "internal"

    @property
    def once(self) -> bool:
        return self.at is not None

    @property
    def slot(self) -> str:
        """The time this run is for: a retry's slot, else the next run's."""
        return self.due_at or self.next_run_at


Fallback = Callable[[bool | None], str]


@dataclass(frozen=True)
class JobAttempt:
    """One run of an agent job, as the scheduler hands it to ``run_agent_job``."""

    prompt: str  # the job's message, with a note when the run is late
    # Set on the last attempt: what to send if the model fails once more,
    # given the chat's language (True: Chinese; None: nothing tells).
    fallback: Fallback | None = None
    number: int = 1


def _when(slot: datetime, now: datetime, tz: tzinfo) -> str:
    local = slot.astimezone(tz)
    same_day = local.date() == now.astimezone(tz).date()
    return f"{local:%H:%M}" if same_day else f"{local:%Y-%m-%d %H:%M}"


def _span(d: timedelta) -> str:
    minutes = int(d.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def job_prompt(job: CronJob, slot: datetime, now: datetime, tz: tzinfo) -> str:
    """What the model is asked: the job's message, and, when the run is
    ``LATE_AFTER`` past its slot, by how much (so the reply need not
    pretend a 9:00 reminder is on time at 11:30)."""
    late = now - slot
    if late < LATE_AFTER:
        return job.message
    return (
        f"{job.message}\n\n(This scheduled task was due at {_when(slot, now, tz)} ({zone_name(tz)}) and runs "
        f"{_span(late)} late; say so briefly.)"
    )


def fallback_text(job: CronJob, slot: datetime, now: datetime, tz: tzinfo, *, chat_zh: bool | None = None) -> str:
    """What the chat gets when the model cannot be reached on the last
    attempt: the job's own words, marked as such, in their language; when
    they have none to tell by ("📞 13800138000"), in the chat's
    (``chat_zh``, the loop's one language rule), else English."""
    when = _when(slot, now, tz)
    zh = words_in_chinese(job.message)  # kana: Japanese, not Chinese
    if zh if zh is not None else chat_zh:
        return f"⏰ {job.message}\n（定于 {when}。助手暂时无法回应，以上是设定时的原文。）"
    return f"⏰ {job.message}\n(Scheduled for {when}. The assistant could not be reached, so this is the task as it was set.)"


def _fallback(job: CronJob, slot: datetime, now: datetime, tz: tzinfo) -> Fallback:
    return lambda chat_zh: fallback_text(job, slot, now, tz, chat_zh=chat_zh)


@dataclass(frozen=True)
class InternalJob:
    id: str
    schedule: str
    run: Callable[[], Awaitable[object]]


async def _v1_cron(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        """
        CREATE TABLE cron_jobs (
            id          TEXT PRIMARY KEY,
            schedule    TEXT NOT NULL,
            message     TEXT NOT NULL CHECK (length(message) > 0),
            kind        TEXT NOT NULL CHECK (kind IN ('internal', 'agent')),
            channel     TEXT NOT NULL DEFAULT '',
            chat_id     TEXT NOT NULL DEFAULT '',
            user        TEXT NOT NULL DEFAULT '',
            created_at  TEXT NOT NULL,
            next_run_at TEXT NOT NULL,
            last_run_at TEXT,
            last_status TEXT,
            last_error  TEXT
        );
        CREATE INDEX idx_cron_next ON cron_jobs(next_run_at);
        CREATE INDEX idx_cron_user ON cron_jobs(user);
        """,
    )


async def _v2_private(conn: aiosqlite.Connection) -> None:
    # Jobs made before this column carry no record of the chat they were
    # made in (a group's job ran with the creator's private memory): they
    # run with shared memory only until made again from a private chat.
    await run_script(conn, "ALTER TABLE cron_jobs ADD COLUMN private INTEGER NOT NULL DEFAULT 0;")


async def _v3_timezone(conn: aiosqlite.Connection) -> None:
    await run_script(conn, "ALTER TABLE cron_jobs ADD COLUMN timezone TEXT NOT NULL DEFAULT '';")


async def _v4_once(conn: aiosqlite.Connection) -> None:
    # One-time jobs: ``at`` set, ``schedule`` ''. Rows before it recur.
    await run_script(conn, "ALTER TABLE cron_jobs ADD COLUMN at TEXT;")


async def _v5_retries(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        """
        ALTER TABLE cron_jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE cron_jobs ADD COLUMN due_at TEXT;
        """,
    )


CRON_MIGRATIONS: list[Migration] = [_v1_cron, _v2_private, _v3_timezone, _v4_once, _v5_retries]


def _job(r: sqlite3.Row) -> CronJob:
    d = {k: r[k] for k in r.keys()}
    d["private"] = bool(d.get("private"))
    return CronJob(**d)


class CronStore:
    """Persisted jobs in their own SQLite file (``data/cron.db``)."""

    def __init__(self, db: Database, clock: Clock, timezone: str = "UTC") -> None:
        self.db = db
        self.clock = clock
        self.tz = ZoneInfo(timezone)

    @classmethod
    async def open(cls, path: Path | str, clock: Clock, timezone: str = "UTC") -> CronStore:
        db = await Database.open(path, CRON_MIGRATIONS, inline_cache_kib=SMALL_CACHE_KIB)
        return cls(db, clock, timezone)

    async def close(self) -> None:
        await self.db.close()

    def zone_of(self, job: CronJob) -> tzinfo:
        """The zone ``job``'s schedule is read in."""
        if job.timezone:
            try:
                return parse_timezone(job.timezone)
            except TimezoneError:
                pass  # gone from this system's tzdata: the gateway's, as before it was set
        return self.tz

    async def add(
        self,
        *,
        message: str,
        channel: str,
        chat_id: str,
        user: str,
        schedule: str | None = None,
        at: datetime | None = None,
        job_id: str | None = None,
        private: bool = False,
        tz: tzinfo | None = None,
    ) -> CronJob:
        """An agent job: ``message`` through the agent as ``user``, reply to
        ``channel``/``chat_id``; with ``private``, the user's private memory
        too (only for their own private chat: :attr:`CronJob.private`).
        Either at each time of ``schedule`` or once, at ``at`` (aware; from
        now to a year ahead: :func:`parse_at` reads what people type).
        ``tz``: the zone its schedule is in, or ``at`` was read in (default
        the gateway's)."""
        if (schedule is None) == (at is None):
            raise CronError(
                "give either a schedule (a recurring job) or a time (a one-time job): "
                + ("not both" if at is not None else "neither was given")
            )
        message = check_message(message)
        if not channel or not chat_id or not user:
            raise CronError("a job needs a channel, a chat id and a user")
        job_id = check_job_id(job_id or "job-" + uuid.uuid4().hex[:8])
        now = self.clock.now()
        zone = tz or self.tz
        if schedule is not None:
            schedule = validate_schedule(schedule)
            nxt, once, stored_zone = next_run(schedule, now, zone), None, zone_name(tz) if tz is not None else ""
        else:
            assert at is not None
            check_once(at, now, zone)
            # The instant is absolute; its zone is kept to show it as asked.
            schedule, nxt, once, stored_zone = "", at, format_ts(at), zone_name(zone)
        try:
            async with self.db.transaction() as conn:
                await conn.execute(
                    "INSERT INTO cron_jobs (id, schedule, message, kind, channel, chat_id, user, private, "
                    "created_at, next_run_at, timezone, at) VALUES (?, ?, ?, 'agent', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (job_id, schedule, message, channel, chat_id, user, int(private), format_ts(now),
                     format_ts(nxt), stored_zone, once),
                )
        except sqlite3.IntegrityError:
            raise CronError(f"a job with id {job_id!r} already exists") from None
        job = await self.get(job_id)
        assert job is not None
        log.info("cron job added", job=job_id, schedule=schedule, at=once, user=user, channel=channel, private=private)
        return job

    async def ensure_internal(self, job_id: str, schedule: str) -> CronJob:
        """Register an internal job; an existing one keeps its ``next_run_at``
        (so a run missed while down is still due) unless the schedule changed."""
        schedule = validate_schedule(schedule)
        now = self.clock.now()
        nxt = format_ts(next_run(schedule, now, self.tz))
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO cron_jobs (id, schedule, message, kind, created_at, next_run_at) "
                "VALUES (?, ?, ?, 'internal', ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET next_run_at = CASE WHEN cron_jobs.schedule = excluded.schedule "
                "THEN cron_jobs.next_run_at ELSE excluded.next_run_at END, schedule = excluded.schedule",
                (job_id, schedule, job_id, format_ts(now), nxt),
            )
        job = await self.get(job_id)
        assert job is not None
        return job

    async def get(self, job_id: str) -> CronJob | None:
        row = await self.db.fetchone("SELECT * FROM cron_jobs WHERE id = ?", (job_id,))
        return _job(row) if row else None

    async def list(self, user: str | None = None) -> list[CronJob]:
        if user is None:
            rows = await self.db.fetchall("SELECT * FROM cron_jobs ORDER BY kind DESC, created_at, id")
        else:
            rows = await self.db.fetchall("SELECT * FROM cron_jobs WHERE user = ? ORDER BY created_at, id", (user,))
        return [_job(r) for r in rows]

    async def remove(self, job_id: str, *, user: str | None = None) -> None:
        """Remove an agent job (of ``user``, when given); internal jobs stay."""
        job = await self.get(job_id)
        if job is None or (user is not None and job.user != user):
            raise CronError(f"no job {job_id!r}")
        if job.internal:
            raise CronError(f"{job_id!r} is an internal job and cannot be removed")
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,))
        log.info("cron job removed", job=job_id)

    async def follow_user_zone(self, user: str, old: tzinfo | None, new: tzinfo | None) -> builtins.list[CronJob]:
        """``user``'s /timezone went from ``old`` to ``new`` (None: none set,
        the gateway's). Their recurring jobs made in their own private chat
        and read in their zone until now follow them: "every day at 8" is 8
        on the clock where they are, as a phone's alarm is, not 8 in the
        city they flew from. The next run of each is computed anew, unless
        it is due already or being retried (that run keeps its time), or a
        time of it on the new clock passed since its last run (flying east,
        landing after 8:00 there): then the run it had pending stays, so
        that day's reminder comes (later) rather than never, and the runs
        after it are on the new clock; nor does a daily one run twice on
        the new clock's day its last run fell on (:func:`_moved_run`). A group's job (the group's clock),
        one in another zone (the operator's ``--timezone``) and a one-time
        job (a moment) stay. Returns the jobs moved, as they are now."""
        was, name = (zone_name(old) if old is not None else ""), (zone_name(new) if new is not None else "")
        if was == name:
            return []
        zone, now = new or self.tz, self.clock.now()
        async with self.db.transaction() as conn:
            async with conn.execute(
                "SELECT id, schedule, next_run_at, due_at, last_run_at, created_at FROM cron_jobs WHERE kind = 'agent' "
                "AND user = ? AND at IS NULL AND private = 1 AND timezone = ? ORDER BY created_at, id", (user, was),
            ) as cur:
                rows = list(await cur.fetchall())
            for r in rows:
                nxt = r["next_run_at"]
                owed = next_run(r["schedule"], parse_ts(r["last_run_at"] or r["created_at"]), zone) <= now
                if r["due_at"] is None and parse_ts(nxt) > now and not owed:
                    nxt = format_ts(_moved_run(r["schedule"], r["last_run_at"], now, zone))
                await conn.execute("UPDATE cron_jobs SET timezone = ?, next_run_at = ? WHERE id = ?", (name, nxt, r["id"]))
        moved = [j for j in [await self.get(r["id"]) for r in rows] if j is not None]
        if moved:
            log.info("cron jobs follow their user's time zone", user=user, jobs=len(moved), timezone=name or "gateway")
        return moved

    async def follow_gateway_zone(self) -> builtins.list[CronJob]:
        """At start: the recurring jobs read in the gateway's zone (theirs
        who set none, the internal ones) whose pending run is no firing of
        their schedule on it were timed on another: ``gateway.timezone``
        changed since. Each follows the new zone as a traveller's follow
        :meth:`follow_user_zone`: a run due or being retried keeps its time
        (the catch-up runs it once), as does one whose time on the new clock
        passed since its last run (that day's run comes, later), else the
        next is computed anew, never twice on one local day
        (:func:`_moved_run`). Returns the jobs moved."""
        now = self.clock.now()
        moved: builtins.list[str] = []
        async with self.db.transaction() as conn:
            async with conn.execute(
                "SELECT id, schedule, next_run_at, due_at, last_run_at, created_at FROM cron_jobs "
                "WHERE at IS NULL AND schedule != '' AND timezone = '' ORDER BY created_at, id"
            ) as cur:
                rows = list(await cur.fetchall())
            for r in rows:
                pending = parse_ts(r["next_run_at"])
                if r["due_at"] is not None or pending <= now:
                    continue
                if next_run(r["schedule"], pending - timedelta(seconds=1), self.tz) == pending:
                    continue  # a firing on this clock: timed on it (or a zone it agrees with)
                if next_run(r["schedule"], parse_ts(r["last_run_at"] or r["created_at"]), self.tz) <= now:
                    continue  # owed on the new clock: the pending run brings that day's
                nxt = format_ts(_moved_run(r["schedule"], r["last_run_at"], now, self.tz))
                await conn.execute("UPDATE cron_jobs SET next_run_at = ? WHERE id = ?", (nxt, r["id"]))
                moved.append(r["id"])
        if moved:
            log.info("cron jobs follow the gateway's new time zone", jobs=len(moved), timezone=zone_name(self.tz))
        return [j for j in [await self.get(i) for i in moved] if j is not None]

    async def move_chat(self, channel: str, old_chat: str, new_chat: str) -> int:
        """Jobs aimed at ``old_chat`` go to ``new_chat`` (a Telegram group
        upgraded to a supergroup), so each run's reply and history are the
        new chat's; how many. A second call finds none."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE cron_jobs SET chat_id = ? WHERE channel = ? AND chat_id = ?", (new_chat, channel, old_chat)
            )
            n = cur.rowcount
        if n:
            log.info("cron jobs moved with their chat", channel=channel, chat_id=old_chat, new_chat_id=new_chat, jobs=n)
        return n

    async def remove_member(self, channel: str, chat_id: str, user: str) -> int:
        """``user`` left the group ``channel``/``chat_id``: their jobs there
        are deleted (each run answers as them, with their memories, to
        people they are no longer with); how many. Their jobs elsewhere stay."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM cron_jobs WHERE kind = 'agent' AND channel = ? AND chat_id = ? AND user = ?",
                (channel, chat_id, user),
            )
            n = cur.rowcount
        if n:
            log.info("cron jobs of a member who left the chat deleted", channel=channel, chat_id=chat_id, user=user,
                     jobs=n)
        return n

    async def due(self, now: datetime, *, retries_within: tuple[timedelta, timedelta] | None = None,
                  ) -> builtins.list[CronJob]:  # `list` is a method here
        """Jobs due at ``now``. ``retries_within``: the longest wait before
        an agent job's and an internal job's next attempt; a job being
        retried (``due_at`` set) whose attempt is further ahead than that
        is due too: the clock was stepped back since (an NTP correction),
        and the retry would wait the step out."""
        if retries_within is None:
            rows = await self.db.fetchall(
                "SELECT * FROM cron_jobs WHERE next_run_at <= ? ORDER BY next_run_at, id", (format_ts(now),)
            )
        else:
            agent, internal = (format_ts(now + d) for d in retries_within)
            rows = await self.db.fetchall(
                "SELECT * FROM cron_jobs WHERE next_run_at <= ? OR (due_at IS NOT NULL AND next_run_at > "
                "CASE kind WHEN 'internal' THEN ? ELSE ? END) ORDER BY next_run_at, id",
                (format_ts(now), internal, agent),
            )
        return [_job(r) for r in rows]

    async def record_run(self, job: CronJob, *, ran_at: datetime, status: str, error: str | None) -> None:
        """A recurring job's run and its next time; a one-time job is done:
        deleted (after its run: at least once, see the module's docstring)."""
        if job.once:
            async with self.db.transaction() as conn:
                await conn.execute("DELETE FROM cron_jobs WHERE id = ? AND at IS NOT NULL", (job.id,))
            log.info("one-time cron job done", job=job.id, status=status)
            return
        # After the slot it ran for too: a retry the clock was stepped back
        # under (an NTP correction) ran before its own slot's time, which
        # must not come due again.
        after = max(ran_at, self.clock.now(), parse_ts(job.slot))
        nxt = format_ts(next_run(job.schedule, after, self.zone_of(job)))
        async with self.db.transaction() as conn:
            await conn.execute(
                "UPDATE cron_jobs SET last_run_at = ?, last_status = ?, last_error = ?, next_run_at = ?, "
                "attempts = 0, due_at = NULL WHERE id = ?",
                (format_ts(ran_at), status, error, nxt, job.id),
            )

    async def record_retry(
        self, job: CronJob, *, ran_at: datetime, retry_at: datetime, error: str, busy: bool = False
    ) -> None:
        """A failed attempt with another to come at ``retry_at``, for the same
        slot. ``busy``: it did not start (its lease is held), so it is not
        counted as an attempt."""
        async with self.db.transaction() as conn:
            await conn.execute(
                "UPDATE cron_jobs SET last_run_at = ?, last_status = ?, last_error = ?, next_run_at = ?, "
                "attempts = attempts + ?, due_at = COALESCE(due_at, next_run_at) WHERE id = ?",
                (format_ts(ran_at), "busy" if busy else "retry", error, format_ts(retry_at), 0 if busy else 1, job.id),
            )


# Returns False when the model failed and the attempt's fallback was sent instead.
RunAgentJob = Callable[[CronJob, JobAttempt], Awaitable[bool | None]]


class JobReplies(Protocol):
    """Where an agent job's reply marks its slot answered as it is written
    (gateway.db's outbox, gateway/outbox.py): asked before a run, so a slot
    whose reply a kill left unrecorded here is recorded, not run again."""

    async def job_reply(self, job_id: str, slot: str) -> str | None:
        """"ok" or "fallback": how the slot's reply was written; None: it was not."""

    async def job_recorded(self, job_id: str, slot: str) -> None: ...


@dataclass(frozen=True)
class JobRun:
    job_id: str
    # "ok"; "fallback" (the model failed on the last attempt: the job's own
    # words were sent); "retry" (failed, tried again later); "error"
    # (failed for good); "busy" (an internal job's lease is held: tried
    # again ``busy_retry`` later, or folded into its next slot)
    status: str
    error: str | None = None


class CronScheduler:
    """``start()`` registers the internal jobs and runs what was missed;
    a background loop then calls :meth:`run_due` every ``poll_interval`` s."""

    def __init__(
        self,
        store: CronStore,
        *,
        run_agent_job: RunAgentJob | None = None,
        internal: Sequence[InternalJob] = (),
        poll_interval: float = 15.0,
        retry_delays: Sequence[timedelta] = RETRY_DELAYS,
        busy_retry: timedelta = BUSY_RETRY,
        internal_retry_delays: Sequence[timedelta] = INTERNAL_RETRY_DELAYS,
        replies: JobReplies | None = None,
    ) -> None:
        self.store = store
        self.replies = replies
        self.clock = store.clock
        self.run_agent_job = run_agent_job
        self.internal: Mapping[str, InternalJob] = {j.id: j for j in internal}
        self.poll_interval = poll_interval
        self.retry_delays = tuple(retry_delays)
        self.busy_retry = busy_retry
        self.internal_retry_delays = tuple(internal_retry_delays)
        self._running: dict[str, asyncio.Task[JobRun]] = {}
        self._task: asyncio.Task[None] | None = None
        self._registered = False  # the internal jobs are in cron.db
        self._poll_failing = 0  # polls failed in a row: one error, then counted

    async def start(self, *, loop: bool = True) -> list[JobRun]:
        """Register internal jobs, run every job that came due while the
        gateway was down (once), then start polling. Returns the catch-up runs."""
        if self._task is not None:
            raise RuntimeError("scheduler already started")
        missed: list[JobRun] = []
        try:
            await self._register()
            missed = await self.run_due()
        except (sqlite3.Error, OSError) as exc:
            # cron.db full or read-only: the gateway comes up all the same;
            # the poll registers and runs them once there is room.
            log.error("cron: jobs missed while down not run at start (cron.db cannot be written); the poll tries again",
                      **error_fields(exc))
        if missed:
            log.info("cron: ran jobs missed while down", jobs=[r.job_id for r in missed])
        if loop:
            self._task = asyncio.create_task(self._loop(), name="cron")
        return missed

    async def _register(self) -> None:
        """The internal jobs in cron.db, once (a start on a full disk leaves it to the poll)."""
        if self._registered:
            return
        for j in self.internal.values():
            await self.store.ensure_internal(j.id, j.schedule)
        self._registered = True

    async def stop(self) -> None:
        task, self._task = self._task, None
        tasks = [t for t in (task, *self._running.values()) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await self._register()
                await self.run_due(wait=False)
            except (sqlite3.Error, OSError) as exc:
                # The jobs are in the database; the next poll tries again. A
                # full disk fails every poll alike: one error, then a count.
                self._poll_failing += 1
                (log.error if self._poll_failing == 1 else log.info)("cron poll failed; will retry",
                                                                     failed=self._poll_failing, **error_fields(exc))
                continue
            if self._poll_failing:
                log.warning("cron polls work again", failed=self._poll_failing)
                self._poll_failing = 0

    async def run_due(
        self, now: datetime | None = None, *, wait: bool = True, only: Container[str] | None = None,
    ) -> list[JobRun]:
        """Start every due job that is not already running (of ``only``'s
        ids, when given: scripts/fakes.py runs reminders at their own time);
        with ``wait`` (tests, start-up catch-up) wait for them and return
        their results."""
        now = now or self.clock.now()
        started = []
        longest = (max(self.retry_delays, default=timedelta(0)),
                   max((*self.internal_retry_delays, self.busy_retry), default=timedelta(0)))
        for job in await self.store.due(now, retries_within=longest):
            if job.id in self._running or (only is not None and job.id not in only):
                continue  # still running from its previous slot
            task = asyncio.create_task(self._run(job, now), name=f"cron:{job.id}")
            self._running[job.id] = task
            task.add_done_callback(functools.partial(self._forget, job.id))
            started.append(task)
        if not wait:
            return []
        return list(await asyncio.gather(*started))

    def _forget(self, job_id: str, task: asyncio.Task[JobRun]) -> None:
        self._running.pop(job_id, None)
        # A run the poll started is awaited by nobody: its failure (the
        # record in cron.db refused) is read here, or asyncio would log the
        # task's repr, the error's text in it. The job stays due: tried again.
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("cron job failed outside its run", job=job_id, **error_fields(exc))

    def _retry_at(self, job: CronJob, slot: datetime, now: datetime) -> datetime | None:
        """When to try ``job`` again if this attempt fails; None: this is its last."""
        delays = self.internal_retry_delays if job.internal else self.retry_delays
        if job.attempts >= len(delays):
            return None
        at = now + delays[job.attempts]
        if not job.once and at >= next_run(job.schedule, max(slot, now), self.store.zone_of(job)):
            return None  # the next slot comes first: it is the retry
        return at

    def _busy_retry_at(self, job: CronJob, now: datetime) -> datetime | None:
        """When a job that found its lease held looks again; None: its next
        slot comes first and does this slot's work too."""
        if job.once:
            return None
        at = now + self.busy_retry
        if at >= next_run(job.schedule, now, self.store.zone_of(job)):
            return None
        return at

    async def _run(self, job: CronJob, now: datetime) -> JobRun:
        log.info("cron job starting", job=job.id, kind=job.kind, attempt=job.attempts + 1)
        retry_at: datetime | None = None
        answered: bool | None = None
        where: dict[str, object] = {}  # an unexpected failure's place and codes, for the log line
        try:
            if job.internal:
                internal = self.internal.get(job.id)
                if internal is None:
                    raise CronError(f"no handler for internal job {job.id!r} in this process")
                await internal.run()
            else:
                if self.run_agent_job is None:
                    raise CronError("agent jobs are not wired in this process")
                written = await self._written(job)
                if written is not None:
                    log.info("cron job's reply for this slot was written before a stop; recorded, not run again",
                             job=job.id, slot=job.slot, fallback=written == "fallback")
                    answered = written != "fallback"  # as the run that wrote it would have recorded it
                else:
                    slot, tz = parse_ts(job.slot), self.store.zone_of(job)
                    retry_at = self._retry_at(job, slot, now)
                    attempt = JobAttempt(
                        prompt=job_prompt(job, slot, now, tz),
                        fallback=_fallback(job, slot, now, tz) if retry_at is None else None,
                        number=job.attempts + 1,
                    )
                    answered = await self.run_agent_job(job, attempt)
            result = (
                JobRun(job.id, "ok") if answered is not False
                else JobRun(job.id, "fallback", FALLBACK_SENT)
            )
        except (LeaseBusy, LeaseLost) as exc:
            # Another compression holds the lease, or took it over from this
            # run (which outran it) and does the work: fail fast, look again soon.
            result = JobRun(job.id, "busy", str(exc))
            retry_at = self._busy_retry_at(job, now)
        except CronError as exc:  # not wired here, or its channel is not running: retrying cannot help
            result = JobRun(job.id, "error", str(exc)[:500])
        except Exception as exc:  # noqa: BLE001 - a job's failure is recorded on the job and logged; the scheduler goes on
            # Kept on the job (shown by `myclaw cron list`) and logged: its kind
            # and codes ("OperationalError (SQLITE_FULL)"), not its text, which
            # may quote a memory or a message.
            error = error_brief(exc)[:500]
            where = {k: v for k, v in error_fields(exc).items() if k != "error"}
            if job.internal and isinstance(exc, sqlite3.OperationalError):  # memory.db full or locked: see above
                retry_at = self._retry_at(job, parse_ts(job.slot), now)
            result = JobRun(job.id, "error" if retry_at is None else "retry", error)
        if result.status == "busy" and retry_at is None:
            # Once a slot, not once a look: the lease was held all the way to the next slot.
            log.warning(
                "cron job gave up its slot (lease held until its next slot, which does this one's work)",
                job=job.id, status="busy", error=result.error, **where,
                next_run_at=format_ts(next_run(job.schedule, now, self.store.zone_of(job))) if not job.once else None,
            )
        else:
            # A busy look is routine (the other job runs, or a dead holder's lease has yet to expire).
            (log.info if result.status in ("ok", "busy") else log.warning)(
                "cron job finished", job=job.id, status=result.status, error=result.error, **where,
                retry_at=format_ts(retry_at) if result.status in ("retry", "busy") and retry_at is not None else None,
            )
        if result.status in ("retry", "busy") and retry_at is not None:
            record = self.store.record_retry(
                job, ran_at=now, retry_at=retry_at, error=result.error or "", busy=result.status == "busy"
            )
        else:
            record = self.store.record_run(job, ran_at=now, status=result.status, error=result.error)
        await asyncio.shield(record)
        if self.replies is not None and not job.internal and result.status not in ("retry", "busy"):
            try:  # cron.db has the run: the slot's mark has done its work
                await self.replies.job_recorded(job.id, job.slot)
            except Exception as exc:  # noqa: BLE001 - a mark left stays harmless: its slot has passed
                log.warning("cron job's reply mark not cleared", job=job.id, error=type(exc).__name__)
        return result

    async def _written(self, job: CronJob) -> str | None:
        """How the reply for ``job``'s slot was written, if it was (gateway.db):
        "ok" or "fallback". Not known (gateway.db failing): None, and it
        runs, as before (at least once)."""
        if self.replies is None:
            return None
        try:
            return await self.replies.job_reply(job.id, job.slot)
        except Exception as exc:  # noqa: BLE001 - a reminder sent twice beats one never sent
            log.warning("could not tell whether the cron job's slot was answered; running it", job=job.id,
                        error=type(exc).__name__)
            return None


def memory_jobs(compressor: Compressor) -> list[InternalJob]:
    """The two internal memory jobs: the engine directly, never the agent."""
    return [
        InternalJob(INTERNAL_DAILY, "0 3 * * *", compressor.daily),
        InternalJob(INTERNAL_WEEKLY, "0 4 * * 1", compressor.weekly),
    ]
