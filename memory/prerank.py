"""Candidates pre-ranked from their weighted posting lists.

A retrieval's candidates are the rows holding the most telling query terms
(memory/retrieval.py): each term's FTS5 MATCH gives the rows holding it, the
term a weight (weight x IDF), and a row's pre-rank is the sum of the weights
of the terms it holds. One statement returns each posting list as one
comma-separated text (``group_concat(rowid)``); they are summed and ranked
here.

Summed in SQL (a ``GROUP BY`` over one ``(rid, w)`` row per posting) the
statement cost 0.71 ms of a query at 10k memories, 0.18 ms of it the MATCH
scans; the sorter's row per posting was the rest (docs/RETRIEVAL.md §3). The
sums are the same to the bit: each row's weights are added in the lists'
order, starting from 0.0, as SQLite's ``sum()`` added them (the ``GROUP BY``
sorter keeps a group's rows in the order they came).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import add

__all__ = ["ranked"]


def ranked(lists: Iterable[tuple[float, str | None]]) -> list[int]:
    """Row ids of ``(weight, ids)`` posting lists by summed weight, highest
    first, the higher id first on a tie (``ORDER BY sum(w) DESC, rid
    DESC``).

    ``ids`` is a list's row ids joined by commas (``group_concat``), each
    id once per list, or ``None`` for an empty list.
    """
    total: dict[str, float] = {}
    for weight, ids in lists:
        if not ids:
            continue
        keys = ids.split(",")
        # One C-level pass a list (no Python loop per posting): each id's
        # running sum plus this list's weight. A list holds an id once, so
        # no sum read here was already changed by this list.
        total.update(zip(keys, map(add, map(total.get, keys, repeat(0.0)), repeat(weight))))
    return [rid for _, rid in sorted(zip(total.values(), map(int, total)), reverse=True)]
