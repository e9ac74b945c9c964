"""Writing memory: entries in MEMORY.md, daily-log appends, and the audit trail.

Every app write is safe against a concurrent hand edit: MEMORY.md is read, changed and
replaced atomically under its lock, and if the file changes on disk in between the change is
re-applied to the new content, never written over it (:func:`tui.engine.fileio.replace_file`).
Every read and write goes through the workspace's path guard, and an edit changes the bytes of
the entry it edits and nothing else (other lines keep their encoding, CRLF, BOM, U+2028).

What a file's text is made of and the pure edits on it are in :mod:`.entries`, the audit trail
in :mod:`.history`, the cleaning of text from a client or a model in :mod:`.written_text`;
the names callers use with the store are exported from here too (``__all__``).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path

import platformdirs

from .entries import (
    MemoryEntry,
    append_entries,
    file_lines,
    find_block,
    format_entry,
    has_tag,
    insert_lines,
    line_body,
    mark_line,
    normalize_entry_text,
    parse_entries,
    retire_in_text,
    split_lines,
)
from .entry_place import EntryPlace, append_saved, entry_place, insertion_point
from .fileio import (
    ConcurrentEditError,
    append_text,
    decode_exact,
    encode_exact,
    lock_for,
    make_private_dir,
    open_own_file,
    read_bounded,
    replace_file,
    sha256_bytes,
    write_all,
)
from .history import (
    HISTORY_COMPACT_BYTES,
    MAX_HISTORY_NOTE_CHARS,
    RetiredRecord,
    append_history,
    read_retired_records,
)
from .managed_regions import (
    ManagedRegion,
    ReadOnlyRegionError,
    managed_regions,
    markers_above,
    region_holding,
)
from .metadata import EntryMeta, new_entry_id
from .workspace import MEMORY_FILE, PathRefusedError, Workspace, refuse_own_links
from .written_text import CleanedText, clean_written_text, without_controls, without_nul

__all__ = [
    # defined here
    "ANNOUNCED_SUFFIX",
    "RECOVERY_DIR",
    "EntryBatch",
    "MemoryFileState",
    "MemoryStore",
    "RestoredEntry",
    "fallback_recovery_dir",
    # the vocabulary of memory files and of the audit trail, from the modules beside this one
    "HISTORY_COMPACT_BYTES",
    "MAX_HISTORY_NOTE_CHARS",
    "CleanedText",
    "MemoryEntry",
    "RetiredRecord",
    "clean_written_text",
    "file_lines",
    "format_entry",
    "has_tag",
    "normalize_entry_text",
    "parse_entries",
    "split_lines",
    "without_controls",
    "without_nul",
]

#: Under ``.memdeck``: copies of unsaved editor text kept when the app is killed.
RECOVERY_DIR = "recovery"
ANNOUNCED_SUFFIX = ".announced"


def _managed_reason(
    bodies: Sequence[str], regions: Sequence[ManagedRegion], entry: MemoryEntry
) -> str | None:
    """Why ``entry`` may not be changed (it is in one of ``regions``), else None."""
    at = find_block(list(bodies), entry)
    if at is None:
        return None
    region = region_holding(regions, at, at + len(entry.raw) - 1)
    if region is None:
        return None
    return (
        f"{entry.path}#L{at + 1} is inside {region.describe(entry.path)}, which another tool "
        "manages and rewrites: memdeck leaves it as it is"
    )


def _with_markers(bodies: list[str], chosen: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """MEMORY.md entries (its lines: ``bodies``) with the marker lines above them (another
    tool's key for the entry: removed with it, so none is left pointing at nothing; restored
    with it)."""
    grown: list[MemoryEntry] = []
    for entry in chosen:
        at = find_block(bodies, entry)
        count = markers_above(bodies, at) if at is not None else 0
        grown.append(
            replace(entry, start=entry.start - count, raw=(*bodies[at - count : at], *entry.raw))
            if at is not None and count
            else entry
        )
    return grown


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
        #: Called with a file's workspace path once a write to it is durable, still under the
        #: file's lock (the engine commits it to the history there).
        self.on_written: Callable[[str], object] | None = None
        #: Called with a file's workspace path under its lock just before a write to it (the
        #: engine commits an outside edit it has not seen yet, so the write's commit is only
        #: the write).
        self.before_write: Callable[[str], object] | None = None
        #: The MEMORY.md heading saves go under (``[memory] save_heading``); None: see
        #: :func:`~tui.engine.entry_place.save_point`.
        self.save_heading: str | None = None

    def _before(self, rel: str) -> None:
        if self.before_write is not None:
            self.before_write(rel)

    def _written(self, rel: str) -> None:
        if self.on_written is not None:
            self.on_written(rel)

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
            self._before(rel)
            written = replace_file(
                real,
                lambda data: encode_exact(change(decode_exact(data))),
                on_conflict=on_conflict,
            )
            self._written(rel)  # an unchanged file makes no commit
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
        self.edit_memory(lambda text: append_saved(text, [entry], self.save_heading))
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
            return append_saved(text, entries, self.save_heading) if entries else text

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
        a crash in between never loses the text), with the marker lines another tool keeps
        above them (:func:`~tui.engine.managed_regions.markers_above`). Entries of daily logs
        stay in place, each line marked ``state=...`` so it is never indexed again. Survives a
        reindex either way. Returns the entries actually retired (those still found unchanged
        in their file). An entry inside a region another tool manages is refused with
        :class:`~tui.engine.managed_regions.ReadOnlyRegionError`, and nothing is retired.
        """
        by_path: dict[str, list[MemoryEntry]] = {}
        for entry in entries:
            by_path.setdefault(entry.path, []).append(entry)
        texts = {rel_path: self._text_of(rel_path) for rel_path in by_path}
        for rel_path, chosen in by_path.items():
            self._refuse_managed(texts[rel_path], chosen)
        retired: list[MemoryEntry] = []
        for rel_path, chosen in by_path.items():
            chosen = sorted(chosen, key=lambda e: e.start)  # an undo then restores top down
            if rel_path == MEMORY_FILE:
                chosen = _with_markers(file_lines(texts[rel_path]), chosen)
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
                functools.partial(self._retire_in, chosen=chosen, state=state, done=done),
            )
            retired.extend(done)
        return retired

    def read_only_reasons(self, entries: Sequence[MemoryEntry]) -> list[str | None]:
        """For each entry, why memdeck may not change it (it is inside a region another tool
        manages: one line), else None."""
        regions: dict[str, tuple[list[str], list[ManagedRegion]]] = {}
        reasons: list[str | None] = []
        for entry in entries:
            if entry.path not in regions:
                bodies = file_lines(self._text_of(entry.path))
                regions[entry.path] = (bodies, managed_regions(bodies))
            bodies, found = regions[entry.path]
            reasons.append(_managed_reason(bodies, found, entry))
        return reasons

    def _retire_in(
        self, text: str, chosen: Sequence[MemoryEntry], state: str, done: list[MemoryEntry]
    ) -> str:
        self._refuse_managed(text, chosen)  # under the lock: as the file is now
        return retire_in_text(text, chosen, state, done)

    def _refuse_managed(self, text: str, chosen: Sequence[MemoryEntry]) -> None:
        bodies = file_lines(text)
        found = managed_regions(bodies)
        for entry in chosen:
            reason = _managed_reason(bodies, found, entry)
            if reason:
                raise ReadOnlyRegionError(reason)

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
            at = find_block(bodies, entry)
            places.append(
                None
                if at is None
                else entry_place(bodies, blocks, at, len(entry.raw), unterminated=unterminated)
            )
        return places

    def retired_records(self) -> list[RetiredRecord]:
        """The entries the audit trail says were forgotten or superseded and not restored
        since, oldest first."""
        return read_retired_records(self.workspace.history_path)

    def retired_texts(self) -> set[str]:
        """Normalised texts of every forgotten or superseded entry in the audit trail (not
        restored since)."""
        return {normalize_entry_text(r.text) for r in self.retired_records() if r.text}

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
                    return append_entries(text, ["\n".join(raw_lines)])
                unterminated = place is not None and place.unterminated
                return insert_lines(text, lines, at, raw_lines, unterminated=unterminated)
            marked = [mark_line(raw, record.event) for raw in raw_lines]
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
        rel = self.workspace.relative(path)
        append_text(
            real,
            text.rstrip("\n") + "\n",
            header=f"# {day.isoformat()}\n\n",
            before=lambda: self._before(rel),
            after=lambda: self._written(rel),
        )
        return path

    def record_history(self, event: str, **fields: object) -> None:
        """Append an event to the audit trail (see :func:`~tui.engine.history.append_history`)."""
        append_history(self.workspace.history_path, event, **fields)
