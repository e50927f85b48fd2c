"""Text embeddings for hybrid search (seed 003): an OpenAI-compatible
``/embeddings`` client and a cache in front of it.

Every vector handed out is a float32 1-D array of unit length, so cosine
similarity is a plain dot product for the vector index.

:class:`CachedEmbedder` keeps vectors in ``embedding_cache`` keyed by the
SHA-256 of the exact text and the model (with the ``dimensions`` asked
of it, if any), so the write path never pays twice
for the same words. The read path (a chat message's query) passes
``persist=False``: it must not write the database on the reply's critical
path, so its vectors stay in a small in-process LRU instead.

Exceptions::

    EmbeddingError   transport error, timeout, bad status, unusable answer
"""

from __future__ import annotations

import binascii
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Literal, Protocol

import httpx
import numpy as np
import structlog

from .clock import Clock, format_ts
from .db import Database
from .errorlog import Wordless, error_brief
from .redact import error_summary, scrub_provider_text, sent_text, summarize_error

__all__ = [
    "MAX_TEXT_CHARS",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingError",
    "HttpEmbedder",
    "blob_to_vector",
    "text_hash",
    "vector_model",
    "vector_to_blob",
]

log = structlog.get_logger(component="memory")

MAX_TEXT_CHARS = 8000
"""Texts are cut to this before sending: OpenAI's models take 8,191 tokens
and most local servers reject (rather than truncate) an over-long input. A
memory or a query is far shorter; this only guards against a pasted file."""

_IN_CHUNK = 500  # text hashes per ``IN (...)``: under SQLite's 999-parameter floor of old builds


class EmbeddingError(Wordless, RuntimeError):
    """No usable vectors: what failed, with a short vetted excerpt, never
    the key nor the texts sent (so :class:`~memory.errorlog.Wordless`).

    ``endpoint`` is True when the endpoint is at fault, not the texts (down,
    slow, rate-limiting, refusing the key, not speaking the API): asking
    for each text alone cannot help then, and only adds to its load."""

    def __init__(self, message: str, *, endpoint: bool = False) -> None:
        super().__init__(message)
        self.endpoint = endpoint


def _endpoint_status(status: int) -> bool:
    # 400/413/422 can be one text's fault (too long, empty, refused); the
    # rest are the endpoint's or the configuration's, whatever is sent.
    return status not in (400, 413, 422)


class Embedder(Protocol):
    model: str

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One float32 1-D L2-normalised vector per text, in order."""
        ...


def vector_to_blob(v: np.ndarray) -> bytes:
    """Stored form: float32 little-endian, whatever the machine's order."""
    arr = np.asarray(v)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D vector, got shape {arr.shape}")
    return arr.astype("<f4", copy=False).tobytes()


def blob_to_vector(b: bytes) -> np.ndarray:
    if len(b) % 4:
        raise ValueError(f"vector blob of {len(b)} bytes is not float32")
    # A native, writable copy: frombuffer alone is read-only and borrows ``b``.
    return np.frombuffer(b, dtype="<f4").astype(np.float32)


def vector_model(model: str, dimensions: int | None) -> str:
    """The name vectors are stored under: the model, and the size asked of
    it, since one model cut to two sizes gives vectors that cannot be
    compared (``text-embedding-3-small@512``)."""
    return model if dimensions is None else f"{model}@{dimensions}"


