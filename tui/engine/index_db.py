"""SQLite plumbing of the index: opening a connection (sqlite-vec loaded, WAL, a private file),
the schema, transactions, telling a busy database from an unusable file, following a rebuild
made elsewhere, and the report every sync returns."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import sqlean as sqlite3

from .fileio import open_own_file
from .workspace import LinkRefusedError, refuse_own_links

#: FTS5 tokenizer of the chunk text: porter stemming over unicode61 (CJK is spelled as bigrams).
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

#: How long a connection waits for another one's write lock before giving up (seconds).
DEFAULT_BUSY_TIMEOUT = 5.0

DatabaseError = sqlite3.DatabaseError

# SQLite result codes (the low byte of an extended code).
_SQLITE_ERROR, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CORRUPT, _SQLITE_NOTADB = 1, 5, 6, 11, 26


class IndexLockedError(Exception):
    """Another connection held the index's lock for longer than the busy timeout.

    A lock is never a reason to move the file aside: the file is fine, someone is using it.
    """


class _IndexReplaced(RuntimeError):
    """The index file was swapped (a rebuild elsewhere) under an open write: redo it on the new one."""


#: Writes commit at least this often (rows), so readers see progress and a crash loses little.
COMMIT_EVERY = 200

Progress = Callable[[str, int, int], None]


@dataclass
class SyncReport:
    """What a sync did."""

    files_seen: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0
    cache_hits: int = 0
    cache_evicted: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: SyncReport) -> None:
        for name in (
            "files_seen",
            "files_changed",
            "files_removed",
            "chunks_added",
            "chunks_removed",
            "embedded",
            "cache_hits",
            "cache_evicted",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.warnings.extend(other.warnings)


class _Reopens(Protocol):
    def refresh(self) -> bool: ...


_T = TypeVar("_T")


def follows_rebuilds(method: Callable[..., _T]) -> Callable[..., _T]:
    """Reopen the index first if its file was replaced (a rebuild by another engine or process),
    and redo the call once more on the new file if that happens during one of its writes."""

    @functools.wraps(method)
    def wrapper(self: _Reopens, *args: object, **kwargs: object) -> _T:
        for attempt in range(3):
            self.refresh()
            try:
                return method(self, *args, **kwargs)
            except _IndexReplaced:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    return wrapper


def _error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_busy(exc: BaseException) -> bool:
    """True for "database is locked" / "database table is locked" (SQLITE_BUSY, SQLITE_LOCKED)."""
    code = _error_code(exc)
    if code is not None:
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower()


def is_unusable_file(exc: BaseException) -> bool:
    """True when the file itself is bad: corrupt, not a database, or a database whose schema is
    not the index's (SQLITE_ERROR while opening). Busy, I/O, permission and full-disk errors are not."""
    code = _error_code(exc)
    if code is not None:
        return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB, _SQLITE_ERROR)
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _file_identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the file at ``path`` now (None when there is none)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


@functools.cache
def _vec_extension() -> str:
    """sqlite-vec's loadable extension (what ``sqlite_vec.load`` loads), found without
    importing the package: its ``__init__`` imports numpy, which the app loads only at the
    first search."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sqlite-vec is not installed")
    return os.path.join(spec.submodule_search_locations[0], "vec0")


def finite_vector(blob: bytes) -> bool:
    """Whether a stored float32 vector holds only finite numbers (NaN poisons every score)."""
    import numpy as np

    return bool(np.isfinite(np.frombuffer(blob, dtype=np.float32)).all())


def fitting_vector(blob: object, dims: int) -> bool:
    """Whether a stored vector fits a model of ``dims`` dimensions: ``dims`` finite float32s.

    A cache row that does not (another width, another number type, NaN) is never copied
    into the vector table: one such row made every sync and rebuild fail."""
    return isinstance(blob, bytes) and len(blob) == dims * 4 and finite_vector(blob)


#: Files SQLite opens beside the database, by name (a link there would be followed).
SIDE_FILES = ("-wal", "-shm", "-journal")


def _create_private(path: Path) -> None:
    """Create the database file readable only by the user before SQLite does (SQLite gives its
    -wal and -shm files the database's mode). An index left readable by others is tightened:
    it holds the text of every memory.

    SQLite opens the file and its side files by name, following links: a link at any of them
    is refused with :class:`LinkRefusedError` first, and the mode is changed through a
    descriptor opened without following one, never through a link."""
    if str(path) == ":memory:":
        return
    for suffix in ("", *SIDE_FILES):
        refuse_own_links(Path(str(path) + suffix))
    with contextlib.suppress(OSError):
        if not os.lstat(path).st_mode & 0o077:
            # Private already. Opening it here would drop, at its close, every POSIX lock this
            # process holds on the file: another connection's, whose WAL and shared memory
            # another process's last close then deletes under it ("disk I/O error").
            return
    try:
        fd = open_own_file(path, os.O_RDONLY | os.O_CREAT)
    except LinkRefusedError:
        raise
    except OSError:
        return  # a folder, no permission…: SQLite (or the caller) says what is wrong
    try:
        if os.fstat(fd).st_mode & 0o077:
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def connect(path: Path | str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> sqlite3.Connection:
    """Open a connection with sqlite-vec loaded and the pragmas the index relies on.

    ``busy_timeout`` (seconds) is how long a statement waits for another connection's lock
    before failing with "database is locked".
    """
    _create_private(Path(path))
    conn = sqlite3.connect(
        str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        conn.enable_load_extension(True)
        conn.load_extension(_vec_extension())
        conn.enable_load_extension(False)
        conn.execute(f"PRAGMA busy_timeout = {max(0, int(busy_timeout * 1000))}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
    except BaseException:
        conn.close()
        raise
    return conn


def _schema(dims: int) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS files (
            path TEXT PRIMARY KEY, hash TEXT NOT NULL, mtime REAL NOT NULL, size INTEGER NOT NULL,
            warning TEXT)""",
        """CREATE TABLE IF NOT EXISTS chunks (
            id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL, hash TEXT NOT NULL,
            date TEXT, confidence TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'active',
            entry_ids TEXT NOT NULL DEFAULT '', embedded INTEGER NOT NULL DEFAULT 0,
            context TEXT NOT NULL DEFAULT '', written TEXT)""",
        "CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path)",
        "CREATE INDEX IF NOT EXISTS chunks_date ON chunks(date) WHERE date IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS chunks_unembedded ON chunks(embedded) WHERE embedded = 0",
        # ``body``: a unit's heading path and own text; ``context``: the entries it is indexed
        # with (weighed less by bm25, so the entry that holds the words ranks first).
        f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, context, tokenize = '{FTS_TOKENIZER}')",
        "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row')",
        f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine)",
        """CREATE TABLE IF NOT EXISTS embedding_cache (
            model TEXT NOT NULL, hash TEXT NOT NULL, embedding BLOB NOT NULL,
            last_used INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, hash))""",
    ]


def _stored_generation(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    try:
        return int(row[0]) if row else 0
    except ValueError:
        return 0


def _next_cache_stamp(conn: sqlite3.Connection) -> int:
    """A recency stamp newer than every cache entry's (a counter: clocks can go backwards)."""
    return int(
        conn.execute("SELECT coalesce(max(last_used), 0) + 1 FROM embedding_cache").fetchone()[0]
    )


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
