"""Explaining every memory: why? covers MEMORY.md, each score component is shown and defined.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, PanelHost, build_app, ready, searched, send, text_of, wait_until
from textual import events
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Markdown, Static, TextArea, Tree
from textual.widgets._collapsible import CollapsibleTitle

from tui.app.panels.search_panel import SearchPanel
from tui.app.screens.help_screen import HelpScreen
from tui.app.textual_compat import Toast
from tui.app.widgets.app_header import AppHeader
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.chat import ChatEngine
from tui.engine.inject import ALWAYS_INJECTED


async def test_why_explains_an_answer_found_in_memory_md(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    """The answer is a MEMORY.md entry: why? lists it with its breakdown, says it is always
    injected, and the turn counts it as relevant (it was in the prompt)."""
    server.enqueue(FakeOpenAI.text("Green tea."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "do I drink green tea or coffee?")
        session = app.main_screen.active_session
        assert session is not None
        (recorded,) = engine.sessions.load(session).injections
        # line 5 of the deck's MEMORY.md: "- Drinks green tea, never coffee"
        assert "MEMORY.md#L5-5" in [r.location for r in recorded.results]
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn's injection")
        items = panel.items_text
        assert "no relevant memory was injected" not in items
        assert "MEMORY.md#L5-5" in items and ALWAYS_INJECTED in items
        assert "relevance" in items and "decay" in items and "vector" in items
        assert "already in Long-term Memory" not in items
        budget = text_of(panel.query_one("#inject-budget", Static))
        assert "0 relevant" not in budget
        meta = text_of(app.main_screen.chat_pane.messages[-1].query_one(".message-meta", Static))
        assert "0 relevant" not in meta
        # the cursor is on the first memory: Enter opens it in the editor, on its line
        await pilot.press("enter")
        editor = app.main_screen.memory_panels.memory_editor.text_area
        await wait_until(pilot, lambda: app.focused is editor, "the editor focused")
        assert editor.cursor_location == (4, 0)


async def search_for(pilot: Pilot[Any], query: str) -> SearchPanel:
    """Show the Search tab, run ``query`` and put focus on the results."""
    panel = await searched(pilot, query)
    panel.query_one("#search-results", DataTable).focus()
    await pilot.pause()
    return panel


async def test_enter_on_a_daily_log_result_opens_its_entry_in_daily(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = await search_for(pilot, "hotels in Alfama")
        assert panel.response is not None
        top = panel.response.results[0]
        assert top.path == "memory/2026-11-20.md"
        await pilot.press("enter")
        panels = app.main_screen.memory_panels
        await wait_until(pilot, lambda: panels.active_tab == "daily", "the Daily tab")
        daily = panels.daily_tree
        title = daily.query_one("#daily-title", Static)
        await wait_until(
            pilot, lambda: text_of(title).startswith("memory/2026-11-20.md:L3"), "the entry"
        )
        assert "Alfama" in daily.query_one("#daily-view", Markdown).source
        await wait_until(
            pilot,
            lambda: (
                (cursor := daily.query_one("#daily-tree", Tree).cursor_node) is not None
                and cursor.data is not None
                and cursor.data.key == "memory/2026-11-20.md#L3"
            ),
            "the tree's cursor on the entry",
        )


async def test_enter_on_a_memory_md_result_puts_the_editor_cursor_on_it(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = await search_for(pilot, "green tea or coffee")
        assert panel.response is not None
        top = panel.response.results[0]
        assert top.path == "MEMORY.md"
        await pilot.press("enter")
        panels = app.main_screen.memory_panels
        editor = panels.memory_editor.text_area
        await wait_until(pilot, lambda: app.focused is editor, "the editor focused")
        assert panels.active_tab == "memory"
        assert editor.cursor_location == (top.start_line - 1, 0)
        assert "green tea" in editor.document.get_line(top.start_line - 1)


async def test_e_opens_the_result_in_editor_or_says_how(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No $EDITOR: one line says what to set; in the query box, e is a letter of the query."""
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = await search_for(pilot, "hotels in Alfama")
        await pilot.press("e")
        await wait_until(
            pilot,
            lambda: any("$EDITOR" in str(n.message) for n in app._notifications),
            "the notice",
        )
        panel.action_focus_query()
        await pilot.pause()
        await pilot.press("e")
        assert panel.query_text.endswith("e")


