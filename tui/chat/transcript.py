"""The lines of a session transcript, typed: what :class:`~.sessions.SessionStore` writes
and what a reader gets back (:func:`parse_transcript`).

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
    {"type": "supersede", "id": ..., "from_id": <user message>, "reason": "retry"|"edit"}

An ``injection`` line records the memory block a turn put into the system prompt, its budget
report and the score breakdown of each memory in it ("why?" reads it, also after a restart).
Messages may carry ``silent: true`` (the pre-compaction memory-flush turn, not shown and not
summarised) or ``incomplete: true`` (a streamed answer cut short by an error; with
``interrupted: true`` when the user stopped it or quit) or ``truncated: true`` (an answer cut
at ``max_answer_chars``). A ``supersede`` line replaces the conversation from its user message
``from_id`` up to itself (a retry, or an earlier message edited and sent again): those lines
stay in the file, marked :attr:`Message.superseded`, but are no longer shown, replayed to the
model or summarised by a flush; an ``error`` line with ``silent: true`` is one of the silent
memory-flush turn. Every line but ``session`` and ``message`` (which
:class:`~.sessions.SessionStore` writes itself) is written from its typed record's
``to_record()``, and read back into the same type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cached_property
from typing import Any, Protocol

from ..engine.search_results import SearchResult
from .supersede import Superseded, SupersedeReason, superseded_lines

#: Roles whose messages are conversation (summarised by a flush, sent back to the model).
CONVERSATION_ROLES = ("user", "assistant")


class TranscriptLine(Protocol):
    """A typed record that :meth:`~.sessions.SessionStore.append` writes as one line."""

    def to_record(self) -> dict[str, Any]:
        """The line's JSON object."""
        ...


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
    #: Replaced by a later ``supersede`` line (a retry or an edit): kept, no longer conversation.
    superseded: bool = False

    @property
    def is_conversation(self) -> bool:
        """A user or assistant message that a flush summarises and a request replays."""
        return (
            self.role in CONVERSATION_ROLES
            and not self.silent
            and not self.incomplete
            and not self.superseded
        )

    @property
    def is_loggable(self) -> bool:
        """Conversation with text: what a flush summarises and a session list counts (an
        assistant message that only called tools has none)."""
        return self.is_conversation and bool(self.content.strip())


@dataclass(frozen=True)
class FlushRecord:
    """A ``flush`` line as read: ``prepared`` carries the summary to apply (its typed form:
    :meth:`PreparedFlush.from_record` of ``data``), ``done`` moves the pointer."""

    phase: str
    flush_id: str
    from_id: str | None
    to_id: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class PreparedFlush:
    """A ``flush``/``prepared`` line: what a flush will write, fixed before it writes anything,
    so a restart replays exactly this (see :mod:`tui.chat.flush`)."""

    flush_id: str
    from_id: str | None
    to_id: str | None
    trigger: str
    #: Numbers of the first and last message logged (``Message.index``).
    first: int | None
    last: int | None
    count: int
    day: date
    #: ``HH:MM``, shown in the daily log's heading.
    time: str
    title: str
    reason: str
    summary: str
    facts: tuple[str, ...]
    #: False when no model was configured and the summary is an extract.
    summarised: bool = True

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {
            "type": "flush",
            "flush_id": self.flush_id,
            "from_id": self.from_id,
            "to_id": self.to_id,
            "trigger": self.trigger,
            "phase": "prepared",
            "first": self.first,
            "last": self.last,
            "count": self.count,
            "day": self.day.isoformat(),
            "time": self.time,
            "title": self.title,
            "reason": self.reason,
            "summary": self.summary,
            "facts": list(self.facts),
            "summarised": self.summarised,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any], session_id: str) -> PreparedFlush:
        """The prepared flush a line holds (:attr:`FlushRecord.data`); a missing field reads
        as empty, a missing title as the session's id. Raises ValueError on a missing or
        malformed ``day``."""
        first, last = data.get("first"), data.get("last")
        return cls(
            flush_id=str(data["flush_id"]),
            from_id=data.get("from_id"),
            to_id=data.get("to_id"),
            trigger=str(data.get("trigger") or ""),
            first=first if isinstance(first, int) else None,
            last=last if isinstance(last, int) else None,
            count=int(data.get("count") or 0),
            day=date.fromisoformat(str(data["day"])),
            time=str(data.get("time", "")),
            title=str(data.get("title", session_id)),
            reason=str(data.get("reason") or ""),
            summary=str(data.get("summary") or ""),
            facts=tuple(str(fact) for fact in data.get("facts") or []),
            summarised=data.get("summarised") is not False,
        )


@dataclass(frozen=True)
class FlushDone:
    """A ``flush``/``done`` line: the messages up to ``to_id`` are logged (the pointer moves)."""

    flush_id: str
    from_id: str | None
    to_id: str | None
    count: int
    #: Facts added to MEMORY.md (None for a round with no conversation to summarise).
    facts_added: int | None = None
    #: What fired a round with no conversation (it has no ``prepared`` line to say it).
    trigger: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        record: dict[str, Any] = {
            "type": "flush",
            "phase": "done",
            "flush_id": self.flush_id,
            "from_id": self.from_id,
            "to_id": self.to_id,
            "count": self.count,
        }
        if self.trigger is not None:
            record["trigger"] = self.trigger
        if self.facts_added is not None:
            record["facts_added"] = self.facts_added
        return record


