"""Bringing things back inside the app (issue 32, items 6, 7, 8, 13 and 15): a recovery copy of
unsaved MEMORY.md edits offered to the editor, forgotten memories listed and restored, the
session trash listed and restored, the session list filtered by typing and following changes
made outside the app, and a quit whose flush wrote nothing said at the next start and in Stats
(and, for the real process, on stderr once the app has exited).

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model
(fixtures in ``tests/app/conftest.py``); one test runs ``memdeck`` in a pseudo-terminal.
"""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from support.chat_support import memdeck_env
from support.fakeopenai import FakeOpenAI
from support.pilot import DECK_MEMORY, SIZE, build_app, ready, text_of, wait_until
from support.pty_app import PtyApp
from support.workspaces import write_workspace
from textual import events
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from tui.app.app import MemdeckApp
from tui.app.quit_report import quit_flush_problems
from tui.app.screens.forgotten_screen import ForgottenScreen
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen
from tui.app.screens.trash_screen import TrashScreen
from tui.chat.chat import ChatEngine
from tui.chat.events import FlushOutcome, TriggerEvent
from tui.chat.sessions import SessionStore
from tui.chat.state import WorkspaceState
from tui.engine.workspace import Workspace

RECOVERED = DECK_MEMORY + "- Typed before the terminal was closed\n"


def add_session(sessions: SessionStore, title: str, *, answered: bool = True) -> str:
    """A session titled ``title`` with a question (and its answer), not logged yet."""
    info = sessions.create(title)
    sessions.append_message(info.id, "user", f"tell me about {title}")
    if answered:
        sessions.append_message(info.id, "assistant", f"{title}: noted.")
    return info.id


def notes(app: App[Any]) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def option_texts(options: OptionList) -> list[str]:
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


# -- item 8: a recovery copy, loaded into the editor --


async def offered(pilot: Pilot[Any], app: MemdeckApp) -> MemoryConflictScreen:
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, MemoryConflictScreen) and app.screen.query("#conflict-mine"),
        "the recovery question",
    )
    assert isinstance(app.screen, MemoryConflictScreen)
    return app.screen


async def test_a_recovery_copy_is_offered_to_the_editor_and_loaded(engine: ChatEngine) -> None:
    store = engine.memory.store
    copy = store.save_recovery_copy(RECOVERED)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        question = await offered(pilot, app)
        asked = text_of(question.query_one("#conflict-question", Static))
        assert f".memdeck/recovery/{copy.name}" in asked and "Load them into the editor" in asked
        await pilot.press("d")  # compare first
        diff = text_of(question.query_one("#conflict-diff", Static))
        assert "+- Typed before the terminal was closed" in diff
        await pilot.click("#conflict-mine")  # "Load recovered"
        editor = app.main_screen.memory_panels.memory_editor
        await wait_until(pilot, lambda: editor.text_area.text == RECOVERED, "the recovered text")
        assert editor.is_dirty and app.main_screen.memory_panels.active_tab == "memory"
        await wait_until(pilot, lambda: not store.unannounced_recovery_copies(), "announced")
        assert engine.memory.workspace.memory_file.read_text() == DECK_MEMORY  # not saved yet
        editor.text_area.focus()
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not editor.is_dirty, "the save")
        assert engine.memory.workspace.memory_file.read_text() == RECOVERED
        assert copy.exists()  # the copy itself is kept


async def test_a_recovery_copy_put_off_is_offered_again_next_time(engine: ChatEngine) -> None:
    store = engine.memory.store
    store.save_recovery_copy(RECOVERED)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await offered(pilot, app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, MemoryConflictScreen), "closed")
        editor = app.main_screen.memory_panels.memory_editor
        assert not editor.is_dirty and editor.text_area.text == DECK_MEMORY
        assert len(store.unannounced_recovery_copies()) == 1


# -- item 7: forgotten memories, listed and restored --