def text_hash(text: str) -> str:
    """SHA-256 hex of the exact UTF-8 text (no normalisation: a different
    text may embed differently)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _decoded(raw: str, where: str) -> np.ndarray:
    """``encoding_format: base64``: the vector's little-endian float32
    bytes, as OpenAI, vLLM and TEI send them."""
    try:
        # strict_mode, not b64decode's validate=True: that runs a regex over
        # the text, the most of a 64-vector answer's reading time.
        data = binascii.a2b_base64(raw.encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise EmbeddingError(f"{where}: embedding is neither a list of floats nor base64") from exc
    if not data or len(data) % 4:
        raise EmbeddingError(f"{where}: base64 embedding of {len(data)} bytes is not float32")
    return np.frombuffer(data, dtype="<f4")


def _flat(raw: Any, where: str) -> np.ndarray:
    if isinstance(raw, str):
        return _decoded(raw, where)
    if not isinstance(raw, list) or not raw:
        raise EmbeddingError(f"{where}: embedding is not a non-empty list of floats")
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{where}: embedding is not a list of floats") from exc
    if arr.ndim != 1:
        raise EmbeddingError(f"{where}: embedding is not a flat list")
    return arr


def _units(raws: Sequence[Any]) -> list[np.ndarray]:
    """The answer's vectors, checked and L2-normalised as one matrix (per
    vector, numpy's call overhead was most of reading a base64 answer)."""
    arrays = [_flat(raw, f"embeddings: input {i}") for i, raw in enumerate(raws)]
    if not arrays:
        return []
    dims = {len(a) for a in arrays}
    if len(dims) != 1:
        raise EmbeddingError(f"embeddings: vectors of different dimensions {sorted(dims)} in one response")
    m = np.vstack(arrays).astype(np.float64, copy=False)
    finite = np.isfinite(m).all(axis=1)
    if not finite.all():
        raise EmbeddingError(f"embeddings: input {int(np.argmin(finite))}: embedding has non-finite values")
    peak = np.abs(m).max(axis=1)
    if not peak.all():
        raise EmbeddingError(f"embeddings: input {int(np.argmin(peak))}: embedding is the zero vector")
    m = m / peak[:, None]  # first, so the norm of huge values cannot overflow
    m /= np.linalg.norm(m, axis=1)[:, None]
    # One array per vector, each its own (a row view would keep the batch alive).
    return [row.copy() for row in m.astype(np.float32)]


class HttpEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` client.

    It asks for ``encoding_format: base64``: 64 vectors of 1536 floats as
    JSON numbers (2 MB) held the event loop 90-160 ms on a loaded box, as
    base64 8-18 ms (docs/BENCHMARKS.md, session 25). A server that answers floats
    all the same (Ollama) is read as it answers; one that refuses base64
    with a 400 or 422 (llama.cpp, scripts/embed_server.py) gets the request
    again in floats, and floats from then on."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
        dimensions: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dimensions is not None and dimensions < 1:
            raise ValueError("dimensions must be positive")
        self.model = model
        self.batch_size = batch_size
        self.dimensions = dimensions
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        # Per request, not on the client: a shared client passed in must not
        # carry this endpoint's key to other hosts.
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self.encoding: Literal["base64", "float"] = "base64"
        self._own_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        """Close the client if this embedder made it; safe to call twice."""
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> HttpEmbedder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t[:MAX_TEXT_CHARS] for t in texts[start : start + self.batch_size]]
            vectors = await self._post(batch)
            if out and len(vectors[0]) != len(out[0]):
                raise EmbeddingError(f"embeddings: dimension changed between batches ({len(out[0])} -> {len(vectors[0])})",
                                     endpoint=True)
            out.extend(vectors)
        return out

    def _excerpt(self, text: str) -> str:
        # Some servers echo the key they refused; it must not reach a log.
        return scrub_provider_text(text, [self._api_key], limit=200)

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return await self._client.post(self._url, json=body, headers=self._headers, timeout=self._timeout)
        except httpx.TimeoutException as exc:
            raise EmbeddingError(
                f"embeddings: timeout after {self._timeout:g}s ({type(exc).__name__})", endpoint=True
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"embeddings: transport: {error_brief(exc)}", endpoint=True  # not its text: a proxy URL's password
            ) from exc

    async def _post(self, batch: list[str]) -> list[np.ndarray]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": self.encoding}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        resp = await self._send(body)
        if resp.status_code in (400, 422) and self.encoding == "base64":
            # Perhaps base64 it refuses, perhaps these texts: floats tell.
            # If they go through, the server only speaks floats; if not,
            # the texts are at fault, and base64 stays.
            resp = await self._send({**body, "encoding_format": "float"})
            if resp.status_code == 200:
                self.encoding = "float"
                log.info("the embeddings endpoint refuses base64; asking for floats", model=self.model)
        if resp.status_code != 200:
            # The inputs are memories: the error's words only as memory/redact.py vets them.
            raise EmbeddingError(f"embeddings: HTTP {resp.status_code}: "
                                 f"{error_summary(resp, sent_text(batch), [self._api_key])}",
                                 endpoint=_endpoint_status(resp.status_code))
        return self.vectors_of(resp, len(batch), sent=batch)

    def vectors_of(self, resp: httpx.Response, n: int, *, sent: Sequence[str] = ()) -> list[np.ndarray]:
        """The ``n`` unit vectors of a 200 answer (floats or base64); runs
        on the event loop, so its cost is what every reply waits behind
        (scripts/bench_backfill.py times it). ``sent``: the texts asked
        for, which an error quoting them must not carry."""
        try:
            data = resp.json()["data"]
            items = sorted(((int(d["index"]), d["embedding"]) for d in data), key=lambda p: p[0])
        except (ValueError, KeyError, TypeError) as exc:
            # An HTML error page from a proxy, or another API: not the texts.
            raise EmbeddingError("embeddings: not an embeddings response: "
                                 f"{summarize_error(resp.text, sent_text(list(sent)), [self._api_key])}",
                                 endpoint=True) from exc
        if [i for i, _ in items] != list(range(n)):
            raise EmbeddingError(f"embeddings: {len(items)} vectors (indexes not 0..n-1) for {n} inputs")
        vectors = _units([raw for _, raw in items])
        dims = {len(vectors[0])} if vectors else set()
        if self.dimensions is not None and self.dimensions not in dims:
            # The endpoint ignores ``dimensions`` (or serves another model):
            # every text would get the same answer.
            raise EmbeddingError(f"embeddings: asked for {self.dimensions} dimensions, got {dims.pop()}", endpoint=True)
        return vectors


class CachedEmbedder:
    """An :class:`Embedder` in front of another, caching by (text, model)."""

    def __init__(self, inner: Embedder, db: Database, clock: Clock, *, memory_items: int = 2048,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.model = inner.model
        # Cache rows are keyed by the size asked for too: after a change of
        # ``dimensions`` the old size's rows would otherwise be handed out
        # (and stored as the new size's vectors) until a miss told the size.
        self.key = vector_model(inner.model, getattr(inner, "dimensions", None))
        self.db = db
        self.clock = clock
        self.memory_items = memory_items
        self.dimension: int | None = None
        """The API's dimension, from its latest answer; ``None`` until then."""
        self.queries = 0
        """Requests a user waits for (a chat's query vector) sent to the
        endpoint so far: the vectorizer makes its batches small while users
        are asking."""
        self.sent = 0
        self.sent_seconds = 0.0
        """Texts of persisted calls (the vectorizer's) sent to the endpoint
        so far, and the seconds their requests took (the database's part
        left out): what the endpoint takes per memory."""
        self._monotonic = monotonic
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()

    def now(self) -> str:
        return format_ts(self.clock.now())

    def _fits(self, v: np.ndarray) -> bool:
        return self.dimension is None or len(v) == self.dimension

    def _remember(self, key: str, v: np.ndarray) -> None:
        self._lru[key] = v
        self._lru.move_to_end(key)
        while len(self._lru) > self.memory_items:
            self._lru.popitem(last=False)

    async def _lookup(self, hashes: list[str]) -> dict[str, np.ndarray]:
        # A shutdown in progress must not turn a reply into an error: the
        # cache only saves requests, the vectors are right without it.
        if self.db.closed or not hashes:
            return {}
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), _IN_CHUNK):
            chunk = hashes[start : start + _IN_CHUNK]
            rows = await self.db.reader.execute_fetchall(
                f"SELECT text_hash, dimension, vector FROM embedding_cache"
                f" WHERE model = ? AND text_hash IN ({','.join('?' * len(chunk))})",
                [self.key, *chunk],
            )
            for row in rows:
                blob = bytes(row["vector"])
                if len(blob) != 4 * int(row["dimension"]) or row["dimension"] < 1:
                    continue  # a damaged row: embed again, and the write replaces it
                v = blob_to_vector(blob)
                if self._fits(v):
                    found[row["text_hash"]] = v
        if self.dimension is None and len({len(v) for v in found.values()}) > 1:
            # Rows of two models' sizes and no answer yet to tell which is
            # current: ask the API rather than hand out mixed vectors.
            return {}
        return found

    async def _ask(self, texts: list[str]) -> list[np.ndarray]:
        vectors = await self.inner.embed(texts)
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embeddings: {len(vectors)} vectors for {len(texts)} texts")
        if vectors:
            # The latest answer wins: an endpoint that switched models mid-run
            # makes every older row of the other size a miss from now on.
            self.dimension = len(vectors[0])
        return vectors

    async def embed(self, texts: Sequence[str], *, persist: bool = True,
                    waiting: bool | None = None) -> list[np.ndarray]:
        """Vectors for ``texts`` in order; only texts in neither cache reach
        the inner embedder, in one call. ``persist=False`` never writes the
        database (the read path); its vectors go to the in-process LRU.
        ``waiting``: a user waits for the answer (counted in :attr:`queries`);
        by default, when not persisted. The write path's candidate search
        (``HybridRetriever.prepare``) is not persisted, and no one waits."""
        if not texts:
            return []
        keys = {t: text_hash(t) for t in texts}  # dedupes, in first-seen order
        got: dict[str, np.ndarray] = {}
        from_lru: set[str] = set()
        for key in keys.values():
            v = self._lru.get(key)
            if v is not None and self._fits(v):
                self._lru.move_to_end(key)
                got[key] = v
                from_lru.add(key)
        got.update(await self._lookup([k for k in keys.values() if k not in got]))
        missing = [t for t, k in keys.items() if k not in got]
        fresh: dict[str, np.ndarray] = {}
        if missing and (not persist if waiting is None else waiting):
            self.queries += 1
        if missing:
            started = self._monotonic()
            for t, v in zip(missing, await self._ask(missing), strict=True):
                fresh[keys[t]] = v
            if persist:
                self.sent += len(missing)
                self.sent_seconds += self._monotonic() - started
            got.update(fresh)
            stale = [t for t, k in keys.items() if k not in fresh and len(got[k]) != self.dimension]
            if stale:
                # Cached rows were accepted before the API had told the
                # dimension, and it differs: those texts need new vectors too.
                for t, v in zip(stale, await self._ask(stale), strict=True):
                    fresh[keys[t]] = v
                got.update(fresh)
        if persist:
            await self._persist(fresh, {k: got[k] for k in keys.values() if k not in fresh})
        else:
            for key in keys.values():
                if key not in from_lru:
                    self._remember(key, got[key])
        return [got[keys[t]] for t in texts]

    async def _persist(self, fresh: dict[str, np.ndarray], hits: dict[str, np.ndarray]) -> None:
        if self.db.closed or not (fresh or hits):
            return
        now = self.now()
        async with self.db.transaction() as conn:
            if fresh:
                await conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache"
                    " (text_hash, model, dimension, vector, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?)",
                    [(k, self.key, len(v), vector_to_blob(v), now, now) for k, v in fresh.items()],
                )
            if hits:
                # An upsert, not an UPDATE: a hit from the LRU (the read path
                # embedded it first) may have no row yet.
                await conn.executemany(
                    "INSERT INTO embedding_cache"
                    " (text_hash, model, dimension, vector, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (text_hash, model) DO UPDATE SET last_used_at = excluded.last_used_at",
                    [(k, self.key, len(v), vector_to_blob(v), now, now) for k, v in hits.items()],
                )

    async def prune(self, *, unused_days: int) -> int:
        """Delete rows (of any model) unused for ``unused_days``; their count."""
        cutoff = format_ts(self.clock.now() - timedelta(days=unused_days))
        _, count = await self.db.write("DELETE FROM embedding_cache WHERE last_used_at < ?", (cutoff,))
        return count

