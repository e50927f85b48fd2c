from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.timeref import periods
from memory.tokenize import normalize

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)  # a Friday


def days(text: str) -> list[tuple[str, str]]:
    return [(a.date().isoformat(), b.date().isoformat()) for a, b in periods(normalize(text), NOW)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("What painting did Melanie show on October 13, 2023?", [("2023-10-13", "2023-10-14")]),
        ("what did John name on 3 June, 2023", [("2023-06-03", "2023-06-04")]),
        ("When did Melanie go camping in July?", [("2023-07-01", "2023-08-01")]),
        ("in December 2023", [("2023-12-01", "2024-01-01")]),
        ("in november", [("2022-11-01", "2022-12-01")]),  # the latest November not after now
        ("How many times in 2023?", [("2023-01-01", "2024-01-01")]),
        ("what did I say yesterday", [("2023-10-19", "2023-10-20")]),
        ("what did i say last week", [("2023-10-09", "2023-10-16")]),
        ("last weekend", [("2023-10-14", "2023-10-16")]),
        ("two weeks ago", [("2023-10-02", "2023-10-09")]),
        ("我上个月说的那家店", [("2023-09-01", "2023-10-01")]),
        ("2023年7月13日", [("2023-07-13", "2023-07-14")]),
        ("7月3号去了哪", [("2023-07-03", "2023-07-04")]),
        ("三天前", [("2023-10-17", "2023-10-18")]),
        ("去年的体检", [("2022-01-01", "2023-01-01")]),
    ],
)
def test_time_references(text: str, want: list[tuple[str, str]]) -> None:
    assert days(text) == want


@pytest.mark.parametrize(
    "text",
    ["What may I bring?", "they march on", "I have 3 cats", "meet at 10:30", "sept", "上次聊的", "每月一次", ""],
)
def test_no_time_reference(text: str) -> None:
    assert days(text) == []


def test_days_are_the_users_own_in_their_zone() -> None:
    """At 04:00 Saturday in Shanghai (20:00 Friday UTC), "yesterday" is their
    Friday: from their midnight, 16:00 UTC the day before."""
    from zoneinfo import ZoneInfo

    now = datetime(2023, 10, 20, 20, 0, tzinfo=UTC)
    shanghai = ZoneInfo("Asia/Shanghai")
    [(a, b)] = periods(normalize("what did I say yesterday"), now, shanghai)
    assert (a, b) == (datetime(2023, 10, 19, 16, 0, tzinfo=UTC), datetime(2023, 10, 20, 16, 0, tzinfo=UTC))
    [(a, b)] = periods(normalize("what did I say yesterday"), now)  # UTC's: Thursday
    assert (a, b) == (datetime(2023, 10, 19, tzinfo=UTC), datetime(2023, 10, 20, tzinfo=UTC))
    # Across a DST change the day is 25 hours long, as it is there.
    berlin = ZoneInfo("Europe/Berlin")
    [(a, b)] = periods(normalize("昨天"), datetime(2023, 10, 30, 12, 0, tzinfo=UTC), berlin)
    assert (a, b) == (datetime(2023, 10, 28, 22, 0, tzinfo=UTC), datetime(2023, 10, 29, 23, 0, tzinfo=UTC))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("上上周说的那个方案", [("2023-10-02", "2023-10-09")]),  # not 上周 read inside it
        ("上上个星期", [("2023-10-02", "2023-10-09")]),
        ("上上星期", [("2023-10-02", "2023-10-09")]),
        ("上上个月的体检", [("2023-08-01", "2023-09-01")]),
        ("大前天聊了什么", [("2023-10-17", "2023-10-18")]),  # not 前天 read inside it
        ("大前年", [("2020-01-01", "2021-01-01")]),
    ],
)
def test_a_chinese_reference_one_step_further_back_is_not_read_as_the_nearer_one(
    text: str, want: list[tuple[str, str]]
) -> None:
    """"上上周" is the week before last and "大前天" three days ago: each
    holds the nearer word (上周, 前天), which matched inside it, and recall
    favoured the wrong week or day."""
    assert days(text) == want


