"""The Daily view marks what it shows (issue 32, items 7 and 14): Enter on a daily-log search
result opens its section with the result's own line marked and in view, and forgotten or
superseded entries are struck through, dimmed and labelled.

Pilot tests over a real MemoryEngine (real SQLite, BM25 search) in a fixed workspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from support.pilot import PanelHost, text_of, wait_until
from support.workspaces import write_workspace
from textual.widgets import DataTable, Markdown, Static
from textual.widgets.markdown import MarkdownBlock

from tui.app.panels import DailyTree, MemoryPanels
from tui.app.panels.daily_marks import mark_retired
from tui.engine.engine import MemoryEngine

NOW = date(2026, 11, 22)
SIZE = (100, 30)

MEMORY = "# Long-term Memory\n\n## Preferences\n- Drinks green tea\n"
LOG = "memory/2026-11-20.md"
DAILY = {
    LOG: (
        "# 2026-11-20\n\n## Daily Summary\n"  # lines 1-3
        "- Planned a trip to Lisbon in March.\n"  # line 4
        "- Booked the sleeper train to Porto.\n"  # line 5
        "- Had a cat called Tom <!-- mem id=c1 state=forgotten -->\n"  # line 6
        "- Dinner with Ana at the fish place.\n"  # line 7
    ),
}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """BM25 search over the fixed workspace."""
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY))
    eng.sync()
    yield eng
    eng.close()


def marked_blocks(daily: DailyTree) -> list[MarkdownBlock]:
    return list(daily.query_one("#daily-view", Markdown).query(".-marked").results(MarkdownBlock))


def block_text(block: MarkdownBlock) -> str:
    return (block.source or "").strip()


async def test_enter_on_a_daily_log_result_marks_its_line_in_the_daily_view(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryPanels(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panels = app.query_one(MemoryPanels)
        search = panels.search_panel
        panels.show_tab("search")
        search.set_query("sleeper train Porto")
        await wait_until(
            pilot,
            lambda: search.response is not None and bool(search.response.results),
            "the results",
        )
        assert search.response is not None
        top = search.response.results[0]
        assert (top.path, top.start_line) == (LOG, 5)
        table = search.query_one("#search-results", DataTable)
        await pilot.pause()
        table.focus()
        await wait_until(pilot, lambda: table.has_focus, "the results table focused")
        await pilot.press("enter")
        daily = panels.daily_tree
        await wait_until(pilot, lambda: panels.active_tab == "daily", "the Daily tab")
        await wait_until(pilot, lambda: bool(marked_blocks(daily)), "a marked line")
        # The result's own line is marked, not its whole section.
        [marked] = marked_blocks(daily)
        assert block_text(marked) == "- Booked the sleeper train to Porto."
        title = text_of(daily.query_one("#daily-title", Static))
        assert title.startswith(f"{LOG}:L3-7") and "L5" in title
        # ...and it is in view.
        scroll = daily.query_one("#daily-view-scroll")
        assert scroll.region.contains_region(marked.region)

        # Reading something else drops the mark.
        tree = daily.query_one("#daily-tree")
        tree.focus()
        await pilot.press("home", "down", "enter")  # the whole log
        await wait_until(pilot, lambda: not marked_blocks(daily), "the mark to go")
        assert daily.marked_line is None


async def test_a_forgotten_entry_is_struck_dimmed_and_labelled_in_the_daily_view(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        view = daily.query_one("#daily-view", Markdown)
        await wait_until(pilot, lambda: "Tom" in (view.source or ""), "the log shown")
        assert "- ~~Had a cat called Tom~~ *(forgotten)*" in view.source
        await wait_until(pilot, lambda: bool(view.query(".-retired")), "the dimmed entry")
        dimmed = [block_text(b) for b in view.query(".-retired").results(MarkdownBlock)]
        assert dimmed and all("Tom" in text for text in dimmed)
        live = [
            block
            for block in view.query(MarkdownBlock)
            if "Porto" in (block.source or "") and "Tom" not in (block.source or "")
        ]
        assert live and not any(block.has_class("-retired") for block in live)


def test_marking_keeps_every_line_in_its_place_and_shows_marks_as_text() -> None:
    text = (
        "## Done <!-- mem state=superseded -->\n"
        "- Uses *Vim* ~~daily~~ <!-- mem id=1 state=forgotten -->\n"
        "  1. nested <!-- mem id=2 -->\n"
        "- plain"
    )
    marked = mark_retired(text)
    assert marked.split("\n") == [
        "## ~~Done~~ *(superseded)*",
        "- ~~Uses \\*Vim\\* \\~\\~daily\\~\\~~~ *(forgotten)*",
        "  1. nested <!-- mem id=2 -->",
        "- plain",
    ]
