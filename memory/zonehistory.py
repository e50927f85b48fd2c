"""The zones a user lived in, so a day stays the day they lived it.

Memories are stored in UTC and read on the user's calendar. Read on the
zone they are in *now*, a fact said at 08:30 on 4 May in Tokyo became
"said on 3 May" once they moved to New York (19:30 on 3 May there), and
their "yesterday" (4 May in New York) missed it. The rule: a moment is
dated in the zone in force when it was said.

No column a row: the gateway tells memory each time a user's zone
changes (``/timezone``), and memory keeps, per user, the zone that was in
force and the span it was in force (``meta`` key ``zones:<owner>``,
:func:`record_change`). :class:`Lived` is that history as a ``tzinfo``:
``stamp.astimezone(lived)`` is the wall time in the zone of that moment
(its ``fromutc``), so every place that dates a stored moment
(:func:`memory.clock.local_day`, the extraction's line times and day log,
Core Memory's and compression's days) follows the rule unchanged; a wall
time built on it ("midnight today", the days "yesterday" names) is on
the current zone. :func:`lived_periods` turns the days a query names
into the instants that were those days where the user was.

Moments before the first span recorded (said before this was kept, or
before the user first set a zone: the gateway's was a guess, not where
they were) fall back to the current zone, as before.

``gateway.timezone`` changed between runs moves everyone without a zone
of their own at once: one shared record (:func:`gateway_started`, meta
``gateway:zones``, the last run's zone in ``gateway:zone``) whose spans
date, for those users, the moments their own spans leave (:func:`fill`),
as their day logs were dated then.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import aiosqlite

from .clock import format_ts, parse_ts
from .db import Database
from .timeref import Period

__all__ = ["GATEWAY_ZONES", "Lived", "SPANS_KEPT", "current", "drop_zones", "fill", "gateway_started", "lived_periods",
           "lived_wall", "move_zones", "read_gateway_spans", "read_spans", "record_change", "record_return", "zone_key"]

SPANS_KEPT = 200  # zone changes kept per user (a traveller's years); the oldest go first
_PREFIX = "zones:"
GATEWAY_ZONES = "gateway:zones"  # the gateway's zones before its current one, shared by all who set none
_GATEWAY_NOW = "gateway:zone"  # [the zone the last run used, since when ("" : from the start)]
_OFFSET = re.compile(r"^UTC([+-])(\d{2}):(\d{2})$")

Span = tuple[str, str, tzinfo]  # since ("" : from the start), until (stamps), the zone in force


def _key(owner: str) -> str:
    return _PREFIX + owner


def zone_key(tz: tzinfo) -> str:
    """How a zone is kept: its IANA key or "UTC+05:30" (gateway/timezones.py's ``zone_name``)."""
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    off = tz.utcoffset(None) or timedelta(0)
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}" if off else "UTC"


def _zone(name: str) -> tzinfo | None:
    m = _OFFSET.match(name)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(delta if m.group(1) == "+" else -delta)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None  # gone from this system's tzdata: the current zone dates that span


def _parse(value: str | None) -> list[tuple[str, str, str]]:
    try:
        raw = json.loads(value) if value else []
    except ValueError:
        return []
    if not isinstance(raw, list):
        return []  # damaged (a hand edit): no spans, today's zone dates all, as before any was kept
    return [(str(x[0]), str(x[1]), str(x[2])) for x in raw if isinstance(x, list) and len(x) == 3]


async def read_spans(db: Database, owner: str) -> tuple[Span, ...]:
    """``owner``'s recorded zones, oldest first."""
    return await _read(db, _key(owner))


async def read_gateway_spans(db: Database) -> tuple[Span, ...]:
    """The zones ``gateway.timezone`` named before its current one, oldest first."""
    return await _read(db, GATEWAY_ZONES)


async def _read(db: Database, key: str) -> tuple[Span, ...]:
    row = await db.fetchone("SELECT value FROM meta WHERE key = ?", (key,))
    out: list[Span] = []
    for since, until, name in _parse(row[0] if row else None):
        tz = _zone(name)
        try:
            for stamp in (since, until) if since else (until,):
                parse_ts(stamp)
        except ValueError:
            continue  # damaged: that span is dated on today's zone
        if tz is not None:
            out.append((since, until, tz))
    return tuple(out)


async def record_change(db: Database, owner: str, before: tzinfo, *, since: str, at: datetime) -> None:
    """``owner``'s zone changed at ``at``; ``before`` was in force since
    ``since`` ("" when not known: their first zone, in force from the
    start), or since the last change recorded, whichever is later."""
    async with db.transaction() as conn:
        await _record(conn, _key(owner), before, since=since, at=at)