def spans(text: str, now: datetime = NOW) -> list[tuple[str, str]]:
    return [(a.isoformat(), b.isoformat()) for a, b in periods(normalize(text), now)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # Colloquial days: 昨儿 is 昨天, 前儿 前天, 今儿 今天.
        ("昨儿跟你说的那家店", [("2023-10-19", "2023-10-20")]),
        ("昨儿个", [("2023-10-19", "2023-10-20")]),
        ("前儿说的", [("2023-10-18", "2023-10-19")]),
        ("今儿", [("2023-10-20", "2023-10-21")]),
        # A day of last week is that day, not the whole week (Friday 2023-10-20 now).
        ("上周三我说了什么", [("2023-10-11", "2023-10-12")]),
        ("上星期五", [("2023-10-13", "2023-10-14")]),
        ("上个星期五", [("2023-10-13", "2023-10-14")]),
        ("上礼拜一", [("2023-10-09", "2023-10-10")]),
        ("上周日", [("2023-10-15", "2023-10-16")]),
        ("上星期天", [("2023-10-15", "2023-10-16")]),
        ("上上周二", [("2023-10-03", "2023-10-04")]),
        ("这周二", [("2023-10-17", "2023-10-18")]),
        ("周三说的那个", [("2023-10-18", "2023-10-19")]),  # the latest Wednesday before today
        ("星期五", [("2023-10-13", "2023-10-14")]),  # said on a Friday: last Friday (today is 今天)
        ("上周三下午", [("2023-10-11", "2023-10-12")]),
        # ... but "last week, together" / "all week" / "three times last week" are the week.
        ("上周一起吃的饭", [("2023-10-09", "2023-10-16")]),
        ("这周一直很忙", [("2023-10-16", "2023-10-23")]),
        ("上周三次去健身房", [("2023-10-09", "2023-10-16")]),
        # Vague spans: the days they can mean, not one guessed day.
        ("前几天说的", [("2023-10-14", "2023-10-20")]),
        ("几天前", [("2023-10-14", "2023-10-20")]),
        ("前两天", [("2023-10-17", "2023-10-20")]),
        ("这几天", [("2023-10-14", "2023-10-21")]),
        ("半个月前", [("2023-09-30", "2023-10-11")]),  # 10 to 20 days ago
        ("半月前", [("2023-09-30", "2023-10-11")]),
        ("半年前", [("2023-04-01", "2023-05-01")]),
        ("几个月前", [("2023-04-01", "2023-10-01")]),
        # English.
        ("last wednesday", [("2023-10-18", "2023-10-19")]),  # the latest Wednesday before today
        ("what did i say on monday?", [("2023-10-16", "2023-10-17")]),
        ("last friday", [("2023-10-13", "2023-10-14")]),
        ("this tuesday", [("2023-10-17", "2023-10-18")]),
        ("the day before yesterday", [("2023-10-18", "2023-10-19")]),
        ("a couple of days ago", [("2023-10-17", "2023-10-20")]),
        ("a few days ago", [("2023-10-14", "2023-10-20")]),
        ("the other day", [("2023-10-14", "2023-10-20")]),
        ("a few weeks ago", [("2023-09-04", "2023-10-16")]),
        ("a fortnight ago", [("2023-10-02", "2023-10-09")]),
        ("two days ago", [("2023-10-18", "2023-10-19")]),  # a number stays exact
    ],
)
def test_colloquial_days_weekdays_and_vague_spans(text: str, want: list[tuple[str, str]]) -> None:
    """A three-month walk as a Chinese user: 前几天, 半个月前, 昨儿 found
    nothing, and 上周三 favoured all of last week."""
    assert days(text) == want


def test_just_now_is_the_last_hours_not_yesterday_at_half_past_midnight() -> None:
    """刚才 at 00:30 means the last hours, which began yesterday."""
    now = datetime(2023, 10, 20, 0, 30, tzinfo=UTC)
    for text in ("刚才说的那个", "刚刚", "just now", "a moment ago"):
        assert spans(text, now) == [("2023-10-19T21:30:00+00:00", "2023-10-20T00:31:00+00:00")], text


def test_a_weekday_is_the_users_own_in_their_zone() -> None:
    """Monday 01:00 in Shanghai is Sunday 17:00 UTC: their 上周三 is the
    Wednesday of the week before their Monday, from their midnight."""
    from zoneinfo import ZoneInfo

    now = datetime(2023, 10, 22, 17, 0, tzinfo=UTC)
    [(a, b)] = periods(normalize("上周三"), now, ZoneInfo("Asia/Shanghai"))
    assert (a, b) == (datetime(2023, 10, 17, 16, 0, tzinfo=UTC), datetime(2023, 10, 18, 16, 0, tzinfo=UTC))


@pytest.mark.parametrize("text", ["每周三开会", "一周三次", "两周一次", "周末愉快", "a few", "few days"])
def test_no_weekday_in_a_habit_or_a_count(text: str) -> None:
    assert days(text) in ([], [("2023-10-14", "2023-10-16")])  # 周末 is the weekend, never a weekday


