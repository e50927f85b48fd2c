"""Memory vectors for hybrid search (seed 003 ``mem_vec``, seed 004).

One L2-normalised float32 vector per active memory, in ``memory_vectors``
(schema 4), written by :class:`memory.vectorize.Vectorizer` off the reply
path. A search is a brute-force cosine scan of the asking user's vectors
(and ``_global``'s): one matrix product, which at 10k memories of 384
dimensions is well under a millisecond. sqlite-vec would do the same scan
inside SQLite, but CPython builds without ``enable_load_extension`` cannot
load it.

Each owner's matrix is kept in process (least recently searched first out,
up to ``max_cached_mb``) and patched in place by
:meth:`VectorIndex.store` with the vectors it wrote. Rows of
memories deleted or archived since are filtered out by one indexed query
over the few ids that made the top, so the cached matrix never shows
something that is gone. An erased or reworded memory's row also leaves
the matrix itself (:meth:`VectorIndex.drop`, called by
``MemoryEngine.purge_erased``; one erased by another process, when a
search next meets it), so its vector does not linger in RAM.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from .db import Database
from .embedding import text_hash
from .scope import Chat, shown_in

__all__ = ["Pending", "VectorIndex"]

log = structlog.get_logger(component="recall")


@dataclass(frozen=True)
class Pending:
    """An active memory whose vector is missing, stale or of another model."""

    memory_id: int
    owner: str
    content: str
    content_hash: str


_LOAD_CHUNK = 500  # rows: 0.8 MB at 384 dimensions, 3 MB at 1536


class _Matrix:
    """One owner's vectors: rows ``[:n]`` of a buffer with room to grow, so
    the vectorizer's new vectors patch it instead of a reload (which holds
    the reader 45-70 ms for 10k memories of 384 dimensions)."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._ids = ids
        self._vectors = vectors
        self.n = len(ids)
        self._row = {int(i): r for r, i in enumerate(ids)}

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self.n]

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self.n]

    @property
    def nbytes(self) -> int:
        return self._vectors.nbytes

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    def put(self, memory_id: int, vec: np.ndarray) -> None:
        row = self._row.get(memory_id)
        if row is None:
            if self.n == len(self._ids):  # full: double (amortised, rare)
                cap = max(16, 2 * self.n)
                self._ids = np.resize(self._ids, cap)
                grown = np.empty((cap, self.dim), dtype=np.float32)
                grown[: self.n] = self._vectors[: self.n]
                self._vectors = grown
            row = self._row[memory_id] = self.n
            self._ids[row] = memory_id
            self.n += 1
        self._vectors[row] = vec

    def drop(self, memory_ids: Iterable[int]) -> int:
        """Remove these memories' rows (the last row moves into the gap, the
        freed row is zeroed: an erased memory's vector, which can be
        inverted back to much of its text, does not linger in RAM)."""
        dropped = 0
        for memory_id in memory_ids:
            row = self._row.pop(int(memory_id), None)
            if row is None:
                continue
            last = self.n - 1
            if row != last:
                moved = int(self._ids[last])
                self._ids[row] = moved
                self._vectors[row] = self._vectors[last]
                self._row[moved] = row
            self._vectors[last] = 0.0
            self._ids[last] = 0
            self.n = last
            dropped += 1
        return dropped


