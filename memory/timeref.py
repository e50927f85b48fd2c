"""Time references in a message -> date ranges, so "what did I say last
week?", "in July 2023" or "上个月" can favour memories written then.

Pure rules, English and Chinese, relative to ``now`` (the engine's clock):

* explicit dates: ``October 13, 2023``, ``13 October 2023``, ``July 2023``,
  ``in July`` (the latest July not after ``now``), ``in 2023``,
  ``2023年7月13日``, ``7月13号``, ``7月``, ``2023年``;
* relative: yesterday, today, last night, last/this week, weekend, month,
  year, ``3 days ago``, ``two weeks ago``; 昨天, 前天, 今天, 上周, 这周, 上个月,
  本月, 去年, 今年, ``三天前``, ``两个月前``; one step further back
  (大前天, 上上周, 上上个月, 大前年); colloquial 昨儿, 前儿, 今儿.
* a day of a week: ``上周三`` (that Wednesday, not the week), ``这周二``,
  ``上上周五``, ``last Wednesday``, ``on Monday``, a bare ``周三`` (the
  latest before today: said on a Wednesday, "Wednesday" is not today);
  never in a habit or a count (每周三, 一周三次, 上周一起).
* vague spans, as the days they can mean rather than one guessed day:
  前几天 / a few days ago / the other day (yesterday back to 6 days ago),
  前两天 / a couple of days ago (back to 3), 这几天, 半个月前 (10-20 days
  ago), 半年前, 几个月前 / a few weeks ago; 最近几天 / the past few days as
  这几天; 刚才 / just now is the last three hours (at 00:30 they began
  yesterday).
* loose words, only with ``loose=True`` (the events of recall; said of
  anything, "最近怎么样"): 最近 / 近来 / 这阵子 / recently / lately / these
  days the last two weeks, 前阵子 / 前段时间 2 to 6 weeks ago; never 最近 as
  "nearest" (最近的医院, 离家最近).

Each reference becomes a half-open UTC range ``[start, end)``; with a
user's zone, days start at their midnight ("yesterday" at 04:00 in
Shanghai is their yesterday, not UTC's). Ambiguous
words need support: ``may`` and ``march`` count as months only next to a day
or a year or after ``in``/``early``/``late``…; a bare number is never a
date. The text is capped by the caller; every pattern is linear.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["Period", "periods"]

Period = tuple[datetime, datetime]

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_AMBIGUOUS = frozenset({"may", "march"})  # also verbs: need a day, a year or a preposition
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:19[7-9]\d|20\d\d)"

_EN_DAY_FIRST = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+({_YEAR})\b)?")
_EN_MONTH_FIRST = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD}\b(?!:)(?:,?\s+({_YEAR})\b)?")
_EN_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?({_YEAR})\b")
_EN_MONTH = re.compile(rf"\b(?:(in|during|since|early|late|mid|mid-|last|this|next|of)\s+)?({_MONTH})\b"
                       r"(?:,?\s+(this|last|next)\s+year\b)?")
_EN_YEAR = re.compile(rf"\b({_YEAR})\b")
_EN_AGO = re.compile(r"\b(\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|several|couple of"
                     r"|a couple of)\s+(day|week|fortnight|month|year)s?\s+ago\b")
_EN_WEEKDAY = re.compile(r"\b(?:(last|this|on|past|previous|next|every)\s+)?"
                         r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b(?!s\b)")
_EN_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EN_REL = re.compile(r"\b(?:(yesterday|today|tonight|last night|this morning)|(last|this|past|previous)\s+"
                     r"(week|weekend|month|year))\b")
_VAGUE = {"a few": (1, 6), "few": (1, 6), "several": (1, 6), "couple of": (1, 3), "a couple of": (1, 3)}
"""Units back (nearest, farthest) a vague count can mean: "a few days ago"
is yesterday back to six days ago, not exactly three days ago."""
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "a few": 3, "few": 3, "couple of": 2, "a couple of": 2}

_ZH_NUM = "零一二两三四五六七八九十"
# 今年9月 is this calendar year's September, said in February too; 大前年 is
# three years back, read before the 前年 inside it.
_ZH_DATE = re.compile(rf"(?:(\d{{4}})年|(大前|前|去|今|明|后)年)?([\d{_ZH_NUM}]{{1,3}})月(?:([\d{_ZH_NUM}]{{1,3}})[日号])?")
_ZH_YEAR_WORD = {"大前": -3, "前": -2, "去": -1, "今": 0, "明": 1, "后": 2}
_ZH_YEAR = re.compile(r"(\d{4})年")
_ZH_AGO = re.compile(rf"([\d{_ZH_NUM}几]{{1,3}})(天|周|个星期|个礼拜|星期|个月|年)(?:以)?前")
# 上周三: a day of a week. Not in a habit (每周三) or one to come (下周三),
# not before a measure word (一周三次, 上周三个人), and 一 not as the start
# of a word (上周一起, 这周一直); 周天 is left to 星期天/礼拜天 (一周天气).
_ZH_WEEKDAY = re.compile(
    r"(每|上上|上|这|本|下)?个?(?:(周)|星期|礼拜)([一二三四五六日天])"
    r"(?![次个遍趟回位名件条本只场顿杯块份天])(?<!一(?=[起直些样般定切共同边会整]))(?<!一(?=下(?!午)))"
)
_ZH_WEEKDAYS = {c: i for i, c in enumerate("一二三四五六日")} | {"天": 6}
_ZH_UNIT = {"天": "day", "周": "week", "个星期": "week", "个礼拜": "week", "星期": "week", "个月": "month"}
_ZH_REL: dict[str, tuple[str, int | None]] = {
    "前天": ("day", -2), "昨天": ("day", -1), "昨晚": ("day", -1), "昨日": ("day", -1),
    "今天": ("day", 0), "今早": ("day", 0), "今晚": ("day", 0), "今日": ("day", 0),
    "上周": ("week", -1), "上个星期": ("week", -1), "上星期": ("week", -1), "上个礼拜": ("week", -1),
    "上礼拜": ("week", -1), "这周": ("week", 0), "本周": ("week", 0), "这个星期": ("week", 0),
    "上周末": ("weekend", -1), "周末": ("weekend", None),
    "上个月": ("month", -1), "上月": ("month", -1), "这个月": ("month", 0), "本月": ("month", 0),
    "去年": ("year", -1), "前年": ("year", -2), "今年": ("year", 0),
    # One step further back: each holds the nearer word, which would match inside it.
    "大前天": ("day", -3), "上上周": ("week", -2), "上上个星期": ("week", -2), "上上星期": ("week", -2),
    "上上个礼拜": ("week", -2), "上上礼拜": ("week", -2), "上上个月": ("month", -2), "上上月": ("month", -2),
    "大前年": ("year", -3),
    # Colloquial (北方话): 昨儿 is 昨天.
    "昨儿": ("day", -1), "昨儿个": ("day", -1), "前儿": ("day", -2), "前儿个": ("day", -2),
    "今儿": ("day", 0), "今儿个": ("day", 0),
}  # fmt: skip
# Vague spans: (unit, nearest, farthest) units back; 这几天 reaches today (0).
_ZH_VAGUE: dict[str, tuple[str, int, int]] = {
    "前几天": ("day", 1, 6), "前些天": ("day", 1, 6), "前两天": ("day", 1, 3), "这几天": ("day", 0, 6),
    "这两天": ("day", 0, 2), "前些日子": ("day", 1, 14), "半个月前": ("day", 10, 20), "半月前": ("day", 10, 20),
    "半年前": ("month", 6, 6), "最近几天": ("day", 0, 6), "近几天": ("day", 0, 6), "这些天": ("day", 0, 6),
    # Loose (read only with ``loose=True``): the last two weeks; a while ago.
    "最近": ("day", 0, 13), "最近一段时间": ("day", 0, 13), "近来": ("day", 0, 13), "这阵子": ("day", 0, 13),
    "这一阵子": ("day", 0, 13), "这段时间": ("day", 0, 13), "这段日子": ("day", 0, 13),
    "前阵子": ("day", 14, 42), "前一阵子": ("day", 14, 42), "前一阵": ("day", 14, 42), "前段时间": ("day", 14, 42),
    "前一段时间": ("day", 14, 42),
}  # fmt: skip
_ZH_LOOSE = frozenset({"最近", "最近一段时间", "近来", "这阵子", "这一阵子", "这段时间", "这段日子", "前阵子",
                       "前一阵子", "前一阵", "前段时间", "前一段时间"})  # fmt: skip
"""Said of anything ("最近怎么样", how have you been): a period for the
events of recall only, never the dated term of fact ranking."""
_ZH_VAGUE_RE = re.compile("|".join(sorted(_ZH_VAGUE, key=len, reverse=True)))
# 最近 is also "nearest": 离家最近的, 最近的医院 are places, not times.
_NEAREST_AFTER = re.compile(r"[离距][^。，,.？?！!]{0,8}$")
_EN_LOOSE = re.compile(r"\b(?:recently|lately|of late|these days|(?:the\s+)?(past|last)\s+(?:few|couple of)\s+days)\b")
_JUST_NOW = re.compile(r"刚才|刚刚|\bjust now\b|\ba (?:moment|minute) ago\b|\bmoments ago\b")
_EN_DAY_BEFORE = re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b")
_EN_OTHER_DAY = re.compile(r"\bthe other day\b")
RECENT = timedelta(hours=3)
"""What 刚才 / "just now" reaches back to."""
_ZH_REL_RE = re.compile("|".join(sorted(_ZH_REL, key=len, reverse=True)))


def _zh_int(s: str) -> int | None:
    """``12``, ``十二``, ``二十``, ``两``, ``几`` (a few: 3) -> int."""
    if s.isdigit():
        return int(s)
    if s == "几":
        return 3
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
    if "十" in s:
        head, _, tail = s.partition("十")
        tens = digits.get(head, 1) if head else 1
        ones = digits.get(tail, 0) if tail else 0
        if (head and head not in digits) or (tail and tail not in digits):
            return None
        return tens * 10 + ones
    if len(s) == 1 and s in digits:
        return digits[s]
    return None


def _day(y: int, m: int, d: int) -> Period | None:
    if not (1 <= m <= 12 and 1 <= d <= monthrange(y, m)[1]):
        return None
    start = datetime(y, m, d, tzinfo=UTC)
    return start, start + timedelta(days=1)


def _month(y: int, m: int) -> Period | None:
    if not 1 <= m <= 12:
        return None
    start = datetime(y, m, 1, tzinfo=UTC)
    end = datetime(y + 1, 1, 1, tzinfo=UTC) if m == 12 else datetime(y, m + 1, 1, tzinfo=UTC)
    return start, end


def _year(y: int) -> Period:
    return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)


def _latest_year(now: datetime, m: int, d: int = 1) -> int:
    """The year of the latest month ``m`` (day ``d``) not after ``now``."""
    return now.year if (m, d) <= (now.month, now.day) else now.year - 1


def _next_year(now: datetime, m: int, d: int | None = None) -> int:
    """The year of the next month ``m`` (day ``d``) not before ``now``: a
    plan's "in September" said in February is this one (this month is this
    month's)."""
    return now.year if (m, d or now.day) >= (now.month, now.day) else now.year + 1


