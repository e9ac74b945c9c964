"""Query vectors for the engine's searches: the last few kept by (model, text), and new ones
computed on a worker thread while the search ranks the full text."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from .embeddings import EmbeddingError, TextEmbedder
from .search import QueryVector

if TYPE_CHECKING:
    import numpy as np

#: Query vectors kept for a repeated search (the preview's draft, then the turn).
QUERY_VECTORS_KEPT = 16


class QueryVectors:
    """The last :data:`QUERY_VECTORS_KEPT` query vectors, and the threads that embed new ones
    (started at the first; thread-safe)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._workers: ThreadPoolExecutor | None = None

    def _kept_vector(self, key: tuple[str, str]) -> np.ndarray | None:
        with self._lock:
            vector = self._kept.get(key)
            if vector is not None:
                self._kept.move_to_end(key)
            return vector

    def vector(self, embedder: TextEmbedder, text: str) -> np.ndarray:
        """The embedding of ``text``, kept or computed now."""
        key = (embedder.fingerprint, text)
        vector = self._kept_vector(key)
        if vector is not None:
            return vector
        vector = embedder.embed_query(text)
        vector.setflags(write=False)  # shared by whoever asks for the same text
        with self._lock:
            self._kept[key] = vector
            while len(self._kept) > QUERY_VECTORS_KEPT:
                self._kept.popitem(last=False)
        return vector

    def soon(
        self, embedder: TextEmbedder, text: str, dims: int, *, in_background: bool = True
    ) -> QueryVector | None:
        """The vector of ``text``: kept, else (``in_background``) what waits for it while a
        worker thread computes it (a search ranks the full text meanwhile), else computed now.
        The vector is None when a model that degrades failed (it says why), or when its
        vectors are not ``dims`` wide (the embedder was swapped for another model meanwhile);
        an inline model's failure is raised."""
        kept = self._kept_vector((embedder.fingerprint, text))
        if kept is not None:
            return kept
        future: Future[np.ndarray] | None = None
        if in_background:
            with self._lock:
                if self._workers is None:
                    self._workers = ThreadPoolExecutor(2, thread_name_prefix="memdeck-query")
                future = self._workers.submit(self.vector, embedder, text)

        def wait() -> np.ndarray | None:
            try:
                vector = future.result() if future is not None else self.vector(embedder, text)
            except EmbeddingError:
                if not (embedder.remote or embedder.problem):
                    raise
                return None
            return vector if len(vector) == dims else None

        return wait if in_background else wait()

    def close(self) -> None:
        """Let the worker threads end (a later :meth:`soon` starts new ones)."""
        with self._lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=False)