class VectorIndex:
    def __init__(self, db: Database, model: str, *, dimension: int | None = None, max_cached_mb: float = 256.0) -> None:
        self.db = db
        self.model = model
        # The size the endpoint is asked for (``memory.embedding.dimensions``),
        # if any: a stored vector of another size is stale whatever its name.
        self.dimension = dimension
        # 10k memories of 1536 dimensions are 61 MB: the cache is bounded by
        # bytes, not by owners (the one being searched always stays).
        self._max_cached = int(max_cached_mb * 1e6)
        self._cached = 0
        self._matrices: OrderedDict[str, _Matrix] = OrderedDict()
        # owner -> stores while a load of theirs is under way (a load racing
        # one is not kept); only owners being loaded, not every owner ever stored.
        self._generation: dict[str, int] = {}
        self._loading: dict[str, int] = {}  # owner -> loads under way
        self._drops = 0  # erasures so far (a load racing one is not kept either)

    # -- write side (the vectorizer) -------------------------------------------

    async def pending(
        self, limit: int = 256, *, after: int = 0, upto: int | None = None, dimension: int | None = None
    ) -> list[Pending]:
        """Active memories still to embed, by id, with ``after < id <= upto``
        (a window keeps each read short: the reader connection also serves
        replies, and a sweep of 120k memories in one query holds it ~50 ms).
        A vector of another size than ``dimension`` (default: the index's)
        counts as stale: the endpoint serves another size now."""
        window = "" if upto is None else "AND m.id <= ?"
        dim = dimension or self.dimension
        size = "" if dim is None else "OR length(v.vector) != ?"
        # A row filed under another owner than its memory's (a hand edit)
        # is redone too: it would sit in the wrong user's matrix.
        rows = await self.db.reader.execute_fetchall(
            f"""SELECT m.id, m.owner, m.content, m.content_hash
                 FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id
                WHERE m.id > ? {window} AND m.status = 'active'
                  AND (v.memory_id IS NULL OR v.model != ? OR v.content_hash != m.content_hash
                       OR v.owner != m.owner {size})
                ORDER BY m.id LIMIT ?""",
            (after, *(() if upto is None else (upto,)), self.model, *(() if dim is None else (4 * dim,)), limit),
        )
        return [Pending(r[0], r[1], r[2], r[3]) for r in rows]

    async def max_id(self) -> int:
        rows = list(await self.db.reader.execute_fetchall("SELECT COALESCE(MAX(id), 0) FROM memories"))
        return int(rows[0][0])

    async def store(self, items: Sequence[tuple[Pending, np.ndarray]]) -> int:
        """Write the vectors of ``items`` in one transaction; returns how many
        were written. A memory deleted or edited since it was read is skipped
        (its new wording is picked up by the next :meth:`pending`)."""
        if not items:
            return 0
        written: list[tuple[Pending, np.ndarray]] = []
        gone: list[Pending] = []
        async with self.db.transaction() as conn:
            for p, vec in items:
                v = np.asarray(vec, dtype="<f4")
                cur = await conn.execute(
                    """INSERT OR REPLACE INTO memory_vectors (memory_id, owner, model, content_hash, vector)
                       SELECT id, owner, ?, content_hash, ? FROM memories WHERE id = ? AND content_hash = ?""",
                    (self.model, v.tobytes(), p.memory_id, p.content_hash),
                )
                if cur.rowcount > 0:
                    written.append((p, v))
                else:
                    gone.append(p)
            if gone:
                # Erased or reworded while it was embedded: the erasure dropped
                # the words' cached vector before the embedder cached it again
                # (a vector can be inverted to much of its text). As
                # MemoryEngine.delete does, whoever else has the same words.
                await conn.executemany("DELETE FROM embedding_cache WHERE text_hash = ?",
                                       [(text_hash(p.content),) for p in gone])
        if gone:
            await self.db.checkpoint()  # its bytes leave the WAL too (secure_delete zeroed the row)
        for p, _ in written:
            if p.owner in self._loading:
                self._generation[p.owner] = self._generation.get(p.owner, 0) + 1
        for p, v in written:  # after the commit: the cache never shows what was rolled back
            m = self._matrices.get(p.owner)
            if m is None:
                continue
            if m.n and m.dim != len(v):
                self.forget_cached(p.owner)  # another dimension: rebuilt on the next search
                continue
            if not m.n:  # was empty: start a matrix of this dimension
                self.forget_cached(p.owner)
                m = self._matrices[p.owner] = _Matrix(np.zeros(0, dtype=np.int64), np.zeros((0, len(v)), np.float32))
            before = m.nbytes
            m.put(p.memory_id, v)
            self._cached += m.nbytes - before
        return len(written)

    def drop(self, memory_ids: Iterable[int]) -> int:
        """Take erased (or reworded) memories' vectors out of the cached
        matrices now, not at the next reload; returns how many rows went.
        ``MemoryEngine.on_erased`` calls it after the erasure committed."""
        ids = list(memory_ids)
        self._drops += 1
        return sum(m.drop(ids) for m in self._matrices.values()) if ids else 0

    def forget_cached(self, owner: str | None = None) -> None:
        """Drop cached matrices (one owner's, or all)."""
        for o in [owner] if owner is not None else list(self._matrices):
            m = self._matrices.pop(o, None)
            if m is not None:
                self._cached -= m.nbytes

    @property
    def cached_bytes(self) -> int:
        return self._cached

    async def count(self, owner: str | None = None) -> int:
        sql = "SELECT count(*) FROM memory_vectors WHERE model = ?"
        args: tuple[object, ...] = (self.model,)
        if owner is not None:
            sql += " AND owner = ?"
            args += (owner,)
        rows = list(await self.db.reader.execute_fetchall(sql, args))
        return int(rows[0][0])

    # -- read side ----------------------------------------------------------------

    async def _load(self, owner: str) -> _Matrix:
        # In chunks, so a large user's load never holds the shared reader for
        # long (one query over 10k vectors of 384 dimensions: 45-70 ms).
        ids: list[int] = []
        buf = bytearray()  # writable, so store() can patch the matrix
        dims: set[int] = set()
        after = -1
        while True:
            rows = list(await self.db.reader.execute_fetchall(
                """SELECT memory_id, vector FROM memory_vectors
                    WHERE owner = ? AND model = ? AND memory_id > ? ORDER BY memory_id LIMIT ?""",
                (owner, self.model, after, _LOAD_CHUNK),
            ))
            for r in rows:
                ids.append(r[0])
                buf += r[1]
                dims.add(len(r[1]))
            if len(rows) < _LOAD_CHUNK:
                break
            after = rows[-1][0]
        if not ids or len(dims) != 1:
            # None, or vectors of two dimensions under one model name (the
            # endpoint changed what it serves): searched once re-embedded.
            return _Matrix(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
        vectors = np.frombuffer(buf, dtype="<f4").reshape(len(ids), -1)
        return _Matrix(np.asarray(ids, dtype=np.int64), vectors)

    async def _matrix(self, owner: str) -> _Matrix:
        m = self._matrices.get(owner)
        if m is not None:
            self._matrices.move_to_end(owner)
            return m
        generation, drops = self._generation.get(owner, 0), self._drops
        self._loading[owner] = self._loading.get(owner, 0) + 1
        try:
            m = await self._load(owner)
            raced = self._generation.get(owner, 0) != generation or self._drops != drops
        finally:
            self._loading[owner] -= 1
            if not self._loading[owner]:  # no load left for a later store to race
                del self._loading[owner]
                self._generation.pop(owner, None)
        if raced:
            return m  # vectors stored or erased meanwhile: right for this search, not kept
        self._matrices[owner] = m
        self._cached += m.nbytes
        while self._cached > self._max_cached and len(self._matrices) > 1:
            _, old = self._matrices.popitem(last=False)
            self._cached -= old.nbytes
        return m

    async def warm(self) -> int:
        """Load the most recently active owners' matrices while the cache has
        room (at start, so a user's first message does not pay the load);
        returns how many were loaded."""
        rows = await self.db.reader.execute_fetchall(
            """SELECT v.owner, COUNT(*) * MAX(length(v.vector)) FROM memory_vectors v
                 JOIN memories m ON m.id = v.memory_id
                WHERE v.model = ? GROUP BY v.owner ORDER BY MAX(m.last_accessed) DESC""",
            (self.model,),
        )
        loaded = 0
        for owner, size in rows:
            if owner in self._matrices:
                continue
            if self._cached + size > self._max_cached:
                break
            await self._matrix(owner)
            loaded += 1
        return loaded

    async def search(
        self, owners: Sequence[str], query: np.ndarray, k: int, *, private: bool = True, min_similarity: float = -1.0,
        chat: Chat | None = None,
    ) -> list[tuple[int, float]]:
        """(memory id, cosine) of the ``k`` active memories of ``owners`` most
        like ``query`` (an L2-normalised vector), best first. ``private=False``
        (a group chat, ``chat``) keeps what the lexical search keeps
        (memory/scope.py)."""
        q = np.asarray(query, dtype=np.float32)
        ids: list[np.ndarray] = []
        sims: list[np.ndarray] = []
        for owner in dict.fromkeys(owners):
            m = await self._matrix(owner)
            if m.n and m.dim == q.shape[0]:
                ids.append(m.ids)
                sims.append(m.vectors @ q)
        if not ids:
            return []
        all_ids = np.concatenate(ids)
        all_sims = np.concatenate(sims)
        # A few more than k: some may be archived or deleted since cached.
        want = min(len(all_ids), 2 * k + 8)
        top = np.argpartition(-all_sims, want - 1)[:want] if want < len(all_ids) else np.arange(len(all_ids))
        top = top[np.argsort(-all_sims[top], kind="stable")]
        best = [(int(all_ids[i]), float(all_sims[i])) for i in top if all_sims[i] >= min_similarity]
        if not best:
            return []
        marks = ",".join("?" * len(best))
        searched = list(dict.fromkeys(owners))
        shown = "status = 'active' " + shown_in(private=private, chat=chat, prefix="")
        # The owner is checked on the memory's own row, not trusted to the
        # matrix it was cached in: a stray vector row (filed under the wrong
        # owner) must not show one user's memory to another; in a group,
        # the scope alone would let any member's words said there through.
        rows = await self.db.reader.execute_fetchall(
            f"SELECT id, {shown}, owner IN ({','.join('?' * len(searched))}) FROM memories WHERE id IN ({marks})",
            [*searched, *(i for i, _ in best)],
        )
        live = {r[0] for r in rows if r[1] and r[2]}
        # Gone from the table but still cached: erased by another process
        # (the CLI), which could not reach this one's matrices.
        erased = {i for i, _ in best} - {r[0] for r in rows}
        if erased:
            self.drop(erased)
        stray = [r[0] for r in rows if not r[2]]
        if stray:
            # Out of these owners' matrices (its owner's stays as it is);
            # the vectorizer files the row under its owner again.
            for owner in searched:
                if (cached := self._matrices.get(owner)) is not None:
                    cached.drop(stray)
            log.warning("vector rows filed under another owner left out of a search", memories=len(stray))
        return [(i, s) for i, s in best if i in live][:k]
