"""The open (streamed) text segment of an answer, drawn by one widget."""

from __future__ import annotations

from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from tui.app.screens.live_stage import LiveStage, StagePicture
from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.folded_text import FoldedText


class LiveText(Widget):
    """Draws the segment of an answer that is being streamed, as one widget.

    Textual lays out and paints each block widget of a Markdown part (a list item alone is
    four) at every screen refresh, and a streamed answer refreshes the screen at each write,
    scrolled by the new lines: the open segment's blocks made the worst ticks of a stream
    (``tests/bench/ui_speed.py``). Its :attr:`markdown` is parsed, mounted and updated as
    before, but on the :class:`LiveStage`, a screen never shown; after each write this widget
    takes a picture of it at its own width and draws that. When the segment closes, the
    picture becomes a :class:`FoldedText` (:meth:`folded`), which comes back as Markdown when
    used, like any finished part.
    """

    DEFAULT_CSS = """
    LiveText {
        width: 1fr;
        height: auto;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.markdown = ChatMarkdown()
        self.markdown.on_appended = self.redraw
        self.picture: list[Strip] = []
        #: The Markdown the picture shows (the source of the last append drawn).
        self.drawn_source = ""
        self._picture_width = 0
        #: The last picture with what it was drawn at: the next one starts from it.
        self._drawn: StagePicture | None = None

    @property
    def source(self) -> str:
        """The Markdown streamed so far."""
        return self.markdown.source

    async def stage(self) -> None:
        """Mount the segment's Markdown on the stage (before it is written to)."""
        await LiveStage.of(self.app).mount(self.markdown)

    def redraw(self) -> None:
        """Take a new picture of the segment (after a write, or at a new width)."""
        width = self.size.width
        if not width and isinstance(self.parent, Widget):
            width = self.parent.size.width  # not laid out yet: the width it will get
        stage = self.markdown.parent
        if not width or not isinstance(stage, LiveStage):
            return
        _, background = self.background_colors
        self._drawn = stage.picture(self.markdown, width, background, self.colors[3], self._drawn)
        picture = self._drawn.strips if self._drawn is not None else []
        grew = len(picture) != len(self.picture)
        self.picture = picture
        self.drawn_source = self.markdown.source
        self._picture_width = width
        self.refresh(layout=grew)

    def folded(self) -> FoldedText | None:
        """The segment as it is drawn now, folded (None before a picture at this width)."""
        self.redraw()
        if not self.picture or self._picture_width != self.size.width:
            return None
        return FoldedText(self.source, len(self.picture), self.picture, self.app.theme)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.picture)

    def render_line(self, y: int) -> Strip:
        if y < len(self.picture) and self._picture_width == self.size.width:
            return self.picture[y]
        return Strip.blank(self.size.width, self.rich_style)

    def on_resize(self) -> None:
        if self.size.width != self._picture_width:
            self.redraw()

    def on_unmount(self) -> None:
        self.markdown.on_appended = None
        self._drawn = None
        stage = self.markdown.parent
        if stage is not None:
            self.markdown.remove()
        if isinstance(stage, LiveStage):
            stage.let_go()