async def _record(conn: aiosqlite.Connection, key: str, before: tzinfo, *, since: str, at: datetime) -> None:
    until = format_ts(at)
    spans = await _spans_to(conn, key, until)
    start = max(since, spans[-1][1]) if spans else since
    if start < until:
        spans.append((start, until, zone_key(before)))
    await _save(conn, key, spans)


async def _spans_to(conn: aiosqlite.Connection, key: str, until: str) -> list[tuple[str, str, str]]:
    """The spans recorded under ``key``; those ending after ``until`` (a
    clock stepped back: what it "recorded" after now) dropped."""
    async with conn.execute("SELECT value FROM meta WHERE key = ?", (key,)) as cur:
        row = await cur.fetchone()
    return [s for s in _parse(row[0] if row else None) if s[1] <= until]


async def _save(conn: aiosqlite.Connection, key: str, spans: list[tuple[str, str, str]]) -> None:
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(spans[-SPANS_KEPT:], separators=(",", ":"))),
    )


async def record_return(db: Database, owner: str, gateway: tzinfo, *, at: datetime) -> bool:
    """``owner``, back on the gateway's zone since their last span ended
    (``/timezone reset``), names a zone of their own at ``at``: the time
    between is recorded as the gateway's zones then (its old ones,
    :data:`GATEWAY_ZONES`, where they cover it; ``gateway``, today's, for
    the rest), else it fell after their last span and was read on the zone
    they named. Nothing when they have no span: a first ``/timezone`` (the
    gateway's zone was a guess, not where they were). True when recorded."""
    until = format_ts(at)
    key = _key(owner)
    async with db.transaction() as conn:
        spans = await _spans_to(conn, key, until)
        if not spans or spans[-1][1] >= until:
            return False
        async with conn.execute("SELECT value FROM meta WHERE key = ?", (GATEWAY_ZONES,)) as cur:
            shared = await cur.fetchone()
        cursor, now = spans[-1][1], zone_key(gateway)
        for since, end, name in sorted(_parse(shared[0] if shared else None), key=lambda span: span[1]):
            a, b = max(since, cursor), min(end, until)
            if a < b:
                if cursor < a:
                    spans.append((cursor, a, now))
                spans.append((a, b, name))
                cursor = b
        if cursor < until:
            spans.append((cursor, until, now))
        await _save(conn, key, spans)
    return True


async def gateway_started(db: Database, tz: tzinfo, *, at: datetime) -> bool:
    """The gateway starts on ``tz`` (``gateway.timezone``) at ``at``: when
    the last run used another, that one's span is recorded (shared by all
    who set no zone). True when it was. The first run that keeps this
    takes its zone as in force from the start (it had no other known)."""
    name = zone_key(tz)
    async with db.transaction() as conn:
        async with conn.execute("SELECT value FROM meta WHERE key = ?", (_GATEWAY_NOW,)) as cur:
            row = await cur.fetchone()
        try:
            last = json.loads(row[0]) if row else None
        except ValueError:
            last = None  # damaged (a hand edit): taken as the first run's
        was, since = (str(last[0]), str(last[1])) if isinstance(last, list) and len(last) == 2 else ("", "")
        if was == name:
            return False
        before = _zone(was) if was else None  # gone from tzdata: that span is dated on today's zone
        changed = before is not None
        if before is not None:
            await _record(conn, GATEWAY_ZONES, before, since=since, at=at)
        await conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (_GATEWAY_NOW, json.dumps([name, format_ts(at) if changed else ""], separators=(",", ":"))),
        )
    return changed


def fill(own: Sequence[Span], shared: Sequence[Span]) -> tuple[Span, ...]:
    """``own`` spans with ``shared``'s (the gateway's) in the time they
    leave: a user's own zone, where they set one, outranks the gateway's.
    Stamps compare as text (format_ts); "" is the start of time."""
    out = list(own)
    for since, until, tz in shared:
        pieces = [(since, until)]
        for s, u, _ in own:
            rest: list[tuple[str, str]] = []
            for a, b in pieces:
                if a < s:
                    rest.append((a, min(b, s)))
                if u < b:
                    rest.append((max(a, u), b))
            pieces = rest
        out += [(a, b, tz) for a, b in pieces if a < b]
    return tuple(sorted(out, key=lambda span: span[1]))


