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
month named with its year (``2026-04-30``, "June 3, 2026", 2026年4月30日,
今年9月; :mod:`memory.timeref`), or without it in a deadline or a plan
("due in September", "计划在9月前", said in February: this September); a
year alone is no deadline. Nor is a day a state
starts on ("works at Acme starting 2026-03-01", 从2026年3月1日起, 2026年5月起),
nor an event leading to a state ("moves to Berlin on 2026-04-01", "joins
Acme", 搬到, 入职): what starts then is still true after it, unless the
entry also says when it ends ("from 2026-03-01 to 2026-03-10", 3月1日到3月10日).
Joining a call or a meeting, or one moved to another day ("join the call
at 3pm", 加入电话会议, 周会转到3月5日), is no such event: it passes.
When unsure (a move with a deadline word), the entry stays.
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
# An event that leads to a state: where the user lives, works, whom they
# are with is still true after the day (a trip or a demo is not). Matched
# anywhere in the entry: with a deadline word too ("has to move out by"),
# unsure, and an unsure entry stays.
_BECOMES = re.compile(r"\b(?:mov(?:e|es|ed|ing)\s+(?:to|into|in|out|back|house|abroad)|relocat\w*"
                      r"|start(?:s|ed|ing)?\s+(?:at|work\w*|a\s+new\s+job|as|school|university|college)"
                      r"|join(?:s|ed|ing)?|get(?:s|ting)?\s+married|marr(?:y|ies|ied|ying)|retir(?:e|es|ed|ing)"
                      r"|becom(?:e|es|ing)|emigrat\w*|transfer(?:s|red|ring)?\s+to|takes?\s+over)\b"
                      r"|搬到|搬去|搬家|迁居|移居|定居|入职|加入|调到|调往|转到|结婚|退休|上任|接任")
# ... unless what is joined is an appointment ("join the call at 3pm",
# 加入电话会议) or what is moved is its day ("the review moved to 2026-03-05",
# 周会转到3月5日): that is over after the day. Only these: any other object
# of "join" (a team, a company) or 转到 (a place) stays a state.
_APPOINTMENT = re.compile(
    r"join(?:s|ed|ing)?\s+(?:[\w'’-]+\s+){0,4}?(?:call|meeting|meetup|standup|stand-up|sync|webinar|demo|interview"
    r"|conference|workshop|kickoff|kick-off|retro|party|dinner|lunch|hike|trip)s?\b"
    r"(?!\s+(?:team|committee|board|group|company|club|staff|department|crew|org))"
    rf"|mov(?:e|es|ed|ing)\s+to\s+{_DAYISH}"
    r"|加入[^，。,.;；!！?？]{0,10}?(?:会议|例会|周会|晨会|通话|电话|视频会|直播|讨论|面试|聚会|聚餐|饭局)"
    r"|(?:转到|调到|改到)\s*(?:\d|下周|明天|后天|周[一二三四五六日天]|星期|上午|下午|晚上|今年|明年)"
)
# A deadline or a plan: a day named without its year is then the next such
# day ("due in September", said in February, is this September's). Without
# one, a yearless day may recur (a birthday, a habit of a month): kept.
_PLAN = re.compile(r"\b(?:due|deadline|ship(?:s|ping)?|launch(?:es|ing)?|release[sd]?|scheduled|planned|plans? to"
                   r"|expected|target(?:ed)?)\b"
                   r"|\b(?:by|before)\s+(?:the\s+)?(?:end\s+of\s+|early\s+|mid-?\s*|late\s+)?(?:\d|jan|feb|mar|apr|may|jun"
                   r"|jul|aug|sep|oct|nov|dec)"
                   r"|截止|到期|计划|打算|预计|要在|上线|发布|交付|[\d日号月底]\s*[之以]?前")


def _days(text: str, said: date, plan: bool = False) -> list[tuple[date, date]]:
    """(first, last) day of each day or month ``text`` names; of a
    ``plan``, a yearless one is the next (timeref's ``ahead``)."""
    out: list[tuple[date, date]] = []
    for m in _ISO_DAY.finditer(text):
        try:
            d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
        out.append((d, d))
    # As of the end of the day it was said: a yearless "March 3" is read as
    # the latest not after it, so only a date with its year (今年9月 names
    # it) can be ahead, unless the entry is a plan: then the next one. Said
    # on March 3 itself, "March 3" is that day either way (not ahead).
    now = datetime.combine(said, (datetime.min if plan else datetime.max).time(), UTC)
    for a, b in periods(normalize(_ISO_DAY.sub(" ", text)), now, ahead=plan):
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
    becomes = any(not _APPOINTMENT.match(low, m.start()) for m in _BECOMES.finditer(low))
    if (_STARTS.search(low) or becomes) and not _ENDS.search(low):
        return False  # a state from that day on: still true after it
    ahead = [last for first, last in _days(content, day, bool(_PLAN.search(low))) if first > day]
    return bool(ahead) and all(last + timedelta(days=PAST_GRACE_DAYS) < today for last in ahead)
