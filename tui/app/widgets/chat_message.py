"""One message in the chat: the user's text, or the assistant's streamed Markdown with its tool
calls inline, errors and notices, in the order they happened."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui.app.textual_compat import alike_lines
from tui.app.widgets.chat_fence import cold_fence_languages, warm_lexer
from tui.app.widgets.chat_markdown import ChatMarkdown, height_free
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.live_text import LiveText
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.events import ERROR_LABELS
from tui.engine.markdown import inside_fence

Role = Literal["user", "assistant"]

#: Streamed text reaches the Markdown widget at most this often (seconds); pieces in between
#: are written together. Rendering every piece of a fast model falls behind (see the bench).
STREAM_INTERVAL = 0.15
#: ...and never more often than this many times the last append took, so that rendering a
#: long answer leaves the event loop free to read the stream (and the keyboard).
STREAM_COST_FACTOR = 10
#: The longest wait between two writes, however slow appends get.
STREAM_MAX_INTERVAL = 0.5
#: A streamed text segment is closed at the next blank line (outside a code fence) once it is
#: this long, and the rest goes on in a new one.
SEGMENT_CHARS = 400

#: What a message header says for each role.
ROLE_LABELS = {"user": "you", "assistant": "memdeck"}


def error_part(kind: str, message: str) -> Static:
    """The red line that says why a turn ended early."""
    label = ERROR_LABELS.get(kind, f"error ({kind})")
    return Static(Text.assemble((f"{label}: ", "bold"), message), classes="message-error")


def notice_part(text: str) -> Static:
    """A dim line about what happened (compaction, stopped, cut short)."""
    return Static(Text(text), classes="message-notice")


def code_blocks(text: str) -> list[str]:
    """The code blocks of Markdown ``text`` (fenced or indented), their code only, in order."""
    tokens = MarkdownIt("commonmark").parse(text)
    return [token.content for token in tokens if token.type in ("fence", "code_block")]


def _lines(text: str) -> str:
    count = text.count("\n") + (0 if text.endswith("\n") else 1)
    return f"{count} line{'s' if count != 1 else ''}"


@height_free
class ChatMessage(Vertical):
    """A user or assistant message.

    An assistant message is a sequence of parts: Markdown text segments, :class:`ToolCallView`
    calls, error and notice lines. A new text segment starts after each tool call, so what is
    shown keeps the order of the turn. The open segment is streamed (``Markdown.get_stream``)
    into Markdown drawn here by a :class:`LiveText`; once closed it is a :class:`FoldedText`
    (its picture), Markdown again when used. Pieces arriving faster than
    :data:`STREAM_INTERVAL` are written to the stream together.
    """

    HELP = """\
## Chat

Your messages and the assistant's answers. Answers stream in as Markdown; the assistant's
memory tool calls appear inline (▶ save_memory ✓ …): focus one and press **Enter** to see
what it sent and got back. Errors are shown in red and the conversation goes on.

