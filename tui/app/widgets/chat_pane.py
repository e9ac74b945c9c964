"""The centre of the screen: the conversation, streamed as it happens, and the message box."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static, TextArea

from tui.app.messages import WorkbenchMessage
from tui.app.widgets.chat_folding import TextFolder
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_log import ChatLog
from tui.app.widgets.chat_message import ChatMessage, notice_part
from tui.app.widgets.chat_rewind import Rewinder
from tui.app.widgets.chat_transcript import draft_size_note, transcript_messages
from tui.app.widgets.chat_turn import TurnView
from tui.app.widgets.draft_keeper import DraftKeeper, KeptDrafts
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.config import Config
from tui.chat.context_window import MessageSize
from tui.chat.events import TurnEnded, TurnOpened
from tui.chat.sessions import Transcript

#: What an empty chat says (a model is configured): what to do, and where memory shows.
FIRST_STEPS = (
    "Ask anything below. What memdeck remembers is injected into each message: the Inject tab "
    "shows exactly what, as you type, and ctrl+o shows why after an answer.\n\n"
    "Memory is written to today's daily log when you switch sessions (ctrl+n), go idle or "
    "press ctrl+f; MEMORY.md (F5) holds long-term facts and is yours to edit.\n\n"
    "F1 or ? (outside a text field) explains what has focus; ctrl+p lists every command."
)
#: What the status line says while a message has the focus.
MESSAGE_KEYS = "c copy · b code · r ask again · e edit and resend · ↑↓ move · F1 more"
#: Seconds between two looks for text to fold or unfold (scrolling looks at once).
FOLD_INTERVAL = 0.5
#: Seconds after a layout that settled a closed segment before it folds: the fold (a picture,
#: a swap) then runs after the frame, not in the same turn of the event loop (one long stall).
FOLD_AFTER_LAYOUT = 0.005
#: A draft longer than this (lines or characters) shows its size on the message box's edge.
LONG_DRAFT_LINES = 10
LONG_DRAFT_CHARS = 1_000
#: Seconds a long draft rests before its tokens are counted (a big paste takes a while).
DRAFT_COUNT_DELAY = 0.3
#: The key that folds a draft to its head and tail, unless ``[keymap]`` changes it.
FOLD_DRAFT_KEY = "ctrl+g"


def placeholder(problem: str | None) -> str:
    """What the empty message box says (with ``problem``: no model configured)."""
    if problem:
        return "no model: type to see what memory it would inject"
    return "message… (Enter sends, ctrl+j new line, ↑ history)"


class Drafts(KeptDrafts, Protocol):
    """What the message box asks of the application core about a draft (blocking calls:
    the pane makes them in a thread): its size, its head and tail, where it is kept."""

    def measure_message(self, text: str) -> MessageSize:
        """``text`` measured against the room the model's context leaves a message."""

    def fit_message(self, text: str) -> str:
        """``text``, or its head and tail when the model's context cannot hold it."""

    def message_room(self) -> int:
        """Estimated tokens one message may take."""


