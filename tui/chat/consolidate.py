"""Consolidation, the "hippocampus" (DESIGN §7, clawhive §4): recent daily logs and MEMORY.md
go to the summary model, which proposes an updated MEMORY.md; the user sees the diff and
accepts or rejects it. Nothing is ever applied without :meth:`Consolidator.accept`.

1. :meth:`Consolidator.propose` reads MEMORY.md and the daily logs of the window (the days
   since the last consolidation, at most ``consolidate_max_days``; or the last ``days``), asks
   the summary model for the whole updated file and returns a :class:`Proposal`: the new text,
   a unified diff, the hash of the MEMORY.md it was based on, the entry changes and their
   stats. The answer is checked and tidied first (see :meth:`Consolidator.build_proposal`):

   - kept and reworded entries keep their ``<!-- mem ... -->`` comment exactly (restored if the
     model dropped or altered it); new entries get ``conf=medium src=auto consolidation=<id>``;
   - entries the model marked ``state=superseded`` (or ``forgotten``) leave the file and go to
     the audit trail on accept, like :meth:`tui.engine.store.MemoryStore.retire_entries`;
   - new entries that were forgotten or superseded before, or repeat each other, are left out;
   - refused (:class:`ProposalRefused`, with the reason): an empty answer, one that is not
     Markdown, one that drops more than half of the non-blank lines, one that deletes a line
     the user wrote by hand (no metadata) without marking it superseded.

2. :meth:`Consolidator.accept` writes the proposal only if MEMORY.md still has the hash it was
   based on (else :class:`StaleProposalError`: a hand edit is never overwritten), records the
   removed and reworded entries (``superseded``) and a ``consolidation`` event with the diff
   in ``.memdeck/history.jsonl``, re-indexes MEMORY.md and remembers the date in
   ``.memdeck/state.json``. :meth:`Consolidator.reject` only records a
   ``consolidation_rejected`` event.

3. :meth:`Consolidator.is_due` says when to offer one: ``consolidate_every_days`` after the
   last acceptance or rejection (0: never, on demand only), if a daily log of the window
   changed since the last accepted consolidation read them.

Everything here blocks (file I/O, one model request): call it from a worker thread or the CLI.
"""

from __future__ import annotations

import difflib
import json
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from ..engine.engine import MemoryEngine
from ..engine.fileio import ConcurrentEditError, read_markdown, sha256_text
from ..engine.metadata import INACTIVE_STATES, EntryMeta, format_meta, new_entry_id, split_meta
from ..engine.store import MemoryEntry, file_lines, normalize_entry_text, parse_entries
from ..engine.workspace import MEMORY_DIR, MEMORY_FILE, date_for_path
from .client import LLMClient, LLMError
from .triggers import WorkspaceState, local_now

#: Key of the consolidation facts in ``.memdeck/state.json``.
STATE_KEY = "consolidation"
#: A proposal keeping fewer than this share of MEMORY.md's non-blank lines is refused.
MIN_KEPT_LINES = 0.5
#: Characters of daily logs sent to the model at most (the newest days are kept).
MAX_DAILY_CHARS = 60_000
#: Similarity (difflib ratio of the entries' words) above which an entry counts as reworded.
SIMILAR_ENTRY = 0.6
#: Bytes read from the end of history.jsonl to find the last rejection.
HISTORY_TAIL_BYTES = 256 * 1024

STALE_MESSAGE = "MEMORY.md changed since the proposal; run consolidate again"

CONSOLIDATION_SYSTEM_PROMPT = """You are memdeck's memory consolidation assistant (the \
"hippocampus"). You organise a user's long-term memory file, MEMORY.md, using their recent \
daily logs, the way sleep consolidates the day's experiences. You answer with the complete \
updated MEMORY.md and nothing else."""

