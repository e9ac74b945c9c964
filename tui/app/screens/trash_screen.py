"""The session trash: deleted sessions (``sessions/.trash/``), and Enter brings one back."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker

from tui.app.messages import report_worker_error, while_attached
from tui.chat.sessions import SessionError, SessionInfo, SessionStore
from tui.chat.trash import TrashedSession, trashed_sessions


def trash_prompt(row: TrashedSession) -> Text:
    """Two lines: the title, then its messages and when it was last updated."""
    prompt = Text(row.title, style="bold")
    when = f" · {row.updated[:16].replace('T', ' ')}" if row.updated else ""
    prompt.append(f"\n  {row.describe()}{when} · {row.id}", style="dim")
    return prompt


class TrashScreen(ModalScreen[str | None]):
    """Deleted sessions, most recent first: Enter restores the highlighted one (dismissing with
    its id); Escape closes (None). The trash is read, and a session restored, in thread
    workers."""

    HELP = """\
## Deleted sessions

Sessions you deleted, most recently used first: they were flushed to memory, then moved to
`sessions/.trash/` (nothing is destroyed).

- **Enter**: restore the highlighted session: it is back in the session list (its messages
  not yet logged, if any, are logged by the next flush).
- **Escape**: close.

`memdeck sessions --restore` lists the trash too; `memdeck sessions --restore ID` restores.
"""

    BINDINGS = [
        Binding("escape", "close", "Close", id="trash.close", tooltip="Close the trash"),
    ]

    DEFAULT_CSS = """
    TrashScreen {
        align: center middle;
    }
    TrashScreen > Vertical {
        width: 90%;
        max-width: 90;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    TrashScreen #trash-title {
        height: auto;
        margin-bottom: 1;
    }
    TrashScreen #trash-list {
        height: auto;
        max-height: 20;
        border: none;
        padding: 0;
    }
    TrashScreen #trash-status {
        height: auto;
        margin-top: 1;
    }
    """

    @dataclass
    class Listed(Message, bubble=False):
        """What the trash holds, read by a worker."""

        rows: list[TrashedSession]

    def __init__(self, sessions: SessionStore) -> None:
        super().__init__()
        self.sessions = sessions
        self.rows: list[TrashedSession] | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(
                    ("Deleted sessions", "bold"), ("  Enter restores · Escape closes", "dim")
                ),
                id="trash-title",
            )
            yield OptionList(id="trash-list")
            yield Static("reading the trash…", id="trash-status")

    def on_mount(self) -> None:
        self.query_one("#trash-list", OptionList).focus()
        self._read()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    @work(thread=True, exclusive=True, group="trash", exit_on_error=False)
    def _read(self) -> None:
        self.post_message(self.Listed(trashed_sessions(self.sessions)))

    @on(Listed)
    @while_attached
    def _listed(self, message: Listed) -> None:
        self.rows = message.rows
        options = self.query_one("#trash-list", OptionList)
        options.clear_options()
        options.add_options(Option(trash_prompt(row), id=row.id) for row in message.rows)
        status = self.query_one("#trash-status", Static)
        if message.rows:
            status.update("")
            status.display = False
            options.highlighted = 0
        else:
            status.update(Text("the trash is empty", style="dim italic"))
            options.display = False

    @on(OptionList.OptionSelected, "#trash-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self._restore(event.option.id)

    @work(thread=True, exclusive=True, group="trash-restore", exit_on_error=False)
    def _restore(self, session_id: str) -> None:
        try:
            info = self.sessions.restore(session_id)
        except (SessionError, OSError) as exc:
            self.app.call_from_thread(self._refused, str(exc))
            return
        self.app.call_from_thread(self._restored, info)

    def _refused(self, reason: str) -> None:
        status = self.query_one("#trash-status", Static)
        status.display = True
        status.update(Text(f"not restored: {reason}", style="bold red"))

    def _restored(self, info: SessionInfo) -> None:
        pending = f" ({info.unlogged_count} not logged)" if info.unlogged_count else ""
        self.notify(f"“{info.title}” is back in the session list{pending}", title="restored")
        self.dismiss(info.id)

    def action_close(self) -> None:
        self.dismiss(None)
