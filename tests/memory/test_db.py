from __future__ import annotations

from pathlib import Path

from memory.db import SMALL_CACHE_KIB, Database
from memory.schema import MIGRATIONS


async def _cache_kib(db: Database) -> tuple[int, int]:
    (w,) = await db._writer.execute_fetchall("PRAGMA cache_size")
    (r,) = await db.fetchall("PRAGMA cache_size")
    return -w[0], -r[0]


async def test_larger_cache_is_given_back_by_the_last_block_out(tmp_path: Path) -> None:
    # A compression job's cache must not stay after it: the gateway's RSS
    # would keep it for good (docs/BENCHMARKS.md, RSS).
    db = await Database.open(tmp_path / "m.db", MIGRATIONS)
    try:
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
        async with db.larger_cache(4000):
            assert await _cache_kib(db) == (4000, 4000)
            async with db.larger_cache(8000):  # nested: the outer size holds
                assert await _cache_kib(db) == (4000, 4000)
            assert await _cache_kib(db) == (4000, 4000)
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
        try:
            async with db.larger_cache(4000):
                raise RuntimeError("job failed")
        except RuntimeError:
            pass
        assert await _cache_kib(db) == (SMALL_CACHE_KIB, SMALL_CACHE_KIB)
    finally:
        await db.close()


async def test_cache_sizes_are_per_file(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "g.db", MIGRATIONS, inline_cache_kib=300, cache_kib=700)
    try:
        assert await _cache_kib(db) == (700, 700)
        assert db.reader._conn.execute("PRAGMA cache_size").fetchone()[0] == -300
    finally:
        await db.close()
