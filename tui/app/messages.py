"""The messages several widgets share (what the workbench published, memory files changed,
open a memory's entry), the guard every handler of a worker's result wears
(:func:`while_attached`), and what the app's nodes do with a worker that failed
(:func:`report_worker_error`).

Every other message is nested on the widget or screen that posts it (``SessionList.Chosen``,
``ChatPane.TurnFinished``, ``DailyTree.Loaded``, ...), as Textual's guide suggests.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from textual.dom import DOMNode
from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

#: ``memory/2026-11-20.md#L3-4``: how search results and injection reports name an entry.
LOCATION = re.compile(r"(?P<path>.+)#L(?P<line>\d+)(?:-\d+)?")

if TYPE_CHECKING:
    from tui.chat.events import WorkbenchEvent
    from tui.engine.engine import MemoryChange
    from tui.engine.index import SyncReport

_Node = TypeVar("_Node", bound=DOMNode)
_Params = ParamSpec("_Params")


def while_attached(
    handler: Callable[Concatenate[_Node, _Params], object],
) -> Callable[Concatenate[_Node, _Params], None]:
    """Run a worker-result handler only while its widget is attached and the app is not exiting.

    A thread worker's answer can arrive after ``App.exit``: the widget's children are being
    removed by then (or were never mounted, if the exit came during its mount), so rendering
    the answer would query widgets that are gone (``NoMatches``). Textual's ``is_attached`` is
    False from the moment the app starts exiting.
    """

    @wraps(handler)
    def guarded(node: _Node, /, *args: _Params.args, **kwargs: _Params.kwargs) -> None:
        if node.is_attached:
            handler(node, *args, **kwargs)

    return guarded


def report_worker_error(node: MessagePump, event: Worker.StateChanged) -> None:
    """Say, in a toast, why a worker of ``node`` failed (workers run with
    ``exit_on_error=False``: a failure is shown, the app goes on)."""
    if event.state == WorkerState.ERROR and event.worker.node is node:
        node.app.notify(f"{event.worker.name}: {event.worker.error}", severity="error")


@dataclass
class WorkbenchMessage(Message, bubble=False):
    """Something the workbench published (:data:`~tui.chat.events.WorkbenchEvent`): the one
    way the application core's news reaches the UI. The main screen's one listener posts it to
    the screen, from whatever thread the event happened on; the screen hands turn events on to
    the chat pane in a message of this same type (it does not bubble back)."""

    event: WorkbenchEvent


@dataclass
class MemoryChanged(Message):
    """Memory files changed and the index already follows them: every memory panel refreshes.

    :class:`~tui.app.panels.MemoryPanels` posts one to itself for each
    :class:`~tui.engine.engine.MemoryChange` the engine publishes (:meth:`of`): the editor's
    saves, the model's tool calls, flushes, consolidations and outside edits the watcher found
    all arrive this one way. The watcher posts one with ``error`` set when its sync failed.

    ``paths`` are workspace-relative; empty means any file may have changed. ``source`` says who
    changed them, for the activity log (empty: already logged). ``report`` is what re-indexing
    did; ``error`` is set when it failed (the panels are not refreshed then).
    """

    paths: list[str]
    source: str = ""
    report: SyncReport | None = None
    error: str | None = None

    @classmethod
    def of(cls, change: MemoryChange) -> MemoryChanged:
        """The message for a change the engine published."""
        return cls(list(change.paths), change.origin, change.report)


@dataclass
class OpenEntry(Message):
    """Show the entry at ``path`` (workspace-relative) line ``line``: MEMORY.md in the editor,
    a daily log in the Daily view (posted by a search result or an injected memory)."""

    path: str
    line: int

    @classmethod
    def at(cls, location: str) -> OpenEntry | None:
        """The entry a ``path#Lx-y`` location names (None: not a location)."""
        match = LOCATION.fullmatch(location)
        return cls(match["path"], int(match["line"])) if match else None


@dataclass
class OpenSession(Message):
    """Open session ``session_id`` in the chat: a memory's origin (the chat or flush that
    wrote it) was chosen. The desk switches to it."""

    session_id: str
