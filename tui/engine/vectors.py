"""An in-RAM mirror of the sqlite-vec table for the KNN hot path.

sqlite-vec stays the persistent store (the index file is the single source); this mirror is
rebuilt from it and kept in step by the index's writes. Measured on 2-core machines, vec0's
brute-force scan costs 100-135 ms at 100k vectors while a float32 matrix product costs ~23 ms
and sign-bit Hamming pre-selection with exact float rescoring ~11 ms at recall >= 0.99
(``tests/bench/search.py`` re-measures all of them). Below ``EXACT_BELOW`` vectors the
exact product is used; pre-selection keeps many candidates because sign bits alone missed
the 0.99 recall target at 100k on clustered vectors.

The vectors are stored as the columns of one ``(dims, n)`` matrix: a query's product with
them, ``query @ columns``, runs OpenBLAS's faster matrix-vector kernel (10k vectors, caches
cold: 0.63 ms against 1.11 ms for ``rows @ query``, 100k: 5.9 against 10.7 ms). Reading a
few vectors back costs more that way (each of its numbers is in another cache line: 50 of
them, 0.13 against 0.03 ms), and a search reads a few dozen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Below this many vectors the exact product is used: with one BLAS thread it costs ~0.6 ms
#: per 10k vectors, and recall is exact.
EXACT_BELOW = 250_000
#: Candidates kept by the Hamming pre-selection, as a multiple of k (at least RESCORE_MIN),
#: before exact rescoring. tests/bench/search.py measured recall 0.90-1.00 at 160x on 100k.
RESCORE_FACTOR = 160
RESCORE_MIN = 4_000
#: Room the buffer makes when it grows, as a share of the vectors it then holds.
GROWTH = 1.25
#: From this many vectors a query's exact product is computed in two halves, the second on a
#: worker thread: it reads the whole matrix, and one core's memory bandwidth bounds it (100k
#: vectors: 5.9 -> 5.1 ms of wall time; at 10k both take 0.62 ms, the worker costs CPU).
SPLIT_FROM = 50_000
#: Vectors copied into the columns at a time when the mirror is loaded: a block that stays in
#: the cache transposes fastest (10k vectors: 4 ms in blocks of 64, 8 ms in blocks of 4,096).
LOAD_BLOCK = 64

_second_half: ThreadPoolExecutor | None = None
_second_half_lock = threading.Lock()


class VectorMirror:
    """Unit vectors by chunk id with exact and sign-bit KNN. Thread-safe."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        #: Each vector is a column (see the module's docstring).
        self._columns = np.zeros((dims, 0), dtype=np.float32)
        self._buffer = self._columns  # ``_columns`` is its first columns (``_append_pending``)
        self._bits = np.zeros((0, (dims + 63) // 64), dtype=np.uint64)
        self._mean = np.zeros(dims, dtype=np.float32)
        self._row_of: dict[int, int] = {}
        self._dead = np.zeros(0, dtype=bool)
        self._pending_ids: list[int] = []
        self._pending_vecs: list[np.ndarray] = []
        #: Counts the rebuilds: a product made before one has its vectors in other places.
        self._generation = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._row_of) + len(self._pending_ids)

    def load(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        """Replace the whole mirror: a vector per row of ``matrix``."""
        self.load_columns(ids, np.ascontiguousarray(np.asarray(matrix, dtype=np.float32).T))

    def load_columns(self, ids: np.ndarray, columns: np.ndarray) -> None:
        """Replace the whole mirror: a vector per column of ``columns`` (float32, ``(dims, n)``,
        kept as it is: see :func:`columns_of_blobs`)."""
        with self._lock:
            self._pending_ids.clear()
            self._pending_vecs.clear()
            self._install(np.asarray(ids, dtype=np.int64), columns, recenter=True)

    def upsert(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        """Add (or replace) vectors for chunk ids."""
        with self._lock:
            for chunk_id, vector in zip(ids, vectors, strict=True):
                self._kill(int(chunk_id))
                self._pending_ids.append(int(chunk_id))
                self._pending_vecs.append(np.asarray(vector, dtype=np.float32))

    def remove(self, ids: Iterable[int]) -> None:
        """Forget vectors of deleted chunks."""
        with self._lock:
            for chunk_id in ids:
                self._kill(int(chunk_id))

    def vectors_for(self, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored vectors of those ids that have one."""
        with self._lock:
            self._merge_pending()
            found = [i for i in dict.fromkeys(ids) if i in self._row_of]
            picked = self._columns[:, [self._row_of[i] for i in found]]  # one gather, a copy
        return dict(zip(found, np.ascontiguousarray(picked.T), strict=True))

    def knn(
        self, query: np.ndarray, k: int, *, exact: bool | None = None
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(chunk id, cosine)`` for a unit ``query``, best first."""
        return self._knn(np.asarray(query, dtype=np.float32), k, exact)[0]

    def nearest(self, query: np.ndarray, k: int, threshold: float | None) -> QueryCosines:
        """The ``k`` nearest, or (``threshold`` given) all at or above it, and the way to read
        any other chunk's cosine with ``query`` (see :class:`QueryCosines`)."""
        query = np.asarray(query, dtype=np.float32)
        hits, scores, generation = (
            self._knn(query, k, None) if threshold is None else self._above(query, threshold)
        )
        return QueryCosines(self, query, dict(hits), scores, generation)

    def above(self, query: np.ndarray, threshold: float) -> list[tuple[int, float]]:
        """Every ``(chunk id, cosine)`` with cosine >= ``threshold`` (threshold mode), best first."""
        return self._above(np.asarray(query, dtype=np.float32), threshold)[0]

    def cosines(
        self,
        query: np.ndarray,
        ids: Iterable[int],
        scores: np.ndarray | None = None,
        generation: int = -1,
    ) -> dict[int, float]:
        """The cosine with ``query`` of each of ``ids`` that has a vector, in their order: read
        from ``scores`` (``query``'s product with every vector, made at ``generation``) where
        it holds the vector, the others computed."""
        order = list(dict.fromkeys(ids))
        known: dict[int, float] = {}
        rest: list[int] = []
        with self._lock:
            self._merge_pending()
            usable = scores if generation == self._generation else None
            for chunk_id in order:
                row = self._row_of.get(chunk_id)
                if row is None:
                    continue
                if usable is not None and row < len(usable):
                    known[chunk_id] = float(usable[row])
                else:
                    rest.append(chunk_id)
            picked = self._columns[:, [self._row_of[i] for i in rest]] if rest else None
        if picked is not None:
            known.update(zip(rest, (query @ picked).tolist(), strict=True))
        return {i: known[i] for i in order if i in known}

    def _knn(
        self, query: np.ndarray, k: int, exact: bool | None
    ) -> tuple[list[tuple[int, float]], np.ndarray | None, int]:
        """:meth:`knn`, the product with every vector (None: pre-selected) and its generation."""
        with self._lock:
            self._merge_pending()
            columns, ids, dead, bits, mean, generation = (
                self._columns,
                self._ids,
                self._dead,
                self._bits,
                self._mean,
                self._generation,
            )
        n = len(ids)
        if n == 0 or k <= 0:
            return [], None, generation
        use_exact = exact if exact is not None else n < EXACT_BELOW
        if use_exact:
            scores = _products(columns, query)  # no fancy indexing: a copy costs more
            rows = None
        else:
            q_bits = _sign_bits((query - mean)[:, None])[0]
            distances = np.bitwise_count(bits ^ q_bits).sum(axis=1, dtype=np.int32)
            distances[dead] = np.iinfo(np.int32).max
            keep = min(n, max(k * RESCORE_FACTOR, RESCORE_MIN))
            rows = np.argpartition(distances, keep - 1)[:keep]
            scores = query @ columns[:, rows]
        scores[dead if rows is None else dead[rows]] = -np.inf
        top = min(k, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        chosen = best if rows is None else rows[best]
        found = [
            (int(ids[r]), float(scores[b]))
            for r, b in zip(chosen, best, strict=True)
            if np.isfinite(scores[b])
        ]
        return found, scores if rows is None else None, generation

    def _above(
        self, query: np.ndarray, threshold: float
    ) -> tuple[list[tuple[int, float]], np.ndarray | None, int]:
        """:meth:`above`, the product with every vector and its generation."""
        with self._lock:
            self._merge_pending()
            columns, ids, dead, generation = (
                self._columns,
                self._ids,
                self._dead,
                self._generation,
            )
        if len(ids) == 0:
            return [], None, generation
        scores = _products(columns, query)
        scores[dead] = -np.inf
        rows = np.nonzero(scores >= threshold)[0]
        rows = rows[np.argsort(-scores[rows])]
        return [(int(ids[r]), float(scores[r])) for r in rows], scores, generation

    # -- internals (call with the lock held) --

    def _kill(self, chunk_id: int) -> None:
        row = self._row_of.pop(chunk_id, None)
        if row is not None:
            self._dead[row] = True
        if chunk_id in self._pending_ids:
            at = self._pending_ids.index(chunk_id)
            del self._pending_ids[at]
            del self._pending_vecs[at]

    def _merge_pending(self) -> None:
        dead_share = self._dead.sum() / max(1, len(self._dead))
        if not self._pending_ids and dead_share < 0.2:
            return
        if dead_share < 0.2 and len(self._ids):
            self._append_pending()
            return
        alive = ~self._dead
        ids = np.concatenate([self._ids[alive], np.asarray(self._pending_ids, dtype=np.int64)])
        pending = (
            np.stack(self._pending_vecs).astype(np.float32, copy=False)
            if self._pending_vecs
            else np.zeros((0, self.dims), np.float32)
        )
        columns = np.concatenate([self._columns[:, alive], pending.T], axis=1)
        self._pending_ids.clear()
        self._pending_vecs.clear()
        self._install(ids, columns, recenter=len(self._ids) == 0)

    def _append_pending(self) -> None:
        """Add the pending vectors after the columns there are (which stay where they are).

        Rebuilding the whole mirror for each batch an index write adds copied the matrix twice,
        packed every vector's bits again and re-made the id map: at 10k vectors, tens of ms in
        C calls that hold the GIL, which the UI thread waited out while a log was indexed. The
        matrix lives in a buffer with room to grow: the columns are written into it, and a
        reader's view of the columns before them is untouched.
        """
        pending = np.stack(self._pending_vecs).astype(np.float32, copy=False)
        start, end = len(self._ids), len(self._ids) + len(pending)
        if end > self._buffer.shape[1]:
            grown = np.empty((self.dims, max(end, int(end * GROWTH))), dtype=np.float32)
            grown[:, :start] = self._columns
            self._buffer = grown
        self._buffer[:, start:end] = pending.T
        self._columns = self._buffer[:, :end]
        self._ids = np.concatenate([self._ids, np.asarray(self._pending_ids, dtype=np.int64)])
        self._bits = np.concatenate([self._bits, _sign_bits(pending.T, self._mean)])
        self._dead = np.concatenate([self._dead, np.zeros(len(pending), dtype=bool)])
        self._row_of.update(zip(self._pending_ids, range(start, end), strict=True))
        self._pending_ids.clear()
        self._pending_vecs.clear()

    def _install(self, ids: np.ndarray, columns: np.ndarray, *, recenter: bool) -> None:
        if recenter and columns.shape[1]:
            # Signs of raw sentence embeddings are skewed; centring first makes the bits informative.
            self._mean = columns.mean(axis=1).astype(np.float32)
        self._generation += 1
        self._ids = ids
        self._buffer = columns
        self._columns = columns
        self._bits = _sign_bits(columns, self._mean)
        self._dead = np.zeros(len(ids), dtype=bool)
        self._row_of = {int(i): r for r, i in enumerate(ids)}


class QueryCosines:
    """One query's cosines with the mirror's vectors: its nearest (``hits``), and any chunk's
    by :meth:`of`, read from the product that found them (a search asks for a few dozen more:
    its full-text matches, their neighbours), computed only where it has none."""

    def __init__(
        self,
        mirror: VectorMirror,
        query: np.ndarray,
        hits: dict[int, float],
        scores: np.ndarray | None,
        generation: int,
    ) -> None:
        self.hits = hits
        self._mirror = mirror
        self._query = query
        self._scores = scores
        self._generation = generation

    def of(self, ids: Iterable[int]) -> dict[int, float]:
        """The cosine of each of ``ids`` that has a vector (the others are left out)."""
        return self._mirror.cosines(self._query, ids, self._scores, self._generation)


def _products(columns: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``query @ columns``; from :data:`SPLIT_FROM` columns, half of it on a worker thread
    (numpy lets go of the GIL for the product)."""
    global _second_half
    count = columns.shape[1]
    out = np.empty(count, dtype=np.float32)
    if count < SPLIT_FROM:
        return np.matmul(query, columns, out=out)
    with _second_half_lock:
        if _second_half is None:
            _second_half = ThreadPoolExecutor(1, thread_name_prefix="memdeck-knn")
        worker = _second_half
    half = count // 2
    later = worker.submit(np.matmul, query, columns[:, half:], out=out[half:])
    np.matmul(query, columns[:, :half], out=out[:half])
    later.result()
    return out


def _sign_bits(columns: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    """Sign bits of each column of ``columns`` minus ``mean``, packed into uint64 words per
    vector (a row each).

    Done in slices: centring all vectors at once made a float32 copy of them.
    """
    dims, count = columns.shape
    out = np.zeros((count, (dims + 63) // 64 * 8), dtype=np.uint8)
    for start in range(0, count, 4096):
        part = columns[:, start : start + 4096]
        if mean is not None:
            part = part - mean[:, None]
        out[start : start + part.shape[1], : (dims + 7) // 8] = _packed_signs(part).T
    return out.view(np.uint64)


def _packed_signs(part: np.ndarray) -> np.ndarray:
    """``np.packbits(part > 0, axis=0)``: 8 dimensions a byte, the first in the highest bit.
    Shifted and or-ed by rows of bytes: ``packbits`` down the columns took 6x as long."""
    dims, count = part.shape
    signs = np.zeros(((dims + 7) // 8 * 8, count), dtype=np.uint8)
    np.greater(part, 0, out=signs[:dims].view(bool))
    grouped = signs.reshape(-1, 8, count)
    packed = grouped[:, 0] << 7
    for bit in range(1, 8):
        packed |= grouped[:, bit] << (7 - bit)
    return packed


def columns_of_blobs(
    blobs: Iterable[tuple[int, bytes]], count: int, dims: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ids and the ``(dims, n)`` columns of at most ``count`` ``(id, float32 blob)``
    pairs, for :meth:`VectorMirror.load_columns`. Copied in blocks of :data:`LOAD_BLOCK`
    vectors: written one column at a time, each vector would touch ``dims`` cache lines; made
    as rows first and transposed whole, the vectors would be held twice."""
    ids = np.empty(count, dtype=np.int64)
    columns = np.empty((dims, count), dtype=np.float32)
    block = np.empty((min(LOAD_BLOCK, max(count, 1)), dims), dtype=np.float32)
    done = filled = 0
    for chunk_id, blob in blobs:
        if filled == count:
            break
        ids[filled] = chunk_id
        block[filled - done] = np.frombuffer(blob, dtype=np.float32)
        filled += 1
        if filled - done == len(block):
            columns[:, done:filled] = block.T
            done = filled
    columns[:, done:filled] = block[: filled - done].T
    return ids[:filled], columns[:, :filled]
