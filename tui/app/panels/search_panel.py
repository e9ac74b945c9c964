"""Search panel: a query box, results with their score breakdown, and the chunk in its file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static
from textual.worker import get_current_worker

from tui.app.external_editor import open_entry_in_editor
from tui.app.latest import Answer, Requests
from tui.app.messages import OpenEntry, OpenSession, while_attached
from tui.app.metadata_text import dim_metadata
from tui.app.panels.base import EnginePanel, describe_breakdown, format_source, formula_markdown
from tui.app.panels.origins import OriginText, describe_origin, session_of
from tui.app.panels.result_table import ResultTable
from tui.engine.engine import MemoryEngine
from tui.engine.memory_lines import HeaderField, session_header
from tui.engine.score_formula import score_formula
from tui.engine.search import SearchResponse, SearchResult
from tui.engine.textsearch import query_terms
from tui.engine.workspace import WorkspaceError

#: Typing in the query box searches once typing pauses this long.
SEARCH_DEBOUNCE_S = 0.25
#: Lines of file context shown above and below a selected chunk.
CONTEXT_LINES = 3

def term_pattern(query: str) -> re.Pattern[str] | None:
    """A regex finding the query's terms in text (case-insensitive; a word of 3+ letters also
    matches longer forms, as the stemmed full-text search does: "walk" finds "walking")."""
    alternatives = []
    for term in query_terms(query):
        parts = [re.escape(part) for part in term]
        tail = r"\w*" if len(term[-1]) >= 3 else r"\b"
        alternatives.append(r"\b" + r"\W+".join(parts) + tail)
    if not alternatives:
        return None
    return re.compile("|".join(alternatives), re.IGNORECASE)


def describe_mode(response: SearchResponse, model_loaded: bool) -> Text:
    """``hybrid · 4 results`` or ``BM25 only — model loading · 2 results``."""
    if response.mode == "hybrid":
        mode = Text("hybrid", style="bold green")
    elif not model_loaded:
        mode = Text("BM25 only — model loading", style="bold yellow")
    else:
        mode = Text("BM25 only — no vectors yet", style="bold yellow")
    count = len(response.results)
    return Text.assemble(mode, (f" · {count} result{'s' if count != 1 else ''}", "dim"))


def first_match(
    first_line: int,
    lines: list[str],
    start_line: int,
    end_line: int,
    pattern: re.Pattern[str] | None,
) -> int:
    """The number of the chunk's first line where a query term occurs (its first line if none)."""
    if pattern is not None:
        for offset, line in enumerate(lines):
            if start_line <= first_line + offset <= end_line and pattern.search(line):
                return first_line + offset
    return start_line


def render_context(
    first_line: int,
    lines: list[str],
    start_line: int,
    end_line: int,
    pattern: re.Pattern[str] | None = None,
    header: Sequence[HeaderField] = (),
) -> Table:
    """File lines with a line-number gutter; the chunk's lines ``start..end`` marked ``▌``, the
    query's terms (``pattern``) highlighted in them; above them, the ``header`` of a session
    file when its lines are not among them (the entry's context: no fact, never indexed).

    A grid, so a long line wraps under its text rather than under the gutter.
    """
    grid = Table.grid()
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for part in header:
        if part.line < first_line:
            grid.add_row(
                Text(str(part.line), style="dim"),
                Text("  "),
                Text(f"{part.key}: {part.value}", style="dim italic"),
            )
    for offset, line in enumerate(lines):
        number = first_line + offset
        inside = start_line <= number <= end_line
        text = dim_metadata(Text(line, style="" if inside else "dim"))
        if inside and pattern is not None:
            text.highlight_regex(pattern, style="bold reverse")
        grid.add_row(
            Text(str(number), style="bold" if inside else "dim"),
            Text(" ▌" if inside else "  ", style="bold"),
            text,
        )
    return grid


