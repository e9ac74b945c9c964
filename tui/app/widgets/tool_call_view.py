"""One tool call of the assistant, inline in the chat: a collapsible with arguments and result."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group, RenderableType
from rich.json import JSON
from rich.text import Text
from textual.markup import escape
from textual.widgets import Collapsible, Static

#: Characters of a plain-text argument or result shown before it is cut.
TEXT_LIMIT = 2000


def render_value(value: Any) -> RenderableType:
    """Arguments or a result as indented JSON (long strings cut), else as plain text."""
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
        if len(text) > TEXT_LIMIT:
            return Text(text[:TEXT_LIMIT] + "…")
        return JSON(text, indent=2)
    if value is None:
        return Text("(none)", style="dim italic")
    text = str(value)
    return Text(text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…")


def short_arguments(arguments: dict[str, Any], limit: int = 48) -> str:
    """The first argument value, cut to ``limit``: what the title shows next to the name."""
    if not arguments:
        return ""
    first = next(iter(arguments.values()))
    text = " ".join(str(first).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ToolCallView(Collapsible):
    """``▶ save_memory ✓ Likes tea`` — expand (Enter or click) to see arguments and result."""

    HELP = """\
## Tool call

The assistant called one of its memory tools (save_memory, memory_search, memory_get,
forget_memory). **Enter** or a click shows the arguments it sent and the result it got back.
A ✗ means the call failed; the result says why.
"""

    DEFAULT_CSS = """
    ToolCallView {
        margin: 0 0 0 0;
        padding: 0;
        border-top: none;
        background: transparent;
    }
    ToolCallView CollapsibleTitle {
        max-width: 100%;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ToolCallView > Contents {
        padding: 0 0 0 3;
    }
    ToolCallView.-error CollapsibleTitle {
        color: $error;
    }
    ToolCallView.-running CollapsibleTitle {
        color: $text-muted;
    }
    ToolCallView.-silent CollapsibleTitle {
        text-style: italic;
    }
    """

    def __init__(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        raw_arguments: str = "",
        silent: bool = False,
    ) -> None:
        self.call_id = call_id
        self.tool_name = name
        self.arguments = arguments
        self.raw_arguments = raw_arguments
        self.silent = silent
        self.result: dict[str, Any] | None = None
        self.ok: bool | None = None
        self._body_view = Static(self._body(), classes="tool-call-body")
        classes = "-running -silent" if silent else "-running"
        super().__init__(self._body_view, title=self._title_text(), collapsed=True, classes=classes)

    def _body(self) -> Group:
        arguments: Any = self.arguments
        if not arguments and self.raw_arguments.strip() not in ("", "{}"):
            arguments = self.raw_arguments  # not valid JSON: show what the model sent
        parts: list[RenderableType] = [Text("arguments", style="bold"), render_value(arguments)]
        if self.result is not None:
            label = "result" if self.ok else "error"
            parts += [
                Text(label, style="bold" if self.ok else "bold red"),
                render_value(self.result),
            ]
        else:
            parts.append(Text("running…", style="dim"))
        return Group(*parts)

    def _title_text(self) -> str:
        mark = "…" if self.ok is None else ("✓" if self.ok else "✗")
        detail = short_arguments(self.arguments)
        if self.ok is False and self.result:
            detail = str(self.result.get("message") or self.result.get("error") or detail)
        silent = " (memory flush)" if self.silent else ""
        return escape(" ".join(part for part in (self.tool_name, mark, detail) if part) + silent)

    def set_result(self, result: dict[str, Any], ok: bool) -> None:
        """The tool ran: show ✓/✗ and the result."""
        self.result = result
        self.ok = ok
        self.remove_class("-running")
        self.set_class(not ok, "-error")
        self.title = self._title_text()
        self._body_view.update(self._body())
