"""The scrolled list of chat messages."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.strip import Strip

from tui.app.textual_compat import alike_lines


class ChatLog(VerticalScroll):
    """The chat pane's messages, scrolled; it follows the output while anchored.

    Its own lines (its background under the messages) are all alike: drawn once when its size
    changes, which it does at every streamed line (see :func:`alike_lines`).
    """

    def render_lines(self, crop: Region) -> list[Strip]:
        return alike_lines(self, crop)
