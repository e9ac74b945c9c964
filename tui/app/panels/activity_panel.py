"""Activity panel: what other agents did with this memory over ``memdeck mcp``, live.

Each call of the activity log (:mod:`tui.chat.activity`), newest first: when, which agent,
what it called with which arguments, and what came of it. A selected search (or recall) shows
its results with the same breakdown the Search tab shows, and Enter opens one; a selected
forget can be undone (``u``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from tui.app.messages import OpenEntry, while_attached
from tui.app.panels.base import EnginePanel, describe_breakdown
from tui.app.panels.origins import OriginText, describe_origin
from tui.app.panels.result_table import ResultTable
from tui.chat.activity import ActivityLog, ActivityRecord, retired_by
from tui.engine.engine import MemoryEngine
from tui.engine.search import SearchResult

#: How often the log is looked at (a stat; it is read only when it changed).
POLL_S = 0.5
#: Calls shown, newest first.
MAX_SHOWN = 200
CALL_COLUMNS = ("time", "agent", "call", "outcome", "arguments")


def is_undoable(record: ActivityRecord) -> bool:
    """A forget that retired something."""
    return record.name == "forget_memory" and record.ok and bool(record.forgotten)


class ActivityPanel(EnginePanel):
    """The activity of other agents (MCP clients) on this workspace's memory."""

    @dataclass
    class Loaded(Message, bubble=False):
        """The log's records, oldest first, and for each whether undo has something to bring
        back (a forget whose entries are still forgotten)."""

        records: list[ActivityRecord]
        undoable: list[bool]

    HELP = """\
## Activity

What other agents did with this memory through `memdeck mcp` (see the README for a client's
configuration), newest first: the time, the agent (as it named itself), the call and its
arguments, and what came of it.

Select a search or a recall to see its results with the same score breakdown as the Search
tab (**Enter** on a result opens its entry). Select a forget and press **u** to undo it.
"""

    BINDINGS = [
        Binding(
            "u",
            "undo_forget",
            "undo forget",
            id="activity_panel.undo_forget",
            tooltip="Bring back what the selected forget retired",
        ),
    ]

    DEFAULT_CSS = """
    ActivityPanel {
        layout: vertical;
        height: 1fr;
    }
    ActivityPanel #activity-summary {
        height: 1;
        padding: 0 1;
    }
    ActivityPanel #activity-calls {
        height: auto;
        max-height: 40%;
        scrollbar-size-horizontal: 0;
    }
    ActivityPanel #activity-detail-title {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    ActivityPanel #activity-results {
        height: auto;
        max-height: 30%;
    }
    ActivityPanel #activity-detail-scroll {
        height: 1fr;
    }
    ActivityPanel #activity-detail {
        padding: 0 1;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(engine, name=name, id=id, classes=classes)
        self.help_text = self.HELP
        self.activity_log = ActivityLog(engine.workspace.root)
        #: Newest first, as the table shows them.
        self.records: list[ActivityRecord] = []
        #: For each of :attr:`records`: undo has something to bring back (see
        #: :meth:`Loaded`); a forget undone since is no longer offered.
        self.undoable: list[bool] = []
        self._stamp: tuple[int, int] | None = None
        #: The selected call's results (a search or a recall).
        self._results: list[SearchResult] = []
        self._reading = False
        self._read_again = False

    def compose(self) -> ComposeResult:
        yield Static("no agent has used this memory yet", id="activity-summary")
        calls: DataTable[str] = DataTable(id="activity-calls", cursor_type="row")
        calls.add_columns(*CALL_COLUMNS)
        yield calls
        yield Static("", id="activity-detail-title")
        results = ResultTable(id="activity-results")
        results.display = False
        yield results
        with VerticalScroll(id="activity-detail-scroll"):
            yield OriginText("", id="activity-detail")

    def on_mount(self) -> None:
        self._poll()
        self.set_interval(POLL_S, self._poll)

    def _poll(self, force: bool = False) -> None:
        """Read the log if it changed (``force``: anyway, as what is forgotten may have)."""
        stamp = self.activity_log.stamp()
        if stamp == self._stamp and not force:
            return
        if self._reading:
            self._read_again = self._read_again or force
            return
        self._stamp = stamp
        self._reading = True
        self._read()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _read(self) -> None:
        records = self.activity_log.read(limit=MAX_SHOWN)
        forgets = any(is_undoable(record) for record in records)
        retired = self.engine.store.retired_records() if forgets else []
        undoable = [is_undoable(r) and bool(retired_by(r, retired)) for r in records]
        self.post_message(self.Loaded(records, undoable))

    @on(Loaded)
    @while_attached
    def _show_records(self, message: Loaded) -> None:
        self._reading = False
        if self._read_again:
            self._read_again = False
            self._poll(force=True)
        records, undoable = list(reversed(message.records)), list(reversed(message.undoable))
        if records == self.records and undoable == self.undoable:
            return  # a memory change that changed nothing here: the table stays as it is
        calls = self.query_one("#activity-calls", DataTable)
        selected = calls.cursor_row if calls.row_count else 0
        known = len(self.records)
        self.records, self.undoable = records, undoable
        calls.clear()
        for index, record in enumerate(self.records):
            time = record.time
            calls.add_row(
                time.strftime("%H:%M:%S") if time else "?",
                Text(record.client or "?"),
                Text(record.name if record.kind == "tool" else f"{record.name} (prompt)"),
                Text(record.summary, style="" if record.ok else "red"),
                Text(record.arguments),
                key=str(index),
            )
        agents = sorted({r.client for r in self.records if r.client})
        # Clients name themselves: their names are text, never markup.
        self.query_one("#activity-summary", Static).update(
            Text(f"{len(self.records)} calls by {', '.join(agents)}")
            if self.records
            else "no agent has used this memory yet"
        )
        if self.records:
            # On the newest call, follow the newest; on an older one, keep it selected.
            row = selected + len(self.records) - known if selected else 0
            calls.move_cursor(row=max(0, min(row, len(self.records) - 1)))
            self._show_detail(self.records[calls.cursor_row])
        self.refresh_bindings()

    @on(DataTable.RowHighlighted, "#activity-calls")
    def _call_highlighted(self, event: DataTable.RowHighlighted) -> None:
        record = self._record(event.row_key.value)
        if record is not None:
            self._show_detail(record)
        self.refresh_bindings()  # u is offered on a forget, not on the call now selected

    def _record(self, key: str | None) -> ActivityRecord | None:
        if key is None or not key.isdigit() or int(key) >= len(self.records):
            return None
        return self.records[int(key)]

    def _show_detail(self, record: ActivityRecord) -> None:
        title = Text(f"{record.client} · {record.name} ", style="bold")
        title.append(record.query or record.arguments, style="")
        self.query_one("#activity-detail-title", Static).update(title)
        results = self.query_one("#activity-results", ResultTable)
        results.display = bool(record.results)
        self._results = [SearchResult.from_json(r) for r in record.results]
        self.find_origins(result.location for result in self._results)
        results.show_results(self._results)
        detail = self.query_one("#activity-detail", Static)
        if self._results:
            results.move_cursor(row=0)
            detail.update(self._result_detail(self._results[0]))
            return
        lines = Text(record.summary, style="" if record.ok else "red")
        for entry in record.entries:
            lines.append(f"\n  {entry}")
        if is_undoable(record):
            if self._can_undo(record):
                lines.append("\n\npress u to bring it back", style="dim")
            else:
                lines.append("\n\nbrought back since: nothing left to undo", style="dim")
        detail.update(lines)

    def _can_undo(self, record: ActivityRecord) -> bool:
        """``record`` is a forget whose entries are still forgotten (as last read)."""
        index = next((i for i, shown in enumerate(self.records) if shown is record), None)
        return index is not None and index < len(self.undoable) and self.undoable[index]

    def _result_detail(self, result: SearchResult) -> Text:
        text = describe_breakdown(result, injected=False)
        origin = self.origins.get(result.location)
        if origin is not None:
            text.append("\n  ")
            text.append_text(describe_origin(origin))
        text.append(f"\n\n{result.text}")
        return text

    def origins_found(self) -> None:
        """The selected result's detail gets its origin."""
        results = self.query_one("#activity-results", DataTable)
        if self._results and results.row_count:
            result = self._result(str(results.cursor_row))
            if result is not None:
                self.query_one("#activity-detail", Static).update(self._result_detail(result))

    @on(DataTable.RowHighlighted, "#activity-results")
    def _result_highlighted(self, event: DataTable.RowHighlighted) -> None:
        result = self._result(event.row_key.value)
        if result is not None:
            self.query_one("#activity-detail", Static).update(self._result_detail(result))

    @on(DataTable.RowSelected, "#activity-results")
    def _result_selected(self, event: DataTable.RowSelected) -> None:
        result = self._result(event.row_key.value)
        if result is not None:
            self.post_message(OpenEntry(result.path, result.start_line))

    def _result(self, key: str | None) -> SearchResult | None:
        if key is None or not key.isdigit() or int(key) >= len(self._results):
            return None
        return self._results[int(key)]

    def selected(self) -> ActivityRecord | None:
        """The call selected in the table."""
        calls = self.query_one("#activity-calls", DataTable)
        return self.records[calls.cursor_row] if self.records and calls.row_count else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Undo is offered on a forget whose entries are still forgotten."""
        if action == "undo_forget":
            record = self.selected()
            return record is not None and self._can_undo(record)
        return True

    def action_undo_forget(self) -> None:
        record = self.selected()
        if record is not None and self._can_undo(record):
            self._undo(record)

    @work(thread=True, exclusive=True, exit_on_error=False, group="undo")
    def _undo(self, record: ActivityRecord) -> None:
        engine = self.engine
        gone = sorted(retired_by(record, engine.store.retired_records()), key=lambda r: r.number)
        places = [  # top down (the trail keeps a forget's entries in file order): exact blanks
            found for retired in gone if (found := engine.restore(retired)) is not None
        ]
        restored, wanted = len(places), len(record.forgotten)
        if restored == wanted:
            message = f"brought back {restored} memor{'y' if restored == 1 else 'ies'}"
        elif restored:
            message = f"brought back {restored} of {wanted} (the rest is back already)"
        else:
            message = "nothing to bring back: it is back already, or edited by hand since"
        # Where each went when not where it was (a heading is the file's text: no markup).
        moved = [f"\none {place.describe()}" for place in places if not place.in_place]
        message += (
            "".join(dict.fromkeys(moved)) if moved else (", each where it was" if restored else "")
        )
        self.app.call_from_thread(self.notify, message, title="undo forget", markup=False)
        self.app.call_from_thread(self._poll, True)  # the forget is undone: say so, offer no u

    def index_changed(self, paths: list[str]) -> None:
        """Memory changed: the log may have too (a write by an agent), and what is forgotten
        (an undo here or in the History tab, ``memdeck forgotten --restore``)."""
        self._poll(force=True)
