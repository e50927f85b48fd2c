"""A Core Memory entry about a day that was ahead when it was said (a
deadline, a trip) leaves the prompt once that day is well past, without
the model; recall still finds it ("when was Atlas due?"). The year's walk
had "Atlas is due to ship by 2026-04-30" in every prompt for eight months."""

from __future__ import annotations

from datetime import date, timedelta

from memory import Category, ManualClock, MemoryEngine, NewMemory
from memory.pastplan import PAST_GRACE_DAYS, passed
from memory.service import SqliteMemory


def test_a_day_ahead_when_said_is_passed_a_grace_after_it() -> None:
    due = "Atlas is due to ship by 2026-04-30"
    assert not passed(due, "2026-02-14", date(2026, 4, 30))
    assert not passed(due, "2026-02-14", date(2026, 4, 30) + timedelta(days=PAST_GRACE_DAYS))
    assert passed(due, "2026-02-14", date(2026, 4, 30) + timedelta(days=PAST_GRACE_DAYS + 1))
    assert passed("Atlas 要在2026年4月30日前上线", "2026-02-14", date(2026, 6, 1))
    assert passed("Alice flies to Tokyo on June 3, 2026", "2026-05-01", date(2026, 8, 1))
    assert passed("Atlas is due to ship by 2026-04-30", "2026-01-10 to 2026-02-14", date(2026, 6, 1))


def test_a_day_behind_when_said_no_date_or_a_year_alone_is_never_passed() -> None:
    today = date(2027, 1, 1)
    assert not passed("Alice was born on 1990-05-03", "2026-01-05", today)
    assert not passed("Atlas shipped on 2026-05-01 and is finished", "2026-05-04", today)
    assert not passed("Borealis was cancelled in 2026-09, no longer an active project", "2026-09-09", today)
    assert not passed("Alice lives in Munich", "2026-06-10", today)
    assert not passed("Alice plans to learn Rust in 2026", "2025-12-01", today)  # a year: no day to be past
    assert not passed("The release moved from 2026-04-30 to 2027-03-01", "2026-04-01", today)  # one still ahead
    assert not passed("Atlas is due by 2026-04-31", "2026-02-14", today)  # no such day
    assert not passed("Atlas is due to ship by 2026-04-30", "", today)


async def test_a_passed_deadline_leaves_core_memory_and_is_still_recalled(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    clock.set("2026-02-14T18:00:00Z")
    fact = await engine.add(NewMemory(owner="alice", content="Atlas is due to ship by 2026-04-30",
                                      category=Category.DECISION, importance=0.8, project="atlas"))
    entry = await engine.add(NewMemory(owner="alice", tier=1, content="Atlas is due to ship by 2026-04-30",
                                       category=Category.DECISION, importance=0.8, project="atlas"))
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice was born on 1990-05-03",
                               category=Category.IDENTITY, importance=1.0))
    clock.set("2026-05-10T12:00:00Z")  # ten days late: the deadline still matters
    memory = SqliteMemory(engine)
    assert "due to ship" in await memory.profile("alice")
    clock.set("2026-06-10T12:00:00Z")  # nothing written since: the cached block notices the day
    core = await memory.profile("alice")
    assert "due to ship" not in core and "born on 1990-05-03" in core, core
    hits = await memory.recall("alice", "When was Atlas due to ship?")
    # Once, as the fact it was drawn from (dated the day it was said), not again as the entry.
    assert [h.id for h in hits if "due to ship" in h.content] == [fact.id], hits


def test_a_state_that_starts_on_a_day_ahead_is_no_plan_that_passes() -> None:
    # Who the user works for, or what they use, from a day ahead on: still
    # true once the day is past, so the entry stays in Core Memory.
    today = date(2026, 12, 1)
    for entry in ("Alice works at Acme starting 2026-03-01", "Alice will work at Acme from March 1, 2026",
                  "Since 2026-03-01 Alice leads the Atlas team", "Alice is the Atlas lead as of 2026-03-01",
                  "用户从2026年3月1日起在Acme工作", "用户2026年3月1日开始在Acme上班", "用户2026年5月起改用Rust"):
        assert not passed(entry, "2026-02-10", today), entry
    # A span that ends, or a day with no start word, still passes.
    for entry in ("Alice is away from 2026-03-01 to 2026-03-10", "Alice is on parental leave until 2026-06-30",
                  "用户2026年3月1日到3月10日出差", "Atlas 要在2026年4月30日前上线", "Alice starts the Atlas demo prep; "
                  "the demo is on 2026-03-05"):
        assert passed(entry, "2026-02-10", today), entry


