"""Hand memory freed by a heavy phase (model load, indexing) back to the operating system, and
read how much a process holds.

glibc keeps freed blocks inside the process: after the model loads or a batch of chunks is
embedded, hundreds of MB can stay resident though nothing uses them (tests/bench/memory.py
measured the app at ~485 MB after indexing 10k chunks, ~320 MB after ``malloc_trim``). Other C
libraries (musl, macOS) return memory differently; there this does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["release_free_memory", "resident_mb"]

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
