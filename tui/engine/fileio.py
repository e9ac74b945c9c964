"""Safe file writes: atomic replacement that never loses a concurrent save, locked byte
appends, and reading untrusted Markdown."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from filelock import FileLock

from .workspace import LinkRefusedError, refuse_own_links

#: Files larger than this are not indexed (a log this size is almost certainly not hand-written memory).
MAX_INDEXED_BYTES = 8 * 1024 * 1024


class ConcurrentEditError(Exception):
    """A file changed on disk between the moment the app read it and the moment it wanted to write it."""


#: Mode of every file memdeck creates: memory and conversations are private whatever the
#: umask (a rewrite keeps an existing file's mode).
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def make_private_dir(path: Path) -> None:
    """Create folder ``path`` (and its parents) readable only by the user; an existing one is
    left as it is."""
    Path(path).mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of some bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of a string's UTF-8 encoding."""
    return sha256_bytes(text.encode("utf-8"))


def decode_exact(data: bytes) -> str:
    """Decode UTF-8 so that :func:`encode_exact` gives back the very same bytes (a BOM, CRLF,
    U+2028 and bytes that are not UTF-8 included: those become lone surrogates)."""
    return data.decode("utf-8", errors="surrogateescape")


def encode_exact(text: str) -> bytes:
    """The inverse of :func:`decode_exact`."""
    return text.encode("utf-8", errors="surrogateescape")


def printable(text: str) -> str:
    """``text`` from :func:`decode_exact` with undecodable bytes shown as U+FFFD (safe to send)."""
    return encode_exact(text).decode("utf-8", errors="replace")


def private_lock(path: Path, timeout: float = 10) -> FileLock:
    """An inter-process lock on the lock file ``path``, which is created private (0600)."""
    return FileLock(str(path), timeout=timeout, mode=PRIVATE_FILE_MODE)


def lock_for(path: Path) -> FileLock:
    """The inter-process lock that guards app writes to ``path``.

    The lock file lives in the workspace's ``.memdeck/locks`` folder when there is one, so
    lock files never litter the user's Markdown folders. A symlink there (the folders or the
    lock file) is refused with :class:`LinkRefusedError`.
    """
    path = Path(path)
    for parent in path.parents:
        state = parent / ".memdeck"
        if state.is_dir():
            locks = state / "locks"
            refuse_own_links(locks)
            locks.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
            rel = os.path.relpath(path, parent).replace(os.sep, "__")
            lock_file = locks / f"{rel}.lock"
            refuse_own_links(lock_file)  # filelock opens it with O_NOFOLLOW: a link fails there
            return private_lock(lock_file)
    return private_lock(Path(str(path) + ".lock"))


def open_own_file(path: Path, flags: int, mode: int = PRIVATE_FILE_MODE) -> int:
    """``os.open`` for a file in memdeck's own folders (``.memdeck/``, ``sessions/``), never
    through a symlink: a link at the file (``O_NOFOLLOW``) or at a folder between it and the
    own folder is refused with :class:`LinkRefusedError`. Elsewhere (a memory file, opened
    by its real path) only the last component is not followed."""
    path = Path(path)
    refuse_own_links(path)
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():  # made since the check
            raise LinkRefusedError(f"{path} is a symbolic link; memdeck does not follow it") from exc
        raise


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (unbuffered: nothing is left to be written
    later); a short write is retried, and one that cannot go on (a full disk, a size limit)
    raises OSError instead of passing for done."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def open_own_reader(path: Path) -> BinaryIO:
    """A binary reader of a file in memdeck's own folders, never opened through a symlink
    (see :func:`open_own_file`)."""
    return os.fdopen(open_own_file(path, os.O_RDONLY), "rb")


