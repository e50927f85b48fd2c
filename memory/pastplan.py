"""A Core Memory entry about a day that has passed: "Atlas is due to ship by
2026-04-30", said in February, is a plan, and in December no longer a
standing fact about the user. The weekly refresh asks the model to drop
such entries, but a model keeps what no newer fact contradicts (and none
may come: the project shipped, nobody said "the deadline is gone").

Such an entry is left out of the prompt's Core Memory, not rewritten:
turning "is due" into "was due" needs the language of the entry (Chinese
or English, any wording), which only a model has; a marker would spend the
block's budget on it in every message. It stays in Tier 1 (the memory page,
export, the next refresh) and recall finds it again, as the block no
longer shows it: "when was Atlas due?" is answered.

A date counts only when it was ahead of the day the entry was said: a
birthday, a move or a shipped date are behind it and stay. A day or a
month named with its year (``2026-04-30``, "June 3, 2026", 2026年4月30日;
:mod:`memory.timeref`); a year alone is no deadline. Nor is a day a state
starts on ("works at Acme starting 2026-03-01", 从2026年3月1日起, 2026年5月起):
what starts then is still true after it, unless the entry also says when
it ends ("from 2026-03-01 to 2026-03-10", 3月1日到3月10日).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from .timeref import periods
from .tokenize import normalize

__all__ = ["PAST_GRACE_DAYS", "passed"]

PAST_GRACE_DAYS = 30
"""Days after the named day during which the entry stays: a deadline just
missed is still what the user works against ("we're two weeks late")."""

_ISO_DAY = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_DAYISH = r"(?:\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d)"
# A start word just before a day (English), or 从/自 before and 起/开始 after one (Chinese).
_STARTS = re.compile(rf"\b(?:since|from|starting|beginning|as of|effective)\s+(?:on\s+|in\s+|from\s+)?{_DAYISH}"
                     r"|[从自]\s*\d|[\d日号月]\s*(?:起|开始|以来|以后|之后)")
_ENDS = re.compile(rf"[\d日号月]\s*(?:to|until|till|through|到|至|~|–)\s*{_DAYISH}")
_LONGEST = timedelta(days=31)  # a day or a month; a year names no day that passes


def _days(text: str, said: date) -> list[tuple[date, date]]:
    """(first, last) day of each day or month ``text`` names."""
    out: list[tuple[date, date]] = []
    for m in _ISO_DAY.finditer(text):
        try:
            d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
        out.append((d, d))
    # As of the end of the day it was said: a yearless "March 3" is read as
    # the latest not after it, so only a date with its year can be ahead.
    now = datetime.combine(said, datetime.max.time(), UTC)
    for a, b in periods(normalize(_ISO_DAY.sub(" ", text)), now):
        if b - a <= _LONGEST:
            out.append((a.date(), (b - timedelta(microseconds=1)).date()))
    return out


def passed(content: str, said: str, today: date) -> bool:
    """Whether ``content``, said on ``said`` (``YYYY-MM-DD``, or ``A to B``
    as a Core Memory line dates it: the last day counts), names days that
    were ahead then and all ended more than :data:`PAST_GRACE_DAYS` before
    ``today``."""
    try:
        day = date.fromisoformat(said[-10:])
    except ValueError:
        return False
    low = content.casefold()
    if _STARTS.search(low) and not _ENDS.search(low):
        return False  # a state from that day on: still true after it
    ahead = [last for first, last in _days(content, day) if first > day]
    return bool(ahead) and all(last + timedelta(days=PAST_GRACE_DAYS) < today for last in ahead)