def test_a_month_of_this_year_said_in_february_is_ahead() -> None:
    # 今年9月 is this calendar year's September: a plan, passed in November.
    for entry in ("Atlas 今年9月上线", "用户今年9月去日本旅行", "Atlas ships in September this year"):
        assert not passed(entry, "2026-02-10", date(2026, 10, 30)), entry
        assert passed(entry, "2026-02-10", date(2026, 11, 1)), entry


def test_a_plan_without_its_year_is_the_next_such_day() -> None:
    # "in September" said in February, of a deadline or a plan: this
    # September, not last year's (which was behind, so the entry stayed forever).
    for entry in ("Atlas is due to ship in September", "The Atlas deadline is September 15",
                  "Alice has to finish the Atlas report by the end of September",
                  "Atlas 计划在9月底前上线", "Atlas 的截止日期是9月15日", "Atlas 要在9月前交付"):
        assert not passed(entry, "2026-02-10", date(2026, 10, 1)), entry
        assert passed(entry, "2026-02-10", date(2026, 12, 1)), entry


def test_a_yearless_day_with_no_plan_word_stays() -> None:
    # A birthday or a habit of a month recurs: no year, no plan word, kept.
    today = date(2027, 6, 1)
    for entry in ("Alice's birthday is on September 3", "用户的生日是9月3日", "Alice goes skiing in January",
                  "Alice went to Japan in July", "The Atlas logo was drawn by Bob in July"):
        assert not passed(entry, "2026-02-10", today), entry


def test_a_move_or_a_start_on_a_day_ahead_leads_to_a_state_that_stays() -> None:
    # "Alice moves to Berlin on 2026-04-01": she lives in Berlin after it.
    # An event leading to a state is no plan that passes; when an entry
    # holds both a deadline word and a move, it is unsure: kept.
    today = date(2026, 12, 1)
    for entry in ("Alice moves to Berlin on 2026-04-01", "Alice is moving to Berlin on April 1, 2026",
                  "Alice relocates to Munich on 2026-04-01", "Alice starts at Acme on 2026-03-01",
                  "Alice joins the Atlas team on 2026-03-01", "Bob and Alice get married on 2026-05-02",
                  "Alice has to move out of her flat by 2026-04-01",
                  "用户2026年4月1日搬到柏林", "用户将于2026年3月1日入职Acme", "用户今年9月搬去上海"):
        assert not passed(entry, "2026-02-10", today), entry
    # A trip, a deadline, a demo: still plans that pass.
    for entry in ("Alice flies to Tokyo on June 3, 2026", "Atlas is due to ship by 2026-04-30",
                  "Atlas 要在2026年4月30日前上线", "Alice starts the Atlas demo prep; the demo is on 2026-03-05"):
        assert passed(entry, "2026-02-10", today), entry


def test_joining_a_call_or_a_meeting_moved_to_a_day_is_a_plan_that_passes() -> None:
    # "join", 加入, 转到 lead to a state when what is joined is a team or a
    # company, or where one is moved is a place; a call joined, or a
    # meeting moved to another day, is an appointment: over after the day.
    today = date(2026, 12, 1)
    for entry in ("Alice will join the call at 3pm on 2026-03-05",
                  "Alice joins the Atlas design sync on March 5, 2026",
                  "Alice is joining Bob's product demo on 2026-03-05",
                  "The Atlas review meeting moved to 2026-03-05",
                  "用户2026年3月5日下午加入Atlas的电话会议", "Atlas 周会转到2026年3月5日", "评审会调到2026年3月5日"):
        assert passed(entry, "2026-02-10", today), entry
    # What stays a state: a team, a company, a place.
    for entry in ("Alice joins the Atlas team on 2026-03-01", "Alice joins Acme on 2026-03-01",
                  "Alice joins the conference team on 2026-03-01", "Alice moves to Berlin on 2026-04-01",
                  "用户2026年3月1日加入Acme", "用户2026年3月1日转到北京分公司", "用户2026年3月1日调到上海"):
        assert not passed(entry, "2026-02-10", today), entry
