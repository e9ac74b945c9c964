"""The question asked when MEMORY.md changed on disk while the editor has unsaved edits."""

from __future__ import annotations

from typing import Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.app.widgets.diff_view import DiffView, unified_diff

ConflictChoice = Literal["mine", "theirs", "both", "later"]


class MemoryConflictScreen(ModalScreen[ConflictChoice]):
    """Keep both (when the two sides changed different lines), keep my buffer, load the file
    from disk, or look at the diff first. Nothing is lost silently, and the default (Enter) is
    the diff: it destroys nothing.

    Dismisses with ``"both"``, ``"mine"``, ``"theirs"`` or ``"later"`` (escape: decide later;
    the buffer stays unsaved and the next save asks again).
    """

    HELP = """\
## MEMORY.md changed on disk

Someone (another editor, or the assistant) changed MEMORY.md while you had unsaved edits.

- **Show diff** (the default): compare the two first.
- **Keep both**: when you and the other side changed different lines, your buffer gets both
  (a three-way merge against the text you started from); save to write it. Not offered when
  it is unclear which of some identical lines a side changed.
- **Keep mine**: keep your buffer; saving will replace the file on disk with it.
- **Load theirs**: replace your buffer with the file on disk; **ctrl+z** brings your text back.
- **Escape**: decide later; nothing is saved or reloaded.
"""

    BINDINGS = [
        Binding("escape", "decide_later", "Later", id="memory_conflict.later"),
        Binding("d", "toggle_diff", "Diff", id="memory_conflict.diff"),
        Binding("b", "keep_both", "Keep both", id="memory_conflict.both", show=False),
    ]

    DEFAULT_CSS = """
    MemoryConflictScreen {
        align: center middle;
    }
    MemoryConflictScreen > #conflict-dialog {
        width: 90%;
        max-width: 100;
        height: auto;
        max-height: 90%;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    MemoryConflictScreen #conflict-question {
        height: auto;
        margin-bottom: 1;
    }
    MemoryConflictScreen #conflict-diff-scroll {
        height: auto;
        max-height: 20;
        border: round $primary-background;
        display: none;
    }
    MemoryConflictScreen #conflict-diff-scroll.-shown {
        display: block;
    }
    MemoryConflictScreen #conflict-buttons {
        height: auto;
        align-horizontal: right;
    }
    MemoryConflictScreen #conflict-buttons Button {
        margin-left: 1;
    }
    """

    def __init__(
        self,
        disk_text: str,
        buffer_text: str,
        *,
        while_saving: bool = False,
        can_keep_both: bool = False,
    ) -> None:
        """``while_saving``: the question comes from a refused save rather than a change seen
        on disk; ``can_keep_both``: the two sides merge without a clash (offer Keep both)."""
        super().__init__()
        self.disk_text = disk_text
        self.buffer_text = buffer_text
        self.while_saving = while_saving
        self.can_keep_both = can_keep_both

    def compose(self) -> ComposeResult:
        question = (
            "MEMORY.md changed on disk since you opened it, so your save was not written."
            if self.while_saving
            else "MEMORY.md changed on disk, and you have unsaved edits."
        )
        with Vertical(id="conflict-dialog"):
            ask = (
                "\nYou and the other side changed different lines: Keep both merges them."
                if self.can_keep_both
                else "\nWhich version do you want to keep?"
            )
            yield Static(
                Text.assemble((question, "bold"), ask),
                id="conflict-question",
            )
            with VerticalScroll(id="conflict-diff-scroll"):
                diff = unified_diff(
                    self.disk_text,
                    self.buffer_text,
                    before_label="MEMORY.md on disk",
                    after_label="your unsaved buffer",
                )
                yield DiffView(diff, id="conflict-diff")
            with Horizontal(id="conflict-buttons"):
                yield Button("Show diff", id="conflict-diff-button")
                if self.can_keep_both:
                    yield Button("Keep both", id="conflict-both", variant="success")
                yield Button("Load theirs", id="conflict-theirs", variant="warning")
                yield Button("Keep mine", id="conflict-mine", variant="primary")

    def on_mount(self) -> None:
        # Enter on the focused button must destroy nothing: it shows the diff.
        self.query_one("#conflict-diff-button", Button).focus()

    @on(Button.Pressed, "#conflict-both")
    def action_keep_both(self) -> None:
        if self.can_keep_both:
            self.dismiss("both")

    @on(Button.Pressed, "#conflict-mine")
    def action_keep_mine(self) -> None:
        self.dismiss("mine")

    @on(Button.Pressed, "#conflict-theirs")
    def action_load_theirs(self) -> None:
        self.dismiss("theirs")

    @on(Button.Pressed, "#conflict-diff-button")
    def action_toggle_diff(self) -> None:
        diff = self.query_one("#conflict-diff-scroll")
        diff.toggle_class("-shown")
        shown = diff.has_class("-shown")
        self.query_one("#conflict-diff-button", Button).label = (
            "Hide diff" if shown else "Show diff"
        )

    def action_decide_later(self) -> None:
        self.dismiss("later")
