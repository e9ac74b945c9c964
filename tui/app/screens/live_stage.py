"""A screen never shown: where the open text segments of streamed answers are laid out."""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from textual.app import App
from textual.color import Color
from textual.geometry import Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Markdown

from tui.app.textual_compat import OffstagePicture, redraw_offstage, register_offstage


class LiveStage(Screen[None]):
    """Holds the Markdown of the segments being streamed, out of the main screen's layout.

    Each :class:`~tui.app.widgets.live_text.LiveText` in the chat draws a picture of its
    segment taken here (:meth:`picture`), so the main screen lays out and paints one widget per
    streamed segment instead of its block widgets. The segment's styles are the ones it has in
    a chat message (the rule below), its background and text colour those under the picture.
    """

    DEFAULT_CSS = """
    LiveStage > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        #: Each segment's last picture, with the width and colours it was drawn at: the next
        #: one draws again only the lines that may have changed (:func:`redraw_offstage`).
        self._pictures: WeakKeyDictionary[
            Markdown, tuple[tuple[int, Color, Color], OffstagePicture]
        ] = WeakKeyDictionary()

    @classmethod
    def of(cls, app: App[Any]) -> LiveStage:
        """The app's stage (started on first use)."""
        stage = _STAGES.get(app)
        if stage is None:
            stage = _STAGES[app] = cls()
            register_offstage(stage)
        return stage

    def picture(
        self, markdown: Markdown, width: int, background: Color, color: Color
    ) -> list[Strip]:
        """The lines ``markdown`` (a child of this stage) draws at ``width`` on ``background``
        in ``color`` (a picture as tall as its text)."""
        if self.styles.background != background:
            self.styles.background = background
        if self.styles.color != color:
            self.styles.color = color
        height = markdown.get_content_height(Size(width, 0), self.app.size, width)
        height += markdown.styles.gutter.height
        if not height:
            return []
        last = self._pictures.get(markdown)
        if last is not None and last[0][1:] != (background, color):
            # Each widget keeps its style (the background under it folded in) and the lines
            # drawn with it until told: a message that took focus kept its old background.
            for node in markdown.walk_children(with_self=True):
                node.notify_style_update()
                node.refresh()
        drawn_alike = last is not None and last[0] == (width, background, color)
        picture = redraw_offstage(
            markdown, Size(width, height), last[1] if last is not None and drawn_alike else None
        )
        self._pictures[markdown] = ((width, background, color), picture)
        return picture.strips


_STAGES: WeakKeyDictionary[App[Any], LiveStage] = WeakKeyDictionary()
