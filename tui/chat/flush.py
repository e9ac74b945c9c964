"""Daily-log flush: new messages of a session, summarised
into ``## Daily Summary`` and ``## Long-term Facts``, logged exactly once.

How exactly-once holds (a journal in the session's own append-only JSONL):

1. Under the session's flush lock (a thread lock in this process and a file lock across
   processes), an interrupted flush is finished first (step 4 onwards).
2. The messages after the pointer (``last_logged_message_id``, the ``to_id`` of the last
   ``flush``/``done`` line) are summarised by the summary model. Nothing is written before
   the answer, so a crash here only repeats the request.
3. A ``flush``/``prepared`` line records the flush id, the message range, the day and the
   parsed summary and facts. From here on the outcome is fixed: a restart replays exactly
   this, never asks the model again.
4. The summary is appended to the daily log under a heading naming the session and the range,
   carrying ``<!-- mem src=auto flush=<id> -->``; the append is skipped when a heading with
   that id is already there.
5. The facts go to MEMORY.md (``conf=medium src=auto flush=<id>``) in one atomic edit that is a
   no-op when an entry with that tag exists.
6. Both files are indexed.
7. A ``flush``/``done`` line moves the pointer.

A crash between any two steps leaves a ``prepared`` line without ``done``; the next flush of
that session (any trigger, any process) finishes it without duplicating step 4 or 5, and no
message is skipped because the pointer only moves in step 7. ``MEMDECK_CRASH_AT=<point>``
kills the process with SIGKILL at one of :data:`CRASH_POINTS` (inert otherwise) so tests can
prove it.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import threading
from collections.abc import Callable, Sequence
from datetime import date, datetime

from filelock import Timeout

from ..engine.engine import FLUSH, MemoryEngine
from ..engine.fileio import ConcurrentEditError, lock_for
from ..engine.history_records import Attribution
from ..engine.markdown import is_heading, parse_heading, strip_bullet
from ..engine.metadata import EntryMeta, format_meta
from ..engine.store import (
    EntryBatch,
    clean_written_text,
    has_tag,
    normalize_entry_text,
    parse_entries,
    without_nul,
)
from ..engine.workspace import MEMORY_FILE, WorkspaceError
from .client import LLMClient, LLMError
from .events import FlushOutcome, TriggerName
from .sessions import FlushDone, Message, PreparedFlush, SessionError, SessionStore
from .tools import split_statement

CRASH_ENV = "MEMDECK_CRASH_AT"
#: Named points where ``MEMDECK_CRASH_AT`` kills the process (fault injection for tests).
CRASH_POINTS = (
    "before_llm_answer",
    "after_prepare",
    "after_daily_append",
    "after_memory_write",
    "before_pointer",
)
#: Messages summarised per flush at most; a longer backlog is flushed in several rounds.
MAX_MESSAGES_PER_FLUSH = 200
#: Characters of one message given to the summary model.
MAX_MESSAGE_CHARS = 4000

SUMMARY_SYSTEM_PROMPT = """You are a memory extraction assistant. Your job is to summarize \
conversations and extract important long-term facts. Be concise and factual. Format your \
response exactly as requested with the two sections ## Daily Summary and ## Long-term Facts."""

SUMMARY_INSTRUCTIONS = """Summarize the following conversation. Provide two sections:

## Daily Summary
A concise summary of key topics discussed, decisions made, tasks completed,
and any notable information. Use bullet points.

## Long-term Facts
Extract any stable facts, user preferences, or important knowledge that should
be remembered permanently, one bullet each, each a self-contained statement. If none, write "None".

---
Conversation:
"""

_DAILY_RE = re.compile(
    r"##\s*Daily Summary\s*\n(.*?)(?=^##\s*Long-term Facts|\Z)", re.S | re.I | re.M
)
_FACTS_RE = re.compile(r"^##\s*Long-term Facts\s*\n(.*)\Z", re.S | re.I | re.M)

_process_locks: dict[tuple[str, str], threading.Lock] = {}
_process_locks_guard = threading.Lock()


