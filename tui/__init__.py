"""memdeck: a terminal chat app with memory you can see and edit live."""

import os
import sys

__version__ = "0.1.0"

# One BLAS thread: a query is a single matrix-vector product, and spinning BLAS threads fight
# onnxruntime and SQLite for the two cores (tests/bench/search.py measured 0.9 ms vs 6.2 ms for
# the 10k exact KNN). Must happen before numpy is first imported; a user's setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _fewer_malloc_arenas() -> None:
    """glibc only: at most two malloc arenas instead of one per thread and core.

    Every worker thread otherwise gets a heap of its own that rarely shrinks; with two, freed
    memory is reused across threads (tests/bench/memory.py). Heavy phases also hand their freed
    pages back with :func:`tui.engine.heap.release_free_memory`. A fixed mmap threshold would
    return more, but costs ~40% more CPU when embedding (a page fault per fresh buffer), so the
    allocator's own thresholds stay. A user's MALLOC_* setting wins.
    """
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # absent outside glibc (musl): nothing to tune
    except (OSError, AttributeError):
        return
    m_arena_max = -8
    mallopt(m_arena_max, 2)


_fewer_malloc_arenas()