def read_own_file(path: Path) -> bytes:
    """The whole content of a file in memdeck's own folders, never read through a symlink
    (see :func:`open_own_file`)."""
    fd = open_own_file(path, os.O_RDONLY)
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def replace_own_file(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace a file in memdeck's own folders with ``data`` atomically: a new private file
    beside it, fsynced (unless not ``durable``: a cache), renamed over it (a link at ``path``
    is replaced, never followed). Callers hold :func:`lock_for` around read-modify-write."""
    path = Path(path)
    refuse_own_links(path.parent)
    tmp = _write_temp(path, data, PRIVATE_FILE_MODE, durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


#: Tried by :func:`replace_file` before the portable fallback; tests switch it off to cover both.
RENAME_EXCHANGE_ENABLED = True
#: Test seam: ``write_hook(step, path)`` runs at each step of :func:`replace_file` (``checked``,
#: ``fsync``, ``before_swap``, ``after_swap``), so a test can save "as an editor" right there.
write_hook: Callable[[str, Path], None] | None = None
#: Rounds of re-applying a change when the file keeps changing underneath a write.
REPLACE_ATTEMPTS = 12

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}


class _NoExchange(Exception):
    """renameat2 is unavailable here (another OS, an old kernel, a filesystem without it)."""


def _load_renameat2() -> Callable[[bytes, bytes, int], int] | None:
    """renameat2(AT_FDCWD, src, AT_FDCWD, dst, flags) from libc, or the raw syscall."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    function = getattr(libc, "renameat2", None)
    if function is not None:
        function.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint,
        ]
        function.restype = ctypes.c_int
        return lambda src, dst, flags: function(_AT_FDCWD, src, _AT_FDCWD, dst, flags)
    number = _SYS_RENAMEAT2.get(platform.machine().lower())
    if number is None:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    return lambda src, dst, flags: syscall(
        ctypes.c_long(number),
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(src),
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(dst),
        ctypes.c_uint(flags),
    )


_renameat2 = _load_renameat2()


def _rename2(src: Path, dst: Path, flags: int) -> None:
    """renameat2(2); :class:`_NoExchange` where the platform or the filesystem lacks it."""
    if _renameat2 is None or not RENAME_EXCHANGE_ENABLED:
        raise _NoExchange()
    if _renameat2(os.fsencode(src), os.fsencode(dst), flags) == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        raise _NoExchange()
    raise OSError(err, os.strerror(err), str(dst))


def _hook(step: str, path: Path) -> None:
    if write_hook is not None:
        write_hook(step, path)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


#: Pauses before an empty read is believed (seconds, about 0.1 in all).
_SETTLE = (0.005, 0.01, 0.02, 0.06)


_Read = TypeVar("_Read", bound=bytes | None)


def _settled(read: Callable[[], _Read]) -> _Read:
    """``read()``, re-read a few times while it is empty: an editor saving in place truncates
    first and writes next, and that empty moment must not pass for the user's version."""
    data = read()
    for pause in _SETTLE:
        if data != b"":
            break
        time.sleep(pause)
        data = read()
    return data


