"""A unified diff, coloured by line kind: MEMORY.md proposals and edit conflicts show it."""

from __future__ import annotations

import difflib

from rich.text import Text
from textual.widgets import Static


def unified_diff(before: str, after: str, *, before_label: str, after_label: str) -> str:
    """The unified diff from ``before`` to ``after`` (one string, lines joined by newlines)."""
    return "\n".join(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=before_label,
            tofile=after_label,
            lineterm="",
        )
    )


def render_diff(diff: str) -> Text:
    """``diff`` with added lines green, removed red, hunk headers cyan, file headers bold and
    context dim (``(no differences)`` when it is empty)."""
    rendered = Text()
    for number, line in enumerate(diff.splitlines()):
        if number:
            rendered.append("\n")
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = "dim"
        rendered.append(line, style=style)
    return rendered or Text("(no differences)", style="dim")


class DiffView(Static):
    """Shows one unified diff (:func:`render_diff`)."""

    def __init__(self, diff: str, *, id: str | None = None) -> None:
        super().__init__(render_diff(diff), id=id)
