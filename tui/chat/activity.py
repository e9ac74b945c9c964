"""The activity log: what other agents did with this workspace's memory over ``memdeck mcp``.

One JSON line per call in ``.memdeck/activity.jsonl`` (private, 0600 like every file memdeck
writes): when, which client (name and version from its ``initialize``), the tool or prompt, a
short form of the arguments, whether it worked, how many results and which entries. A search
keeps its results with their score breakdown, so the app can show why each memory came back
for that agent; a forget keeps what it retired, so the app can undo it.

The log is bounded: every field of a record is cut to a bound before it is written (a client
name, an argument, a 600 KB query: :meth:`ActivityRecord.bounded`), and past :data:`MAX_BYTES`
the oldest lines go, keeping the newest that fit in half of it, the records of forgets and
supersedes first (what undo and the MCP forget budget read). A line that cannot be read is
skipped, never fatal.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..engine.fileio import append_text, lock_for, read_own_file, replace_own_file
from ..engine.store import RetiredRecord
from ..engine.workspace import STATE_DIR

ACTIVITY_FILE = "activity.jsonl"
#: The log is trimmed to half of this once it grows past it.
MAX_BYTES = 512 * 1024
#: Characters of an argument kept in the short form.
MAX_ARGUMENT_CHARS = 80
#: Characters of a result's text kept in the log.
MAX_RESULT_TEXT = 300
#: Characters kept of a client's name and version.
MAX_CLIENT_CHARS = 200
#: Characters kept of any other text field (the arguments' short form, a query, a summary,
#: each entry).
MAX_FIELD_CHARS = 1_000
#: Items kept of a record's lists (entries, results, forgotten).
MAX_LIST_ITEMS = 50
#: How a save's entries name an entry it superseded.
SUPERSEDED_PREFIX = "superseded: "


def activity_path(root: Path | str) -> Path:
    """The activity log of the workspace at ``root``."""
    return Path(root) / STATE_DIR / ACTIVITY_FILE


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_arguments(arguments: dict[str, Any]) -> str:
    """``query="deploy steps" maxResults=3``: each argument cut to a readable length, the
    whole to :data:`MAX_FIELD_CHARS`."""
    parts = []
    size = 0
    for name, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
        parts.append(f"{str(name)[:40]}={cut_text(text, MAX_ARGUMENT_CHARS)}")
        size += len(parts[-1]) + 1
        if size > MAX_FIELD_CHARS:  # thousands of arguments: stop reading them
            break
    return cut_text(" ".join(parts), MAX_FIELD_CHARS)


def _bounded_json(value: Any, limit: int) -> Any:
    """``value`` with every string in it cut to ``limit`` and every list to
    :data:`MAX_LIST_ITEMS`."""
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, dict):
        return {cut_text(str(k), limit): _bounded_json(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded_json(item, limit) for item in value[:MAX_LIST_ITEMS]]
    return value


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

    @property
    def retired(self) -> int:
        """Entries this call retired: forgotten, or superseded by a save."""
        if not self.ok:
            return 0
        superseded = sum(1 for e in self.entries if e.startswith(SUPERSEDED_PREFIX))
        return len(self.forgotten) + superseded

    def bounded(self) -> ActivityRecord:
        """This record with every field cut to its bound (what :meth:`ActivityLog.append`
        writes): text from a client is never written whole."""
        return replace(
            self,
            at=self.at[:40],
            client=cut_text(self.client, MAX_CLIENT_CHARS),
            kind=self.kind[:20],
            name=cut_text(self.name, MAX_ARGUMENT_CHARS),
            arguments=cut_text(self.arguments, MAX_FIELD_CHARS),
            summary=cut_text(self.summary, MAX_FIELD_CHARS),
            entries=[cut_text(e, MAX_FIELD_CHARS) for e in self.entries[:MAX_LIST_ITEMS]],
            results=[
                _bounded_json(trimmed_result(r), MAX_RESULT_TEXT)
                for r in self.results[:MAX_LIST_ITEMS]
            ],
            forgotten=[_bounded_json(f, MAX_FIELD_CHARS) for f in self.forgotten[:MAX_LIST_ITEMS]],
            query=cut_text(self.query, MAX_FIELD_CHARS),
        )

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
    return {**result, "text": cut_text(str(result.get("text", "")), MAX_RESULT_TEXT)}


class ActivityLog:
    """Appends to and reads the activity log of one workspace. Thread- and process-safe
    (the file's lock)."""

    def __init__(self, root: Path | str, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = activity_path(root)
        self.max_bytes = max_bytes

    def append(self, record: ActivityRecord) -> None:
        """Add ``record``, each field cut to its bound (:meth:`ActivityRecord.bounded`); never
        raises for an I/O problem (the call it records has happened)."""
        line = json.dumps(asdict(record.bounded()), ensure_ascii=False, default=str)
        try:
            append_text(self.path, line + "\n")
            if self.path.stat().st_size > self.max_bytes:
                self._trim()
        except OSError:
            pass

    def _trim(self) -> None:
        """Keep the newest lines that fit in half of :attr:`max_bytes`: first the records of
        calls that retired entries (undo and the MCP forget budget need them), then the
        rest, in their order. A line too long to ever fit is passed over, never the cause
        of dropping everything."""
        with lock_for(self.path):
            lines = read_own_file(self.path).splitlines(keepends=True)
            replace_own_file(self.path, b"".join(_newest_that_fit(lines, self.max_bytes // 2)))

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
            except (ValueError, RecursionError):
                continue
            if record is not None:
                records.append(record)
        return records[-limit:] if limit else records

    def retired_since(self, since: datetime) -> int:
        """Entries the logged calls retired at ``since`` or later (a time with its offset)."""
        total = 0
        for record in self.read():
            when = record.time
            if when is None or not record.retired:
                continue
            if when.tzinfo is None:
                when = when.astimezone()
            if when >= since:
                total += record.retired
        return total

    def stamp(self) -> tuple[int, int] | None:
        """``(size, mtime_ns)`` of the log, to tell cheaply whether it changed."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns


def _newest_that_fit(lines: list[bytes], budget: int) -> list[bytes]:
    """The newest of ``lines`` that fit in ``budget`` bytes, in their order: first those of
    calls that retired entries, then the others."""
    retiring = [i for i, line in enumerate(lines) if _retires(line)]
    others = sorted(set(range(len(lines))) - set(retiring))
    kept: set[int] = set()
    size = 0
    for wanted in (retiring, others):
        for i in reversed(wanted):
            if len(lines[i]) > budget:
                continue  # never fits (an old, unbounded line): pass over it
            if size + len(lines[i]) > budget:
                break
            kept.add(i)
            size += len(lines[i])
    return [lines[i] for i in sorted(kept)]


def _retires(line: bytes) -> bool:
    """True when the log line is a call that retired entries."""
    try:
        record = ActivityRecord.from_json(json.loads(line))
    except (ValueError, RecursionError):
        return False
    return record is not None and record.retired > 0


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
    "SUPERSEDED_PREFIX",
    "activity_path",
    "cut_text",
    "now_iso",
    "retired_by",
    "short_arguments",
    "trimmed_result",
]
