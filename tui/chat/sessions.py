"""Session transcripts: ``sessions/<id>.jsonl``, append-only, one JSON object per line.

Line types::

    {"type": "session", "version": 1, "id": ..., "timestamp": ..., "title": ...}
    {"type": "message", "id": ..., "timestamp": ..., "role": "user"|"assistant", "content": ...}
    {"type": "tool_call", "id": <call id>, "message_id": <assistant message>, "tool": ..., "input": {...}}
    {"type": "tool_result", "id": <call id>, "tool": ..., "ok": true, "output": {...}}
    {"type": "compaction", "id": ..., "summary": ..., "dropped_before": <message id>, ...}
    {"type": "model_change", "id": ..., "model": ...}
    {"type": "flush", "phase": "prepared"|"done", "flush_id": ..., "from_id": ..., "to_id": ..., ...}
    {"type": "error", "timestamp": ..., "kind": ..., "message": ...}
    {"type": "injection", "message_id": <user message>, "text": ..., "report": {...}, "results": [...]}

An ``injection`` line records the memory block a turn put into the system prompt, its budget
report and the score breakdown of each memory in it ("why?" reads it, also after a restart).
A later ``session`` line updates the metadata (a rename); nothing is ever rewritten. Messages
may carry ``silent: true`` (the pre-compaction memory-flush turn, not shown and not summarised)
or ``incomplete: true`` (a streamed answer cut short by an error; with ``interrupted: true``
when the user stopped it or quit) or ``truncated: true`` (an
answer cut at ``max_answer_chars``). Deleting a session flushes it first, then moves the file to
``sessions/.trash/``; a session whose messages could not be logged is not deleted (unless
forced, and then it can be restored from the trash).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from ..engine.fileio import append_text, read_own_file
from ..engine.search import SearchResult
from ..engine.workspace import Workspace

SESSION_VERSION = 1
TRASH_DIR = ".trash"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,80}$")
#: Roles whose messages are conversation (summarised by a flush, sent back to the model).
CONVERSATION_ROLES = ("user", "assistant")


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
class Message:
    """A ``message`` line. ``index`` is its 1-based position among the session's messages."""

    id: str
    role: str
    content: str
    timestamp: str
    index: int
    silent: bool = False
    incomplete: bool = False
    #: An incomplete answer the user stopped (or quit during), not one an error cut short.
    interrupted: bool = False
    tool_call_ids: tuple[str, ...] = ()

    @property
    def is_conversation(self) -> bool:
        """A user or assistant message that a flush summarises and a request replays."""
        return self.role in CONVERSATION_ROLES and not self.silent and not self.incomplete

    @property
    def is_loggable(self) -> bool:
        """Conversation with text: what a flush summarises and a session list counts (an
        assistant message that only called tools has none)."""
        return self.is_conversation and bool(self.content.strip())


@dataclass(frozen=True)
class FlushRecord:
    """A ``flush`` line: ``prepared`` carries the summary to apply, ``done`` moves the pointer."""

    phase: str
    flush_id: str
    from_id: str | None
    to_id: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A ``tool_call`` line: the model called ``tool`` from assistant message ``message_id``;
    ``arguments`` as the model sent them, ``input`` as parsed (empty when they were not JSON)."""

    id: str
    message_id: str
    tool: str
    arguments: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` line: what call ``id`` returned."""

    id: str
    tool: str
    ok: bool
    output: dict[str, Any]


@dataclass(frozen=True)
class ErrorRecord:
    """An ``error`` line: a turn that failed (``kind``: timeout, connection, ...)."""

    kind: str
    message: str


@dataclass(frozen=True)
class Compaction:
    """A ``compaction`` line: messages before ``dropped_before`` are now ``summary``."""

    summary: str
    dropped_before: str | None
    dropped_messages: int | None


@dataclass(frozen=True)
class TurnInjection:
    """What one turn injected: the block, the builder's report (``InjectionReport.to_json``)
    and the included search results (recorded without their text)."""

    message_id: str
    user_text: str
    text: str
    report: dict[str, Any]
    results: list[SearchResult]


