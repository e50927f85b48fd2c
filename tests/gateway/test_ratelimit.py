from __future__ import annotations

from gateway.ratelimit import RateLimiter, limited_note
from memory import ManualClock


def test_a_user_over_the_minute_limit_is_refused_until_the_oldest_message_ages_out() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=3, per_hour=0)
    for second in (0, 10, 20):
        clock.set(f"2026-03-01T10:00:{second:02d}Z")
        assert limiter.check("alice").allowed
    clock.set("2026-03-01T10:00:30Z")
    refused = limiter.check("alice")
    assert not refused.allowed and refused.window == "minute" and refused.limit == 3
    assert refused.retry_after == 30.0  # the message of 10:00:00 leaves the window at 10:01:00
    assert limiter.check("bob").allowed  # another user has a window of their own
    clock.set("2026-03-01T10:01:00Z")
    assert limiter.check("alice").allowed


def test_refused_messages_do_not_count_so_a_pause_is_enough() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=2, per_hour=0)
    assert limiter.check("alice").allowed and limiter.check("alice").allowed
    for _ in range(50):
        clock.advance(0.5)
        assert not limiter.check("alice").allowed
    clock.set("2026-03-01T10:01:00Z")
    assert limiter.check("alice").allowed


def test_the_user_is_told_once_per_window_not_for_every_refused_message() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=1, per_hour=0)
    assert limiter.check("alice").allowed
    clock.advance(1)
    first = limiter.check("alice")
    assert not first.allowed and first.notify
    clock.advance(1)
    assert not limiter.check("alice").notify
    clock.set("2026-03-01T10:01:00Z")
    assert limiter.check("alice").allowed
    clock.advance(1)
    assert limiter.check("alice").notify  # a new window, a new note


def test_the_hour_limit_names_the_longer_wait() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=10, per_hour=4)
    for _ in range(4):
        assert limiter.check("alice").allowed
        clock.advance(120)
    refused = limiter.check("alice")  # 10:08, the first message was at 10:00
    assert not refused.allowed and refused.window == "hour" and refused.limit == 4
    assert refused.retry_after == 52 * 60


def test_zero_turns_the_limits_off() -> None:
    limiter = RateLimiter(ManualClock(), per_minute=0, per_hour=0)
    assert not limiter.enabled
    assert all(limiter.check("alice").allowed for _ in range(1000))


def test_users_idle_for_an_hour_are_forgotten_by_the_limiter() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=5, per_hour=0)
    for i in range(1024):
        assert limiter.check(f"user{i}").allowed
    clock.advance(3601)
    assert limiter.check("late").allowed
    assert len(limiter._users) == 1  # the sweep ran before the newcomer was added


def test_the_note_says_which_limit_and_when_to_send_again() -> None:
    clock = ManualClock("2026-03-01T10:00:00Z")
    limiter = RateLimiter(clock, per_minute=1, per_hour=0)
    limiter.check("alice")
    clock.advance(20)
    decision = limiter.check("alice")
    assert limited_note(decision, chinese=False) == (
        "You're sending messages faster than I can answer (limit: 1 a minute), "
        "so I didn't read that one. Please send it again in 40 seconds."
    )
    assert "40 秒" in limited_note(decision, chinese=True) and "每分钟 1 条" in limited_note(decision, chinese=True)
