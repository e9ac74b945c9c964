"""Undoing one change of the memory's history: :func:`revert_change` applies the inverse of a
commit to the files as they are now, line-wise, as a new ``revert`` commit, or refuses in one
line when a later change touched the same lines (nothing is half-applied)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .fileio import decode_exact, encode_exact, lock_for
from .history_records import Attribution, Change, HistoryError
from .merge import matched_lines

if TYPE_CHECKING:
    from .engine import MemoryChange, MemoryEngine

#: The origin of a revert's memory change (see :attr:`MemoryChange.origin`).
REVERT = "revert"


class RevertConflict(HistoryError):
    """A later change touched the same lines: nothing was reverted (show the change's diff)."""


@dataclass(frozen=True)
class RevertOutcome:
    """What a revert did: the change it undid, the files it wrote and the memory change."""

    reverted: Change
    files: tuple[str, ...]
    change: MemoryChange


def revert_change(engine: MemoryEngine, change_id: str) -> RevertOutcome:
    """Undo change ``change_id`` (a prefix will do) on top of the files as they are now, as a
    ``revert`` commit. Raises :class:`HistoryError` with one line when history is off, the
    change is unknown, the first commit, or a later change touched the same lines."""
    history = engine.history
    if not history.enabled:
        raise HistoryError(history.problem or "history is off for this workspace")
    change = history.change(change_id)
    parent = history.parent_id(change.id)
    if parent is None:
        raise HistoryError(f"{change.short_id} is the history's first commit: nothing to undo")
    root = engine.workspace.root
    plans: list[tuple[str, bytes | None, bytes | None]] = []
    for rel in change.files:
        after = history.file_at(change.id, rel)
        before = history.file_at(parent, rel)
        path = root / rel
        now = path.read_bytes() if path.is_file() else None
        if now == after:
            target = before  # nothing changed it since: the file as it was
        else:
            target = inverse_on(before or b"", after or b"", now or b"")
            if target is None:
                raise RevertConflict(
                    f"cannot revert {change.short_id}: {rel} was changed on the same lines "
                    "since; nothing was reverted (see its diff)"
                )
            if before is None and not target.strip():
                target = None
        plans.append((rel, now, target))
    writer = Attribution("revert", summary=f"revert {change.short_id}: {change.summary}"[:200])
    written: list[str] = []
    with engine.attributed(writer), engine.one_change(REVERT):
        for rel, seen, target in plans:
            if target == seen:
                continue
            if target is None:
                _remove(engine, rel, seen)
            else:
                engine.store.edit_file(rel, _expecting(rel, seen, target))
            written.append(rel)
        memory_change = engine.files_changed(written, origin=REVERT)
    return RevertOutcome(change, tuple(written), memory_change)


def _expecting(rel: str, seen: bytes | None, target: bytes) -> Callable[[str], str]:
    """The edit that writes ``target`` over ``rel`` if it is still ``seen``."""

    def change(text: str) -> str:
        if encode_exact(text) != (seen or b""):
            raise HistoryError(f"{rel} changed while the revert ran; nothing more was reverted")
        return decode_exact(target)

    return change


def _remove(engine: MemoryEngine, rel: str, seen: bytes | None) -> None:
    """Delete a file the reverted change created, under its lock, if it is still as seen."""
    path = engine.workspace.resolve_memory_path(rel)
    with lock_for(path):
        current = path.read_bytes() if path.is_file() else None
        if current != seen:
            raise HistoryError(f"{rel} changed while the revert ran; nothing more was reverted")
        if current is not None:
            os.remove(path)
        if engine.store.on_written is not None:
            engine.store.on_written(rel)  # committed as the revert's, with its other files


def inverse_on(before: bytes, after: bytes, now: bytes) -> bytes | None:
    """``now`` with the change ``before`` -> ``after`` undone, line-wise: each of the change's
    hunks is found in ``now`` (its lines as the change left them, or its neighbour for a
    removal) and put back as it was. None when a hunk's lines were changed since. Unlike a
    three-way merge, a change next to it (an entry appended after) is no conflict."""
    old, new, current = (data.splitlines(keepends=True) for data in (before, after, now))
    where = matched_lines(new, current)
    edits: list[tuple[int, int, list[bytes]]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:
            start = where.get(j1)
            if start is None or any(where.get(j) != start + j - j1 for j in range(j1, j2)):
                return None
            edits.append((start, start + j2 - j1, old[i1:i2]))
        elif j1 > 0 and (anchor := where.get(j1 - 1)) is not None:
            edits.append((anchor + 1, anchor + 1, old[i1:i2]))
        elif j1 < len(new) and (anchor := where.get(j1)) is not None:
            edits.append((anchor, anchor, old[i1:i2]))
        elif not new:
            edits.append((len(current), len(current), old[i1:i2]))
        else:
            return None
    for start, end, lines in sorted(edits, key=lambda edit: edit[0], reverse=True):
        current[start:end] = lines
    return b"".join(current)
