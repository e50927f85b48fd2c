"""A dict with a cap: the least recently used keys go first.

For per-chat and per-user state a long-running gateway keeps only to save
a query (a chat's session id, a user's timezone): thousands of chats over
months must not mean thousands of entries for good. Whatever it holds must
be safe to forget, read again from where it came from when asked next.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar, overload

__all__ = ["LRU"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class LRU(Generic[K, V]):
    """At most ``maxsize`` keys; a read or a write makes a key the newest."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"LRU maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self._items: OrderedDict[K, V] = OrderedDict()

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        try:
            value = self._items[key]
        except KeyError:
            return default
        self._items.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.maxsize:
            self._items.popitem(last=False)

    def __getitem__(self, key: K) -> V:
        value = self._items[key]
        self._items.move_to_end(key)
        return value

    def pop(self, key: K, default: V | None = None) -> V | None:
        return self._items.pop(key, default)

    def discard(self, key: K) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()

    def __contains__(self, key: object) -> bool:
        # Membership is a read too: a chat asked about often stays.
        if key in self._items:
            self._items.move_to_end(key)  # type: ignore[arg-type]
            return True
        return False

    def __len__(self) -> int:
        return len(self._items)

    def view(self) -> Mapping[K, V]:
        """Its entries, oldest first, read-only, without making any the
        newest (a read would): for measuring (scripts/bench_soak.py)."""
        return self._items

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._items))
