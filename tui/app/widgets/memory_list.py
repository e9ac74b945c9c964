"""The memories an injection carried or cut, one option each, leading to their source."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.app.external_editor import open_entry_in_editor
from tui.app.messages import OpenEntry
from tui.engine.workspace import Workspace


class MemoryList(OptionList):
    """Rows of text, each with the ``path#Lx-y`` it shows (None: a note, not selectable).

    Enter opens the entry (MEMORY.md in the editor, a log in Daily); ``e`` opens it in
    $VISUAL / $EDITOR at its line.
    """

    BINDINGS = [
        Binding(
            "e",
            "open_in_editor",
            "$EDITOR",
            id="memory_list.open_in_editor",
            tooltip="Open the selected memory in $EDITOR at its line",
        ),
    ]

    DEFAULT_CSS = """
    MemoryList {
        border: none;
        background: transparent;
        padding: 0;
    }
    MemoryList:focus {
        border: none;
    }
    """

    def __init__(
        self, workspace: Workspace, *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.workspace = workspace
        self._entries: list[OpenEntry | None] = []

    def show(self, rows: list[tuple[Text, str | None]]) -> None:
        """Replace the rows: ``(text, location)``, location ``path#Lx-y`` or None."""
        self._entries = [OpenEntry.at(location) if location else None for _, location in rows]
        self.clear_options()
        self.add_options(
            Option(text, id=str(i), disabled=self._entries[i] is None)
            for i, (text, _) in enumerate(rows)
        )

    @property
    def plain(self) -> str:
        """Every row's text, one after another (what the list shows)."""
        return "\n".join(str(self.get_option_at_index(i).prompt) for i in range(self.option_count))

    def selected_entry(self) -> OpenEntry | None:
        """The entry of the highlighted row (None: none, or a note)."""
        index = self.highlighted
        return self._entries[index] if index is not None and index < len(self._entries) else None

    @on(OptionList.OptionSelected)
    def _open(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        entry = self.selected_entry()
        if entry is not None:
            self.post_message(OpenEntry(entry.path, entry.line))

    def action_open_in_editor(self) -> None:
        """Open the highlighted memory in $VISUAL / $EDITOR at its first line."""
        entry = self.selected_entry()
        if entry is not None:
            open_entry_in_editor(self, self.workspace, entry.path, entry.line)
