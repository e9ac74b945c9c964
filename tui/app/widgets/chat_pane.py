"""The centre of the screen: the conversation, streamed as it happens, and the message box."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

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

from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.chat_message import ChatMessage, error_part, notice_part
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.chat import ChatEngine, MessageSize
from tui.chat.events import (
    Compacted,
    CompactionFailed,
    CompactionStarted,
    InjectionBuilt,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnError,
    Usage,
)
from tui.chat.sessions import (
    Compaction,
    ErrorRecord,
    SessionError,
    ToolCall,
    Transcript,
    TurnInjection,
)
from tui.chat.sessions import Message as TranscriptMessage
from tui.engine.inject import InjectionReport

#: What an empty chat says (a model is configured): what to do, and where memory shows.
FIRST_STEPS = (
    "Ask anything below. What memdeck remembers is injected into each message: the Inject tab "
    "shows exactly what, as you type, and ctrl+o shows why after an answer.\n\n"
    "Memory is written to today's daily log when you switch sessions (ctrl+n), go idle or "
    "press ctrl+f; MEMORY.md (F5) holds long-term facts and is yours to edit.\n\n"
    "F1 or ? (outside a text field) explains what has focus; ctrl+p lists every command."
)
#: Messages of a resumed session rendered at most (older ones are summarised in one line).
MAX_SHOWN_MESSAGES = 200
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


def draft_size_note(lines: int, chars: int, size: MessageSize | None, fold_key: str) -> str:
    """What the message box's edge says about a long draft: its lines and, once counted, its
    tokens; first (a narrow box cuts the end) whether it is too long for the model's context."""
    if size is None:
        return f"{lines:,} lines · {chars:,} characters"
    if not size.fits:
        return f"~{size.tokens:,} tokens: too long · {fold_key} folds · {lines:,} lines"
    return f"{lines:,} lines · ~{size.tokens:,} tokens"


def describe_turn(report: InjectionReport | None, usage: dict[str, int]) -> str:
    """The dim line under an answer: ``memory 812/2000 tokens · 3 relevant · 1,204 → 56 tokens``."""
    parts = []
    if report is not None:
        relevant = sum(1 for item in report.included if item.kind == "relevant")
        parts.append(f"memory {report.tokens_used}/{report.budget} tokens · {relevant} relevant")
    if usage.get("prompt", 0) or usage.get("completion", 0):
        parts.append(f"{usage['prompt']:,} → {usage['completion']:,} tokens")
    return " · ".join(parts)


def transcript_messages(
    transcript: Transcript, limit: int = MAX_SHOWN_MESSAGES
) -> tuple[list[ChatMessage], int]:
    """The transcript as chat widgets (tool calls with their results, errors, compactions),
    the last ``limit`` of them, and how many earlier ones were left out."""
    silent_ids = {m.id for m in transcript.messages if m.silent}
    messages: list[ChatMessage] = []
    parts: list[Widget] | None = None
    texts: list[str] = []
    meta = ""  # the memory line of the answer being collected (from its turn's injection)

    def close_answer() -> None:
        nonlocal parts, meta
        if parts is not None:
            message = ChatMessage("assistant", "".join(texts), parts=parts, meta=meta)
            messages.append(message)
        parts = None
        texts.clear()
        meta = ""

    def answer_parts() -> list[Widget]:
        nonlocal parts
        if parts is None:
            parts = []
        return parts

    for item in transcript.timeline:
        if isinstance(item, TranscriptMessage):
            if item.silent:
                continue
            if item.role == "user":
                close_answer()
                messages.append(ChatMessage("user", item.content))
            elif item.role == "assistant":
                current = answer_parts()
                if item.content:
                    current.append(ChatMarkdown(item.content))
                    texts.append(item.content)
                if item.interrupted:
                    current.append(notice_part("(interrupted)"))
                elif item.incomplete:
                    current.append(notice_part("(answer cut short)"))
        elif isinstance(item, ToolCall):
            if item.message_id in silent_ids:
                continue
            view = ToolCallView(item.id, item.tool, item.input, raw_arguments=item.arguments)
            result = transcript.tool_results.get(item.id)
            if result is not None:
                view.set_result(result.output, result.ok)
            answer_parts().append(view)
        elif isinstance(item, TurnInjection):
            if item.report:
                meta = describe_turn(InjectionReport.from_json(item.report), {})
        elif isinstance(item, ErrorRecord):
            answer_parts().append(error_part(item.kind, item.message))
        elif isinstance(item, Compaction):
            dropped = item.dropped_messages if item.dropped_messages is not None else "older"
            answer_parts().append(
                notice_part(
                    f"(compacted: {dropped} earlier messages are now a summary for the model)"
                )
            )
    close_answer()
    hidden = max(0, len(messages) - limit)
    return messages[hidden:], hidden


