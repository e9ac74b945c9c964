"""The vector half of the index: embedding what has no vector yet (from the cache when the
text was seen before), the bounded embedding cache, and the in-RAM mirror of sqlite-vec."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlean as sqlite3

from .chunker import embed_text
from .embeddings import TextEmbedder
from .heap import release_free_memory
from .index_db import (
    COMMIT_EVERY,
    IndexLockedError,
    Progress,
    SyncReport,
    _next_cache_stamp,
    _transaction,
    finite_vector,
    fitting_vector,
    follows_rebuilds,
    is_busy,
)

if TYPE_CHECKING:
    from .vectors import VectorMirror


class VectorWrites:
    """The vector half of :class:`~tui.engine.index.MemoryIndex` (a mixin over its writer,
    its per-thread readers and its embedder)."""

    embedder: TextEmbedder
    _mirror: VectorMirror | None
    cache_max_entries: int
    _mirror_loaded: bool
    _write_lock: threading.RLock
    _writer: sqlite3.Connection

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _writing(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _locked_error(self, exc: BaseException) -> IndexLockedError:
        raise NotImplementedError

    @follows_rebuilds
    def pending_embeddings(self) -> int:
        """How many chunks still have no vector."""
        return int(
            self._reader().execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
        )

    @follows_rebuilds
    def embed_pending(self, *, progress: Progress | None = None) -> SyncReport:
        """Give every chunk without a vector one: from the cache when its text was seen, else the model.

        Texts are embedded in length-sorted batches (by the embedder) and written in
        transactions of at most ``COMMIT_EVERY`` rows.
        """
        report = SyncReport()
        model = self.embedder.fingerprint
        reader = self._reader()
        # Cached vectors first, a page at a time (all of them at once were ~35 MB at 10k).
        hit_hashes: set[str] = set()
        hits = reader.execute(
            """SELECT c.id, e.embedding, c.hash FROM chunks c
               JOIN embedding_cache e ON e.model = ? AND e.hash = c.hash
               WHERE c.embedded = 0""",
            (model,),
        )
        while page := hits.fetchmany(COMMIT_EVERY):
            poisoned = {r[2] for r in page if not fitting_vector(r[1], self.embedder.dims)}
            if poisoned:  # non-finite (cached before they were refused) or of another width
                self._drop_cached(model, poisoned)
                page = [r for r in page if r[2] not in poisoned]
            self._store_vectors([(r[0], r[1]) for r in page], cache=None)
            hit_hashes.update(r[2] for r in page)
            report.cache_hits += len(page)
        del page
        self._touch_cache(model, sorted(hit_hashes))
        if report.cache_hits >= COMMIT_EVERY:
            release_free_memory()
        missing = reader.execute(
            """SELECT c.id, c.heading, c.text, c.hash FROM chunks c
               LEFT JOIN embedding_cache e ON e.model = ? AND e.hash = c.hash
               WHERE c.embedded = 0 AND e.hash IS NULL""",
            (model,),
        ).fetchall()
        if not missing:
            return report
        import numpy as np  # here: an index with nothing to embed never needs it

        # Embed distinct texts once, in slices so progress is visible and memory stays flat.
        by_hash: dict[str, list[int]] = {}
        texts: dict[str, str] = {}
        for chunk_id, heading, text, digest in missing:
            by_hash.setdefault(digest, []).append(chunk_id)
            texts[digest] = embed_text(heading, text)
        hashes = sorted(by_hash, key=lambda h: len(texts[h]))
        total = len(hashes)
        done = 0
        slice_size = max(COMMIT_EVERY, 512)
        for start in range(0, total, slice_size):
            batch = hashes[start : start + slice_size]

            def each_batch(made: int, _: int, before: int = done) -> None:
                if progress:  # after each of the model's batches, not each slice: a smooth count
                    progress("embedding", before + made, total)

            vectors = self.embedder.embed([texts[h] for h in batch], progress=each_batch)
            pairs: list[tuple[int, bytes]] = []
            cache_rows: list[tuple[str, str, bytes]] = []
            for digest, vector in zip(batch, vectors, strict=True):
                blob = np.asarray(vector, dtype=np.float32).tobytes()
                if not finite_vector(blob):
                    continue  # never stored nor cached: the chunk stays BM25-only
                cache_rows.append((model, digest, blob))
                pairs.extend((chunk_id, blob) for chunk_id in by_hash[digest])
            self._store_vectors(pairs, cache=cache_rows)
            del vectors, pairs, cache_rows
            release_free_memory()  # the model's activations: freed, but kept by malloc
            done += len(batch)
            report.embedded += len(batch)
        return report

    def _drop_cached(self, model: str, hashes: set[str]) -> None:
        with self._writing() as conn:
            conn.executemany(
                "DELETE FROM embedding_cache WHERE model = ? AND hash = ?",
                [(model, digest) for digest in sorted(hashes)],
            )

    def _store_vectors(
        self, pairs: Sequence[tuple[int, bytes]], cache: Sequence[tuple[str, str, bytes]] | None
    ) -> None:
        if not pairs:
            return
        with self._writing() as conn:
            if cache:
                stamp = _next_cache_stamp(conn)
                conn.executemany(
                    """INSERT OR REPLACE INTO embedding_cache(model, hash, embedding, last_used)
                       VALUES (?, ?, ?, ?)""",
                    [(*row, stamp) for row in cache],
                )
            # The chunk may have been deleted by a concurrent sync since we read it.
            live = {
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM chunks WHERE embedded = 0 AND id IN ({','.join('?' * len(pairs))})",
                    [p[0] for p in pairs],
                )
            }
            stored = [(i, b) for i, b in pairs if i in live]
            conn.executemany(
                "INSERT OR REPLACE INTO chunks_vec(rowid, embedding) VALUES (?, ?)", stored
            )
            conn.executemany(
                "UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i, _ in stored]
            )
        if stored and self._mirror_loaded:
            import numpy as np

            self.mirror.upsert(
                [i for i, _ in stored],
                np.frombuffer(b"".join(b for _, b in stored), dtype=np.float32).reshape(
                    len(stored), -1
                ),
            )

    @property
    def mirror(self) -> VectorMirror:
        """The in-RAM vector mirror, made at its first use (numpy loads with it)."""
        mirror = self._mirror
        if mirror is None:
            with self._write_lock:
                if self._mirror is None:
                    from .vectors import VectorMirror

                    self._mirror = VectorMirror(self.embedder.dims)
                mirror = self._mirror
        return mirror

    def _unmirror(self, chunk_ids: Sequence[int]) -> None:
        """Drop chunks from the mirror, if there is one yet."""
        if self._mirror is not None:
            self._mirror.remove(chunk_ids)

    def ensure_mirror(self) -> VectorMirror:
        """Load the in-RAM vector mirror from sqlite-vec on first use."""
        with self._write_lock:
            if not self._mirror_loaded:
                from .vectors import columns_of_blobs

                # Streamed into one preallocated matrix: fetching every blob first, then
                # joining them, held three copies of the vectors at once.
                count = self._writer.execute("SELECT count(*) FROM chunks_vec").fetchone()[0]
                blobs = self._writer.execute("SELECT rowid, embedding FROM chunks_vec")
                self.mirror.load_columns(*columns_of_blobs(blobs, count, self.embedder.dims))
                self._mirror_loaded = True
                release_free_memory()
        return self.mirror

    def _copy_cache_into(self, other: VectorWrites) -> None:
        """Every cache entry, with its recency, streamed (not held in memory) into ``other``.

        Nothing is evicted here: ``other``'s sync prunes once all its chunks are in, so an
        entry the rebuilt index uses is never lost. Rows of ``other``'s model that are not of
        its width are left behind (a rebuild is the recovery: it must not carry them over).
        Skipped if this file is unreadable.
        """
        try:
            rows = self._reader().execute(
                """SELECT model, hash, embedding, last_used FROM embedding_cache
                   WHERE model != ? OR length(embedding) = ?""",
                (other.embedder.fingerprint, other.embedder.dims * 4),
            )
            with _transaction(other._writer) as conn:
                conn.executemany(
                    """INSERT OR IGNORE INTO embedding_cache(model, hash, embedding, last_used)
                       VALUES (?, ?, ?, ?)""",
                    rows,
                )
        except sqlite3.DatabaseError as exc:
            if is_busy(exc):
                raise self._locked_error(exc) from exc

    def _touch_cache(self, model: str, hashes: Sequence[str]) -> None:
        """Mark cache entries as just used (their vectors were reused)."""
        if not hashes:
            return
        with self._write_lock, _transaction(self._writer) as conn:
            stamp = _next_cache_stamp(conn)
            conn.executemany(
                "UPDATE embedding_cache SET last_used = ? WHERE model = ? AND hash = ?",
                [(stamp, model, digest) for digest in hashes],
            )

    def prune_cache(self, max_entries: int | None = None) -> int:
        """Bound the embedding cache; returns how many entries were evicted.

        Keeps every entry a current chunk uses (this model, a hash in ``chunks``), however
        many; beyond those, keeps the most recently used up to ``max_entries`` in all (default:
        ``cache_max_entries``). Entries of other models are never in use. ``sync`` and
        ``sync_paths`` call it once their chunks are in, so a rebuild keeps what it reuses.
        """
        limit = self.cache_max_entries if max_entries is None else max_entries
        with self._write_lock:
            total = self._writer.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
            if total <= limit:
                return 0
            with _transaction(self._writer) as conn:
                return int(
                    conn.execute(
                        """DELETE FROM embedding_cache WHERE rowid IN (
                           SELECT rowid FROM embedding_cache
                           WHERE NOT (model = ? AND hash IN (SELECT hash FROM chunks))
                           ORDER BY last_used, rowid LIMIT ?)""",
                        (self.embedder.fingerprint, total - limit),
                    ).rowcount
                )