async def drop_zones(conn: aiosqlite.Connection, owner: str) -> None:
    """Forget ``owner``'s zones (erased whole)."""
    await conn.execute("DELETE FROM meta WHERE key = ?", (_key(owner),))


async def move_zones(conn: aiosqlite.Connection, old: str, new: str) -> bool:
    """merge-identities: ``old``'s zones become ``new``'s unless ``new`` has
    its own. True when ``old`` had a record (moved or dropped)."""
    moved = await conn.execute("UPDATE OR IGNORE meta SET key = ? WHERE key = ?", (_key(new), _key(old)))
    dropped = await conn.execute("DELETE FROM meta WHERE key = ?", (_key(old),))
    return moved.rowcount > 0 or dropped.rowcount > 0


class Lived(tzinfo):
    """A user's calendar: ``now`` (their zone today) and the spans they
    were elsewhere. Converting a moment to it (``astimezone``) gives the
    wall time in the zone of that moment, that zone as its ``tzinfo``;
    a wall time made on it is read on ``now``."""

    def __init__(self, now: tzinfo, spans: Sequence[Span]) -> None:
        self.now = now
        self.spans = tuple(spans)
        self._untils = [parse_ts(u) for _, u, _ in self.spans]
        self._sinces = [parse_ts(s) if s else datetime.min.replace(tzinfo=UTC) for s, _, _ in self.spans]
        self.cache_key = zone_key(now) + "|" + ";".join(f"{s},{u},{zone_key(z)}" for s, u, z in self.spans)

    def zone_at(self, at: datetime) -> tzinfo:
        """The zone in force at instant ``at``."""
        i = bisect_right(self._untils, at)
        if i < len(self.spans) and self._sinces[i] <= at:
            return self.spans[i][2]
        return self.now

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return self.now.utcoffset(dt.replace(tzinfo=None) if dt is not None else None)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return self.now.dst(dt.replace(tzinfo=None) if dt is not None else None)

    def tzname(self, dt: datetime | None) -> str | None:
        return self.now.tzname(dt.replace(tzinfo=None) if dt is not None else None)

    def fromutc(self, dt: datetime) -> datetime:
        at = dt.replace(tzinfo=UTC)
        return at.astimezone(self.zone_at(at))

    def __repr__(self) -> str:
        return f"Lived({self.cache_key})"


def current(tz: tzinfo | None) -> tzinfo | None:
    """The zone a wall time is read on today (``tz`` itself unless a :class:`Lived`)."""
    return tz.now if isinstance(tz, Lived) else tz


def lived_wall(day: date, at: time, tz: tzinfo) -> datetime:
    """The instant ``at`` o'clock on ``day`` was where the user was that
    day (a day log's noon, for a summary with no line time), on ``tz``'s
    current zone when they were not elsewhere then."""
    if not isinstance(tz, Lived):
        return datetime.combine(day, at, tz)
    here = datetime.combine(day, at, tz.now)
    zone = tz.zone_at(here.astimezone(UTC))
    there = datetime.combine(day, at, zone)
    return there if tz.zone_at(there.astimezone(UTC)) is zone else here


def lived_periods(when: Sequence[Period], tz: tzinfo | None) -> list[Period]:
    """``when`` (instants; a whole day or days on ``tz``'s current zone
    for "yesterday", "上周") as the instants that were those days where
    the user was then: one range a span they were in. A range that is not
    whole days ("just now", the last three hours) is kept as it is."""
    if not isinstance(tz, Lived) or not tz.spans:
        return list(when)
    out: list[Period] = []
    for a, b in when:
        la, lb = a.astimezone(tz.now), b.astimezone(tz.now)
        if la.time() != time(0) or lb.time() != time(0):
            out.append((a, b))
            continue
        first, end = la.date(), lb.date()
        # Before the first span, between two (a user's back on the gateway's
        # zone, then set another), after the last: today's zone, as zone_at reads them.
        bounds: list[tuple[datetime, datetime, tzinfo]] = []
        prev = datetime.min.replace(tzinfo=UTC)
        for s, u, (_, _, z) in zip(tz._sinces, tz._untils, tz.spans, strict=True):
            if prev < s:
                bounds.append((prev, s, tz.now))
            bounds.append((s, u, z))
            prev = u
        bounds.append((prev, datetime.max.replace(tzinfo=UTC), tz.now))
        for since, until, zone in bounds:
            lo = datetime.combine(first, time(0), zone).astimezone(UTC)
            hi = datetime.combine(end, time(0), zone).astimezone(UTC)
            lo, hi = max(lo, since), min(hi, until)
            if lo < hi:
                out.append((lo, hi))
    return out
