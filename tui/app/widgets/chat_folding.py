"""Finished answer text folded into pictures, and back: what keeps a long conversation cheap
to lay out and repaint (see :class:`TextFolder`)."""

from __future__ import annotations

import asyncio
import time

from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Markdown

from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.folded_text import FoldedText

#: A folded part whose picture is stale (another width or theme) comes back as Markdown when
#: it is within this many view heights of the view.
UNFOLD_VIEWS = 1.0
#: Seconds of pictures one look may take (the nearest parts first; the rest at the next look).
FOLD_BUDGET = 0.02


class TextFolder:
    """Folds the finished text parts of a chat log into pictures (:class:`FoldedText`), one
    look at a time."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._settled: dict[Widget, Size] = {}  # finished parts and their size at the last look

    @property
    def busy(self) -> bool:
        """True while a look is under way."""
        return self._lock.locked()

    async def fold(self, log: VerticalScroll, messages: list[ChatMessage]) -> int:
        """Fold finished answer text of ``messages`` into pictures, the parts nearest the
        view of ``log`` first, for at most :data:`FOLD_BUDGET` seconds; unfold a folded part
        under the mouse, or one near the view (:data:`UNFOLD_VIEWS`) whose picture is stale.
        How many parts changed."""
        async with self._lock:
            return await self._fold(log, messages)

    async def _fold(self, log: VerticalScroll, messages: list[ChatMessage]) -> int:
        view = log.region
        if not view:
            return 0
        near_above = view.y - UNFOLD_VIEWS * view.height
        near_below = view.bottom + UNFOLD_VIEWS * view.height
        in_use = _parts_in_use(log)
        settled: dict[Widget, Size] = {}
        swaps: list[tuple[ChatMessage, Widget, Widget]] = []
        to_fold: list[tuple[int, ChatMessage, Markdown]] = []
        for message in messages:
            for part in message.text_parts():
                region = part.region
                if not region:
                    continue
                if isinstance(part, FoldedText):
                    near = region.bottom > near_above and region.y < near_below
                    if part in in_use or (part.stale and near):
                        swaps.append((message, part, part.unfold()))
                elif (
                    isinstance(part, Markdown)
                    and message.finished_part(part)
                    and part not in in_use
                ):
                    # a part is pictured once its size held since the last look: a part
                    # just finished may not be laid out again yet
                    size, settled[part] = self._settled.get(part), part.outer_size
                    if size == part.outer_size:
                        distance = max(view.y - region.bottom, region.y - view.bottom, 0)
                        to_fold.append((distance, message, part))
        self._settled = settled
        began = time.perf_counter()
        for _distance, message, part in sorted(to_fold, key=lambda item: item[0]):
            if time.perf_counter() - began > FOLD_BUDGET:
                break
            swaps.append((message, part, FoldedText.of(part)))
        if swaps:
            with log.app.batch_update():
                for message, old, new in swaps:
                    await message.swap_part(old, new)
        return len(swaps)


def _parts_in_use(log: Widget) -> set[Widget]:
    """The widgets (and their ancestors) under the mouse, focused or holding a selection:
    a part among them stays (or comes back) unfolded."""
    screen = log.screen
    used = [log.app.mouse_over, screen.focused, *getattr(screen, "selections", {})]
    return {node for widget in used if widget is not None for node in widget.ancestors_with_self}
