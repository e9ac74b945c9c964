"""The one message several widgets share: memory files changed.

Every other message is nested on the widget or screen that posts it (``SessionList.Chosen``,
``ChatPane.TurnFinished``, ``DailyTree.Loaded``, ...), as Textual's guide suggests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from tui.engine.index import SyncReport


@dataclass
class MemoryChanged(Message):
    """Memory files changed and the index already follows them: every memory panel refreshes.

    Posted by whoever saw the change: the MEMORY.md editor after a save, the chat pane after a
    tool call wrote memory, the main screen after a flush, a consolidation or an index sync,
    and the workspace watcher after an outside edit. :class:`~tui.app.panels.MemoryPanels`
    consumes it (the main screen hands it the ones posted outside the panels).

    ``paths`` are workspace-relative; empty means any file may have changed. ``source`` says who
    changed them, for the activity log (empty: already logged). ``report`` is what re-indexing
    did; ``error`` is set when it failed (the panels are not refreshed then).
    """

    paths: list[str]
    source: str = ""
    report: SyncReport | None = None
    error: str | None = None