def _relative(now: datetime, unit: str, offset: int | None) -> Period | None:
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    if unit == "weekend":  # Saturday and Sunday of this week (0) or of an earlier one
        if offset is None:  # bare 周末: the latest weekend that has begun
            offset = 0 if today.weekday() >= 5 else -1
        start = today - timedelta(days=today.weekday()) + timedelta(weeks=offset, days=5)
        return start, start + timedelta(days=2)
    offset = offset or 0  # only 周末 leaves it open
    if unit == "day":
        start = today + timedelta(days=offset)
        return start, start + timedelta(days=1)
    if unit == "week":  # weeks start on Monday
        start = today - timedelta(days=today.weekday()) + timedelta(weeks=offset)
        return start, start + timedelta(weeks=1)
    if unit == "month":
        m = now.month + offset
        y = now.year + (m - 1) // 12
        return _month(y, (m - 1) % 12 + 1)
    if unit == "year":
        return _year(now.year + offset)
    return None


def _span(now: datetime, unit: str, near: int, far: int) -> Period | None:
    """From the start of the unit ``far`` back to the end of the one ``near`` back."""
    a, b = _relative(now, unit, -far), _relative(now, unit, -near)
    return (a[0], b[1]) if a is not None and b is not None else None


def _weekday(now: datetime, day: int, week: int | None) -> Period:
    """Day ``day`` (0 = Monday) of the week ``week`` back, or with None the
    latest such day before today."""
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    if week is None:
        start = today - timedelta(days=(today.weekday() - day - 1) % 7 + 1)
    else:
        start = today - timedelta(days=today.weekday() - day) + timedelta(weeks=week)
    return start, start + timedelta(days=1)