def crash_point(name: str) -> None:
    """Fault injection: SIGKILL this process if ``MEMDECK_CRASH_AT`` names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _demoted(line: str) -> str:
    """A summary line, a heading made level 3 so it stays inside its daily-log entry."""
    heading = parse_heading(line)
    return f"### {heading[1]}".rstrip() if heading is not None else line.rstrip()


def parse_summary(text: str) -> tuple[str, list[str]]:
    """Split a summary answer into the daily summary and a list of long-term facts.

    Without the section headings the whole answer is the summary; "None" means no facts.
    Headings inside the summary are demoted so they cannot break the daily log's structure;
    the answer is model text, cleaned like every written one (see
    :func:`~tui.engine.store.clean_written_text`).
    """
    text = clean_written_text(text).text.strip()
    daily_match = _DAILY_RE.search(text)
    facts_match = _FACTS_RE.search(text)
    if daily_match:
        summary = daily_match.group(1)
    elif facts_match:
        summary = text[: facts_match.start()]
    else:
        summary = text
    summary_lines = [_demoted(line) for line in summary.strip().splitlines()]
    facts: list[str] = []
    if facts_match:
        for line in facts_match.group(1).splitlines():
            fact = strip_bullet(line).strip()
            if not fact or is_heading(line) or fact.strip(".").lower() in ("none", "n/a"):
                continue
            facts.append(fact)
    return "\n".join(summary_lines).strip(), facts


def build_summary_request(title: str, messages: Sequence[Message]) -> list[dict[str, str]]:
    """The chat messages sent to the summary model."""
    lines = []
    for message in messages:
        role = "User" if message.role == "user" else "Assistant"
        content = message.content.strip()
        if len(content) > MAX_MESSAGE_CHARS:
            content = content[:MAX_MESSAGE_CHARS] + " […]"
        lines.append(f"{role}: {content}")
    prompt = f"{SUMMARY_INSTRUCTIONS}(session: {title})\n\n" + "\n\n".join(lines)
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]


#: Characters of each message an extractive record keeps (flushes without a model).
EXTRACT_CHARS = 300


def extractive_summary(messages: Sequence[Message]) -> str:
    """The conversation itself, trimmed, for the daily log when no model can summarise it:
    one bullet per message (``- You: …`` / ``- Assistant: …``), each cut at
    :data:`EXTRACT_CHARS`."""
    lines = []
    for message in messages:
        role = "You" if message.role == "user" else "Assistant"
        text = " ".join(message.content.split())
        if len(text) > EXTRACT_CHARS:
            text = text[: EXTRACT_CHARS - 1].rstrip() + "…"
        lines.append(f"- {role}: {text}")
    return "\n".join(lines)


def _message_day(message: Message) -> date:
    try:
        return datetime.fromisoformat(message.timestamp).astimezone().date()
    except ValueError:
        return date.today()


def _clean_title(title: str) -> str:
    title = clean_written_text(title).text
    return re.sub(r"[<>\"#`]", "", " ".join(title.split()))[:80] or "untitled"


class DailyLogFlusher:
    """Summarises a session's new messages into the daily log and MEMORY.md, exactly once.

    Blocking (a network request and file writes): call it from a thread, the CLI, or through
    :class:`tui.chat.triggers.TriggerManager`. Safe to call from many threads and processes.
    """

    def __init__(
        self,
        memory: MemoryEngine,
        sessions: SessionStore,
        llm: LLMClient,
        *,
        max_messages: int = MAX_MESSAGES_PER_FLUSH,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memory = memory
        self.sessions = sessions
        self.llm = llm
        self.max_messages = max_messages
        self.clock = clock or (lambda: datetime.now().astimezone())

    # -- locking --

    def _thread_lock(self, session_id: str) -> threading.Lock:
        key = (str(self.memory.workspace.root), session_id)
        with _process_locks_guard:
            return _process_locks.setdefault(key, threading.Lock())

    def _lock_timeout(self) -> float:
        settings = self.llm.settings
        return settings.request_timeout * (settings.max_retries + 1) + 30.0

    # -- public --

    def flush_session(
        self, session_id: str, *, trigger: TriggerName = "manual", reason: str = ""
    ) -> FlushOutcome:
        """Log the session's new messages (all of them, in rounds of ``max_messages``).

        Without a model configured the messages are logged as an extract (not summarised).
        Returns ``flushed``, ``nothing_new``, ``skipped`` (endpoint down: the pointer did not
        move, the next trigger retries) or ``failed`` (a memory file refused by the path
        guard or unwritable: the pointer did not move either). Never raises for those cases.
        """
        try:
            self.sessions.path(session_id)
        except SessionError as exc:
            return FlushOutcome("failed", session_id, detail=str(exc))
        if not self.sessions.exists(session_id):
            return FlushOutcome("skipped", session_id, detail=f"no session {session_id!r}")
        file_lock = lock_for(self.sessions.root / f"{session_id}.flush")
        with self._thread_lock(session_id):
            try:
                with file_lock.acquire(timeout=self._lock_timeout()):
                    return self._flush_locked(session_id, trigger, reason)
            except Timeout:
                return FlushOutcome(
                    "failed", session_id, detail="another flush of this session is still running"
                )
            except (WorkspaceError, ConcurrentEditError, OSError) as exc:
                return FlushOutcome("failed", session_id, detail=str(exc))

    def sessions_with_unlogged(self) -> list[str]:
        """Ids of sessions with conversation not yet logged, or a flush left half-way."""
        found = []
        for session_id in self.sessions.ids():
            transcript = self.sessions.load(session_id)
            if transcript.pending_flush() is not None or any(
                m.is_loggable for m in transcript.unlogged_messages()
            ):
                found.append(session_id)
        return found

    # -- the flush --

    def _flush_locked(self, session_id: str, trigger: str, reason: str) -> FlushOutcome:
        total: FlushOutcome | None = None
        pending = self.sessions.load(session_id).pending_flush()
        if pending is not None:
            total = self._apply(
                session_id, PreparedFlush.from_record(pending.data, session_id), recovered=True
            )
        while True:
            outcome = self._flush_round(session_id, trigger, reason)
            if outcome.status != "flushed":
                if total is not None and outcome.status == "nothing_new":
                    return total
                if total is not None:  # logged some, then stopped: report both
                    return _merge(total, outcome, status=outcome.status)
                return outcome
            total = outcome if total is None else _merge(total, outcome)

    def _flush_round(self, session_id: str, trigger: str, reason: str) -> FlushOutcome:
        transcript = self.sessions.load(session_id)
        new = transcript.unlogged_messages()
        if not new:
            return FlushOutcome("nothing_new", session_id, detail="no new messages")
        batch = new[: self.max_messages]
        conversation = [m for m in batch if m.is_loggable]
        flush_id = secrets.token_hex(4)
        if not conversation:
            # Only silent, incomplete or tool-only messages: nothing to summarise, the pointer moves on.
            self.sessions.append(
                session_id, FlushDone(flush_id, batch[0].id, batch[-1].id, 0, trigger=trigger)
            )
            return FlushOutcome("nothing_new", session_id, detail="no new conversation")
        summarised = not self.llm.problem
        facts: list[str] = []
        if not summarised:
            # No model configured: the conversation is still logged, as an extract (marked as
            # not summarised; no long-term facts are drawn from it).
            summary = extractive_summary(conversation)
        else:
            crash_point("before_llm_answer")
            try:
                answer = self.llm.complete(
                    build_summary_request(transcript.display_title, conversation),
                    model=self.llm.summary_model,
                    purpose="flush",
                    session=session_id,
                )
            except LLMError as exc:
                return FlushOutcome(
                    "skipped", session_id, len(conversation), detail=f"{exc.kind}: {exc.message}"
                )
            summary, facts = parse_summary(answer)
            if not summary and not facts:
                return FlushOutcome(
                    "skipped",
                    session_id,
                    len(conversation),
                    detail="the model returned no summary",
                )
        prepared = PreparedFlush(
            flush_id=flush_id,
            from_id=batch[0].id,
            to_id=batch[-1].id,
            trigger=trigger,
            first=conversation[0].index,
            last=conversation[-1].index,
            count=len(conversation),
            day=_message_day(conversation[-1]),
            time=self.clock().strftime("%H:%M"),
            title=_clean_title(transcript.display_title),
            reason=reason,
            summary=summary,
            facts=tuple(facts),
            summarised=summarised,
        )
        self.sessions.append(session_id, prepared)
        crash_point("after_prepare")
        return self._apply(session_id, prepared, recovered=False)

    def _apply(self, session_id: str, record: PreparedFlush, *, recovered: bool) -> FlushOutcome:
        """Steps 4-7 for a ``prepared`` record; each step is skipped if it already happened.
        What they write (the daily log, MEMORY.md) is published as one memory change."""
        writer = Attribution(
            "flush",
            session=session_id,
            trigger=record.trigger or None,
            summary=f"flush ({record.trigger or 'manual'}): {record.title}",
        )
        with self.memory.attributed(writer), self.memory.one_change(FLUSH):
            return self._write(session_id, record, recovered=recovered)

    def _write(self, session_id: str, record: PreparedFlush, *, recovered: bool) -> FlushOutcome:
        flush_id = record.flush_id
        day = record.day
        store = self.memory.store
        daily_path = self.memory.workspace.daily_log(day)
        daily_rel = self.memory.workspace.relative(daily_path)
        existing = store.read_file(daily_rel)
        summary = record.summary
        block = without_nul(_daily_block(session_id, record)) if summary else ""
        if summary and not has_tag(existing, "flush", flush_id):
            lead = "\n" if existing.strip() else ""
            self.memory.append_daily(f"{lead}{block}", day, origin=FLUSH)
        elif summary and block.rstrip() not in existing:
            # The tagged heading is there but not the whole block (a write cut short before
            # appends were all-or-nothing): complete it rather than call it done.
            store.edit_file(daily_rel, lambda text: _completed(text, flush_id, block))
            self.memory.sync_changed([daily_rel], origin=FLUSH)
        crash_point("after_daily_append")
        added, _ = self.memory.save_entries(
            EntryBatch(record.facts, "medium", "auto", day, {"flush": flush_id}),
            unless_tagged=("flush", flush_id),
            keep=self._new_facts,
            origin=FLUSH,
        )
        crash_point("after_memory_write")
        if recovered:  # what the interrupted run wrote may not be indexed yet
            paths = [daily_rel, MEMORY_FILE] if summary else [MEMORY_FILE]
            self.memory.sync_changed(paths, origin=FLUSH)
        changed = self._facts_changed(daily_rel, day) if summary else ()
        crash_point("before_pointer")
        self.sessions.append(
            session_id,
            FlushDone(flush_id, record.from_id, record.to_id, record.count, len(added)),
        )
        return FlushOutcome(
            "flushed",
            session_id,
            messages=record.count,
            first=record.first,
            last=record.last,
            facts=len(added),
            flush_id=flush_id,
            daily_log=daily_rel if summary else None,
            detail="finished an interrupted flush" if recovered else "",
            recovered=recovered,
            changed=changed,
        )

    def _facts_changed(self, daily_rel: str, day: date) -> tuple[str, ...]:
        """The MEMORY.md entries the day's log now tells a change of; never fails a flush
        (the log is written, the hint is a bonus)."""
        try:
            return tuple(self.memory.facts_changed_in(daily_rel, now=day))
        except Exception:
            return ()

    def _new_facts(self, memory_text: str, facts: Sequence[str]) -> list[str]:
        """Facts not already in MEMORY.md's ``memory_text`` (same words, or the same subject and
        value as an entry, see :func:`tui.chat.tools.split_statement`) and never forgotten or
        superseded. Runs inside the MEMORY.md edit, under its lock."""
        active = [e.text for e in parse_entries(memory_text) if e.active]
        known = {normalize_entry_text(text) for text in active}
        known |= self.memory.store.retired_texts()
        statements = {s for s in map(split_statement, active) if s is not None}
        fresh: list[str] = []
        for fact in map(str, facts):
            key = normalize_entry_text(fact)
            statement = split_statement(fact)
            if not key or key in known or (statement is not None and statement in statements):
                continue
            known.add(key)
            if statement is not None:
                statements.add(statement)
            fresh.append(fact)
        return fresh


def _daily_block(session_id: str, record: PreparedFlush) -> str:
    """The daily-log block a prepared flush ``record`` appends: its tagged heading, then the
    summary."""
    extra = {"flush": record.flush_id, "session": session_id}
    meta = format_meta(EntryMeta(source="auto", extra=extra))
    # The count is the one the outcome reports (the messages logged), not the span of
    # message numbers, which also covers tool-only and silent ones.
    count = record.count
    what = f"{count} message{'s' if count != 1 else ''}"
    if not record.summarised:
        what += " · not summarised (no model)"
    heading = f"## {record.time} · {record.title} · {what} {meta}"
    return f"{heading}\n\n{record.summary}\n"


def _completed(text: str, flush_id: str, block: str) -> str:
    """``text`` with the cut-short ``block`` of flush ``flush_id`` at its end made whole; any
    other text is returned unchanged (only a tail that is a prefix of the block is ours)."""
    marker = f"flush={flush_id}"
    at = text.rfind(marker)
    start = text.rfind("\n", 0, at) + 1 if at >= 0 else -1
    if start < 0 or block.rstrip() in text:
        return text
    tail = text[start:]
    if not block.startswith(tail.rstrip("\n")):
        return text
    return text[:start] + block


def _merge(a: FlushOutcome, b: FlushOutcome, *, status: str | None = None) -> FlushOutcome:
    """Two rounds of one flush reported as one outcome."""
    return FlushOutcome(
        status=status or "flushed",  # type: ignore[arg-type]
        session_id=a.session_id,
        messages=a.messages + (b.messages if b.status == "flushed" else 0),
        first=a.first if a.first is not None else b.first,
        last=b.last if b.status == "flushed" and b.last is not None else a.last,
        facts=a.facts + b.facts,
        flush_id=b.flush_id if b.status == "flushed" else a.flush_id,
        daily_log=b.daily_log or a.daily_log,
        detail=b.detail if status else a.detail,
        recovered=a.recovered or b.recovered,
    )
