"""The activity log: what other agents did with this workspace's memory over ``memdeck mcp``.

One JSON line per call in ``.memdeck/activity.jsonl`` (private, 0600 like every file memdeck
writes): when, which client (name and version from its ``initialize``), the tool or prompt, a
short form of the arguments, whether it worked, how many results and which entries. A search
keeps its results with their score breakdown, so the app can show why each memory came back
for that agent; a forget keeps what it retired, so the app can undo it.

The log is bounded: past :data:`MAX_BYTES` the oldest lines go, keeping the newest half.
A line that cannot be read is skipped, never fatal.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..engine.fileio import append_text, lock_for, open_own_file, read_own_file
from ..engine.store import RetiredRecord
from ..engine.workspace import STATE_DIR

ACTIVITY_FILE = "activity.jsonl"
#: The log is trimmed to half of this once it grows past it.
MAX_BYTES = 512 * 1024
#: Characters of an argument kept in the short form.
MAX_ARGUMENT_CHARS = 80
#: Characters of a result's text kept in the log.
MAX_RESULT_TEXT = 300


def activity_path(root: Path | str) -> Path:
    """The activity log of the workspace at ``root``."""
    return Path(root) / STATE_DIR / ACTIVITY_FILE


def short_arguments(arguments: dict[str, Any]) -> str:
    """``query="deploy steps" maxResults=3``: each argument cut to a readable length."""
    parts = []
    for name, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
        if len(text) > MAX_ARGUMENT_CHARS:
            text = text[: MAX_ARGUMENT_CHARS - 1] + "…"
        parts.append(f"{str(name)[:40]}={text}")
    return " ".join(parts)


@dataclass(frozen=True)
class ActivityRecord:
    """One call an agent made."""

    at: str
    client: str
    kind: str  # "tool" or "prompt"
    name: str
    arguments: str
    ok: bool
    summary: str
    #: Where each entry it touched or found is: ``path#Lstart-end``.
    entries: list[str] = field(default_factory=list)
    #: A search's (or a recall's) results as :meth:`SearchResult.to_json` wrote them, text cut.
    results: list[dict[str, Any]] = field(default_factory=list)
    #: A forget's retired entries: ``{"path": …, "text": …}`` (what undo looks up).
    forgotten: list[dict[str, str]] = field(default_factory=list)
    #: The query of a search or a recall, whole (the short form cuts it).
    query: str = ""

    @property
    def time(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.at)
        except ValueError:
            return None

    @classmethod
    def from_json(cls, data: object) -> ActivityRecord | None:
        """A record as :meth:`ActivityLog.append` wrote it; None for anything malformed."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                at=str(data["at"]),
                client=str(data.get("client", "")),
                kind=str(data.get("kind", "tool")),
                name=str(data["name"]),
                arguments=str(data.get("arguments", "")),
                ok=bool(data.get("ok")),
                summary=str(data.get("summary", "")),
                entries=[str(e) for e in data.get("entries") or []],
                results=[r for r in data.get("results") or [] if isinstance(r, dict)],
                forgotten=[
                    {"path": str(f.get("path", "")), "text": str(f.get("text", ""))}
                    for f in data.get("forgotten") or []
                    if isinstance(f, dict)
                ],
                query=str(data.get("query", "")),
            )
        except (KeyError, TypeError):
            return None


def trimmed_result(result: dict[str, Any]) -> dict[str, Any]:
    """A search result's JSON with its text cut to :data:`MAX_RESULT_TEXT` characters."""
    text = str(result.get("text", ""))
    if len(text) > MAX_RESULT_TEXT:
        text = text[: MAX_RESULT_TEXT - 1] + "…"
    return {**result, "text": text}


class ActivityLog:
    """Appends to and reads the activity log of one workspace. Thread- and process-safe
    (the file's lock)."""

    def __init__(self, root: Path | str, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = activity_path(root)
        self.max_bytes = max_bytes

    def append(self, record: ActivityRecord) -> None:
        """Add ``record``; never raises for an I/O problem (the call it records has happened)."""
        line = json.dumps(asdict(record), ensure_ascii=False, default=str)
        try:
            append_text(self.path, line + "\n")
            if self.path.stat().st_size > self.max_bytes:
                self._trim()
        except OSError:
            pass

    def _trim(self) -> None:
        """Keep the newest lines that fit in half of :attr:`max_bytes`."""
        with lock_for(self.path):
            lines = self.path.read_bytes().splitlines(keepends=True)
            kept: list[bytes] = []
            size = 0
            for line in reversed(lines):
                size += len(line)
                if size > self.max_bytes // 2:
                    break
                kept.append(line)
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = open_own_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "wb") as out:
                out.writelines(reversed(kept))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)

    def read(self, limit: int | None = None) -> list[ActivityRecord]:
        """The records, oldest first (the last ``limit`` of them)."""
        try:
            data = read_own_file(self.path)
        except OSError:
            return []
        records = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = ActivityRecord.from_json(json.loads(line))
            except ValueError:
                continue
            if record is not None:
                records.append(record)
        return records[-limit:] if limit else records

    def stamp(self) -> tuple[int, int] | None:
        """``(size, mtime_ns)`` of the log, to tell cheaply whether it changed."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns


def now_iso() -> str:
    """The time of a record: local time with its offset, to the second."""
    return datetime.now(UTC).astimezone().isoformat(timespec="seconds")


def retired_by(record: ActivityRecord, retired: list[RetiredRecord]) -> list[RetiredRecord]:
    """The audit-trail records (``retired``, oldest first, not restored since) of what the
    forget ``record`` retired: for each forgotten entry, the newest one of its file whose
    text it shows (the log keeps the text cut to a few hundred characters)."""
    found: list[RetiredRecord] = []
    for gone in record.forgotten:
        cut = gone["text"].endswith("…")
        shown = gone["text"].removesuffix("…").strip()

        def shows(text: str, shown: str = shown, cut: bool = cut) -> bool:
            return text.strip().startswith(shown) if cut else text.strip() == shown

        match = next(
            (
                r
                for r in reversed(retired)
                if r.event == "forgotten"
                and r.path == gone["path"]
                and shows(r.text)
                and r not in found
            ),
            None,
        )
        if match is not None:
            found.append(match)
    return found


__all__ = [
    "ACTIVITY_FILE",
    "ActivityLog",
    "ActivityRecord",
    "activity_path",
    "now_iso",
    "retired_by",
    "short_arguments",
    "trimmed_result",
]