def _ago(now: datetime, n: int, unit: str) -> Period | None:
    """"3 days ago": that day; "2 weeks ago": that week; "2 months ago": that month."""
    if n <= 0 or n > 400:
        return None
    if unit == "day":
        return _relative(now, "day", -n)
    if unit == "week":
        return _relative(now, "week", -n)
    if unit == "month":
        return _relative(now, "month", -n)
    return _relative(now, "year", -n)


def periods(
    text: str, now: datetime, tz: tzinfo | None = None, *, loose: bool = False, ahead: bool = False
) -> list[Period]:
    """Date ranges the (normalised, lower-case) ``text`` refers to, in text
    order; calendar days of ``tz`` when given, else UTC's. ``loose``: read
    the words said of anything too (最近, 前阵子, "recently", "lately").
    ``ahead``: a day or month named without its year is the next one, not
    the latest (a plan said then: memory/pastplan.py); a question asks of
    the past, so recall reads the latest."""
    if tz is None:
        return _periods(text, now, loose, ahead)
    # The rules work on a wall clock: run them on the user's, then turn each
    # boundary (their local midnight) into the instant it is.
    wall = now.astimezone(tz).replace(tzinfo=UTC)
    return [(_instant(a, tz), _instant(b, tz)) for a, b in _periods(text, wall, loose, ahead)]


