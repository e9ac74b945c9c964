"""Forgotten and superseded memories (the audit trail keeps them), and Enter brings one back."""

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
from tui.engine.engine import MemoryEngine
from tui.engine.history import RetiredRecord
from tui.engine.workspace import PathRefusedError

#: Characters of a memory's text shown in the list before it is cut.
TEXT_WIDTH = 200


def retired_prompt(record: RetiredRecord) -> Text:
    """Two lines: the memory's text, then what happened to it, when, in which file."""
    text = " ".join(record.text.split())
    cut = text if len(text) <= TEXT_WIDTH else text[: TEXT_WIDTH - 1] + "…"
    prompt = Text(cut)
    when = record.at[:16].replace("T", " ")
    reason = f" · {' '.join(record.reason.split())}" if record.reason else ""
    prompt.append(f"\n  {record.event} {when} · {record.path}{reason}", style="dim")
    return prompt


class ForgottenScreen(ModalScreen[int]):
    """Memories forgotten or superseded and not restored since, newest first: Enter restores
    the highlighted one (where it was) and the list follows. Dismisses with how many were
    restored. Reads and restores run in thread workers; a restore is a memory change like any
    other (the panels follow it)."""

    HELP = """\
## Forgotten memories

What was forgotten (by the assistant, an agent over MCP, or a consolidation) or superseded by
a newer memory, newest first. The audit trail keeps each one, so nothing is lost.

- **Enter**: bring the highlighted memory back: a MEMORY.md entry goes back where it was (at
  the end of the file if its section is gone), a daily-log entry loses its forgotten mark.
- **Escape**: close.

`memdeck forgotten` lists the same, `memdeck forgotten --restore N` restores from the shell.
"""

    BINDINGS = [
        Binding("escape", "close", "Close", id="forgotten.close", tooltip="Close the list"),
    ]

    DEFAULT_CSS = """
    ForgottenScreen {
        align: center middle;
    }
    ForgottenScreen > Vertical {
        width: 90%;
        max-width: 110;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ForgottenScreen #forgotten-title {
        height: auto;
        margin-bottom: 1;
    }
    ForgottenScreen #forgotten-list {
        height: auto;
        max-height: 24;
        border: none;
        padding: 0;
    }
    ForgottenScreen #forgotten-status {
        height: auto;
        margin-top: 1;
    }
    """

    @dataclass
    class Listed(Message, bubble=False):
        """The retired memories, read by a worker (oldest first, as the trail has them)."""

        records: list[RetiredRecord]

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__()
        self.engine = engine
        self.records: list[RetiredRecord] | None = None
        self.restored = 0
        self._reading = True

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(
                    ("Forgotten memories", "bold"), ("  Enter restores · Escape closes", "dim")
                ),
                id="forgotten-title",
            )
            yield OptionList(id="forgotten-list")
            yield Static("reading the audit trail…", id="forgotten-status")

    def on_mount(self) -> None:
        self.query_one("#forgotten-list", OptionList).focus()
        self._read()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    @work(thread=True, exclusive=True, group="forgotten", exit_on_error=False)
    def _read(self) -> None:
        self.post_message(self.Listed(self.engine.store.retired_records()))

    @on(Listed)
    @while_attached
    def _listed(self, message: Listed) -> None:
        self.records = message.records
        options = self.query_one("#forgotten-list", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options(
            Option(retired_prompt(record), id=str(record.number))
            for record in reversed(message.records)
        )
        options.display = bool(message.records)
        if message.records:
            options.highlighted = min(highlighted or 0, len(message.records) - 1)
        if self._reading:  # the first listing: what it found replaces "reading…"
            self._reading = False
            self._say(Text("" if message.records else "nothing forgotten or superseded", style="dim italic"))

    def _say(self, text: Text) -> None:
        status = self.query_one("#forgotten-status", Static)
        status.update(text)
        status.display = bool(text.plain)

    @on(OptionList.OptionSelected, "#forgotten-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        record = next(
            (r for r in self.records or [] if str(r.number) == event.option.id), None
        )
        if record is not None:
            self._say(Text("restoring…", style="dim"))
            self._restore(record)

    @work(thread=True, exclusive=True, group="forgotten-restore", exit_on_error=False)
    def _restore(self, record: RetiredRecord) -> None:
        try:
            restored = self.engine.restore(record)
        except (OSError, PathRefusedError) as exc:
            said = Text(f"not restored: {exc}", style="bold red")
        else:
            if restored is None:
                said = Text(
                    f"not restored: {record.path} no longer has it as forgotten", style="yellow"
                )
            else:
                self.restored += 1
                said = Text.assemble(("restored ", "green"), restored.describe())
        self.app.call_from_thread(self._say, said)
        self.post_message(self.Listed(self.engine.store.retired_records()))

    def action_close(self) -> None:
        self.dismiss(self.restored)
