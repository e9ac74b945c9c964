"""Hand memory freed by a heavy phase (model load, indexing) back to the operating system, and
read how much a process holds.

glibc keeps freed blocks inside the process: after the model loads or a batch of chunks is
embedded, hundreds of MB can stay resident though nothing uses them (tests/bench/memory.py
measured the app at ~485 MB after indexing 10k chunks, ~320 MB after ``malloc_trim``). Other C
libraries (musl, macOS) return memory differently; there this does nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["release_free_memory", "resident_mb", "tune_process"]

#: Read by OpenBLAS, OpenMP and MKL when numpy is first imported.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def tune_process() -> None:
    """Settle this process's threads and allocator; entry points call it before numpy loads.

    - One BLAS thread: a query is a single matrix-vector product, and spinning BLAS threads
      fight onnxruntime and SQLite for the cores (tests/bench/search.py measured 0.9 ms vs
      6.2 ms for the 10k exact KNN). Child processes inherit it.
    - glibc only: at most two malloc arenas instead of one per thread and core. Every worker
      thread otherwise gets a heap of its own that rarely shrinks; with two, freed memory is
      reused across threads (tests/bench/memory.py). A fixed mmap threshold would return more,
      but costs ~40% more CPU when embedding (a page fault per fresh buffer), so the
      allocator's own thresholds stay.

    A user's own setting (``OPENBLAS_NUM_THREADS``…, any ``MALLOC_*``) wins.
    """
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # absent outside glibc (musl): nothing to tune
    except (OSError, AttributeError):
        return
    m_arena_max = -8
    mallopt(m_arena_max, 2)


_trim: Callable[[int], int] | None = None
_looked_up = False


def release_free_memory() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``); a few ms, so call it after
    heavy phases, not in hot paths."""
    global _trim, _looked_up
    if not _looked_up:
        _looked_up = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):
                _trim = None
    if _trim is not None:
        _trim(0)


def resident_mb(pid: int | None = None) -> float | None:
    """The resident memory (``VmRSS``) of process ``pid`` (this one by default) in MB, or None
    where ``/proc`` does not tell (not Linux, process gone)."""
    try:
        status = Path(f"/proc/{pid or 'self'}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            try:
                return round(int(line.split()[1]) / 1024, 1)
            except (IndexError, ValueError):
                return None
    return None
