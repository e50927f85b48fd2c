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