class ChatPane(Vertical):
    """The conversation of the open session and the message box.

    The screen sets :attr:`session_id` (the open session), :attr:`llm_problem` and
    :attr:`model`, and renders a session's transcript with :meth:`show_transcript`. Sending
    asks the screen to run the turn (:class:`SendRequested`), Escape to stop it
    (:class:`StopRequested`); the turn's events come back as
    :class:`~tui.app.messages.WorkbenchMessage`, between ``TurnOpened`` and ``TurnEnded``, and
    are rendered as they arrive. The log follows new output only while it is
    scrolled to the bottom: once the conversation overflows the view it is anchored (Textual's
    ``anchor``), scrolling up releases the anchor and scrolling back down restores it. Short
    conversations stay at the top (an anchored view would push them to the bottom).
    """

    HELP = """\
## Chat

Talk to the assistant. It sees the memory block shown in the **Inject** tab, and may call
memory tools (shown inline; **Enter** on one expands it).

- **Enter** sends, **Up**/**Down** recall earlier messages.
- **Escape** stops an answer that is still streaming (or an edit of an earlier message).
- **shift+tab** focuses the last message: **c** copies it, **r** asks again, **e** edits it
  (F1 there says more).
- Scroll up to read: the view stops following new text until you scroll back down.

What is typed and not sent is kept in the workspace: it comes back here when the session is
opened again, after a quit too.
"""

    @dataclass
    class SendRequested(Message):
        """The user sent ``text``: run it as a turn of the open session (a new session when
        none is open); ``replaces``: the user message it replaces, and all after it."""

        text: str
        replaces: str | None = None

    class StopRequested(Message):
        """The user asked to stop the running turn."""

    @dataclass
    class TurnFinished(Message):
        """A turn of ``session_id`` ended (answered, failed or stopped)."""

        session_id: str
        user_text: str

    BINDINGS = [
        Binding(
            "escape",
            "stop",
            "Stop",
            id="chat_pane.stop",
            tooltip="Stop the answer that is streaming",
            # The status line says "Escape stops" while answering. In the footer the key would
            # come and go with each turn, and each time Textual rebuilds the whole footer.
            show=False,
        ),
        Binding(
            "escape",
            "cancel_edit",
            "cancel edit",
            id="chat_pane.cancel_edit",
            tooltip="Stop editing the earlier message: the draft you had comes back",
            show=False,
        ),
        Binding(
            FOLD_DRAFT_KEY,
            "fold_draft",
            "head and tail",
            id="chat_pane.fold_draft",
            tooltip="Keep only the head and tail of a message too long for the model's context",
            show=False,
        ),
    ]

    DEFAULT_CSS = """
    ChatPane {
        height: 1fr;
    }
    ChatPane #chat-empty {
        color: $text-muted;
        padding: 1 2;
    }
    /* The scrollbar's column is always kept (stable): text does not reflow, and pictures of
       finished text do not go stale, when the answer first overflows the view. */
    ChatPane > #chat-log {
        height: 1fr;
        scrollbar-gutter: stable;
        scrollbar-size-vertical: 1;
    }
    ChatPane > #chat-status {
        height: 1;
        padding: 0 1;
        color: $text-muted;
    }
    ChatPane > #chat-input {
        margin: 0;
    }
    """

    #: True while a turn is running.
    busy: reactive[bool] = reactive(False)
    #: The open session (set by the screen); None when none is open.
    session_id: reactive[str | None] = reactive(None, init=False)
    #: Why chat does not work (no model configured), or None.
    llm_problem: reactive[str | None] = reactive(None, init=False)
    #: The chat model's name, shown on the status line.
    model: reactive[str] = reactive("", init=False)

    def __init__(
        self,
        drafts: Drafts,
        *,
        llm_problem: str | None,
        model: str,
        config: Config,
        config_file: Path,
        id: str | None = None,
    ) -> None:
        """``drafts`` measures and folds drafts; ``config`` and ``config_file`` are what the
        setup explainer shows (no model configured) and where the fold key comes from."""
        super().__init__(id=id)
        self.drafts = drafts
        self.set_reactive(ChatPane.llm_problem, llm_problem)
        self.set_reactive(ChatPane.model, model)
        self._config = config
        self.config_file = config_file
        #: The key that folds a draft to its head and tail.
        self.fold_key = str(config.keymap.get("chat_pane.fold_draft", FOLD_DRAFT_KEY))
        #: The last message the user sent in this session.
        self.last_user_text: str | None = None
        #: Turns ended so far (answered, failed or stopped).
        self.turns_finished = 0
        #: The turn being rendered.
        self.turn = TurnView(lambda: self.log_view, self._add, self.follow_output)
        #: Retry and edit of earlier messages.
        self.rewinder = Rewinder(self)

    def compose(self) -> ComposeResult:
        with ChatLog(id="chat-log"):
            if self.llm_problem:
                yield SetupExplainer(self._config, self.config_file, id="setup-explainer")
            else:
                yield Static(FIRST_STEPS, id="chat-empty", markup=False)
        yield Static("", id="chat-status")
        yield ChatInput(placeholder=placeholder(self.llm_problem), id="chat-input")

    def on_mount(self) -> None:
        self._show_status()
        self._folder = TextFolder()
        self._fold_timer: Timer | None = None
        self.draft_keeper = DraftKeeper(self, self.drafts, self.chat_input, self._session)
        if self.session_id is None:  # (a session opened at start brings its own draft back)
            self.draft_keeper.session_opened(None, None)
        self.set_interval(FOLD_INTERVAL, self._refold)
        self.screen.screen_layout_refresh_signal.subscribe(self, self._screen_laid_out)
        self.watch(self.log_view, "scroll_y", self._scrolled, init=False)
        # Writes are paced and batched: the log follows once the layout shows it overflowing.
        self.watch(self.log_view, "virtual_size", self._laid_out, init=False)
        self.watch(self.app, "theme", self._look_again, init=False)

    def _session(self) -> str | None:
        return self.session_id

    def on_unmount(self) -> None:
        self.draft_keeper.closing()

    def watch_session_id(self, left: str | None, opened: str | None) -> None:
        self.rewinder.cancel_edit()  # the message edited belongs to the session left
        self.draft_keeper.session_opened(left, opened)

    def _scrolled(self) -> None:
        if not self.log_view.is_anchored:  # the user scrolls: bring stale text back at once
            self._look_again()

    def on_resize(self) -> None:
        self._look_again()

    @on(FoldedText.Hovered)
    def _look_again(self) -> None:
        self.call_after_refresh(self._refold)

    @on(ChatMessage.SegmentClosed)
    def _segment_closed(self, event: ChatMessage.SegmentClosed) -> None:
        event.stop()
        self._folder.segment_closed(event.segment)
        event.segment.refresh(layout=True)  # a layout to come, that may show it settled

    def _screen_laid_out(self, _screen: object) -> None:
        # a closed segment waits: it folds if this layout settled it
        if self._folder.laid_out() and self._fold_timer is None:
            self._fold_timer = self.set_timer(FOLD_AFTER_LAYOUT, self._fold_closed)

    async def _fold_closed(self) -> None:
        self._fold_timer = None
        await self._folder.fold_closed(self.log_view)

    async def _refold(self) -> None:
        if not self._folder.busy:
            await self.fold_finished_text()

    async def fold_finished_text(self) -> int:
        """Fold finished answer text into pictures, unfold what is in use or stale near the
        view (see :class:`~tui.app.widgets.chat_folding.TextFolder`); how many parts changed."""
        return await self._folder.fold(self.log_view, self.messages)

    @property
    def log_view(self) -> VerticalScroll:
        """The scrolling conversation."""
        return self.query_one("#chat-log", VerticalScroll)

    @property
    def chat_input(self) -> ChatInput:
        """The message box."""
        return self.query_one("#chat-input", ChatInput)

    @property
    def draft(self) -> str:
        """What the message box holds, stripped."""
        return self.chat_input.value.strip()

    @property
    def input_has_focus(self) -> bool:
        """True when the message box has the focus."""
        return self.is_input(self.screen.focused)

    def is_input(self, widget: Widget | None) -> bool:
        """True when ``widget`` is the message box."""
        return widget is self.chat_input

    def focus_input(self) -> None:
        """Put the focus in the message box."""
        self.chat_input.focus()

    def type_into_input(self, text: str) -> None:
        """Insert ``text`` at the message box's cursor (keys typed elsewhere)."""
        self.chat_input.insert_text_at_cursor(text)

    @property
    def messages(self) -> list[ChatMessage]:
        """The messages shown, oldest first (children of the log: no walk through their
        Markdown blocks)."""
        return list(self.log_view.query_children(ChatMessage))

    # -- sessions --

    async def show_transcript(self, transcript: Transcript | None) -> None:
        """Show a session's transcript (``None``: an empty chat)."""
        log = self.log_view
        # The input's history first: it is there as soon as the messages are.
        users = []
        if transcript is not None:
            users = [m.content for m in transcript.messages if m.role == "user" and not m.silent]
        self.last_user_text = users[-1] if users else None
        self.chat_input.set_history(users)
        self.rewinder.cancel_edit()
        await log.remove_children(".chat-item")
        if transcript is not None:
            widgets, hidden = transcript_messages(transcript)
            items: list[Widget] = list(widgets)
            if hidden:
                items.insert(0, notice_part(f"({hidden} earlier messages not shown)"))
            for item in items:
                item.add_class("chat-item")
            await log.mount_all(items)
        self._show_first_steps(not transcript or not transcript.messages)
        log.anchor(False)
        log.scroll_home(animate=False, immediate=True)
        self.call_after_refresh(self.follow_output)

    def _laid_out(self) -> None:
        if self.log_view.query_children(ChatMessage):  # not the setup explainer alone
            self.follow_output()

    def follow_output(self) -> None:
        """Anchor the log to the bottom once it overflows (until the user scrolls up)."""
        log = self.log_view
        if not log.is_anchored and log.max_scroll_y > 0:
            log.anchor()

    # -- a long draft --

    @on(TextArea.Changed, "#chat-input")
    def _draft_changed(self) -> None:
        self.draft_keeper.changed()
        box = self.chat_input
        lines, chars = box.document.line_count, len(box.text)
        if lines <= LONG_DRAFT_LINES and chars <= LONG_DRAFT_CHARS:
            self.workers.cancel_group(self, "draft_size")
            box.size_note = ""
            return
        box.size_note = draft_size_note(lines, chars, None, self.fold_key)
        self._count_draft()

    @work(group="draft_size", exclusive=True, exit_on_error=False)
    async def _count_draft(self) -> None:
        await asyncio.sleep(DRAFT_COUNT_DELAY)  # a keystroke meanwhile cancels this count
        box = self.chat_input
        text = box.text
        size = await asyncio.to_thread(self.drafts.measure_message, text)
        if box.text == text:
            box.size_note = draft_size_note(
                box.document.line_count, len(text), size, self.fold_key
            )

    def action_fold_draft(self) -> None:
        """Replace a draft too long for the model's context with its head and tail and a note
        of what was left out (an edit: ctrl+z brings the whole text back)."""
        text = self.chat_input.text
        if text.strip():
            self._fold_draft(text)

    @work(group="fold_draft", exclusive=True, exit_on_error=False)
    async def _fold_draft(self, text: str) -> None:
        folded = await asyncio.to_thread(self.drafts.fit_message, text)
        box = self.chat_input
        if folded == text:
            self.notify("the message fits the model's context: nothing to leave out")
        elif box.text == text:  # else it was edited meanwhile: the user folds again
            box.replace(folded, (0, 0), box.document.end)
            box.move_cursor(box.document.end)

    # -- sending --

    @on(ChatInput.Submitted, "#chat-input")
    def _submitted(self, event: ChatInput.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        problem = self.llm_problem
        if problem:
            self.notify(problem, title="no model configured", severity="warning", timeout=8)
            return
        if self.still_answering():
            return
        if len(text) > self.drafts.message_room():  # else it fits: a word-piece is a character or more
            self._send_if_it_fits(text)
            return
        self._send_draft(text)

    def _send_draft(self, text: str) -> None:
        self.chat_input.remember(text)
        replaces = self.rewinder.finish_edit()
        self.chat_input.clear()
        self.send(text, replaces=replaces)

    @work(group="send_size", exclusive=True, exit_on_error=False)
    async def _send_if_it_fits(self, text: str) -> None:
        """Send a long draft if the model's context holds it; else say why, and keep it in the
        box (nothing is sent or stored)."""
        size = await asyncio.to_thread(self.drafts.measure_message, text)
        if not size.fits:
            suggestion = f"shorten it, or press {self.fold_key} to keep its head and tail"
            self.notify(
                size.refusal(suggestion),
                title="message not sent",
                severity="warning",
                timeout=20,
                markup=False,
            )
            return
        if not self.still_answering() and self.chat_input.text.strip() == text:
            self._send_draft(text)  # (else it was edited meanwhile: not sent)

    def still_answering(self, advice: str = "still answering — Escape stops it") -> bool:
        """True (and said, with ``advice``) while a turn runs."""
        if self.busy:
            self.notify(advice, severity="warning")
        return self.busy

    def send(self, text: str, *, replaces: str | None = None) -> None:
        """Send ``text`` as the user's next message (:class:`SendRequested`), in place of user
        message ``replaces`` and all after it: busy until the turn's end is rendered."""
        self.busy = True
        self.last_user_text = text
        self.post_message(self.SendRequested(text, replaces))

    def action_stop(self) -> None:
        """Stop the running turn (what was streamed stays; the transcript keeps the message)."""
        if self.busy:
            self.post_message(self.StopRequested())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.busy
        if action == "cancel_edit":
            return self.rewinder.editing is not None
        return True

    def action_cancel_edit(self) -> None:
        """Stop editing an earlier message (the draft the box held comes back)."""
        self.rewinder.cancel_edit()

    # -- retry, edit, copy --

    @on(ChatMessage.Rewind)
    def _rewind(self, event: ChatMessage.Rewind) -> None:
        event.stop()
        self.rewinder.rewind(event.message, edit=event.edit)

    @on(ChatMessage.TypedAway)
    def _typed_away(self, event: ChatMessage.TypedAway) -> None:
        event.stop()
        self.focus_input()
        self.type_into_input(event.character)

    def retry_last(self) -> None:
        """Ask again for the last answer (also after an error)."""
        self.rewinder.rewind(None, edit=False)

    def edit_last(self) -> None:
        """Edit the last message sent, in the message box."""
        self.rewinder.rewind(None, edit=True)

    def copy_last(self) -> None:
        """Copy the last answer to the clipboard."""
        answers = [m for m in self.messages if m.role == "assistant" and m.text.strip()]
        if answers:
            answers[-1].action_copy()
        else:
            self.notify("no answer to copy yet", severity="warning")

    def watch_model(self) -> None:
        self._show_status()

    async def watch_llm_problem(self, problem: str | None) -> None:
        """A reloaded config made chat work (or stop working): the setup explainer, the
        first steps, the status line and the box's placeholder follow."""
        self._show_status()
        self.chat_input.placeholder = placeholder(problem)
        log = self.log_view
        explainer = log.query_children("#setup-explainer")
        if problem is None:
            await explainer.remove()
            if not log.query_children("#chat-empty"):
                hint = Static(FIRST_STEPS, id="chat-empty", markup=False)
                hint.display = not self.messages
                await log.mount(hint, before=0)
        elif not explainer:
            await log.query_children("#chat-empty").remove()
            setup = SetupExplainer(self._config, self.config_file, id="setup-explainer")
            await log.mount(setup, before=0)

    def watch_busy(self) -> None:
        self._show_status()
        # The footer follows the focus only through a bindings refresh: without this one the
        # why? snapshot caught a stale footer 2 times in 8 (the footer rebuild it costs is back).
        self.refresh_bindings()

    def _show_status(self) -> None:
        statuses = self.query("#chat-status").results(Static)
        status = next(statuses, None)
        if status is None:
            return
        if self.busy:
            line = Text("answering… (Escape stops)", style="italic")
        elif isinstance(self.screen.focused, ChatMessage):
            line = Text(MESSAGE_KEYS, style="italic")
        elif self.llm_problem:
            line = Text("memory only: no model configured", style="italic")
        else:
            line = Text(self.model, style="dim")
        # One line, as wide as the pane whatever it says: no layout (a turn's start pays for
        # the whole screen's reflow once, with its messages, not again for this line).
        status.update(line, layout=False)

    def on_descendant_focus(self) -> None:
        self._show_status()  # a focused message: its keys on the status line

    on_descendant_blur = on_descendant_focus

    def _show_first_steps(self, show: bool) -> None:
        for hint in self.query("#chat-empty"):
            hint.display = show

    async def _add(self, *widgets: Widget) -> None:
        self._show_first_steps(False)
        for widget in widgets:
            widget.add_class("chat-item")
        await self.log_view.mount_all(widgets)  # (one layout for a turn's two messages)
        self.call_after_refresh(self.follow_output)

    # -- the turn, as the workbench publishes it --

    @on(WorkbenchMessage)
    async def _turn_event(self, message: WorkbenchMessage) -> None:
        event = message.event
        if isinstance(event, TurnOpened):
            await self.turn.open(event.text)
        elif isinstance(event, TurnEnded):
            try:
                await self.turn.end(event)
            finally:
                self.busy = False
                self.turns_finished += 1
                self.post_message(self.TurnFinished(event.session_id, event.text))
        else:
            await self.turn.show(event)

    @property
    def tool_calls(self) -> list[ToolCallView]:
        """Every tool call shown, oldest first."""
        return list(self.log_view.query(ToolCallView))

    def transcript_text(self) -> list[tuple[str, str]]:
        """``(role, text)`` of the messages shown (tests, copy)."""
        return [(m.role, m.text) for m in self.messages]
