"""A finished piece of an answer folded into one widget: the lines it was drawn with."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Markdown

from tui.app.textual_compat import picture_of
from tui.app.widgets.chat_markdown import ChatMarkdown


class FoldedText(Widget):
    """Stands in for a finished :class:`Markdown` part of an answer.

    A Markdown part is a tree of block widgets (a list item alone is four), and Textual lays
    out and paints the widgets in view each time the streamed answer grows; that work, not the
    model, stalled the UI (``tests/bench/ui_speed.py``). Folded, the part is one widget that
    draws a picture of it: the lines it was drawn with, at the width and theme of that moment.
    It keeps the part's source and its height, so the text, the scroll position and the
    scrollbar stay true.

    A picture does not take links, selections or scrolling wide code: the part comes back
    (:meth:`unfold`) when the mouse is over it, or when the picture is :attr:`stale` (the
    width or the theme changed; a stale picture draws blank) and the view comes near.
    """

    DEFAULT_CSS = """
    FoldedText {
        width: 1fr;
    }
    """

    class Hovered(Message):
        """The mouse came over a folded part: its Markdown is wanted back."""

    def __init__(self, source: str, height: int, picture: list[Strip], theme: str) -> None:
        super().__init__()
        self.source = source
        self.picture = picture
        self.theme = theme
        self.picture_width = picture[0].cell_length if picture else 0
        self.styles.height = max(1, height)

    @classmethod
    def of(cls, markdown: Markdown) -> FoldedText:
        """A stand-in for ``markdown`` as it is drawn now."""
        return cls(
            markdown.source, markdown.outer_size.height, picture_of(markdown), markdown.app.theme
        )

    @property
    def stale(self) -> bool:
        """True if the picture was taken at another width or in another theme."""
        return self.size.width != self.picture_width or self.app.theme != self.theme

    def unfold(self) -> ChatMarkdown:
        """The Markdown part this stands for (not mounted)."""
        return ChatMarkdown(self.source)

    def render_line(self, y: int) -> Strip:
        if self.stale or y >= len(self.picture):
            return Strip.blank(self.size.width, self.rich_style)
        return self.picture[y]

    def on_enter(self, event: events.Enter) -> None:
        self.post_message(self.Hovered())
