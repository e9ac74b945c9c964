"""The table of search results with their score breakdown (the Search tab's, and a search's in
the Activity tab): the source column stays, ← → step through the others a column at a time."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tui.app.panels.base import format_score, format_source, format_text_score
from tui.engine.search import Breakdown, SearchResult

#: The table's columns: the source first, whole, so no width cuts it.
COLUMNS = (
    "source",
    "score",
    "vector",
    "text (bm25)",
    "near",
    "update",
    "recency",
    "decay",
    "window",
    "conf",
)


def format_update(b: Breakdown) -> str:
    """The update-link cell: ``+.59`` (relevance lent by the entry this one changes) or
    ``×.70`` (a newer entry changed this one); ``—`` when neither applies."""
    if b.superseded < 1.0:
        return f"×{format_score(b.superseded)}"
    if b.linked > max(b.hybrid, b.neighbour):
        return f"+{format_score(b.linked)}"
    return "—"


def breakdown_cells(result: SearchResult) -> tuple[str, ...]:
    """The table cells of a result, in :data:`COLUMNS` order."""
    b = result.breakdown
    text = format_text_score(b.text, b.bm25)
    return (
        format_source(result.path, result.start_line, result.end_line),
        format_score(result.score),
        format_score(b.vector),
        text,
        format_score(b.neighbour) if b.neighbour > b.hybrid else "—",
        format_update(b),
        format_score(b.recency),
        format_score(b.decay),
        format_score(b.time_window),
        b.confidence,
    )


class ResultTable(DataTable[Text]):
    """Search results, one row each, in :data:`COLUMNS`.

    The source column is frozen (it says which result a row is, however far the table is
    scrolled); with the row cursor, ← and → scroll the other columns by a whole column (a
    DataTable scrolls a character per key), so each press shows a column more or less.
    """

    DEFAULT_CSS = """
    ResultTable {
        /* its thumb alone read as a stray character under the rows */
        scrollbar-size-horizontal: 0;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, fixed_columns=1)
        self.add_columns(*COLUMNS)

    def column_starts(self) -> list[int]:
        """The scroll offsets that put each scrolled column first after the frozen ones."""
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        frozen = sum(widths[: self.fixed_columns])
        starts = []
        x = frozen
        for width in widths[self.fixed_columns :]:
            starts.append(x - frozen)
            x += width
        return starts

    @property
    def max_scroll_x(self) -> int:
        """Far enough to show the last column whole at the start of the view: the last step
        to the right lands on a column's edge like the others, not inside one."""
        fitted = super().max_scroll_x
        if not fitted:
            return 0
        return next((x for x in self.column_starts() if x >= fitted), fitted)

    def action_cursor_right(self) -> None:
        """Scroll to the next column (the row cursor has no column to move to)."""
        if self.cursor_type != "row":
            super().action_cursor_right()
            return
        after = [x for x in self.column_starts() if x > self.scroll_x]
        target = min(after[0], self.max_scroll_x) if after else self.max_scroll_x
        self.scroll_to(x=target, animate=False)

    def action_cursor_left(self) -> None:
        """Scroll back to the previous column."""
        if self.cursor_type != "row":
            super().action_cursor_left()
            return
        before = [x for x in self.column_starts() if x < self.scroll_x]
        self.scroll_to(x=before[-1] if before else 0, animate=False)

    def show_results(self, results: list[SearchResult]) -> None:
        """One row per result, keyed by its index."""
        self.clear()
        for index, result in enumerate(results):
            self.add_row(*(Text(cell) for cell in breakdown_cells(result)), key=str(index))
