"""Pilot tests of the memory panels, each mounted in a tiny host app over a real MemoryEngine.

Real SQLite (FTS5 + sqlite-vec), the real embedding model (loaded once per session by the
``embedder`` fixture), a fixed workspace in a temp dir and a fixed "now". Waits are bounded
polls (``wait_until``), never speed assertions. Snapshots are in
``tests/app/__snapshots__/test_tui_panels/``; how to update them: CONTRIBUTING.md, "Snapshots".
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from support.history_support import commit_memory
from support.pilot import WAIT_S, PanelHost, SnapCompare, fixed_clock, wait_until
from support.workspaces import write_workspace
from textual import on, work
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Markdown, Static, TabbedContent, TabPane, Tree
from textual.widgets.tree import TreeNode

from tui.app.messages import MemoryChanged
from tui.app.panels import (
    DailyTree,
    InjectionPanel,
    MemoryEditor,
    MemoryPanels,
    SearchPanel,
    StatsPanel,
)
from tui.app.panels.base import EnginePanel, format_score
from tui.app.panels.daily_tree import shown_text
from tui.app.panels.history_panel import HistoryPanel
from tui.app.panels.injection_panel import describe_items
from tui.app.panels.result_table import breakdown_cells
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen
from tui.app.workspace_watcher import WorkspaceWatcher, is_watched, plan_sync
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryChange, MemoryEngine
from tui.engine.fileio import atomic_write_text
from tui.engine.options import SearchOptions
from tui.engine.search_results import SearchResponse
from tui.engine.workspace import Workspace

NOW = date(2026, 11, 22)
SIZE = (100, 30)
#: Upper bound for anything the UI waits for; a hang fails instead of blocking forever.

MEMORY = """# Long-term Memory

## Preferences
- Prefers dark mode in every editor <!-- mem id=a1 conf=high src=user at=2026-11-01 -->
- Writes Python with snake_case names and tests everything with pytest

## Family
- Has a dog called Max who loves the park
"""

DAILY = {
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Daily Summary\n"
        "- Planned a trip to Lisbon in March, looking at hotels in Alfama.\n\n"
        "## Long-term Facts\n- Wants a quiet hotel room.\n"
    ),
    "memory/2026-11-21.md": (
        "# 2026-11-21\n\n## Daily Summary\n"
        "- Fixed a flaky test in watcher.py caused by a race condition.\n"
    ),
    "memory/2026-10-02.md": "# 2026-10-02\n\n## Daily Summary\n- Walked Max in the park.\n",
}


@pytest.fixture
def engine(tmp_path: Path, embedder: Embedder) -> Iterator[MemoryEngine]:
    """Hybrid search: the real model, everything embedded; the history's first commit at a
    fixed time (the memories' origins are shown)."""
    root = write_workspace(tmp_path / "ws", MEMORY, DAILY)
    commit_memory(root)
    eng = MemoryEngine(root, embedder=embedder)
    eng.sync()
    yield eng
    eng.close()


@pytest.fixture
def bm25_engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """The model not loaded yet: BM25-only search, as right after start-up."""
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY))
    eng.sync()
    yield eng
    eng.close()


class DraftHost(PanelHost):
    """A chat-like input above the injection panel, wired as the app will wire it."""

    def compose(self) -> ComposeResult:
        yield Input(id="draft", placeholder="message…")
        yield from super().compose()

    @on(Input.Changed, "#draft")
    def _draft_changed(self, event: Input.Changed) -> None:
        self.query_one(InjectionPanel).preview(event.value)


class WatcherHost(PanelHost):
    """Runs the workspace watcher in one exclusive worker, as the app does; records the changes
    the engine publishes (the panels subscribe to them themselves)."""

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__(lambda: MemoryPanels(engine, now=NOW, clock=fixed_clock))
        self.changes: list[MemoryChanged] = []
        self.failures: list[MemoryChanged] = []
        #: ``watcher.syncing`` as each change was reported (it is reported mid-sync).
        self.syncing_seen: list[bool] = []
        self.watcher = WorkspaceWatcher(engine, self.failures.append)
        self._stop = engine.on_change(self._received)

    def _received(self, change: MemoryChange) -> None:  # on the watcher's thread
        self.changes.append(MemoryChanged.of(change))
        self.syncing_seen.append(self.watcher.syncing)

    def on_mount(self) -> None:
        super().on_mount()
        self.watch_workspace()

    def on_unmount(self) -> None:
        self._stop()

    @work(exclusive=True, group="workspace-watcher", exit_on_error=False)
    async def watch_workspace(self) -> None:
        await self.watcher.run()


