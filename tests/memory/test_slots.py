"""``slots_of``: which one-at-a-time thing a fact is about (the second
look shows a new fact the stored ones about the same thing), in English
and Chinese; a fact about nothing of the kind names none, so it adds no
second call."""

from __future__ import annotations

import pytest

from memory.slots import like_patterns, slots_of


@pytest.mark.parametrize(("fact", "slot"), [
    ("User lives in Shanghai", "home"),
    ("User moved to Berlin last week", "home"),
    ("用户搬到了柏林", "home"),
    ("User works at Stripe", "work"),
    ("User's manager is now Zhang", "work"),
    ("用户跳槽去了字节", "work"),
    ("User's girlfriend is Sam", "partner"),
    ("User got divorced", "partner"),
    ("用户和小王结婚了", "partner"),
    ("User switched to a Pixel 8", "phone"),
    ("用户换了华为手机", "phone"),
    ("User's laptop is a ThinkPad X1", "computer"),
    ("User drives a Tesla Model 3", "car"),
    ("User now prefers tea", "preference"),
    ("用户现在更喜欢喝茶", "preference"),
    ("Atlas launch is due March 1", "project_date"),
    ("项目推迟到五月上线", "project_date"),
])
def test_a_fact_names_the_thing_it_gives_a_value_of(fact: str, slot: str) -> None:
    assert slot in slots_of(fact)
    # The coarse SQL filter lets it through.
    assert any(p.strip("%").lower() in fact.lower() for p in like_patterns([slot]))


@pytest.mark.parametrize("fact", [
    "User has a cat",
    "User is allergic to peanuts",
    "User's birthday is May 3",
    "The login script works again",  # "works" alone is no job
    "User is debugging a flaky test",
    "Deploys run on Fridays",
    "用户对花生过敏",
    "Carpets were cleaned",  # "car" only as a word
])
def test_a_fact_about_nothing_held_one_at_a_time_names_none(fact: str) -> None:
    assert slots_of(fact) == frozenset()