async def test_forgotten_memories_are_listed_and_restored_from_the_daily_tab(
    engine: ChatEngine,
) -> None:
    memory = engine.memory
    tea = [entry for entry in memory.store.entries() if "green tea" in entry.text]
    memory.forget(tea, reason="the user said so")
    assert "green tea" not in memory.workspace.memory_file.read_text()
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f4")
        tree = app.main_screen.memory_panels.daily_tree.query_one("#daily-tree")
        await wait_until(pilot, lambda: tree.has_focus, "the daily tree")
        await pilot.press("f")
        await wait_until(pilot, lambda: isinstance(app.screen, ForgottenScreen), "the list")
        screen = app.screen
        assert isinstance(screen, ForgottenScreen)
        options = screen.query_one("#forgotten-list", OptionList)
        await wait_until(pilot, lambda: options.option_count == 1, "the forgotten memory")
        [shown] = option_texts(options)
        assert "Drinks green tea, never coffee" in shown and "the user said so" in shown
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: "green tea" in memory.workspace.memory_file.read_text(),
            "the memory restored",
        )
        await wait_until(pilot, lambda: options.option_count == 0, "the list to follow")
        said = text_of(screen.query_one("#forgotten-status", Static))
        assert "restored" in said and "Preferences" in said
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ForgottenScreen), "closed")
        # The restore is a memory change like any other: the editor follows it.
        editor = app.main_screen.memory_panels.memory_editor
        await wait_until(pilot, lambda: "green tea" in editor.text_area.text, "the editor")
        await pilot.press("ctrl+p", *"Forgotten memories", "enter")  # the palette opens it too
        await wait_until(pilot, lambda: isinstance(app.screen, ForgottenScreen), "the list again")
        status = app.screen.query_one("#forgotten-status", Static)
        await wait_until(pilot, lambda: "nothing forgotten" in text_of(status), "an empty list")


# -- item 6: the trash and the filter --