async def settle(pilot: Pilot[Any]) -> None:
    """Run pending timers, workers and the messages they post until the app is quiet."""
    await pilot.pause(0.3)  # past the debounce timers
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def text_of(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def text_of_renderable(widget: Static) -> str:
    """Plain text of a Static that shows a Rich renderable (e.g. a table grid)."""
    console = Console(width=100, record=True, color_system=None)
    console.print(widget.content)
    return console.export_text()


# -- injection preview --


async def test_typing_a_draft_changes_the_injection_preview(engine: MemoryEngine) -> None:
    app = DraftHost(lambda: InjectionPanel(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(InjectionPanel)
        await wait_until(pilot, lambda: panel.injection is not None, "the first preview")
        assert panel.injection is not None
        assert "## Long-term Memory" in panel.injection.text
        assert "## Relevant Memories" not in panel.injection.text  # empty draft: MEMORY.md only
        budget = text_of(panel.query_one("#inject-budget", Static))
        assert f"{panel.injection.report.tokens_used} / 2000 tokens" in budget

        await pilot.click("#draft")
        await pilot.press(*"where should we stay in Lisbon?")
        await wait_until(
            pilot,
            lambda: panel.injection is not None and "Alfama" in panel.injection.text,
            "the preview of the typed draft",
        )
        assert panel.draft == "where should we stay in Lisbon?"
        assert "## Relevant Memories" in panel.injection.text
        assert "### memory/2026-11-20.md\n- L" in text_of(panel.query_one("#inject-block", Static))


async def test_a_burst_of_keystrokes_is_coalesced_into_one_rebuild(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: InjectionPanel(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(InjectionPanel)
        await wait_until(pilot, lambda: panel.injection is not None, "the first preview")
        before = panel._previews.latest
        draft = "where should we stay in Lisbon?"
        for end in range(1, len(draft) + 1):
            panel.preview(draft[:end])
        await wait_until(
            pilot,
            lambda: panel.injection is not None and "Alfama" in panel.injection.text,
            "the preview of the whole draft",
        )
        # at most the leading-edge rebuild of the first keystroke and one when typing paused
        assert panel._previews.latest - before <= 2


async def test_a_rebuilt_preview_that_shows_the_same_is_not_drawn_again(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: InjectionPanel(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(InjectionPanel)
        await wait_until(pilot, lambda: panel.injection is not None, "the first preview")
        block = panel.query_one("#inject-block", Static)
        shown = block.content
        first = panel.injection
        panel.index_changed(["memory/2026-11-20.md"])  # an index change: the same block again
        await wait_until(pilot, lambda: panel.injection is not first, "the rebuilt preview")
        assert block.content is shown, "the same block was given to the Static again"
        panel.preview("where should we stay in Lisbon?")
        await wait_until(
            pilot,
            lambda: panel.injection is not None and "Alfama" in panel.injection.text,
            "another preview",
        )
        assert block.content is not shown
        assert "Alfama" in text_of(block)


async def test_the_preview_explains_what_was_cut(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: InjectionPanel(engine, budget=40, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(InjectionPanel)
        panel.preview("Lisbon hotel")
        await wait_until(
            pilot,
            lambda: (
                panel.injection is not None
                and panel.draft == "Lisbon hotel"
                and bool(panel.injection.report.cut)
            ),
            "a preview with cuts",
        )
        assert not panel.query_one("#inject-cuts").has_class("-empty")
        shown = panel.items_text
        assert "MEMORY.md truncated" in shown
        assert panel.injection is not None
        for item in panel.injection.report.cut:
            assert item.location in shown and item.reason in shown


# -- search --


async def test_search_rows_carry_the_breakdown(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: SearchPanel(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(SearchPanel)
        panel.set_query("trip to Lisbon")
        await wait_until(pilot, lambda: panel.response is not None, "search results")
        assert panel.response is not None and panel.response.results
        assert text_of(panel.query_one("#search-mode", Static)).startswith("hybrid")
        table = panel.query_one("#search-results", DataTable)
        assert [str(c.label) for c in table.columns.values()] == [
            "source",
            "score",
            "vector",
            "text (bm25)",
            "near",
            "update",
            "recency",
            "decay",
            "window",
            "conf",
        ]
        assert table.row_count == len(panel.response.results)
        for index, result in enumerate(panel.response.results):
            assert tuple(str(cell) for cell in table.get_row_at(index)) == breakdown_cells(result)
        top = panel.response.results[0]
        source, score, vector, _text, _near, update, recency, decay, window, confidence = map(
            str, table.get_row_at(0)
        )
        assert float(decay) == pytest.approx(top.breakdown.decay, abs=0.006)
        assert source == f"{top.path}:L{top.start_line}-{top.end_line}" and "Lisbon" in top.text
        assert vector != "—" and float(vector) == pytest.approx(top.breakdown.vector, abs=0.006)
        # no time words in the query: age is not applied
        assert float(recency) == pytest.approx(1.0) and float(window) == pytest.approx(1.0)
        assert update == "—"  # and no update links
        assert confidence == top.breakdown.confidence


@pytest.fixture
def changed_fact(tmp_path: Path, embedder: Embedder) -> Iterator[MemoryEngine]:
    """MEMORY.md says Vim (line 3); a later daily log tells of the switch to Zed."""
    memory = "# Long-term Memory\n\n- My editor is Vim\n- Keeps a paper notebook\n"
    daily = {"memory/2026-11-20.md": "# 2026-11-20\n\n- Switched from Vim to Zed for everything\n"}
    eng = MemoryEngine(write_workspace(tmp_path / "ws", memory, daily), embedder=embedder)
    eng.sync()
    yield eng
    eng.close()


async def test_a_memory_md_fact_a_log_changed_says_so_in_search(
    changed_fact: MemoryEngine,
) -> None:
    eng = changed_fact
    app = PanelHost(lambda: SearchPanel(eng, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(SearchPanel)
        panel.set_query("which editor do I use now?")
        await wait_until(pilot, lambda: panel.response is not None, "search results")
        assert panel.response is not None
        rows = [r.path for r in panel.response.results]
        assert "MEMORY.md" in rows
        table = panel.query_one("#search-results", DataTable)
        table.move_cursor(row=rows.index("MEMORY.md"))
        await wait_until(
            pilot,
            lambda: (
                "changed on 2026-11-20?"
                in text_of(panel.query_one("#search-context-title", Static))
            ),
            "the MEMORY.md entry marked as changed",
        )


def test_the_inject_preview_marks_a_memory_md_fact_a_log_changed(
    changed_fact: MemoryEngine,
) -> None:
    injection = changed_fact.inject("which editor do I use now?", now=NOW)
    rows = {
        location: line.plain
        for line, location in describe_items(injection.report, injection.results)
    }
    assert rows["MEMORY.md#L3-3"].endswith(
        "always injected (in Long-term Memory) · changed on 2026-11-20? (memory/2026-11-20.md#L3-3)"
    )
    assert "changed on" not in rows["memory/2026-11-20.md#L3-3"]


async def test_search_says_bm25_only_while_the_model_loads(bm25_engine: MemoryEngine) -> None:
    app = PanelHost(lambda: SearchPanel(bm25_engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(SearchPanel)
        await pilot.click("#search-query")
        await pilot.press(*"Lisbon", "enter")
        await wait_until(pilot, lambda: panel.response is not None, "search results")
        assert text_of(panel.query_one("#search-mode", Static)).startswith(
            "BM25 only — model loading"
        )
        table = panel.query_one("#search-results", DataTable)
        assert table.row_count >= 1
        assert str(table.get_row_at(0)[2]) == "—"  # no vector score yet


async def test_selecting_a_row_shows_the_chunk_in_its_file(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: SearchPanel(engine, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(SearchPanel)
        panel.set_query("hotel in Lisbon")
        await wait_until(
            pilot,
            lambda: panel.response is not None and len(panel.response.results) >= 2,
            "two results",
        )
        assert panel.response is not None
        table = panel.query_one("#search-results", DataTable)
        table.focus()
        await pilot.press("down")
        second = panel.response.results[1]
        title = panel.query_one("#search-context-title", Static)
        await wait_until(
            pilot,
            lambda: text_of(title).startswith(
                f"{second.path}:L{second.start_line}-{second.end_line}"
            ),
            "the second row's context",
        )
        # every part of the score is there for the selected result
        for part in ("relevance", "hybrid", "recency", "decay", "window", "conf", "vector"):
            assert part in text_of(title)
        shown = text_of_renderable(panel.query_one("#search-context", Static))
        file_lines = (engine.workspace.root / second.path).read_text().splitlines()
        for number in range(second.start_line, second.end_line + 1):
            assert f"{number} ▌{file_lines[number - 1]}" in shown


class FailingSearchEngine(MemoryEngine):
    """An engine whose searches fail, as when the index file is unreadable."""

    def search(
        self,
        query: str,
        options: SearchOptions | None = None,
        *,
        now: date | None = None,
        **overrides: Any,
    ) -> SearchResponse:
        raise RuntimeError("index unreadable")


async def test_a_failing_engine_call_is_shown_not_raised(tmp_path: Path) -> None:
    broken = FailingSearchEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY))
    app = PanelHost(lambda: SearchPanel(broken, now=NOW))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(SearchPanel)
        panel.set_query("Lisbon")
        mode = panel.query_one("#search-mode", Static)
        await wait_until(pilot, lambda: "index unreadable" in text_of(mode), "the error shown")
        assert app.is_running
    broken.close()


# -- MEMORY.md editor --


async def test_editing_and_saving_memory_changes_search_results(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryPanels(engine, now=NOW, clock=fixed_clock))
    async with app.run_test(size=SIZE) as pilot:
        panels = app.query_one(MemoryPanels)
        panels.explain("kayaking")
        search = panels.search_panel
        await wait_until(pilot, lambda: search.response is not None, "the first search")
        assert search.response is not None
        assert not any(r.path == "MEMORY.md" for r in search.response.results)

        panels.show_tab("memory")
        editor = panels.memory_editor
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        area = editor.text_area
        area.focus()
        area.move_cursor(area.document.end)
        await pilot.press(*"- Goes sea kayaking in Norway every summer")
        assert editor.is_dirty
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert "sea kayaking in Norway" in engine.workspace.memory_file.read_text()

        panels.show_tab("search")  # (a hidden Search tab searches again when shown)
        await wait_until(
            pilot,
            lambda: (
                search.response is not None
                and any(
                    "kayaking" in r.text and r.path == "MEMORY.md" for r in search.response.results
                )
            ),
            "search to follow the saved MEMORY.md",
        )
        assert any("editor: MEMORY.md" in event for event in panels.stats_panel.events)


async def test_an_outside_edit_reloads_a_clean_buffer(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        theirs = MEMORY + "- Edited in vim: prefers tabs over spaces\n"
        atomic_write_text(engine.workspace.memory_file, theirs)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: editor.text_area.text == theirs, "the buffer to reload")
        assert not editor.is_dirty
        assert app.screen is not None and not isinstance(app.screen, MemoryConflictScreen)
        assert "reloaded" in text_of(editor.query_one("#memory-status", Static))


def _asking(app: App[Any]) -> bool:
    """The conflict question is on screen, laid out, ready for clicks."""
    screen = app.screen
    return isinstance(screen, MemoryConflictScreen) and bool(
        screen.query("#conflict-mine") and screen.query_one("#conflict-mine").region
    )


async def _dirty_editor_with_outside_change(
    pilot: Pilot[Any], editor: MemoryEditor, engine: MemoryEngine
) -> tuple[str, str]:
    """Type into the editor, then change MEMORY.md behind its back. Returns (mine, theirs)."""
    await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
    area = editor.text_area
    area.focus()
    area.move_cursor(area.document.end)
    await pilot.press(*"- Typed in memdeck")
    mine = area.text
    theirs = MEMORY + "- Written by another editor\n"
    atomic_write_text(engine.workspace.memory_file, theirs)
    return mine, theirs


async def test_an_outside_edit_on_a_dirty_buffer_asks_and_keep_mine_keeps_it(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        mine, theirs = await _dirty_editor_with_outside_change(pilot, editor, engine)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: _asking(app), "the question")
        await pilot.click("#conflict-diff-button")
        diff = text_of(app.screen.query_one("#conflict-diff", Static))
        assert "+- Typed in memdeck" in diff and "-- Written by another editor" in diff
        await pilot.click("#conflict-mine")
        await wait_until(pilot, lambda: not isinstance(app.screen, MemoryConflictScreen), "answer")
        # Nothing was overwritten either way: the buffer is mine, the disk still theirs...
        assert editor.text_area.text == mine
        assert engine.workspace.memory_file.read_text() == theirs
        assert editor.is_dirty
        # ...until the user saves, knowing.
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert (
            engine.workspace.memory_file.read_text() == mine + "\n"
        )  # a save ends the file with a newline


async def test_an_outside_edit_on_a_dirty_buffer_asks_and_load_theirs_loads_it(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        _mine, theirs = await _dirty_editor_with_outside_change(pilot, editor, engine)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: _asking(app), "the question")
        await pilot.click("#conflict-theirs")
        await wait_until(pilot, lambda: editor.text_area.text == theirs, "their version")
        assert not editor.is_dirty
        assert engine.workspace.memory_file.read_text() == theirs


async def test_a_second_outside_edit_while_deciding_is_shown_in_the_open_question(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        mine, _theirs = await _dirty_editor_with_outside_change(pilot, editor, engine)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: _asking(app), "the first question")
        first = app.screen
        assert isinstance(first, MemoryConflictScreen)
        newer = MEMORY + "- Written again while the question was open\n"
        atomic_write_text(engine.workspace.memory_file, newer)
        editor.file_changed_on_disk()
        # One question, showing the newest version (not a second one queued behind it).
        await wait_until(pilot, lambda: first.disk_text == newer, "the question to show it")
        await pilot.click("#conflict-mine")  # "mine" over the newest version
        await wait_until(pilot, lambda: not isinstance(app.screen, MemoryConflictScreen), "answer")
        assert engine.workspace.memory_file.read_text() == newer
        assert editor.text_area.text == mine and editor.base is not None
        assert editor.base.text == newer  # a save now replaces the version the user saw


async def test_a_save_refused_by_an_outside_edit_asks_and_saves_on_keep_mine(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        mine, theirs = await _dirty_editor_with_outside_change(pilot, editor, engine)
        await pilot.press("ctrl+s")  # the editor has not heard of the outside change yet
        await wait_until(pilot, lambda: _asking(app), "the question")
        assert app.screen.while_saving  # type: ignore[attr-defined]
        assert engine.workspace.memory_file.read_text() == theirs  # the refused save wrote nothing
        await pilot.press("escape")  # decide later: still nothing written
        await wait_until(pilot, lambda: not isinstance(app.screen, MemoryConflictScreen), "escape")
        assert engine.workspace.memory_file.read_text() == theirs and editor.is_dirty
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: _asking(app), "asked again")
        await pilot.click("#conflict-mine")
        await wait_until(
            pilot,
            lambda: engine.workspace.memory_file.read_text() == mine + "\n",
            "my version saved",
        )


# -- daily tree --


async def test_the_daily_tree_shows_a_new_entry_after_reload(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        tree = daily.query_one("#daily-tree", Tree)
        await wait_until(pilot, lambda: len(daily.logs) == 3, "the daily logs")
        labels = [str(node.label) for node in tree.root.children]
        assert labels == ["2026-11 · November 2026", "2026-10 · October 2026"]
        newest = tree.root.children[0].children[0]
        assert str(newest.label) == "2026-11-21 Sat"
        assert [str(n.label) for n in newest.children] == ["Daily Summary  L3"]

        engine.store.append_daily("## Daily Summary\n- Booked the hotel in Alfama.", NOW)
        daily.reload()
        await wait_until(pilot, lambda: len(daily.logs) == 4, "the new log")
        newest = tree.root.children[0].children[0]
        assert str(newest.label) == "2026-11-22 Sun"
        entry = newest.children[0]
        tree.select_node(entry)
        view_title = daily.query_one("#daily-title", Static)
        await wait_until(
            pilot, lambda: text_of(view_title) == "memory/2026-11-22.md:L3-4", "the entry shown"
        )

        # Appending to the shown log keeps the tree open where it was and re-renders the entry.
        engine.store.append_daily("## Daily Summary\n- Paid the deposit.", NOW)
        daily.index_changed(["memory/2026-11-22.md"])
        await wait_until(
            pilot,
            lambda: len(tree.root.children[0].children[0].children) == 2,
            "the second entry",
        )
        assert tree.root.children[0].children[0].is_expanded
        await wait_until(
            pilot,
            lambda: (
                tree.cursor_node is not None
                and tree.cursor_node.data is not None
                and tree.cursor_node.data.key == "memory/2026-11-22.md#L3"
            ),
            "the cursor to stay on its entry",
        )


async def test_the_cursor_goes_to_a_node_just_added_before_the_tree_is_drawn() -> None:
    """A repaint draws only what changed, so the tree may not have listed its lines when the
    cursor is put on a node it just got (its line was -1 then: the cursor went nowhere)."""
    from tui.app.panels.daily_tree import cursor_to

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield Tree("root")

    async with Host().run_test(size=(40, 12)) as pilot:
        tree = pilot.app.query_one(Tree)
        await pilot.pause()
        tree.clear()
        tree.root.expand()
        month = tree.root.add("2026-11", data="month", expand=True)
        entry = month.add_leaf("Daily Summary  L3", data="entry")
        cursor_to(tree, entry)
        assert tree.cursor_node is entry


async def test_a_log_s_many_entries_are_added_to_the_tree_with_one_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each node added refreshed the tree (a long log's entries: 11-19 ms of one turn of the
    event loop); added in :meth:`DailyLogTree.adding`, they are laid out once, all shown."""
    from tui.app.panels.daily_log_tree import DailyLogTree

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield DailyLogTree("memory/")

    layouts: list[Tree[str]] = []
    textual_invalidate = Tree._invalidate

    def counted(tree: Tree[str]) -> None:
        layouts.append(tree)
        textual_invalidate(tree)

    monkeypatch.setattr(Tree, "_invalidate", counted)  # Textual's, counted: ours defers it
    async with Host().run_test(size=(40, 12)) as pilot:
        tree: DailyLogTree[str] = pilot.app.query_one(DailyLogTree)
        tree.show_root = False
        await pilot.pause()
        layouts.clear()
        with tree.adding():
            tree.clear()
            log = tree.root.add("2026-11-22.md", data="log")
            for number in range(300):
                log.add_leaf(f"Entry {number}  L{3 + number}", data=f"entry {number}")
            log.expand()
            assert layouts == []
        assert layouts == [tree]
        await pilot.pause()
        assert tree.last_line == 300  # the log and its 300 entries
        assert tree.render_line(0).text.startswith("▼ 2026-11-22.md")
        tree.move_cursor(log.children[-1])
        assert tree.cursor_line == 300


async def test_the_daily_tree_makes_nodes_for_open_branches_and_reparses_changed_logs(
    bm25_engine: MemoryEngine,
) -> None:
    """With many logs, a rebuild makes the months and the open branches only (a month's logs
    and a log's entries appear when it is expanded), and a reload re-parses only the logs
    that changed on disk."""
    memory_dir = bm25_engine.workspace.root / "memory"
    for day in range(1, 29):
        for month in (7, 8, 9):
            (memory_dir / f"2026-{month:02d}-{day:02d}.md").write_text(
                f"# 2026-{month:02d}-{day:02d}\n\n## Morning\n- Ran.\n\n## Evening\n- Read.\n"
            )
    app = PanelHost(lambda: DailyTree(bm25_engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        tree = daily.query_one("#daily-tree", Tree)
        await wait_until(pilot, lambda: len(daily.logs) == 3 + 3 * 28, "the daily logs")
        months = tree.root.children
        assert [str(m.label)[:7] for m in months] == [
            "2026-11",
            "2026-10",
            "2026-09",
            "2026-08",
            "2026-07",
        ]
        # the newest month is open with its newest log; the other months have no nodes yet
        assert months[0].is_expanded and len(months[0].children) == 2
        assert all(not m.children and m.allow_expand for m in months[1:])
        assert sum(1 for _ in walk(tree.root)) == 5 + 2 + 1  # months, Nov logs, 1 entry

        august = months[3]
        august.expand()
        await wait_until(pilot, lambda: len(august.children) == 28, "August's logs")
        last = august.children[0]
        assert str(last.label) == "2026-08-28 Fri" and not last.children
        last.expand()
        await wait_until(pilot, lambda: len(last.children) == 2, "the log's entries")
        assert [str(n.label) for n in last.children] == ["Morning  L3", "Evening  L6"]

        # a reload keeps unchanged outlines and re-parses the edited log
        before = {log.path: log for log in daily.logs}
        (memory_dir / "2026-08-28.md").write_text("# 2026-08-28\n\n## Night\n- Slept.\n")
        daily.reload()
        await wait_until(
            pilot,
            lambda: (
                next(log for log in daily.logs if log.path.endswith("2026-08-28.md"))
                is not before["memory/2026-08-28.md"]
            ),
            "the edited log re-parsed",
        )
        unchanged = [log for log in daily.logs if not log.path.endswith("2026-08-28.md")]
        assert all(log is before[log.path] for log in unchanged)
        august = tree.root.children[3]
        assert august.is_expanded  # still open after the rebuild, with the new entry
        edited = august.children[0]
        assert edited.is_expanded and [str(n.label) for n in edited.children] == ["Night  L3"]


async def test_a_reload_that_changes_no_section_keeps_the_tree_and_shows_the_new_text(
    engine: MemoryEngine,
) -> None:
    """A log whose text changed inside an entry (or that was only embedded) lists the same:
    the tree's nodes stay (a long log's rebuild stalled the screen), the view shows the text."""
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        tree = daily.query_one("#daily-tree", Tree)
        await wait_until(pilot, lambda: len(daily.logs) == 3, "the daily logs")
        newest = tree.root.children[0].children[0]
        view = daily.query_one("#daily-view", Markdown)
        await wait_until(pilot, lambda: "Daily Summary" in view.source, "the newest log shown")
        assert newest.data is not None
        path = engine.workspace.root / newest.data.key
        text = path.read_text()
        path.write_text(text.rstrip("\n") + " (and a late addition)\n")

        daily.index_changed([newest.data.key])
        await wait_until(pilot, lambda: "(and a late addition)" in view.source, "the new text")
        assert tree.root.children[0].children[0] is newest  # no node was rebuilt


def test_the_daily_view_renders_a_long_log_cut_at_an_entry_with_fences_closed() -> None:
    log = "# 2026-11-22\n\n" + "\n".join(f"## Entry {n}\n- one\n- two\n" for n in range(200))
    shown = shown_text(log, 100)
    assert len(shown.splitlines()) <= 100 + 2
    kept = shown.split("\n\n*…")[0]
    assert log.startswith(kept) and log[len(kept) :].startswith("\n## Entry")  # at an entry
    next_entry = log[len(kept) :].lstrip("\n").splitlines()[0]
    left = len(log.splitlines()) - log.splitlines().index(next_entry)
    assert shown.endswith(f"*… {left:,} more lines: select an entry in the tree to read it.*\n")
    fenced = "# 2026-11-22\n\n## Code\n```python\n" + "x = 1\n" * 300 + "```\n"
    cut = shown_text(fenced, 50).split("\n\n*…")[0]
    assert cut.endswith("x = 1\n```") and cut.count("```") == 2  # the open fence is closed
    assert shown_text("# short\n- log\n", 100) == "# short\n- log\n"


def walk(node: TreeNode[Any]) -> Iterator[TreeNode[Any]]:
    """Every node below ``node``."""
    for child in node.children:
        yield child
        yield from walk(child)


# -- stats --


async def test_stats_show_the_index_flushes_and_events(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: StatsPanel(engine, clock=fixed_clock))
    async with app.run_test(size=SIZE) as pilot:
        stats = app.query_one(StatsPanel)
        await wait_until(pilot, lambda: bool(stats.stats), "the stats")
        rows = dict((label, value.plain) for label, value in stats.describe_stats())
        assert rows["files"] == "4" and rows["embedded"] == f"{rows['chunks']} / {rows['chunks']}"
        assert rows["model"].endswith("loaded")
        stats.record_flush("idle", "3 messages → memory/2026-11-22.md")
        stats.log_event("watcher: memory/2026-11-22.md re-indexed")
        flushes = text_of_renderable(stats.query_one("#stats-flushes", Static))
        assert "idle 09:30" in flushes and "3 messages" in flushes
        assert stats.events[-1] == "09:30:00 watcher: memory/2026-11-22.md re-indexed"
        log = stats.query_one("#stats-log-lines", Static)
        await wait_until(pilot, lambda: "re-indexed" in text_of(log), "log lines")



class StatsBehindATab(App[None]):
    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__()
        self.engine = engine

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="front"):
            with TabPane("front", id="front"):
                yield Static("in front")
            with TabPane("stats", id="stats"):
                yield StatsPanel(self.engine, clock=fixed_clock)


async def test_progress_on_a_hidden_stats_tab_lays_nothing_out(engine: MemoryEngine) -> None:
    """Each indexing progress line re-renders the summary: behind another tab that must not
    lay the screen out (it did, ~100 times while a log was indexed); shown, it is laid out."""
    app = StatsBehindATab(engine)
    async with app.run_test(size=SIZE) as pilot:
        stats = app.query_one(StatsPanel)
        await wait_until(pilot, lambda: bool(stats.stats), "the stats")
        await pilot.pause()
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app.screen, layouts.append)
        for n in range(1, 11):
            stats.set_progress(f"embedding {n}/10 units")
            await pilot.pause()
        assert layouts == []
        app.query_one(TabbedContent).active = "stats"
        await pilot.pause()
        summary = stats.query_one("#stats-summary", Static)
        assert "embedding 10/10 units" in text_of_renderable(summary)
        width = summary.content_size.width
        assert summary.content_size.height == summary.get_content_height(
            summary.content_size, app.size, width
        )


# -- watcher --


def test_watcher_filters_temp_files_and_plans_rescans(tmp_path: Path) -> None:
    workspace = Workspace.open(write_workspace(tmp_path / "ws", MEMORY, DAILY))
    for rel in ("MEMORY.md", "memory/2026-11-20.md", "memory/notes/trip.md", "memory"):
        assert is_watched(rel), rel
    for rel in (
        ".memdeck/index.db-wal",
        "sessions/abc.jsonl",
        "memory/.2026-11-20.md.swp",
        "memory/2026-11-20.md~",
        "memory/4913",
        "memory/.#2026-11-20.md",
        ".MEMORY.md.x1y2.tmp",
        "notes.md",
    ):
        assert not is_watched(rel), rel
    # vim: added + deleted of the same file -> one sync of the file as it is on disk
    assert plan_sync(workspace, {"memory/2026-11-20.md", "memory/4913"}).paths == [
        "memory/2026-11-20.md"
    ]
    # a deleted file is still synced (its chunks are dropped)
    (workspace.root / "memory/2026-10-02.md").unlink()
    assert plan_sync(workspace, {"memory/2026-10-02.md"}).paths == ["memory/2026-10-02.md"]
    # a folder renamed into place arrives without its files: rescan
    (workspace.root / "memory/trips").mkdir()
    assert plan_sync(workspace, {"memory/trips"}).rescan
    # ...and one renamed away has vanished
    assert plan_sync(workspace, {"memory/old-trips"}).rescan


async def test_the_watcher_picks_up_a_file_written_outside(engine: MemoryEngine) -> None:
    app = WatcherHost(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.watcher.ready.is_set, "the watcher to start")
        root = engine.workspace.root
        (root / "sessions").mkdir(exist_ok=True)
        (root / "sessions" / "s1.jsonl").write_text('{"type": "session"}\n')
        (root / "memory" / ".2026-11-23.md.swp").write_text("swap")
        atomic_write_text(
            root / "memory" / "2026-11-23.md",
            "# 2026-11-23\n\n## Daily Summary\n- Bought a kayak for the Norway trip.\n",
        )
        await wait_until(
            pilot,
            lambda: any("memory/2026-11-23.md" in c.paths for c in app.changes),
            "the watcher to report the new log",
        )
        seen = {path for change in app.changes for path in change.paths}
        assert seen == {"memory/2026-11-23.md"}
        assert all(app.syncing_seen)  # busy while indexing (full collections wait)
        change = next(c for c in app.changes if "memory/2026-11-23.md" in c.paths)
        assert change.error is None and change.report is not None
        assert change.report.files_changed == 1
        # the index already follows, and the panels refresh themselves
        assert any("kayak" in r.text for r in engine.search("kayak", now=NOW).results)
        panels = app.query_one(MemoryPanels)
        await wait_until(
            pilot,
            lambda: any(log.path == "memory/2026-11-23.md" for log in panels.daily_tree.logs),
            "the daily tree to show the new log",
        )

        await wait_until(pilot, lambda: not app.watcher.syncing, "the sync to end")
        app.watcher.stop()
        await asyncio.wait_for(app.workers.wait_for_complete(), WAIT_S)


def test_every_panel_explains_itself_for_f1() -> None:
    panels = (InjectionPanel, SearchPanel, DailyTree, MemoryEditor, StatsPanel, HistoryPanel)
    for panel in (*panels, MemoryPanels):
        assert issubclass(panel, (EnginePanel, MemoryPanels))
        assert panel.HELP.startswith("## "), panel.__name__


# -- snapshots (100×30, fixed workspace, fixed dates, no cursor blink) --


class MaskedStatsPanel(StatsPanel):
    """Stats without the temp-dir path, the byte size and the resident memory, which differ
    from run to run."""

    def describe_stats(self) -> list[tuple[str, Text]]:
        masked = {"workspace": "<workspace>", "index size": "<size>", "memory": "<memory>"}
        return [
            (label, Text(masked[label]) if label in masked else value)
            for label, value in super().describe_stats()
        ]


def _snapshot(
    snap_compare: SnapCompare, app: App[Any], before: Callable[[Pilot[Any]], object] | None = None
) -> bool:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        if before is not None:
            result = before(pilot)
            if asyncio.iscoroutine(result):
                await result
            await settle(pilot)

    return snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_injection_panel(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: InjectionPanel(engine, budget=120, now=NOW))
    assert _snapshot(
        snap_compare, app, lambda pilot: app.query_one(InjectionPanel).preview("Lisbon hotel")
    )


def test_snapshot_search_panel(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: SearchPanel(engine, now=NOW))
    assert _snapshot(
        snap_compare, app, lambda pilot: app.query_one(SearchPanel).set_query("hotel in Lisbon")
    )


def test_snapshot_daily_tree(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: DailyTree(engine))
    assert _snapshot(snap_compare, app)


def test_snapshot_memory_editor(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    assert _snapshot(snap_compare, app)


def test_snapshot_memory_conflict_question(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))

    async def conflict(pilot: Pilot[Any]) -> None:
        editor = app.query_one(MemoryEditor)
        await _dirty_editor_with_outside_change(pilot, editor, engine)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: _asking(app), "question")
        await pilot.click("#conflict-diff-button")

    assert _snapshot(snap_compare, app, conflict)


def test_snapshot_stats_panel(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MaskedStatsPanel(engine, clock=fixed_clock))

    def events(pilot: Pilot[Any]) -> None:
        stats = app.query_one(StatsPanel)
        stats.set_model_state("loaded")
        stats.record_flush("session-switch", "4 messages → memory/2026-11-22.md")
        stats.log_event("watcher: memory/2026-11-21.md re-indexed (+1/-1 chunks)")

    assert _snapshot(snap_compare, app, events)


def test_snapshot_memory_panels(snap_compare: SnapCompare, engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryPanels(engine, now=NOW, clock=fixed_clock))
    assert _snapshot(
        snap_compare, app, lambda pilot: app.query_one(MemoryPanels).preview("trip to Lisbon")
    )


# -- issue 10: the panels keep memory in view --


async def test_the_preview_shows_every_injected_item_s_score(engine: MemoryEngine) -> None:
    app = DraftHost(lambda: InjectionPanel(engine, now=NOW, debounce=0.01))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(InjectionPanel)
        app.query_one("#draft", Input).focus()
        await pilot.press(*"hotel in Lisbon")
        await wait_until(
            pilot,
            lambda: panel.injection is not None and "Alfama" in panel.injection.text,
            "the preview",
        )
        assert panel.injection is not None
        included = [i for i in panel.injection.report.included if i.kind == "relevant"]
        assert included
        items = panel.items_text
        for item in included:
            assert f"✓ {item.location} ({format_score(item.score)})" in items
        # MEMORY.md's own title is not nested under the block's heading
        assert "\n# Long-term Memory" not in "\n" + panel.injection.text


async def test_after_the_helper_s_idle_exit_the_preview_comes_at_once_then_hybrid(
    tmp_path: Path,
) -> None:
    from tui.engine.embed_helper import HelperEmbedder
    from tui.engine.engine import MODEL_STARTING

    helper = HelperEmbedder(idle_exit=0.5)
    engine = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY), embedder=helper)
    try:
        engine.load_model()
        engine.sync()
        app = DraftHost(lambda: InjectionPanel(engine, now=NOW, debounce=0.01))
        async with app.run_test(size=SIZE) as pilot:
            panel = app.query_one(InjectionPanel)
            await wait_until(pilot, lambda: helper.helper_pid is None, "the idle exit")
            panel.preview("hotel in Lisbon")  # a pasted draft: one keystroke
            await wait_until(
                pilot,
                lambda: panel.injection is not None and "Alfama" in panel.injection.text,
                "the preview",
            )
            injection = panel.injection
            assert injection is not None
            # BM25-only at once (the model takes 0.5-1 s to start again)...
            assert MODEL_STARTING in injection.report.notes
            # ...then built again, hybrid, once it is up
            await wait_until(
                pilot,
                lambda: (
                    panel.injection is not injection
                    and panel.injection is not None
                    and MODEL_STARTING not in panel.injection.report.notes
                ),
                "the preview rebuilt once the model is up",
            )
            assert engine.model_ready_now and helper.starts == 2
    finally:
        engine.close()


async def test_saving_keeps_the_final_newline_so_an_outside_append_stays_on_its_line(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        area = editor.text_area
        area.focus()
        await pilot.press("ctrl+end")
        assert area.cursor_location == area.document.end
        await pilot.press("backspace")  # the final newline goes
        await pilot.press("enter", *"- Swims on Sundays")
        assert not area.text.endswith("\n")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        on_disk = engine.workspace.memory_file.read_text()
        assert on_disk.endswith("- Swims on Sundays\n") and area.text == on_disk
        with engine.workspace.memory_file.open("a", encoding="utf-8") as outside:
            outside.write("- Added by another editor\n")
        lines = engine.workspace.memory_file.read_text().splitlines()
        assert lines[-2:] == ["- Swims on Sundays", "- Added by another editor"]


async def test_editor_keys_and_one_status_at_a_time(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(engine))
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        area = editor.text_area
        area.focus()
        await pilot.press("ctrl+end")
        assert area.cursor_location == area.document.end
        await pilot.press("ctrl+home")
        assert area.cursor_location == (0, 0)
        await pilot.press("ctrl+shift+end")
        assert area.selected_text == area.text
        await pilot.press("ctrl+home", "x")
        status = editor.query_one("#memory-status", Static)
        assert text_of(status) == "MEMORY.md ● modified · ctrl+s saves"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert text_of(status) == "MEMORY.md · saved"
        await pilot.press("y")  # an edit after the save: modified, not "saved"
        assert text_of(status) == "MEMORY.md ● modified · ctrl+s saves"


async def test_the_activity_log_wraps_without_losing_characters(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: StatsPanel(engine, clock=fixed_clock))
    async with app.run_test(size=(40, 30)) as pilot:
        stats = app.query_one(StatsPanel)
        long_line = " ".join(f"word{n:02d}" for n in range(30)) + " end/of/a/very-long-path.md"
        stats.log_event(long_line)
        await pilot.pause(0.2)
        lines = stats.query_one("#stats-log-lines", Static)
        strips = lines.render_lines(Region(0, 0, lines.size.width, lines.size.height))
        rows = ["".join(segment.text for segment in strip).strip() for strip in strips]
        assert len([r for r in rows if r]) > 2  # it did wrap
        shown = " ".join(r for r in rows if r)
        assert "".join(shown.split()) == "".join(f"09:30:00 {long_line}".split())


async def test_daily_labels_are_clean_text(engine: MemoryEngine) -> None:
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        engine.store.append_daily(
            "## 09:30 · trip · 8 messages <!-- mem src=auto flush=ab12 session=s1 -->\n\n- ok\n",
            NOW,
        )
        daily.reload()
        await wait_until(pilot, lambda: len(daily.logs) == 4, "the new log")
        newest = daily.query_one("#daily-tree", Tree).root.children[0].children[0]
        assert [str(n.label) for n in newest.children] == ["09:30 · trip · 8 messages  L3"]


async def test_a_listing_that_answers_late_does_not_undo_a_newer_one(engine: MemoryEngine) -> None:
    # Textual cancels an exclusive thread worker without stopping it: the listing started at
    # mount can post its answer after the reload's. Posted in that order here, deliberately.
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        await wait_until(pilot, lambda: len(daily.logs) == 3, "the first listing")
        stale = daily.Loaded(daily._listings.latest, list(daily.logs))
        engine.store.append_daily("## 09:30 · trip\n\n- ok\n", NOW)
        daily.reload()
        await wait_until(pilot, lambda: len(daily.logs) == 4, "the new log")
        daily.post_message(stale)
        daily.post_message(daily.Loaded(daily._listings.latest, list(daily.logs)))
        daily.post_message(stale)
        await pilot.pause(0.1)
        assert len(daily.logs) == 4


async def test_a_hidden_daily_panel_renders_the_changed_log_when_shown(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: DailyTree(engine))
    async with app.run_test(size=SIZE) as pilot:
        daily = app.query_one(DailyTree)
        view = daily.query_one("#daily-view", Markdown)
        await wait_until(pilot, lambda: bool(view.source), "the newest log shown")
        assert daily._shown is not None
        shown = engine.workspace.root / daily._shown[0]
        daily.display = False  # another tab in front
        await pilot.pause()
        with shown.open("a", encoding="utf-8") as log:
            log.write("\n## 23:00 · late\n\n- the zeppelin leaves at dawn\n")
        daily.reload()
        await wait_until(pilot, lambda: daily._view_when_shown is not None, "the read held")
        assert "zeppelin" not in view.source  # nothing mounted while hidden
        daily.display = True
        await wait_until(pilot, lambda: "zeppelin" in view.source, "the log shown")


def test_search_text_cell_says_dash_without_a_text_match() -> None:
    from tui.app.panels.base import format_text_score

    assert format_text_score(0.0, -0.0) == "—"
    assert format_text_score(0.0, None) == "—"
    assert format_text_score(0.61, -4.23) == ".61 (-4.23)"
    assert format_text_score(0.12, -0.04) == ".12 (-0.04)"  # not "-0.0"


async def test_a_result_shows_its_matching_lines_with_the_terms_highlighted(
    engine: MemoryEngine,
) -> None:
    notes = "\n".join(f"packing {n} socks" for n in range(1, 30))
    notes += "\nremember the zeppelin tickets!\n"
    (engine.workspace.root / "memory" / "packing.md").write_text(notes, encoding="utf-8")
    engine.sync()
    app = PanelHost(lambda: SearchPanel(engine, now=NOW))
    async with app.run_test(size=(100, 24)) as pilot:
        panel = app.query_one(SearchPanel)
        panel.set_query("zeppelin tickets")
        await wait_until(
            pilot,
            lambda: panel.response is not None and bool(panel.response.results),
            "a result",
        )
        assert panel.response is not None
        top = panel.response.results[0]
        assert top.path == "memory/packing.md" and top.start_line < 30 <= top.end_line
        scroll = panel.query_one("#search-context-scroll")
        context = panel.query_one("#search-context", Static)
        await wait_until(pilot, lambda: scroll.scroll_y > 0, "the view to scroll to the match")
        await pilot.pause(0.1)
        # the matching line is in view, not only the chunk's first lines
        region = Region(0, int(scroll.scroll_y), context.size.width, scroll.size.height)
        shown = "".join(segment.text for strip in context.render_lines(region) for segment in strip)
        assert "zeppelin tickets" in shown
        grid = context.content
        cells = [cell for column in grid.columns for cell in column._cells]  # type: ignore[union-attr]
        highlighted = {
            cell.plain[span.start : span.end].lower()
            for cell in cells
            if isinstance(cell, Text)
            for span in cell.spans
            if "reverse" in str(span.style)
        }
        assert highlighted == {"zeppelin", "tickets"}


def test_the_search_help_shows_the_score_formula(engine: MemoryEngine) -> None:
    from tui.app.screens.help_screen import widget_help
    from tui.engine.score_formula import score_formula

    panel = SearchPanel(engine, now=NOW)
    for line in score_formula(engine.search_options).splitlines():
        assert f"- {line}" in panel.help_text
        assert f"- {line}" in widget_help(panel)


def test_stats_show_the_app_s_memory_and_the_embedding_helper_s() -> None:
    from tui.app.panels.stats_panel import describe_memory

    assert describe_memory({"memory_mb": 112.6}) == "113 MB"
    assert (
        describe_memory({"memory_mb": 98.2, "helper_memory_mb": 125.4})
        == "98 MB · embedding helper 125 MB"
    )
    assert (
        describe_memory({"memory_mb": 98.2, "helper_memory_mb": None})
        == "98 MB · embedding helper stopped while idle"
    )
    assert describe_memory({"memory_mb": None}) == ""  # no /proc here


def test_engine_stats_report_resident_memory(engine: MemoryEngine) -> None:
    stats = engine.stats()
    if sys.platform.startswith("linux"):
        assert isinstance(stats["memory_mb"], float) and stats["memory_mb"] > 10
