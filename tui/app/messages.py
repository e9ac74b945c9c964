"""Small dataclass messages of the memory side of the UI.

Data flows one way: a worker asks the engine, then posts one of these to the widget that asked.
Results of a panel's own workers do not bubble (``bubble=False``); the two messages that other
widgets care about, :class:`WorkspaceChanged` and :class:`IndexChanged`, do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from tui.app.panels.daily_tree import DailyLog
    from tui.engine.index import SyncReport
    from tui.engine.inject import Injection
    from tui.engine.search import SearchResponse
    from tui.engine.store import MemoryFileState


# -- shared: posted by one widget or worker, handled by others --


@dataclass
class WorkspaceChanged(Message):
    """The watcher saw memory files change on disk and re-synced them.

    ``paths`` are workspace-relative; ``rescanned`` means a folder changed and the whole
    workspace was re-synced, so any file may have changed. ``error`` is set when the sync failed.
    """

    paths: list[str]
    report: SyncReport | None = None
    rescanned: bool = False
    error: str | None = None


@dataclass
class IndexChanged(Message):
    """Memory files were written by the app and the index already follows them.

    Posted by the MEMORY.md editor after a save; the app may post it after a flush. ``source``
    says who changed what, for the activity log.
    """

    paths: list[str]
    source: str
    report: SyncReport | None = None


# -- results of a panel's own workers --


@dataclass
class InjectionReady(Message, bubble=False):
    """The injection block for ``draft`` (preview ``generation``)."""

    draft: str
    generation: int
    injection: Injection


@dataclass
class SearchReady(Message, bubble=False):
    """Search results for the query of search ``generation``."""

    generation: int
    response: SearchResponse
    model_loaded: bool


@dataclass
class ChunkContextReady(Message, bubble=False):
    """A result's file lines around its chunk (``lines`` start at ``first_line``)."""

    location: str
    first_line: int
    lines: list[str]
    start_line: int
    end_line: int
    error: str | None = None


@dataclass
class DailyLogsLoaded(Message, bubble=False):
    """Every daily log with its entries (see :mod:`tui.app.panels.daily_tree`)."""

    logs: list[DailyLog]

    def can_replace(self, message: Message) -> bool:
        """A fresher listing makes a pending one pointless."""
        return isinstance(message, DailyLogsLoaded)


@dataclass
class MemoryFileRead(Message, bubble=False):
    """MEMORY.md as read from disk; ``reason`` is why it was read (load, disk-change, ...)."""

    state: MemoryFileState
    reason: str


@dataclass
class MemorySaveFinished(Message, bubble=False):
    """The editor's save worker is done: saved (``conflict`` is None) or refused."""

    saved_text: str
    new_hash: str | None
    report: SyncReport | None = None
    conflict: MemoryFileState | None = None


@dataclass
class StatsLoaded(Message, bubble=False):
    """``engine.stats()`` as read by a worker."""

    stats: dict[str, object] = field(default_factory=dict)

    def can_replace(self, message: Message) -> bool:
        """Fresher counts make pending ones pointless."""
        return isinstance(message, StatsLoaded)
