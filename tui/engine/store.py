"""Writing memory: entries in MEMORY.md, daily-log appends, and the audit trail.

Every app write is safe against a concurrent hand edit: MEMORY.md is read, changed and
replaced atomically under its lock, and if the file changes on disk in between the change is
re-applied to the new content, never written over it (:func:`tui.engine.fileio.replace_file`).
Every read and write goes through the workspace's path guard, and an edit changes the bytes of
the entry it edits and nothing else (other lines keep their encoding, CRLF, BOM, U+2028).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import platformdirs

from .entry_place import EntryPlace, entry_place, insertion_point
from .fileio import (
    ConcurrentEditError,
    append_text,
    decode_exact,
    encode_exact,
    lock_for,
    make_private_dir,
    open_own_file,
    printable,
    read_bounded,
    read_own_file,
    replace_file,
    replace_own_file,
    sha256_bytes,
    write_all,
)
from .markdown import is_fence, is_heading, match_bullet
from .metadata import EntryMeta, escape_comment_markers, new_entry_id, split_meta, with_meta
from .workspace import MEMORY_FILE, PathRefusedError, Workspace, refuse_own_links

MEMORY_TEMPLATE = "# Long-term Memory\n\n"
#: Under ``.memdeck``: copies of unsaved editor text kept when the app is killed.
RECOVERY_DIR = "recovery"
ANNOUNCED_SUFFIX = ".announced"


def fallback_recovery_dir() -> Path:
    """Where a recovery copy goes when the workspace cannot take it: ``recovery`` in the
    platform's state folder for memdeck (``$XDG_STATE_HOME/memdeck`` on Linux)."""
    return Path(platformdirs.user_state_dir("memdeck")) / RECOVERY_DIR


def _write_new_copy(folder: Path, name: str, data: bytes) -> Path:
    """``data`` in a new private file ``folder/name`` (``-1``, ``-2``… when taken), written
    whole and fsynced; a copy cut short is removed and the error raised."""
    refuse_own_links(folder)
    make_private_dir(folder)
    for attempt in range(1000):
        path = folder / f"{name}{f'-{attempt}' if attempt else ''}"
        try:
            fd = open_own_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            continue
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        os.close(fd)
        return path
    raise FileExistsError(f"too many recovery copies named {name} in {folder}")

_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")
#: Control characters a client or model may not write: C0 but tab and newline, DEL, C1.
_WRITTEN_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CARRIAGE_RETURN = re.compile("\r\n?")


@dataclass(frozen=True)
class MemoryEntry:
    """One entry of a memory file: a bullet with its indented continuation lines, or a plain line.

    ``start``/``end`` are 1-based line numbers; ``raw`` the lines as written (with metadata);
    ``text`` the visible text, bullet marker removed, lines joined by newlines.
    """

    path: str
    start: int
    end: int
    raw: tuple[str, ...]
    text: str
    meta: EntryMeta | None = None

    @property
    def active(self) -> bool:
        """False once forgotten or superseded."""
        return self.meta is None or self.meta.active

    @property
    def entry_id(self) -> str | None:
        return self.meta.id if self.meta else None


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


@dataclass(frozen=True)
class RestoredEntry:
    """Where :meth:`MemoryStore.restore_entry` put an entry back: ``in_place`` when in its
    section (after or before its old neighbours when they are there), else at the end of
    ``path`` because its section is gone (``place`` set) or the record does not say where it
    was (``place`` None)."""

    path: str
    in_place: bool
    place: EntryPlace | None = None

    def describe(self) -> str:
        """Where it went, to follow "restored" in a message (the heading is the file's text:
        show it as text)."""
        heading = self.place.heading if self.place else ""
        if self.in_place:
            return f"where it was, under {heading}" if heading else f"where it was in {self.path}"
        if heading:
            return f"at the end of {self.path} (its section {heading} is gone)"
        return f"at the end of {self.path} (the record does not say where it was)"


