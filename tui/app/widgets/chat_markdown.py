"""Markdown for the text of chat messages: streamed appends repaint once, and a finished part is
not laid out again each time the message around it grows."""

from __future__ import annotations

import time

from textual.await_complete import AwaitComplete
from textual.geometry import Size
from textual.widgets import Markdown


class ChatMarkdown(Markdown):
    """A :class:`Markdown` text part of a chat message (streamed, finished or resumed).

    * :meth:`append` repaints the screen once, when it is done. With a long answer on screen,
      repainting while ``Markdown.append`` parses, updates the last block and mounts new ones,
      not the model, becomes the bottleneck: measured on a 2,000-token answer streamed at
      200 tokens/s (``tests/bench/ui_speed.py``'s content), plain appends through
      ``Markdown.get_stream`` took 24-27 s to show it, batched ones 12-15 s.
    * Its height does not depend on the height of the message it is in (see
      :meth:`get_content_height`).
    """

    #: Seconds the last append took (parse, update, mount): the writer paces itself on it.
    last_append_seconds: float = 0.0

    def append(self, markdown: str) -> AwaitComplete:
        """Append ``markdown`` (see :meth:`Markdown.append`) as one batched screen update."""
        parent_append = super().append

        async def batched() -> None:
            began = time.perf_counter()
            with self.app.batch_update():
                await parent_append(markdown)
            self.last_append_seconds = time.perf_counter() - began

        return AwaitComplete(batched())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The height of the blocks at ``width``, whatever the height of ``container``.

        Textual arranges a container whose children all have a dynamic height (Markdown
        blocks are ``height: auto``) within its parent's height, so its arrangement cache
        misses whenever the parent's height changes: each write to a streamed answer made
        Textual lay out every finished part of that message again, list items and all. No
        block here is sized in ``fr`` or ``%``, so the parent's height changes nothing.
        """
        return super().get_content_height(Size(container.width, 0), viewport, width)
