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

from tui.app.textual_compat import draw_offstage, register_offstage


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
        return draw_offstage(markdown, Size(width, height)) if height else []


_STAGES: WeakKeyDictionary[App[Any], LiveStage] = WeakKeyDictionary()
