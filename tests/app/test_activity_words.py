"""What the Activity tab offers and says about an agent's forget once it is undone, and on
a row that is no forget (issue 32, item 22). The panel over a real engine, with a footer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pilot import text_of, wait_until
from support.workspaces import write_workspace
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Static
from textual.widgets._footer import FooterKey

from tui.app.panels.activity_panel import ActivityPanel
from tui.chat.activity import ActivityLog, ActivityRecord
from tui.engine.engine import MemoryEngine

MEMORY = "# Memory\n\n- Likes tea\n- The release train leaves on Thursdays\n"
GONE = "The release train leaves on Thursdays"


class ActivityHost(App[None]):
    """The Activity panel above the footer that shows its keys."""

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__()
        self.engine = engine

    def compose(self) -> ComposeResult:
        yield ActivityPanel(self.engine)
        yield Footer()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY))
    eng.sync()
    # An agent forgot an entry, then searched: the log has both, the search newest.
    entry = next(e for e in eng.store.entries() if GONE in e.text)
    eng.store.retire_entries([entry], state="forgotten")
    log = ActivityLog(eng.workspace.root)
    log.append(
        ActivityRecord(
            at="2026-11-22T09:00:00+00:00",
            client="agent",
            kind="tool",
            name="forget_memory",
            arguments='query="release train"',
            ok=True,
            summary="forgot 1 entry",
            forgotten=[{"path": "MEMORY.md", "text": GONE}],
        )
    )
    log.append(
        ActivityRecord(
            at="2026-11-22T09:01:00+00:00",
            client="agent",
            kind="tool",
            name="memory_search",
            arguments='query="tea"',
            ok=True,
            summary="1 result",
            query="tea",
        )
    )
    yield eng
    eng.close()


def footer_keys(app: App[None]) -> set[str]:
    return {key.key for key in app.query(FooterKey)}


async def test_undo_is_offered_on_a_forget_only_and_not_once_it_is_undone(
    engine: MemoryEngine,
) -> None:
    app = ActivityHost(engine)
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(ActivityPanel)
        calls = panel.query_one("#activity-calls", DataTable)
        detail = panel.query_one("#activity-detail", Static)
        await wait_until(pilot, lambda: len(panel.records) == 2, "the log")
        calls.focus()
        await pilot.pause()
        assert panel.records[0].name == "memory_search"
        assert "u" not in footer_keys(app)

        await pilot.press("down")  # the forget
        await wait_until(pilot, lambda: "u" in footer_keys(app), "u offered on the forget")
        assert "press u to bring it back" in text_of(detail)

        await pilot.press("up")  # back on the search: no undo there
        await wait_until(pilot, lambda: "u" not in footer_keys(app), "u gone on the search")

        await pilot.press("down", "u")
        memory_file = engine.workspace.root / "MEMORY.md"
        await wait_until(pilot, lambda: GONE in memory_file.read_text(), "the forget undone")
        await wait_until(pilot, lambda: "u" not in footer_keys(app), "u gone once undone")
        await wait_until(
            pilot, lambda: "nothing left to undo" in text_of(detail), "the detail updated"
        )
        assert "press u" not in text_of(detail)
        await pilot.press("u")  # nothing happens a second time
        await pilot.pause()
        assert memory_file.read_text().count(GONE) == 1
