"""Safe file writes: atomic replacement, locked appends, and reading untrusted Markdown."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

#: Files larger than this are not indexed (a log this size is almost certainly not hand-written memory).
MAX_INDEXED_BYTES = 8 * 1024 * 1024


class ConcurrentEditError(Exception):
    """A file changed on disk between the moment the app read it and the moment it wanted to write it."""


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of some bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of a string's UTF-8 encoding."""
    return sha256_bytes(text.encode("utf-8"))


def lock_for(path: Path) -> FileLock:
    """The inter-process lock that guards app writes to ``path``.

    The lock file lives in the workspace's ``.memdeck/locks`` folder when there is one, so
    lock files never litter the user's Markdown folders.
    """
    path = Path(path)
    for parent in path.parents:
        state = parent / ".memdeck"
        if state.is_dir():
            locks = state / "locks"
            locks.mkdir(exist_ok=True)
            rel = os.path.relpath(path, parent).replace(os.sep, "__")
            return FileLock(str(locks / f"{rel}.lock"), timeout=10)
    return FileLock(str(path) + ".lock", timeout=10)


def atomic_write_text(path: Path, text: str, *, expected_hash: str | None = None) -> str:
    """Replace ``path`` with ``text`` atomically (temp file, fsync, rename); return the new hash.

    With ``expected_hash``, the write is refused with :class:`ConcurrentEditError` if the file on
    disk no longer has that content hash (someone edited it since it was read), so a hand edit
    is never overwritten blindly. Callers hold :func:`lock_for` around read-modify-write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if expected_hash is not None:
        current = sha256_bytes(path.read_bytes()) if path.exists() else sha256_bytes(b"")
        if current != expected_hash:
            raise ConcurrentEditError(
                f"{path} was changed on disk since it was read; not overwriting it"
            )
    data = text.encode("utf-8")
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return sha256_bytes(data)


def append_text(path: Path, text: str, *, header: str = "") -> None:
    """Append ``text`` to ``path`` under its lock, fsynced, starting on a fresh line.

    ``header`` is written first when the file is missing or empty.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(path):
        prefix = ""
        if not path.exists() or path.stat().st_size == 0:
            prefix = header
        else:
            with path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    prefix = "\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(prefix + text)
            handle.flush()
            os.fsync(handle.fileno())


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class MarkdownRead:
    """The outcome of reading a workspace file for indexing."""

    text: str | None
    content_hash: str
    size: int
    mtime: float
    warning: str | None = None


def read_markdown(path: Path, *, max_bytes: int = MAX_INDEXED_BYTES) -> MarkdownRead:
    """Read a Markdown file defensively.

    Binary and oversized files come back with ``text=None`` and a warning naming the file;
    non-UTF-8 bytes are replaced (with a warning) so the rest of the file is still indexed.
    """
    stat = path.stat()
    if stat.st_size > max_bytes:
        return MarkdownRead(
            None,
            f"size:{stat.st_size}:{stat.st_mtime_ns}",
            stat.st_size,
            stat.st_mtime,
            f"{path}: skipped, {stat.st_size / 1e6:.1f} MB is over the {max_bytes / 1e6:.0f} MB limit",
        )
    data = path.read_bytes()
    digest = sha256_bytes(data)
    if b"\x00" in data[:8192]:
        return MarkdownRead(
            None, digest, len(data), stat.st_mtime, f"{path}: skipped, looks binary"
        )
    try:
        text = data.decode("utf-8")
        warning = None
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warning = f"{path}: not valid UTF-8 (byte {exc.start}); undecodable bytes replaced"
    if text.startswith("\ufeff"):
        text = text[1:]
    return MarkdownRead(text, digest, len(data), stat.st_mtime, warning)
