"""Writing memory: entries in MEMORY.md, daily-log appends, and the audit trail.

Every app write is safe against a concurrent hand edit: MEMORY.md is read, changed and
replaced atomically under its lock, and the replacement is refused if the file changed on disk
in between (the change is then re-applied to the new content, never written over it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from .fileio import ConcurrentEditError, append_text, atomic_write_text, lock_for, sha256_bytes
from .metadata import EntryMeta, new_entry_id, with_meta
from .workspace import Workspace

MEMORY_TEMPLATE = "# Long-term Memory\n\n"
#: Attempts to re-apply an edit when MEMORY.md keeps changing underneath it.
EDIT_ATTEMPTS = 5


@dataclass(frozen=True)
class MemoryFileState:
    """MEMORY.md's text and the hash it had when read."""

    text: str
    content_hash: str


class MemoryStore:
    """Reads and writes the Markdown memory of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def read_memory(self) -> MemoryFileState:
        """MEMORY.md as it is now (empty when missing)."""
        path = self.workspace.memory_file
        data = path.read_bytes() if path.exists() else b""
        return MemoryFileState(data.decode("utf-8", errors="replace"), sha256_bytes(data))

    def edit_memory(self, change: Callable[[str], str]) -> str:
        """Apply ``change`` to MEMORY.md's text and replace the file atomically; return the new text.

        If the file changes on disk between read and write (an editor that does not take our
        lock), ``change`` is re-applied to the fresh content instead of overwriting it.
        """
        path = self.workspace.memory_file
        with lock_for(path):
            for _ in range(EDIT_ATTEMPTS):
                state = self.read_memory()
                new_text = change(state.text)
                try:
                    atomic_write_text(path, new_text, expected_hash=state.content_hash)
                    return new_text
                except ConcurrentEditError:
                    time.sleep(0.05)
        raise ConcurrentEditError(
            f"{path} kept changing while memdeck tried to update it; nothing was written"
        )

    def save_memory_text(self, text: str, expected_hash: str) -> str:
        """Replace MEMORY.md with a whole buffer (the in-app editor); refuse if it changed since read."""
        with lock_for(self.workspace.memory_file):
            return atomic_write_text(self.workspace.memory_file, text, expected_hash=expected_hash)

    def add_entry(
        self,
        content: str,
        *,
        confidence: str,
        source: str,
        day: date | None = None,
        entry_id: str | None = None,
    ) -> EntryMeta:
        """Append a bullet with metadata to MEMORY.md and return its metadata."""
        meta = EntryMeta(
            id=entry_id or new_entry_id(),
            confidence=confidence,
            source=source,
            at=day or date.today(),
        )
        lines = [line.rstrip() for line in content.strip().splitlines() if line.strip()]
        first = lines[0].lstrip("-*+ ").strip() if lines else ""
        entry = "- " + with_meta(first, meta) + "".join(f"\n  {line.strip()}" for line in lines[1:])

        def append(text: str) -> str:
            base = text if text.strip() else MEMORY_TEMPLATE
            if not base.endswith("\n"):
                base += "\n"
            return base + entry + "\n"

        self.edit_memory(append)
        return meta

    def append_daily(self, text: str, day: date | None = None) -> Path:
        """Append ``text`` to the daily log of ``day`` (today by default), creating it with a title."""
        day = day or date.today()
        path = self.workspace.daily_log(day)
        append_text(path, text.rstrip("\n") + "\n", header=f"# {day.isoformat()}\n\n")
        return path

    def record_history(self, event: str, **fields: object) -> None:
        """Append an event to the audit trail (``.memdeck/history.jsonl``)."""
        record = {"event": event, "at": datetime.now(UTC).isoformat(timespec="seconds"), **fields}
        append_text(
            self.workspace.history_path, json.dumps(record, ensure_ascii=False, default=str) + "\n"
        )
