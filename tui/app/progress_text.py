"""Index progress as the header and Stats show it: a count, and once the rate is known, an
estimate of the time left ("embedding 420/2,000 units · ~19 s left")."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds of a stage before the estimate is shown (the first batches include warm-up).
ESTIMATE_AFTER_S = 2.0


def time_left(seconds: float) -> str:
    """``~19 s left`` / ``~3 min left``."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s left"
    return f"~{round(seconds / 60)} min left"


class ProgressClock:
    """Times each stage of a sync (or reindex) to estimate how long the rest takes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stage = ""
        self._started = 0.0
        self._done_at_start = 0

    def describe(self, stage: str, done: int, total: int) -> str:
        """The progress line for ``done`` of ``total`` in ``stage`` ("" once it is done)."""
        now = self._clock()
        if stage != self._stage or done < self._done_at_start:  # a new stage or a new run
            self._stage, self._started, self._done_at_start = stage, now, done
        if done >= total:
            self._stage = ""
            return ""
        units = " units" if stage == "embedding" else ""
        text = f"{stage} {done:,}/{total:,}{units}"
        elapsed, made = now - self._started, done - self._done_at_start
        if elapsed >= ESTIMATE_AFTER_S and made > 0:
            text += f" · {time_left((total - done) * elapsed / made)}"
        return text
