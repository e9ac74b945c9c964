"""The app says when a memory's relevance came through another entry (issue 32, item 1): the
Search tab's detail and why? name it ("via L6"). Pilot over the real index and model, the fake
loopback OpenAI server as the LLM."""

from __future__ import annotations

import re

from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, build_app, ready, searched, send, text_of, wait_until
from textual.widgets import DataTable, Static

from tui.chat.chat import ChatEngine

LOG = "memory/2026-11-19.md"
L5, L6, L7 = (f"{LOG}#L{n}-{n}" for n in (5, 6, 7))


def add_the_issue_s_log(engine: ChatEngine) -> None:
    """L5 Vim, L6 the manager, L7 dark themes: the workspace of the issue, beside the deck's."""
    (engine.memory.workspace.root / LOG).write_text(
        "# 2026-11-19\n\n## Notes\n\n"
        "- Uses Vim for everything, with lazy.nvim plugins.\n"
        "- My manager is Dana Whitfield.\n"
        "- Prefers dark themes in every app and terminal.\n",
        encoding="utf-8",
    )


async def test_the_search_detail_names_the_entry_a_match_came_through(engine: ChatEngine) -> None:
    add_the_issue_s_log(engine)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = await searched(pilot, "Whitfield")
        assert panel.response is not None
        locations = [r.location for r in panel.response.results]
        assert locations[0] == L6 and L7 in locations
        title = panel.query_one("#search-context-title", Static)
        await wait_until(pilot, lambda: f"{LOG}:L6-6" in text_of(title), "L6's detail")
        assert "via" not in text_of(title)  # it holds the word itself
        panel.query_one("#search-results", DataTable).move_cursor(row=locations.index(L7))
        await wait_until(pilot, lambda: f"{LOG}:L7-7" in text_of(title), "L7's detail")
        shown = text_of(title)
        assert re.search(r"near \.\d\d via L6\)", shown), shown
        assert re.search(r"text \.\d\d \(-?\d+\.\d\d\) via L6", shown), shown
        before = panel.response
        panel.index_changed([LOG])  # memory changed: the query runs again
        await wait_until(pilot, lambda: panel.response is not before, "the search run again")
        assert f"{LOG}:L7-7" in text_of(title)  # the user stays on the result they were on
        table = panel.query_one("#search-results", DataTable)
        assert panel.response is not None
        assert panel.response.results[table.cursor_row].location == L7


async def test_why_names_the_entry_a_memory_came_through(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    add_the_issue_s_log(engine)
    server.enqueue(FakeOpenAI.text("Dana Whitfield."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "is Whitfield my manager")
        session = app.main_screen.active_session
        assert session is not None
        (recorded,) = engine.sessions.load(session).injections
        injected = [r.location for r in recorded.results]
        assert injected.index(L6) < injected.index(L7)
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn's injection")
        rows = panel.items_text.split("✓ ")
        (seven,) = [row for row in rows if row.startswith(L7)]
        (six,) = [row for row in rows if row.startswith(L6)]
        assert re.search(r"near \.\d\d via L6\)", seven) and "via L6" in seven.split("text")[1]
        assert "via" not in six
