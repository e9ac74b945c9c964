"""The centre of the screen: the conversation, streamed as it happens, and the message box."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Markdown, Static, TextArea

from tui.app.messages import WorkbenchMessage
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_message import ChatMessage, notice_part
from tui.app.widgets.chat_transcript import (
    describe_turn,
    draft_size_note,
    transcript_messages,
)
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.config import Config
from tui.chat.context_window import MessageSize
from tui.chat.events import (
    Compacted,
    CompactionFailed,
    CompactionStarted,
    InjectionBuilt,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnError,
    TurnOpened,
    Usage,
)
from tui.chat.sessions import Transcript
from tui.engine.inject import InjectionReport

#: What an empty chat says (a model is configured): what to do, and where memory shows.
FIRST_STEPS = (
    "Ask anything below. What memdeck remembers is injected into each message: the Inject tab "
    "shows exactly what, as you type, and ctrl+o shows why after an answer.\n\n"
    "Memory is written to today's daily log when you switch sessions (ctrl+n), go idle or "
    "press ctrl+f; MEMORY.md (F5) holds long-term facts and is yours to edit.\n\n"
    "F1 or ? (outside a text field) explains what has focus; ctrl+p lists every command."
)
#: A folded part whose picture is stale (another width or theme) comes back as Markdown when
#: it is within this many view heights of the view.
UNFOLD_VIEWS = 1.0
#: Seconds between two looks for text to fold or unfold (scrolling looks at once).
FOLD_INTERVAL = 0.5
#: Seconds of pictures one look may take (the nearest parts first; the rest at the next look).
FOLD_BUDGET = 0.02
#: A draft longer than this (lines or characters) shows its size on the message box's edge.
LONG_DRAFT_LINES = 10
LONG_DRAFT_CHARS = 1_000
#: Seconds a long draft rests before its tokens are counted (a big paste takes a while).
DRAFT_COUNT_DELAY = 0.3
#: The key that folds a draft to its head and tail, unless ``[keymap]`` changes it.
FOLD_DRAFT_KEY = "ctrl+g"


class Drafts(Protocol):
    """What the message box asks of the application core about a draft (blocking calls:
    the pane makes them in a thread)."""

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
- **Escape** stops an answer that is still streaming.
- Scroll up to read: the view stops following new text until you scroll back down.
"""

    @dataclass
    class SendRequested(Message):
        """The user sent ``text``: run it as a turn of the open session (a new session when
        none is open)."""

        text: str

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
        # The turn being rendered: its answer, memory report and token usage.
        self._answer: ChatMessage | None = None
        self._report: InjectionReport | None = None
        self._usage: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="chat-log"):
            if self.llm_problem:
                yield SetupExplainer(self._config, self.config_file, id="setup-explainer")
            else:
                yield Static(FIRST_STEPS, id="chat-empty", markup=False)
        yield Static("", id="chat-status")
        placeholder = (
            "no model: type to see what memory it would inject"
            if self.llm_problem
            else "message… (Enter sends, ctrl+j new line, ↑ history)"
        )
        yield ChatInput(placeholder=placeholder, id="chat-input")

    def on_mount(self) -> None:
        self._show_status()
        self._fold_lock = asyncio.Lock()
        self._settled: dict[Widget, Size] = {}  # finished parts and their size at the last look
        self.set_interval(FOLD_INTERVAL, self._refold)
        self.watch(self.log_view, "scroll_y", self._scrolled, init=False)
        # Writes are paced and batched: the log follows once the layout shows it overflowing.
        self.watch(self.log_view, "virtual_size", self._laid_out, init=False)
        self.watch(self.app, "theme", self._look_again, init=False)

    def _scrolled(self) -> None:
        if not self.log_view.is_anchored:  # the user scrolls: bring stale text back at once
            self._look_again()

    def on_resize(self) -> None:
        self._look_again()

    @on(FoldedText.Hovered)
    def _look_again(self) -> None:
        self.call_after_refresh(self._refold)

    async def _refold(self) -> None:
        if not self._fold_lock.locked():
            await self.fold_finished_text()

    async def fold_finished_text(self) -> int:
        """Fold finished answer text into pictures (:class:`FoldedText`), the parts nearest
        the view first, for at most :data:`FOLD_BUDGET` seconds; unfold a folded part under
        the mouse, or one near the view (:data:`UNFOLD_VIEWS`) whose picture is stale. How
        many parts changed."""
        async with self._fold_lock:
            return await self._fold_finished_text()

    async def _fold_finished_text(self) -> int:
        view = self.log_view.region
        if not view:
            return 0
        near_above = view.y - UNFOLD_VIEWS * view.height
        near_below = view.bottom + UNFOLD_VIEWS * view.height
        in_use = self._parts_in_use()
        settled: dict[Widget, Size] = {}
        swaps: list[tuple[ChatMessage, Widget, Widget]] = []
        to_fold: list[tuple[int, ChatMessage, Markdown]] = []
        for message in self.messages:
            for part in message.text_parts():
                region = part.region
                if not region:
                    continue
                if isinstance(part, FoldedText):
                    near = region.bottom > near_above and region.y < near_below
                    if part in in_use or (part.stale and near):
                        swaps.append((message, part, part.unfold()))
                elif (
                    isinstance(part, Markdown)
                    and message.finished_part(part)
                    and part not in in_use
                ):
                    # a part is pictured once its size held since the last look: a part
                    # just finished may not be laid out again yet
                    size, settled[part] = self._settled.get(part), part.outer_size
                    if size == part.outer_size:
                        distance = max(view.y - region.bottom, region.y - view.bottom, 0)
                        to_fold.append((distance, message, part))
        self._settled = settled
        began = time.perf_counter()
        for _distance, message, part in sorted(to_fold, key=lambda item: item[0]):
            if time.perf_counter() - began > FOLD_BUDGET:
                break
            swaps.append((message, part, FoldedText.of(part)))
        if swaps:
            with self.app.batch_update():
                for message, old, new in swaps:
                    await message.swap_part(old, new)
        return len(swaps)

    def _parts_in_use(self) -> set[Widget]:
        """The widgets (and their ancestors) under the mouse, focused or holding a selection:
        a part among them stays (or comes back) unfolded."""
        screen = self.screen
        used = [self.app.mouse_over, screen.focused, *getattr(screen, "selections", {})]
        return {
            node for widget in used if widget is not None for node in widget.ancestors_with_self
        }

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
        self.chat_input.clear()
        self.send(text)

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

    def send(self, text: str) -> None:
        """Send ``text`` as the user's next message (:class:`SendRequested`): busy until the
        turn's end is rendered."""
        self.busy = True
        self.last_user_text = text
        self.post_message(self.SendRequested(text))

    def action_stop(self) -> None:
        """Stop the running turn (what was streamed stays; the transcript keeps the message)."""
        if self.busy:
            self.post_message(self.StopRequested())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.busy
        return True

    def watch_model(self) -> None:
        self._show_status()

    watch_llm_problem = watch_model

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
            status.update(Text("answering… (Escape stops)", style="italic"))
        elif self.llm_problem:
            status.update(Text("memory only: no model configured", style="italic"))
        else:
            status.update(Text(self.model, style="dim"))

    def _show_first_steps(self, show: bool) -> None:
        for hint in self.query("#chat-empty"):
            hint.display = show

    async def _add(self, widget: Widget) -> None:
        self._show_first_steps(False)
        widget.add_class("chat-item")
        await self.log_view.mount(widget)
        self.call_after_refresh(self.follow_output)

    # -- the turn, as the workbench publishes it --

    @on(WorkbenchMessage)
    async def _turn_event(self, message: WorkbenchMessage) -> None:
        event = message.event
        if isinstance(event, TurnOpened):
            await self._open_turn(event.text)
        elif isinstance(event, TurnEnded):
            await self._end_turn(event)
        elif self._answer is not None:
            await self._show_event(self._answer, event)

    async def _open_turn(self, text: str) -> None:
        """The user's message and an empty answer (sending follows the output again)."""
        self._report, self._usage = None, {"prompt": 0, "completion": 0}
        if self.log_view.is_anchored:
            self.log_view.scroll_end(animate=False, immediate=True)
        await self._add(ChatMessage("user", text))
        answer = ChatMessage("assistant")
        await self._add(answer)
        self._answer = answer

    async def _show_event(self, answer: ChatMessage, event: object) -> None:
        if isinstance(event, TextDelta):
            await answer.append_text(event.text)
            self.follow_output()
        elif isinstance(event, InjectionBuilt):
            self._report = event.report
        elif isinstance(event, ToolCallStarted):
            await answer.add_tool_call(
                event.call_id,
                event.name,
                event.arguments,
                raw_arguments=event.raw_arguments,
                silent=event.silent,
            )
        elif isinstance(event, ToolCallFinished):
            answer.finish_tool_call(event.call_id, event.result, event.ok)
        elif isinstance(event, Usage):
            self._usage["prompt"] += event.prompt_tokens
            self._usage["completion"] += event.completion_tokens
        elif isinstance(event, TurnError):
            await answer.add_error(event.kind, event.message)
        elif isinstance(event, CompactionStarted):
            await answer.add_notice(
                f"(compacting: ~{event.estimated_tokens:,} of {event.limit:,} tokens)"
            )
        elif isinstance(event, Compacted):
            await answer.add_notice(
                f"(compacted: ~{event.tokens_before:,} → ~{event.tokens_after:,} tokens)"
            )
        elif isinstance(event, CompactionFailed):
            await answer.add_notice(f"(compaction skipped: {event.message})")

    async def _end_turn(self, event: TurnEnded) -> None:
        answer, self._answer = self._answer, None
        try:
            if answer is not None:
                if event.ending == "completed":
                    answer.set_meta(describe_turn(self._report, self._usage))
                elif event.ending == "stopped":
                    await answer.add_notice("(stopped)")
                await answer.finish()
        finally:
            self.busy = False
            self.turns_finished += 1
            self.post_message(self.TurnFinished(event.session_id, event.text))

    @property
    def tool_calls(self) -> list[ToolCallView]:
        """Every tool call shown, oldest first."""
        return list(self.log_view.query(ToolCallView))

    def transcript_text(self) -> list[tuple[str, str]]:
        """``(role, text)`` of the messages shown (tests, copy)."""
        return [(m.role, m.text) for m in self.messages]
