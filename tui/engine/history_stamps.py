"""The memory files as memdeck last saw them committed, so a start finds outside edits
without ``git status`` (nor pygit2) when there are none.

After each commit memdeck makes, and after a ``git status`` that found a file as committed,
each file's stamp (size, mtime, ctime, inode, from ``lstat``) is kept with the HEAD it was
seen at, in ``.memdeck/history-files.json`` (0600, replaced whole). A start whose HEAD and
files all match it has nothing to commit; anything else (a file added, gone or touched, another
HEAD, no record) asks git as before. An edit keeps its stamp only if it keeps the size, the
inode and both times: ``touch -d`` sets the mtime back but not the ctime. A file whose stamp
was taken within :data:`RACY_NS` of its mtime is not trusted (it may have changed again in the
same timestamp tick): the next start asks git about it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from .fileio import read_own_file, replace_own_file
from .git_discovery import head_id
from .workspace import MEMORY_DIR, MEMORY_FILE, STATE_DIR

STAMPS_FILE = "history-files.json"
#: How close to its stamp a file's mtime may be and still have changed unseen (coarse file
#: system clocks: 2 s on FAT, a jiffy on Linux).
RACY_NS = 2_000_000_000

#: (size, mtime_ns, ctime_ns, inode, when it was taken in ns)
Stamp = tuple[int, int, int, int, int]


def stamp(path: Path, taken: int | None = None) -> Stamp | None:
    """``path``'s stamp now (None: nothing there); ``taken``: a time before the stat."""
    taken = time.time_ns() if taken is None else taken
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, taken


class FileStamps:
    """The record of one workspace. Callers hold the history's lock (other processes commit
    to the same repository)."""

    def __init__(self, root: Path, extra_files: Iterable[str]) -> None:
        self.root = root
        self.extra_files = tuple(extra_files)
        self.path = root / STATE_DIR / STAMPS_FILE
        #: The record as this process last read or wrote it, by the file's (inode, size,
        #: mtime): any version is safe to use, as it names the HEAD it holds for.
        self._kept: tuple[tuple[int, int, int], str | None, dict[str, Stamp | None]] | None = None

    def on_disk(self) -> dict[str, Stamp]:
        """Every file ``git status`` could report as memory (what ``GitHistory`` tracks),
        stamped: MEMORY.md, the configured extra files and ``memory/**/*.md``, links too."""
        taken = time.time_ns()  # before every stat: the safe side of the racy check
        found: dict[str, Stamp] = {}
        for rel in (MEMORY_FILE, *self.extra_files):
            got = stamp(self.root / rel, taken)
            if got is not None:
                found[rel] = got
        root = os.path.join(str(self.root), "")
        folders = [root + MEMORY_DIR]
        while folders:
            with contextlib.suppress(OSError), os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.name.endswith(".md"):
                        with contextlib.suppress(OSError):
                            st = entry.stat(follow_symlinks=False)
                            rel = entry.path[len(root) :].replace(os.sep, "/")
                            found[rel] = (
                                st.st_size,
                                st.st_mtime_ns,
                                st.st_ctime_ns,
                                st.st_ino,
                                taken,
                            )
        return found

    def unchanged(self, files: Mapping[str, Stamp]) -> bool:
        """Whether ``files`` (:meth:`on_disk`) are all as committed at the recorded HEAD,
        and that is still HEAD: then nothing needs committing."""
        head, known = self._load()
        if head is None or head != head_id(self.root) or known.keys() != files.keys():
            return False
        for rel, now in files.items():
            then = known[rel]
            if then is None or then[:4] != now[:4] or then[1] >= then[4] - RACY_NS:
                return False
        return True

    def checked(self, head: str | None, files: Mapping[str, Stamp], changed: Iterable[str]) -> None:
        """``git status`` at ``head`` found ``changed`` and nothing else among ``files``
        (stamped before it ran)."""
        record: dict[str, Stamp | None] = dict(files)
        record.update(dict.fromkeys(changed))  # not as committed until a commit says so
        self._save(head, record)

    def committed(
        self, parent: str | None, head: str | None, files: Mapping[str, Stamp | None]
    ) -> None:
        """A commit (``head``, after ``parent``) holds ``files`` as stamped before they were
        read (None: removed). A record of another HEAD is dropped: it no longer says what
        HEAD holds."""
        recorded, known = self._load()
        if recorded != parent:
            self.drop()
            return
        for rel, got in files.items():
            if got is None:
                known.pop(rel, None)
            else:
                known[rel] = got
        self._save(head, known)

    def moved(self, old_head: str, new_head: str) -> None:
        """HEAD went from ``old_head`` to a commit of the same tree (a squash)."""
        recorded, known = self._load()
        if recorded == old_head:
            self._save(new_head, known)

    def drop(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _load(self) -> tuple[str | None, dict[str, Stamp | None]]:
        try:
            version = _version(self.path)
            if self._kept is not None and self._kept[0] == version:
                return self._kept[1], dict(self._kept[2])
            data = json.loads(read_own_file(self.path))
            head = data["head"] if isinstance(data["head"], str) else None
            files: dict[str, Stamp | None] = {
                str(rel): None if got is None else _as_stamp(got)
                for rel, got in data["files"].items()
            }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None, {}
        self._kept = (version, head, files)
        return head, dict(files)

    def _save(self, head: str | None, files: Mapping[str, Stamp | None]) -> None:
        data = json.dumps({"head": head, "files": dict(files)}, separators=(",", ":"))
        try:
            replace_own_file(self.path, data.encode("utf-8"), durable=False)  # lost: git asked
            self._kept = (_version(self.path), head, dict(files))
        except OSError:
            self._kept = None
            self.drop()  # an old record must not outlive the commit


def _version(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _as_stamp(got: object) -> Stamp:
    if not isinstance(got, list) or len(got) != 5:
        raise ValueError("not a stamp")
    size, mtime, ctime, inode, taken = (int(x) for x in got)
    return size, mtime, ctime, inode, taken
