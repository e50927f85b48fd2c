"""Erasures orders a user's erasure against the turns the loop took: a turn
taken before it began or while it ran is erased; one taken after it
ended, or another user's, is not."""

from __future__ import annotations

from gateway.erasures import Erasures


def test_a_turn_taken_before_or_during_an_erasure_is_erased_one_taken_after_is_not() -> None:
    e = Erasures()
    before = e.mark
    e.erase("telegram:1")  # begins
    during = e.mark
    e.erase("telegram:1")  # ended
    after = e.mark
    assert e.since("telegram:1", before) and e.since("telegram:1", during)
    assert not e.since("telegram:1", after)
    assert not e.since("telegram:2", before)  # someone else's turn
