"""One message in the chat: the user's text, or the assistant's streamed Markdown with its tool
calls inline, errors and notices, in the order they happened."""

from __future__ import annotations

from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui.app.tool_call_view import ToolCallView

Role = Literal["user", "assistant"]

#: What a message header says for each role.
ROLE_LABELS = {"user": "you", "assistant": "memdeck"}


def error_part(kind: str, message: str) -> Static:
    """The red line that says why a turn ended early."""
    return Static(Text.assemble((f"error ({kind}): ", "bold"), message), classes="message-error")


def notice_part(text: str) -> Static:
    """A dim line about what happened (compaction, stopped, cut short)."""
    return Static(Text(text), classes="message-notice")


class ChatMessage(Vertical):
    """A user or assistant message.

    An assistant message is a sequence of parts: Markdown text segments (streamed through
    ``Markdown.get_stream``), :class:`ToolCallView` calls, error and notice lines. A new text
    segment starts after each tool call, so what is shown keeps the order of the turn.
    """

    HELP = """\
## Chat

Your messages and the assistant's answers. Answers stream in as Markdown; the assistant's
memory tool calls appear inline (▶ save_memory ✓ …): focus one and press **Enter** to see
what it sent and got back. Errors are shown in red and the conversation goes on.
"""

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
    ChatMessage > .user-text {
        height: auto;
    }
    ChatMessage > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    ChatMessage > Markdown > *:last-child {
        margin-bottom: 0;
    }
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
    ) -> None:
        """``parts`` pre-fill an assistant message (a resumed transcript); ``meta`` is the dim
        last line (memory injected, tokens)."""
        super().__init__(classes=f"-{role}")
        self.role: Role = role
        self.text = text
        self._initial_parts = list(parts or [])
        if role == "assistant" and text and not parts:
            self._initial_parts.append(Markdown(text))
        self._meta_text = meta
        self._stream: MarkdownStream | None = None
        self._segment: Markdown | None = None
        self._segment_text = ""
        self._tool_calls: dict[str, ToolCallView] = {}

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

    @property
    def streaming(self) -> bool:
        """True while a text segment is open."""
        return self._stream is not None

    async def _mount_part(self, widget: Widget) -> None:
        await self.mount(widget, before=self.query_one(".message-meta"))

    async def append_text(self, delta: str) -> None:
        """Stream a piece of the answer into the current text segment (opened on demand)."""
        if not delta:
            return
        if self._segment is None:
            self._segment = Markdown()
            self._segment_text = ""
            await self._mount_part(self._segment)
            self._stream = Markdown.get_stream(self._segment)
        self._segment_text += delta
        self.text += delta
        assert self._stream is not None
        await self._stream.write(delta)

    async def close_segment(self) -> None:
        """Finish the open text segment: drain the stream, then render the whole segment once
        (a streamed partial block can leave the incremental parser in a stale state)."""
        stream, segment = self._stream, self._segment
        self._stream = None
        self._segment = None
        if stream is not None:
            await stream.stop()
        if segment is not None:
            await segment.update(self._segment_text)

    async def add_tool_call(
        self,
        call_id: str,
        name: str,
        arguments: dict,
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

    def finish_tool_call(self, call_id: str, result: dict, ok: bool) -> None:
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