A message is focused by a click, or **shift+tab** from the message box; **Up**/**Down** move
to the one before or after. On a focused message:

- **c** copies it to the clipboard (an answer as its Markdown), **b** its code blocks, one
  per press.
- **r** asks again: your message is sent once more and a new answer replaces this one.
- **e** edits your message in the message box; **Enter** sends it, **Escape** cancels.

A retry or an edit replaces the messages after it: they stay in the session's transcript
file (marked superseded), and what they saved to memory stays.
"""

    BINDINGS = [
        Binding("c", "copy", "copy", id="chat_message.copy", tooltip="Copy this message"),
        Binding(
            "b",
            "copy_code",
            "code",
            id="chat_message.copy_code",
            tooltip="Copy a code block of this message (the next one at each press)",
            show=False,  # the footer fits 80 columns with c and r; F1 lists all four
        ),
        Binding(
            "r",
            "retry",
            "retry",
            id="chat_message.retry",
            tooltip="Send your message again: a new answer replaces this one and what follows",
        ),
        Binding(
            "e",
            "edit",
            "edit",
            id="chat_message.edit",
            tooltip="Edit your message and send it again (what follows it is replaced)",
            show=False,
        ),
        Binding(
            "up",
            "step(-1)",
            "previous",
            id="chat_message.previous",
            tooltip="Focus the message before",
            show=False,
        ),
        Binding(
            "down",
            "step(1)",
            "next",
            id="chat_message.next",
            tooltip="Focus the message after",
            show=False,
        ),
    ]

    @dataclass
    class Rewind(Message):
        """The user asked to retry (``edit`` False) or edit ``message``."""

        message: ChatMessage
        edit: bool

    @dataclass
    class SegmentClosed(Message):
        """A streamed text segment got its last text and was rendered with it: ``segment``
        may be folded once laid out (see ``TextFolder``)."""

        segment: ChatMarkdown

    @dataclass
    class TypedAway(Message):
        """A key with no meaning here was typed: it belongs in the message box."""

        character: str

    can_focus = True

    DEFAULT_CSS = """
    ChatMessage {
        height: auto;
        padding: 0 1 0 1;
        margin: 0 0 1 0;
    }
    ChatMessage > .message-role {
        height: 1;
        text-style: bold;
    }
    ChatMessage.-user {
        border-left: outer $accent;
    }
    ChatMessage.-user > .message-role {
        color: $accent;
    }
    ChatMessage.-assistant {
        border-left: outer $primary;
    }
    ChatMessage.-assistant > .message-role {
        color: $primary;
    }
    ChatMessage:focus {
        background: $boost;
    }
    ChatMessage > .user-text {
        height: auto;
    }
    ChatMessage > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    /* No :last-child rules on Markdown blocks here: an order-dependent rule makes Textual
       restyle every block whenever one is added, which makes streaming quadratic. */
    ChatMessage > .message-error {
        height: auto;
        color: $error;
        background: $error 10%;
        padding: 0 1;
    }
    ChatMessage > .message-notice {
        height: auto;
        color: $text-muted;
        text-style: italic;
    }
    ChatMessage > .message-meta {
        height: auto;
        color: $text-muted;
    }
    """

    def __init__(
        self,
        role: Role,
        text: str = "",
        *,
        parts: list[Widget] | None = None,
        meta: str = "",
        message_id: str | None = None,
    ) -> None:
        """``parts`` pre-fill an assistant message (a resumed transcript); ``meta`` is the dim
        last line (memory injected, tokens); ``message_id``: the user message's id in the
        transcript (set once it is stored)."""
        super().__init__(classes=f"-{role}")
        self.role: Role = role
        self.text = text
        self.message_id = message_id
        self._code_turn = 0  # the code block the next copy takes
        self._initial_parts = list(parts or [])
        if role == "assistant" and text and not parts:
            self._initial_parts.append(ChatMarkdown(text))
        self._meta_text = meta
        self._stream: MarkdownStream | None = None
        self._live: LiveText | None = None  # the open segment (its Markdown on the stage)
        self._leaving: set[Widget] = set()  # parts being swapped out
        self._segment_text = ""
        self._pending = ""
        self._last_write = 0.0
        self._flush_timer: Timer | None = None
        self._tool_calls: dict[str, ToolCallView] = {}

    def render_lines(self, crop: Region) -> list[Strip]:
        # its own lines (border, padding, background) are all alike: drawn once per size
        return alike_lines(self, crop)

    def compose(self) -> ComposeResult:
        yield Static(ROLE_LABELS[self.role], classes="message-role")
        if self.role == "user":
            yield Static(Text(self.text), classes="user-text")
            return
        yield from self._initial_parts
        meta = Static(Text(self._meta_text), classes="message-meta")
        meta.display = bool(self._meta_text)
        yield meta

    @property
    def tool_calls(self) -> list[ToolCallView]:
        """The tool calls shown in this message, in order."""
        return list(self._tool_calls.values())

    def finished_part(self, part: Widget) -> bool:
        """True if ``part`` is a child no longer written to (the open segment's Markdown is on
        the stage, never a child)."""
        return part.parent is self

    def text_parts(self) -> list[Markdown | FoldedText | LiveText]:
        """The text segments in order, folded and open ones included (not those being swapped
        out)."""
        return [
            part
            for part in self.children
            if isinstance(part, Markdown | FoldedText | LiveText) and part not in self._leaving
        ]

    def shown_text(self) -> str:
        """The Markdown text of this message's parts as they are now, folded ones included."""
        return "".join(part.source for part in self.text_parts())

    async def swap_part(self, old: Widget, new: Widget) -> None:
        """Put ``new`` in the place of the part ``old`` (folding and unfolding text); ``old``
        stays if ``new`` could not be mounted (this message is being removed)."""
        self._leaving.add(old)
        try:
            await self.mount(new, after=old)
            if new.parent is self:
                await old.remove()
        finally:
            self._leaving.discard(old)

    @property
    def streaming(self) -> bool:
        """True while a text segment is open."""
        return self._stream is not None

    async def _mount_part(self, widget: Widget) -> None:
        await self.mount(widget, before=self.query_one(".message-meta"))

    async def append_text(self, delta: str) -> None:
        """Stream a piece of the answer into the current text segment (opened on demand).

        A long answer is cut into segments of about :data:`SEGMENT_CHARS` at a blank line
        outside code fences: each segment's final render stays cheap and appends stay small.
        """
        if not delta:
            return
        # A code block's lexer is loaded in a thread before the block reaches the widget
        # (the stream waits for it, the UI does not).
        for language in cold_fence_languages(self.text[self.text.rfind("\n") + 1 :] + delta):
            await asyncio.to_thread(warm_lexer, language)
        cut = self._segment_break(delta)
        if cut is not None:
            await self._append(delta[:cut])
            await self.close_segment()
            delta = delta[cut:]
            if not delta:
                return
        await self._append(delta)

    def _segment_break(self, delta: str) -> int | None:
        """Where in ``delta`` to end a long segment (after a blank line outside a fence)."""
        if len(self._segment_text) + len(delta) < SEGMENT_CHARS:
            return None
        combined = self._segment_text + delta
        at = combined.rfind("\n\n", len(self._segment_text) - 1)
        if at < 0 or inside_fence(combined[: at + 2]):
            return None
        return at + 2 - len(self._segment_text)

    async def _append(self, delta: str) -> None:
        if not delta:
            return
        if self._live is None:
            live = self._live = LiveText()
            self._segment_text = ""
            await self._mount_part(live)
            await live.stage()
            self._stream = Markdown.get_stream(live.markdown)
        self._segment_text += delta
        self.text += delta
        self._pending += delta
        interval = self._write_interval()
        if time.monotonic() - self._last_write >= interval:
            await self._write_pending()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(interval, self._write_pending)

    def _write_interval(self) -> float:
        """Seconds between writes: :data:`STREAM_INTERVAL`, more when appends get slow."""
        cost = self._live.markdown.last_append_seconds if self._live is not None else 0.0
        return min(STREAM_MAX_INTERVAL, max(STREAM_INTERVAL, STREAM_COST_FACTOR * cost))

    async def _write_pending(self) -> None:
        """Hand what arrived since the last write to the Markdown stream."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        pending, self._pending = self._pending, ""
        self._last_write = time.monotonic()
        if pending and self._stream is not None:
            await self._stream.write(pending)

    async def close_segment(self) -> None:
        """Finish the open text segment: drain the stream, then render the whole segment once
        if the streamed blocks are not those of the whole text (a streamed partial block can
        leave the incremental parser in a stale state)."""
        await self._write_pending()
        stream, live = self._stream, self._live
        self._stream = None
        self._live = None
        if stream is not None:
            await stream.stop()
        if live is not None:
            segment = live.markdown
            # Stopping cancels the stream's task but not the write it had under way (Textual
            # shields it): that write ends first, or the segment looks unfinished and is
            # rendered again, whole (the costliest tick of a stream ending in a new block).
            async with segment.lock:
                pass
            if not segment.shows(self._segment_text):
                await segment.update(self._segment_text)
            if live.parent is self:
                await self._settle(live)

    async def _settle(self, live: LiveText) -> None:
        """Put a closed segment's final picture in its place (a :class:`FoldedText`, which
        comes back as Markdown when used); without a picture (never laid out), its Markdown,
        folded later (:class:`SegmentClosed`)."""
        folded = live.folded()
        if folded is not None:
            await self.swap_part(live, folded)
            return
        segment = ChatMarkdown(live.source)
        await self.swap_part(live, segment)
        if segment.parent is self:
            self.post_message(self.SegmentClosed(segment))

    async def add_tool_call(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        raw_arguments: str = "",
        silent: bool = False,
    ) -> ToolCallView:
        """Show a tool call (running) after what was said so far."""
        await self.close_segment()
        view = ToolCallView(call_id, name, arguments, raw_arguments=raw_arguments, silent=silent)
        self._tool_calls[call_id] = view
        await self._mount_part(view)
        return view

    def finish_tool_call(self, call_id: str, result: dict[str, Any], ok: bool) -> None:
        """The tool ran: show its result."""
        view = self._tool_calls.get(call_id)
        if view is not None:
            view.set_result(result, ok)

    async def add_error(self, kind: str, message: str) -> None:
        """Show why the turn ended early."""
        await self.close_segment()
        await self._mount_part(error_part(kind, message))

    async def add_notice(self, text: str) -> None:
        """A dim line about what happened (compaction, stopped)."""
        await self.close_segment()
        await self._mount_part(notice_part(text))

    def set_meta(self, text: str) -> None:
        """The dim last line: memory injected and tokens used."""
        self._meta_text = text
        for meta in self.query(".message-meta").results(Static):
            meta.update(Text(text))
            meta.display = bool(text)

    async def finish(self) -> None:
        """The turn is over: close the open text segment."""
        await self.close_segment()

    # -- keys on a focused message --

    def on_key(self, event: events.Key) -> None:
        """Text typed here goes to the message box (keys bound here keep their meaning)."""
        if event.is_printable and event.character and event.key not in self.screen.active_bindings:
            event.stop()
            event.prevent_default()
            self.post_message(self.TypedAway(event.character))

    def action_copy(self) -> None:
        """Copy this message's text (an answer's Markdown) to the clipboard."""
        if not self.text.strip():
            self.notify("nothing to copy: this message has no text", severity="warning")
            return
        self.app.copy_to_clipboard(self.text)
        what = "your message" if self.role == "user" else "the answer"
        self.notify(f"copied {what} ({_lines(self.text)}) to the clipboard", title="copied")

    def action_copy_code(self) -> None:
        """Copy a code block of this message, the next one at each press."""
        blocks = code_blocks(self.text)
        if not blocks:
            self.notify("this message has no code block: c copies all of it", severity="warning")
            return
        turn = self._code_turn % len(blocks)
        self._code_turn = turn + 1
        self.app.copy_to_clipboard(blocks[turn])
        self.notify(
            f"copied code block {turn + 1} of {len(blocks)} ({_lines(blocks[turn])})",
            title="copied",
        )

    def action_retry(self) -> None:
        """Ask again from this message (see :class:`Rewind`)."""
        self.post_message(self.Rewind(self, edit=False))

    def action_edit(self) -> None:
        """Edit this message (an answer: the message it answers) and send it again."""
        self.post_message(self.Rewind(self, edit=True))

    def action_step(self, step: int) -> None:
        """Focus the message ``step`` places before or after this one."""
        siblings = list(self.parent.query_children(ChatMessage)) if self.parent else []
        position = siblings.index(self) + step if self in siblings else -1
        if 0 <= position < len(siblings):
            siblings[position].focus()
            siblings[position].scroll_visible(animate=False)
