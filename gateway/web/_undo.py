"""What the page's Undo button after an edit, an "archive all" or an Unshare puts back.

Kept in this process only, for ``ttl`` seconds and at most ``keep`` of
them: an edit can be a redaction, so its old words go to neither the
database (the edit purges them from the file) nor the address bar (the
notice's link names a random token, never the words). After a restart an
Undo is gone; the notice then simply offers none.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ArchiveAllUndo", "EditUndo", "UnshareUndo", "Undoable", "UndoStore"]


@dataclass(frozen=True)
class EditUndo:
    """``before``: the edited fields as they were; ``after``: as the edit
    left them (an undo over a later change is refused); ``entries``: the
    Core Memory entries the edit superseded (restored with it)."""

    memory_id: int
    owner: str
    before: dict[str, Any]
    after: dict[str, Any]
    entries: tuple[int, ...] = ()


@dataclass(frozen=True)
class ArchiveAllUndo:
    """The memories an "archive all" archived (those archived before stay so)."""

    owner: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class UnshareUndo:
    """The groups an Unshare took a memory back from (``provenance.shared``)."""

    memory_id: int
    owner: str
    places: tuple[str, ...]


Undoable = EditUndo | ArchiveAllUndo | UnshareUndo


class UndoStore:
    def __init__(self, *, ttl: float = 900.0, keep: int = 200, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.keep = keep
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, Undoable]] = OrderedDict()

    def put(self, item: Undoable) -> str:
        token = secrets.token_urlsafe(12)
        self._items[token] = (self._clock() + self.ttl, item)
        while len(self._items) > self.keep:
            self._items.popitem(last=False)
        return token

    def peek(self, token: str) -> Undoable | None:
        got = self._items.get(token)
        if got is None:
            return None
        if got[0] <= self._clock():
            del self._items[token]
            return None
        return got[1]

    def take(self, token: str) -> Undoable | None:
        """The undo, once: a second click (the back button, a double tap) gets None."""
        item = self.peek(token)
        if item is not None:
            del self._items[token]
        return item
