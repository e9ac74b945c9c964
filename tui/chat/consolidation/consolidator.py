"""The consolidator: the I/O around the pure planner. It reads MEMORY.md and the daily logs
of the window, asks the summary model, writes an accepted proposal and remembers when.

1. :meth:`Consolidator.propose` reads MEMORY.md and the daily logs of the window (the days
   since the last consolidation, at most ``consolidate_max_days``; or the last ``days``), asks
   the summary model for the whole updated file and returns a checked :class:`Proposal` (see
   :mod:`tui.chat.consolidation.planner`). Nothing is ever applied without :meth:`accept`.
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

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from ...engine.engine import CONSOLIDATION, MemoryEngine
from ...engine.fileio import (
    ConcurrentEditError,
    encode_exact,
    open_own_reader,
    read_markdown,
    sha256_bytes,
)
from ...engine.history_records import Attribution
from ...engine.metadata import split_meta
from ...engine.store import parse_entries
from ...engine.workspace import MEMORY_FILE, date_for_path
from ..client import LLMClient, LLMError
from ..state import WorkspaceState, local_now
from .planner import plan_proposal
from .prompt import build_request
from .proposal import (
    RETIRING_KINDS,
    STALE_MESSAGE,
    AcceptResult,
    ConsolidationError,
    DailyLog,
    NothingToConsolidate,
    Proposal,
    StaleProposalError,
)

#: Key of the consolidation facts in ``.memdeck/state.json``.
STATE_KEY = "consolidation"
#: Bytes read from the end of history.jsonl to find the last rejection.
HISTORY_TAIL_BYTES = 256 * 1024


class Consolidator:
    """Proposes, accepts and rejects consolidations of one workspace's MEMORY.md.

    ``every_days``: days between offered consolidations (``consolidate_every_days``; 0 or
    less: only on demand); ``max_days``: the most days of daily logs read by default
    (``consolidate_max_days``).
    """

    def __init__(
        self,
        memory: MemoryEngine,
        llm: LLMClient,
        *,
        state: WorkspaceState | None = None,
        every_days: int = 1,
        max_days: int = 7,
        clock: Callable[[], datetime] = local_now,
    ) -> None:
        self.memory = memory
        self.llm = llm
        self.state = state or WorkspaceState(memory.workspace)
        self.every_days = every_days
        self._max_days = max_days
        self.clock = clock
        self._rejection_cache: tuple[tuple[int, int], date | None] | None = None

    # -- settings and state --

    @property
    def max_days(self) -> int:
        """The most days of daily logs read by default (at least 1)."""
        return max(1, self._max_days)

    @max_days.setter
    def max_days(self, value: int) -> None:
        self._max_days = value

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
            stat = os.lstat(path)
        except OSError:
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        if self._rejection_cache and self._rejection_cache[0] == key:
            return self._rejection_cache[1]
        found: date | None = None
        try:
            handle = open_own_reader(path)  # never through a link
        except OSError:
            return None
        with handle:
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

    def _log_files(self, start: date, end: date) -> list[tuple[date, str, Path]]:
        """``(day, relative path, path)`` of the daily logs dated ``start``..``end``, oldest
        first."""
        found: list[tuple[date, str, Path]] = []
        for rel, path in self.memory.workspace.iter_memory_files():
            day = date_for_path(rel)  # None for MEMORY.md and anything outside memory/
            if day is not None and start <= day <= end:
                found.append((day, rel, path))
        return sorted(found)

    def _remember(self, **fields: str) -> None:
        """Merge ``fields`` into the consolidation state (the state file is shared: one
        locked read-modify-write)."""

        def merge(data: dict[str, Any]) -> None:
            state = data.get(STATE_KEY)
            data[STATE_KEY] = {**(state if isinstance(state, dict) else {}), **fields}

        self.state.update(merge)

    def daily_logs(self, start: date, end: date) -> list[DailyLog]:
        """The daily logs dated ``start``..``end``, oldest first, without metadata comments and
        without forgotten or superseded lines."""
        logs: list[DailyLog] = []
        for day, rel, path in self._log_files(start, end):
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
        since = self.last_consolidated_at
        for _day, _rel, path in self._log_files(*self.window(today=today)):
            if since is None:
                return True
            try:
                if path.stat().st_mtime > since.timestamp():
                    return True
            except OSError:
                continue
        return False

    def offer(self, now: datetime | date | None = None) -> bool:
        """:meth:`is_due`, said once per reason: after a True, False until a daily log in the
        window changes or a consolidation is accepted or rejected (a start-up notice that
        came back at every start, also right after a "no", taught users to ignore it)."""
        if not self.is_due(now):
            return False
        now = now or self.clock()
        today = now.date() if isinstance(now, datetime) else now
        newest = 0
        for _day, _rel, path in self._log_files(*self.window(today=today)):
            with contextlib.suppress(OSError):
                newest = max(newest, path.stat().st_mtime_ns)
        reason = f"{self.last_consolidated}|{self.last_rejected}|{newest}"
        if self._state().get("offered") == reason:
            return False
        self._remember(offered=reason)
        return True

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
        return build_request(memory_text, logs, start, end)

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
        """Check the model's ``answer`` against ``base_text`` and turn it into a :class:`Proposal`
        (see :func:`~tui.chat.consolidation.planner.plan_proposal`), leaving out new entries
        that were forgotten or superseded before.

        Raises :class:`ProposalRefused` with the reason when the answer is unusable.
        """
        return plan_proposal(
            base_text,
            base_hash,
            answer,
            proposal_id=secrets.token_hex(4),
            created_at=self.clock().isoformat(timespec="seconds"),
            window=window,
            retired=self.memory.store.retired_texts(),
            sources=sources,
            model=model,
            notes=notes,
        )

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
            answer = self.llm.complete(messages, model=model, purpose="consolidation")
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
            # ``text`` is the exact decoding of the bytes on disk (a byte that is not UTF-8 is
            # a lone surrogate), ``base_text`` the shown one (U+FFFD): compare the bytes.
            if sha256_bytes(encode_exact(text)) != proposal.base_hash:
                raise StaleProposalError()
            return proposal.text

        try:
            writer = Attribution("consolidation", summary=f"consolidation {proposal.id} accepted")
            with self.memory.attributed(writer):
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
        self.memory.sync_changed([MEMORY_FILE], origin=CONSOLIDATION)
        now = self.clock()
        self._remember(
            last_date=now.date().isoformat(),
            last_at=now.isoformat(timespec="seconds"),
            read_at=proposal.created_at,
            last_hash=after_hash,
            last_proposal=proposal.id,
        )
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
