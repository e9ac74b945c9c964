"""memdeck: a terminal chat app with memory you can see and edit live."""

import os
import sys

__version__ = "0.1.0"

# One BLAS thread: a query is a single matrix-vector product, and spinning BLAS threads fight
# onnxruntime and SQLite for the two cores (tests/bench/search.py measured 0.9 ms vs 6.2 ms for
# the 10k exact KNN). Must happen before numpy is first imported; a user's setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _return_freed_memory_to_the_os() -> None:
    """glibc only: make freed blocks go back to the OS instead of staying in the process.

    By default glibc raises its mmap threshold to the size of any large block freed (up to
    32 MB), so after the 23 MB model file is read once, every later buffer of ONNX Runtime,
    numpy and SQLite is carved from heaps that rarely shrink, one heap per thread.
    tests/bench/memory.py measured the app's RSS after indexing 10k chunks at ~455 MB without
    this and ~320 MB with it, at no measurable cost in speed. A user's MALLOC_* setting wins.
    """
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # absent outside glibc (musl): nothing to tune
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8
    mallopt(m_mmap_threshold, 128 * 1024)  # fixed: no longer raised by each large free
    mallopt(m_trim_threshold, 128 * 1024)
    mallopt(m_arena_max, 2)


_return_freed_memory_to_the_os()
