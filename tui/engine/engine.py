"""The memory engine facade: one object the CLI, the chat engine and the TUI talk to."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from . import usage
from .chunker import ChunkParams
from .embeddings import Embedder, EmbeddingError, TextEmbedder, count_tokens_batch
from .git_history import GitHistory
from .heap import release_free_memory, resident_mb
from .history_records import (
    CLI_WRITES,
    ORIGIN_SOURCES,
    Attribution,
    HistoryMode,
)
from .history_records import CONSOLIDATION as CONSOLIDATION
from .history_records import EDITOR as EDITOR
from .history_records import FLUSH as FLUSH
from .history_records import OUTSIDE as OUTSIDE
from .history_records import RESTORE as RESTORE
from .index import CACHE_MAX_ENTRIES, MemoryIndex, Progress, SyncReport
from .inject import Injection, build_injection
from .metadata import EntryMeta
from .options import InjectionOptions, SearchOptions
from .query_vectors import QueryVectors
from .search import NO_MODEL_NOTE, QueryVector, retrieval_text, search
from .search_links import memory_entries_changed
from .search_results import SearchResponse, change_note
from .store import EntryBatch, MemoryEntry, MemoryStore, RestoredEntry, RetiredRecord
from .temporal import TimeIntent, parse_time_intent
from .token_counts import TokenCounts
from .workspace import MEMORY_FILE, Workspace

#: From this many chunks a search ranks the full text while its query's vector is computed
#: (LoCoMo-sized memories, every chunk matching: +1.2 ms of CPU for 0.3 ms sooner; 10k: 1.1
#: ms sooner for +1.1 ms of CPU, docs/performance.md).
RANK_WHILE_EMBEDDING_FROM = 2000

#: The note of a search done BM25-only because the embedding model was starting.
MODEL_STARTING = "embedding model starting (idle exit): BM25 only for now"


@dataclass(frozen=True)
class MemoryChange:
    """What a write changed: workspace-relative ``paths`` (the index already follows them),
    what re-indexing them did, and who wrote (``origin``). No paths: nothing was written."""

    paths: tuple[str, ...] = ()
    report: SyncReport = field(default_factory=SyncReport)
    origin: str = ""


#: Called with each published :class:`MemoryChange`, on the thread that made the change.
ChangeListener = Callable[[MemoryChange], None]


class MemoryEngine:
    """Store, index, embeddings, search and injection over one workspace.

    The embedding model loads lazily: until :meth:`load_model` has run (the TUI calls it in the
    background after the first frame), searches run BM25-only and say so.
    """

    def __init__(
        self,
        workspace: Workspace | Path | str | None = None,
        *,
        embedder: TextEmbedder | None = None,
        search_options: SearchOptions = SearchOptions(),
        injection_options: InjectionOptions = InjectionOptions(),
        chunk_params: ChunkParams = ChunkParams(),
        cache_max_entries: int = CACHE_MAX_ENTRIES,
        history: HistoryMode = "auto",
        attribution: Attribution = CLI_WRITES,
    ) -> None:
        """``cache_max_entries`` bounds the index's embedding cache (least recently used go);
        ``history`` whether writes are committed to the workspace's git history, and
        ``attribution`` who this engine's writes are from unless :meth:`attributed` says."""
        self.workspace = (
            workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        )
        embedder = embedder or Embedder()
        self._record_usage(embedder)
        self.search_options = search_options
        self.injection_options = injection_options
        self.store = MemoryStore(self.workspace)
        self.index = MemoryIndex(
            self.workspace,
            embedder,
            count_tokens_batch,
            chunk_params,
            cache_max_entries=cache_max_entries,
        )
        self._model_lock = threading.Lock()
        self._listeners: list[ChangeListener] = []
        self._listeners_lock = threading.Lock()
        #: ``changes``: what this thread wrote inside :meth:`one_change`, not published yet.
        self._held_changes = threading.local()
        #: Each memory file's ``(size, mtime_ns)`` as this engine last wrote or synced it.
        self._known_versions: dict[str, tuple[int, int] | None] = {}
        self._versions_lock = threading.Lock()
        #: The last few query vectors by (model, text): a turn searches the draft the live
        #: preview has just embedded.
        self.query_vectors = QueryVectors()
        self.history = GitHistory(self.workspace, history)
        self.token_counts = TokenCounts(self.workspace.root)
        self.attribution = attribution
        #: ``current``: who this thread's writes are from; ``committed``: the commits one
        #: :meth:`one_change` made so far (squashed into one at its end).
        self._writer = threading.local()
        self.store.on_written = self._commit_written
        self.store.before_write = self.history.commit_if_outside

    # -- the memory-change stream --

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener`` with every change of memory files, exactly once per change: each
        write through this engine, and each :meth:`sync_changed` that found the index behind
        the files (an outside edit). Returns a function that stops it. ``listener`` runs on
        the writing thread and must not block."""
        with self._listeners_lock:
            self._listeners.append(listener)

        def stop() -> None:
            with self._listeners_lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return stop

    # -- the history: who wrote --

    @contextmanager
    def attributed(self, attribution: Attribution) -> Iterator[None]:
        """This thread's writes inside are committed as ``attribution``'s (nested: the inner
        one counts)."""
        self.history.prepare()  # the first write is a commit of its own, not the repo's first
        outer = getattr(self._writer, "current", None)
        self._writer.current = attribution
        try:
            yield
        finally:
            self._writer.current = outer

    def current_attribution(self, origin: str = "") -> Attribution:
        """Who this thread's write is from: :meth:`attributed`'s, else the write's ``origin``
        as a source, else the engine's :attr:`attribution`."""
        current: Attribution | None = getattr(self._writer, "current", None)
        if current is not None:
            return current
        source = ORIGIN_SOURCES.get(origin) or (
            "chat" if origin.startswith("assistant:") else None
        )
        return Attribution(source) if source else self.attribution

    @contextmanager
    def _writing(self, origin: str) -> Iterator[None]:
        """A write by ``origin``: committed as its source unless :meth:`attributed` said."""
        with self.attributed(self.current_attribution(origin)):
            yield

    def _commit_written(self, rel: str) -> None:
        """The store's hook: ``rel`` was written and is durable; commit it (under its lock)."""
        commit = self.history.commit([rel], self.current_attribution())
        committed: list[str] | None = getattr(self._writer, "committed", None)
        if commit is not None and committed is not None:
            committed.append(commit)

    @contextmanager
    def one_change(self, origin: str) -> Iterator[None]:
        """The writes this thread makes inside are published as ONE :class:`MemoryChange` (by
        ``origin``; their paths in order, their reports merged) when it ends, failed or not:
        a flush writing its daily log and MEMORY.md is one change to those who follow."""
        if getattr(self._held_changes, "changes", None) is not None:
            yield  # inside an outer one: that one publishes
            return
        held: list[MemoryChange] = []
        self._held_changes.changes = held
        committed: list[str] = []
        self._writer.committed = committed
        try:
            yield
        finally:
            self._held_changes.changes = None
            self._writer.committed = None
            if len(committed) > 1:
                self.history.squash(committed, self.current_attribution(origin))
            if held:
                report = SyncReport()
                for change in held:
                    report.merge(change.report)
                paths = dict.fromkeys(path for change in held for path in change.paths)
                self._publish(MemoryChange(tuple(paths), report, origin))

    def _publish(self, change: MemoryChange) -> None:
        held: list[MemoryChange] | None = getattr(self._held_changes, "changes", None)
        if held is not None:
            held.append(change)
            return
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(change)

    @property
    def embedder(self) -> TextEmbedder:
        """The embedder in use: the index's, so that both change together (see
        :meth:`set_embedder`)."""
        return self.index.embedder

    def _record_usage(self, embedder: TextEmbedder) -> None:
        """A remote embedder records its tokens in the workspace's usage ledger."""
        if not embedder.remote:
            return
        from .remote_embeddings import RemoteEmbedder

        if isinstance(embedder, RemoteEmbedder) and embedder.usage is None:
            root = self.workspace.root

            def record(model: str, tokens: int | None) -> None:
                usage.record(
                    root,
                    purpose="embedding",
                    model=model,
                    prompt_tokens=tokens,
                    completion_tokens=None if tokens is None else 0,
                )

            embedder.usage = record

    def set_embedder(
        self, embedder: TextEmbedder, *, progress: Progress | None = None
    ) -> SyncReport:
        """Use ``embedder`` from now on, without reopening the engine (the ``[embeddings]``
        config changed); blocking, so call it from a worker. The old embedder is closed.

        The same fingerprint (the same model run another way, e.g. in a helper process) swaps
        at once. Another model rebuilds the index with it into a temporary file (the
        fingerprint rule): searches keep using the old model and index until the new index
        replaces them in one step. A remote embedder that fails meanwhile leaves an index
        without vectors (BM25 only until it answers, said in the report's warnings).
        """
        self._record_usage(embedder)
        old = self.embedder
        remote = embedder.remote
        with self._model_lock:
            try:
                if old.loaded:  # the app had loaded the old model: load the new one first
                    embedder.load()
                if embedder.fingerprint == old.fingerprint:
                    self.index.embedder = embedder
                    report = SyncReport()
                else:
                    report = self.index.rebuild(
                        embed=old.loaded or remote, progress=progress, embedder=embedder
                    )
            except EmbeddingError as exc:
                if not remote:
                    raise
                report = self.index.rebuild(embed=False, progress=progress, embedder=embedder)
                report.warnings.append(f"{exc}: BM25 only until it answers")
        if old is not embedder:
            old.close()
        return report

    @property
    def notices(self) -> list[str]:
        """Things the user should be told once (e.g. a corrupt index was rebuilt)."""
        return self.index.notices

    @property
    def model_loaded(self) -> bool:
        return self.embedder.loaded

    @property
    def model_ready_now(self) -> bool:
        """Whether a query embedding now would not wait for the model to start (an embedding
        helper restarts after an idle exit)."""
        return self.embedder.ready_now

    def load_model(self) -> None:
        """Load the embedding model (blocking; call it from a worker)."""
        with self._model_lock:
            self.embedder.load()

    def sync(self, *, embed: bool | None = None, progress: Progress | None = None) -> SyncReport:
        """Commit outside edits, bring the index up to date with the files. Embeds only if
        the model is loaded (or ``embed``)."""
        self._commit_outside_edits()
        try:
            return self.index.sync(
                embed=self.model_loaded if embed is None else embed, progress=progress
            )
        except EmbeddingError as exc:
            return self._without_vectors(exc, lambda: self.index.sync(embed=False))

    def _commit_outside_edits(self) -> None:
        """Commit files changed since the last commit as ``outside`` (unless :meth:`attributed`)."""
        if self.current_attribution(OUTSIDE).source == "outside":
            self.history.commit_outside()

    def sync_paths(self, rel_paths: Sequence[str], *, embed: bool | None = None) -> SyncReport:
        """Re-sync these files (a watcher saw them change, or a write just changed them).
        Embeds only if the model is loaded (or ``embed``); ``embed=False`` leaves the new units
        to :meth:`embed_pending` (full-text searchable at once)."""
        paths = list(rel_paths)
        try:
            return self.index.sync_paths(paths, embed=self.model_loaded if embed is None else embed)
        except EmbeddingError as exc:
            return self._without_vectors(exc, lambda: self.index.sync_paths(paths, embed=False))

    def _without_vectors(self, exc: EmbeddingError, again: Callable[[], SyncReport]) -> SyncReport:
        """A remote embedder failed mid-sync: index the text anyway, say why vectors are missing."""
        if not self.embedder.remote:
            raise exc
        report = again()
        report.warnings.append(f"{exc}: BM25 only until it answers")
        return report

    def embed_pending(
        self,
        *,
        progress: Progress | None = None,
        origin: str | None = None,
        paths: Sequence[str] = (),
    ) -> SyncReport:
        """Embed every unit that has no vector yet (nothing without the model), reporting
        ``progress("embedding", done, total)`` as it goes. With ``origin``, a change (of
        ``paths``, the files the new units came from) is published if any vector was added."""
        if not self.model_loaded:
            return SyncReport()
        report = self.index.embed_pending(progress=progress)
        if origin is not None and (report.embedded or report.cache_hits):
            self._publish(MemoryChange(tuple(paths), report, origin))
        return report

    # -- writing memory: every write re-indexes what it changed and says what that was --

    def files_changed(self, paths: Iterable[str], origin: str) -> MemoryChange:
        """Re-index ``paths`` (written through this engine), remember their versions and
        publish the change."""
        unique = tuple(dict.fromkeys(paths))
        if not unique:
            return MemoryChange(origin=origin)
        change = MemoryChange(unique, self.sync_paths(unique), origin)
        self._remember_versions(unique)
        self._publish(change)
        return change

    def _file_version(self, rel_path: str) -> tuple[int, int] | None:
        """``(size, mtime_ns)`` of a memory file; None when it is missing."""
        try:
            st = (self.workspace.root / rel_path).stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def _remember_versions(self, rel_paths: Iterable[str]) -> None:
        with self._versions_lock:
            for rel in rel_paths:
                self._known_versions[rel] = self._file_version(rel)

    def sync_changed(
        self, rel_paths: Sequence[str] | None, *, origin: str, embed: bool | None = None
    ) -> SyncReport:
        """:meth:`sync_paths` (``None``: :meth:`sync`, every file), publishing a
        :class:`MemoryChange` only if a file is not the version this engine last wrote or saw.
        A write of this engine re-indexed its file already, so when a watcher sees it, nothing
        is published twice, nor taken for an outside edit; a write of another process (``memdeck
        mcp``, the command line) may have re-indexed the shared index too, and is published."""
        if rel_paths is None:
            report = self.sync(embed=embed)
            moved = bool(report.files_changed or report.files_removed)
        else:
            report = self.sync_paths(rel_paths, embed=embed)
            with self._versions_lock:
                known = {r: self._known_versions[r] for r in rel_paths if r in self._known_versions}
            moved = bool(report.files_changed or report.files_removed) or any(
                rel not in known or self._file_version(rel) != known[rel] for rel in rel_paths
            )
            self._remember_versions(rel_paths)
        if moved:
            if rel_paths is not None and self.current_attribution(origin).source == "outside":
                self.history.commit_outside(rel_paths)  # a whole sync has committed them
            self._publish(MemoryChange(tuple(rel_paths or ()), report, origin))
        return report

    def facts_changed_in(self, rel_path: str, *, now: date) -> list[str]:
        """The MEMORY.md entries the entries of ``rel_path`` (a daily log) tell a change of,
        one line each: ``MEMORY.md#L3: My editor is Vim — changed on 2026-11-20?
        (memory/2026-11-20.md#L5-5)``. The file must be indexed; without vectors (the model not
        loaded) a shared rare word decides alone."""
        ids = [row.id for row in self.index.iter_chunks(rel_path)]
        lines = []
        for fact, change in memory_entries_changed(self.index, ids, now):
            text = " ".join(fact.text.split()).lstrip("-*+ ")
            lines.append(
                f"{fact.path}#L{fact.start_line}: {text[:120]} — {change_note(change.location)}"
            )
        return list(dict.fromkeys(lines))

    def save_entry(
        self,
        content: str,
        *,
        confidence: str,
        source: str,
        day: date | None = None,
        origin: str = "",
    ) -> tuple[EntryMeta, MemoryChange]:
        """Append one entry to MEMORY.md (see :meth:`MemoryStore.add_entry`), then re-index it.
        (``source`` is the entry's ``src=``; ``origin`` who wrote, for :meth:`on_change`.)"""
        with self._writing(origin):
            meta = self.store.add_entry(content, confidence=confidence, source=source, day=day)
        return meta, self.files_changed([MEMORY_FILE], origin)

    def save_entries(
        self,
        batch: EntryBatch,
        *,
        unless_tagged: tuple[str, str] | None = None,
        keep: Callable[[str, Sequence[str]], Sequence[str]] | None = None,
        origin: str = "",
    ) -> tuple[list[EntryMeta], MemoryChange]:
        """Append entries to MEMORY.md in one edit (see :meth:`MemoryStore.add_entries`), then
        re-index it if any was written."""
        with self._writing(origin):
            written = self.store.add_entries(batch, unless_tagged=unless_tagged, keep=keep)
        return written, self.files_changed([MEMORY_FILE] if written else [], origin)

    def forget(
        self, entries: Sequence[MemoryEntry], *, reason: str = "", origin: str = ""
    ) -> tuple[list[MemoryEntry], MemoryChange]:
        """Soft-delete entries (kept in the audit trail), then re-index their files."""
        with self._writing(origin):
            retired = self.store.retire_entries(entries, state="forgotten", reason=reason)
        return retired, self.files_changed((entry.path for entry in retired), origin)

    def restore(self, record: RetiredRecord, *, origin: str = RESTORE) -> RestoredEntry | None:
        """Undo a forget or a supersede (see :meth:`MemoryStore.restore_entry`), then re-index
        the file. Says where the entry went; None when nothing could be restored."""
        with self._writing(origin):
            restored = self.store.restore_entry(record)
        if restored is not None:
            self.files_changed([record.path], origin)
        return restored

    def supersede(
        self,
        entries: Sequence[MemoryEntry],
        *,
        reason: str = "",
        replaced_by: str | None = None,
        origin: str = "",
    ) -> tuple[list[MemoryEntry], MemoryChange]:
        """Retire entries a newer one replaces (kept in the audit trail), then re-index them."""
        with self._writing(origin):
            retired = self.store.retire_entries(
                entries, state="superseded", reason=reason, replaced_by=replaced_by
            )
        return retired, self.files_changed((entry.path for entry in retired), origin)

    def append_daily(self, text: str, day: date | None = None, *, origin: str = "") -> MemoryChange:
        """Append to the daily log of ``day`` (see :meth:`MemoryStore.append_daily`), then
        re-index it; ``paths[0]`` is the log."""
        with self._writing(origin):
            path = self.store.append_daily(text, day)
        return self.files_changed([self.workspace.relative(path)], origin)

    def reindex(self, *, progress: Progress | None = None) -> SyncReport:
        """Commit outside edits, rebuild the index from the files (unchanged texts cached)."""
        self._commit_outside_edits()
        return self.index.rebuild(embed=True, progress=progress)

    def search(
        self,
        query: str,
        options: SearchOptions | None = None,
        *,
        now: date | None = None,
        wait_for_model: bool = True,
        **overrides: Any,
    ) -> SearchResponse:
        """Hybrid search when the model is loaded, BM25-only before. ``wait_for_model=False``
        (the live preview): if the model is not ready now (its helper restarting), search
        BM25-only and have the model start meanwhile, instead of waiting for it."""
        self.index.refresh()  # another process may have rebuilt the index file (a stat)
        opts = options or self.search_options
        if overrides:
            opts = replace(opts, **overrides)
        intent = parse_time_intent(query, now or date.today()) if opts.decay else TimeIntent()
        query_vector: QueryVector | None = None
        starting = self.model_loaded and not wait_for_model and not self.embedder.ready_now
        if starting:
            self.embedder.warm()
        elif self.model_loaded and query.strip():
            query_vector = self.query_vectors.soon(
                self.embedder,
                retrieval_text(query, intent) or query,
                self.index.mirror.dims,
                in_background=self.index.doc_count() >= RANK_WHILE_EMBEDDING_FROM,
            )
        response = search(self.index, query, query_vector, opts, now=now, intent=intent)
        problem = self.embedder.problem
        if response.mode == "bm25" and problem:  # said instead of "not loaded": it is, and failed
            response.notes = [n for n in response.notes if n != NO_MODEL_NOTE]
            response.notes.append(f"{problem}: BM25 only")
        if starting:
            response.notes.append(MODEL_STARTING)
        pending = self.index.pending_embeddings() if response.mode == "hybrid" else 0
        if pending:
            response.notes.append(
                f"{pending} chunks not embedded yet: their vector score is missing"
            )
        return response

    def inject(
        self,
        query: str,
        *,
        budget: int | None = None,
        now: date | None = None,
        wait_for_model: bool = True,
    ) -> Injection:
        """The memory block for the next prompt and its report (``wait_for_model``: see
        :meth:`search`)."""
        options = (
            self.injection_options
            if budget is None
            else replace(self.injection_options, budget_tokens=budget)
        )
        response = (
            self.search(
                query,
                now=now,
                wait_for_model=wait_for_model,
                max_results=options.max_memories,
                candidate_multiplier=options.candidate_multiplier,
            )
            if query.strip()
            else None
        )
        results = response.results if response else []
        memory = self.store.read_memory()
        tally = self.token_counts.tally()
        injection = build_injection(memory.text, results, tally, options)
        if not results:  # what the preview of an empty draft counts: kept for the next start
            self.token_counts.keep(tally)
        if memory.notice:
            injection.report.notes.append(memory.notice)
        if response is not None:
            injection.report.notes.extend(response.notes)
        return injection

    def stats(self) -> dict[str, object]:
        """Files, chunks, index size, model state, resident memory (and the embedding
        helper's)."""
        stats = self.index.stats()
        stats["workspace"] = str(self.workspace.root)
        stats["model"] = self.embedder.spec.name
        stats["model_loaded"] = self.model_loaded
        stats["memory_mb"] = resident_mb()
        from .embed_helper import HelperEmbedder

        if isinstance(self.embedder, HelperEmbedder):  # the model runs in its own process
            stats["helper_memory_mb"] = self.embedder.helper_rss_mb()  # None: stopped
        return stats

    def release_memory(self) -> None:
        """Give back what only speeds up the next read (the index's page caches), to the
        operating system too: for the app's quiet moments. Blocking: for a thread."""
        self.index.release_memory()
        release_free_memory()  # glibc keeps freed pages in the process until trimmed

    def close(self) -> None:
        """Close the index and stop the embedder's helper process, if it has one."""
        self.query_vectors.close()
        self.index.close()
        self.embedder.close()