def injection_record(
    message_id: str, text: str, report: dict[str, Any], results: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``injection`` line of the turn started by user message ``message_id``."""
    return {
        "type": "injection",
        "message_id": message_id,
        "text": text,
        "report": report,
        "results": results,
    }


@dataclass
class Transcript:
    """Everything in one session file, parsed. ``records`` keeps every line in order."""

    session_id: str
    title: str | None = None
    created: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    #: What a reader shows, in file order: messages, tool calls, injections, errors,
    #: compactions (tool results are in :attr:`tool_results`, by call id).
    timeline: list[Message | ToolCall | TurnInjection | ErrorRecord | Compaction] = field(
        default_factory=list
    )
    tool_results: dict[str, ToolResult] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def tool_calls_of(self, message_id: str) -> list[ToolCall]:
        """The tool calls assistant message ``message_id`` made, in order."""
        return list(self._tool_calls_by_message.get(message_id, ()))

    @cached_property
    def _tool_calls_by_message(self) -> dict[str, list[ToolCall]]:
        # Grouped once: a request replays every assistant message's calls.
        grouped: dict[str, list[ToolCall]] = {}
        for item in self.timeline:
            if isinstance(item, ToolCall):
                grouped.setdefault(item.message_id, []).append(item)
        return grouped

    @property
    def flushes(self) -> list[FlushRecord]:
        """Every ``flush`` line, oldest first."""
        return [
            FlushRecord(
                r.get("phase", ""),
                str(r.get("flush_id", "")),
                r.get("from_id"),
                r.get("to_id"),
                r,
            )
            for r in self.records
            if r.get("type") == "flush"
        ]

    @property
    def last_logged_message_id(self) -> str | None:
        """The pointer: the last message a completed flush covered (None: nothing logged yet)."""
        done = [f for f in self.flushes if f.phase == "done" and f.to_id]
        return done[-1].to_id if done else None

    def pending_flush(self) -> FlushRecord | None:
        """A ``prepared`` flush without its ``done`` line (a flush interrupted half-way)."""
        done = {f.flush_id for f in self.flushes if f.phase == "done"}
        for record in reversed(self.flushes):
            if record.phase == "prepared" and record.flush_id not in done:
                return record
        return None

    def messages_after(self, message_id: str | None) -> list[Message]:
        """Messages after ``message_id`` in file order (all of them when it is None or unknown)."""
        if message_id is None:
            return list(self.messages)
        for position, message in enumerate(self.messages):
            if message.id == message_id:
                return self.messages[position + 1 :]
        return list(self.messages)

    def unlogged_messages(self) -> list[Message]:
        """Messages after the pointer (including silent and incomplete ones)."""
        return self.messages_after(self.last_logged_message_id)

    @property
    def unlogged_count(self) -> int:
        """Messages a flush still has to log (conversation with text, after the pointer)."""
        return sum(1 for m in self.unlogged_messages() if m.is_loggable)

    @property
    def model(self) -> str | None:
        """The model of the latest ``model_change`` line."""
        for record in reversed(self.records):
            if record.get("type") == "model_change":
                return record.get("model")
        return None

    @property
    def last_compaction(self) -> Compaction | None:
        """The latest ``compaction`` line."""
        for item in reversed(self.timeline):
            if isinstance(item, Compaction):
                return item
        return None

    @property
    def injections(self) -> list[TurnInjection]:
        """What each turn injected, oldest first (turns from before this was recorded have
        none)."""
        return [item for item in self.timeline if isinstance(item, TurnInjection)]

    @property
    def display_title(self) -> str:
        """The title, else the start of the first user message, else ``New session``."""
        if self.title:
            return self.title
        for message in self.messages:
            if message.role == "user" and message.content.strip():
                first = " ".join(message.content.split())
                return first[:57] + "…" if len(first) > 58 else first
        return "New session"


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
        transcript = _parse(session_id, read_own_file(path))
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
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
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

    def append(self, session_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """Append one line (a ``timestamp`` is added when missing); return the record written."""
        path = self._require(session_id)
        record = {**record}
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
        return _parse(path.name.split(".", 1)[0], read_own_file(path))

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


def _parse(session_id: str, data: bytes) -> Transcript:
    transcript = Transcript(session_id=session_id)
    text = data.decode("utf-8", errors="replace")
    tool_calls: dict[str, list[str]] = {}
    raw_messages: builtins.list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            transcript.warnings.append(f"line {number}: not valid JSON, skipped")
            continue
        if not isinstance(record, dict):
            transcript.warnings.append(f"line {number}: not a JSON object, skipped")
            continue
        transcript.records.append(record)
        kind = record.get("type")
        if kind == "session":
            transcript.created = transcript.created or record.get("timestamp")
            if record.get("title"):
                transcript.title = str(record["title"])
        elif kind == "message" and record.get("id"):
            raw_messages.append(record)
        elif kind == "tool_call" and record.get("message_id"):
            tool_calls.setdefault(str(record["message_id"]), []).append(str(record.get("id")))
    by_id: dict[str, Message] = {}
    #: Each message line's Message (ids may repeat in a hand-edited file).
    by_line: dict[int, Message] = {}
    for index, record in enumerate(raw_messages, start=1):
        message = Message(
            id=str(record["id"]),
            role=str(record.get("role", "")),
            content=str(record.get("content") or ""),
            timestamp=str(record.get("timestamp", "")),
            index=index,
            silent=bool(record.get("silent")),
            incomplete=bool(record.get("incomplete")),
            interrupted=bool(record.get("interrupted")),
            tool_call_ids=tuple(tool_calls.get(str(record["id"]), ())),
        )
        transcript.messages.append(message)
        by_id.setdefault(message.id, message)
        by_line[id(record)] = message
    for record in transcript.records:
        item = by_line.get(id(record)) if record.get("type") == "message" else _typed(record, by_id)
        if isinstance(item, ToolResult):
            transcript.tool_results[item.id] = item
        elif item is not None:
            transcript.timeline.append(item)
    return transcript


def _typed(
    record: dict[str, Any], messages: dict[str, Message]
) -> ToolCall | ToolResult | TurnInjection | ErrorRecord | Compaction | None:
    """The typed form of one line other than a message (None for lines a reader does not
    show); ``messages`` by id give an injection its user's text."""
    kind = record.get("type")
    if kind == "tool_call":
        arguments = record.get("input")
        return ToolCall(
            id=str(record.get("id")),
            message_id=str(record.get("message_id")),
            tool=str(record.get("tool", "")),
            arguments=str(record.get("arguments") or ""),
            input=arguments if isinstance(arguments, dict) else {},
        )
    if kind == "tool_result":
        output = record.get("output")
        return ToolResult(
            id=str(record.get("id")),
            tool=str(record.get("tool", "")),
            ok=bool(record.get("ok")),
            output=output if isinstance(output, dict) else {},
        )
    if kind == "injection":
        message_id = str(record.get("message_id", ""))
        report = record.get("report")
        results = record.get("results")
        user = messages.get(message_id)
        return TurnInjection(
            message_id,
            user.content if user is not None else "",
            str(record.get("text") or ""),
            report if isinstance(report, dict) else {},
            [SearchResult.from_json(r) for r in results if isinstance(r, dict)]
            if isinstance(results, list)
            else [],
        )
    if kind == "error":
        return ErrorRecord(str(record.get("kind", "error")), str(record.get("message", "")))
    if kind == "compaction":
        before = record.get("dropped_before")
        dropped = record.get("dropped_messages")
        return Compaction(
            summary=str(record.get("summary") or ""),
            dropped_before=str(before) if before else None,
            dropped_messages=dropped if isinstance(dropped, int) else None,
        )
    return None
