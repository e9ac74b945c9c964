"""Snapshots of the whole app (fixed workspace, fixed dates, no cursor blink), in
``tests/app/__snapshots__/test_tui_app/``; how to update them: CONTRIBUTING.md, "Snapshots".

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fakeopenai import FakeOpenAI
from support.pilot import SHOWN_CONFIG, SIZE, SnapCompare, build_app, ready, send, wait_until
from textual.pilot import Pilot

from tui.app.app import MemdeckApp
from tui.app.panels.base import EnginePanel
from tui.chat.chat import ChatEngine


def _snapshot(
    snap_compare: SnapCompare,
    app: MemdeckApp,
    before: Callable[[Pilot[Any]], Any] | None,
    size: tuple[int, int] = SIZE,
) -> bool:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        if before is not None:
            result = before(pilot)
            if asyncio.iscoroutine(result):
                await result
        for widget in app.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        app.clear_notifications()
        await pilot.pause(0.1)
        panels = list(app.query(EnginePanel))
        await wait_until(
            pilot, lambda: not any(p.origins_pending for p in panels), "the memories' origins"
        )

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_main_screen(
    snap_compare: SnapCompare, engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(
        FakeOpenAI.tool_call("memory_search", {"query": "trip"}),
        FakeOpenAI.text(
            "You were planning a **trip to Lisbon** in March — still looking at hotels in "
            "Alfama?\n\n- window seat on the train\n- green tea on board"
        ),
        FakeOpenAI.text("Then Alfama it is. I will keep it in mind."),
    )
    app = build_app(engine)

    async def conversation(pilot: Pilot[Any]) -> None:
        await send(pilot, "Where was I planning to travel?")
        await send(pilot, "Yes, somewhere quiet")
        await pilot.press(*"hotels in Lisbon")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(
            pilot,
            lambda: (
                panel.draft == "hotels in Lisbon"
                and panel.injection is not None
                and "Alfama" in panel.injection.text
            ),
            "the preview",
        )
        await wait_until(
            pilot,
            lambda: app.main_screen.memory_panels.search_panel.query_text == "Yes, somewhere quiet",
            "the default search",
        )

    assert _snapshot(snap_compare, app, conversation)


def test_snapshot_without_a_model(
    snap_compare: SnapCompare, no_llm_engine: ChatEngine, tmp_path: Path
) -> None:
    app = build_app(no_llm_engine, tmp_path, config_file=Path(SHOWN_CONFIG))
    assert _snapshot(snap_compare, app, None)


def _layout_snapshot(
    snap_compare: SnapCompare, app: MemdeckApp, size: tuple[int, int], keys: tuple[str, ...]
) -> bool:
    async def before(pilot: Pilot[Any]) -> None:
        await send(pilot, "Which hotels in Lisbon did I look at?")
        await pilot.press(*keys)
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(
            pilot,
            lambda: (
                panel.injection is not None
                and panel.draft == app.main_screen.chat_pane.chat_input.value
            ),
            "the preview",
        )

    return _snapshot(snap_compare, app, before, size)


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), tuple("quiet room")),
        ((80, 24), ("ctrl+t",)),
        ((100, 30), tuple("quiet room")),
        ((160, 48), tuple("quiet room")),
    ],
    ids=["80x24-chat", "80x24-memory", "100x30", "160x48"],
)
def test_snapshot_layouts(
    snap_compare: SnapCompare,
    engine: ChatEngine,
    server: FakeOpenAI,
    size: tuple[int, int],
    keys: tuple[str, ...],
) -> None:
    server.enqueue(FakeOpenAI.text("You looked at hotels in **Alfama**, near the castle."))
    app = build_app(engine)
    assert _layout_snapshot(snap_compare, app, size, keys)


async def _select_search_result(pilot: Pilot[Any], app: MemdeckApp) -> None:
    """The Search tab with a query run and the cursor on the top result (its breakdown shown)."""
    from textual.widgets import DataTable

    await pilot.press("f3")
    panel = app.main_screen.memory_panels.search_panel
    panel.set_query("green tea or coffee")
    await wait_until(
        pilot,
        lambda: (
            panel.response is not None
            and panel.response.query == "green tea or coffee"
            and bool(panel.response.results)
        ),
        "results",
    )
    panel.query_one("#search-results", DataTable).focus()


async def _why_of_a_memory_md_answer(pilot: Pilot[Any], app: MemdeckApp) -> None:
    """ctrl+o after an answer found in MEMORY.md: the why? view with its breakdown."""
    await pilot.press("ctrl+o")
    panel = app.main_screen.memory_panels.injection_panel
    await wait_until(pilot, lambda: panel.turn is not None, "the turn's why?")
    await wait_until(pilot, lambda: "MEMORY.md#L5-5" in panel.items_text, "the MEMORY.md match")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("view", ["search", "why"])
def test_snapshot_explanations(
    snap_compare: SnapCompare, engine: ChatEngine, server: FakeOpenAI, size: tuple[int, int], view: str
) -> None:
    """A selected search result with its every score part; the why? of a MEMORY.md match."""
    server.enqueue(FakeOpenAI.text("Green tea, never coffee."))
    app = build_app(engine)

    async def before(pilot: Pilot[Any]) -> None:
        await send(pilot, "do I drink green tea or coffee?")
        if view == "search":
            await _select_search_result(pilot, app)
        else:
            await _why_of_a_memory_md_answer(pilot, app)

    assert _snapshot(snap_compare, app, before, size)
