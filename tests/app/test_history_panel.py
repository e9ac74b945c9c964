"""The History tab (F8), reverting a change with ``u``, and every memory's origin in the panels.

The whole app over the deck workspace (real engine, real git repository in ``tmp_path``), a real
``memdeck mcp`` process as the other agent, the fake OpenAI server as the chat model; the
history is read back with the plain ``git`` command (``support.history_support.log``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fakeopenai import FakeOpenAI
from support.history_support import commit_memory, log
from support.mcp_support import connected
from support.pilot import (
    PanelHost,
    SnapCompare,
    build_app,
    ready,
    send,
    text_of,
    wait_until,
)
from support.workspaces import write_workspace
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static

from tui.app.app import MemdeckApp
from tui.app.panels.history_panel import HistoryPanel
from tui.app.panels.memory_editor import MemoryEditor
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen
from tui.chat.chat import ChatEngine
from tui.engine.engine import MemoryEngine
from tui.engine.history_records import Attribution

#: The terminal of these tests: wide enough for the history's columns.
WIDE = (160, 48)
AGENT = 'agent "test-agent 9.1"'
BEES = "Keeps bees on the allotment"


async def agent_saves(root: Path, tmp_path: Path, text: str) -> None:
    """Another agent saves ``text`` through a real ``memdeck mcp`` process."""
    async with connected(root, tmp_path) as agent:
        result = await agent.call_tool("save_memory", {"content": text})
        assert not result.isError


def history_of(app: MemdeckApp) -> HistoryPanel:
    return app.main_screen.memory_panels.history_panel


def whos(panel: HistoryPanel) -> list[str]:
    """Who made each change listed, top to bottom, as the list says it."""
    listed = panel.query_one("#history-changes", OptionList)
    rows = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
    return [row.split(" · ")[1] for row in rows]


def row_of(panel: HistoryPanel, source: str, nth: int = 0) -> int:
    """The row of the ``nth`` newest change by ``source``."""
    assert panel.changes is not None
    rows = [i for i, change in enumerate(panel.changes) if change.source == source]
    return rows[nth]


async def show_history(pilot: Pilot[Any], app: MemdeckApp, newest: str, count: int) -> HistoryPanel:
    """F8, then wait until ``count`` changes are listed, the newest by ``newest``."""
    await pilot.press("f8")
    panel = history_of(app)
    await wait_until(
        pilot,
        lambda: (
            panel.changes is not None
            and len(panel.changes) == count
            and panel.changes[0].source == newest
        ),
        f"{count} changes listed, the newest by {newest}",
    )
    return panel


async def save_in_editor(pilot: Pilot[Any], app: MemdeckApp, text: str) -> None:
    """Make MEMORY.md ``text`` in the editor (F5) and save it (ctrl+s)."""
    await pilot.press("f5")
    editor = app.main_screen.memory_panels.memory_editor
    await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
    area = editor.text_area
    area.replace(text, (0, 0), area.document.end)
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: not editor.is_dirty and editor.base is not None, "the save")
    await wait_until(pilot, lambda: editor.base is not None and editor.base.text == text, "saved")


async def select_change(pilot: Pilot[Any], panel: HistoryPanel, row: int) -> None:
    listed = panel.query_one("#history-changes", OptionList)
    listed.focus()
    listed.highlighted = row
    await pilot.pause()


def diff_text(panel: HistoryPanel) -> str:
    return text_of(panel.query_one("#history-diff", Static))


async def wait_for_text(pilot: Pilot[Any], widget: Static, text: str) -> None:
    await wait_until(pilot, lambda: text in text_of(widget), repr(text))


def link_in(app: MemdeckApp, widget: Static) -> tuple[int, int]:
    """Where in ``widget`` (as drawn) the first link is: a cell whose style has a click."""
    region = widget.region
    for y in range(region.height):
        for x in range(region.width):
            if "@click" in app.screen.get_style_at(region.x + x, region.y + y).meta:
                return x, y
    raise AssertionError("no link drawn")


def title_text(panel: HistoryPanel) -> str:
    return text_of(panel.query_one("#history-detail-title", Static))


async def test_the_history_tab_says_who_made_each_change_and_enter_shows_its_diff(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    await agent_saves(root, tmp_path, BEES)
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Plays the cello on Sundays"}),
        FakeOpenAI.text("Noted."),
    )
    app = build_app(engine)
    async with app.run_test(size=WIDE) as pilot:
        await ready(pilot)
        await send(pilot, "I play the cello on Sundays")
        session = app.main_screen.active_session
        memory = (root / "MEMORY.md").read_text()
        await save_in_editor(pilot, app, memory + "- Likes rye bread\n")
        panel = await show_history(pilot, app, "editor", 4)

        assert whos(panel) == [
            "you (editor)",
            f'the model in session "{session}"',
            AGENT,
            "an outside edit",
        ]
        # The same history, read with plain git.
        assert [(c["source"], c.get("session"), c.get("client")) for c in log(root)] == [
            ("editor", None, None),
            ("chat", session, None),
            ("mcp", None, "test-agent 9.1"),
            ("outside", None, None),
        ]

        await select_change(pilot, panel, row_of(panel, "mcp"))
        assert AGENT in title_text(panel)
        await pilot.press("enter")
        await wait_until(pilot, lambda: f"+- {BEES}" in diff_text(panel), "the agent's diff")
        assert "--- a/MEMORY.md" in diff_text(panel)
        assert "cello" not in diff_text(panel)


async def test_an_agent_s_change_appears_in_the_open_history_tab(
    engine: ChatEngine, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    app = build_app(engine)
    async with app.run_test(size=WIDE) as pilot:
        await ready(pilot)
        await show_history(pilot, app, "outside", 1)
        await agent_saves(root, tmp_path, BEES)  # another process: the watcher brings it
        panel = await show_history(pilot, app, "mcp", 2)
        assert whos(panel) == [AGENT, "an outside edit"]
        assert AGENT in title_text(panel)  # the newest is selected


async def test_a_memory_s_origin_is_in_the_search_detail_and_o_opens_its_session(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    await agent_saves(root, tmp_path, BEES)
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Plays the cello on Sundays"}),
        FakeOpenAI.text("Noted."),
    )
    app = build_app(engine)
    async with app.run_test(size=WIDE) as pilot:
        await ready(pilot)
        await send(pilot, "I play the cello on Sundays")
        chat_session = app.main_screen.active_session
        await pilot.press("ctrl+n")
        await wait_until(
            pilot,
            lambda: app.main_screen.active_session not in (None, chat_session),
            "a new session",
        )

        await pilot.press("f3")
        search = app.main_screen.memory_panels.search_panel
        title = search.query_one("#search-context-title", Static)
        for query, origin in (
            ("bees allotment", f"from {AGENT} · "),
            ("cello Sundays", f'from the model in session "{chat_session}" · '),
        ):
            search.set_query(query)
            await wait_for_text(pilot, title, origin)
        assert "o opens its session" in text_of(title)

        search.query_one("#search-results", DataTable).focus()
        await pilot.press("o")
        await wait_until(
            pilot, lambda: app.main_screen.active_session == chat_session, "the chat's session"
        )

        # A click on who wrote it opens the session too.
        await pilot.press("ctrl+n")
        await wait_until(
            pilot, lambda: app.main_screen.active_session != chat_session, "another new session"
        )
        await pilot.press("f3")
        search.set_query("cello Sundays")
        await wait_for_text(pilot, title, "from the model")
        assert await pilot.click(title, offset=link_in(app, title))
        await wait_until(
            pilot, lambda: app.main_screen.active_session == chat_session, "the click's session"
        )


async def test_u_reverts_exactly_the_agent_s_change_and_a_conflicting_revert_changes_nothing(
    engine: ChatEngine, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    memory_file = root / "MEMORY.md"
    await agent_saves(root, tmp_path, BEES)
    with_bees = memory_file.read_text()
    bees_lines = [line for line in with_bees.splitlines(keepends=True) if BEES in line]
    assert len(bees_lines) == 1
    app = build_app(engine)
    async with app.run_test(size=WIDE, notifications=True) as pilot:
        await ready(pilot)
        await save_in_editor(pilot, app, with_bees + "- Likes rye bread\n")
        panel = await show_history(pilot, app, "editor", 3)

        await select_change(pilot, panel, row_of(panel, "mcp"))
        await pilot.press("u")
        panel = await show_history(pilot, app, "revert", 4)
        # Exactly the agent's line is gone; the later edit next to it stays.
        assert memory_file.read_text() == (with_bees + "- Likes rye bread\n").replace(
            bees_lines[0], ""
        )
        sources = [c["source"] for c in log(root)]
        assert sources == ["revert", "editor", "mcp", "outside"]
        assert any("reverted" in str(n.message) for n in app._notifications)

        # The rye line is changed again: undoing the change that added it now conflicts.
        rewritten = memory_file.read_text().replace("rye bread", "sourdough")
        await save_in_editor(pilot, app, rewritten)
        panel = await show_history(pilot, app, "editor", 5)
        app.clear_notifications()
        await pilot.press("f8")
        await select_change(pilot, panel, row_of(panel, "editor", nth=1))
        await pilot.press("u")
        await wait_until(
            pilot,
            lambda: any("cannot revert" in str(n.message) for n in app._notifications),
            "the refusal",
        )
        refusal = [str(n.message) for n in app._notifications if "cannot revert" in str(n.message)]
        assert len(refusal) == 1 and "\n" not in refusal[0]
        assert "MEMORY.md" in refusal[0]
        # ... shown with the change's diff, and nothing changed.
        await wait_until(pilot, lambda: "+- Likes rye bread" in diff_text(panel), "the diff")
        assert "cannot revert" in title_text(panel)
        assert memory_file.read_text() == rewritten
        assert len(log(root)) == 5


async def test_a_revert_under_unsaved_editor_edits_goes_through_the_editor_s_question(
    engine: ChatEngine, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    await agent_saves(root, tmp_path, BEES)
    app = build_app(engine)
    async with app.run_test(size=WIDE) as pilot:
        await ready(pilot)
        await pilot.press("f5")
        editor = app.main_screen.memory_panels.query_one(MemoryEditor)
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        area = editor.text_area
        area.move_cursor(area.document.end)
        area.insert("- Typed but not saved\n")
        assert editor.is_dirty
        panel = await show_history(pilot, app, "mcp", 2)
        await select_change(pilot, panel, 0)
        await pilot.press("u")
        await wait_until(
            pilot, lambda: isinstance(app.screen, MemoryConflictScreen), "the editor's question"
        )
        # The revert is on disk; the unsaved edits are still in the buffer, not lost.
        assert BEES not in (root / "MEMORY.md").read_text()
        assert "- Typed but not saved" in area.text


async def test_with_history_off_the_tab_says_so_in_one_line(tmp_path: Path) -> None:
    engine = MemoryEngine(write_workspace(tmp_path / "ws", "# Long-term Memory\n"), history="off")
    app = PanelHost(lambda: HistoryPanel(engine))
    try:
        async with app.run_test(size=(100, 20)) as pilot:
            panel = app.query_one(HistoryPanel)
            await wait_until(pilot, lambda: panel.changes is not None, "the history read")
            summary = text_of(panel.query_one("#history-summary", Static)).strip()
            assert summary.startswith("history is off")
            assert "\n" not in summary
            assert not panel.check_action("revert", ())
    finally:
        engine.close()


# -- snapshot: changes from five sources at fixed times --

HISTORY_MEMORY = "# Long-term Memory\n\n## Preferences\n- Drinks green tea, never coffee\n"


def history_workspace(root: Path) -> Path:
    """A workspace whose history has a change of each kind a user meets, at fixed times."""
    write_workspace(root, HISTORY_MEMORY, {"memory/2026-11-20.md": "# 2026-11-20\n"})
    commit_memory(root, when="2026-11-19T09:00:00+0000")
    memory = root / "MEMORY.md"
    steps = [
        (
            "- Keeps bees on the allotment\n",
            Attribution("mcp", client="claude-code 2.1", summary="save_memory: " + BEES),
        ),
        (
            "- Plays the cello on Sundays\n",
            Attribution("chat", session="s-20261120-1", summary="save_memory: Plays the cello"),
        ),
        ("- Likes rye bread\n", Attribution("editor", summary="edit MEMORY.md")),
    ]
    for hour, (line, who) in enumerate(steps, start=10):
        memory.write_text(memory.read_text() + line)
        commit_memory(root, who, when=f"2026-11-20T{hour}:15:00+0000")
    daily = root / "memory/2026-11-20.md"
    daily.write_text(daily.read_text() + "\n## Daily Summary\n- Planned a trip to Lisbon.\n")
    flush = Attribution(
        "flush", session="s-20261120-1", trigger="idle", summary="flush: 1 entry to the daily log"
    )
    commit_memory(root, flush, when="2026-11-20T18:40:00+0000")
    return root


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC: a commit's id holds its time zone, and the panel shows local time."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("utc")
def test_snapshot_history_panel(snap_compare: SnapCompare, tmp_path: Path) -> None:
    engine = MemoryEngine(history_workspace(tmp_path / "ws"))
    app = PanelHost(lambda: HistoryPanel(engine))

    async def diff_of_the_agent_s_change(pilot: Pilot[Any]) -> None:
        panel = app.query_one(HistoryPanel)
        await wait_until(pilot, lambda: bool(panel.changes), "the history")
        await select_change(pilot, panel, 3)
        await pilot.press("enter")
        await wait_until(pilot, lambda: f"+- {BEES}" in diff_text(panel), "the diff")

    try:
        assert snap_compare(app, terminal_size=(120, 30), run_before=diff_of_the_agent_s_change)
    finally:
        engine.close()
