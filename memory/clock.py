"""The clock is passed in, never read from a global, so tests and benchmarks
can set time (decay, schedules, quiet gaps) without patching."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta, tzinfo

import structlog

from .errorlog import error_fields

__all__ = ["Clock", "ManualClock", "SystemClock", "ZoneOf", "ZoneUnread", "format_ts", "local_day", "owner_zone",
           "parse_ts", "weekday"]

# A user's own time zone (the gateway's /timezone), None when they set none.
ZoneOf = Callable[[str], Awaitable[tzinfo | None]]


class ZoneUnread(Exception):
    """A :data:`ZoneOf` could not read the zone and has said so in the log
    itself, once for the trouble (gateway/timezones.py): the caller falls
    back without logging it again (each caller's line, at every message,
    filled the log)."""


class Clock:
    """Anything with ``now() -> aware datetime`` (UTC)."""

    def now(self) -> datetime:  # pragma: no cover - interface
        raise NotImplementedError


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | str = "2026-01-01T00:00:00Z") -> None:
        self._now = parse_ts(start) if isinstance(start, str) else start.astimezone(UTC)
        self._listeners: list[Callable[[datetime], None]] = []

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime | str) -> None:
        self._now = parse_ts(when) if isinstance(when, str) else when.astimezone(UTC)

    def advance(self, delta: timedelta | float) -> datetime:
        self._now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        return self._now


def format_ts(dt: datetime) -> str:
    """Stored form: ISO 8601 UTC to the second, sortable as text."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    elif dt.tzinfo is not UTC:
        dt = dt.astimezone(UTC)
    # An f-string, not strftime: 3x faster, and called several times per message.
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}Z"


def parse_ts(text: str) -> datetime:
    t = text.strip().replace(" ", "T")
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def weekday(day: datetime | date) -> str:
    """``Wed``: a day's weekday for the memory model, which resolves "next
    Wednesday" / "下周三" from it (strftime's %a follows the C locale)."""
    return _WEEKDAYS[day.weekday()]


def local_day(stamp: str, tz: tzinfo | None) -> str:
    """The calendar day (YYYY-MM-DD) of stored ``stamp`` in ``tz`` (UTC's
    when None): the day the user said it on their clock, as their events
    are dated. A stamp that is a date already (the file store's) stays."""
    if tz is None or len(stamp) <= 10:
        return stamp[:10]
    return parse_ts(stamp).astimezone(tz).strftime("%Y-%m-%d")


async def owner_zone(zone_of: ZoneOf | None, owner: str, default: tzinfo) -> tzinfo:
    """``owner``'s zone, or ``default`` (none set, or it cannot be read:
    gateway.db trouble costs the user's zone, not the job)."""
    if zone_of is not None:
        try:
            return await zone_of(owner) or default
        except ZoneUnread:
            pass  # said where it was read
        except Exception as exc:
            structlog.get_logger(component="memory").warning(
                "user time zone not read; the gateway's used", owner=owner, **error_fields(exc)
            )
    return default