class ChatPane(Vertical):
    """The conversation of the open session and the message box.

    :attr:`session_id` is bound to the screen's open session; the screen renders a session's
    transcript with :meth:`show_transcript`. Sending with no session open asks the screen for
    one (:class:`SessionNeeded`); otherwise it runs ``ChatEngine.run_turn`` in one async worker
    and renders its events as they arrive. The log follows new output only while it is
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
    class SessionNeeded(Message):
        """The user sent ``text`` with no session open: open a new one, then :meth:`send` it."""

        text: str

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
    #: The open session (bound to the screen's); None when none is open.
    session_id: reactive[str | None] = reactive(None, init=False)

    def __init__(
        self,
        engine: ChatEngine,
        *,
        config_file: Path,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.engine = engine
        self.config_file = config_file
        #: The last message the user sent in this session.
        self.last_user_text: str | None = None
        #: Turns ended so far (answered, failed or stopped).
        self.turns_finished = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="chat-log"):
            if self.engine.llm_problem:
                yield SetupExplainer(self.engine.config, self.config_file, id="setup-explainer")
            else:
                yield Static(FIRST_STEPS, id="chat-empty", markup=False)
        yield Static("", id="chat-status")
        placeholder = (
            "no model: type to see what memory it would inject"
            if self.engine.llm_problem
            else "message… (Enter sends, ctrl+j new line, ↑ history)"
        )
        yield ChatInput(placeholder=placeholder, id="chat-input")

    def on_mount(self) -> None:
        self._show_status()
        self._fold_lock = asyncio.Lock()
        self._settled: dict[Widget, Size] = {}  # finished parts and their size at the last look
        self.set_interval(FOLD_INTERVAL, self._refold)
        self.watch(self.log_view, "scroll_y", self._scrolled, init=False)
        # text is laid out after it is written (writes are paced and batched): the log starts
        # to follow once the layout shows it overflowing
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

    @property
    def fold_key(self) -> str:
        """The key that folds a draft to its head and tail."""
        return str(self.engine.config.keymap.get("chat_pane.fold_draft", FOLD_DRAFT_KEY))

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
        size = await asyncio.to_thread(self.engine.measure_message, text)
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
        folded = await asyncio.to_thread(self.engine.fit_message, text)
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
        problem = self.engine.llm_problem
        if problem:
            self.notify(problem, title="no model configured", severity="warning", timeout=8)
            return
        if self.busy:
            self.notify("still answering — Escape stops it", severity="warning")
            return
        if len(text) > self.engine.message_room():  # else it fits: a word-piece is a character or more
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
        size = await asyncio.to_thread(self.engine.measure_message, text)
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
        if self.busy:
            self.notify("still answering — Escape stops it", severity="warning")
        elif self.chat_input.text.strip() == text:  # else it was edited meanwhile: not sent
            self._send_draft(text)

    def send(self, text: str) -> None:
        """Send ``text`` as the user's next message in the open session; with none open, ask
        the screen for a new one (:class:`SessionNeeded`), which sends it there."""
        if self.session_id is None:
            self.post_message(self.SessionNeeded(text))
            return
        self.busy = True
        self.last_user_text = text
        self._run_turn(text)

    def action_stop(self) -> None:
        """Stop the running turn (what was streamed stays; the transcript keeps the message)."""
        for worker in self.workers:
            if worker.group == "turn" and worker.is_running:
                worker.cancel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.busy
        return True

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
        elif self.engine.llm_problem:
            status.update(Text("memory only: no model configured", style="italic"))
        else:
            status.update(Text(self.engine.llm.model or "", style="dim"))

    def _show_first_steps(self, show: bool) -> None:
        for hint in self.query("#chat-empty"):
            hint.display = show

    async def _add(self, widget: Widget) -> None:
        self._show_first_steps(False)
        widget.add_class("chat-item")
        await self.log_view.mount(widget)
        self.call_after_refresh(self.follow_output)

    @work(group="turn", exclusive=True, exit_on_error=False)
    async def _run_turn(self, text: str) -> None:
        """One turn: the engine's events, rendered as they arrive (an async worker on the UI
        loop; the engine runs its blocking parts in threads)."""
        session_id = self.session_id
        assert session_id is not None
        assistant: ChatMessage | None = None
        report: InjectionReport | None = None
        usage = {"prompt": 0, "completion": 0}
        if self.log_view.is_anchored:
            self.log_view.scroll_end(animate=False, immediate=True)  # sending follows again
        try:
            await self._add(ChatMessage("user", text))
            assistant = ChatMessage("assistant")
            await self._add(assistant)
            async for event in self.engine.run_turn(session_id, text):
                if isinstance(event, TextDelta):
                    await assistant.append_text(event.text)
                    self.follow_output()
                elif isinstance(event, InjectionBuilt):
                    report = event.report
                elif isinstance(event, ToolCallStarted):
                    await assistant.add_tool_call(
                        event.call_id,
                        event.name,
                        event.arguments,
                        raw_arguments=event.raw_arguments,
                        silent=event.silent,
                    )
                elif isinstance(event, ToolCallFinished):
                    assistant.finish_tool_call(event.call_id, event.result, event.ok)
                elif isinstance(event, Usage):
                    usage["prompt"] += event.prompt_tokens
                    usage["completion"] += event.completion_tokens
                elif isinstance(event, TurnError):
                    await assistant.add_error(event.kind, event.message)
                elif isinstance(event, CompactionStarted):
                    await assistant.add_notice(
                        f"(compacting: ~{event.estimated_tokens:,} of {event.limit:,} tokens)"
                    )
                elif isinstance(event, Compacted):
                    await assistant.add_notice(
                        f"(compacted: ~{event.tokens_before:,} → ~{event.tokens_after:,} tokens)"
                    )
                elif isinstance(event, CompactionFailed):
                    await assistant.add_notice(f"(compaction skipped: {event.message})")
            assistant.set_meta(describe_turn(report, usage))
        except asyncio.CancelledError:
            if assistant is not None:
                await assistant.add_notice("(stopped)")
            raise
        except SessionError as exc:
            if assistant is not None:
                await assistant.add_error("session", str(exc))
        except Exception as exc:  # a bug: show it where the answer would be, keep the app alive
            if assistant is not None:
                await assistant.add_error("internal", f"{type(exc).__name__}: {exc}")
            else:
                self.notify(f"{type(exc).__name__}: {exc}", title="chat", severity="error")
        finally:
            if assistant is not None:
                await assistant.finish()
            self.busy = False
            self.turns_finished += 1
            self.post_message(self.TurnFinished(session_id, text))

    @property
    def tool_calls(self) -> list[ToolCallView]:
        """Every tool call shown, oldest first."""
        return list(self.log_view.query(ToolCallView))

    def transcript_text(self) -> list[tuple[str, str]]:
        """``(role, text)`` of the messages shown (tests, copy)."""
        return [(m.role, m.text) for m in self.messages]
