"""Keep Python's full garbage collections out of the moments the user is watching.

CPython runs a full (generation 2) collection whenever enough objects have survived the young
collections, and it scans every tracked object while the event loop waits. A Textual chat holds
hundreds of thousands of objects (each widget brings its styles, caches and message queue), so
during a streamed answer, which creates them fastest, full collections measured 100-250 ms each
(``tests/bench/ui_speed.py``), the largest stalls the user saw.

The pacer takes full collections off the automatic schedule. The objects alive once the app is
ready (modules, classes, the engine) are frozen, so no collection scans them again. A periodic
check runs the full collection when the app is quiet: no key or mouse event, turn or indexing for
:data:`QUIET_SECONDS`. If the app is never quiet, :data:`FORCE_AFTER` young collections force a
full one anyway, so memory stays bounded. Young collections (a few milliseconds) are unchanged.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: Seconds without input, turn or indexing before a due full collection runs.
QUIET_SECONDS = 2.0
#: Generation-1 collections after which a full collection is due (CPython's own default is 10).
DUE_AFTER = 10
#: ...and after which one runs even if the app is busy.
FORCE_AFTER = 2_000
#: Generation-2 threshold that keeps CPython from starting full collections on its own.
_NEVER = 1_000_000_000


class GcPacer:
    """Full garbage collections at quiet moments (see the module docstring).

    ``busy()`` says whether work the user watches is under way (a streamed turn, indexing).
    Call :meth:`start` once the app is ready, :meth:`note_activity` on input, :meth:`check`
    periodically (about once a second) and :meth:`stop` on exit.
    """

    def __init__(
        self, busy: Callable[[], bool] = lambda: False, quiet_seconds: float = QUIET_SECONDS
    ) -> None:
        self._busy = busy
        self._quiet_seconds = quiet_seconds
        self._thresholds: tuple[int, int, int] | None = None
        self._last_activity = time.monotonic()
        #: Full collections this pacer ran (for tests and Stats).
        self.collections = 0

    @property
    def active(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thresholds is not None

    def start(self) -> None:
        """Collect once, freeze what is alive, and take full collections off the schedule."""
        if self.active:
            return
        gc.collect()
        gc.freeze()
        self._thresholds = gc.get_threshold()
        young, middle, _ = self._thresholds
        gc.set_threshold(young, middle, _NEVER)

    def stop(self) -> None:
        """Give CPython its own schedule back."""
        if self._thresholds is None:
            return
        gc.set_threshold(*self._thresholds)
        self._thresholds = None

    def note_activity(self) -> None:
        """The user did something (a key, the mouse): wait before collecting."""
        self._last_activity = time.monotonic()

    @property
    def last_activity(self) -> float:
        """When the app was last busy or used (``time.monotonic()``), as far as it knows."""
        return self._last_activity

    def quiet(self) -> bool:
        """True once the app has been quiet (no input, turn or indexing) for the quiet time."""
        if self._busy():
            self._last_activity = time.monotonic()
            return False
        return time.monotonic() - self._last_activity >= self._quiet_seconds

    def check(self) -> bool:
        """Run a full collection if one is due and the app is quiet (or overdue). True if it ran."""
        if not self.active:
            return False
        pending = gc.get_count()[2]
        if pending < DUE_AFTER:
            return False
        if pending < FORCE_AFTER and not self.quiet():
            return False
        gc.collect()
        self.collections += 1
        return True
