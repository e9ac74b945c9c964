"""Session transcripts: ``sessions/<id>.jsonl``, append-only, one JSON object per line.

What each line is, and how a file parses, is in :mod:`.transcript` (its names are exported
here too). A later ``session`` line updates the metadata (a rename); nothing is ever
rewritten. Deleting a session flushes it first, then moves the file to ``sessions/.trash/``;
a session whose messages could not be logged is not deleted (unless forced, and then it can
be restored from the trash).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..engine.fileio import append_text, read_own_file
from ..engine.workspace import Workspace, make_own_folder
from .supersede import Superseded, SupersedeReason
from .transcript import (
    CONVERSATION_ROLES,
    Compaction,
    ErrorRecord,
    FlushDone,
    FlushRecord,
    Message,
    ModelChange,
    PreparedFlush,
    ToolCall,
    ToolResult,
    Transcript,
    TranscriptLine,
    TurnInjection,
    parse_transcript,
)

__all__ = [
    # defined here
    "SESSION_VERSION",
    "TRASH_DIR",
    "SessionError",
    "SessionInfo",
    "SessionStore",
    "UnloggedMessagesError",
    "new_id",
    "now_iso",
    # the lines of a transcript, from .transcript
    "CONVERSATION_ROLES",
    "Compaction",
    "ErrorRecord",
    "FlushDone",
    "FlushRecord",
    "Message",
    "ModelChange",
    "PreparedFlush",
    "Superseded",
    "SupersedeReason",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "TranscriptLine",
    "TurnInjection",
    "parse_transcript",
]

SESSION_VERSION = 1
TRASH_DIR = ".trash"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,80}$")


class SessionError(Exception):
    """A session that does not exist or an id that is not valid, worded for the user."""


class UnloggedMessagesError(SessionError):
    """A delete refused because the flush did not log every message (the LLM is down, ...).

    ``outcome`` is what the flush returned; ``count`` the messages still not logged.
    """

    def __init__(self, session_id: str, count: int, outcome: Any = None) -> None:
        self.session_id = session_id
        self.count = count
        self.outcome = outcome
        detail = getattr(outcome, "detail", "") or ""
        super().__init__(
            f"not deleted: {count} message{'s' if count != 1 else ''} of session {session_id} "
            f"are not summarised into memory yet{f' ({detail})' if detail else ''}"
        )


def now_iso() -> str:
    """Local time with offset, seconds precision (what every line's ``timestamp`` holds)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def new_id(prefix: str = "") -> str:
    """A short random id for a line."""
    return prefix + secrets.token_hex(4)


@dataclass(frozen=True)
class SessionInfo:
    """One row of the session list."""

    id: str
    title: str
    created: str | None
    updated: str | None
    message_count: int
    unlogged_count: int
    last_logged_message_id: str | None
    model: str | None
    path: Path


class SessionStore:
    """The ``sessions/`` folder of a workspace. Safe to share between threads and processes:
    every line is appended under the file's lock and fsynced."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = workspace.sessions_dir
        self.trash = self.root / TRASH_DIR
        self._cache: dict[str, tuple[tuple[int, int], Transcript]] = {}
        self._cache_lock = threading.Lock()

    # -- paths --

    def path(self, session_id: str) -> Path:
        """The JSONL file of ``session_id`` (validated: no path tricks)."""
        if not isinstance(session_id, str) or not _ID.match(session_id):
            raise SessionError(f"not a valid session id: {session_id!r}")
        return self.root / f"{session_id}.jsonl"

    def exists(self, session_id: str) -> bool:
        """True when the session has a transcript."""
        return self.path(session_id).is_file()

    def _require(self, session_id: str) -> Path:
        path = self.path(session_id)
        if not path.is_file():
            raise SessionError(f"no session {session_id!r} in {self.root}")
        return path

    # -- listing --

    def ids(self) -> builtins.list[str]:
        """Ids of every session (not in the trash), oldest first by name. A link is no
        session: memdeck never reads or writes a transcript through one."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.stem for p in self.root.glob("*.jsonl") if _ID.match(p.stem) and not p.is_symlink()
        )

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, most recently updated first."""
        infos = [self.info(session_id) for session_id in self.ids()]
        return sorted(infos, key=lambda i: (i.updated or "", i.id), reverse=True)

    def info(self, session_id: str) -> SessionInfo:
        """One session's list row."""
        transcript = self.load(session_id)
        path = self.path(session_id)
        updated = None
        for record in reversed(transcript.records):
            if record.get("timestamp"):
                updated = record["timestamp"]
                break
        conversation = [m for m in transcript.messages if m.is_loggable]
        return SessionInfo(
            id=session_id,
            title=transcript.display_title,
            created=transcript.created,
            updated=updated,
            message_count=len(conversation),
            unlogged_count=transcript.unlogged_count,
            last_logged_message_id=transcript.last_logged_message_id,
            model=transcript.model,
            path=path,
        )

    # -- reading --

    def load(self, session_id: str) -> Transcript:
        """Parse the whole transcript (cached by file size and mtime).

        A torn last line (a crash mid-append) or any unparsable line is skipped with a warning.
        """
        path = self._require(session_id)
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        with self._cache_lock:
            cached = self._cache.get(session_id)
            if cached and cached[0] == key:
                return cached[1]
        transcript = parse_transcript(session_id, read_own_file(path))
        with self._cache_lock:
            self._cache[session_id] = (key, transcript)
        return transcript

    # -- writing --

    def create(self, title: str | None = None, *, session_id: str | None = None) -> SessionInfo:
        """Start a new session file with its ``session`` line."""
        session_id = session_id or datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        path = self.path(session_id)
        if path.exists():
            raise SessionError(f"session {session_id!r} already exists")
        make_own_folder(self.root)
        record: dict[str, Any] = {
            "type": "session",
            "version": SESSION_VERSION,
            "id": session_id,
            "timestamp": now_iso(),
        }
        if title:
            record["title"] = title
        self._append_line(path, record)
        return self.info(session_id)

    def append(
        self, session_id: str, record: dict[str, Any] | TranscriptLine
    ) -> dict[str, Any]:
        """Append one line, a typed record or a dict (a ``timestamp`` is added when missing);
        return the record written."""
        path = self._require(session_id)
        record = record.to_record() if not isinstance(record, dict) else {**record}
        record.setdefault("timestamp", now_iso())
        self._append_line(path, record)
        return record

    def append_message(self, session_id: str, role: str, content: str, **extra: Any) -> str:
        """Append a ``message`` line and return its id."""
        message_id = extra.pop("id", None) or new_id("m")
        self.append(
            session_id,
            {"type": "message", "id": message_id, "role": role, "content": content, **extra},
        )
        return message_id

    def supersede(self, session_id: str, from_id: str, text: str) -> Superseded:
        """Replace the conversation from user message ``from_id`` on (kept in the file, no
        longer conversation), before ``text`` is sent in its place: a ``retry`` when it is
        the same text, else an ``edit``. Raises :class:`SessionError` when ``from_id`` is not
        a user message still in the conversation."""
        message = next((m for m in self.load(session_id).messages if m.id == from_id), None)
        if message is None or message.role != "user" or message.silent or message.superseded:
            raise SessionError(f"message {from_id!r} is no longer in the conversation")
        reason: SupersedeReason = "retry" if message.content == text else "edit"
        line = Superseded(new_id("s"), from_id, reason)
        self.append(session_id, line)
        return line

    def discard_unanswered(self, session_id: str) -> Path | None:
        """Move ``session_id`` to the trash if nothing in it was answered (no assistant
        message: a first question that failed); where it went (:meth:`restore` brings it
        back), or None when it was kept."""
        if any(m.role == "assistant" for m in self.load(session_id).messages):
            return None
        return self.delete(session_id, force=True)[0]

    def rename(self, session_id: str, title: str) -> SessionInfo:
        """Give the session a title (a new ``session`` line; the old ones stay)."""
        title = " ".join(title.split())
        if not title:
            raise SessionError("a session title cannot be empty")
        self.append(
            session_id,
            {"type": "session", "version": SESSION_VERSION, "id": session_id, "title": title},
        )
        return self.info(session_id)

    def delete(
        self,
        session_id: str,
        flush: Callable[[str], Any] | None = None,
        *,
        force: bool = False,
    ) -> tuple[Path, Any]:
        """Flush the session (``flush(session_id)``), then move it to ``sessions/.trash/``.

        When messages are still not logged after the flush (it was skipped or failed), the
        session stays where it is and :class:`UnloggedMessagesError` is raised, unless
        ``force``: then it goes to the trash with its unlogged messages, and :meth:`restore`
        brings it back to be flushed later. The transcript is never destroyed.
        Returns the trash path and whatever ``flush`` returned (the flush outcome).
        """
        path = self._require(session_id)
        outcome = flush(session_id) if flush is not None else None
        if not force:
            unlogged = self.load(session_id).unlogged_count
            if unlogged:
                raise UnloggedMessagesError(session_id, unlogged, outcome)
        self.trash.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = self.trash / path.name
        if target.exists():
            target = self.trash / f"{session_id}.{datetime.now().strftime('%Y%m%d%H%M%S%f')}.jsonl"
        os.replace(path, target)
        with self._cache_lock:
            self._cache.pop(session_id, None)
        return target, outcome

    def trashed(self) -> builtins.list[Path]:
        """Transcripts in the trash."""
        return sorted(self.trash.glob("*.jsonl")) if self.trash.is_dir() else []

    def load_trashed(self, path: Path) -> Transcript:
        """Parse a transcript in the trash (``path`` as :meth:`delete` returned it)."""
        if path.parent != self.trash:
            raise SessionError(f"{path} is not in {self.trash}")
        return parse_transcript(path.name.split(".", 1)[0], read_own_file(path))

    def restore(self, session_id: str) -> SessionInfo:
        """Move a deleted session back from the trash (its latest copy there)."""
        name = self.path(session_id).name
        copies = [
            p for p in self.trashed() if p.name == name or p.name.startswith(f"{session_id}.")
        ]
        if not copies:
            raise SessionError(f"session {session_id!r} is not in the trash")
        source = max(copies, key=lambda p: p.stat().st_mtime_ns)
        target = self.path(session_id)
        if target.exists():
            raise SessionError(f"session {session_id!r} exists; not overwriting it")
        os.replace(source, target)
        return self.info(session_id)

    def _append_line(self, path: Path, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        append_text(path, line + "\n")


