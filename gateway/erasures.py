"""Which users erased everything (``/forget all``) in this run, and when, in
the order the process loop takes its turns: a turn it took before a user's
erasure ended (a scheduled job of theirs, a turn resumed after a stop) is
theirs from before, and must not run after it. Their messages are found by
their inbox rows instead (gateway/inbox.py ``Inbox.erased``).

Counted, not timed: the clock may stand still (a test's) or step back,
and only the order matters."""

from __future__ import annotations

__all__ = ["Erasures"]


class Erasures:
    """``Erasures()``: one per process, shared by the process loop (which
    marks each turn it takes, :attr:`mark`) and ``UserData.erase`` (which
    calls :meth:`erase` as the erasure begins and again once it ended)."""

    def __init__(self) -> None:
        self._count = 0
        self._last: dict[str, int] = {}  # owner -> the mark of their latest erasure; a few, as erasures are

    @property
    def mark(self) -> int:
        """Now, in erasures: what a turn taken now is stamped with."""
        return self._count

    def erase(self, owner: str) -> None:
        """``owner``'s erasure begins, or has ended: what was taken before is erased."""
        self._count += 1
        self._last[owner] = self._count

    def since(self, owner: str, mark: int) -> bool:
        """Was ``owner`` erased after ``mark`` (or while being erased then)?"""
        return self._last.get(owner, 0) > mark
