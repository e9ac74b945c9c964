"""The Daily tab's tree of months, logs and entries, whose labels fit its width."""

from __future__ import annotations

from typing import TypeVar

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
    """

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        available = self.scrollable_content_region.width - self._guide_width(node)
        if available <= 0 or text.cell_len <= available:
            return text
        _head, gap, tail = text.plain.rpartition(TAIL_GAP)
        kept = len(gap) + len(tail) if gap and TAIL_GAP not in tail else 0
        head_room = available - kept
        if head_room < 2:  # not even a character and the "…": the tree crops as it does
            return text
        head = text[: len(text.plain) - kept]
        head.truncate(head_room, overflow="ellipsis")
        return Text.assemble(head, text[len(text.plain) - kept :]) if kept else head

    def _guide_width(self, node: TreeNode[NodeData]) -> int:
        """Cells the guides take in front of ``node``'s label (one step per level below the
        first shown)."""
        depth = 0 if self.show_root else -1
        parent = node.parent
        while parent is not None:
            depth += 1
            parent = parent.parent
        return max(0, depth) * self.guide_depth
