"""A finished piece of an answer far outside the view, folded into one blank widget."""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Markdown

from tui.app.widgets.chat_markdown import ChatMarkdown


class FoldedText(Widget):
    """Stands in for a finished :class:`Markdown` part that is far outside the view.

    It keeps the part's source and its height (so the scroll position and the scrollbar stay
    true) and draws nothing. A Markdown part is a tree of block widgets (a list item alone is
    four), and Textual lays out and keeps every widget on the screen each time the streamed
    answer grows: folding what cannot be seen keeps that work the size of the view, not of the
    conversation (``tests/bench/ui_speed.py``). :meth:`unfold` gives the Markdown back when the
    view comes near.
    """

    DEFAULT_CSS = """
    FoldedText {
        width: 1fr;
    }
    """

    def __init__(self, source: str, height: int) -> None:
        super().__init__()
        self.source = source
        self.styles.height = max(1, height)

    @classmethod
    def of(cls, markdown: Markdown) -> FoldedText:
        """A stand-in for ``markdown`` at its current height."""
        return cls(markdown.source, markdown.outer_size.height)

    def unfold(self) -> ChatMarkdown:
        """The Markdown part this stands for (not mounted)."""
        return ChatMarkdown(self.source)

    def render(self) -> str:
        return ""
