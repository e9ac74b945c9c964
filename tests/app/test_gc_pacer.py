"""The garbage-collection pacer: full collections wait for a quiet app, never forever; a quiet
app gives the index's caches back."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest
from support.pilot import SIZE, build_app, ready, wait_until

from tui.app.gc_pacer import DUE_AFTER, FORCE_AFTER, GcPacer
from tui.chat.chat import ChatEngine


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


def test_quiet_means_not_busy_and_no_input_for_the_quiet_time() -> None:
    busy = True
    pacer = GcPacer(busy=lambda: busy, quiet_seconds=0.05)
    assert not pacer.quiet()  # busy: and the quiet time starts again after it
    marked = pacer.last_activity
    busy = False
    assert not pacer.quiet()
    time.sleep(0.06)
    assert pacer.quiet()
    assert pacer.last_activity == marked  # quiet since the last busy moment
    pacer.note_activity()
    assert pacer.last_activity > marked and not pacer.quiet()


async def test_a_quiet_app_gives_the_index_s_caches_back_once_a_quiet_spell(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.memory_releases == 1, "a quiet moment")
        await pilot.pause(1.5)
        assert app.memory_releases == 1  # once a quiet spell, not at every check
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press("a")  # input: the next quiet spell gives them back again
        await wait_until(pilot, lambda: app.memory_releases == 2, "the next quiet moment")
