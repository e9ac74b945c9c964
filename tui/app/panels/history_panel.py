"""History panel: every change of the memory, newest first, who made it, its diff, and undo.

The workspace's Markdown is versioned in git (:mod:`tui.engine.git_history`); each change is a
commit that says who made it: you in the editor, the model in a session, a flush, an agent over
``memdeck mcp``, an outside edit. Enter shows a change's diff; ``u`` reverts it as a new
``revert`` change (:func:`~tui.engine.history_actions.revert_change`), or says in one line why
it cannot (a later change touched the same lines) and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.app.latest import Answer, Requests
from tui.app.messages import OpenSession, while_attached
from tui.app.panels.base import EnginePanel
from tui.app.panels.origins import OriginText, format_time, session_of, who_link
from tui.app.widgets.diff_view import DiffView, render_diff
from tui.engine.engine import MemoryEngine
from tui.engine.history_actions import revert_change
from tui.engine.history_records import Change, HistoryError, one_line

#: Changes listed, newest first.
MAX_SHOWN = 200
#: Lines of a diff shown (the first commit of a big workspace is every file).
DIFF_MAX_LINES = 2000


def describe_files(files: tuple[str, ...]) -> str:
    """``MEMORY.md, memory/2026-11-21.md`` or ``MEMORY.md +3 more``."""
    if len(files) <= 2:
        return ", ".join(files) or "no files"
    return f"{files[0]} +{len(files) - 1} more"


def describe_change(change: Change) -> Text:
    """A change as the list shows it, on two lines (they wrap in a narrow panel; text from
    memory or a client is never markup)::

        2026-11-20 10:15 · agent "claude-code 2.1" · +1 -0
          save_memory: Keeps bees on the allotment — MEMORY.md
    """
    row = Text()
    row.append(format_time(change.time), style="dim")
    row.append(" · ", style="dim")
    row.append(one_line(change.who()), style="bold")
    row.append(" · ", style="dim")
    row.append(f"+{change.added}", style="green")
    row.append(f" -{change.removed}", style="red")
    row.append(f"\n  {one_line(change.summary)}")
    row.append(f" — {one_line(describe_files(change.files))}", style="dim")
    return row


def shown_diff(diff: str) -> str:
    """``diff`` cut at :data:`DIFF_MAX_LINES`, saying how much was left out."""
    lines = diff.splitlines()
    if len(lines) <= DIFF_MAX_LINES:
        return diff
    left = len(lines) - DIFF_MAX_LINES
    return "\n".join([*lines[:DIFF_MAX_LINES], f"… {left} more lines (git show shows them all)"])


class HistoryPanel(EnginePanel):
    """The memory's history: who changed what, each change's diff, and undoing one."""

    @dataclass
    class Loaded(Answer):
        """The history, newest first; ``problem`` says why it is off or what failed last."""

        changes: list[Change]
        enabled: bool
        problem: str | None

    @dataclass
    class DiffLoaded(Answer):
        """Change ``change_id``'s diff; ``note`` is a line to show above it (a failed revert)."""

        change_id: str
        diff: str
        note: str | None = None

    HELP = """\
## History

Every change of the memory, newest first: when, who made it (you in the editor or on the
command line, the model in a session, a flush, an agent over `memdeck mcp`, an outside edit),
the files, the lines added and removed, and what it did. The workspace's Markdown is a git
repository: `git log -p` shows the same.

- **Enter** shows the selected change's diff.
- **u** undoes that one change, as a new `revert` change (itself undoable). When a later change
  touched the same lines, nothing is changed and one line says so. Unsaved edits of MEMORY.md
  in the editor go through its usual question.
- **o** opens the session of a chat's or a flush's change.
"""

    BINDINGS = [
        Binding(
            "u",
            "revert",
            "revert",
            id="history_panel.revert",
            tooltip="Undo the selected change, as a new change",
        ),
        Binding(
            "o",
            "open_origin",
            "session",
            id="history_panel.open_origin",
            tooltip="Open the session whose chat or flush made the selected change",
        ),
    ]

    DEFAULT_CSS = """
    HistoryPanel {
        layout: vertical;
        height: 1fr;
    }
    HistoryPanel #history-summary {
        height: auto;
        padding: 0 1;
    }
    HistoryPanel #history-changes {
        height: auto;
        max-height: 45%;
        border: none;
        padding: 0 0 0 1;
        background: transparent;
    }
    HistoryPanel #history-changes:focus {
        border: none;
    }
    HistoryPanel #history-detail-title {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    HistoryPanel #history-diff-scroll {
        height: 1fr;
    }
    HistoryPanel #history-diff {
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
        #: Newest first, as the table shows them (None until read).
        self.changes: list[Change] | None = None
        #: The change whose diff is shown.
        self.diff_of: str | None = None
        self._reads = Requests()
        self._diffs = Requests()
        #: Memory changed while the panel was hidden: read the history when it is shown.
        self._stale = True

    def compose(self) -> ComposeResult:
        yield Static("reading the history…", id="history-summary")
        yield OptionList(id="history-changes")
        yield OriginText("", id="history-detail-title")
        with VerticalScroll(id="history-diff-scroll"):
            yield DiffView("", id="history-diff")

    def on_mount(self) -> None:
        self.query_one("#history-diff", Static).update("")
        self.call_after_refresh(self._read_if_in_view)

    def index_changed(self, paths: list[str]) -> None:
        """Memory changed: a change was committed. Read again now if the panel is in view,
        else when it is shown (walking 200 commits holds the history's lock ~0.1 s)."""
        self._stale = True
        self._read_if_in_view()

    def _read_if_in_view(self) -> None:
        if self.region:
            self.activated()

    def activated(self) -> None:
        """The panel is shown (its tab was activated): read the history if memory changed
        since it was last read."""
        if self._stale:
            self.reload()

    def reload(self) -> None:
        """Read the history again (in a worker)."""
        self._stale = False
        self._read(self._reads.new())

    @work(thread=True, exclusive=True, group="history-read", exit_on_error=False)
    def _read(self, number: int) -> None:
        history = self.engine.history
        changes = history.changes(limit=MAX_SHOWN) if history.enabled else []
        self.post_message(self.Loaded(number, changes, history.enabled, history.problem))

    @on(Loaded)
    @while_attached
    def _show_changes(self, message: Loaded) -> None:
        if not self._reads.is_latest(message):
            return
        listed = self.query_one("#history-changes", OptionList)
        was = self.selected()
        on_newest = was is None or (self.changes is not None and was == self.changes[0])
        self.changes = message.changes
        listed.clear_options()
        listed.add_options(Option(describe_change(c), id=c.id) for c in message.changes)
        self.query_one("#history-summary", Static).update(self._summary(message))
        if not message.changes:
            self.query_one("#history-detail-title", Static).update("")
            self._show_diff_text(Text(""))
            return
        row = 0
        if not on_newest and was is not None:
            row = next((i for i, c in enumerate(message.changes) if c.id == was.id), 0)
        listed.highlighted = row
        self._show_title(message.changes[row])
        self.refresh_bindings()

    @staticmethod
    def _summary(message: Loaded) -> Text:
        if not message.enabled:
            return Text(message.problem or "history is off for this workspace", style="yellow")
        count = len(message.changes)
        if not count:
            summary = Text("no changes yet")
        elif count >= MAX_SHOWN:
            summary = Text(f"the last {count} changes, newest first")
        else:
            summary = Text(f"{count} change{'s' if count != 1 else ''}, newest first")
        if message.problem:
            summary.append(f" · {message.problem}", style="yellow")
        return summary

    def selected(self) -> Change | None:
        """The change highlighted in the list."""
        index = self.query_one("#history-changes", OptionList).highlighted
        if not self.changes or index is None or index >= len(self.changes):
            return None
        return self.changes[index]

    def _change(self, change_id: str | None) -> Change | None:
        return next((c for c in self.changes or () if c.id == change_id), None)

    @on(OptionList.OptionHighlighted, "#history-changes")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        change = self._change(event.option.id)
        if change is not None:
            self._show_title(change)
            if change.id != self.diff_of:
                self.diff_of = None
                self._show_diff_text(Text(""))  # the title says how to see it
            self.refresh_bindings()

    @on(OptionList.OptionSelected, "#history-changes")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a change shows its diff."""
        change = self._change(event.option.id)
        if change is not None:
            self.show_diff(change.id)

    def _show_title(self, change: Change, note: str | None = None) -> None:
        title = Text()
        if note:
            title.append(f"{note}\n", style="bold red")
        title.append(change.short_id, style="bold")
        title.append(" · ")
        title.append_text(who_link(change.who(), session_of(change.source, change.session)))
        title.append(f" · {format_time(change.time)}", style="dim")
        title.append(f"\n{one_line(', '.join(change.files)) or 'no files'}", style="dim")
        keys = "enter shows the diff · u reverts this change"
        if session_of(change.source, change.session):
            keys += " · o opens its session"
        title.append(f"\n{keys}", style="dim italic")
        self.query_one("#history-detail-title", Static).update(title)

    def _show_diff_text(self, text: Text) -> None:
        self.query_one("#history-diff", Static).update(text)
        self.query_one("#history-diff-scroll", VerticalScroll).scroll_home(animate=False)

    def show_diff(self, change_id: str, note: str | None = None) -> None:
        """Show change ``change_id``'s diff (read in a worker), ``note`` above it."""
        self._read_diff(self._diffs.new(), change_id, note)

    @work(thread=True, exclusive=True, group="history-diff", exit_on_error=False)
    def _read_diff(self, number: int, change_id: str, note: str | None) -> None:
        try:
            diff = self.engine.history.diff(change_id)
        except HistoryError as exc:
            diff, note = "", str(exc)
        self.post_message(self.DiffLoaded(number, change_id, diff, note))

    @on(DiffLoaded)
    @while_attached
    def _diff_loaded(self, message: DiffLoaded) -> None:
        if not self._diffs.is_latest(message):
            return
        self.diff_of = message.change_id
        change = self._change(message.change_id)
        if change is not None:
            self._show_title(change, message.note)
        self._show_diff_text(render_diff(shown_diff(message.diff)))

    # -- keys --

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Revert is offered on a change; the session on a chat's or a flush's change."""
        change = self.selected()
        if action == "revert":
            return change is not None
        if action == "open_origin":
            return change is not None and session_of(change.source, change.session) is not None
        return True

    def action_open_origin(self) -> None:
        change = self.selected()
        session = session_of(change.source, change.session) if change is not None else None
        if session is not None:
            self.post_message(OpenSession(session))

    def action_revert(self) -> None:
        change = self.selected()
        if change is not None:
            self._revert(change)

    @work(thread=True, exclusive=True, group="history-revert", exit_on_error=False)
    def _revert(self, change: Change) -> None:
        try:
            outcome = revert_change(self.engine, change.id)
        except HistoryError as exc:
            line = one_line(str(exc))
            self.app.call_from_thread(
                self.notify, line, title="revert", severity="warning", markup=False
            )
            self.app.call_from_thread(self.show_diff, change.id, line)
            return
        files = ", ".join(outcome.files) or "nothing to write"
        self.app.call_from_thread(
            self.notify,
            f"reverted {change.short_id} ({change.who()}): {files}",
            title="history",
            markup=False,
        )
        self.app.call_from_thread(self.reload)

    def show_error(self, message: str) -> None:
        self.query_one("#history-summary", Static).update(Text(message, style="bold red"))