def _instant(wall: datetime, tz: tzinfo) -> datetime:
    return wall.replace(tzinfo=tz).astimezone(UTC)


def _nearest(text: str, m: re.Match[str]) -> bool:
    """最近 as "nearest": 最近的医院, 离家最近."""
    return text[m.end() : m.end() + 1] == "的" or bool(_NEAREST_AFTER.search(text, max(0, m.start() - 9), m.start()))


def _periods(text: str, now: datetime, loose: bool = False, ahead: bool = False) -> list[Period]:
    out: list[tuple[int, Period]] = []
    yearless = _next_year if ahead else _latest_year
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    def put(m: re.Match[str], p: Period | None) -> None:
        if p is not None and free(m.start(), m.end()):
            out.append((m.start(), p))
            taken.append((m.start(), m.end()))

    for m in _EN_DAY_FIRST.finditer(text):
        d, mon, y = int(m.group(1)), _MONTHS[m.group(2)], m.group(3)
        put(m, _day(int(y) if y else yearless(now, mon, d), mon, d))
    for m in _EN_MONTH_FIRST.finditer(text):
        mon, d, y = _MONTHS[m.group(1)], int(m.group(2)), m.group(3)
        put(m, _day(int(y) if y else yearless(now, mon, d), mon, d))
    for m in _EN_MONTH_YEAR.finditer(text):
        put(m, _month(int(m.group(2)), _MONTHS[m.group(1)]))
    for m in _EN_MONTH.finditer(text):
        prep, name = m.group(1), m.group(2)
        if name in _AMBIGUOUS and not prep:
            continue
        if len(name) <= 4 and name not in ("may", "june", "july") and not prep:
            continue  # "dec", "sep" alone are too often something else
        mon, year = _MONTHS[name], m.group(3)
        if year:  # "September this year", "in May last year"
            y = now.year + {"this": 0, "last": -1, "next": 1}[year]
        elif prep == "last":
            y = now.year - 1 if mon >= now.month else now.year
        elif prep == "this":
            y = now.year
        elif prep == "next":
            y = _next_year(now, mon) if mon != now.month else now.year + 1
        else:
            y = yearless(now, mon)
        put(m, _month(y, mon))
    for m in _EN_YEAR.finditer(text):
        put(m, _year(int(m.group(1))))
    for m in _JUST_NOW.finditer(text):
        put(m, (now - RECENT, now + timedelta(minutes=1)))
    for m in _EN_DAY_BEFORE.finditer(text):
        put(m, _relative(now, "day", -2))
    for m in _EN_OTHER_DAY.finditer(text):
        put(m, _span(now, "day", *_VAGUE["a few"]))
    for m in _EN_WEEKDAY.finditer(text):
        which = m.group(1)
        if which not in ("next", "every"):
            put(m, _weekday(now, _EN_WEEKDAYS.index(m.group(2)), 0 if which == "this" else None))
    for m in _EN_AGO.finditer(text):
        word, unit = m.group(1), m.group(2)
        if unit == "fortnight":
            put(m, _ago(now, 2 * (_EN_NUM.get(word) or int(word)) if word not in _VAGUE else 2, "week"))
        elif word in _VAGUE:
            put(m, _span(now, unit, *_VAGUE[word]))
        else:
            put(m, _ago(now, _EN_NUM.get(word) or int(word), unit))
    for m in _EN_REL.finditer(text):
        word, which, unit = m.group(1), m.group(2), m.group(3)
        if word:
            put(m, _relative(now, "day", -1 if word in ("yesterday", "last night") else 0))
        elif unit == "weekend":
            put(m, _relative(now, "weekend", -1 if which != "this" else 0))
        else:
            put(m, _relative(now, unit, 0 if which == "this" else -1))
    for m in _ZH_DATE.finditer(text):
        zh_mon = _zh_int(m.group(3))
        day = _zh_int(m.group(4)) if m.group(4) else None
        if zh_mon is None:
            continue
        if m.group(1):
            y = int(m.group(1))
        elif m.group(2):
            y = now.year + _ZH_YEAR_WORD[m.group(2)]
        else:
            y = _latest_year(now, zh_mon, day or 1) if not ahead else _next_year(now, zh_mon, day)
        put(m, _day(y, zh_mon, day) if day else _month(y, zh_mon))
    for m in _ZH_YEAR.finditer(text):
        put(m, _year(int(m.group(1))))
    for m in _ZH_WEEKDAY.finditer(text):
        head = m.group(1)
        if head in ("每", "下") or (m.group(2) and m.group(3) == "天"):
            continue
        put(m, _weekday(now, _ZH_WEEKDAYS[m.group(3)], {"上上": -2, "上": -1, "这": 0, "本": 0}.get(head or "")))
    for m in _ZH_VAGUE_RE.finditer(text):
        word = m.group(0)
        if word in _ZH_LOOSE and (not loose or word == "最近" and _nearest(text, m)):
            continue
        put(m, _span(now, *_ZH_VAGUE[word]))
    for m in _EN_LOOSE.finditer(text):
        if m.group(1) or loose:  # "the past few days" is days; "recently" is loose
            put(m, _span(now, "day", *((0, 6) if m.group(1) else (0, 13))))
    for m in _ZH_AGO.finditer(text):
        if m.group(1) == "几":  # 几天前: as vague as 前几天
            put(m, _span(now, _ZH_UNIT.get(m.group(2), "year"), *_VAGUE["a few"]))
            continue
        n = _zh_int(m.group(1))
        unit = _ZH_UNIT.get(m.group(2), "year")
        if n is not None:
            put(m, _ago(now, n, unit))
    for m in _ZH_REL_RE.finditer(text):
        put(m, _relative(now, *_ZH_REL[m.group(0)]))
    out.sort(key=lambda x: x[0])
    return [p for _, p in out]