CONSOLIDATION_INSTRUCTIONS = """Update MEMORY.md with what the daily logs below teach about \
the user. Rules:

1. Keep the file's structure: its headings, their order, and every line the user wrote by \
hand (lines without a `<!-- mem ... -->` comment), word for word.
2. Keep the `<!-- mem ... -->` comment at the end of every entry you keep, exactly as it is, \
even if you reword the entry. Never invent such comments.
3. Merge duplicates into one entry (keep the comment of one of them).
4. Newer facts win: the daily logs are newer than MEMORY.md and listed oldest first. When \
they contradict an entry, the newer fact wins.
5. Add lasting facts, preferences and decisions from the daily logs as new bullets under the \
heading they fit (one short, self-contained statement each, no comment). Leave out passing \
details of a single day.
6. Never delete a line the user wrote by hand. If newer information contradicts it, keep the \
line and mark it superseded by ending it with `<!-- mem state=superseded -->` (an entry that \
has a comment gets `state=superseded` added inside it). Outdated entries written by memdeck \
are marked the same way.
7. Answer with the complete updated MEMORY.md only: no explanation, no code fence.
"""

ChangeKind = Literal["added", "changed", "removed", "superseded", "merged"]
#: Change kinds after which an old entry is no longer in MEMORY.md as it was.
RETIRING_KINDS = ("changed", "removed", "superseded", "merged")

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+\S")
_OUTER_FENCE = re.compile(
    r"\A\s*(```|~~~)[ \t]*(?:markdown|md)?[ \t]*\n(?P<body>.*?)\n?\1[ \t]*\Z", re.S | re.I
)
_INNER_MD_FENCE = re.compile(
    r"^(```|~~~)[ \t]*(?:markdown|md)[ \t]*\n(?P<body>.*?)\n\1[ \t]*$", re.S | re.M | re.I
)


class ConsolidationError(Exception):
    """Consolidation could not make or apply a proposal; nothing was written.

    ``kind`` is an :data:`~tui.chat.events.ErrorKind` for model failures (``config``,
    ``connection``, ...) or ``nothing`` / ``refused`` / ``stale``.
    """

    def __init__(self, message: str, kind: str = "internal") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class NothingToConsolidate(ConsolidationError):
    """MEMORY.md is empty and there are no daily logs in the window."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "nothing")


class ProposalRefused(ConsolidationError):
    """The model's answer failed validation (``reason`` says why); nothing was written."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the proposed MEMORY.md was refused: {reason}", "refused")
        self.reason = reason


class StaleProposalError(ConsolidationError):
    """MEMORY.md changed between the proposal and its acceptance (a hand edit, a flush)."""

    def __init__(self) -> None:
        super().__init__(STALE_MESSAGE, "stale")


