"""Every memory tab's label in view at every width the app lays out, shorter labels where the
tab row is narrow (issue 32, item 20). The real app over the deck workspace."""

from __future__ import annotations

from typing import Any

import pytest
from support.pilot import SnapCompare, build_app, ready, wait_until
from textual.pilot import Pilot
from textual.widgets import Tab

from tui.app.panels.base import EnginePanel
from tui.app.panels.memory_panels import SHORT_TITLES, TABS, fitted_titles
from tui.app.textual_compat import ContentTabs
from tui.chat.chat import ChatEngine

#: 80: the memory panels fill a narrow screen (ctrl+t); 88-119: beside the chat; 120+: beside
#: the chat and the session list (120 is the narrowest tab row: 46 cells).
SIZES = [(80, 24), (88, 30), (100, 30), (120, 40), (140, 40), (160, 48)]


def hidden_labels(tabs: ContentTabs) -> list[str]:
    """The labels of the tabs not wholly inside the tab row as it is drawn."""
    row = tabs.region
    return [
        tab.label_text
        for tab in tabs.query(Tab)
        if tabs.scroll_x or not row.contains_region(tab.region)
    ]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_every_tab_label_is_in_view(engine: ChatEngine, size: tuple[int, int]) -> None:
    app = build_app(engine)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        if size[0] < 88:
            await pilot.press("ctrl+t")
        tabs = panels.query_one(ContentTabs)
        await wait_until(pilot, lambda: tabs.region.width > 0, "the tab row")
        await pilot.pause()
        assert hidden_labels(tabs) == []
        labels = [tab.label_text for tab in tabs.query(Tab)]
        assert labels == list(fitted_titles(tabs.region.width).values())
        # A shortened label keeps the whole title in its tooltip.
        for tab_id, label in zip(TABS, labels, strict=True):
            tab = tabs.query_one(f"#--content-tab-{tab_id}", Tab)
            assert label == TABS[tab_id] or (label == SHORT_TITLES[tab_id] and tab.tooltip)
        if size[0] >= 160 or size == (80, 24):
            assert labels == list(TABS.values())  # room for the whole titles

        # Unsaved MEMORY.md edits add ● to its tab: still every label in view.
        await pilot.press("f5")
        editor = panels.memory_editor
        await wait_until(pilot, lambda: app.focused is editor.text_area, "the editor")
        await pilot.press("x")
        memory_tab = tabs.query_one("#--content-tab-memory", Tab)
        await wait_until(pilot, lambda: memory_tab.label_text.endswith("●"), "the ● mark")
        await pilot.pause()
        assert hidden_labels(tabs) == []


def test_the_short_labels_fit_the_narrowest_tab_row() -> None:
    # 88 columns: the memory panels get 44 of them, 43 inside their border; ● included.
    labels = fitted_titles(43, dirty=True)
    assert sum(len(label) + 2 for label in labels.values()) <= 43
    assert labels["memory"] == SHORT_TITLES["memory"] + " ●"


def test_snapshot_tab_labels_at_120_columns(engine: ChatEngine, snap_compare: SnapCompare) -> None:
    app = build_app(engine)

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        for widget in app.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.press("f3", *"dog")
        panels = list(app.query(EnginePanel))
        search = app.main_screen.memory_panels.search_panel
        await wait_until(pilot, lambda: search.response is not None, "the results")
        await wait_until(
            pilot, lambda: not any(p.origins_pending for p in panels), "the memories' origins"
        )
        await pilot.pause(0.3)
        app.clear_notifications()

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
