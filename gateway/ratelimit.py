"""How often one user may start an LLM call by writing to the bot.

Every answered message is a paid model call. A person typing quickly stays
far below the limits; a script, a forwarded flood or another bot talking to
this one does not. Sliding windows (a minute and an hour) per user, counted
in the order messages are handled; the clock is passed in.

A message over a limit is not answered, not kept in Tier 0 and not learnt:
keeping it would let a flood fill the history and the extraction buffer
(whose extraction is a model call too). The user is told once per window
when to send it again, so nothing is lost unseen; later messages in the same
window get no note, or two bots would keep answering each other's notes.
A clock stepped back (an NTP correction) drops the counts it left in the
future rather than keep them for the length of the step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from memory.clock import Clock

__all__ = ["Decision", "RateLimiter", "limited_note"]

_MINUTE = 60.0
_HOUR = 3600.0
# Users seen within the last hour are kept; the rest are dropped when the
# table has grown by this many since the last sweep (amortised, no timer).
_SWEEP_EVERY = 1024


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: float = 0.0  # seconds until a message would be allowed
    notify: bool = False  # the first refusal of this window: tell the user
    window: str = ""  # "minute" or "hour": the limit that refused
    limit: int = 0  # messages allowed in that window


class _User:
    __slots__ = ("minute", "hour", "notified_until")

    def __init__(self) -> None:
        self.minute: deque[float] = deque()
        self.hour: deque[float] = deque()
        self.notified_until = 0.0  # no second note before this time


class RateLimiter:
    """``per_minute`` / ``per_hour`` messages a user may send; 0 turns a
    window off. Memory: one float per allowed message of the last hour per
    active user (at most ``per_hour``)."""

    def __init__(self, clock: Clock, *, per_minute: int, per_hour: int) -> None:
        self.clock = clock
        self.per_minute = max(0, per_minute)
        self.per_hour = max(0, per_hour)
        self._users: dict[str, _User] = {}
        self._sweep_at = _SWEEP_EVERY

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-user counts, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"users": self._users}

    @property
    def enabled(self) -> bool:
        return bool(self.per_minute or self.per_hour)

    def check(self, user: str) -> Decision:
        """Count a message of ``user`` if a window has room for it."""
        if not self.enabled:
            return Decision(True)
        now = self.clock.now().timestamp()
        state = self._users.get(user)
        if state is None:
            if len(self._users) >= self._sweep_at:
                self._sweep(now)
            state = self._users[user] = _User()
        _rebase(state, now)
        _expire(state.minute, now - _MINUTE)
        _expire(state.hour, now - _HOUR)
        wait, window, limit = 0.0, "", 0
        if self.per_hour and len(state.hour) >= self.per_hour:
            wait, window, limit = state.hour[-self.per_hour] + _HOUR - now, "hour", self.per_hour
        if self.per_minute and len(state.minute) >= self.per_minute:
            minute_wait = state.minute[-self.per_minute] + _MINUTE - now
            if minute_wait > wait:
                wait, window, limit = minute_wait, "minute", self.per_minute
        if window:
            wait = max(wait, 0.0)
            notify = now >= state.notified_until
            if notify:
                state.notified_until = now + wait
            return Decision(False, retry_after=wait, notify=notify, window=window, limit=limit)
        if self.per_minute:
            state.minute.append(now)
        if self.per_hour:
            state.hour.append(now)
        return Decision(True)

    def _sweep(self, now: float) -> None:
        idle = [u for u, s in self._users.items() if _last(s) <= now - _HOUR and s.notified_until <= now]
        for u in idle:
            del self._users[u]
        self._sweep_at = len(self._users) + _SWEEP_EVERY


def _expire(times: deque[float], before: float) -> None:
    while times and times[0] <= before:
        times.popleft()


def _rebase(state: _User, now: float) -> None:
    """A message counted after ``now``: the clock was stepped back since (an
    NTP correction). Those counts are dropped: how long ago they were is
    not known any more, and kept they would count as within the window for
    the whole step (an hour's silence for a user at the minute's limit).
    At most one window's messages more get through, once."""
    if _last(state) <= now:
        return
    state.minute = deque(t for t in state.minute if t <= now)
    state.hour = deque(t for t in state.hour if t <= now)
    state.notified_until = 0.0


def _last(state: _User) -> float:
    return max(state.hour[-1] if state.hour else 0.0, state.minute[-1] if state.minute else 0.0)


def limited_note(decision: Decision, *, chinese: bool) -> str:
    """What a refused user is told: which limit, and when to send again."""
    wait = _wait_text(decision.retry_after, chinese=chinese)
    if chinese:
        per = "每分钟" if decision.window == "minute" else "每小时"
        return f"消息发得太快了（上限：{per} {decision.limit} 条），这条我没有读。请 {wait}后再发一次。"
    per = "a minute" if decision.window == "minute" else "an hour"
    return (
        f"You're sending messages faster than I can answer (limit: {decision.limit} {per}), "
        f"so I didn't read that one. Please send it again in {wait}."
    )


def _wait_text(seconds: float, *, chinese: bool) -> str:
    if seconds < 60:
        n = max(1, math.ceil(seconds))
        return f"{n} 秒" if chinese else f"{n} second{'s' if n != 1 else ''}"
    n = math.ceil(seconds / 60)
    return f"{n} 分钟" if chinese else f"{n} minute{'s' if n != 1 else ''}"