async def test_the_trash_lists_deleted_sessions_and_restores_one(engine: ChatEngine) -> None:
    sessions = engine.sessions
    kept = add_session(sessions, "Kept session")
    gone = add_session(sessions, "Deleted Lisbon plans")
    sessions.delete(gone, force=True)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        listed = app.main_screen.session_list
        await wait_until(pilot, lambda: [i.id for i in listed.infos] == [kept], "one session")
        await wait_until(pilot, lambda: listed.trashed == 1, "the trash counted")
        rows = option_texts(listed.option_list)
        assert rows[-1].strip() == "deleted sessions (1)…"  # the list's last row opens it
        app.main_screen.action_focus_sessions()
        await wait_until(pilot, lambda: listed.option_list.has_focus, "the session list")
        await pilot.press("end", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrashScreen), "the trash")
        screen = app.screen
        assert isinstance(screen, TrashScreen)
        options = screen.query_one("#trash-list", OptionList)
        await wait_until(pilot, lambda: options.option_count == 1, "the deleted session")
        [shown] = option_texts(options)
        assert "Deleted Lisbon plans" in shown and "2 msgs · 2 not logged" in shown
        await pilot.press("enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, TrashScreen), "closed")
        assert sessions.exists(gone)
        await wait_until(
            pilot, lambda: gone in [i.id for i in listed.infos], "the session listed again"
        )
        await wait_until(pilot, lambda: listed.trashed == 0, "the trash row gone")
        assert "deleted sessions" not in " ".join(option_texts(listed.option_list))


async def test_typing_in_the_session_list_filters_it(engine: ChatEngine) -> None:
    sessions = engine.sessions
    lisbon = add_session(sessions, "Lisbon trip")
    add_session(sessions, "Bike repair")
    add_session(sessions, "Tea notes")
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        listed = app.main_screen.session_list
        await wait_until(pilot, lambda: len(listed.infos) == 3, "three sessions")
        app.main_screen.action_focus_sessions()
        await wait_until(pilot, lambda: listed.option_list.has_focus, "the session list")
        await pilot.press("b", "i")  # not keys of the list: they start the filter
        assert listed.filter_input.has_focus and listed.filter_input.value == "bi"
        assert [info.title for info in listed.shown] == ["Bike repair"]
        first_row = option_texts(listed.option_list)[0].splitlines()[0]
        assert first_row.strip(" ●") == "Bike repair"
        await pilot.press("x")
        assert "no session matches “bix”" in option_texts(listed.option_list)[0]
        await pilot.press("escape")  # clears the filter (not: back to the message box)
        assert listed.option_list.has_focus and len(listed.shown) == 3
        for character in "tri":  # a burst, faster than the focus moves: its r is no rename
            app.post_message(events.Key(character, character))
        await wait_until(pilot, lambda: listed.filter_input.value == "tri", "the typed burst")
        assert app.screen is app.main_screen and [i.title for i in listed.shown] == ["Lisbon trip"]
        await pilot.press("escape")
        await pilot.press("slash", *"LISB", "enter")  # / filters too; Enter opens the match
        await wait_until(
            pilot, lambda: app.main_screen.active_session == lisbon, "the Lisbon session"
        )
        assert listed.filter_input.value == "" and len(listed.shown) == 3


# -- item 13: changes made outside the app reach the session list --


async def test_sessions_changed_outside_the_app_reach_the_session_list(
    engine: ChatEngine,
) -> None:
    root = engine.memory.workspace.root
    outside = SessionStore(Workspace.open(root))  # another process's view (`memdeck ask`...)
    trashed = add_session(outside, "Deleted before")
    outside.delete(trashed, force=True)
    app = build_app(engine)  # the workspace watcher runs
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        watcher = app.main_screen.watcher
        assert watcher is not None
        await wait_until(pilot, lambda: watcher.ready.is_set(), "the watcher")
        listed = app.main_screen.session_list
        asked = add_session(outside, "Asked from the shell")
        await wait_until(
            pilot, lambda: asked in [i.id for i in listed.infos], "the new session listed"
        )
        outside.restore(trashed)  # `memdeck sessions --restore ID`
        await wait_until(
            pilot, lambda: trashed in [i.id for i in listed.infos], "the restored session"
        )
        outside.append_message(asked, "user", "one more")
        await wait_until(
            pilot,
            lambda: any(i.id == asked and i.message_count == 3 for i in listed.infos),
            "the new message counted",
        )


# -- item 15: a quit flush that wrote nothing is said --


async def test_a_quit_flush_that_wrote_nothing_is_said_at_the_next_start_and_in_stats(
    engine: ChatEngine,
) -> None:
    session = add_session(engine.sessions, "Before the crash")
    skipped = FlushOutcome("skipped", session, 2, detail="connection: could not connect")
    WorkspaceState(engine.memory.workspace).record(
        TriggerEvent("app_quit", "app quit", session, skipped, datetime(2026, 11, 21, 18, 2))
    )
    app = build_app(engine)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        await wait_until(
            pilot,
            lambda: any("memory was not written when memdeck last quit" in n for n in notes(app)),
            "the notice",
        )
        [notice] = [n for n in notes(app) if "last quit" in n]
        assert "connection: could not connect" in notice and "2 messages" in notice
        stats = app.main_screen.memory_panels.stats_panel
        await wait_until(pilot, lambda: "app_quit" in stats.flushes, "Stats to show it")
        when, outcome = stats.flushes["app_quit"]
        assert when.date().isoformat() == "2026-11-21"
        assert outcome.startswith("not written: connection: could not connect")


async def test_a_quit_flush_with_the_model_down_is_reported(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Noted."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(*"remember the brake", "enter")
        pane = app.main_screen.chat_pane
        await wait_until(pilot, lambda: pane.turns_finished == 1, "the answer")
        server.stop()  # the model goes down before the quit
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit")
    [line] = quit_flush_problems(app.quit_flush_events)
    assert line.startswith("memdeck: memory not written at quit: session ")
    assert "skipped" in line and "memdeck flush" in line


def free_port() -> int:
    """A loopback port nothing listens on (the model's server is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_app_says_on_stderr_when_its_quit_flush_wrote_nothing(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws", DECK_MEMORY)
    session = add_session(SessionStore(Workspace.open(root)), "Brake notes")
    env = memdeck_env(
        None,
        tmp_path,
        OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        MEMDECK_MODEL="fake-model",
    )
    with PtyApp(root, env, size=(120, 40)) as app:
        app.expect(b"Inject", 60)
        app.expect(b"Brake notes", 60)  # the last session is open: the quit flushes it
        app.send(b"\x11")  # ctrl+q
        app.expect(b"memory not written at quit", 90)
        assert app.process.wait(timeout=30) == 0
        app.read_until(b"\x00never", 2)  # the rest of what it printed
    said = app.text[app.text.index(b"memory not written at quit") :]
    assert session.encode() in said and b"memdeck flush" in said

