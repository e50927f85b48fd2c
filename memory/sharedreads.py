"""Rows read once for a batch of retrievals, not once per retrieval.

The write path's consolidation (memory/consolidate.py) runs a retrieval per
line of a batch (~11), all for the same owner. They read the same rows: a
user with few memories has every one of them read by owner each time, and
the lines' candidate rows and their neighbours overlap. Inside
:func:`shared_reads` the retriever keeps what it read of ``memories`` for
the rest of the batch, keyed by the statement, as long as the index stamp
(``engine.INDEX``) it was read under holds: what a retrieval returns is
what it returned without the memo.

A context variable, not an attribute of the retriever: it is seen only by
the task that opened it, so a reply's retrieval running meanwhile in
another task reads as it always did.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # retrieval imports this module
    from .retrieval import QueryTerm

__all__ = ["SharedReads", "current", "shared_reads"]


@dataclass
class SharedReads:
    stamp: tuple[int, int] | None = None
    # (select, join, where, column, values) -> the rows of that statement
    listed: dict[tuple[str, str, str, str, tuple[object, ...]], list[sqlite3.Row]] = field(default_factory=dict)
    # (select, join, where) -> id -> its row, None when the statement found none
    by_id: dict[tuple[str, str, str], dict[int, sqlite3.Row | None]] = field(default_factory=dict)
    # a query's text -> its built terms, its moods included: words, not rows, so kept across stamps
    queries: dict[str, tuple[QueryTerm, ...]] = field(default_factory=dict)

    def valid_at(self, stamp: tuple[int, int]) -> SharedReads:
        """Itself, emptied first if the index changed since it was filled."""
        if stamp != self.stamp:
            self.stamp = stamp
            self.listed.clear()
            self.by_id.clear()
        return self


_CURRENT: ContextVar[SharedReads | None] = ContextVar("myclaw_shared_reads", default=None)


def current() -> SharedReads | None:
    return _CURRENT.get()


@contextmanager
def shared_reads() -> Iterator[SharedReads]:
    """Retrievals of this task share their reads until the block ends."""
    reads = SharedReads()
    token = _CURRENT.set(reads)
    try:
        yield reads
    finally:
        _CURRENT.reset(token)
