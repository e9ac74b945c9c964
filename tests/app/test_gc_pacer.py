"""The garbage-collection pacer: full collections wait for a quiet app, never forever."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tui.app.gc_pacer import DUE_AFTER, FORCE_AFTER, GcPacer


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def young_collections(count: int) -> None:
    """Run ``count`` generation-1 collections (each one makes a full collection more due)."""
    for _ in range(count):
        gc.collect(1)


def test_start_takes_full_collections_off_the_schedule_and_stop_gives_it_back(
    restore_gc: None
) -> None:
    before = gc.get_threshold()
    pacer = GcPacer()
    pacer.start()
    assert pacer.active
    assert gc.get_threshold()[:2] == before[:2]
    assert gc.get_threshold()[2] > FORCE_AFTER
    assert gc.get_freeze_count() > 0
    pacer.stop()
    assert not pacer.active
    assert gc.get_threshold() == before


def test_a_due_collection_waits_while_busy_and_runs_once_quiet(restore_gc: None) -> None:
    busy = True
    pacer = GcPacer(busy=lambda: busy, quiet_seconds=0.0)
    pacer.start()
    young_collections(DUE_AFTER)
    assert not pacer.check()
    assert gc.get_count()[2] >= DUE_AFTER
    busy = False
    assert pacer.check()
    assert pacer.collections == 1
    assert gc.get_count()[2] == 0


def test_input_postpones_the_collection(restore_gc: None) -> None:
    pacer = GcPacer(quiet_seconds=60.0)
    pacer.start()
    young_collections(DUE_AFTER)
    pacer.note_activity()
    assert not pacer.check()
    assert pacer.collections == 0


def test_nothing_runs_before_it_is_due(restore_gc: None) -> None:
    pacer = GcPacer(quiet_seconds=0.0)
    pacer.start()
    assert not pacer.check()


def test_an_overdue_collection_runs_even_when_busy(restore_gc: None) -> None:
    pacer = GcPacer(busy=lambda: True, quiet_seconds=60.0)
    pacer.start()
    young_collections(FORCE_AFTER)
    assert pacer.check()
    assert pacer.collections == 1


def test_a_stopped_pacer_never_collects(restore_gc: None) -> None:
    pacer = GcPacer(quiet_seconds=0.0)
    young_collections(DUE_AFTER)
    assert not pacer.check()
