"""The MEMORY.md editor and its conflict question (issue 32, items 10, 11, 16 and 18): the
question fits 80×24 with its diff shown, one question at a time always shows the newest version
on disk, its words say how the two sides merge, the status after Load theirs fits, and ctrl+s
leaves the cursor where it was.

Pilot tests over a real MemoryEngine in a fixed workspace (and the whole app for the status
line's width); a snapshot where the layout is the point.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pilot import (
    PanelHost,
    SnapCompare,
    build_app,
    ready,
    text_of,
    wait_until,
)
from support.workspaces import write_workspace
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Button, Static

from tui.app.panels import MemoryEditor
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen, describe_merge
from tui.chat.chat import ChatEngine
from tui.engine.engine import MemoryEngine
from tui.engine.fileio import atomic_write_text

MEMORY = """# Long-term Memory

## Preferences
- Prefers dark mode in every editor
- Writes Python with snake_case names

## Family
- Has a dog called Max who loves the park
"""

#: A long outside rewrite: its diff is far taller than an 80×24 screen.
LONG_THEIRS = "# Long-term Memory\n\n" + "".join(f"- Outside line {n}\n" for n in range(60))


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryEngine]:
    """The memory engine alone, over :data:`MEMORY` (BM25 only)."""
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY))
    eng.sync()
    yield eng
    eng.close()


def questions(app: App[Any]) -> list[MemoryConflictScreen]:
    """The conflict questions on the screen stack (shown or queued)."""
    return [screen for screen in app.screen_stack if isinstance(screen, MemoryConflictScreen)]


def asking(app: App[Any]) -> bool:
    screen = app.screen
    return isinstance(screen, MemoryConflictScreen) and bool(
        screen.query("#conflict-mine") and screen.query_one("#conflict-mine").region
    )


async def type_at_end(pilot: Pilot[Any], editor: MemoryEditor, text: str) -> str:
    """Type ``text`` at the end of the loaded buffer; returns the buffer."""
    await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
    area = editor.text_area
    area.focus()
    area.move_cursor(area.document.end)
    await pilot.press(*text)
    return area.text


async def test_ctrl_s_without_a_final_newline_keeps_the_cursor_on_its_line(
    memory: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(100, 30)) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        area = editor.text_area
        area.focus()
        await pilot.press("ctrl+end", "backspace", "enter", *"- Swims on Sundays")
        assert not area.text.endswith("\n")
        cursor = area.cursor_location
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert area.cursor_location == cursor  # not moved onto a new empty line
        # What is on disk is the buffer, byte for byte (with the final newline behind the cursor).
        on_disk = memory.workspace.memory_file.read_bytes()
        assert on_disk == area.text.encode() and on_disk.endswith(b"- Swims on Sundays\n")
        await pilot.press(*" and Fridays")  # typing goes on on the same line
        assert area.document.get_line(cursor[0]) == "- Swims on Sundays and Fridays"


async def test_show_diff_at_80x24_keeps_the_buttons_on_screen(memory: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(80, 24)) as pilot:
        editor = app.query_one(MemoryEditor)
        await type_at_end(pilot, editor, "- Typed here")
        atomic_write_text(memory.workspace.memory_file, LONG_THEIRS)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        await pilot.press("d")  # show the diff
        await pilot.pause()
        screen = app.screen
        diff = screen.query_one("#conflict-diff-scroll")
        assert diff.display and diff.region.height > 0
        for button in screen.query(Button).results():
            if button.display:
                assert screen.region.contains_region(button.region), button.id
        assert diff.max_scroll_y > 0  # the diff scrolls inside the dialog instead
        await pilot.click("#conflict-mine")  # the buttons take clicks where they are drawn
        await wait_until(pilot, lambda: not questions(app), "the answer")
        assert editor.text_area.text.endswith("- Typed here")


def test_snapshot_conflict_diff_at_80x24(snap_compare: SnapCompare, memory: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))

    async def conflict(pilot: Pilot[Any]) -> None:
        editor = app.query_one(MemoryEditor)
        await type_at_end(pilot, editor, "- Typed here")
        editor.text_area.cursor_blink = False
        atomic_write_text(memory.workspace.memory_file, LONG_THEIRS)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        await pilot.press("d")

    assert snap_compare(app, terminal_size=(80, 24), run_before=conflict)


async def test_several_outside_writes_make_one_question_showing_the_newest(
    memory: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(100, 30)) as pilot:
        editor = app.query_one(MemoryEditor)
        mine = await type_at_end(pilot, editor, "- Typed in memdeck")
        versions = [MEMORY + f"- Saved by the agent, write {n}\n" for n in (1, 2, 3)]
        atomic_write_text(memory.workspace.memory_file, versions[0])
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        for version in versions[1:]:
            atomic_write_text(memory.workspace.memory_file, version)
            editor.file_changed_on_disk()
        await wait_until(
            pilot,
            lambda: bool(questions(app)) and questions(app)[0].disk_text == versions[-1],
            "the question to show the newest version",
        )
        assert len(questions(app)) == 1
        await pilot.press("d")
        diff = text_of(app.screen.query_one("#conflict-diff", Static))
        assert "write 3" in diff and "write 1" not in diff
        await pilot.click("#conflict-mine")
        await wait_until(pilot, lambda: not questions(app), "the answer")
        await pilot.pause(0.2)
        await app.workers.wait_for_complete()
        assert not questions(app)  # no second question queued behind the first
        assert editor.text_area.text == mine
        await pilot.press("ctrl+s")  # kept mine over the version shown: the save goes through
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert memory.workspace.memory_file.read_text() == mine + "\n"


async def test_keep_both_follows_the_newest_version_on_disk(memory: MemoryEngine) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(100, 30)) as pilot:
        editor = app.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        row = MEMORY.splitlines().index("- Has a dog called Max who loves the park")
        column = MEMORY.splitlines()[row].index("Max")
        editor.text_area.replace("Rex", (row, column), (row, column + 3))
        atomic_write_text(memory.workspace.memory_file, MEMORY + "- Another line\n")
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        assert app.screen.query("#conflict-both")  # different lines: they merge
        atomic_write_text(memory.workspace.memory_file, MEMORY.replace("Max", "Bella"))
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: not app.screen.query("#conflict-both"), "no Keep both")
        question = text_of(app.screen.query_one("#conflict-question", Static))
        assert "Which version do you want to keep?" in question
        # ...and back, when the newest version merges again.
        atomic_write_text(memory.workspace.memory_file, MEMORY + "- Third version\n")
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: bool(app.screen.query("#conflict-both")), "Keep both")
        await pilot.click("#conflict-both")
        await wait_until(pilot, lambda: not questions(app), "the answer")
        assert editor.text_area.text == MEMORY.replace("Max", "Rex") + "- Third version\n"


def test_the_question_says_how_the_two_sides_merge() -> None:
    base = MEMORY
    both_appended = describe_merge(base, base + "- Mine\n", base + "- Theirs\n")
    assert "both added lines at the same place" in both_appended
    assert "theirs, then yours" in both_appended
    mine_on_top = base.replace("## Family", "## Family (mine)")
    apart = describe_merge(base, mine_on_top, base + "- Theirs\n")
    assert "changed different lines" in apart


async def test_appends_at_the_same_place_are_not_called_different_lines(
    memory: MemoryEngine,
) -> None:
    app = PanelHost(lambda: MemoryEditor(memory))
    async with app.run_test(size=(100, 30)) as pilot:
        editor = app.query_one(MemoryEditor)
        await type_at_end(pilot, editor, "- Typed in memdeck")
        theirs = MEMORY + "- Written by another editor\n"
        atomic_write_text(memory.workspace.memory_file, theirs)
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        question = text_of(app.screen.query_one("#conflict-question", Static))
        assert "different lines" not in question
        assert "both added lines at the same place" in question
        await pilot.click("#conflict-both")
        await wait_until(pilot, lambda: not questions(app), "the answer")
        assert editor.text_area.text == theirs + "- Typed in memdeck"  # theirs, then mine


@pytest.mark.parametrize("size", [(160, 48), (120, 40)])
async def test_the_status_after_load_theirs_fits_the_editor(
    engine: ChatEngine, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = build_app(engine, tmp_path, load_model=False)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("f5")
        editor = app.main_screen.memory_panels.memory_editor
        await type_at_end(pilot, editor, "- Typed here")
        atomic_write_text(engine.memory.workspace.memory_file, "# Long-term Memory\n- Theirs\n")
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: asking(app), "the question")
        await pilot.click("#conflict-theirs")
        await wait_until(pilot, lambda: not questions(app), "the answer")
        status = editor.query_one("#memory-status", Static)
        shown = text_of(status).rstrip("\n")
        assert "loaded theirs (ctrl+z: yours)" in shown
        assert len(shown) <= status.content_region.width, shown