@dataclass(frozen=True)
class ToolCall:
    """A ``tool_call`` line: the model called ``tool`` from assistant message ``message_id``;
    ``arguments`` as the model sent them (cut when oversized: ``arguments_chars`` is then
    their full length), ``input`` as parsed (empty when they were not JSON)."""

    id: str
    message_id: str
    tool: str
    arguments: str
    input: dict[str, Any]
    arguments_chars: int | None = None

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {
            "type": "tool_call",
            "id": self.id,
            "message_id": self.message_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "arguments_chars": self.arguments_chars,
            "input": self.input,
        }


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` line: what call ``id`` returned."""

    id: str
    tool: str
    ok: bool
    output: dict[str, Any]

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {
            "type": "tool_result",
            "id": self.id,
            "tool": self.tool,
            "ok": self.ok,
            "output": self.output,
        }


@dataclass(frozen=True)
class ErrorRecord:
    """An ``error`` line: a turn that failed (``kind``: timeout, connection, ...); ``silent``:
    the silent memory-flush turn before a compaction failed (the turn itself went on)."""

    kind: str
    message: str
    silent: bool = False

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        record: dict[str, Any] = {"type": "error", "kind": self.kind, "message": self.message}
        if self.silent:
            record["silent"] = True
        return record


@dataclass(frozen=True)
class ModelChange:
    """A ``model_change`` line: the session's turns from here on go to ``model``."""

    id: str
    model: str | None

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {"type": "model_change", "id": self.id, "model": self.model}


@dataclass(frozen=True)
class Compaction:
    """A ``compaction`` line: messages before ``dropped_before`` are now ``summary``;
    ``tokens_before`` is the request's estimate that set it off."""

    summary: str
    dropped_before: str | None
    dropped_messages: int | None
    id: str = ""
    tokens_before: int | None = None

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {
            "type": "compaction",
            "id": self.id,
            "summary": self.summary,
            "dropped_before": self.dropped_before,
            "dropped_messages": self.dropped_messages,
            "tokens_before": self.tokens_before,
        }


@dataclass(frozen=True)
class TurnInjection:
    """What one turn injected: the block, the builder's report (``InjectionReport.to_json``)
    and the included search results (recorded without their text)."""

    message_id: str
    user_text: str
    text: str
    report: dict[str, Any]
    results: list[SearchResult]

    def to_record(self) -> dict[str, Any]:
        """The ``injection`` line of the turn started by user message ``message_id`` (the
        user's text is its message's; each result's text is in memory, not repeated here)."""
        return {
            "type": "injection",
            "message_id": self.message_id,
            "text": self.text,
            "report": self.report,
            "results": [
                {key: value for key, value in result.to_json().items() if key != "text"}
                for result in self.results
            ],
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
    #: compactions and where earlier lines were superseded (tool results are in
    #: :attr:`tool_results`, by call id). Superseded lines are not in it.
    timeline: list[
        Message | ToolCall | TurnInjection | ErrorRecord | Compaction | Superseded
    ] = field(default_factory=list)
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
                model: str | None = record.get("model")
                return model
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
            if message.role == "user" and message.content.strip() and not message.superseded:
                first = " ".join(message.content.split())
                return first[:57] + "…" if len(first) > 58 else first
        return "New session"


def parse_transcript(session_id: str, data: bytes) -> Transcript:
    """A session file's bytes, parsed; a line that is not a JSON object is skipped with a
    warning (a torn last line after a crash mid-append)."""
    transcript = Transcript(session_id=session_id)
    text = data.decode("utf-8", errors="replace")
    tool_calls: dict[str, list[str]] = {}
    raw_messages: list[dict[str, Any]] = []
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
    replaced, counts = superseded_lines(transcript.records)
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
            superseded=id(record) in replaced,
        )
        transcript.messages.append(message)
        by_id.setdefault(message.id, message)
        by_line[id(record)] = message
    for record in transcript.records:
        item = by_line.get(id(record)) if record.get("type") == "message" else _typed(record, by_id)
        if isinstance(item, ToolResult):
            transcript.tool_results[item.id] = item
        elif item is None or id(record) in replaced:
            continue
        elif isinstance(item, Superseded):
            if id(record) in counts:  # (a line naming no earlier message replaces nothing)
                transcript.timeline.append(replace(item, replaced=counts[id(record)]))
        else:
            transcript.timeline.append(item)
    return transcript


def _typed(
    record: dict[str, Any], messages: dict[str, Message]
) -> ToolCall | ToolResult | TurnInjection | ErrorRecord | Compaction | Superseded | None:
    """The typed form of one line other than a message (None for lines a reader does not
    show); ``messages`` by id give an injection its user's text."""
    kind = record.get("type")
    if kind == "tool_call":
        arguments = record.get("input")
        chars = record.get("arguments_chars")
        return ToolCall(
            id=str(record.get("id")),
            message_id=str(record.get("message_id")),
            tool=str(record.get("tool", "")),
            arguments=str(record.get("arguments") or ""),
            input=arguments if isinstance(arguments, dict) else {},
            arguments_chars=chars if isinstance(chars, int) else None,
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
        return ErrorRecord(
            str(record.get("kind", "error")),
            str(record.get("message", "")),
            silent=record.get("silent") is True,
        )
    if kind == "supersede":
        reason: SupersedeReason = "edit" if record.get("reason") == "edit" else "retry"
        return Superseded(str(record.get("id") or ""), str(record.get("from_id")), reason)
    if kind == "compaction":
        before = record.get("dropped_before")
        dropped = record.get("dropped_messages")
        tokens = record.get("tokens_before")
        return Compaction(
            summary=str(record.get("summary") or ""),
            dropped_before=str(before) if before else None,
            dropped_messages=dropped if isinstance(dropped, int) else None,
            id=str(record.get("id") or ""),
            tokens_before=tokens if isinstance(tokens, int) else None,
        )
    return None
