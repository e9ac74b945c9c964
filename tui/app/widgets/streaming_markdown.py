"""Markdown that takes streamed appends without repainting the screen in the middle of one."""

from __future__ import annotations

import time

from textual.await_complete import AwaitComplete
from textual.widgets import Markdown


class StreamingMarkdown(Markdown):
    """A :class:`Markdown` whose :meth:`append` repaints the screen once, when it is done.

    With a long answer on screen, repainting while ``Markdown.append`` parses, updates the last
    block and mounts new ones, not the model, becomes the bottleneck: measured on a
    2,000-token answer streamed at 200 tokens/s (``tests/bench/ui_speed.py``'s content), plain
    appends through ``Markdown.get_stream`` took 24-27 s to show it, batched ones 12-15 s.
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
