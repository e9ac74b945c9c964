"""The question asked when the user quits with unsaved MEMORY.md edits."""

from __future__ import annotations

from typing import Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

QuitChoice = Literal["save", "discard", "cancel"]


class UnsavedQuitScreen(ModalScreen[QuitChoice]):
    """Save and quit, quit without saving, or stay. Enter saves (the focused button); Escape stays."""

    HELP = """\
## Unsaved MEMORY.md edits

You are quitting with edits in the MEMORY.md editor that are not on disk.

- **Save and quit** (Enter): write them, then quit (if the file changed on disk meanwhile, you
  are asked about that instead, and the app stays open).
- **Quit without saving**: the edits are dropped.
- **Cancel** (Escape): stay in the app; nothing changes.
"""

    BINDINGS = [
        Binding("escape", "choose('cancel')", "Cancel", id="unsaved_quit.cancel"),
    ]

    DEFAULT_CSS = """
    UnsavedQuitScreen {
        align: center middle;
    }
    UnsavedQuitScreen > Vertical {
        width: 72;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    UnsavedQuitScreen #unsaved-question {
        height: auto;
        margin-bottom: 1;
    }
    UnsavedQuitScreen Horizontal {
        height: auto;
        align-horizontal: right;
    }
    UnsavedQuitScreen Button {
        margin-left: 1;
    }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(
                    ("MEMORY.md has unsaved edits.", "bold"),
                    "\nSave them before quitting?",
                ),
                id="unsaved-question",
            )
            with Horizontal():
                yield Button("Cancel", id="unsaved-cancel")
                yield Button("Quit without saving", id="unsaved-discard", variant="error")
                yield Button("Save and quit", id="unsaved-save", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#unsaved-save", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        choices: dict[str | None, QuitChoice] = {
            "unsaved-save": "save",
            "unsaved-discard": "discard",
            "unsaved-cancel": "cancel",
        }
        self.dismiss(choices.get(event.button.id, "cancel"))

    def action_choose(self, choice: QuitChoice) -> None:
        self.dismiss(choice)
