"""memory/lru.py: a capped map whose least recently used keys go first."""

from __future__ import annotations

import pytest

from memory.lru import LRU


def test_the_least_recently_used_key_goes_when_the_cap_is_passed() -> None:
    cache: LRU[str, int] = LRU(3)
    for i, key in enumerate("abc"):
        cache[key] = i
    assert cache.get("a") == 0  # read: now the newest
    cache["d"] = 3
    assert list(cache) == ["c", "a", "d"]  # "b" was the least recently used
    assert "b" not in cache and cache.get("b") is None and cache.get("b", -1) == -1
    assert len(cache) == 3


def test_membership_counts_as_use_and_pop_and_discard_forget() -> None:
    cache: LRU[str, None] = LRU(2)
    cache["x"] = None
    cache["y"] = None
    assert "x" in cache
    cache["z"] = None  # "y" goes: "x" was asked about since
    assert list(cache) == ["x", "z"]
    assert cache.pop("x") is None and "x" not in cache
    cache.discard("z")
    cache.discard("never there")
    assert len(cache) == 0 and cache.pop("gone", None) is None


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LRU(0)


def test_a_view_lists_oldest_first_and_makes_none_the_newest() -> None:
    # What bench_soak measures: reading it must not change which key goes next.
    cache: LRU[str, int] = LRU(2)
    cache["a"], cache["b"] = 1, 2
    assert dict(cache.view()) == {"a": 1, "b": 2} and list(cache.view()) == ["a", "b"]
    cache["c"] = 3
    assert list(cache.view()) == ["b", "c"]  # "a" went: the view did not make it newer
