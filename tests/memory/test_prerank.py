from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memory.prerank import ranked

# The pre-ranking statement before memory/prerank.py: one (rid, w) row per
# posting, summed and ranked by SQLite. ranked() must give its order.
GROUPED = "SELECT rid, sum(w) AS s FROM ({}) GROUP BY rid ORDER BY s DESC, rid DESC"
ARM = "SELECT rowid AS rid, ? AS w FROM t WHERE t MATCH ?"
LIST = "SELECT {i}, group_concat(rowid) FROM t WHERE t MATCH ?"
# SQLite 3.43 made sum() compensated (Kahan-Babuska-Neumaier): from then on
# its sums may differ from a plain one in the last bit, and so its order on
# a near tie. ranked() keeps the plain sum in the lists' order (the one the
# GROUP BY gave on the SQLite this project ran on, 3.40), whatever the
# library's version; the statement is compared only where it sums so.
PLAIN_SQL_SUM = sqlite3.sqlite_version_info < (3, 43, 0)


def plain(terms: list[tuple[float, list[int]]]) -> list[int]:
    """The reference order: each row's weights added one by one in the
    lists' order from 0.0, highest sum first, the higher id on a tie."""
    sums: dict[int, float] = {}
    for weight, ids in terms:
        for rid in ids:
            sums[rid] = sums.get(rid, 0.0) + weight
    return sorted(sums, key=lambda rid: (sums[rid], rid), reverse=True)


@pytest.fixture
def fts(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "fts.db")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
    return conn


def both(conn: sqlite3.Connection, terms: list[tuple[float, str]]) -> tuple[list[int], list[int]]:
    """The rows' order by SQLite's GROUP BY and by ranked(), from the same
    posting lists of a real FTS5 table."""
    by_sql = [r[0] for r in conn.execute(GROUPED.format(" UNION ALL ".join([ARM] * len(terms))),
                                         [a for w, m in terms for a in (w, m)])]
    lists = conn.execute(" UNION ALL ".join(LIST.format(i=i) for i in range(len(terms))), [m for _, m in terms])
    return by_sql, ranked((terms[i][0], ids) for i, ids in lists)


def test_a_rows_weights_are_summed_in_the_lists_order_as_sqlite_summed_them(fts: sqlite3.Connection) -> None:
    # 0.1 + 0.2 + 0.3 is 0.6000000000000001 in that order and 0.6 in the
    # reverse one: the first row beats the second's 0.6 only if the sum
    # follows the lists' order; otherwise the tie goes to the higher id.
    fts.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", [(1, "aa bb cc"), (2, "dd"), (3, "aa")])
    terms = [(0.1, "aa"), (0.2, "bb"), (0.3, "cc"), (0.6, "dd")]
    by_sql, ours = both(fts, terms)
    assert ours == [1, 2, 3]
    if PLAIN_SQL_SUM:
        assert by_sql == ours


def test_ties_go_to_the_higher_id_and_empty_lists_count_nothing(fts: sqlite3.Connection) -> None:
    fts.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", [(5, "aa"), (9, "aa"), (7, "aa bb"), (100, "bb")])
    by_sql, ours = both(fts, [(1.5, "aa"), (2.0, "zz"), (1.5, "bb")])  # zz: in no row (group_concat gives NULL)
    assert ours == by_sql == [7, 100, 9, 5]
    assert ranked([]) == []
    assert ranked([(1.0, None), (2.0, "")]) == []


def test_random_collections_rank_as_the_grouped_statement(fts: sqlite3.Connection) -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    fts.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)",
                    [(i, " ".join(rng.sample(words, rng.randint(1, 8)))) for i in range(1, 3001)])
    for _ in range(50):
        terms = [(rng.choice([0.3, 0.4, 1.0, rng.uniform(0.1, 9.0)]), m) for m in rng.sample(words, rng.randint(1, 12))]
        by_sql, ours = both(fts, terms)
        lists = [(w, [r[0] for r in fts.execute("SELECT rowid FROM t WHERE t MATCH ?", [m])]) for w, m in terms]
        assert ours == plain(lists)
        if PLAIN_SQL_SUM:
            assert ours == by_sql
