"""Asking again, and editing an earlier message, in the chat pane (see :class:`Rewinder`).

What happens to the rest of the session is said before it happens: a retry of the last
answer just asks again; a retry further up asks first, naming how many later messages it
replaces; an edit says it on the message box's edge. The replaced messages stay in the
session's transcript file (superseded), and what they saved to memory stays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from tui.app.widgets.chat_message import ChatMessage

if TYPE_CHECKING:
    from tui.app.widgets.chat_pane import ChatPane

#: What a replaced message's fate is, in the words of every question about it.
KEPT = "they stay in the session's transcript file, and what they saved to memory stays"


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Rewinder:
    """Retry and edit for a :class:`~tui.app.widgets.chat_pane.ChatPane`: which user message,
    what it replaces, and the message box while an earlier message is being edited."""

    def __init__(self, pane: ChatPane) -> None:
        self._pane = pane
        #: The user message being edited in the message box (Enter resends it), or None.
        self.editing: ChatMessage | None = None
        self._draft = ""  # what the box held before the edit began

    def prompt_of(self, message: ChatMessage | None) -> ChatMessage | None:
        """The user message ``message`` is or answers (None: the last one)."""
        messages = self._pane.messages
        end = messages.index(message) + 1 if message in messages else len(messages)
        return next((m for m in reversed(messages[:end]) if m.role == "user"), None)

    def rewind(self, message: ChatMessage | None, *, edit: bool) -> None:
        """Ask again from ``message``'s user message (None: the last one), or edit it."""
        pane = self._pane
        if pane.llm_problem:
            pane.notify(pane.llm_problem, title="no model configured", severity="warning")
            return
        if pane.still_answering():
            return
        prompt = self.prompt_of(message)
        if prompt is None:
            pane.notify("no message of yours to send again yet", severity="warning")
            return
        if prompt.message_id is None:
            pane.notify(
                "this message was not stored (it was refused): send it again",
                severity="warning",
            )
            return
        messages = pane.messages
        later = len(messages) - messages.index(prompt) - 2  # after the prompt and its answer
        if edit:
            self._start_edit(prompt, later)
        elif later > 0:
            self._confirm_retry(prompt, later)
        else:  # the last answer: asked again at once (it stays in the transcript file)
            pane.send(prompt.text, replaces=prompt.message_id)

    def _confirm_retry(self, prompt: ChatMessage, later: int) -> None:
        from tui.app.screens.confirm_screen import ConfirmScreen

        question = (
            f"Ask again from “{_short(prompt.text)}”?\n\n"
            f"A new answer replaces its answer and the {later} message"
            f"{'s' if later != 1 else ''} after it: {KEPT}."
        )

        def answered(yes: bool | None) -> None:
            if yes and prompt.message_id is not None and not self._pane.still_answering():
                self._pane.send(prompt.text, replaces=prompt.message_id)

        self._pane.app.push_screen(ConfirmScreen(question, confirm="Ask again"), answered)

    def _start_edit(self, prompt: ChatMessage, later: int) -> None:
        box = self._pane.chat_input
        if self.editing is None:
            self._draft = box.text
        self.editing = prompt
        box.text = prompt.text
        box.move_cursor(box.document.end)
        box.border_title = Content("editing · Enter resends · Esc cancels")
        box.focus()
        if later:
            fate = (
                f"a new answer replaces its answer and the {later} message"
                f"{'s' if later != 1 else ''} after it ({KEPT})"
            )
        else:
            fate = "a new answer replaces its answer, which stays in the transcript file"
        self._pane.notify(
            f"Enter sends your edited message in its place: {fate}. Escape cancels.",
            title="editing an earlier message",
            timeout=8,
        )

    def finish_edit(self) -> str | None:
        """The edit ends (its message is being sent): the id of the message it replaces."""
        prompt, self.editing = self.editing, None
        self._pane.chat_input.border_title = None
        return prompt.message_id if prompt is not None else None

    def cancel_edit(self) -> None:
        """Stop editing: the draft the box held before comes back."""
        if self.editing is None:
            return
        self.finish_edit()
        box = self._pane.chat_input
        box.text = self._draft
        box.move_cursor(box.document.end)
