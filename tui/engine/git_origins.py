"""Which commit last wrote each line of each memory file: the origins a memory shows.

A blame of MEMORY.md in a long history takes seconds (2.8 s for 1,400 lines and 5,000 commits,
``tests/bench/history.py``), so it is done once per file and then kept up to date as memdeck
commits: each commit maps the file's old lines onto its new ones (a one-commit diff) and the
new lines get the new commit. The result is kept in ``.memdeck/origins.json`` for the other
processes (``memdeck mcp``, the command line); a file whose committed version is not the one
kept (a sync, a hand-run ``git pull``) is blamed again.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from .fileio import PRIVATE_FILE_MODE
from .workspace import STATE_DIR

ORIGINS_FILE = "origins.json"


class LineOrigins:
    """Per memory file: the committed blob it describes and each line's commit id."""

    def __init__(self, root: Path) -> None:
        self.path = root / STATE_DIR / ORIGINS_FILE
        self._files: dict[str, tuple[str, list[str]]] | None = None
        self._lock = threading.Lock()

    def lines(self, rel: str, blob_id: str) -> list[str] | None:
        """Each line's commit of ``rel`` at blob ``blob_id``; None when not known."""
        with self._lock:
            entry = self._loaded().get(rel)
        return list(entry[1]) if entry is not None and entry[0] == blob_id else None

    def remember(self, rel: str, blob_id: str, commits: Sequence[str]) -> None:
        """Keep a blame's result: ``commits`` is each line's commit of ``rel`` at ``blob_id``."""
        with self._lock:
            self._loaded()[rel] = (blob_id, list(commits))
            self._save()

    def advance(
        self,
        changes: Sequence[tuple[str, str | None, bytes | None, str | None, bytes | None]],
        commit_id: str,
    ) -> None:
        """Follow one commit: each ``(rel, old blob, old bytes, new blob, new bytes)``. Lines
        kept from the old version keep their commit, the others get ``commit_id``; a file whose
        old version is not the one kept is forgotten (blamed again when asked)."""
        with self._lock:
            files = self._loaded()
            for rel, old_blob, old_data, new_blob, new_data in changes:
                entry = files.pop(rel, None)
                if new_blob is None or new_data is None:
                    continue
                new_lines = _lines(new_data)
                if old_blob is None:
                    files[rel] = (new_blob, [commit_id] * len(new_lines))
                elif entry is not None and entry[0] == old_blob and old_data is not None:
                    files[rel] = (
                        new_blob,
                        _carried(_lines(old_data), entry[1], new_lines, commit_id),
                    )
            self._save()

    def rename(self, old_ids: Sequence[str], new_id: str) -> None:
        """Commits ``old_ids`` became ``new_id`` (squashed into one)."""
        gone = set(old_ids)
        with self._lock:
            files = self._loaded()
            for rel, (blob, commits) in list(files.items()):
                files[rel] = (blob, [new_id if c in gone else c for c in commits])
            self._save()

    def _loaded(self) -> dict[str, tuple[str, list[str]]]:
        if self._files is None:
            self._files = {}
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for rel, entry in data.items():
                    runs = [(int(count), str(commit)) for count, commit in entry["runs"]]
                    self._files[str(rel)] = (
                        str(entry["blob"]),
                        [commit for count, commit in runs for _ in range(count)],
                    )
        return self._files

    def _save(self) -> None:
        data = {
            rel: {"blob": blob, "runs": _runs(commits)}
            for rel, (blob, commits) in (self._files or {}).items()
        }
        with contextlib.suppress(OSError):
            fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=".origins-")
            try:
                os.fchmod(fd, PRIVATE_FILE_MODE)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(data, out, separators=(",", ":"))
                os.replace(name, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(name)
                raise


def _carried(
    old_lines: list[bytes], old_commits: list[str], new_lines: list[bytes], commit_id: str
) -> list[str]:
    """``new_lines``' commits: a line kept from ``old_lines`` keeps its commit."""
    if len(old_commits) != len(old_lines):
        return [commit_id] * len(new_lines)
    commits = [commit_id] * len(new_lines)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for block in matcher.get_matching_blocks():
        commits[block.b : block.b + block.size] = old_commits[block.a : block.a + block.size]
    return commits


def _lines(data: bytes) -> list[bytes]:
    """``data``'s lines as git counts them (``\n`` ends a line)."""
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def _runs(commits: list[str]) -> list[tuple[int, str]]:
    """``commits`` as (count, commit) runs (most lines come in long runs)."""
    runs: list[tuple[int, str]] = []
    for commit in commits:
        if runs and runs[-1][1] == commit:
            runs[-1] = (runs[-1][0] + 1, commit)
        else:
            runs.append((1, commit))
    return runs
