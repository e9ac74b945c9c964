"""The one line that says which half of a narrow screen is shown: the chat or the memory."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static


class ModeBar(Static):
    """``▸ chat · memory: Inject ● 3 relevant · 812/2000 tokens · ctrl+t switches``.

    Shown only when the screen is too narrow for the chat and the memory panels side by side
    (the screen's ``-narrow`` class): then one of them fills the screen and this line keeps the
    other in view. :attr:`badge` is the Inject tab's news while the user types in the chat.
    """

    HELP = """\
## Chat or memory

The terminal is too narrow for the chat and the memory panels side by side, so one of them
fills the screen. **ctrl+t** flips between them; **F2**–**F8** open a memory tab directly,
**Escape** goes back to the message box. While you type, this line shows what the message
would inject.
"""

    DEFAULT_CSS = """
    ModeBar {
        height: 1;
        padding: 0 1;
        background: $boost;
        display: none;
    }
    """

    #: ``chat`` or ``memory``.
    mode: reactive[str] = reactive("chat")
    #: The memory tab shown (its title).
    tab: reactive[str] = reactive("Inject")
    #: News from the Inject tab while the chat is shown (empty: none).
    badge: reactive[str] = reactive("")
    #: The key that flips chat and memory, as the footer shows it.
    toggle_key: reactive[str] = reactive("ctrl+t")

    def render(self) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        chat, memory = self.mode == "chat", self.mode == "memory"
        line.append("▸ chat" if chat else "  chat", style="bold reverse" if chat else "dim")
        line.append("  ")
        label = f"memory: {self.tab}"
        line.append(
            f"▸ {label}" if memory else f"  {label}", style="bold reverse" if memory else "dim"
        )
        if chat and self.badge:
            line.append(" ● ", style="bold yellow")
            line.append(self.badge)
        line.append(f"  ({self.toggle_key} switches)", style="dim")
        return line
