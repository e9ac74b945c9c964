"""The question asked when MEMORY.md changed on disk while the editor has unsaved edits (and,
worded for it, when a recovery copy of a run that was ended is offered to the editor)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.app.widgets.diff_view import DiffView, render_diff, unified_diff

ConflictChoice = Literal["mine", "theirs", "both", "later"]


@dataclass(frozen=True)
class ConflictWording:
    """What the question says: its first line (bold) when it comes from a change seen on disk
    and from a refused save, the two buttons' labels and the diff's two sides."""

    changed: str = "MEMORY.md changed on disk, and you have unsaved edits."
    refused: str = "MEMORY.md changed on disk since you opened it, so your save was not written."
    which: str = "Which version do you want to keep?"
    mine: str = "Keep mine"
    theirs: str = "Load theirs"
    disk_label: str = "MEMORY.md on disk"
    buffer_label: str = "your unsaved buffer"


def insertion_points(base: str, other: str) -> set[int]:
    """The lines of ``base`` before which ``other`` inserted lines (line endings ignored)."""
    matcher = difflib.SequenceMatcher(
        None, base.splitlines(), other.splitlines(), autojunk=False
    )
    return {i1 for tag, i1, i2, _j1, _j2 in matcher.get_opcodes() if tag == "insert"}


def describe_merge(base: str | None, mine: str, theirs: str) -> str:
    """What Keep both does with two sides that merge without a clash: both added lines at the
    same place (theirs go first, then yours), or they changed different lines."""
    if base is not None and insertion_points(base, mine) & insertion_points(base, theirs):
        return (
            "You and the other side both added lines at the same place: Keep both keeps "
            "theirs, then yours."
        )
    return "You and the other side changed different lines: Keep both merges them."


class MemoryConflictScreen(ModalScreen[ConflictChoice]):
    """Keep both (when the two sides merge without a clash), keep my buffer, load the file
    from disk, or look at the diff first. Nothing is lost silently, and the default (Enter) is
    the diff: it destroys nothing.

    One question at a time: a newer version on disk while it is open is shown in it
    (:meth:`show_versions`), never queued as a second question over a stale diff.

    Dismisses with ``"both"``, ``"mine"``, ``"theirs"`` or ``"later"`` (escape: decide later;
    the buffer stays unsaved and the next save asks again).
    """

    HELP = """\
## MEMORY.md changed on disk

Someone (another editor, or the assistant) changed MEMORY.md while you had unsaved edits.

- **Show diff** (the default): compare the two first (**d**).
- **Keep both**: when you and the other side changed different lines, or both added lines at
  the same place, your buffer gets both (a three-way merge against the text you started
  from; theirs first where both added); save to write it. Not offered when it is unclear
  which of some identical lines a side changed.
- **Keep mine**: keep your buffer; saving will replace the file on disk with it.
- **Load theirs**: replace your buffer with the file on disk; **ctrl+z** brings your text back.
- **Escape**: decide later; nothing is saved or reloaded.

If the file changes again while this is open, the question shows the newest version.
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
    /* A share of the screen, not a number of rows: at 80x24 the question, the diff and the
       buttons must all fit (the diff scrolls). */
    MemoryConflictScreen #conflict-diff-scroll {
        height: auto;
        max-height: 35vh;
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
        base_text: str | None = None,
        wording: ConflictWording | None = None,
    ) -> None:
        """``while_saving``: the question comes from a refused save rather than a change seen
        on disk; ``can_keep_both``: the two sides merge without a clash (offer Keep both);
        ``base_text``: what both sides started from (says how they merge)."""
        super().__init__()
        self.disk_text = disk_text
        self.buffer_text = buffer_text
        self.while_saving = while_saving
        self.can_keep_both = can_keep_both
        self.base_text = base_text
        self.wording = wording or ConflictWording()

    def compose(self) -> ComposeResult:
        wording = self.wording
        with Vertical(id="conflict-dialog"):
            yield Static(self._question(), id="conflict-question")
            with VerticalScroll(id="conflict-diff-scroll"):
                yield DiffView(self._diff(), id="conflict-diff")
            with Horizontal(id="conflict-buttons"):
                yield Button("Show diff", id="conflict-diff-button")
                if self.can_keep_both:
                    yield self._keep_both_button()
                yield Button(wording.theirs, id="conflict-theirs", variant="warning")
                yield Button(wording.mine, id="conflict-mine", variant="primary")

    @staticmethod
    def _keep_both_button() -> Button:
        return Button("Keep both", id="conflict-both", variant="success")

    def _question(self) -> Text:
        wording = self.wording
        first = wording.refused if self.while_saving else wording.changed
        ask = (
            describe_merge(self.base_text, self.buffer_text, self.disk_text)
            if self.can_keep_both
            else wording.which
        )
        return Text.assemble((first, "bold"), "\n", ask)

    def _diff(self) -> str:
        return unified_diff(
            self.disk_text,
            self.buffer_text,
            before_label=self.wording.disk_label,
            after_label=self.wording.buffer_label,
        )

    def show_versions(
        self,
        disk_text: str,
        buffer_text: str,
        *,
        can_keep_both: bool,
        base_text: str | None = None,
    ) -> None:
        """The file changed again (or the buffer did) while the question is open: show the
        newest versions, so that the answer is about what is on disk now."""
        self.disk_text = disk_text
        self.buffer_text = buffer_text
        self.can_keep_both = can_keep_both
        self.base_text = base_text
        if not self.is_mounted:
            return  # composed with these
        self.query_one("#conflict-question", Static).update(self._question())
        self.query_one("#conflict-diff", DiffView).update(render_diff(self._diff()))
        offered = self.query("#conflict-both")
        if can_keep_both and not offered:
            buttons = self.query_one("#conflict-buttons")
            buttons.mount(self._keep_both_button(), before="#conflict-theirs")
        elif offered and not can_keep_both:
            if offered.first().has_focus:
                self.query_one("#conflict-diff-button", Button).focus()
            offered.remove()

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
