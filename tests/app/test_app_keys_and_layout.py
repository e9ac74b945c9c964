"""Help, the command palette, themes, and the layout at every width: what each key opens and
that typing is never lost.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import (
    NOW,
    ROOT,
    SIZE,
    build_app,
    build_engine,
    close_chat_engine,
    fixed_clock,
    ready,
    send,
    text_of,
    wait_until,
)
from textual.widgets import Markdown, Static

from tui.app.app import MemdeckApp
from tui.app.screens.help_screen import HelpScreen
from tui.app.themes import load_themes, parse_theme
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.desk import Desk
from tui.chat.chat import ChatEngine
from tui.engine.embeddings import Embedder
from tui.engine.inject import InjectionReport
from tui.engine.score_formula import score_formula


async def test_f1_explains_the_focused_widget_and_its_keys(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        assert screen.widget_help == ChatInput.HELP
        for binding_id in ("app.flush", "app.new_session", "chat_input.history_previous"):
            assert f"`{binding_id}`" in screen.keys
        formula = screen.query_one("#help-formula", Markdown).source
        for line in score_formula(engine.memory.search_options).splitlines():
            assert f"- {line}" in formula  # a list: each line wraps to the width
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")


async def test_every_action_is_in_the_command_palette(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE):
        titles = {command.title for command in app.get_system_commands(app.screen)}
    for title in (
        "New session",
        "Rename session",
        "Delete session",
        "Flush memory now",
        "Reindex memory",
        "Why did this surface?",
        "Consolidate memory",
        "Show workspace path",
        "Theme",
        "Show Search",
        "Help",
        "Quit",
    ):
        assert title in titles


async def test_why_shows_what_the_last_turn_injected_also_after_a_restart(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Alfama, near the castle."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "which hotels in Lisbon did I look at?")
        session = app.main_screen.active_session
        assert session is not None
        (recorded,) = engine.sessions.load(session).injections
        assert recorded.results  # the turn injected a relevant memory (the Lisbon trip)
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn's injection")
        assert app.main_screen.memory_panels.active_tab == "inject"
        assert "Alfama" in text_of(panel.query_one("#inject-block", Static))
        items = panel.items_text
        assert "memory/2026-11-20.md" in items and "relevance" in items and "vector" in items
        await pilot.press("escape", "x")  # typing brings the live preview back
        await wait_until(pilot, lambda: panel.turn is None, "the live preview")

    restarted = build_app(engine)
    async with restarted.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = restarted.main_screen.chat_pane
        await wait_until(pilot, lambda: len(pane.messages) == 2, "the resumed session")
        meta = text_of(pane.messages[1].query_one(".message-meta", Static))
        assert f"memory {InjectionReport.from_json(recorded.report).tokens_used}/" in meta
        assert "1 relevant" in meta or "relevant" in meta
        await pilot.press("ctrl+o")
        panel = restarted.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn after a restart")


async def test_a_theme_from_themes_dir_is_applied_and_remembered(
    engine: ChatEngine, tmp_path: Path
) -> None:
    config_file = tmp_path / "config.toml"
    app = build_app(engine, tmp_path, config_file=config_file)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "memdeck-dark"
        assert {"memdeck-dark", "memdeck-light"} <= set(app.available_themes)
        app.theme = "memdeck-light"
        await wait_until(
            pilot,
            lambda: config_file.exists() and 'theme = "memdeck-light"' in config_file.read_text(),
            "the theme saved in the config",
        )
        app.theme = "nord"  # built-in themes work too
        await wait_until(
            pilot, lambda: 'theme = "nord"' in config_file.read_text(), "the built-in theme saved"
        )


def test_theme_files_load_and_bad_ones_are_skipped(tmp_path: Path) -> None:
    loaded = load_themes()
    names = {theme.name: theme for theme in loaded.themes}
    background = names["memdeck-dark"].to_color_system().background
    assert background is not None and not background.is_transparent
    assert names["memdeck-light"].dark is False and names["memdeck-dark"].dark is True
    assert loaded.warnings == []
    (tmp_path / "broken.toml").write_text('name = "x"\nprimary = "not-a-colour"\n')
    (tmp_path / "extra.toml").write_text('name = "y"\nprimary = "#fff"\nsparkle = 1\n')
    (tmp_path / "mine.toml").write_text('name = "mine"\nprimary = "#123456"\n')
    custom = load_themes([tmp_path])
    assert [theme.name for theme in custom.themes] == ["mine"]
    assert len(custom.warnings) == 2 and any("sparkle" in w for w in custom.warnings)
    assert parse_theme(tmp_path / "mine.toml").primary == "#123456"


def test_the_themes_folder_is_found_from_a_checkout() -> None:
    code = (
        "from tui.app.themes import bundled_themes_dir, load_themes;"
        "print(bundled_themes_dir()); print(sorted(t.name for t in load_themes().themes))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert Path(out[0]) == ROOT / "themes"
    assert "memdeck-dark" in out[1] and "memdeck-light" in out[1]


async def test_a_narrow_screen_flips_between_chat_and_memory(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = app.main_screen
        panels, pane = screen.memory_panels, screen.chat_pane
        mode_bar = screen.query_one("#mode-bar", Static)
        assert screen.has_class("-narrow") and screen.view == "chat"
        assert pane.region.width == 80 and panels.region.width == 0
        assert screen.session_list.region.width == 0
        assert "▸ chat" in str(mode_bar.render()) and "ctrl+t" in str(mode_bar.render())
        await pilot.press("ctrl+t")
        assert screen.view == "memory" and panels.region.width == 80 and pane.region.width == 0
        assert "▸ memory: Inject" in str(mode_bar.render())
        await pilot.press("f3")
        await wait_until(
            pilot,
            lambda: app.focused is panels.search_panel.query_one("#search-query"),
            "the search box",
        )
        assert panels.active_tab == "search" and "memory: Search" in str(mode_bar.render())
        await pilot.press("escape")
        assert screen.view == "chat" and app.focused is pane.chat_input
        await pilot.press("f5")  # straight from the chat to the editor
        await wait_until(pilot, lambda: app.focused is panels.memory_editor.text_area, "the editor")
        assert screen.view == "memory"
        await pilot.press("escape")  # leaves the editor too
        assert screen.view == "chat" and app.focused is pane.chat_input
        # while typing, the mode bar carries the Inject tab's news
        await pilot.press(*"hotels in Lisbon")
        await wait_until(pilot, lambda: "relevant" in str(mode_bar.render()), "the Inject badge")
        # the collapsed session list is laid over the chat on request
        screen.action_focus_sessions()
        await wait_until(pilot, lambda: screen.session_list.region.width > 0, "the session list")
        await pilot.press("escape")
        assert screen.session_list.region.width == 0 and app.focused is pane.chat_input


async def test_at_100_columns_the_session_list_collapses_and_the_panels_stay(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = app.main_screen
        assert screen.has_class("-medium")
        assert screen.session_list.region.width == 0
        assert screen.memory_panels.region.width >= 44 and screen.chat_pane.region.width >= 40
        assert screen.query_one("#mode-bar").region.height == 0
        await pilot.press("f4")
        await wait_until(pilot, lambda: screen.memory_panels.active_tab == "daily", "Daily")
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: screen.has_class("-wide"), "the wide layout")
        assert screen.session_list.region.width > 0


async def test_every_tab_has_a_key_in_the_footer_and_keys_are_remapped_by_id(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    from textual.widgets._footer import FooterKey

    config = make_config(tmp_path, server, keymap={"app.show_daily": "ctrl+g"})
    engine = build_engine(tmp_path, config, embedder)
    app = build_app(engine, tmp_path)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await ready(pilot)
            panels = app.main_screen.memory_panels
            await wait_until(pilot, lambda: len(app.query(FooterKey)) > 5, "the footer keys")
            # the tab keys are one group in the footer ("f2 f3 … tabs"), each naming its tab
            shown = {key.key: str(key.tooltip) for key in app.query(FooterKey)}
            for key, label in (("f2", "inject"), ("f3", "search"), ("ctrl+g", "daily")):
                assert f"the {label} tab" in shown.get(key, "")
            assert {"f5", "f6"} <= set(shown) and "f4" not in shown
            await pilot.press("f4")  # the old key does nothing now
            await pilot.pause(0.1)
            assert panels.active_tab == "inject"
            await pilot.press("ctrl+g")
            tree = panels.daily_tree.query_one("#daily-tree")
            await wait_until(pilot, lambda: app.focused is tree, "the daily tree")
            await pilot.press("f6")
            await wait_until(
                pilot,
                lambda: (
                    panels.active_tab == "stats"
                    and app.focused is not None
                    and panels in app.focused.ancestors
                ),
                "focus in the Stats tab",
            )
            assert "escape" in {key.key for key in app.query(FooterKey)}  # the way back, shown
            await pilot.press("escape")
            assert app.focused is app.main_screen.chat_pane.chat_input
    finally:
        await close_chat_engine(engine)


async def test_the_palette_shows_daily_from_the_search_box(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        await pilot.press("f3")
        query = panels.search_panel.query_one("#search-query")
        await wait_until(pilot, lambda: app.focused is query, "the search box")
        await pilot.press("ctrl+p", *"Show Daily", "enter")
        await wait_until(pilot, lambda: panels.active_tab == "daily", "the Daily tab")
        tree = panels.daily_tree.query_one("#daily-tree")
        await wait_until(pilot, lambda: app.focused is tree, "focus in the Daily tab")
        await pilot.pause(0.2)
        assert panels.active_tab == "daily"  # not switched back by focus returning


async def test_enter_in_the_palette_runs_the_typed_command_once_it_is_found(
    engine: ChatEngine,
) -> None:
    from textual.command import Hit, Hits, Provider

    ran: list[str] = []

    class SlowCommands(Provider):
        async def search(self, query: str) -> Hits:
            await asyncio.sleep(0.6)  # a slow provider: Enter comes before its hits
            matcher = self.matcher(query)
            score = matcher.match("Pack the zeppelin")
            if score > 0:
                yield Hit(score, matcher.highlight("Pack the zeppelin"), lambda: ran.append("z"))

    class SlowPaletteApp(MemdeckApp):
        CSS_PATH = str(ROOT / "tui" / "app" / "screens" / "main_screen.tcss")
        COMMANDS = MemdeckApp.COMMANDS | {SlowCommands}

    app = SlowPaletteApp(
        engine, now=NOW, clock=fixed_clock, config_file=engine.memory.workspace.root / "c.toml"
    )
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p", *"pack the zeppelin", "enter")
        await wait_until(pilot, lambda: ran == ["z"], "the typed command to run")


@pytest.mark.parametrize(
    "focused",
    [
        ("message box", "sessions", "nothing"),
        ("inject", "search box", "results"),
        ("daily", "editor", "stats"),
    ],
    ids=["chat side", "inject and search", "daily, editor, stats"],
)
async def test_typing_after_ctrl_n_is_never_lost_whatever_had_focus(
    engine: ChatEngine, focused: tuple[str, ...]
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.main_screen
        panels, pane = screen.memory_panels, screen.chat_pane
        focus_states: dict[str, Callable[[], object]] = {
            "message box": pane.chat_input.focus,
            "sessions": screen.session_list.option_list.focus,
            "inject": lambda: panels.show_tab("inject", focus=True),
            "search box": lambda: panels.show_tab("search", focus=True),
            "results": lambda: panels.search_panel.query_one("#search-results").focus(),
            "daily": lambda: panels.show_tab("daily", focus=True),
            "editor": lambda: panels.show_tab("memory", focus=True),
            "stats": lambda: panels.show_tab("stats", focus=True),
            "nothing": lambda: app.set_focus(None),
        }
        for state in focused:
            focus_states[state]()
            await pilot.pause(0.05)
            sessions = len(engine.sessions.ids())
            await pilot.press("ctrl+n", *f"typed after {state}")

            def typed(state: str = state) -> bool:
                return pane.chat_input.value == f"typed after {state}"

            def one_more_session(n: int = sessions) -> bool:
                return len(engine.sessions.ids()) == n + 1

            await wait_until(pilot, typed, f"the text typed from {state}")
            await wait_until(pilot, one_more_session, "the new session")
            pane.chat_input.clear()
        # and with nothing focused, typing alone lands in the message box too
        app.set_focus(None)
        await pilot.press(*"hello")
        assert pane.chat_input.value == "hello" and app.focused is pane.chat_input


async def test_the_inject_tab_comes_forward_while_typing_unless_another_was_chosen(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        await pilot.press("f3", "escape", *"Lisbon")  # the user chose Search in this session
        await pilot.pause(0.2)
        assert panels.active_tab == "search"
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.main_screen.active_session is not None, "a session")
        app.main_screen.chat_pane.chat_input.clear()
        await pilot.press(*"hotel")  # a new session: Inject comes forward again
        await wait_until(pilot, lambda: panels.active_tab == "inject", "the Inject tab")


async def test_indexing_progress_is_shown_while_a_dropped_file_is_embedded(
    engine: ChatEngine,
) -> None:
    from tui.app.widgets.app_header import AppHeader

    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.main_screen
        await wait_until(
            pilot, lambda: screen.watcher is not None and screen.watcher.ready.is_set(), "watcher"
        )
        before = screen.header.chunks or 0
        seen: list[tuple[str, int, int]] = []
        watcher = screen.watcher
        assert watcher is not None and watcher.progress is not None
        report = watcher.progress

        def recording(stage: str, done: int, total: int) -> None:
            seen.append((stage, done, total))
            report(stage, done, total)

        watcher.progress = recording
        notes = "\n\n".join(
            f"- Note {n}: the blue notebook page {n} about trains" for n in range(80)
        )
        (engine.memory.workspace.root / "memory" / "notes.md").write_text(notes + "\n")
        await wait_until(
            pilot, lambda: bool(seen) and seen[-1][1] == seen[-1][2], "the embedding to finish"
        )
        assert all(stage == "embedding" for stage, _, _ in seen) and seen[-1][2] >= 80
        await wait_until(pilot, lambda: (screen.header.chunks or 0) >= before + 80, "the count")
        assert screen.header.progress == "" and "✓ hybrid" in str(screen.header.render())
        # what a progress report looks like while it runs
        screen.desk.post_message(Desk.IndexProgress("embedding", 120, 400))
        await wait_until(pilot, lambda: screen.header.progress != "", "a progress report")
        header = str(app.query_one(AppHeader).render())
        assert "BM25 only · embedding 120/400 units" in header
        stats = dict((k, v.plain) for k, v in screen.memory_panels.stats_panel.describe_stats())
        assert stats["indexing"].startswith("embedding 120/400 units")


async def test_a_tab_asked_for_focus_does_not_take_it_after_the_user_moved_on(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.main_screen
        pane = screen.chat_pane
        # the tab takes focus two refreshes later; ctrl+n comes first (a loaded machine)
        screen.memory_panels.show_tab("daily", focus=True)
        screen.action_focus_chat()
        await pilot.press(*"still here")
        await pilot.pause(0.2)
        assert pane.chat_input.value == "still here" and app.focused is pane.chat_input


@pytest.mark.parametrize("focus", ["f5", "f3", "escape"])
async def test_the_footer_shows_palette_help_and_quit_at_80_columns(
    engine: ChatEngine, focus: str
) -> None:
    from textual.widgets._footer import FooterKey

    app = build_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(focus)
        await pilot.pause(0.2)

        def visible() -> dict[str, str]:
            return {
                key.key: key.description
                for key in app.screen.query(FooterKey)
                if key.region.right <= 80 and key.region.width
            }

        await wait_until(pilot, lambda: "ctrl+q" in visible(), "^q quit in the footer")
        if focus == "f5":
            await wait_until(pilot, lambda: "ctrl+s" in visible(), "the editor's save key")
        shown = visible()
        assert shown["ctrl+p"] == "palette" and shown["f1"] == "help"
        assert {"f2", "f3", "f4", "f5", "f6"} <= set(shown)  # the tab group
        if focus == "f5":  # MEMORY.md's own key comes first; the session keys make room
            assert shown["ctrl+s"] == "save" and "ctrl+n" not in shown
        await pilot.press("ctrl+n" if focus != "escape" else "ctrl+f")  # still work
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: "ctrl+n" in visible(), "every key at 160 columns")
