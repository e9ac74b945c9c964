"""The disposable SQLite index over the Markdown memory files.

One file, ``.memdeck/index.db``, in WAL mode: ``meta``, ``files``, ``chunks``, an FTS5 table,
a sqlite-vec ``vec0`` table and an ``embedding_cache``. Everything in it can be rebuilt from the
Markdown files. The stdlib ``sqlite3`` of some Pythons cannot load extensions, so the index uses
``sqlean`` (a drop-in ``sqlite3`` with extension loading and FTS5).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import sqlean as sqlite3

from .chunker import Chunk, ChunkParams, TokenCounter, chunk_markdown
from .embeddings import TextEmbedder
from .fileio import read_markdown, sha256_text
from .index_db import (
    DEFAULT_BUSY_TIMEOUT,
    IndexLockedError,
    Progress,
    SyncReport,
    _file_identity,
    _IndexReplaced,
    _schema,
    _stored_generation,
    _transaction,
    connect,
    follows_rebuilds,
    is_busy,
    is_unusable_file,
)
from .index_rows import ChunkReads, ChunkRow
from .index_text import FullTextReads
from .index_vectors import VectorWrites
from .textsearch import fts_body
from .workspace import Workspace, refuse_own_links

__all__ = ["CACHE_MAX_ENTRIES", "ChunkRow", "MemoryIndex", "Progress", "SyncReport"]

SCHEMA_VERSION = 4
#: Default bound of the embedding cache (entries). Entries a current chunk uses are always kept;
#: beyond them, the least recently used go first (OpenClaw's default, 10,000).
CACHE_MAX_ENTRIES = 10_000


class MemoryIndex(ChunkReads, FullTextReads, VectorWrites):
    """The search index of one workspace. One writer at a time; readers never block.

    Writes go through ``self._write_lock`` on a dedicated connection; each reading thread gets
    its own connection, so WAL lets searches run while a sync is writing.

    Another engine or process may rebuild the index (``memdeck reindex``), which swaps a new
    file in at the same path. Every search, sync and write first compares the path's file
    identity with the open one's (a stat) and reopens when they differ; ``generation`` (in
    ``meta``) counts the rebuilds.
    """

    def __init__(
        self,
        workspace: Workspace,
        embedder: TextEmbedder,
        count_tokens: TokenCounter,
        params: ChunkParams = ChunkParams(),
        *,
        path: Path | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        cache_max_entries: int = CACHE_MAX_ENTRIES,
    ) -> None:
        """``cache_max_entries`` bounds the embedding cache (see :meth:`prune_cache`)."""
        if cache_max_entries < 0:
            raise ValueError("cache_max_entries must be >= 0")
        self.workspace = workspace
        self.embedder = embedder
        self.count_tokens = count_tokens
        self.params = params
        self.path = path or workspace.index_path
        self.busy_timeout = busy_timeout
        self.cache_max_entries = cache_max_entries
        self.notices: list[str] = []
        self._mirror = None
        self._mirror_loaded = False
        self._doc_shares: dict[tuple[str, ...], int] = {}
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        #: Bumped at each reopen: a thread's reader from an older epoch is closed and replaced.
        self._epoch = 0
        #: ``(st_dev, st_ino)`` of the file the writer has open.
        self._identity: tuple[int, int] | None = None
        #: How many times this index file has been rebuilt (``meta``); read at each (re)open.
        self.generation = 0
        #: Reader connections by the thread they belong to (closed once that thread has ended).
        self._reader_threads: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._writer = self._open_or_recover()

    # -- connections --

    @property
    def fingerprint(self) -> str:
        """Identifies everything that makes stored chunks and vectors comparable."""
        return f"schema={SCHEMA_VERSION};model={self.embedder.fingerprint};chunker={self.params.fingerprint}"

    def _track(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _untrack(self, conn: sqlite3.Connection) -> None:
        with self._connections_lock, contextlib.suppress(ValueError):
            self._connections.remove(conn)
        with contextlib.suppress(Exception):
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, busy_timeout=self.busy_timeout)

    def _reader(self) -> sqlite3.Connection:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.epoch != self._epoch:
            self._untrack(conn)  # opened on a file that has since been replaced
            conn = None
        if conn is None:
            self._close_orphaned_readers()
            conn = self._track(self._connect())
            with self._connections_lock:
                self._reader_threads.append((threading.current_thread(), conn))
            local.conn, local.epoch = conn, self._epoch
        return conn

    def _locked_error(self, exc: BaseException) -> IndexLockedError:
        return IndexLockedError(
            f"the index {self.path} is locked by another process ({exc}; waited "
            f"{self.busy_timeout:g} s); try again when it is done"
        )

    def _close_orphaned_readers(self) -> None:
        """Close the readers of threads that have ended. Each holds ~2 MB of page cache, and
        the app runs every worker in a new thread: left open, they grew the process by ~2 MB
        per search (tests/bench/memory.py)."""
        with self._connections_lock:
            ended = [(t, c) for t, c in self._reader_threads if not t.is_alive()]
            if not ended:
                return
            self._reader_threads = [(t, c) for t, c in self._reader_threads if t.is_alive()]
            closed = {id(c) for _, c in ended}
            self._connections = [c for c in self._connections if id(c) not in closed]
        for _, conn in ended:
            with contextlib.suppress(Exception):
                conn.close()

    def _open_or_recover(self) -> sqlite3.Connection:
        """The writer connection, on a usable index file.

        A lock held elsewhere is waited for (``busy_timeout``), then refused with
        :class:`IndexLockedError`; only a file that is not a usable index (corrupt, not a
        database, a foreign schema) is moved aside and rebuilt.
        """
        started = time.monotonic()
        while True:
            try:
                return self._open_once()
            except IndexLockedError:
                # SQLite answers some clashes at once, without its busy wait (two processes
                # opening a new file, one of them switching it to WAL): wait for those here.
                if time.monotonic() - started >= self.busy_timeout:
                    raise
                time.sleep(0.05)

    def _open_once(self) -> sqlite3.Connection:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        refuse_own_links(self.path)
        if self.path.exists() and not self.path.is_file():  # a folder, a pipe…: no index
            self._move_aside("it is not a file")
        conn: sqlite3.Connection | None = None
        try:
            conn, identity = self._connect_identified()
            self._init_schema(conn)
            conn.execute("SELECT count(*) FROM chunks").fetchone()
            conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'x'").fetchone()
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            if is_busy(exc):
                raise self._locked_error(exc) from exc
            if not is_unusable_file(exc):
                raise
            self._move_aside(str(exc))
            conn, identity = self._connect_identified()
            try:
                self._init_schema(conn)
            except sqlite3.DatabaseError as again:
                conn.close()
                if is_busy(again):
                    raise self._locked_error(again) from again
                raise
        self._identity = identity
        self.generation = _stored_generation(conn)
        return self._track(conn)

    def _move_aside(self, reason: str) -> None:
        """Move an unusable index file (and its side files) aside, to be rebuilt from the
        Markdown files; the notice says so in one line."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                os.replace(src, Path(str(aside) + suffix))
        self.notices.append(
            f"index {self.path} was unreadable ({reason}); moved aside to {aside.name} and "
            "rebuilt from the Markdown files"
        )

    def _connect_identified(self) -> tuple[sqlite3.Connection, tuple[int, int] | None]:
        """A connection and the identity of the file it opened (stat before and after agree)."""
        while True:
            before = _file_identity(self.path)
            conn = self._connect()
            after = _file_identity(self.path)
            if before is None or before == after:
                return conn, after
            conn.close()  # replaced while opening: open the new one

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        with _transaction(conn):
            for statement in _schema(self.embedder.dims):
                conn.execute(statement)
            # An index written by an older version: add what this one reads, so it opens and
            # searches until the fingerprint change rebuilds it (sync).
            columns = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
            if "context" not in columns:
                conn.execute("ALTER TABLE chunks ADD COLUMN context TEXT NOT NULL DEFAULT ''")
            cache_columns = {row[1] for row in conn.execute("PRAGMA table_info(embedding_cache)")}
            if "last_used" not in cache_columns:
                conn.execute(
                    "ALTER TABLE embedding_cache ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0"
                )
            stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if not stored:
                conn.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?)",
                    [
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("fingerprint", self.fingerprint),
                        ("dims", str(self.embedder.dims)),
                        ("generation", "0"),
                    ],
                )

    def replaced(self) -> bool:
        """True when the file at ``path`` is not the one this index has open (a stat)."""
        return _file_identity(self.path) != self._identity

    def refresh(self) -> bool:
        """Reopen when the file was replaced (another engine's or process's rebuild) or deleted.

        Closes the writer, retires every thread's reader (each is closed by its thread on its
        next read, or by :meth:`close`), reloads the vector mirror and the term counts lazily.
        Returns True when it reopened. Costs one stat when nothing changed.
        """
        if not self.replaced():
            return False
        with self._write_lock:
            if not self.replaced():
                return False
            fresh = self._open_or_recover()  # raises (locked...) with the old writer kept
            self._untrack(self._writer)
            self._writer = fresh
            self._after_reopen()
        return True

    def _after_reopen(self) -> None:
        self._epoch += 1
        self._mirror_loaded = False
        self._mirror = None
        self._doc_shares.clear()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the live file: busy is :class:`IndexLockedError`, and a file
        replaced before the lock was taken rolls back with :class:`_IndexReplaced`."""
        with self._write_lock:
            try:
                with _transaction(self._writer) as conn:
                    if self.replaced():
                        raise _IndexReplaced(f"{self.path} was replaced by a rebuild")
                    yield conn
            except sqlite3.OperationalError as exc:
                if is_busy(exc):
                    raise self._locked_error(exc) from exc
                raise

    def stored_fingerprint(self) -> str | None:
        row = self._reader().execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        return row[0] if row else None

    def release_memory(self) -> None:
        """Hand back the page caches of every connection (SQLite's ``shrink_memory``: only
        pages not in use; they are read again when needed). For quiet moments: each worker
        thread's reader keeps up to ~2 MB of pages it read once, most of an idle app's SQLite
        memory. Safe from any thread (SQLite serialises a connection's calls)."""
        with self._connections_lock:
            connections = [conn for conn in self._connections if conn is not self._writer]
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA shrink_memory")
        with self._write_lock, contextlib.suppress(sqlite3.Error):
            self._writer.execute("PRAGMA shrink_memory")

    def close(self) -> None:
        """Close every connection this index opened (any thread)."""
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(Exception):
                    conn.close()
            self._connections.clear()
            self._reader_threads.clear()
        self._local = threading.local()

    # -- sync --

    @follows_rebuilds
    def sync(self, *, embed: bool = True, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the Markdown files.

        A fingerprint change (another model or chunker) rebuilds into a temporary database that
        replaces this one only when complete. Unchanged files cost a stat and a hash.
        """
        if self.stored_fingerprint() != self.fingerprint:
            return self.rebuild(embed=embed, progress=progress)
        started = time.perf_counter()
        report = SyncReport()
        warnings: list[str] = []
        seen: set[str] = set()
        for rel, _path in self.workspace.iter_memory_files(warnings):
            seen.add(rel)
            report.files_seen += 1
            report.merge(self.sync_file(rel, embed=False))
        report.warnings.extend(warnings)
        for rel in self._indexed_paths() - seen:
            report.merge(self.remove_file(rel))
        if embed:
            report.merge(self.embed_pending(progress=progress))
        report.cache_evicted = self.prune_cache()
        report.seconds = time.perf_counter() - started
        return report

    @follows_rebuilds
    def sync_paths(self, rel_paths: Sequence[str], *, embed: bool = True) -> SyncReport:
        """Re-sync only these workspace-relative paths (what the file watcher saw change)."""
        report = SyncReport()
        for rel in sorted(set(rel_paths)):
            path = self.workspace.root / rel
            if self.workspace.is_memory_path(rel) and path.is_file():
                report.merge(self.sync_file(rel, embed=False))
            else:
                report.merge(self.remove_file(rel))
        if embed:
            report.merge(self.embed_pending())
        report.cache_evicted = self.prune_cache()
        return report

    @follows_rebuilds
    def sync_file(self, rel: str, *, embed: bool = True) -> SyncReport:
        """Re-index one file if it changed: same size and mtime cost a stat, same hash a read."""
        report = SyncReport()
        path = self.workspace.root / rel
        row = (
            self._reader()
            .execute("SELECT hash, mtime, size, warning FROM files WHERE path = ?", (rel,))
            .fetchone()
        )
        try:
            if path.is_symlink() and not path.resolve().is_relative_to(self.workspace.root):
                report.warnings.append(f"{rel}: skipped, symlink leads outside the workspace")
                return report
            stat = path.stat()
            if row and row[1] == stat.st_mtime and row[2] == stat.st_size:
                report.warnings.extend([row[3]] if row[3] else [])
                return report
            read = read_markdown(path)
        except OSError as exc:
            report.warnings.append(f"{rel}: unreadable ({exc.strerror or exc})")
            return report
        warning = read.warning.replace(str(path), rel) if read.warning else None
        if warning:
            report.warnings.append(warning)
        if row and row[0] == read.content_hash:
            if row[1] != read.mtime:
                with self._writing() as conn:
                    conn.execute(
                        "UPDATE files SET mtime = ?, size = ? WHERE path = ?",
                        (read.mtime, read.size, rel),
                    )
            return report
        chunks = chunk_markdown(read.text, rel, self.count_tokens, self.params) if read.text else []
        with self._writing() as conn:
            removed = self._delete_chunks(conn, rel)
            new_ids = self._insert_chunks(conn, chunks)
            conn.execute(
                "INSERT OR REPLACE INTO files(path, hash, mtime, size, warning) VALUES (?, ?, ?, ?, ?)",
                (rel, read.content_hash, read.mtime, read.size, warning),
            )
        self._unmirror(removed)
        self._doc_shares.clear()
        report.files_changed = 1
        report.chunks_removed = len(removed)
        report.chunks_added = len(new_ids)
        if embed:
            report.merge(self.embed_pending())
        return report

    @follows_rebuilds
    def remove_file(self, rel: str) -> SyncReport:
        """Drop a file's chunks (the file was deleted or left the memory folders)."""
        with self._writing() as conn:
            removed = self._delete_chunks(conn, rel)
            deleted = conn.execute("DELETE FROM files WHERE path = ?", (rel,)).rowcount
        self._unmirror(removed)
        self._doc_shares.clear()
        return SyncReport(files_removed=1 if deleted else 0, chunks_removed=len(removed))

    def _indexed_paths(self) -> set[str]:
        return {row[0] for row in self._reader().execute("SELECT path FROM files")}

    def _delete_chunks(self, conn: sqlite3.Connection, rel: str) -> list[int]:
        ids = [row[0] for row in conn.execute("SELECT id FROM chunks WHERE path = ?", (rel,))]
        if ids:
            marks = ",".join("?" * len(ids))
            conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", ids)
            conn.execute(f"DELETE FROM chunks_vec WHERE rowid IN ({marks})", ids)
            conn.execute("DELETE FROM chunks WHERE path = ?", (rel,))
        return ids

    def _insert_chunks(self, conn: sqlite3.Connection, chunks: Sequence[Chunk]) -> list[int]:
        ids = []
        # An index of schema 3 (one full-text column) is written as it was until it is rebuilt.
        own_column = any(r[1] == "context" for r in conn.execute("PRAGMA table_info(chunks_fts)"))
        for chunk in chunks:
            cursor = conn.execute(
                """INSERT INTO chunks(path, start_line, end_line, heading, text, hash, date, confidence, entry_ids, context, written)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    chunk.path,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.heading,
                    chunk.text,
                    sha256_text(chunk.embed_text),
                    chunk.date.isoformat() if chunk.date else None,
                    chunk.confidence,
                    " ".join(chunk.entry_ids),
                    chunk.context,
                    chunk.written.isoformat() if chunk.written else None,
                ),
            )
            chunk_id = cursor.lastrowid
            if own_column:
                conn.execute(
                    "INSERT INTO chunks_fts(rowid, body, context) VALUES (?, ?, ?)",
                    (chunk_id, fts_body(chunk.embed_text), fts_body(chunk.context)),
                )
            else:
                conn.execute(
                    "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)",
                    (chunk_id, fts_body(f"{chunk.context}\n{chunk.embed_text}")),
                )
            ids.append(chunk_id)
        return ids

    # -- rebuild --

    def rebuild(
        self,
        *,
        embed: bool = True,
        progress: Progress | None = None,
        embedder: TextEmbedder | None = None,
    ) -> SyncReport:
        """Rebuild from the Markdown files into a temporary database, then swap it in.

        Vectors are reused through the embedding cache when the model did not change. A crash
        half-way leaves the old index in place and usable. The new file's ``generation`` is one
        more than the old one's; other engines on the same file notice the swap and reopen.
        ``embedder``: build with this one instead, and use it from the swap on (until then,
        searches use the old embedder and index).
        """
        self.refresh()
        tmp_path = self.path.with_name(
            f"{self.path.name}.rebuild-{os.getpid()}-{threading.get_ident()}"
        )
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(tmp_path) + suffix)
        fresh = MemoryIndex(
            self.workspace,
            embedder or self.embedder,
            self.count_tokens,
            self.params,
            path=tmp_path,
            busy_timeout=self.busy_timeout,
            cache_max_entries=self.cache_max_entries,
        )
        try:
            self._copy_cache_into(fresh)
            with self._write_lock:
                report = fresh.sync(embed=embed, progress=progress)
                # Files another process changed while this ran (embedding takes minutes):
                # caught up now, at a stat per unchanged file.
                late = fresh.sync(embed=embed)
                late.files_seen, late.warnings = 0, []
                report.merge(late)
                with _transaction(fresh._writer) as conn:
                    conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)",
                        (str(self.generation + 1),),
                    )
                fresh.close()
                self.close()
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(str(self.path) + suffix)
                os.replace(tmp_path, self.path)
                if embedder is not None:
                    self.embedder = embedder
                self._writer = self._open_or_recover()
                self._after_reopen()
        finally:
            fresh.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(str(tmp_path) + suffix)
        return report

    @follows_rebuilds
    def stats(self) -> dict[str, object]:
        """Counts and sizes for the stats panel and ``memdeck stats``."""
        conn = self._reader()
        size = sum(
            Path(str(self.path) + s).stat().st_size
            for s in ("", "-wal")
            if Path(str(self.path) + s).exists()
        )
        warnings = [
            row[0] for row in conn.execute("SELECT warning FROM files WHERE warning IS NOT NULL")
        ]
        return {
            "files": conn.execute("SELECT count(*) FROM files").fetchone()[0],
            "chunks": conn.execute("SELECT count(*) FROM chunks").fetchone()[0],
            "embedded": conn.execute("SELECT count(*) FROM chunks WHERE embedded = 1").fetchone()[
                0
            ],
            "cache_entries": conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0],
            "cache_max_entries": self.cache_max_entries,
            "index_bytes": size,
            "fingerprint": self.stored_fingerprint(),
            "warnings": warnings,
        }
