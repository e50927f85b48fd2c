"""Each user's own time zone.

One gateway serves people in several time zones, and ``gateway.timezone``
is the operator's: a user in Shanghai on a gateway set to UTC was told the
wrong date for eight hours a day, and "every day at 9" ran at 17:00 for
them. ``/timezone`` sets theirs (gateway/commands.py); it is then used for
the prompt's current date and for the schedules they make (gateway/cron.py
keeps each job's zone). Kept in ``gateway.db`` (table ``user_timezones``),
erased with the rest of a user's data.

:func:`parse_timezone` accepts what people type: an IANA name in any case
("asia/shanghai"), a UTC offset ("UTC+8", "GMT-05:30", "+0800"), a city of
the IANA database ("Shanghai", "new york"), a few common Chinese city
names ("北京"), a Chinese zone ("东八区", "北京时间") or a summer-time
abbreviation that names one zone ("PST", "EST").
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from collections.abc import Collection
from contextlib import closing
from pathlib import Path
from datetime import datetime, timedelta, timezone, tzinfo
from functools import cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import structlog

from memory.clock import ZoneUnread, format_ts
from memory.errorlog import error_fields
from memory.lru import LRU

if TYPE_CHECKING:
    from memory.db import Database

log = structlog.get_logger(component="gateway")

__all__ = ["TimezoneError", "UserTimezones", "parse_timezone", "read_zones", "zone_name"]

USERS_KEPT = 4096  # users whose zone is cached (the prompt asks once per message)

_OFFSET = re.compile(r"^(?:utc|gmt|z)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)
_CITIES_ZH = {
    "北京": "Asia/Shanghai", "上海": "Asia/Shanghai", "深圳": "Asia/Shanghai", "广州": "Asia/Shanghai",
    "杭州": "Asia/Shanghai", "成都": "Asia/Shanghai", "中国": "Asia/Shanghai", "香港": "Asia/Hong_Kong",
    "澳门": "Asia/Macau", "台北": "Asia/Taipei", "东京": "Asia/Tokyo", "首尔": "Asia/Seoul",
    "新加坡": "Asia/Singapore", "伦敦": "Europe/London", "巴黎": "Europe/Paris", "柏林": "Europe/Berlin",
    "纽约": "America/New_York", "洛杉矶": "America/Los_Angeles", "旧金山": "America/Los_Angeles",
    "西雅图": "America/Los_Angeles", "多伦多": "America/Toronto", "温哥华": "America/Vancouver",
    "悉尼": "Australia/Sydney", "墨尔本": "Australia/Melbourne", "北京时间": "Asia/Shanghai",
}
# "东八区" (the East Eighth zone) is how Chinese speakers name UTC+8; 西 is west.
_ZONE_ZH = re.compile(r"^(东|西)([一二三四五六七八九十]{1,3}|\d{1,2})区$")
_DIGITS_ZH = {c: i for i, c in enumerate("零一二三四五六七八九十")}
# Names people use that the database spells otherwise. The summer-time
# abbreviations name their zone: tzdata's own "EST" is UTC-5 all year, an
# hour off for New York in summer. CST, IST and BST each name two zones
# hours apart (_AMBIGUOUS): the user is asked which.
_ALIASES = {"beijing": "Asia/Shanghai", "china": "Asia/Shanghai", "san francisco": "America/Los_Angeles",
            "seattle": "America/Los_Angeles", "washington": "America/New_York", "boston": "America/New_York",
            "utc": "UTC", "gmt": "UTC", "z": "UTC", "零时区": "UTC", "中时区": "UTC",
            "pst": "America/Los_Angeles", "pdt": "America/Los_Angeles", "est": "America/New_York",
            "edt": "America/New_York", "cest": "CET",
            "jst": "Asia/Tokyo", "kst": "Asia/Seoul", "hkt": "Asia/Hong_Kong", "sgt": "Asia/Singapore",
            "aest": "Australia/Sydney", "aedt": "Australia/Sydney"}


Choice = tuple[str, str, str]  # zone, what it is in English, in Chinese
_AMBIGUOUS: dict[str, tuple[Choice, ...]] = {
    "cst": (("Asia/Shanghai", "China", "中国"), ("America/Chicago", "US Central", "美国中部")),
    "ist": (("Asia/Kolkata", "India", "印度"), ("Europe/Dublin", "Ireland", "爱尔兰")),
    "bst": (("Europe/London", "British summer", "英国"), ("Asia/Dhaka", "Bangladesh", "孟加拉国")),
}


def _zone_zh(s: str) -> str | None:
    """"东八区" -> "+8", "西十二区" -> "-12"; None when it is not that form."""
    m = _ZONE_ZH.match(s)
    if m is None:
        return None
    n = m.group(2)
    if n.isdigit():
        hours = int(n)
    elif n == "十":
        hours = 10
    elif n.startswith("十") and len(n) == 2:  # 十一 .. 十九
        hours = 10 + _DIGITS_ZH[n[1]]
    elif len(n) == 1:
        hours = _DIGITS_ZH[n]
    else:
        return None
    return ("+" if m.group(1) == "东" else "-") + str(hours)


class TimezoneError(ValueError):
    """Not a time zone this gateway knows; the message says what is accepted.
    ``nearest``: a known zone the text is a near miss of ("Asia/Shangai"),
    for a "did you mean"; ``choices``: the zones an ambiguous abbreviation
    ("CST") may mean, to ask which."""

    def __init__(self, message: str, *, nearest: str | None = None, choices: tuple[Choice, ...] = ()) -> None:
        super().__init__(message)
        self.nearest = nearest
        self.choices = choices


def _nearest(key: str) -> str | None:
    """The zone whose name or city ``key`` (lower case) is a typo of, if one
    is close enough to be worth offering; 0.8 keeps "mars/olympus" unmatched."""
    close = difflib.get_close_matches(key, list(_index()), n=1, cutoff=0.8)
    return _index()[close[0]] if close else None


@cache
def _names() -> frozenset[str]:
    return frozenset(available_timezones())


@cache
def _index() -> dict[str, str]:
    """Lower-case IANA name and city (last part, spaces for underscores) -> name."""
    out: dict[str, str] = {}
    for name in sorted(_names()):
        if name.startswith(("Etc/", "SystemV/", "posix/", "right/")) or "/" not in name:
            continue
        out.setdefault(name.lower(), name)
        out.setdefault(name.rsplit("/", 1)[1].replace("_", " ").lower(), name)
    return out


def parse_timezone(text: str) -> tzinfo:
    """The zone ``text`` names; :class:`TimezoneError` otherwise."""
    s = " ".join(text.strip().split())
    if not s:
        raise TimezoneError("name a time zone")
    if s in _CITIES_ZH:
        return ZoneInfo(_CITIES_ZH[s])
    m = _OFFSET.match(_zone_zh(s) or s.replace(" ", ""))
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        limit = 14 if m.group(1) == "+" else 12  # no place on Earth is further from UTC
        if hours > limit or minutes >= 60 or (hours == limit and minutes):
            raise TimezoneError(f"{s!r} is not a UTC offset (from -12:00 to +14:00)")
        delta = timedelta(hours=hours, minutes=minutes) * (1 if m.group(1) == "+" else -1)
        return timezone(delta) if delta else ZoneInfo("UTC")
    key = s.lower().replace("_", " ")
    if key in _AMBIGUOUS:
        choices = _AMBIGUOUS[key]
        raise TimezoneError(f"{s!r} names more than one time zone: " + " or ".join(c[0] for c in choices),
                            choices=choices)
    name = _ALIASES.get(key) or _index().get(s.lower()) or _index().get(key)
    if name is None and s in _names():
        name = s  # exact names the index leaves out ("EST5EDT")
    if name is None:
        shown = s if len(s) <= 40 else s[:40] + "…"
        nearest = _nearest(key) if len(key) <= 40 else None
        raise TimezoneError(
            f"unknown time zone {shown!r}: give a name like Asia/Shanghai or Europe/Berlin, "
            "a city like Shanghai, or an offset like UTC+8" + (f" (did you mean {nearest}?)" if nearest else ""),
            nearest=nearest,
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimezoneError(f"time zone {name!r} is missing from this system's time zone data") from None


def zone_name(tz: tzinfo) -> str:
    """How a zone is stored and shown: its IANA key, or "UTC+05:30"."""
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    off = tz.utcoffset(None) or timedelta(0)
    if not off:
        return "UTC"
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


class UserTimezones:
    """``user_timezones`` in gateway.db, read through a small cache (the
    prompt asks once per message)."""

    def __init__(self, db: Database, *, users_kept: int = USERS_KEPT) -> None:
        self.db = db
        # The most recent users' zones; one forgotten is read again.
        self._cache: LRU[str, tzinfo | None] = LRU(users_kept)
        self._trouble: tuple[object, ...] | None = None  # the read failure last logged; None: reads work

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-user cache, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"cache": self._cache.view()}

    async def get(self, owner: str) -> tzinfo | None:
        """The user's zone, or None when they set none. Raises
        :class:`~memory.clock.ZoneUnread` when gateway.db cannot be read,
        said in the log once for each new trouble (not once a message)."""
        if owner in self._cache:
            return self._cache[owner]
        try:
            row = await self.db.fetchone("SELECT timezone FROM user_timezones WHERE owner = ?", (owner,))
        except Exception as exc:
            self._unread(exc)
            raise ZoneUnread("user time zones not read") from exc
        if self._trouble is not None:
            self._trouble = None
            log.info("user time zones read again", path=str(self.db.path))
        tz: tzinfo | None = None
        if row is not None:
            try:
                tz = parse_timezone(str(row[0]))
            except TimezoneError:
                tz = None  # a zone this system's tzdata no longer has: the gateway's
        self._cache[owner] = tz
        return tz

    def _unread(self, exc: Exception) -> None:
        fields = error_fields(exc)
        trouble = (fields["error"], fields.get("sqlite_error"), fields.get("errno"))
        if trouble != self._trouble:
            self._trouble = trouble
            log.warning("user time zones not read; the gateway's zone is used until they are", path=str(self.db.path),
                        **fields)

    async def set(self, owner: str, tz: tzinfo, *, at: datetime) -> None:
        await self.db.write(
            "INSERT INTO user_timezones(owner, timezone, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(owner) DO UPDATE SET timezone = excluded.timezone, updated_at = excluded.updated_at",
            (owner, zone_name(tz), format_ts(at)),
        )
        self._cache[owner] = tz

    async def since(self, owner: str) -> str:
        """When ``owner`` set their zone ("" when they set none)."""
        row = await self.db.fetchone("SELECT updated_at FROM user_timezones WHERE owner = ?", (owner,))
        return str(row[0]) if row is not None else ""

    async def clear(self, owner: str) -> bool:
        """Back to the gateway's zone; True when one was set."""
        _, n = await self.db.write("DELETE FROM user_timezones WHERE owner = ?", (owner,))
        self._cache.pop(owner, None)
        return n > 0

    async def forget_owner(self, owner: str) -> int:
        return int(await self.clear(owner))

    async def owners(self) -> list[str]:
        """Who set a zone (the whole store's export names them)."""
        return [str(r[0]) for r in await self.db.fetchall("SELECT owner FROM user_timezones ORDER BY owner")]

    async def move_owner(self, old: str, new: str) -> int:
        """merge-identities: ``old``'s zone becomes ``new``'s unless ``new`` has one."""
        _, moved = await self.db.write(
            "UPDATE user_timezones SET owner = ? WHERE owner = ? "
            "AND NOT EXISTS (SELECT 1 FROM user_timezones WHERE owner = ?)",
            (new, old, new),
        )
        await self.db.write("DELETE FROM user_timezones WHERE owner = ?", (old,))
        self._cache.pop(old, None)
        self._cache.pop(new, None)
        return moved


def read_zones(path: Path) -> dict[str, tzinfo]:
    """Every user's /timezone in the gateway.db at ``path``, for a command
    that opens memory.db alone (``myclaw memory search``): read only, as
    :func:`gateway.chattitles.read_titles` reads. {} when there is no such
    file or it predates the table; a zone this system cannot read is left
    out (the gateway's applies, as :meth:`UserTimezones.get` does). Raises
    ``sqlite3.DatabaseError`` for a file that is not a database."""
    from .chattitles import open_read_only

    if not path.is_file():
        return {}
    with closing(open_read_only(path)) as conn:
        try:
            rows = conn.execute("SELECT owner, timezone FROM user_timezones").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
    out: dict[str, tzinfo] = {}
    for owner, name in rows:
        try:
            out[str(owner)] = parse_timezone(str(name))
        except TimezoneError:
            continue
    return out
