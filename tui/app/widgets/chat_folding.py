"""Finished answer text folded into pictures, and back: what keeps a long conversation cheap
to lay out and repaint (see :class:`TextFolder`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Markdown

from tui.app.textual_compat import layout_pending
from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.folded_text import FoldedText

#: A folded part whose picture is stale (another width or theme) comes back as Markdown when
#: it is within this many view heights of the view.
UNFOLD_VIEWS = 1.0
#: Seconds of pictures one look may take (the nearest parts first; the rest at the next look).
FOLD_BUDGET = 0.02


def laid_out_final(part: Widget) -> bool:
    """True if ``part`` was laid out with the text it holds: nothing in it waits for a layout,
    and the height it was given is the height its blocks take at the width it was given (what
    any later layout at that width gives it too). A picture of it then has its height."""
    size = part.content_size
    if not part.region or not size.width or layout_pending(part):
        return False
    viewport = part.app.size
    return part.get_content_height(Size(size.width, 0), viewport, size.width) == size.height


class TextFolder:
    """Folds the finished text parts of a chat log into pictures (:class:`FoldedText`).

    A segment that closed as Markdown (a streamed one settles as a picture itself, unless it
    was never drawn) folds at the first layout of the screen after it closed that left it
    at its final size (:meth:`segment_closed`, :meth:`laid_out`); a look (:meth:`fold`) folds
    any other finished part (a resumed transcript) and unfolds what is in use or stale. A part
    folds only when :func:`laid_out_final` holds for it: a size that may still change is
    never pictured, whatever the timing of the looks.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._layouts = 0  # layouts of the screen seen so far
        self._closed: dict[Widget, int] = {}  # closed segments → layouts seen when they closed

    @property
    def busy(self) -> bool:
        """True while a look is under way."""
        return self._lock.locked()

    def segment_closed(self, part: Widget) -> None:
        """A streamed segment got its last text: fold it once a layout shows it so."""
        self._closed[part] = self._layouts

    def laid_out(self) -> bool:
        """The screen was laid out: True if a closed segment waits for its fold."""
        self._layouts += 1
        return bool(self._closed)

    async def fold_closed(self, log: VerticalScroll) -> int:
        """Fold the closed segments that were laid out at their final size since they closed
        (the rest wait for the next layout); how many folded."""
        if self._lock.locked():
            return 0  # a look is under way: the next layout comes after its swaps
        async with self._lock:
            ready: list[tuple[ChatMessage, Widget]] = []
            in_use = _parts_in_use(log)
            for part, closed_at in list(self._closed.items()):
                message = part.parent
                if not isinstance(message, ChatMessage) or not message.finished_part(part):
                    del self._closed[part]  # folded by a look, or gone
                elif part in in_use:
                    del self._closed[part]  # a look folds it once it is no longer in use
                elif self._layouts > closed_at and laid_out_final(part):
                    ready.append((message, part))
            swaps = self._pictures(log.region.y, log.region.bottom, ready)
            for _message, part, _picture in swaps:
                del self._closed[part]  # (the rest of ``ready``, over the budget: next layout)
            return await self._swap(log, swaps)

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
        swaps: list[tuple[ChatMessage, Widget, Widget]] = []
        to_fold: list[tuple[ChatMessage, Widget]] = []
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
                    and laid_out_final(part)
                ):
                    to_fold.append((message, part))
        swaps += self._pictures(view.y, view.bottom, to_fold)
        return await self._swap(log, swaps)

    @staticmethod
    def _pictures(
        top: int, bottom: int, parts: Iterable[tuple[ChatMessage, Widget]]
    ) -> list[tuple[ChatMessage, Widget, Widget]]:
        """Pictures of ``parts``, the nearest the view (``top``..``bottom``) first, for at
        most :data:`FOLD_BUDGET` seconds."""

        def distance(item: tuple[ChatMessage, Widget]) -> int:
            region = item[1].region
            return max(top - region.bottom, region.y - bottom, 0)

        swaps: list[tuple[ChatMessage, Widget, Widget]] = []
        began = time.perf_counter()
        for message, part in sorted(parts, key=distance):
            if time.perf_counter() - began > FOLD_BUDGET:
                break
            if isinstance(part, Markdown):
                swaps.append((message, part, FoldedText.of(part)))
        return swaps

    @staticmethod
    async def _swap(log: VerticalScroll, swaps: list[tuple[ChatMessage, Widget, Widget]]) -> int:
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
