"""A yes/no question (deleting a session)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Returns True for the confirming button (or ``y``), False for cancel (``n``, Escape)."""

    HELP = """\
## Confirm

**y** or the highlighted button confirms; **n** or **Escape** cancels.
"""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No", id="confirm.no", tooltip="Cancel"),
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Confirm"),
    ]

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: 64;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    ConfirmScreen #confirm-question {
        height: auto;
        margin-bottom: 1;
    }
    ConfirmScreen Horizontal {
        height: auto;
        align-horizontal: right;
    }
    ConfirmScreen Button {
        margin-left: 1;
    }
    """

    def __init__(self, question: str, *, confirm: str = "Yes", cancel: str = "Cancel") -> None:
        super().__init__()
        self.question = question
        self.confirm_label = confirm
        self.cancel_label = cancel

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="confirm-question", markup=False)
            with Horizontal():
                yield Button(self.cancel_label, id="confirm-cancel")
                yield Button(self.confirm_label, id="confirm-ok", variant="error")

    def on_mount(self) -> None:
        self.query_one("#confirm-cancel", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-ok")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
