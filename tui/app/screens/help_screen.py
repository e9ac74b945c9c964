"""F1: what the focused widget is for (its ``HELP``) and every key that works there, by id."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tui.app.panels.base import formula_markdown

GENERAL_HELP = """\
## memdeck

A chat whose assistant remembers. Memory is plain Markdown in your workspace: `MEMORY.md`
(long-term facts) and `memory/YYYY-MM-DD.md` (daily logs); the index is rebuilt from them.

Conversations are summarised into the daily log when you switch sessions, go idle, leave the
terminal, the day changes, or quit. **ctrl+p** lists every command.
"""


def widget_help(widget: Widget | None) -> str:
    """The ``HELP`` of the widget or its nearest ancestor that has one (its ``help_text`` if it
    words its help for itself)."""
    node: DOMNode | None = widget
    while node is not None:
        text = getattr(node, "help_text", None) or getattr(node, "HELP", None)
        if isinstance(text, str) and text.strip():
            return text
        node = node.parent
    return GENERAL_HELP


def keys_table(bindings: list[tuple[str, Binding]]) -> str:
    """A Markdown table of ``(key, binding)`` pairs with the binding id to remap each in the
    ``[keymap]`` table of config.toml (bindings without an id are left out)."""
    rows: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for key, binding in bindings:
        if not binding.id or binding.system or binding.id in seen:
            continue
        seen.add(binding.id)
        description = binding.tooltip or binding.description or binding.action
        rows.append((key, description, binding.id))
    if not rows:
        return ""
    lines = ["| key | what | id |", "|---|---|---|"]
    lines += [f"| `{key}` | {what} | `{bid}` |" for key, what, bid in rows]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Help for the widget that had focus, then its keys. Escape or F1 closes it."""

    BINDINGS = [
        Binding("escape,f1,q", "dismiss_help", "Close", id="help.close", tooltip="Close help"),
    ]

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > Vertical {
        width: 90;
        max-width: 95%;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen VerticalScroll {
        height: auto;
        max-height: 100%;
    }
    HelpScreen Markdown {
        background: transparent;
        margin: 0;
    }
    HelpScreen #help-footer {
        height: 1;
        color: $text-muted;
    }
    """

    def __init__(
        self, widget: Widget | None, bindings: list[tuple[str, Binding]], formula: str = ""
    ) -> None:
        """``bindings``: the keys active where help was asked (``screen.active_bindings``);
        ``formula``: how search scores a memory (``score_formula``), shown last."""
        super().__init__()
        self.widget_help = widget_help(widget)
        self.keys = keys_table(bindings)
        self.formula = formula

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield Markdown(self.widget_help, id="help-widget")
                if self.keys:
                    yield Markdown(
                        "### Keys\n\nRemap any of them in config.toml, e.g. "
                        '`[keymap]` `"app.flush" = "ctrl+g"`.\n\n' + self.keys,
                        id="help-keys",
                    )
                formula = formula_markdown(self.formula)
                if self.formula and formula not in self.widget_help:
                    yield Markdown(
                        "### How search scores a memory\n\n" + formula, id="help-formula"
                    )
            yield Static("Escape closes · ctrl+p lists every command", id="help-footer")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