def loose_days(text: str) -> list[tuple[str, str]]:
    return [(a.date().isoformat(), b.date().isoformat()) for a, b in periods(normalize(text), NOW, loose=True)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # The last few days: as 这几天 (session 31), today and the six before.
        ("最近几天我们聊了什么", [("2023-10-14", "2023-10-21")]),
        ("近几天", [("2023-10-14", "2023-10-21")]),
        ("这些天", [("2023-10-14", "2023-10-21")]),
        ("what did we talk about the past few days?", [("2023-10-14", "2023-10-21")]),
        ("the last few days", [("2023-10-14", "2023-10-21")]),
    ],
)
def test_the_last_few_days_are_a_period(text: str, want: list[tuple[str, str]]) -> None:
    assert days(text) == want
    assert loose_days(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # Recently: the last two weeks, today included.
        ("最近我们聊了什么？", [("2023-10-07", "2023-10-21")]),
        ("最近怎么样", [("2023-10-07", "2023-10-21")]),
        ("近来", [("2023-10-07", "2023-10-21")]),
        ("这阵子", [("2023-10-07", "2023-10-21")]),
        ("这段时间", [("2023-10-07", "2023-10-21")]),
        ("what have we talked about recently?", [("2023-10-07", "2023-10-21")]),
        ("i've been tired lately", [("2023-10-07", "2023-10-21")]),
        ("these days", [("2023-10-07", "2023-10-21")]),
        # A while ago: two to six weeks back.
        ("前阵子说的那个", [("2023-09-08", "2023-10-07")]),
        ("前段时间", [("2023-09-08", "2023-10-07")]),
        ("前一阵子", [("2023-09-08", "2023-10-07")]),
    ],
)
def test_loose_words_are_read_only_when_asked(text: str, want: list[tuple[str, str]]) -> None:
    """"Recently" is said of anything ("最近怎么样", "tired lately"): a
    period only where the caller asks for loose words (the events of
    recall), never the dated term of fact ranking."""
    assert loose_days(text) == want
    assert days(text) == []


@pytest.mark.parametrize("text", ["离我最近的地铁站", "最近的医院在哪", "the closest one, not the most recent"])
def test_nearest_is_not_recently(text: str) -> None:
    assert loose_days(text) == []


FEB = datetime(2026, 2, 10, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # 今年 is the calendar year of the day said: 9月 of it is ahead in February.
        ("今年9月我们要做什么？", [("2026-09-01", "2026-10-01")]),
        ("今年九月十五号", [("2026-09-15", "2026-09-16")]),
        ("去年9月的体检", [("2025-09-01", "2025-10-01")]),
        ("明年3月", [("2027-03-01", "2027-04-01")]),
        ("前年5月", [("2024-05-01", "2024-06-01")]),
        ("9月", [("2025-09-01", "2025-10-01")]),  # alone: the latest September, as before
        ("in September this year", [("2026-09-01", "2026-10-01")]),
        ("September next year", [("2027-09-01", "2027-10-01")]),
        ("in September last year", [("2025-09-01", "2025-10-01")]),
        ("this September", [("2026-09-01", "2026-10-01")]),
        ("next September", [("2026-09-01", "2026-10-01")]),
        ("大前年5月", [("2023-05-01", "2023-06-01")]),
        ("in September", [("2025-09-01", "2025-10-01")]),  # a question about the past: the latest
    ],
)
def test_a_month_of_a_named_year_is_that_years(text: str, want: list[tuple[str, str]]) -> None:
    got = [(a.date().isoformat(), b.date().isoformat()) for a, b in periods(normalize(text), FEB)]
    assert got == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Atlas ships in September", [("2026-09-01", "2026-10-01")]),
        ("Atlas 9月上线", [("2026-09-01", "2026-10-01")]),
        ("due on March 3", [("2026-03-03", "2026-03-04")]),
        ("due on February 3", [("2027-02-03", "2027-02-04")]),
        ("Atlas ships in February", [("2026-02-01", "2026-03-01")]),  # this month: this one
        ("in September 2025", [("2025-09-01", "2025-10-01")]),  # a year named: that one
    ],
)
def test_ahead_reads_a_yearless_day_or_month_as_the_next(text: str, want: list[tuple[str, str]]) -> None:
    got = [(a.date().isoformat(), b.date().isoformat()) for a, b in periods(normalize(text), FEB, ahead=True)]
    assert got == want