@dataclass(frozen=True)
class EntryChange:
    """What the proposal does to one entry.

    ``added``: new; ``changed``: reworded (``before`` the old entry, ``after`` the new text);
    ``superseded``: contradicted by newer facts, leaves the file; ``merged``: a duplicate of
    an entry that stays; ``removed``: an outdated entry written by memdeck, dropped.
    """

    kind: ChangeKind
    before: MemoryEntry | None = None
    after: str | None = None
    after_id: str | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (the CLI's ``--json``)."""
        before = self.before
        return {
            "kind": self.kind,
            "before": before.text if before else None,
            "before_id": before.entry_id if before else None,
            "before_lines": f"{before.start}-{before.end}" if before else None,
            "after": self.after,
            "after_id": self.after_id,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ConsolidationStats:
    """Counts of entries: ``removed`` includes the ``superseded`` and ``merged`` ones."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    superseded: int = 0
    merged: int = 0
    kept: int = 0

    @property
    def summary(self) -> str:
        """One line for a status bar."""
        parts = [f"+{self.added} added", f"~{self.changed} changed", f"-{self.removed} removed"]
        extra = [
            f"{n} {k}" for k, n in (("superseded", self.superseded), ("merged", self.merged)) if n
        ]
        return ", ".join(parts) + (f" ({', '.join(extra)})" if extra else "")

    def to_json(self) -> dict[str, int]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "superseded": self.superseded,
            "merged": self.merged,
            "kept": self.kept,
        }


@dataclass(frozen=True)
class Proposal:
    """An updated MEMORY.md the user has not accepted yet.

    ``text`` is exactly what :meth:`Consolidator.accept` writes; ``diff`` a unified diff from
    ``base_text`` (MEMORY.md when proposed, whose sha256 is ``base_hash``) to ``text``.
    """

    id: str
    created_at: str
    base_hash: str
    base_text: str
    text: str
    diff: str
    changes: tuple[EntryChange, ...]
    stats: ConsolidationStats
    window_start: date
    window_end: date
    sources: tuple[str, ...]
    model: str | None
    notes: tuple[str, ...] = ()

    @property
    def unchanged(self) -> bool:
        """True when the model proposes no change at all."""
        return self.text == self.base_text

    @property
    def after_hash(self) -> str:
        """The hash MEMORY.md will have once accepted."""
        return sha256_text(self.text)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (the CLI's ``--json``)."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "base_hash": self.base_hash,
            "after_hash": self.after_hash,
            "unchanged": self.unchanged,
            "text": self.text,
            "diff": self.diff,
            "stats": self.stats.to_json(),
            "changes": [c.to_json() for c in self.changes],
            "window": {"start": self.window_start.isoformat(), "end": self.window_end.isoformat()},
            "sources": list(self.sources),
            "model": self.model,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class AcceptResult:
    """An accepted proposal: MEMORY.md's hash before and after, and whether it was written."""

    proposal_id: str
    before_hash: str
    after_hash: str
    written: bool
    stats: ConsolidationStats


@dataclass(frozen=True)
class DailyLog:
    """One daily log given to the model: its path, day, and text without metadata."""

    path: str
    day: date
    text: str


@dataclass
class _Plan:
    """How the model's draft becomes the proposal text (draft entry index -> what to do)."""

    comment: dict[int, str | None] = field(default_factory=dict)
    ids: dict[int, str | None] = field(default_factory=dict)
    drop: set[int] = field(default_factory=set)
    changes: list[EntryChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lost: list[MemoryEntry] = field(default_factory=list)


def unified_diff(before: str, after: str, path: str = MEMORY_FILE) -> str:
    """A unified diff of two versions of a memory file (empty when they are equal)."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    text = "\n".join(lines)
    return text + "\n" if text else ""


def extract_document(answer: str) -> str:
    """The Markdown document in a model answer: a fence around the whole answer, or one
    ```markdown block amid chatter, is unwrapped."""
    text = answer.strip()
    outer = _OUTER_FENCE.match(text)
    if outer:
        return outer.group("body").strip()
    blocks = list(_INNER_MD_FENCE.finditer(text))
    if len(blocks) == 1:
        return blocks[0].group("body").strip()
    return text


def _nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _headings(text: str) -> list[str]:
    return [split_meta(line)[0].strip() for line in text.splitlines() if _HEADING.match(line)]


def _structured(text: str) -> bool:
    """True when ``text`` has a Markdown heading or list item."""
    return any(_HEADING.match(line) or _LIST_ITEM.match(line) for line in text.splitlines())


def _is_markdown(text: str, base: str) -> str | None:
    """Why ``text`` is not a Markdown memory file like ``base``, or None when it is."""
    stripped = text.lstrip()
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
            return "the model answered with JSON, not Markdown"
        except ValueError:
            pass
    if not _structured(text) and (_structured(base) or not base.strip()):
        return "the answer has no Markdown headings or list items"
    return None


def _strip_preamble(draft: str, base: str) -> tuple[str, str | None]:
    """``draft`` without chatter before MEMORY.md's first heading ("Here is the updated
    file:"), and a note saying what was ignored."""
    first = next((line.strip() for line in base.splitlines() if line.strip()), "")
    if not _HEADING.match(first):
        return draft, None
    lines = draft.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() == first), None)
    if not at:
        return draft, None
    ignored = " ".join(line.strip() for line in lines[:at] if line.strip())
    if not ignored:
        return "\n".join(lines[at:]), None
    return "\n".join(lines[at:]), f"ignored text before the first heading: {ignored[:120]!r}"


class Consolidator:
    """Proposes, accepts and rejects consolidations of one workspace's MEMORY.md.

    ``every_days`` / ``max_days`` default to the config's ``consolidate_every_days`` /
    ``consolidate_max_days`` (read from ``llm.config`` at each call, so a reconfigured
    engine only has to set :attr:`llm`).
    """

    def __init__(
        self,
        memory: MemoryEngine,
        llm: LLMClient,
        *,
        state: WorkspaceState | None = None,
        every_days: int | None = None,
        max_days: int | None = None,
        clock: Callable[[], datetime] = local_now,
    ) -> None:
        self.memory = memory
        self.llm = llm
        self.state = state or WorkspaceState(memory.workspace)
        self._every_days = every_days
        self._max_days = max_days
        self.clock = clock
        self._rejection_cache: tuple[tuple[int, int], date | None] | None = None

    # -- settings and state --

    @property
    def every_days(self) -> int:
        """Days between offered consolidations; 0 or less: only on demand."""
        if self._every_days is not None:
            return self._every_days
        return int(getattr(self.llm.config, "consolidate_every_days", 1))

    @property
    def max_days(self) -> int:
        """The most days of daily logs read by default (at least 1)."""
        value = self._max_days
        if value is None:
            value = int(getattr(self.llm.config, "consolidate_max_days", 7))
        return max(1, value)

    def _state(self) -> dict[str, Any]:
        value = self.state.read().get(STATE_KEY)
        return value if isinstance(value, dict) else {}

    @property
    def last_consolidated(self) -> date | None:
        """The day of the last accepted consolidation, or None."""
        try:
            value = self._state().get("last_date")
            return date.fromisoformat(value) if value else None
        except (TypeError, ValueError):
            return None

    @property
    def last_consolidated_at(self) -> datetime | None:
        """When the daily logs of the last accepted consolidation were read, or None."""
        state = self._state()
        try:
            value = state.get("read_at") or state.get("last_at")
            return datetime.fromisoformat(value) if value else None
        except (TypeError, ValueError):
            return None

    @property
    def last_rejected(self) -> date | None:
        """The day of the last rejected proposal (from the audit trail), or None."""
        path = self.memory.workspace.history_path
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        if self._rejection_cache and self._rejection_cache[0] == key:
            return self._rejection_cache[1]
        found: date | None = None
        with path.open("rb") as handle:
            handle.seek(max(0, stat.st_size - HISTORY_TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace")
        for line in reversed(tail.splitlines()):
            if '"consolidation_rejected"' not in line:
                continue
            try:
                record = json.loads(line)
                if record.get("event") != "consolidation_rejected":
                    continue
                if record.get("day"):
                    found = date.fromisoformat(record["day"])
                else:
                    found = datetime.fromisoformat(record["at"]).astimezone().date()
                break
            except (ValueError, KeyError, TypeError):
                continue
        self._rejection_cache = (key, found)
        return found

    def window(self, days: int | None = None, today: date | None = None) -> tuple[date, date]:
        """The days of daily logs a consolidation reads, both ends included.

        With ``days``: the last ``days`` days. Otherwise the days since the last consolidation
        (its own day included: the log may have grown since), at most :attr:`max_days`.
        """
        today = today or self.clock().date()
        if days is not None:
            return today - timedelta(days=max(1, days) - 1), today
        start = today - timedelta(days=self.max_days - 1)
        last = self.last_consolidated
        if last is not None and start < last <= today:
            start = last
        return start, today

    def daily_logs(self, start: date, end: date) -> list[DailyLog]:
        """The daily logs dated ``start``..``end``, oldest first, without metadata comments and
        without forgotten or superseded lines."""
        found: list[tuple[date, str, Path]] = []
        for rel, path in self.memory.workspace.iter_memory_files():
            day = date_for_path(rel)
            if rel.startswith(MEMORY_DIR + "/") and day is not None and start <= day <= end:
                found.append((day, rel, path))
        logs: list[DailyLog] = []
        for day, rel, path in sorted(found):
            try:
                read = read_markdown(path)
            except OSError:
                continue
            if read.text is None:
                continue
            lines = []
            for line in read.text.splitlines():
                visible, meta = split_meta(line)
                if meta is not None and not meta.active:
                    continue
                lines.append(visible.rstrip())
            text = "\n".join(lines).strip()
            if text:
                logs.append(DailyLog(rel, day, text))
        return logs

    def is_due(self, now: datetime | date | None = None) -> bool:
        """True when the UI should offer a consolidation: scheduling is on, ``every_days``
        have passed since the last consolidation (or rejection), and a daily log in the
        window changed since the last consolidation."""
        every = self.every_days
        if every <= 0:
            return False
        now = now or self.clock()
        today = now.date() if isinstance(now, datetime) else now
        marks = [d for d in (self.last_consolidated, self.last_rejected) if d is not None]
        if marks and (today - max(marks)).days < every:
            return False
        start, end = self.window(today=today)
        since = self.last_consolidated_at
        for rel, path in self.memory.workspace.iter_memory_files():
            day = date_for_path(rel)
            if day is None or not start <= day <= end:
                continue
            if since is None:
                return True
            try:
                if path.stat().st_mtime > since.timestamp():
                    return True
            except OSError:
                continue
        return False

    def status(self, now: datetime | None = None) -> dict[str, Any]:
        """For a stats panel: the schedule, the last consolidation and rejection, due or not."""
        last = self.last_consolidated
        rejected = self.last_rejected
        return {
            "every_days": self.every_days,
            "max_days": self.max_days,
            "last_consolidated": last.isoformat() if last else None,
            "last_rejected": rejected.isoformat() if rejected else None,
            "due": self.is_due(now),
        }

    # -- proposing --

    def build_request(
        self, memory_text: str, logs: Sequence[DailyLog], start: date, end: date
    ) -> tuple[list[dict[str, str]], list[str]]:
        """The messages sent to the model, and notes about daily logs left out for size."""
        notes: list[str] = []
        chosen: list[DailyLog] = []
        budget = MAX_DAILY_CHARS
        for log in reversed(logs):  # newest first: they matter most
            if budget <= 0:
                notes.append(f"{log.path} left out: the daily logs are too long for one request")
                continue
            text = log.text
            if len(text) > budget:
                text = "[…]\n" + text[-budget:]
                notes.append(f"{log.path}: only its last {budget:,} characters were read")
            budget -= len(text)
            chosen.append(DailyLog(log.path, log.day, text))
        chosen.reverse()
        memory_block = memory_text.strip() or "(MEMORY.md is empty.)"
        if chosen:
            daily_block = "\n\n".join(f"===== {log.path} =====\n{log.text}" for log in chosen)
        else:
            daily_block = "(No daily logs in this period.)"
        prompt = (
            f"{CONSOLIDATION_INSTRUCTIONS}\n"
            f"Today is {end.isoformat()}.\n\n"
            f"===== Current MEMORY.md =====\n{memory_block}\n===== End of MEMORY.md =====\n\n"
            f"Daily logs from {start.isoformat()} to {end.isoformat()}, oldest first:\n\n"
            f"{daily_block}\n\n"
            "Write the complete updated MEMORY.md now."
        )
        messages = [
            {"role": "system", "content": CONSOLIDATION_SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        return messages, notes

    def propose(self, days: int | None = None) -> Proposal:
        """Ask the summary model for an updated MEMORY.md and return it as a checked proposal.

        Raises :class:`ConsolidationError` (no model configured, endpoint down: ``kind`` says
        which), :class:`NothingToConsolidate` or :class:`ProposalRefused`. Writes nothing.
        """
        problem = self.llm.problem
        if problem:
            raise ConsolidationError(problem, "config")
        start, end = self.window(days)
        current = self.memory.store.read_memory()
        logs = self.daily_logs(start, end)
        if not logs and not parse_entries(current.text):
            raise NothingToConsolidate(
                f"nothing to consolidate: MEMORY.md has no entries and there are no daily logs "
                f"from {start.isoformat()} to {end.isoformat()}"
            )
        messages, notes = self.build_request(current.text, logs, start, end)
        model = self.llm.summary_model
        try:
            answer = self.llm.complete(messages, model=model)
        except LLMError as exc:
            raise ConsolidationError(f"{exc.kind}: {exc.message}", exc.kind) from exc
        return self.build_proposal(
            current.text,
            current.content_hash,
            answer,
            window=(start, end),
            sources=[log.path for log in logs],
            model=model,
            notes=notes,
        )

    def build_proposal(
        self,
        base_text: str,
        base_hash: str,
        answer: str,
        *,
        window: tuple[date, date],
        sources: Sequence[str] = (),
        model: str | None = None,
        notes: Sequence[str] = (),
    ) -> Proposal:
        """Check the model's ``answer`` against ``base_text`` and turn it into a :class:`Proposal`.

        Raises :class:`ProposalRefused` with the reason when the answer is unusable.
        """
        proposal_id = secrets.token_hex(4)
        draft = extract_document(answer)
        if not draft.strip():
            raise ProposalRefused("the model returned an empty answer")
        problem = _is_markdown(draft, base_text)
        if problem:
            raise ProposalRefused(problem)
        draft, preamble = _strip_preamble(draft, base_text)
        base_entries = parse_entries(base_text)
        draft_lines = file_lines(draft)
        draft_entries = parse_entries(draft)
        plan = self._plan(base_entries, draft_entries, proposal_id, window[1])
        plan.notes[:0] = [*notes, *([preamble] if preamble else [])]
        text = _apply_plan(draft_lines, draft_entries, plan)
        if not text.strip() or (not parse_entries(text) and base_entries):
            raise ProposalRefused("the proposal has no entries left")
        kept, total = _nonblank(text), _nonblank(base_text)
        if total and kept < total * MIN_KEPT_LINES:
            raise ProposalRefused(
                f"it keeps {kept} of MEMORY.md's {total} non-blank lines; a consolidation may "
                f"drop at most {1 - MIN_KEPT_LINES:.0%} of them"
            )
        if plan.lost:
            lost = plan.lost
            shown = "; ".join(f"line {e.start}: {e.text[:80]!r}" for e in lost[:3])
            more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
            raise ProposalRefused(
                f"it deletes {len(lost)} line{'s' if len(lost) != 1 else ''} you wrote by hand "
                f"without marking {'them' if len(lost) != 1 else 'it'} superseded ({shown}{more})"
            )
        self._check_metadata(base_entries, plan.changes, text)
        new_headings = set(_headings(text))
        for heading in _headings(base_text):
            if heading not in new_headings:
                plan.notes.append(f"heading removed: {heading}")
        changes = tuple(plan.changes)
        count = {kind: sum(1 for c in changes if c.kind == kind) for kind in RETIRING_KINDS}
        kept_entries = len(base_entries) - sum(count.values())
        stats = ConsolidationStats(
            added=sum(1 for c in changes if c.kind == "added"),
            changed=count["changed"],
            removed=count["removed"] + count["superseded"] + count["merged"],
            superseded=count["superseded"],
            merged=count["merged"],
            kept=max(0, kept_entries),
        )
        return Proposal(
            id=proposal_id,
            created_at=self.clock().isoformat(timespec="seconds"),
            base_hash=base_hash,
            base_text=base_text,
            text=text,
            diff=unified_diff(base_text, text),
            changes=changes,
            stats=stats,
            window_start=window[0],
            window_end=window[1],
            sources=tuple(sources),
            model=model,
            notes=tuple(plan.notes),
        )

    def _plan(
        self,
        base: Sequence[MemoryEntry],
        draft: Sequence[MemoryEntry],
        proposal_id: str,
        today: date,
    ) -> _Plan:
        """Pair the draft's entries with MEMORY.md's: kept, reworded, superseded, new, gone."""
        plan = _Plan()
        used: set[int] = set()
        pairs: dict[int, int] = {}  # draft index -> base index
        norm_base = [normalize_entry_text(e.text) for e in base]
        norm_draft = [normalize_entry_text(e.text) for e in draft]
        by_id: dict[str, int] = {}
        for b, entry in enumerate(base):
            if entry.entry_id:
                by_id.setdefault(entry.entry_id, b)

        def claim(d: int) -> int | None:
            """The unused base entry with the draft entry's id, else with the same words."""
            entry_id = draft[d].entry_id
            b = by_id.get(entry_id) if entry_id else None
            if b is not None and b not in used:
                return b
            for b, norm in enumerate(norm_base):
                if b not in used and norm and norm == norm_draft[d]:
                    return b
            return None

        def similar(ds: Sequence[int]) -> list[tuple[int, int]]:
            """(draft, base) pairs of unused entries worded alike, the most similar first."""
            found = []
            for d in ds:
                for b, norm in enumerate(norm_base):
                    if b in used or not norm or not norm_draft[d]:
                        continue
                    matcher = difflib.SequenceMatcher(None, norm_draft[d], norm, autojunk=False)
                    if (
                        matcher.real_quick_ratio() >= SIMILAR_ENTRY
                        and matcher.quick_ratio() >= SIMILAR_ENTRY
                        and (ratio := matcher.ratio()) >= SIMILAR_ENTRY
                    ):
                        found.append((ratio, d, b))
            return [(d, b) for _, d, b in sorted(found, key=lambda f: (-f[0], f[1], f[2]))]

        marked = [d for d, e in enumerate(draft) if e.meta and e.meta.state in INACTIVE_STATES]
        marked_set = set(marked)
        live = [d for d in range(len(draft)) if d not in marked_set]
        superseded: dict[int, int] = {}
        # 1. Entries the model marked superseded (same id or words), then kept entries.
        for d in marked:
            if (b := claim(d)) is not None:
                used.add(b)
                superseded[d] = b
        for d in live:
            if (b := claim(d)) is not None:
                used.add(b)
                pairs[d] = b
        # 2. Then the same by similar wording: superseded marks first, then reworded entries.
        for group, found in (
            (marked, superseded),
            ([d for d in live if d not in pairs], pairs),
        ):
            for d, b in similar([d for d in group if d not in found]):
                if d not in found and b not in used:
                    used.add(b)
                    found[d] = b
        for d in marked:
            plan.drop.add(d)
            if d in superseded:
                plan.changes.append(
                    EntryChange(
                        "superseded", base[superseded[d]], reason="contradicted by newer facts"
                    )
                )
            else:
                plan.notes.append(
                    f"ignored a superseded mark on a line not in MEMORY.md: {draft[d].text}"
                )
        # 3. Kept and reworded entries keep MEMORY.md's metadata comment, exactly as written.
        for d, b in sorted(pairs.items()):
            old = base[b]
            plan.comment[d] = _comment_of(old)
            plan.ids[d] = old.entry_id
            if draft[d].text != old.text:
                plan.changes.append(
                    EntryChange("changed", old, draft[d].text, old.entry_id, "reworded")
                )
        # 4. New entries, unless forgotten or superseded before, or said twice.
        retired = self.memory.store.retired_texts()
        seen = {norm_draft[d] for d in pairs}
        left_out = 0
        for d in live:
            if d in pairs:
                continue
            norm = norm_draft[d]
            if not norm or norm in seen or norm in retired:
                plan.drop.add(d)
                if norm in retired and norm not in seen:
                    left_out += 1
                continue
            seen.add(norm)
            meta = EntryMeta(
                id=new_entry_id(),
                confidence="medium",
                source="auto",
                at=today,
                extra={"consolidation": proposal_id},
            )
            plan.comment[d] = format_meta(meta)
            plan.ids[d] = meta.id
            plan.changes.append(EntryChange("added", None, draft[d].text, meta.id))
        if left_out:
            plan.notes.append(
                f"left out {left_out} new entr{'y' if left_out == 1 else 'ies'} that had been "
                "forgotten or superseded before"
            )
        # 5. MEMORY.md entries the draft no longer has: duplicates, outdated, or lost.
        staying = {norm_draft[d]: d for d in plan.ids if d not in plan.drop}
        for b, entry in enumerate(base):
            if b in used:
                continue
            twin = staying.get(norm_base[b]) if norm_base[b] else None
            if twin is not None:
                plan.changes.append(
                    EntryChange(
                        "merged",
                        entry,
                        draft[twin].text,
                        plan.ids[twin],
                        "duplicate of an entry that stays",
                    )
                )
            elif entry.meta is None:
                plan.lost.append(entry)
            else:
                plan.changes.append(EntryChange("removed", entry, reason="dropped as outdated"))
        plan.changes.sort(key=lambda c: (c.before is None, c.before.start if c.before else 0))
        return plan

    @staticmethod
    def _check_metadata(
        base: Sequence[MemoryEntry], changes: Sequence[EntryChange], text: str
    ) -> None:
        """Every entry kept from MEMORY.md still carries its metadata comment; no id is used
        twice (unless it already was in MEMORY.md)."""
        ids = [
            meta.id
            for line in text.splitlines()
            if (meta := split_meta(line)[1]) is not None and meta.id
        ]
        base_ids = [e.entry_id for e in base if e.entry_id]
        twice = sorted({i for i in ids if ids.count(i) > 1 and base_ids.count(i) < 2})
        if twice:
            raise ProposalRefused(f"entry ids used twice: {', '.join(twice)}")
        gone = {c.before.entry_id for c in changes if c.kind != "changed" and c.before}
        missing = sorted({i for i in base_ids if i not in gone} - set(ids))
        if missing:
            raise ProposalRefused(f"entries lost their metadata comment: {', '.join(missing)}")

    # -- accepting and rejecting --

    def accept(self, proposal: Proposal) -> AcceptResult:
        """Write the proposal to MEMORY.md, if MEMORY.md is still what it was based on.

        Raises :class:`StaleProposalError` (nothing written) when MEMORY.md changed since.
        Records removed and reworded entries (``superseded``) and a ``consolidation`` event in
        the audit trail, re-indexes MEMORY.md and remembers the date.
        """
        store = self.memory.store
        if store.read_memory().content_hash != proposal.base_hash:
            raise StaleProposalError()
        # History first: a crash after it never loses the text of a removed entry.
        for change in proposal.changes:
            before = change.before
            if change.kind not in RETIRING_KINDS or before is None:
                continue
            store.record_history(
                "superseded",
                path=MEMORY_FILE,
                lines=f"{before.start}-{before.end}",
                text=before.text,
                raw="\n".join(before.raw),
                entry_id=before.entry_id,
                reason=f"consolidation: {change.reason or change.kind}",
                replaced_by=change.after_id,
                consolidation=proposal.id,
                change=change.kind,
            )

        def replace(text: str) -> str:
            if text != proposal.base_text:
                raise StaleProposalError()
            return proposal.text

        try:
            store.edit_memory(replace)
        except (StaleProposalError, ConcurrentEditError) as exc:
            store.record_history(
                "consolidation_aborted",
                id=proposal.id,
                reason=STALE_MESSAGE,
                base_hash=proposal.base_hash,
            )
            raise StaleProposalError() from exc
        after_hash = proposal.after_hash
        store.record_history(
            "consolidation",
            id=proposal.id,
            before_hash=proposal.base_hash,
            after_hash=after_hash,
            diff=proposal.diff,
            stats=proposal.stats.to_json(),
            window={
                "start": proposal.window_start.isoformat(),
                "end": proposal.window_end.isoformat(),
            },
            sources=list(proposal.sources),
            model=proposal.model,
        )
        self.memory.sync_paths([MEMORY_FILE])
        now = self.clock()

        def remember(data: dict[str, Any]) -> None:
            data[STATE_KEY] = {
                **(data.get(STATE_KEY) if isinstance(data.get(STATE_KEY), dict) else {}),
                "last_date": now.date().isoformat(),
                "last_at": now.isoformat(timespec="seconds"),
                "read_at": proposal.created_at,
                "last_hash": after_hash,
                "last_proposal": proposal.id,
            }

        self.state.update(remember)
        return AcceptResult(
            proposal.id, proposal.base_hash, after_hash, not proposal.unchanged, proposal.stats
        )

    def reject(self, proposal: Proposal, reason: str = "") -> None:
        """Record that the user rejected ``proposal`` (audit trail only; nothing else changes)."""
        self.memory.store.record_history(
            "consolidation_rejected",
            id=proposal.id,
            day=self.clock().date().isoformat(),
            base_hash=proposal.base_hash,
            proposed_hash=proposal.after_hash,
            diff=proposal.diff,
            stats=proposal.stats.to_json(),
            reason=reason,
        )


def _comment_of(entry: MemoryEntry) -> str | None:
    """The metadata comment of an entry exactly as written in its file (None without one)."""
    if entry.meta is None or not entry.raw:
        return None
    first = entry.raw[0]
    visible, _ = split_meta(first)
    return first[len(visible) :].strip() or None


def _apply_plan(lines: list[str], entries: Sequence[MemoryEntry], plan: _Plan) -> str:
    """The draft with dropped entries removed and each kept entry's metadata set."""
    lines = list(lines)
    for d in sorted(range(len(entries)), key=lambda i: -entries[i].start):
        entry = entries[d]
        first = entry.start - 1
        if d in plan.drop:
            del lines[first : entry.end]
            # Do not leave two blank lines where the entry was.
            if 0 < first < len(lines) and not lines[first].strip() and not lines[first - 1].strip():
                del lines[first]
            continue
        if d in plan.comment:
            visible = split_meta(lines[first])[0].rstrip()
            comment = plan.comment[d]
            lines[first] = f"{visible} {comment}" if comment else visible
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""
