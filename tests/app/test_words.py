"""The words the app shows, as a new user reads them (issue 32, item 22): the files Stats says
were skipped, the rename dialog's keys, one Help in the palette, the MEMORY.md tab named as it
is, Daily labels cut with "…" and their line numbers kept, and entry metadata dimmed."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.segment import Segment
from support.pilot import SIZE, PanelHost, build_app, ready, text_of, wait_until
from support.workspaces import write_workspace
from textual.app import App, ComposeResult
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from tui.app.panels.daily_tree import DailyTree
from tui.app.panels.memory_editor import MemoryEditor
from tui.app.panels.search_panel import render_context
from tui.app.panels.stats_panel import StatsPanel
from tui.app.screens.help_screen import HelpScreen
from tui.app.screens.rename_screen import RenameScreen
from tui.chat.chat import ChatEngine
from tui.engine.engine import MemoryEngine

COMMENT = "<!-- mem id=a1 conf=high src=user -->"
MEMORY = f"# Memory\n\n- Prefers dark mode {COMMENT}\n- Likes tea\n"
LONG_TITLE = "Planning the spring garden, the tomato seedlings and the new raised beds by the shed"
DAILY = {
    "memory/2026-11-20.md": f"# 2026-11-20\n\n## {LONG_TITLE}\n- Ordered seeds\n",
    "memory/bad.md": "\x00\x01binary",
}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY))
    eng.sync()
    yield eng
    eng.close()


async def test_stats_names_the_files_it_skipped(memory: MemoryEngine) -> None:
    app = PanelHost(lambda: StatsPanel(memory))
    async with app.run_test(size=(100, 30)) as pilot:
        summary = app.query_one("#stats-summary", Static)
        await wait_until(pilot, lambda: "bad.md" in text_of(summary), "the skipped file")
        shown = text_of(summary)
        assert "memory/bad.md: skipped, looks binary" in shown
        assert "file(s) skipped" not in shown


async def test_the_rename_dialog_says_its_keys() -> None:
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(RenameScreen("trip to Lisbon"))
        await wait_until(pilot, lambda: bool(app.screen.query("#rename-hint")), "the dialog")
        await pilot.pause()
        hint = text_of(app.screen.query_one("#rename-hint", Static))
        assert "Enter" in hint and "Escape" in hint
        assert app.screen.query_one("#rename-hint").region.height == 1  # on screen


async def test_one_help_in_the_palette_and_help_names_the_memory_md_tab(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert titles.count("Help") == 1 and "Keys" not in titles
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        assert "Open the MEMORY.md tab" in screen.keys
        assert "MEMORY tab" not in screen.keys


async def test_a_long_daily_label_is_cut_with_an_ellipsis_and_keeps_its_line_number(
    memory: MemoryEngine,
) -> None:
    app = PanelHost(lambda: DailyTree(memory))
    async with app.run_test(size=(50, 20)) as pilot:
        tree: Tree[object] = app.query_one("#daily-tree", Tree)
        await wait_until(
            pilot,
            lambda: any("L3" in str(node.label) for node in _nodes(tree)),
            "the entry",
        )
        await pilot.pause()
        lines = [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]
        entry = next(line for line in lines if "Planning" in line)
        assert entry.endswith("…  L3")
        assert len(entry) <= tree.scrollable_content_region.width
        assert tree.max_scroll_x == 0  # nothing to scroll to: the label fits

        await pilot.resize_terminal(120, 20)
        await pilot.pause()
        lines = [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]
        assert any(line.endswith(f"{LONG_TITLE}  L3") for line in lines)  # room: whole again


@pytest.mark.parametrize("width", [24, 40, 90])
async def test_a_daily_label_s_measured_width_is_the_width_drawn(width: int) -> None:
    """The tree measures every label at each layout: measured without drawing it, the width is
    what is drawn (a cut label's at most the room, a wide character may leave one cell)."""
    from rich.style import Style

    from tui.app.panels.daily_log_tree import DailyLogTree

    labels = [
        "2026-11",
        "Short  L3",
        f"{LONG_TITLE}  L12",
        LONG_TITLE,
        "x  L12345678",
        "春の庭の計画と種まきの準備について  L9",
    ]

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield DailyLogTree("memory/")

    async with Host().run_test(size=(width, 20)) as pilot:
        tree: DailyLogTree[None] = pilot.app.query_one(DailyLogTree)
        tree.show_root = False
        month = tree.root.add(labels[0], expand=True)
        log = month.add("2026-11-20.md", expand=True)
        nodes = [month, log] + [log.add_leaf(label) for label in labels[1:]]
        await pilot.pause()
        for node in nodes:
            drawn = tree.render_label(node, Style(), Style()).cell_len
            measured = tree.get_label_width(node)
            assert measured - drawn in ((0, 1) if "春" in str(node.label) else (0,)), node.label
        assert tree.max_scroll_x == 0  # every line fits: nothing to scroll to


def _nodes(tree: Tree[object]) -> list[TreeNode[object]]:
    found: list[TreeNode[object]] = []
    stack = list(tree.root.children)
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found


def _dim_text(segments: list[Segment]) -> str:
    return "".join(s.text for s in segments if s.style is not None and s.style.dim)


async def test_entry_metadata_is_dimmed_in_the_editor(memory: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(100, 20)) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: COMMENT in editor.text_area.text, "MEMORY.md")
        line = editor.text_area.get_line(2)
        console = Console(file=io.StringIO(), width=200)
        dim = _dim_text(list(line.render(console)))
        assert dim.strip() == COMMENT
        assert "dark mode" not in dim


def test_entry_metadata_is_dimmed_in_a_search_result_in_its_file() -> None:
    lines = MEMORY.splitlines()
    grid = render_context(1, lines, 3, 3)
    console = Console(file=io.StringIO(), width=200)
    segments = list(console.render(grid))
    rows = "".join(s.text for s in segments).splitlines()
    assert any(COMMENT in row for row in rows)
    assert _dim_text(segments).replace(" ", "").count(COMMENT.replace(" ", "")) == 1
    inside = "".join(s.text for s in segments if s.style is None or not s.style.dim)
    assert "Prefers dark mode" in inside  # the entry itself at full contrast
