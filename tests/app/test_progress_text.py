"""The index progress line: a count at once, an estimate once the stage's rate is known."""

from __future__ import annotations

from tui.app.progress_text import ProgressClock, time_left


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_estimate_follows_the_rate_of_the_stage() -> None:
    clock = FakeClock()
    progress = ProgressClock(clock)
    assert progress.describe("embedding", 0, 2000) == "embedding 0/2,000 units"
    clock.now += 1.0  # too early to tell
    assert progress.describe("embedding", 80, 2000) == "embedding 80/2,000 units"
    clock.now += 4.0  # 400 units in 5 s: 1,600 left take 20 s
    assert progress.describe("embedding", 400, 2000) == "embedding 400/2,000 units · ~20 s left"
    assert progress.describe("embedding", 2000, 2000) == ""


def test_a_new_stage_or_run_starts_its_own_clock() -> None:
    clock = FakeClock()
    progress = ProgressClock(clock)
    progress.describe("indexing", 0, 100)
    clock.now += 10.0
    assert progress.describe("embedding", 10, 1000) == "embedding 10/1,000 units"
    clock.now += 5.0  # 90 units in 5 s since the stage began
    assert progress.describe("embedding", 100, 1000) == "embedding 100/1,000 units · ~50 s left"
    assert progress.describe("embedding", 5, 1000) == "embedding 5/1,000 units"  # a new run


def test_time_left_in_seconds_then_minutes() -> None:
    assert [time_left(s) for s in (0.2, 42, 89, 150, 1800)] == [
        "~1 s left",
        "~42 s left",
        "~89 s left",
        "~2 min left",
        "~30 min left",
    ]
