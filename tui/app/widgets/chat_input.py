"""The message box: one line, Enter sends, Up/Down walk through what was sent before."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding
from textual.widgets import Input

#: Entries kept in the history.
HISTORY_SIZE = 500


class ChatInput(Input):
    """An :class:`Input` with a shell-like history.

    Up recalls older messages, Down newer ones; going past the newest brings back the draft
    that was being typed. Every change posts ``Input.Changed`` (the injection preview follows).
    """

    HELP = """\
## Message

Type a message and press **Enter** to send it. As you type, the **Inject** tab shows the
memory that will be added to the prompt for exactly this text.

- **Up** / **Down**: earlier messages you sent (your draft comes back at the end).
- **Escape** while the assistant answers: stop the answer.
"""

    BINDINGS = [
        Binding(
            "up",
            "history_previous",
            "Previous",
            id="chat_input.history_previous",
            tooltip="Recall the previous message you sent",
            show=False,
        ),
        Binding(
            "down",
            "history_next",
            "Next",
            id="chat_input.history_next",
            tooltip="Recall the next message you sent (or your draft)",
            show=False,
        ),
    ]

    def __init__(self, *, placeholder: str = "", id: str | None = None) -> None:
        # Focus coming back must not select the draft: the next key would replace it.
        super().__init__(placeholder=placeholder, id=id, select_on_focus=False)
        self.history: list[str] = []
        #: Position in :attr:`history` while browsing; None while editing the draft.
        self.history_index: int | None = None
        self._draft = ""

    def set_history(self, entries: Iterable[str]) -> None:
        """Replace the history (e.g. with the user messages of a resumed session)."""
        self.history = [e for e in entries if e.strip()][-HISTORY_SIZE:]
        self.history_index = None

    def remember(self, text: str) -> None:
        """Add a sent message to the history (a repeat of the last one is not added twice)."""
        if text.strip() and (not self.history or self.history[-1] != text):
            self.history.append(text)
            del self.history[:-HISTORY_SIZE]
        self.history_index = None

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)

    def action_history_previous(self) -> None:
        """Show the previous (older) history entry."""
        if not self.history:
            return
        if self.history_index is None:
            self._draft = self.value
            self.history_index = len(self.history) - 1
        elif self.history_index > 0:
            self.history_index -= 1
        else:
            return
        self._show(self.history[self.history_index])

    def action_history_next(self) -> None:
        """Show the next (newer) history entry, then the draft."""
        if self.history_index is None:
            return
        if self.history_index < len(self.history) - 1:
            self.history_index += 1
            self._show(self.history[self.history_index])
        else:
            self.history_index = None
            self._show(self._draft)
