"""Markdown for the text of chat messages: streamed appends repaint once, a streamed list
mounts only its new items, and a finished part is not laid out again each time the message
around it grows."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from markdown_it import MarkdownIt
from textual.await_complete import AwaitComplete
from textual.containers import Horizontal
from textual.geometry import Size
from textual.layout import DockArrangeResult
from textual.widget import Widget
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

Container = TypeVar("Container", bound=type[Widget])


def height_free(cls: Container) -> Container:
    """Arrange ``cls``'s children once per width, whatever its height: for a container none of
    whose children is sized in ``fr`` or ``%`` of its height (or docked), where its height
    changes nothing.

    Textual arranges a container whose children all have a dynamic height (Markdown blocks
    are ``height: auto``) within its parent's height, and once more at its own laid-out
    height: its arrangement cache missed whenever the parent's height changed (each write to
    a streamed answer laid out every finished part of that message again, list items and
    all), and the streamed segment's blocks were arranged twice per layout (2-5 ms each).
    Here both ask for the arrangement at height 0, made once and then cached.
    """
    content_height, arrange = cls.get_content_height, cls.arrange

    def get_content_height(self: Widget, container: Size, viewport: Size, width: int) -> int:
        return content_height(self, Size(container.width, 0), viewport, width)

    def arranged(self: Widget, size: Size, optimal: bool = False) -> DockArrangeResult:
        return arrange(self, Size(size.width, 0), optimal)

    setattr(cls, "get_content_height", get_content_height)  # noqa: B010 - a method swapped
    setattr(cls, "arrange", arranged)  # noqa: B010
    return cls


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
@height_free
class GrowingBulletList(MarkdownBulletList, GrowingList):
    """A bullet list streamed item by item (see :class:`GrowingList`)."""


@height_free
class GrowingOrderedList(MarkdownOrderedList, GrowingList):
    """An ordered list streamed item by item (see :class:`GrowingList`)."""


@height_free
class ChatMarkdown(Markdown):
    """A :class:`Markdown` text part of a chat message (streamed, finished or resumed).

    * :meth:`append` repaints the screen once, when it is done. With a long answer on screen,
      repainting while ``Markdown.append`` parses, updates the last block and mounts new ones,
      not the model, becomes the bottleneck: measured on a 2,000-token answer streamed at
      200 tokens/s (``tests/bench/ui_speed.py``'s content), plain appends through
      ``Markdown.get_stream`` took 24-27 s to show it, batched ones 12-15 s.
    * Its blocks are arranged once per width, whatever the height of the message it is in
      (see :func:`height_free`).
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
    #: Called when an append is done (the :class:`LiveText` drawing this segment redraws).
    on_appended: Callable[[], None] | None = None

    def append(self, markdown: str) -> AwaitComplete:
        """Append ``markdown`` (see :meth:`Markdown.append`) as one batched screen update."""
        parent_append = super().append

        async def batched() -> None:
            began = time.perf_counter()
            with self.app.batch_update():
                await parent_append(markdown)
            self.last_append_seconds = time.perf_counter() - began
            if self.on_appended is not None:
                self.on_appended()

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
