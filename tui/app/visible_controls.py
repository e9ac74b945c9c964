"""No view sends a control character to the terminal: every rendered line shows them instead.

Memory, file names, a model's answers and MCP clients' names are data. Textual measures a
control character as zero cells and writes it to the terminal as it is, so ``ESC ]2;…BEL`` in
MEMORY.md would set the terminal's title from the editor, the Search preview or a toast.
:class:`VisibleControls` is a line filter: Textual runs it on every line of every widget before
the compositor, so no view can leak one. It replaces each control character with its visible
form (:func:`~tui.engine.visible.visible_text`) and gives the cells that form takes back from
the blank space after it, so the line keeps its width and what follows keeps its place.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from tui.engine.visible import CONTROL_CHARACTER, visible_text


class VisibleControls(LineFilter):
    """Shows control characters in rendered lines (``␛]2;PWNED␇``) instead of emitting them."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """``segments`` (one line), each control character in its visible form, same width."""
        search = CONTROL_CHARACTER.search
        if search("".join([segment.text for segment in segments])) is None:
            return segments  # nearly every line: one regex scan (about a microsecond)
        shown = list(segments)
        for index in range(len(shown)):
            text, style, control = shown[index]
            if control is None and search(text):
                visible = visible_text(text, keep_line_breaks=False)
                shown[index] = Segment(visible, style)
                _give_back(shown, index, cell_len(visible) - cell_len(text))
        return [segment for segment in shown if segment.text or segment.control]


def _give_back(segments: list[Segment], index: int, cells: int) -> None:
    """Take ``cells`` back from the blank space after the changed segment ``segments[index]``:
    its own trailing spaces, then the all-blank segments after it (padding), nearest first;
    what is still owed is cut from the end of the changed segment."""
    text, style, _ = segments[index]
    trailing = len(text) - len(text.rstrip(" "))
    taken = min(trailing, cells)
    if taken:
        segments[index] = Segment(text[: len(text) - taken], style)
        cells -= taken
    for after in range(index + 1, len(segments)):
        if cells <= 0:
            return
        blank, blank_style, control = segments[after]
        if control is None and blank and not blank.strip(" "):
            taken = min(len(blank), cells)
            segments[after] = Segment(blank[taken:], blank_style)
            cells -= taken
    if cells > 0:
        text, style, _ = segments[index]
        segments[index] = Segment(set_cell_size(text, max(0, cell_len(text) - cells)), style)
