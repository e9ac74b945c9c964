"""The search results table: the source column stays in view, ← → step a whole column
(issue 32, item 19). The Search panel over a real BM25 engine, in a host narrower than the
table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pilot import PanelHost, wait_until
from support.workspaces import write_workspace

from tui.app.panels.result_table import COLUMNS, ResultTable
from tui.app.panels.search_panel import SearchPanel
from tui.engine.engine import MemoryEngine

MEMORY = (
    "# Memory\n\n- Has a dog called Max who loves the beach\n"
    "- Walks the dog every morning before work\n"
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY))
    eng.sync()
    yield eng
    eng.close()


def header(table: ResultTable) -> str:
    """The table's header line as drawn."""
    return table.render_line(0).text


async def test_left_and_right_scroll_by_column_with_the_source_frozen(
    engine: MemoryEngine,
) -> None:
    app = PanelHost(lambda: SearchPanel(engine))
    async with app.run_test(size=(50, 24)) as pilot:
        panel = app.query_one(SearchPanel)
        table = panel.query_one(ResultTable)
        panel.set_query("dog")
        await wait_until(pilot, lambda: table.row_count == 2, "the results")
        table.focus()
        await pilot.pause()
        assert table.max_scroll_x > 0  # the table is wider than the panel
        starts = table.column_starts()
        assert header(table).split()[:3] == ["source", "score", "vector"]

        for step in range(1, len(starts)):
            await pilot.press("right")
            await pilot.pause()
            # One press, one column: the next column is the first after the source...
            assert table.scroll_x == starts[step]
            assert header(table).split()[:2] == ["source", COLUMNS[step + 1].split()[0]]
            # ...and every row still starts with its source, whole.
            assert table.render_line(1).text.lstrip().startswith("MEMORY.md:L")
            if table.scroll_x == table.max_scroll_x:
                break
        # The last step lands on a column's edge too, and shows the last column whole.
        assert table.scroll_x == table.max_scroll_x
        assert header(table).rstrip().endswith("conf")
        await pilot.press("right")
        await pilot.pause()
        assert table.scroll_x == table.max_scroll_x

        await pilot.press("left")
        await pilot.pause()
        assert table.scroll_x == max(x for x in starts if x < table.max_scroll_x)
        for _ in starts:
            await pilot.press("left")
        await pilot.pause()
        assert table.scroll_x == 0
        assert header(table).split()[:3] == ["source", "score", "vector"]
