"""A screen never shown: where the open text segments of streamed answers are laid out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from textual.app import App
from textual.color import Color
from textual.geometry import Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Markdown

from tui.app.textual_compat import (
    OffstagePicture,
    redraw_offstage,
    register_offstage,
    release_offstage,
)


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

    def let_go(self) -> None:
        """Keep no widget of a segment drawn last (called when one leaves the stage)."""
        release_offstage(self)

    def picture(
        self,
        markdown: Markdown,
        width: int,
        background: Color,
        color: Color,
        last: StagePicture | None = None,
    ) -> StagePicture | None:
        """The lines ``markdown`` (a child of this stage) draws at ``width`` on ``background``
        in ``color`` (a picture as tall as its text; None while it has none). ``last``, its
        previous picture: only the lines that may have changed are drawn again
        (:func:`redraw_offstage`)."""
        if self.styles.background != background:
            self.styles.background = background
        if self.styles.color != color:
            self.styles.color = color
        height = markdown.get_content_height(Size(width, 0), self.app.size, width)
        height += markdown.styles.gutter.height
        if not height:
            return None
        drawn_at = (width, background, color)
        if last is not None and last.drawn_at[1:] != drawn_at[1:]:
            # Each widget keeps its style (the background under it folded in) and the lines
            # drawn with it until told: a message that took focus kept its old background.
            for node in markdown.walk_children(with_self=True):
                node.notify_style_update()
                node.refresh()
        before = last.offstage if last is not None and last.drawn_at == drawn_at else None
        return StagePicture(drawn_at, redraw_offstage(markdown, Size(width, height), before))


@dataclass(frozen=True)
class StagePicture:
    """A segment's picture, with the width and colours it was drawn at (held by the segment's
    :class:`~tui.app.widgets.live_text.LiveText`: it refers to the segment's widgets)."""

    #: Width, background and colour.
    drawn_at: tuple[int, Color, Color]
    offstage: OffstagePicture

    @property
    def strips(self) -> list[Strip]:
        """The picture's lines."""
        return self.offstage.strips


_STAGES: WeakKeyDictionary[App[Any], LiveStage] = WeakKeyDictionary()
