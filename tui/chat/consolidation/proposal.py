"""What a consolidation proposes: the :class:`Proposal` with its entry changes and stats, the
result of accepting it, and the errors that stop one (nothing is written when they are raised).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from ...engine.fileio import sha256_text
from ...engine.store import MemoryEntry
from ...engine.workspace import MEMORY_FILE

STALE_MESSAGE = "MEMORY.md changed since the proposal; run consolidate again"

ChangeKind = Literal["added", "changed", "removed", "superseded", "merged"]
#: Change kinds after which an old entry is no longer in MEMORY.md as it was.
RETIRING_KINDS = ("changed", "removed", "superseded", "merged")


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


def unified_diff(before: str, after: str, path: str = MEMORY_FILE) -> str:
    """A unified diff of two versions of a memory file (empty when they are equal)."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    text = "\n".join(lines)
    return text + "\n" if text else ""