def _read_fd(fd: int) -> bytes:
    """The whole content of an open file (it may have been renamed or unlinked since)."""
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_temp(path: Path, data: bytes, mode: int, durable: bool = True) -> Path:
    """``data`` in a new fsynced file beside ``path`` (same folder, so a rename is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _hook("fsync", path)
            if durable:
                os.fsync(handle.fileno())
        os.chmod(name, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise
    return Path(name)


class _Rebase:
    """The change being written, re-applied to whatever a concurrent writer saved.

    A change that no longer applies (it raises) yields the writer's version unchanged, so it
    is put back as it was; the error is raised once that is done.
    """

    def __init__(
        self, path: Path, change: Callable[[bytes], bytes], report: Callable[[str], None] | None
    ) -> None:
        self.path = path
        self.change = change
        self.report = report
        self.error: Exception | None = None

    def __call__(self, user: bytes | None) -> bytes:
        if self.report is not None:
            self.report(
                f"{self.path.name} was saved by another program while memdeck was writing it; "
                "memdeck re-applied its change to that version"
            )
        try:
            return self.change(user or b"")
        except Exception as exc:
            self.error = exc
            return user or b""


def replace_file(
    path: Path,
    change: Callable[[bytes], bytes],
    *,
    on_conflict: Callable[[str], None] | None = None,
) -> bytes:
    """Replace ``path`` with ``change(its bytes)`` atomically and return what was written.

    Nothing is written when the change returns the bytes unchanged; an exception from the first
    ``change`` propagates with nothing written. The new content goes to a temp file beside
    ``path``, fsynced. On Linux it is swapped in with ``renameat2(RENAME_EXCHANGE)`` and the
    file swapped out must still be byte-identical to the one the change was computed from. If an
    editor saved in between (a file renamed over it, or a write in place, even through a
    descriptor opened earlier), the editor's version is swapped back in place at once (it is
    never deleted) and the change re-applied to it; a change that no longer applies (it raises)
    leaves the editor's version in place, then raises. Where renameat2 is unavailable the file
    is re-checked just before ``os.replace`` and, through a descriptor held on the replaced
    file, just after. Each conflict is reported to ``on_conflict``. Callers hold
    :func:`lock_for` against other memdeck writers.
    """
    path = Path(path)
    refuse_own_links(path)  # a state file that is a link is refused, not replaced
    make_private_dir(path.parent)
    base = _settled(lambda: _read_or_none(path))
    new = change(base or b"")
    if base is not None and new == base:
        return new
    mode = path.stat().st_mode & 0o777 if base is not None else PRIVATE_FILE_MODE
    rebase = _Rebase(path, change, on_conflict)
    _hook("checked", path)
    written = _install(path, base, new, mode, rebase)
    _fsync_dir(path.parent)
    if rebase.error is not None:
        raise rebase.error
    return written


def _install(path: Path, at_path: bytes | None, new: bytes, mode: int, rebase: _Rebase) -> bytes:
    """The write loop of :func:`replace_file`; ``at_path`` is what ``path`` should hold now."""
    exchange = RENAME_EXCHANGE_ENABLED and _renameat2 is not None
    for attempt in range(REPLACE_ATTEMPTS):
        if new == at_path:
            return new
        held: int | None = None  # the file about to be replaced, for writes in place
        with contextlib.suppress(FileNotFoundError):
            held = os.open(path, os.O_RDONLY)
        try:
            tmp = _write_temp(path, new, mode)
            if not exchange:
                _hook("before_swap", path)
            now = _settled(lambda: _read_or_none(path))
            if now != at_path:  # saved while we wrote: re-apply before anything is swapped
                tmp.unlink()
                at_path, new = now, rebase(now)
                time.sleep(min(0.001 * 2**attempt, 0.05))
                continue
            if exchange:
                _hook("before_swap", path)
                flags = _RENAME_EXCHANGE if at_path is not None else _RENAME_NOREPLACE
                try:
                    _rename2(tmp, path, flags)
                except _NoExchange:
                    exchange = False  # this platform or filesystem: os.replace below
                except BaseException as exc:
                    tmp.unlink()
                    if not isinstance(exc, FileNotFoundError | FileExistsError):
                        raise
                    at_path = _read_or_none(path)  # deleted or created meanwhile
                    new = rebase(at_path)
                    continue
                else:
                    _hook("after_swap", path)
                    if at_path is None:
                        return new
                    swapped_out = _settled(tmp.read_bytes)  # also a write in place meanwhile
                    if swapped_out == at_path:
                        tmp.unlink()
                        return new
                    # An editor saved between the re-check and the swap: its version goes back
                    # in place at once (ours was visible for microseconds), then re-apply.
                    at_path = _put_back(path, tmp, swapped_out, new)
                    new = rebase(at_path)
                    continue
            try:
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                raise
            _hook("after_swap", path)
            replaced = _settled(functools.partial(_read_fd, held)) if held is not None else None
            if replaced == at_path:
                return new
            at_path = new  # a write in place landed in the replaced file: only `held` has it
            new = rebase(replaced)
        finally:
            if held is not None:
                os.close(held)
    raise ConcurrentEditError(f"{path} kept changing while memdeck wrote it; it was left as is")


def _put_back(path: Path, tmp: Path, user: bytes, ours: bytes) -> bytes:
    """Swap the user's version (at ``tmp``) back over ours (at ``path``); return what ``path``
    holds then. Ours is deleted only once it is verified to be what came out."""
    expected = ours
    for _ in range(REPLACE_ATTEMPTS):
        _rename2(tmp, path, _RENAME_EXCHANGE)
        out = _settled(tmp.read_bytes)
        if out == expected:
            tmp.unlink()
            return user
        expected, user = user, out  # saved over ours meanwhile: that version is the newest
    raise ConcurrentEditError(f"{path} kept changing while memdeck wrote it; see also {tmp}")


def atomic_write_text(path: Path, text: str, *, expected_hash: str | None = None) -> str:
    """Replace ``path`` with ``text`` atomically (see :func:`replace_file`); return the new hash.

    With ``expected_hash``, the write is refused with :class:`ConcurrentEditError` if the file
    on disk no longer has that content hash (someone edited it since it was read, or saves
    while this write runs: their version is left in place), so a hand edit is never
    overwritten blindly. Callers hold :func:`lock_for` around read-modify-write.
    """
    data = encode_exact(text)

    def whole(current: bytes) -> bytes:
        if expected_hash is not None and sha256_bytes(current) != expected_hash:
            raise ConcurrentEditError(
                f"{path} was changed on disk since it was read; not overwriting it"
            )
        return data

    replace_file(Path(path), whole)
    return sha256_bytes(data)


def append_text(
    path: Path,
    text: str,
    *,
    header: str = "",
    before: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
) -> None:
    """Append ``text`` to ``path`` under its lock, fsynced, starting on a fresh line: all of it
    or nothing (a write that fails part-way is truncated back off).

    ``header`` is written first when the file is missing or empty. The existing bytes are
    never decoded or rewritten, whatever their encoding. The file is never opened through a
    symlink (see :func:`open_own_file`). ``before`` runs under the lock before anything is
    written, ``after`` once the text is durable, still under the lock (the history's commits).
    """
    path = Path(path)
    refuse_own_links(path.parent)
    make_private_dir(path.parent)
    with lock_for(path):
        if before is not None:
            before()
        fd = open_own_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            prefix = header if size == 0 else ""
            if size and os.pread(fd, 1, size - 1) != b"\n":
                prefix = "\n"
            try:
                write_all(fd, (prefix + text).encode("utf-8"))
                os.fsync(fd)
            except OSError:
                # A full disk (or a size limit) cut the write short: take the partial bytes
                # back, so the file is as it was and a retry appends the whole text.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                raise
        finally:
            os.close(fd)
        if after is not None:
            after()


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


class FileTooLargeError(ValueError):
    """A memory file over :data:`MAX_INDEXED_BYTES`: not indexed, so not read whole either."""


def read_bounded(path: Path, *, max_bytes: int = MAX_INDEXED_BYTES, name: str = "") -> bytes:
    """The bytes of ``path`` when it holds at most ``max_bytes`` (the indexer's bound); a
    larger file raises :class:`FileTooLargeError` naming it (``name``, else its path), having
    read no more than ``max_bytes + 1`` bytes of it."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = b"" if size > max_bytes else handle.read(max_bytes + 1)
    if size > max_bytes or len(data) > max_bytes:
        raise FileTooLargeError(
            f"{name or path} is {max(size, len(data)) / 1e6:.1f} MB, over the "
            f"{max_bytes / 1e6:.0f} MB limit of a memory file (it is not indexed or read); "
            "open it in an editor"
        )
    return data


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
    if looks_binary(data):
        return MarkdownRead(
            None, digest, len(data), stat.st_mtime, f"{path}: skipped, looks binary"
        )
    try:
        text = data.decode("utf-8")
        warning = None
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warning = f"{path}: not valid UTF-8 (byte {exc.start}); undecodable bytes replaced"
    if "\x00" in text:
        count = text.count("\x00")
        text = text.replace("\x00", "\ufffd")
        note = f"{count} NUL byte{'s' if count != 1 else ''} replaced"
        warning = f"{warning}; {note}" if warning else f"{path}: {note}"
    if text.startswith("\ufeff"):
        text = text[1:]
    return MarkdownRead(text, digest, len(data), stat.st_mtime, warning)


#: Bytes of a file's start looked at to tell text from binary.
BINARY_SAMPLE = 8192


def looks_binary(data: bytes) -> bool:
    """Binary, not text with a stray NUL: NUL bytes are more than 1 in 10 of the sample, or
    more than a few and more than 1 in 50 (UTF-16, images and archives have them everywhere)."""
    sample = data[:BINARY_SAMPLE]
    nul = sample.count(0)
    return nul * 10 > len(sample) or (nul > 8 and nul * 50 > len(sample))
