"""Asks for a session's new title."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class RenameScreen(ModalScreen[str | None]):
    """A one-line title box: Enter returns the title, Escape returns None."""

    HELP = """\
## Rename session

Type the new title and press **Enter**; **Escape** keeps the old one.
"""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="rename.cancel", tooltip="Keep the old title"),
    ]

    DEFAULT_CSS = """
    RenameScreen {
        align: center middle;
    }
    RenameScreen > Vertical {
        width: 60;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    RenameScreen #rename-label {
        height: 1;
        margin-bottom: 1;
    }
    RenameScreen #rename-hint {
        height: 1;
        color: $text-muted;
    }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.current_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Rename session", id="rename-label")
            yield Input(self.current_title, id="rename-input")
            yield Static("Enter renames · Escape keeps the old title", id="rename-hint")

    @on(Input.Submitted, "#rename-input")
    def _submitted(self, event: Input.Submitted) -> None:
        title = " ".join(event.value.split())
        self.dismiss(title or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
