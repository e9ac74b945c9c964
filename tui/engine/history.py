"""The audit trail, ``.memdeck/history.jsonl``: one JSON record a line for each forget,
supersede, restore and write conflict, kept so that nothing retired is ever lost.

A record's number is its line (``memdeck forgotten --restore N`` and the ``restored``
records count lines), so compaction blanks records instead of removing them.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .entry_place import EntryPlace
from .fileio import (
    append_text,
    decode_exact,
    encode_exact,
    lock_for,
    read_own_file,
    replace_own_file,
)

_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")


@dataclass(frozen=True)
class RetiredRecord:
    """A forgotten or superseded entry as the audit trail keeps it; ``number`` is its line in
    ``.memdeck/history.jsonl`` (what ``memdeck forgotten --restore`` takes)."""

    number: int
    event: str
    at: str
    path: str
    text: str
    raw: str
    reason: str
    #: Where a MEMORY.md entry was (None in records written before places were kept).
    place: EntryPlace | None = None


#: Each time the audit trail grows past another multiple of this size, it is compacted.
HISTORY_COMPACT_BYTES = 4 * 1024 * 1024
#: Fields of an audit record that are notes about it, cut to :data:`MAX_HISTORY_NOTE_CHARS`.
HISTORY_NOTES = frozenset({"reason", "detail", "replaced_by"})
MAX_HISTORY_NOTE_CHARS = 2_000


def _cut_note(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_HISTORY_NOTE_CHARS:
        return value[: MAX_HISTORY_NOTE_CHARS - 1] + "…"
    return value


def compacted_history(text: str) -> str:
    """The audit trail ``text`` with the records no restore needs blanked: a forget or
    supersede restored since together with its ``restored`` record, and write conflicts.
    Blanked records stay as empty lines, so every record keeps its number (``memdeck
    forgotten --restore N`` and the ``restored`` records count lines)."""
    lines = text.splitlines(keepends=True)
    retires: set[int] = set()
    restores: dict[int, int] = {}
    blank: set[int] = set()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        event = record.get("event") if isinstance(record, dict) else None
        if event in ("forgotten", "superseded"):
            retires.add(number)
        elif event == "restored" and isinstance(record.get("restores"), int):
            restores[number] = record["restores"]
        elif event == "write_conflict":
            blank.add(number)
    for number, target in restores.items():
        if target in retires:
            blank.update((number, target))
    return "".join("\n" if n in blank else line for n, line in enumerate(lines, start=1))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def append_history(trail: Path, event: str, /, **fields: object) -> None:
    """Append an event to the audit trail ``trail`` (``.memdeck/history.jsonl``); the
    record's fields may name a ``path`` (the memory file it is about).

    The trail is bounded without ever losing what a restore needs: a record's notes (a
    forget's reason holds a client's query) are cut to :data:`MAX_HISTORY_NOTE_CHARS`
    (what was retired, ``text`` and ``raw``, is kept whole), and each time the file grows
    past another :data:`HISTORY_COMPACT_BYTES` the records no restore needs are blanked
    (:func:`compacted_history`)."""
    fields = {
        key: _cut_note(value) if key in HISTORY_NOTES else value
        for key, value in fields.items()
    }
    record = {"event": event, "at": datetime.now(UTC).isoformat(timespec="seconds"), **fields}
    line = json.dumps(record, ensure_ascii=False, default=str)
    if not line.isascii() and not _encodable(line):  # undecodable bytes of a memory file
        line = json.dumps(record, default=str)
    # Readers split the file with str.splitlines: escape the line breaks JSON leaves raw.
    line = _LINE_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
    append_text(trail, line + "\n")
    with contextlib.suppress(OSError):  # the event is recorded; compaction can wait
        size = trail.stat().st_size
        added = len(line.encode("utf-8", errors="surrogateescape")) + 1
        if size // HISTORY_COMPACT_BYTES > (size - added) // HISTORY_COMPACT_BYTES:
            with lock_for(trail):
                data = read_own_file(trail)
                compacted = encode_exact(compacted_history(decode_exact(data)))
                if compacted != data:
                    replace_own_file(trail, compacted)


def read_retired_records(path: Path) -> list[RetiredRecord]:
    """The entries the audit trail ``path`` says were forgotten or superseded and not restored
    since, oldest first."""
    if not path.exists():
        return []
    found: dict[int, RetiredRecord] = {}
    lines = read_own_file(path).decode("utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        event = record.get("event")
        if event in ("forgotten", "superseded") and (record.get("raw") or record.get("text")):
            found[number] = RetiredRecord(
                number,
                str(event),
                str(record.get("at", "")),
                str(record.get("path", "")),
                str(record.get("text", "")),
                str(record.get("raw") or f"- {record.get('text')}"),
                str(record.get("reason") or ""),
                EntryPlace.from_record(record.get("place")),
            )
        elif event == "restored" and isinstance(record.get("restores"), int):
            found.pop(record["restores"], None)
    return list(found.values())
