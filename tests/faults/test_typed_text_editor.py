"""Issue 16 A.1 and A.2: text typed into the MEMORY.md editor is never lost: not by quitting,
not by a signal, not by one Enter in the conflict dialog.

The whole app under Pilot (a real workspace, index and files), and a real ``memdeck`` process
in a pseudo-terminal for the signal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.chat_support import memdeck_env
from support.pilot import APP_MEMORY, app_ready, small_app, wait_until
from support.pty_app import drive_in_a_pty
from textual.pilot import Pilot
from textual.widgets import Button, TabbedContent

from tui.app.app import MemdeckApp
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen
from tui.app.screens.unsaved_quit_screen import UnsavedQuitScreen
from tui.chat.chat import ChatEngine
from tui.engine.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
SIZE = (120, 36)
MEMORY = APP_MEMORY
TYPED = "- typed in the editor"


def memory_md(engine: ChatEngine) -> Path:
    return engine.memory.workspace.root / "MEMORY.md"


async def type_at_the_end(pilot: Pilot[Any], app: MemdeckApp, text: str) -> None:
    """F5, then type ``text`` on a new last line of MEMORY.md."""
    editor = app.main_screen.memory_panels.memory_editor
    await pilot.press("f5")
    await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md to load")
    area = editor.text_area
    area.focus()
    area.move_cursor(area.document.end)
    await pilot.press(*text)
    await wait_until(pilot, lambda: editor.is_dirty, "the edit")


async def quit_is_asked(pilot: Pilot[Any], app: MemdeckApp) -> None:
    await pilot.press("ctrl+q")
    await wait_until(pilot, lambda: isinstance(app.screen, UnsavedQuitScreen), "the question")


def memory_tab_label(app: MemdeckApp) -> str:
    tabs = app.main_screen.memory_panels.query_one(TabbedContent)
    return str(tabs.get_tab("memory").label)


# -- 1. quitting with unsaved edits -------------------------------------------------------


async def test_quit_with_unsaved_edits_asks_and_enter_saves(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        await type_at_the_end(pilot, app, TYPED)
        await quit_is_asked(pilot, app)
        assert app.is_running
        await pilot.press("escape")  # Cancel: stay, nothing changes
        await wait_until(pilot, lambda: not isinstance(app.screen, UnsavedQuitScreen), "cancel")
        assert app.main_screen.memory_panels.memory_editor.is_dirty
        await quit_is_asked(pilot, app)
        await pilot.press("enter")  # the default: Save and quit
        await wait_until(pilot, lambda: not app.is_running, "the app to quit")
    assert memory_md(engine).read_text(encoding="utf-8") == MEMORY + TYPED + "\n"


async def test_quit_without_saving_leaves_the_file_as_it_was(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        await type_at_the_end(pilot, app, TYPED)
        await quit_is_asked(pilot, app)
        await pilot.click("#unsaved-discard")
        await wait_until(pilot, lambda: not app.is_running, "the app to quit")
    assert memory_md(engine).read_text(encoding="utf-8") == MEMORY


async def test_unsaved_edits_show_on_the_tab_and_in_the_header(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        assert "●" not in memory_tab_label(app)
        await type_at_the_end(pilot, app, TYPED)
        await wait_until(pilot, lambda: "●" in memory_tab_label(app), "● on the tab")
        header = app.main_screen.header
        assert header.unsaved_memory and "MEMORY.md unsaved" in str(header.render())
        await pilot.press("f2")  # another tab in front: the ● stays
        assert "●" in memory_tab_label(app) and header.unsaved_memory
        await pilot.press("f5", "ctrl+s")
        await wait_until(pilot, lambda: not header.unsaved_memory, "the save")
        assert "●" not in memory_tab_label(app)


def test_a_terminated_app_keeps_unsaved_edits_in_a_recovery_copy(tmp_path: Path) -> None:
    """SIGTERM with a dirty buffer: MEMORY.md untouched, the typed text in a private recovery
    copy, and the next start says where it is."""
    root = tmp_path / "ws"
    Workspace.open(root)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    env = memdeck_env(None, tmp_path)
    # F5; once the file is loaded and the editor has focus (the footer offers its ^s save),
    # ctrl+end and a line
    keys = [
        (b"\x1b[15~", b"MEMORY.md \xc2\xb7 loaded"),
        (b"\x1b[15~", b"^s save"),  # F5 again if focus did not arrive
        (b"\x1b[1;5F", None),
    ]
    screen = drive_in_a_pty(root, env, [*keys, (b"\r" + TYPED.encode(), None)], TYPED.encode())
    assert TYPED.encode() in screen, screen[-2000:]
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    copies = list((root / ".memdeck" / "recovery").glob("MEMORY.md.*"))
    assert len(copies) == 1
    assert TYPED in copies[0].read_text(encoding="utf-8")
    assert copies[0].stat().st_mode & 0o777 == 0o600


# -- 2. the conflict dialog destroys nothing on Enter -------------------------------------


async def open_conflict(
    pilot: Pilot[Any], app: MemdeckApp, engine: ChatEngine, outside: str
) -> None:
    await type_at_the_end(pilot, app, TYPED)
    with memory_md(engine).open("a", encoding="utf-8") as handle:
        handle.write(outside)
    app.main_screen.memory_panels.memory_editor.file_changed_on_disk()
    await wait_until(pilot, lambda: isinstance(app.screen, MemoryConflictScreen), "the dialog")


async def test_enter_in_the_conflict_dialog_destroys_nothing_and_keep_both_keeps_both(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        await open_conflict(pilot, app, engine, "- outside\n")
        dialog = app.screen
        assert isinstance(dialog, MemoryConflictScreen)
        diff_button = dialog.query_one("#conflict-diff-button", Button)
        await wait_until(pilot, lambda: app.focused is diff_button, "focus on Show diff")
        await pilot.press("enter")  # shows the diff; nothing else
        assert app.screen is dialog
        assert dialog.query_one("#conflict-diff-scroll").has_class("-shown")
        await pilot.click("#conflict-both")
        await wait_until(pilot, lambda: app.screen is not dialog, "the dialog to close")
        editor = app.main_screen.memory_panels.memory_editor
        assert editor.text_area.text == MEMORY + "- outside\n" + TYPED
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
    assert memory_md(engine).read_text(encoding="utf-8") == MEMORY + "- outside\n" + TYPED + "\n"


async def test_a_clash_offers_no_keep_both(engine: ChatEngine, tmp_path: Path) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        editor = app.main_screen.memory_panels.memory_editor
        await pilot.press("f5")
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md to load")
        editor.text_area.replace("Rex", (3, 20), (3, 23))  # Max -> Rex, in the buffer
        memory_md(engine).write_text(MEMORY.replace("Max", "Bella"), encoding="utf-8")
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: isinstance(app.screen, MemoryConflictScreen), "dialog")
        assert not app.screen.query("#conflict-both")


async def test_load_theirs_keeps_undo(engine: ChatEngine, tmp_path: Path) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        await open_conflict(pilot, app, engine, "- outside\n")
        await pilot.pause()
        await pilot.click("#conflict-theirs")
        editor = app.main_screen.memory_panels.memory_editor
        await wait_until(
            pilot, lambda: editor.text_area.text == MEMORY + "- outside\n", "theirs loaded"
        )
        editor.text_area.focus()
        await pilot.press("ctrl+z")
        await wait_until(pilot, lambda: TYPED in editor.text_area.text, "undo")
        assert editor.is_dirty
