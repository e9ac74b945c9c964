"""The memories an injection carried or cut, one option each, leading to their source."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.app.external_editor import open_entry_in_editor
from tui.app.messages import OpenEntry, OpenSession
from tui.engine.workspace import Workspace


class MemoryList(OptionList):
    """Rows of text, each with the ``path#Lx-y`` it shows (None: a note, not selectable).

    Enter opens the entry (MEMORY.md in the editor, a log in Daily); ``e`` opens it in
    $VISUAL / $EDITOR at its line; ``o`` opens the session whose chat or flush wrote it (the
    rows' :attr:`sessions`).
    """

    BINDINGS = [
        Binding(
            "e",
            "open_in_editor",
            "$EDITOR",
            id="memory_list.open_in_editor",
            tooltip="Open the selected memory in $EDITOR at its line",
        ),
        Binding(
            "o",
            "open_origin",
            "origin",
            id="memory_list.open_origin",
            tooltip="Open the session whose chat or flush wrote the selected memory",
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
        self._locations: list[str | None] = []
        self._entries: list[OpenEntry | None] = []
        self._sessions: list[str | None] = []
        self._shown: tuple[list[tuple[Text, str | None]], dict[str, str]] | None = None

    def show(
        self, rows: list[tuple[Text, str | None]], sessions: Mapping[str, str] | None = None
    ) -> None:
        """Replace the rows: ``(text, location)``, location ``path#Lx-y`` or None;
        ``sessions``: the session that wrote a location's memory, where one did. The row
        highlighted stays so when the rows are the same ones again (their origins came)."""
        shown = (rows, dict(sessions or {}))
        if shown == self._shown:
            return  # an option list draws all its rows again (an index change redid the same)
        self._shown = shown
        same = [location for _, location in rows] == self._locations
        kept = self.highlighted if same else None
        self._locations = [location for _, location in rows]
        self._entries = [OpenEntry.at(where) if where else None for where in self._locations]
        self._sessions = [
            (sessions or {}).get(location) if location else None for location in self._locations
        ]
        self.clear_options()
        self.add_options(
            Option(text, id=str(i), disabled=self._entries[i] is None)
            for i, (text, _) in enumerate(rows)
        )
        if kept is not None:
            self.highlighted = kept

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

    def selected_session(self) -> str | None:
        """The session that wrote the highlighted memory (None: none did, or unknown)."""
        index = self.highlighted
        return self._sessions[index] if index is not None and index < len(self._sessions) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``o`` is offered on a memory a chat or a flush wrote."""
        if action == "open_origin":
            return self.selected_session() is not None
        return True

    @on(OptionList.OptionHighlighted)
    def _highlighted(self) -> None:
        self.refresh_bindings()  # "o origin" comes and goes with the row

    def action_open_origin(self) -> None:
        """Open the session whose chat or flush wrote the highlighted memory."""
        session = self.selected_session()
        if session is not None:
            self.post_message(OpenSession(session))

    def action_open_in_editor(self) -> None:
        """Open the highlighted memory in $VISUAL / $EDITOR at its first line."""
        entry = self.selected_entry()
        if entry is not None:
            open_entry_in_editor(self, self.workspace, entry.path, entry.line)
