"""The turn being rendered in the chat pane: the user's message and the answer, filled in as
the workbench publishes the turn's events, and the earlier messages a retry or an edit
replaced taken out of the view (see :class:`TurnView`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from textual.containers import VerticalScroll
from textual.widget import Widget

from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.chat_transcript import describe_turn
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
    TurnStarted,
    Usage,
)
from tui.chat.export import replaced_words
from tui.chat.supersede import Superseded, SupersedeReason
from tui.engine.inject import InjectionReport


class Mount(Protocol):
    """Mounts widgets at the end of the chat log."""

    def __call__(self, *widgets: Widget) -> Awaitable[None]: ...


class TurnView:
    """The user's message and the answer of the turn that runs, in ``log``; ``add`` mounts
    new items at the log's end, ``follow`` keeps the log at its end while it is anchored."""

    def __init__(
        self,
        log: Callable[[], VerticalScroll],
        add: Mount,
        follow: Callable[[], None],
    ) -> None:
        self._log = log
        self._add = add
        self._follow = follow
        #: The user's message of the running turn (its id is set once it is stored).
        self.prompt: ChatMessage | None = None
        #: The answer of the running turn (None between turns).
        self.answer: ChatMessage | None = None
        self._report: InjectionReport | None = None
        self._usage: dict[str, int] = {}

    async def open(self, text: str) -> None:
        """The user's message and an empty answer (sending follows the output again)."""
        self._report, self._usage = None, {"prompt": 0, "completion": 0}
        log = self._log()
        if log.is_anchored:
            log.scroll_end(animate=False, immediate=True)
        self.prompt = ChatMessage("user", text)
        self.answer = ChatMessage("assistant")
        await self._add(self.prompt, self.answer)

    async def show(self, event: object) -> None:
        """One event of the running turn."""
        answer = self.answer
        if answer is None:
            return
        if isinstance(event, TextDelta):
            await answer.append_text(event.text)
            self._follow()
        elif isinstance(event, TurnStarted):
            await self._stored(event)
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

    async def _stored(self, event: TurnStarted) -> None:
        """The user's message is in the transcript: it gets its id; the messages it replaced
        (from ``event.replaces`` up to it) leave the view, a line says so."""
        prompt, answer = self.prompt, self.answer
        if prompt is None or answer is None:
            return
        prompt.message_id = event.message_id
        if event.replaces is None:
            return
        log = self._log()
        items = list(log.query_children(".chat-item"))
        first = next(
            (
                item
                for item in items
                if isinstance(item, ChatMessage) and item.message_id == event.replaces
            ),
            None,
        )
        if first is None or prompt not in items:
            return  # (not in view: the transcript shows it when the session is opened again)
        replaced = items[items.index(first) : items.index(prompt)]
        count = sum(1 for item in replaced if isinstance(item, ChatMessage) and item.text.strip())
        reason: SupersedeReason = "retry" if event.text == first.text else "edit"
        line = replaced_words(Superseded("", event.replaces, reason, count))
        with log.app.batch_update():
            await answer.add_notice(f"({line})")  # (as the transcript shows it later)
            await log.remove_children(replaced)
        # anchored, a conversation that no longer overflows would sit at the bottom of the view
        log.anchor(False)
        log.call_after_refresh(self._follow)

    async def end(self, event: TurnEnded) -> None:
        """The turn ended: the answer's last line (memory and tokens), or why it stopped."""
        answer, self.answer, self.prompt = self.answer, None, None
        if answer is None:
            return
        if event.ending == "completed":
            answer.set_meta(describe_turn(self._report, self._usage))
        elif event.ending == "stopped":
            await answer.add_notice("(stopped)")
        await answer.finish()
