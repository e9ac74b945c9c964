"""The Daily tab's tree of months, logs and entries, whose labels fit its width."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

NodeData = TypeVar("NodeData")

#: What separates a label's text from its tail, the part that stays in view (an entry's line
#: number: ``Daily Summary  L3``).
TAIL_GAP = "  "


class DailyLogTree(Tree[NodeData]):
    """A tree whose labels never run past its right edge: a label too long for the width left
    beside its guides is cut with "…", before its tail (what follows its last
    :data:`TAIL_GAP`, an entry's ``L12``), which stays in view.

    A Tree crops its lines at its width with no mark, and an entry's line number, at the end
    of its label, was the first thing lost. The tree lays its lines out again when resized,
    so the labels follow the width.

    Many nodes are added with one refresh (:meth:`adding`): a log's few hundred entries, each
    refreshing the tree as it came, took 11-19 ms of the event loop's turn.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._adding = 0
        self._changed_while_adding = False

    @contextmanager
    def adding(self) -> Iterator[None]:
        """Add, expand and clear nodes inside this block: the tree is laid out again once, at
        its end (lines read inside it are the ones before the block)."""
        self._adding += 1
        try:
            yield
        finally:
            self._adding -= 1
            if not self._adding and self._changed_while_adding:
                self._changed_while_adding = False
                self._invalidate()

    def _invalidate(self) -> None:
        # Textual's: every node added, expanded or removed clears the lines and refreshes.
        if self._adding:
            self._changed_while_adding = True
        else:
            super()._invalidate()

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        cut = self._cut(node, text.cell_len, text.plain)
        if cut is None:
            return text
        room, kept = cut
        head = text[: len(text.plain) - kept]
        head.truncate(room - kept, overflow="ellipsis")
        return Text.assemble(head, text[len(text.plain) - kept :]) if kept else head

    def get_label_width(self, node: TreeNode[NodeData]) -> int:
        """The width of :meth:`render_label`'s text, without making it (the tree measures every
        line's at each layout: half of laying out a long log's entries)."""
        icon = ""
        if node.allow_expand:
            icon = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
        label = node.label
        plain = icon + (label.plain if isinstance(label, Text) else label)
        width = cell_len(plain)
        cut = self._cut(node, width, plain)
        return width if cut is None else cut[0]  # cut: at most (a wide character may leave a cell)

    def _cut(self, node: TreeNode[NodeData], width: int, plain: str) -> tuple[int, int] | None:
        """``(cells left for the label, characters of its tail kept)`` when ``node``'s label,
        ``width`` cells showing ``plain``, is cut to fit beside its guides; None when it is
        drawn whole. (The room from the tree's size, not its region: looking the region up for
        each label was most of laying the tree out.)"""
        room = self.outer_size.width - self.gutter.width - self._guide_width(node)
        if room <= 0 or width <= room:
            return None
        kept = _tail_length(plain)
        if room - kept < 2:  # not even a character and the "…": the tree crops as it does
            return None
        return room, kept

    def _guide_width(self, node: TreeNode[NodeData]) -> int:
        """Cells the guides take in front of ``node``'s label (one step per level below the
        first shown)."""
        depth = 0 if self.show_root else -1
        parent = node.parent
        while parent is not None:
            depth += 1
            parent = parent.parent
        return max(0, depth) * self.guide_depth


def _tail_length(plain: str) -> int:
    """Characters at the end of a label that stay in view when it is cut: its last
    :data:`TAIL_GAP` and what follows (none if the tail holds another gap, or no gap)."""
    _head, gap, tail = plain.rpartition(TAIL_GAP)
    return len(gap) + len(tail) if gap and TAIL_GAP not in tail else 0
