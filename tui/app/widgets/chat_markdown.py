"""Markdown for the text of chat messages: streamed appends repaint once, a streamed list
mounts only its new items, and a finished part is not laid out again each time the message
around it grows."""

from __future__ import annotations

import time

from markdown_it import MarkdownIt
from textual.await_complete import AwaitComplete
from textual.containers import Horizontal
from textual.geometry import Size
from textual.layout import DockArrangeResult
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from tui.app.textual_compat import (
    LIST_ITEMS,
    MarkdownBulletList,
    MarkdownOrderedList,
    block_kind,
    child_blocks,
    copy_block_context,
    list_bullet,
)
from tui.app.widgets.chat_fence import ChatFence


class GrowingList(MarkdownBlock):
    """A Markdown list that, streamed, mounts only the items that changed.

    ``Markdown.append`` parses the last block again with the new text and hands it to the
    block on screen; a Textual list then removes itself and mounts the new one, every item
    again: streaming a long list rebuilt it on every write. Items before the last one cannot
    change when text is appended, so only the last item is replaced and new ones mounted. An
    ordered list whose numbers get wider (9 → 10) is rebuilt, as is anything unexpected.
    """

    async def _update_from_block(self, block: MarkdownBlock) -> None:
        rows = list(self.query_children(Horizontal))
        items = [item for item in child_blocks(block) if isinstance(item, LIST_ITEMS)]
        if (
            type(block) is not type(self)
            or not rows
            or len(items) < len(rows)
            or (
                isinstance(block, MarkdownOrderedList)
                and number_width(block, len(items)) != number_width(block, len(rows))
            )
        ):
            await super()._update_from_block(block)
            return
        copy_block_context(self, block)
        new_rows = list(block.compose())[len(rows) - 1 :]
        with self.app.batch_update():
            await rows[-1].remove()
            await self.mount_all(new_rows)


def number_width(block: MarkdownBlock, count: int) -> int:
    """How wide the numbers of an ordered list of ``count`` items starting like ``block`` are."""
    bullet = list_bullet(child_blocks(block)[0])
    start = int(bullet) if bullet.isdigit() else 1
    return len(str(start + count - 1))


# Textual's own list class comes first: Textual inherits DEFAULT_CSS along first bases only.
class GrowingBulletList(MarkdownBulletList, GrowingList):
    """A bullet list streamed item by item (see :class:`GrowingList`)."""


class GrowingOrderedList(MarkdownOrderedList, GrowingList):
    """An ordered list streamed item by item (see :class:`GrowingList`)."""


class ChatMarkdown(Markdown):
    """A :class:`Markdown` text part of a chat message (streamed, finished or resumed).

    * :meth:`append` repaints the screen once, when it is done. With a long answer on screen,
      repainting while ``Markdown.append`` parses, updates the last block and mounts new ones,
      not the model, becomes the bottleneck: measured on a 2,000-token answer streamed at
      200 tokens/s (``tests/bench/ui_speed.py``'s content), plain appends through
      ``Markdown.get_stream`` took 24-27 s to show it, batched ones 12-15 s.
    * Its height does not depend on the height of the message it is in (see
      :meth:`get_content_height`).
    * A streamed list mounts only its new items (:class:`GrowingList`).
    * A code block without a language is plain text, not a guess (:class:`ChatFence`).
    """

    BLOCKS = {
        **Markdown.BLOCKS,
        "bullet_list_open": GrowingBulletList,
        "ordered_list_open": GrowingOrderedList,
        "fence": ChatFence,
        "code_block": ChatFence,
    }

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

    def shows(self, markdown: str) -> bool:
        """True if the blocks on screen are the blocks ``markdown`` parses into (their kind
        and source lines): a streamed segment that does needs no final render."""
        if self.source != markdown:
            return False
        tokens = MarkdownIt("gfm-like").parse(markdown)
        wanted = [
            (token.type, tuple(token.map))
            for token in tokens
            if token.level == 0 and token.nesting >= 0 and token.map is not None
        ]
        shown = [
            (block_kind(block), tuple(block.source_range))
            for block in self.children
            if isinstance(block, MarkdownBlock) and block_kind(block) is not None
        ]
        return shown == wanted

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The height of the blocks at ``width``, whatever the height of ``container``.

        Textual arranges a container whose children all have a dynamic height (Markdown
        blocks are ``height: auto``) within its parent's height, so its arrangement cache
        misses whenever the parent's height changes: each write to a streamed answer made
        Textual lay out every finished part of that message again, list items and all. No
        block here is sized in ``fr`` or ``%``, so the parent's height changes nothing.
        """
        return super().get_content_height(Size(container.width, 0), viewport, width)

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """The blocks' arrangement at ``size``'s width: the one :meth:`get_content_height`
        made, from the cache (height plays no part, see there). Textual asked for it twice
        per layout, at height 0 and at the laid-out height: the streamed segment's blocks,
        arranged again after each write, were arranged twice (2-5 ms each)."""
        return super().arrange(Size(size.width, 0), optimal)