async def test_a_query_typed_in_search_survives_a_sent_message(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Noted."), FakeOpenAI.text("Noted again."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        search = app.main_screen.memory_panels.search_panel
        await send(pilot, "which hotels in Lisbon did I look at?")
        # not typed by the user: the search follows the conversation
        await wait_until(pilot, lambda: search.query_text.startswith("which hotels"), "followed")
        app.main_screen.memory_panels.show_tab("search", focus=True)
        await wait_until(pilot, lambda: search.query_one(Input).has_focus, "the query box")
        await pilot.press("ctrl+u", *"bike brake")
        await send(pilot, "and the dog?")
        await pilot.pause(0.3)
        assert search.query_text == "bike brake"


async def test_the_search_a_turn_asks_for_runs_when_its_tab_is_shown(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Noted."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        search = panels.search_panel
        searches = search._searches.latest
        await send(pilot, "which hotels in Lisbon did I look at?")
        await wait_until(pilot, lambda: search.query_text.startswith("which hotels"), "followed")
        await pilot.pause(0.3)
        assert not search.region, "the Search tab is behind another"
        assert search._searches.latest == searches, "searched for a tab nobody sees"
        panels.show_tab("search")
        await wait_until(
            pilot,
            lambda: search.response is not None
            and search.response.query.startswith("which hotels"),
            "the search once its tab is shown",
        )
        assert search._searches.latest == searches + 1


async def test_switching_sessions_leaves_the_other_session_s_why(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Alfama."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "which hotels in Lisbon did I look at?")
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn is not None, "the why? view")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: panel.turn is None, "the live preview")


@pytest.mark.parametrize("tab_key", ["f4", "f3", "ctrl+o"])
async def test_typing_in_a_panel_without_a_text_field_goes_to_the_message_box(
    engine: ChatEngine, server: FakeOpenAI, tab_key: str
) -> None:
    """F4 focuses the Daily tree; F3's results table after Tab; ctrl+o the why? view."""
    server.enqueue(FakeOpenAI.text("Alfama."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        if tab_key == "ctrl+o":
            await send(pilot, "which hotels in Lisbon did I look at?")
        await pilot.press(tab_key)
        if tab_key == "f3":
            await wait_until(pilot, lambda: isinstance(app.focused, Input), "the query box")
            await pilot.press("tab")
        panels = app.main_screen.memory_panels
        await wait_until(
            pilot,
            lambda: app.focused is not None and panels in app.focused.ancestors,
            "focus in the panel",
        )
        assert not isinstance(app.focused, Input | TextArea)
        # a burst, as a terminal delivers fast typing or a paste: every key arrives before
        # focus has moved to the message box, the space too
        for char in "hi there":
            app.post_message(events.Key("space" if char == " " else char, char))
        chat_input = app.main_screen.chat_pane.chat_input
        await wait_until(pilot, lambda: chat_input.value == "hi there", "the typed text")
        await wait_until(pilot, lambda: app.focused is chat_input, "the message box focused")
        # the burst is over: a key bound in a panel means its own thing again
        await pilot.press("f4")
        tree = panels.daily_tree.query_one("#daily-tree")
        await wait_until(pilot, lambda: app.focused is tree, "the Daily tree")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        assert chat_input.value == "hi there"


async def test_question_mark_opens_help_outside_text_fields(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat_input = app.main_screen.chat_pane.chat_input
        await pilot.press("question_mark")  # in the message box it is a character
        assert chat_input.value == "?"
        await pilot.press("f4")
        await wait_until(pilot, lambda: isinstance(app.focused, Tree), "the Daily tree")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")


async def test_an_empty_chat_says_what_to_do_until_the_first_message(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Hello."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        hint = app.main_screen.chat_pane.query_one("#chat-empty", Static)
        assert hint.display and "ctrl+o" in text_of(hint) and "MEMORY.md" in text_of(hint)
        await send(pilot, "hi")
        assert not hint.display
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: hint.display, "the hint in the new, empty session")


async def test_notices_cover_neither_the_message_box_nor_the_header(engine: ChatEngine) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        app.notify("a notice", title="memory")
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)), "the notice")
        await pilot.pause()
        toast = app.screen.query_one(Toast)
        box = app.main_screen.chat_pane.chat_input
        assert not toast.region.overlaps(box.region)
        assert toast.region.y >= 1  # below the header line
        assert toast.region.y < SIZE[1] // 2


async def test_a_long_session_title_is_cut_before_the_model_and_index_state(
    engine: ChatEngine,
) -> None:
    app = build_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        header = app.main_screen.query_one(AppHeader)
        header.session_title = "planning the quarterly offsite in the mountains " * 3
        await pilot.pause()
        line = "".join(segment.text for segment in header.render_line(0)).rstrip()
        assert "“planning the" in line and "…”" in line
        assert header.model in line and "index" in line  # the state stays in view
        header.session_title = "short"
        await pilot.pause()
        line = "".join(segment.text for segment in header.render_line(0))
        assert "“short”" in line


async def test_a_long_tool_call_title_ends_with_an_ellipsis() -> None:
    view = ToolCallView(
        "c1", "save_memory", {"content": "my manager is Priya Ramanathan of the platform team"}
    )
    app = PanelHost(lambda: view)
    async with app.run_test(size=(34, 6)) as pilot:
        view.set_result({"ok": True}, ok=True)
        await pilot.pause()
        title = view.query_one(CollapsibleTitle)
        line = "".join(segment.text for segment in title.render_line(0)).rstrip()
        assert line.startswith("▶ save_memory ✓ my manager") and line.endswith("…")
        assert title.region.right <= 34