@dataclass
class EntryBatch:
    """Entries to append to MEMORY.md in one atomic edit (see :meth:`MemoryStore.add_entries`)."""

    contents: Sequence[str]
    confidence: str
    source: str
    day: date | None = None
    extra: dict[str, str] = field(default_factory=dict)


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` with their endings: split on ``\\n`` only (a CR before it and U+2028
    inside a line stay part of the line), so joining them gives ``text`` back exactly."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return lines + [pieces[-1]] if pieces[-1] else lines


def line_body(line: str) -> str:
    """A line from :func:`split_lines` without its ending (``\\n`` or ``\\r\\n``)."""
    line = line[:-1] if line.endswith("\n") else line
    return line[:-1] if line.endswith("\r") else line


def file_lines(text: str) -> list[str]:
    """The lines entries are numbered by (:func:`parse_entries`): split on ``\\n`` only."""
    return [line_body(line) for line in split_lines(text)]


def parse_entries(text: str, path: str = "MEMORY.md") -> list[MemoryEntry]:
    """Split a memory file into entries (headings, blank lines and fenced code are not entries).

    Lines are split on ``\\n`` only; ``raw`` keeps each line's bytes as decoded (see
    :func:`tui.engine.fileio.decode_exact`), ``text`` is safe to show and send.
    """
    entries: list[MemoryEntry] = []
    lines = file_lines(text)
    index = 0
    in_fence = False
    while index < len(lines):
        raw = lines[index]
        visible, meta = split_meta(raw.removeprefix("\ufeff") if index == 0 else raw)
        if is_fence(visible):
            in_fence = not in_fence
            index += 1
            continue
        if in_fence or not visible.strip() or is_heading(visible):
            index += 1
            continue
        bullet = match_bullet(visible)
        block = [raw]
        texts = [visible[bullet.end() :] if bullet else visible.strip()]
        if bullet:
            indent = len(bullet.group(1))
            while index + 1 < len(lines):
                nxt = lines[index + 1]
                nxt_visible, _ = split_meta(nxt)
                nxt_indent = len(nxt_visible) - len(nxt_visible.lstrip())
                if not nxt_visible.strip() or nxt_indent <= indent:
                    break
                if match_bullet(nxt_visible) and nxt_indent <= indent:
                    break
                block.append(nxt)
                texts.append(nxt_visible.strip())
                index += 1
        start = index - len(block) + 2
        text_shown = printable("\n".join(texts).strip())
        entries.append(MemoryEntry(path, start, index + 1, tuple(block), text_shown, meta))
        index += 1
    return entries


def normalize_entry_text(text: str) -> str:
    """Lower-cased words only: how entries are compared for duplicates."""
    return " ".join(re.findall(r"\w+", text.lower()))


@dataclass(frozen=True)
class MemoryFileState:
    """MEMORY.md's text and the hash it had when read; ``notice`` says why it was not read."""

    text: str
    content_hash: str
    notice: str | None = None


class MemoryStore:
    """Reads and writes the Markdown memory of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def _guarded(self, path: Path | str) -> Path:
        """The real file behind a workspace path, through the one path guard (or refused)."""
        rel = path if isinstance(path, str) else self.workspace.relative(path)
        return self.workspace.resolve_memory_path(rel, follow=True)

    def read_memory(self) -> MemoryFileState:
        """MEMORY.md as it is now (empty when missing), for showing and injecting.

        When the path guard refuses it (a symlink out of the workspace, a loop) nothing is read:
        the state is empty and ``notice`` says why, in one line.
        """
        try:
            path = self._guarded(MEMORY_FILE)
        except PathRefusedError as exc:
            return MemoryFileState("", sha256_bytes(b""), f"{exc}; left out of the prompt")
        data = path.read_bytes() if path.exists() else b""
        return MemoryFileState(data.decode("utf-8", errors="replace"), sha256_bytes(data))

    def read_file(self, rel_path: str) -> str:
        """A memory file's text (empty when missing) through the path guard, for checks; a
        file too large to index raises :class:`~.fileio.FileTooLargeError` unread."""
        path = self._guarded(rel_path)
        if not path.exists():
            return ""
        return read_bounded(path, name=rel_path).decode("utf-8", errors="replace")

    def edit_memory(self, change: Callable[[str], str]) -> str:
        """Apply ``change`` to MEMORY.md's text and replace the file atomically; return the new text.

        If the file changes on disk between read and write (an editor that does not take our
        lock), ``change`` is re-applied to the fresh content instead of overwriting it.
        """
        return self.edit_file(MEMORY_FILE, change)

    def edit_file(self, path: Path | str, change: Callable[[str], str]) -> str:
        """:meth:`edit_memory` for any memory file (a daily log): guarded, locked, atomic,
        re-applied on a race (each race recorded in the audit trail).

        ``change`` gets the text decoded so that every byte it does not touch is written back
        as it was (see :func:`tui.engine.fileio.decode_exact`). When it returns the text
        unchanged nothing is written.
        """
        real = self._guarded(path)
        rel = path if isinstance(path, str) else self.workspace.relative(path)

        def on_conflict(detail: str) -> None:
            self.record_history("write_conflict", path=rel, detail=detail)

        with lock_for(real):
            written = replace_file(
                real,
                lambda data: encode_exact(change(decode_exact(data))),
                on_conflict=on_conflict,
            )
        return decode_exact(written)

    def save_recovery_copy(self, text: str, when: datetime | None = None) -> Path:
        """Keep unsaved editor text in ``.memdeck/recovery/MEMORY.md.<time>`` (a new private
        file, never MEMORY.md itself): what a quit by signal leaves instead of losing it.

        The copy is written whole and fsynced, or removed. When the workspace cannot take it
        (a full disk, a link, no permission) the platform's state folder for memdeck is tried
        next (:func:`fallback_recovery_dir`, private). Returns where the copy is; raises
        OSError naming every place tried when none could take it.
        """
        stamp = (when or datetime.now()).strftime("%Y-%m-%d-%H%M%S")
        data = encode_exact(text)
        failures: list[str] = []
        for folder in (self.workspace.state_dir / RECOVERY_DIR, fallback_recovery_dir()):
            try:
                return _write_new_copy(folder, f"{MEMORY_FILE}.{stamp}", data)
            except OSError as exc:
                failures.append(f"{folder}: {exc.strerror or exc}")
        raise OSError(f"no recovery copy could be written ({'; '.join(failures)})")

    def unannounced_recovery_copies(self) -> list[Path]:
        """Recovery copies the user has not been told about yet (oldest first); each is marked
        told by :meth:`mark_recovery_announced`."""
        folder = self.workspace.state_dir / RECOVERY_DIR
        if folder.is_symlink() or not folder.is_dir():
            return []
        copies = sorted(folder.glob(f"{MEMORY_FILE}.*"))
        return [
            p
            for p in copies
            if not p.name.endswith(ANNOUNCED_SUFFIX)
            and not p.with_name(p.name + ANNOUNCED_SUFFIX).exists()
        ]

    def mark_recovery_announced(self, path: Path) -> None:
        """Remember that the user was told about the recovery copy ``path``."""
        os.close(open_own_file(path.with_name(path.name + ANNOUNCED_SUFFIX), os.O_CREAT))

    def save_memory_text(self, text: str, expected_hash: str) -> str:
        """Replace MEMORY.md with a whole buffer (the in-app editor); return the new hash.

        Refused with :class:`ConcurrentEditError` if the file changed since it was read, or
        is saved by another program while this write runs (that version stays in place).
        """

        def whole(current: str) -> str:
            if sha256_bytes(encode_exact(current)) != expected_hash:
                raise ConcurrentEditError(
                    "MEMORY.md was changed on disk since it was read; not overwriting it"
                )
            return text

        return sha256_bytes(encode_exact(self.edit_memory(whole)))

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
        entry = format_entry(content, meta)
        self.edit_memory(lambda text: _append_entries(text, [entry]))
        return meta

    def add_entries(
        self,
        batch: EntryBatch,
        *,
        unless_tagged: tuple[str, str] | None = None,
        keep: Callable[[str, Sequence[str]], Sequence[str]] | None = None,
    ) -> list[EntryMeta]:
        """Append several entries to MEMORY.md in one atomic edit and return their metadata.

        ``batch.extra`` rides along in every entry's metadata. With ``unless_tagged=(key, value)``
        the edit is a no-op (returns ``[]``) when an entry already carries that tag: this makes
        a replayed write (a flush recovering after a crash) idempotent. ``keep(text, contents)``
        picks the contents still worth adding to MEMORY.md's current ``text``; it runs under
        the file's lock, so two writers never both add the same thing.
        """
        written: list[EntryMeta] = []

        def append(text: str) -> str:
            written.clear()
            if unless_tagged and has_tag(text, *unless_tagged):
                return text
            contents = list(keep(text, batch.contents) if keep else batch.contents)
            metas = [
                EntryMeta(
                    id=new_entry_id(),
                    confidence=batch.confidence,
                    source=batch.source,
                    at=batch.day or date.today(),
                    extra=dict(batch.extra),
                )
                for _ in contents
            ]
            written.extend(metas)
            entries = [format_entry(c, m) for c, m in zip(contents, metas, strict=True)]
            return _append_entries(text, entries) if entries else text

        self.edit_memory(append)
        return list(written)

    def entries(self, rel_path: str = MEMORY_FILE) -> list[MemoryEntry]:
        """The entries of a memory file (active and inactive), read through the path guard."""
        return parse_entries(self._text_of(rel_path), rel_path)

    def _text_of(self, rel_path: str) -> str:
        """A memory file's text as decoded exactly, through the path guard ("" when missing)."""
        path = self._guarded(rel_path)
        return decode_exact(path.read_bytes()) if path.exists() else ""

    def retire_entries(
        self,
        entries: Sequence[MemoryEntry],
        *,
        state: str,
        reason: str = "",
        replaced_by: str | None = None,
    ) -> list[MemoryEntry]:
        """Soft-delete entries: ``state`` is ``forgotten`` or ``superseded``.

        Entries of MEMORY.md are moved out of the file into the audit trail (history first, so
        a crash in between never loses the text). Entries of daily logs stay in place, each line
        marked ``state=...`` so it is never indexed again. Survives a reindex either way.
        Returns the entries actually retired (those still found unchanged in their file).
        """
        by_path: dict[str, list[MemoryEntry]] = {}
        for entry in entries:
            by_path.setdefault(entry.path, []).append(entry)
        retired: list[MemoryEntry] = []
        for rel_path, chosen in by_path.items():
            chosen = sorted(chosen, key=lambda e: e.start)  # an undo then restores top down
            places = self._places(rel_path, chosen)
            for entry, place in zip(chosen, places, strict=True):
                self.record_history(
                    state,
                    path=rel_path,
                    lines=f"{entry.start}-{entry.end}",
                    text=entry.text,
                    raw="\n".join(entry.raw),
                    entry_id=entry.entry_id,
                    reason=reason,
                    replaced_by=replaced_by,
                    **({"place": place.as_record()} if place else {}),
                )
            done: list[MemoryEntry] = []
            self.edit_file(
                rel_path,
                functools.partial(_retire_in_text, chosen=chosen, state=state, done=done),
            )
            retired.extend(done)
        return retired

    def _places(self, rel_path: str, chosen: Sequence[MemoryEntry]) -> list[EntryPlace | None]:
        """Where each of ``chosen`` is in MEMORY.md now (None: not found, or a daily log,
        whose entries are marked in place)."""
        if rel_path != MEMORY_FILE:
            return [None] * len(chosen)
        text = self._text_of(rel_path)
        bodies = file_lines(text)
        blocks = [(entry.start - 1, entry.raw) for entry in parse_entries(text, rel_path)]
        unterminated = bool(text) and not text.endswith("\n")
        places: list[EntryPlace | None] = []
        for entry in chosen:
            at = _find_block(bodies, entry)
            places.append(
                None
                if at is None
                else entry_place(bodies, blocks, at, len(entry.raw), unterminated=unterminated)
            )
        return places

    def retired_texts(self) -> set[str]:
        """Normalised texts of every forgotten or superseded entry in the audit trail (not
        restored since)."""
        return {normalize_entry_text(r.text) for r in self.retired_records() if r.text}

    def retired_records(self) -> list[RetiredRecord]:
        """The entries the audit trail says were forgotten or superseded and not restored
        since, oldest first."""
        path = self.workspace.history_path
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

    def restore_entry(self, record: RetiredRecord) -> RestoredEntry | None:
        """Undo a forget (or a supersede): a MEMORY.md entry goes back as it was written where
        it was (see :mod:`tui.engine.entry_place`; at the end when its section is gone), a
        daily-log entry loses its ``state=`` mark. Every other byte of the file is kept. None
        when it is already back or its marked lines are no longer in the file (edited by hand
        since); nothing is written then."""
        restored: list[RestoredEntry] = []

        def change(text: str) -> str:
            restored.clear()
            raw_lines = record.raw.split("\n")
            lines = split_lines(text)
            bodies = [line_body(line) for line in lines]
            if record.path == MEMORY_FILE:
                size = len(raw_lines)
                if any(bodies[i : i + size] == raw_lines for i in range(len(bodies))):
                    return text  # already there
                place = record.place
                at = None
                if place is not None:
                    blocks = [(e.start - 1, e.raw) for e in parse_entries(text, record.path)]
                    at = insertion_point(bodies, blocks, place)
                restored.append(RestoredEntry(record.path, at is not None, place))
                if at is None:
                    return _append_entries(text, ["\n".join(raw_lines)])
                unterminated = place is not None and place.unterminated
                return _insert_lines(text, lines, at, raw_lines, unterminated=unterminated)
            marked = [_mark_line(raw, record.event) for raw in raw_lines]
            size = len(marked)
            at = next((i for i in range(len(bodies)) if bodies[i : i + size] == marked), None)
            if at is None:
                return text
            for offset, raw in enumerate(raw_lines):
                lines[at + offset] = raw + lines[at + offset][len(marked[offset]) :]
            restored.append(RestoredEntry(record.path, True))
            return "".join(lines)

        self.edit_file(record.path, change)
        if restored:
            self.record_history(
                "restored", restores=record.number, path=record.path, text=record.text
            )
        return restored[0] if restored else None

    def append_daily(self, text: str, day: date | None = None) -> Path:
        """Append ``text`` to the daily log of ``day`` (today by default), creating it with a title."""
        day = day or date.today()
        path = self.workspace.daily_log(day)
        real = self._guarded(path)
        text = without_nul(text)
        append_text(real, text.rstrip("\n") + "\n", header=f"# {day.isoformat()}\n\n")
        return path

    def record_history(self, event: str, **fields: object) -> None:
        """Append an event to the audit trail (``.memdeck/history.jsonl``).

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
        path = self.workspace.history_path
        append_text(path, line + "\n")
        with contextlib.suppress(OSError):  # the event is recorded; compaction can wait
            size = path.stat().st_size
            added = len(line.encode("utf-8", errors="surrogateescape")) + 1
            if size // HISTORY_COMPACT_BYTES > (size - added) // HISTORY_COMPACT_BYTES:
                with lock_for(path):
                    data = read_own_file(path)
                    compacted = encode_exact(compacted_history(decode_exact(data)))
                    if compacted != data:
                        replace_own_file(path, compacted)


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


def without_nul(text: str) -> str:
    """``text`` without NUL characters: written into a memory file, one would make tools take
    the whole file for binary."""
    return text.replace("\x00", "") if "\x00" in text else text


def without_controls(text: str) -> tuple[str, str | None]:
    """``text`` without control characters other than newline and tab (C0, DEL, C1), and a
    line saying what was removed (None when nothing was)."""
    controls = _WRITTEN_CONTROL.findall(text)
    if not controls:
        return text, None
    kinds = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(controls))
    plural = "s" if len(controls) != 1 else ""
    note = f"removed {len(controls)} control character{plural} ({kinds})"
    return _WRITTEN_CONTROL.sub("", text), note


@dataclass(frozen=True)
class CleanedText:
    """Text from a client or a model as it may be written, and what was changed (one line each)."""

    text: str
    changes: tuple[str, ...] = ()


def clean_written_text(text: str) -> CleanedText:
    """``text`` a client or the model asked to write, made fit for a memory file.

    Control characters other than newline and tab (C0, DEL, C1: escape sequences, bells, the
    8-bit CSI) are removed, so nothing written can reach a terminal as control; line breaks
    (CR LF, CR) become newlines; ``<!--`` and ``-->`` are escaped, so the text cannot forge
    or swallow an entry's metadata comment. Files the user writes are never passed through
    this: their bytes are theirs.
    """
    text, removed = without_controls(_CARRIAGE_RETURN.sub("\n", text))
    changes = [removed] if removed else []
    text, escaped = escape_comment_markers(text)
    if escaped:
        changes.append(
            f"escaped {escaped} comment marker{'s' if escaped != 1 else ''} "
            "('<!--' or '-->'), which would open or close the entry's metadata comment"
        )
    return CleanedText(text, tuple(changes))


def format_entry(content: str, meta: EntryMeta) -> str:
    """A MEMORY.md bullet carrying ``meta``; extra lines of ``content`` become indented
    continuations. ``content`` (from a client or the model) goes through
    :func:`clean_written_text` first."""
    cleaned = clean_written_text(content).text
    lines = [line.rstrip() for line in cleaned.strip().splitlines() if line.strip()]
    first = lines[0].lstrip("-*+ ").strip() if lines else ""
    return "- " + with_meta(first, meta) + "".join(f"\n  {line.strip()}" for line in lines[1:])


def has_tag(text: str, key: str, value: str) -> bool:
    """True when a line of ``text`` carries metadata with ``key=value``."""
    if value not in text:
        return False
    for line in text.splitlines():
        _, meta = split_meta(line)
        if meta is not None and meta.extra.get(key) == value:
            return True
    return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _append_entries(text: str, entries: Sequence[str]) -> str:
    """``text`` with ``entries`` added at the end, in the file's own line endings."""
    base = text if text.strip() else MEMORY_TEMPLATE
    newline = _newline_of(base)
    if not base.endswith("\n"):
        base += newline
    return base + "".join(entry.replace("\n", newline) + newline for entry in entries)


def _newline_of(text: str) -> str:
    """The line ending most of ``text``'s lines have."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def _insert_lines(
    text: str, lines: list[str], at: int, new: Sequence[str], *, unterminated: bool = False
) -> str:
    """``text`` (split as ``lines``) with the line bodies ``new`` inserted before line ``at``,
    in the file's own line endings; every other byte is kept. ``unterminated``: the last new
    line gets no line ending when it ends a file that ends with one (as it was written)."""
    newline = _newline_of(text)
    added = [body + newline for body in new]
    if unterminated and at == len(lines) and (not text or text.endswith("\n")):
        added[-1] = new[-1]
    lines = list(lines)
    if at == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += newline  # the last line had no ending: the entry goes on a line of its own
    if at == 0 and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # the byte-order mark stays at the very start
        added[0] = "\ufeff" + added[0]
    return "".join([*lines[:at], *added, *lines[at:]])


def _find_block(lines: list[str], entry: MemoryEntry) -> int | None:
    """Where ``entry.raw`` is in ``lines`` (bodies) now: its recorded place, else the nearest match."""
    size = len(entry.raw)
    expected = entry.start - 1
    if lines[expected : expected + size] == list(entry.raw):
        return expected
    matches = [i for i in range(len(lines) - size + 1) if lines[i : i + size] == list(entry.raw)]
    return min(matches, key=lambda i: abs(i - expected)) if matches else None


def _retire_in_text(
    text: str, chosen: Sequence[MemoryEntry], state: str, done: list[MemoryEntry]
) -> str:
    """Remove MEMORY.md entries, or mark daily-log entries ``state=...``; ``done`` gets those found.

    Only the lines of the chosen entries change; every other byte is kept.
    """
    done.clear()
    lines = split_lines(text)
    bodies = [line_body(line) for line in lines]
    for entry in sorted(chosen, key=lambda e: -e.start):
        at = _find_block(bodies, entry)
        if at is None:
            continue
        done.append(entry)
        if entry.path == MEMORY_FILE:
            del lines[at : at + len(entry.raw)]
            del bodies[at : at + len(entry.raw)]
        else:
            for offset, raw in enumerate(entry.raw):
                ending = lines[at + offset][len(raw) :]
                lines[at + offset] = _mark_line(raw, state) + ending
                bodies[at + offset] = line_body(lines[at + offset])
    return "".join(lines)


def _mark_line(raw: str, state: str) -> str:
    """``raw`` with its metadata's state set (a comment is added to lines without one)."""
    visible, meta = split_meta(raw)
    if not visible.strip():
        return raw
    return with_meta(visible, (meta or EntryMeta()).with_state(state))
