"""One memory-change stream (#17 item 2): each write is published once by the engine, tagged
with who wrote it; the watcher recognises the app's own writes; the panels and the header
refresh once per change, through one mechanism."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.fakeopenai import FakeOpenAI
from support.pilot import (
    app_ready,
    small_app,
    small_app_engine,  # noqa: F401 (the ``engine`` fixture)
    small_app_server,  # noqa: F401 (the ``server`` fixture)
    wait_until,
)

from tui.chat.chat import ChatEngine
from tui.engine.engine import FLUSH, OUTSIDE, MemoryChange, MemoryEngine
from tui.engine.fileio import atomic_write_text

SIZE = (160, 48)


def test_each_engine_write_is_published_once_with_its_origin(tmp_path: Path) -> None:
    engine = MemoryEngine(tmp_path / "ws")
    seen: list[MemoryChange] = []
    stop = engine.on_change(seen.append)
    try:
        engine.save_entry("Likes tea", confidence="high", source="user", origin="assistant: x")
        change = engine.append_daily("- walked the dog\n", origin=FLUSH)
        engine.sync_changed([change.paths[0]], origin=OUTSIDE)  # the watcher sees our write
        assert [(c.paths, c.origin) for c in seen] == [
            (("MEMORY.md",), "assistant: x"),
            (change.paths, FLUSH),
        ]
        # an outside edit is published once, as one
        log = engine.workspace.root / change.paths[0]
        atomic_write_text(log, log.read_text() + "- and fed the cat\n")
        engine.sync_changed([change.paths[0]], origin=OUTSIDE)
        engine.sync_changed([change.paths[0]], origin=OUTSIDE)
        assert [c.origin for c in seen] == ["assistant: x", FLUSH, OUTSIDE]
        # nothing written: nothing published; a stopped listener hears nothing more
        stop()
        engine.append_daily("- more\n")
        assert len(seen) == 3
    finally:
        engine.close()


def test_listeners_hear_changes_made_on_other_threads(tmp_path: Path) -> None:
    engine = MemoryEngine(tmp_path / "ws")
    threads: list[str] = []
    engine.on_change(lambda change: threads.append(threading.current_thread().name))
    try:
        worker = threading.Thread(target=engine.append_daily, args=("- x\n",), name="writer")
        worker.start()
        worker.join()
        assert threads == ["writer"]
    finally:
        engine.close()


@pytest.mark.parametrize("writer", ["model tool", "editor save"])
async def test_one_app_write_refreshes_each_panel_once_and_is_not_an_outside_edit(
    writer: str, engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        screen = app.main_screen
        watcher = screen.watcher
        assert watcher is not None
        await wait_until(pilot, watcher.ready.is_set, "the watcher")
        panels = screen.memory_panels
        refreshes: list[list[str]] = []
        panels.index_signal.subscribe(screen, refreshes.append)
        stats = panels.stats_panel
        logged_before = len(stats.events)
        batches_before = watcher.batches_handled

        if writer == "model tool":
            server.enqueue(FakeOpenAI.tool_call("save_memory", {"content": "Owns a kayak"}))
            server.enqueue(FakeOpenAI.text("Noted."))
            await pilot.press(*"note the kayak", "enter")
            await wait_until(pilot, lambda: len(server.requests) >= 2, "the answer")
            origin, path = "assistant: save_memory", "MEMORY.md"
        else:
            await pilot.press("f5")
            editor = panels.memory_editor
            await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
            editor.text_area.insert("- Plays the cello\n")
            await pilot.press("ctrl+s")
            origin, path = "editor", "MEMORY.md"

        await wait_until(pilot, lambda: watcher.batches_handled > batches_before, "the watcher")
        await wait_until(pilot, lambda: not watcher.syncing, "the watcher's sync")
        await pilot.pause(0.3)
        # one publish of the signal the panels and the header subscribe to: one refresh each
        assert refreshes == [[path]]
        logged = list(stats.events)[logged_before:]
        assert [line for line in logged if path in line and origin in line], logged
        assert not [line for line in logged if OUTSIDE in line], logged
