"""The message box: Enter sends, ctrl+j (or alt/shift+enter) starts a new line, a paste keeps
every line, and Up/Down walk through what was sent before."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.widgets import TextArea

#: Entries kept in the history.
HISTORY_SIZE = 500
#: Keys that start a new line instead of sending (terminals deliver different ones: ctrl+j
#: everywhere, alt+enter in most, shift+enter where the kitty keyboard protocol is on).
NEWLINE_KEYS = ("ctrl+j", "alt+enter", "shift+enter")


class ChatInput(TextArea):
    """A growing multi-line box with a shell-like history.

    Enter posts :class:`ChatInput.Submitted`; a bracketed paste inserts every pasted line.
    Up on the first line recalls older messages, Down on the last line newer ones; going past
    the newest brings back the draft that was being typed. Every change posts
    ``TextArea.Changed`` (the injection preview follows).
    """

    HELP = """\
## Message

Type a message and press **Enter** to send it. **ctrl+j** (or **alt+enter**, or
**shift+enter** where the terminal tells it apart) starts a new line; a paste keeps all its
lines. As you type, the **Inject** tab shows the memory that will be added to the prompt for
exactly this text.

- **Up** / **Down** on the first / last line: earlier messages you sent (your draft comes
  back at the end).
- **Escape** while the assistant answers: stop the answer.

A long draft (a big paste) shows its size in lines and tokens on the box's lower edge. A
message too long for the model's context is not sent and stays here: shorten it, or press
**ctrl+g** to keep only its head and tail (with a note of what was left out; **ctrl+z** brings
the whole text back).
"""

    DEFAULT_CSS = """
    ChatInput {
        height: auto;
        min-height: 3;
        max-height: 8;
    }
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

    @dataclass
    class Submitted(Message):
        """Enter was pressed: ``value`` is the whole text, every line of it."""

        input: ChatInput
        value: str

        @property
        def control(self) -> ChatInput:
            return self.input

    def __init__(self, *, placeholder: str = "", id: str | None = None) -> None:
        super().__init__(
            placeholder=placeholder,
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
        )
        self.sent_history: list[str] = []
        #: Position in :attr:`sent_history` while browsing; None while editing the draft.
        self.history_index: int | None = None
        self._draft = ""
        self._size_note = ""

    @property
    def value(self) -> str:
        """The whole text (an ``Input``'s name for it)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.text = text

    def post_message(self, message: Message) -> bool:
        # An edit made from a parent's handler (clearing the box after a send) would carry
        # that parent as its sender, and Textual never bubbles a message back to its sender:
        # the screen would not hear that the draft is now empty.
        if isinstance(message, TextArea.Changed):
            message.set_sender(self)
        return super().post_message(message)

    @property
    def size_note(self) -> str:
        """What the box's lower edge says about a long draft's size ("" for none)."""
        return self._size_note

    @size_note.setter
    def size_note(self, note: str) -> None:
        if note != self._size_note:
            self._size_note = note
            self.border_subtitle = Content(note) if note else None  # text, never markup

    def insert_text_at_cursor(self, text: str) -> None:
        """Insert ``text`` where the cursor is."""
        self.insert(text)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def set_history(self, entries: Iterable[str]) -> None:
        """Replace the history (e.g. with the user messages of a resumed session)."""
        self.sent_history = [e for e in entries if e.strip()][-HISTORY_SIZE:]
        self.history_index = None

    def remember(self, text: str) -> None:
        """Add a sent message to the history (a repeat of the last one is not added twice)."""
        if text.strip() and (not self.sent_history or self.sent_history[-1] != text):
            self.sent_history.append(text)
            del self.sent_history[:-HISTORY_SIZE]
        self.history_index = None

    def _show(self, text: str) -> None:
        self.text = text
        self.move_cursor(self.document.end)

    def action_history_previous(self) -> None:
        """Move up a line; on the first line, show the previous (older) history entry."""
        if self.cursor_location[0] > 0:
            self.action_cursor_up()
            return
        if not self.sent_history:
            return
        if self.history_index is None:
            self._draft = self.text
            self.history_index = len(self.sent_history) - 1
        elif self.history_index > 0:
            self.history_index -= 1
        else:
            return
        self._show(self.sent_history[self.history_index])

    def action_history_next(self) -> None:
        """Move down a line; on the last line, show the next (newer) entry, then the draft."""
        if self.cursor_location[0] < self.document.line_count - 1:
            self.action_cursor_down()
            return
        if self.history_index is None:
            return
        if self.history_index < len(self.sent_history) - 1:
            self.history_index += 1
            self._show(self.sent_history[self.history_index])
        else:
            self.history_index = None
            self._show(self._draft)