class SearchPanel(EnginePanel):
    """Searches memory and shows why each result surfaced.

    :meth:`set_query` fills the box and searches at once (the app's "why did this surface?" key
    passes the last user message). Highlighting a row shows the chunk in its file.
    """

    @dataclass
    class ResultsReady(Answer):
        """Search results for the query of search request ``number``."""

        response: SearchResponse
        model_loaded: bool

    @dataclass
    class ContextReady(Answer):
        """A result's file lines around its chunk (``lines`` start at ``first_line``)."""

        location: str
        first_line: int
        lines: list[str]
        start_line: int
        end_line: int
        error: str | None = None
        query: str = ""
        #: The session file's header (:func:`session_header`): shown above the lines.
        header: list[HeaderField] = field(default_factory=list)

    HELP = """\
## Search

Type a query: results are ranked as the assistant would see them.

| column | meaning |
|---|---|
| score | see the formula below |
| vector | cosine similarity (— while the embedding model loads) |
| text (bm25) | share of the query's words matched, weighted by rarity (raw FTS5 bm25 rank) |
| near | relevance lent by the daily-log entry next to a strong match (— when its own is higher) |
| update | +: relevance lent by an older entry this one changes ("Switched from Vim to Zed" for "Uses Vim"), on a question about now or about before; ×: a newer entry changed this one |
| recency | < 1 for older daily-log entries, only when the question asks about the present ("now", "do I use") |
| window | < 1 for entries outside a time the question names ("yesterday", "in May 2023") |
| conf | confidence of the entry |
| source | file and lines |

Move through the rows to see each chunk in its file, scrolled to the line that matched, the
query's words highlighted. When the table is wider than the panel, **←** **→** scroll it a
column at a time; the source column stays.

How the score is computed:

{formula}
"""

    BINDINGS = [
        Binding(
            "ctrl+l",
            "focus_query",
            "Query",
            id="search_panel.focus_query",
            tooltip="Focus the search box",
            show=False,
        ),
        Binding(
            "e",
            "open_in_editor",
            "$EDITOR",
            id="search_panel.open_in_editor",
            tooltip="Open the selected result in $EDITOR at its line",
        ),
        Binding(
            "o",
            "open_origin",
            "origin",
            id="search_panel.open_origin",
            tooltip="Open the session whose chat or flush wrote the selected result",
        ),
    ]

    DEFAULT_CSS = """
    SearchPanel {
        layout: vertical;
        height: 1fr;
    }
    SearchPanel #search-query {
        margin: 0 0;
    }
    SearchPanel #search-mode {
        height: 1;
        padding: 0 1;
    }
    SearchPanel #search-results {
        height: auto;
        max-height: 45%;
    }
    SearchPanel #search-context-title {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    SearchPanel #search-context-scroll {
        height: 1fr;
    }
    SearchPanel #search-context {
        padding: 0 1;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        now: date | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(engine, now=now, name=name, id=id, classes=classes)
        # F1 shows the formula of the options this engine searches with.
        self.help_text = self.HELP.replace(
            "{formula}", formula_markdown(score_formula(engine.search_options))
        )
        self.response: SearchResponse | None = None
        #: The query in the box was typed by the user (not put there by the app): the app
        #: leaves it alone (see :meth:`follow_conversation`).
        self.query_typed = False
        self._searches = Requests()
        self._context_reads = Requests()
        self._debounce: Timer | None = None
        self._search_when_shown = False  # a search was asked for while hidden

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search memory…", id="search-query")
        yield Static("type a query", id="search-mode")
        yield ResultTable(id="search-results")
        yield OriginText("", id="search-context-title")
        with VerticalScroll(id="search-context-scroll"):
            yield Static("", id="search-context")

    @property
    def query_text(self) -> str:
        """The query in the box."""
        return self.query_one("#search-query", Input).value

    def set_query(self, text: str) -> None:
        """Put ``text`` in the query box and search now."""
        query_input = self.query_one("#search-query", Input)
        with query_input.prevent(Input.Changed):
            query_input.value = text
        self.run_search()

    def follow_conversation(self, text: str) -> None:
        """A turn was sent: search its text, unless the user typed a query of their own."""
        if not self.query_typed:
            self.set_query(text)

    def run_search(self) -> None:
        """Search for the query in the box now (cancels a pending or running search); while
        the panel is hidden (another tab is in front), once it is shown (:meth:`activated`):
        a search that nobody sees took the GIL from the UI at each turn and index change."""
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        if not self.region:
            self._search_when_shown = True
            return
        self._search_when_shown = False
        self._search(self.query_text, self._searches.new())

    def activated(self) -> None:
        """The panel is shown (its tab was activated): run the search asked for meanwhile."""
        if self._search_when_shown:
            self._search_when_shown = False
            self._search(self.query_text, self._searches.new())

    def index_changed(self, paths: list[str]) -> None:
        """Memory changed: re-run the current query so scores and lines follow."""
        if self.query_text.strip():
            self.run_search()

    def action_focus_query(self) -> None:
        self.query_one("#search-query", Input).focus()

    @on(Input.Changed, "#search-query")
    def _query_edited(self) -> None:
        self.query_typed = bool(self.query_text.strip())
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(SEARCH_DEBOUNCE_S, self.run_search)

    @on(Input.Submitted, "#search-query")
    def _query_submitted(self) -> None:
        self.run_search()

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def _search(self, query: str, number: int) -> None:
        response = self.engine.search(query, now=self.now)
        if not get_current_worker().is_cancelled:
            self.post_message(self.ResultsReady(number, response, self.engine.model_loaded))

    @on(ResultsReady)
    @while_attached
    def _show_results(self, message: ResultsReady) -> None:
        if not self._searches.is_latest(message):
            return
        before = self.response
        kept = self.selected_result() if before and before.query == message.response.query else None
        self.response = message.response
        mode = self.query_one("#search-mode", Static)
        if message.response.query:
            mode.update(describe_mode(message.response, message.model_loaded))
        else:
            mode.update("type a query")
        table = self.query_one("#search-results", ResultTable)
        table.show_results(message.response.results)
        self.find_origins(result.location for result in message.response.results)
        if message.response.results:
            # the same query run again (memory changed) keeps the result the user was on
            locations = [result.location for result in message.response.results]
            row = locations.index(kept.location) if kept and kept.location in locations else 0
            table.move_cursor(row=row)
            self._show_context(message.response.results[row])
        else:
            self.query_one("#search-context-title", Static).update("")
            self.query_one("#search-context", Static).update(
                Text("\n".join(message.response.notes) or "no results", style="dim")
            )

    @on(DataTable.RowHighlighted, "#search-results")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        result = self._result_for(event.row_key.value)
        if result is not None:
            self._show_context(result)
            self.refresh_bindings()

    @on(DataTable.RowSelected, "#search-results")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a result opens its entry (MEMORY.md in the editor, a log in Daily)."""
        result = self._result_for(event.row_key.value)
        if result is not None:
            self.post_message(OpenEntry(result.path, result.start_line))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The editor key acts on the selected row, so it is offered only in the table."""
        if action == "open_in_editor":
            return self.screen.focused is self.query_one("#search-results", DataTable)
        if action == "open_origin":
            if self.screen.focused is not self.query_one("#search-results", DataTable):
                return False
            return self._origin_session() is not None
        return True

    def selected_result(self) -> SearchResult | None:
        """The result the table's cursor is on."""
        table = self.query_one("#search-results", DataTable)
        return self._result_for(str(table.cursor_row)) if table.row_count else None

    def action_open_in_editor(self) -> None:
        """Open the selected result in $VISUAL / $EDITOR at its first line."""
        result = self.selected_result()
        if result is None:
            return
        open_entry_in_editor(self, self.engine.workspace, result.path, result.start_line)

    def _origin_session(self) -> str | None:
        """The session whose chat or flush wrote the selected result, if one did."""
        result = self.selected_result()
        origin = self.origins.get(result.location) if result is not None else None
        return session_of(origin.source, origin.session) if origin is not None else None

    def action_open_origin(self) -> None:
        """Open the session whose chat or flush wrote the selected result."""
        session = self._origin_session()
        if session is not None:
            self.post_message(OpenSession(session))

    def origins_found(self) -> None:
        """The selected result's title gets its origin."""
        result = self.selected_result()
        if result is not None:
            self._show_title(result)
        self.refresh_bindings()

    def _result_for(self, key: str | None) -> SearchResult | None:
        if self.response is None or key is None:
            return None
        index = int(key)
        return self.response.results[index] if index < len(self.response.results) else None

    def _show_context(self, result: SearchResult) -> None:
        """The selected result: every part of its score above its lines in the file."""
        self._show_title(result)
        self._read_context(self._context_reads.new(), result)

    def _show_title(self, result: SearchResult) -> None:
        """The result's score breakdown, where it came from, and the keys."""
        location = format_source(result.path, result.start_line, result.end_line)
        title = describe_breakdown(result, injected=False, location=location)
        origin = self.origins.get(result.location)
        hint = "\n  enter opens the entry · e opens it in $EDITOR"
        if origin is not None:
            title.append("\n  ")
            title.append_text(describe_origin(origin))
            if session_of(origin.source, origin.session):
                hint += " · o opens its session"
        table = self.query_one("#search-results", DataTable)
        if table.virtual_size.width > table.scrollable_content_region.width:
            hint += " · ← → more columns"  # the table has no scrollbar to say so
        title.append(hint, style="dim italic")
        self.query_one("#search-context-title", Static).update(title)

    @work(thread=True, exclusive=True, group="search-context", exit_on_error=False)
    def _read_context(self, number: int, result: SearchResult) -> None:
        location = format_source(result.path, result.start_line, result.end_line)
        try:
            path = self.engine.workspace.resolve_memory_path(result.path)
            all_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except (OSError, WorkspaceError) as exc:
            self.post_message(
                self.ContextReady(
                    number, location, 0, [], result.start_line, result.end_line, str(exc)
                )
            )
            return
        first = max(1, result.start_line - CONTEXT_LINES)
        last = min(len(all_lines), result.end_line + CONTEXT_LINES)
        header = [f for f in session_header(all_lines) if f.line < first]
        if not get_current_worker().is_cancelled:
            query = self.response.query if self.response is not None else ""
            self.post_message(
                self.ContextReady(
                    number,
                    location,
                    first,
                    all_lines[first - 1 : last],
                    result.start_line,
                    result.end_line,
                    query=query,
                    header=header,
                )
            )

    @on(ContextReady)
    @while_attached
    def _context_ready(self, message: ContextReady) -> None:
        if not self._context_reads.is_latest(message):
            return
        context = self.query_one("#search-context", Static)
        if message.error:
            context.update(Text(message.error, style="red"))
            return
        pattern = term_pattern(message.query)
        context.update(
            render_context(
                message.first_line,
                message.lines,
                message.start_line,
                message.end_line,
                pattern,
                message.header,
            )
        )
        line = first_match(
            message.first_line, message.lines, message.start_line, message.end_line, pattern
        )
        self.call_after_refresh(
            self._scroll_to_line, line - message.first_line + len(message.header)
        )

    def _scroll_to_line(self, offset: int) -> None:
        """Show the matching line (with a line of context above it) at the top of the view."""
        scroll = self.query_one("#search-context-scroll", VerticalScroll)
        scroll.scroll_to(y=max(0, offset - 1), animate=False)

    def show_error(self, message: str) -> None:
        self.query_one("#search-mode", Static).update(Text(message, style="bold red"))
