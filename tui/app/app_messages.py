"""Small dataclass messages of the app shell and the chat side.

Workers ask the chat engine, then post one of these; the app or the widget that asked reacts.
The memory panels' own messages are in :mod:`tui.app.messages`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from tui.chat.chat import ChatEngine
    from tui.chat.consolidation import Proposal
    from tui.chat.events import FlushOutcome, TriggerListenerEvent
    from tui.chat.sessions import SessionInfo, Transcript
    from tui.engine.index import SyncReport


# -- start-up --


@dataclass
class EngineOpened(Message):
    """The chat engine is open (after the first frame): the main widgets can be mounted."""

    engine: ChatEngine


# -- sessions --


@dataclass
class SessionsLoaded(Message):
    """The session list as read by the list's worker, most recent first (bubbles: the app
    updates the header title from it)."""

    sessions: list[SessionInfo]


@dataclass
class SessionChosen(Message):
    """The user picked a session in the list (Enter or click)."""

    session_id: str


@dataclass
class SessionRenameRequested(Message):
    """The user asked to rename a session (``r`` in the list)."""

    session_id: str


@dataclass
class SessionDeleteRequested(Message):
    """The user asked to delete a session (``delete`` in the list)."""

    session_id: str


@dataclass
class NewSessionRequested(Message):
    """The user asked for a new session (``n`` in the list)."""


@dataclass
class SessionStarted(Message):
    """A session was created (``ctrl+n``, or the first message sent with none open)."""

    info: SessionInfo
    #: Switch to it (fires the session-switch trigger for the previous one).
    activate: bool = True


@dataclass
class TranscriptLoaded(Message):
    """A session's transcript was read from disk, to be shown in the chat."""

    session_id: str
    transcript: Transcript


@dataclass
class SessionDeleted(Message):
    """A session was flushed and moved to the trash."""

    session_id: str
    trash_path: Path
    outcome: FlushOutcome


@dataclass
class SessionRenamed(Message):
    """A session got a new title."""

    info: SessionInfo


# -- the conversation --


@dataclass
class TurnFinished(Message):
    """A turn ended (answered, failed or stopped). ``memory_changed`` when a tool wrote memory."""

    session_id: str
    user_text: str
    ok: bool
    memory_changed: bool = False


@dataclass
class MemoryToolRan(Message):
    """A tool call of the assistant changed memory files (the index already follows)."""

    name: str


# -- background work --


@dataclass
class TriggerNotice(Message):
    """A trigger fired or its flush finished (posted from the flushing thread)."""

    event: TriggerListenerEvent


@dataclass
class IndexProgress(Message):
    """The index is syncing: ``done`` of ``total`` in ``stage``."""

    stage: str
    done: int
    total: int


@dataclass
class IndexSynced(Message):
    """A sync or reindex finished (``error`` set when it failed)."""

    reason: str
    report: SyncReport | None = None
    error: str | None = None


@dataclass
class IndexStatsRead(Message):
    """``memory.stats()`` as read by a worker (chunk count for the header)."""

    stats: dict[str, object] = field(default_factory=dict)


@dataclass
class ModelLoadFinished(Message):
    """The embedding model finished loading (``error`` set when it failed)."""

    error: str | None = None


@dataclass
class ConsolidationProposed(Message):
    """The model proposed an updated MEMORY.md (to review)."""

    proposal: Proposal


@dataclass
class ConsolidationFinished(Message):
    """A consolidation step ended: ``what`` is ``accepted``, ``rejected``, ``due`` or ``failed``."""

    what: str
    detail: str = ""


@dataclass
class QuitFlushFinished(Message):
    """The quit flush finished; the app may exit."""

    summary: str
