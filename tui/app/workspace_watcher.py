"""Watch the workspace for memory files changed outside the app and keep the index following.

Run :meth:`WorkspaceWatcher.run` from ONE exclusive async worker of the app::

    @work(exclusive=True, group="workspace-watcher", exit_on_error=False)
    async def watch_workspace(self) -> None:
        await self.watcher.run()

Each debounced batch of filesystem events is treated as a set of paths, and the disk is looked
at rather than the event kinds: a tmp-then-rename save arrives as "added", a vim save as
added+deleted of the same file, and a renamed or new folder arrives without its files (so the
whole workspace is re-synced). The sync runs in a thread, through
:meth:`MemoryEngine.sync_changed`: the engine publishes the change (origin ``changed on disk``)
only if the files were ahead of the index, so the app's own writes, which re-indexed their
files already, are not announced again. A failure goes to the ``on_failure`` callback as a
:class:`~tui.app.messages.MemoryChanged` with its ``error`` set.

Transcripts (``sessions/*.jsonl``) are watched too, for the session list: a batch that
touched one calls ``on_sessions`` (``memdeck ask``, ``memdeck sessions --restore``, a flush
from the shell change them while the app is open). They are never indexed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, awatch

from tui.app.messages import MemoryChanged
from tui.engine.engine import OUTSIDE, MemoryEngine
from tui.engine.workspace import MEMORY_DIR, MEMORY_FILE, SESSIONS_DIR, Workspace

#: Who changed the files, for the activity log.
SOURCE = OUTSIDE
#: Milliseconds of quiet before a batch of events is delivered (events arrive 60-90 ms after a write).
DEFAULT_DEBOUNCE_MS = 400

#: Editor temp, swap and backup files: vim (.swp/.swx, ``4913`` write probe, ``~`` backups),
#: emacs (``.#lock``, ``#autosave#``), atomic-save temp files (``.tmp``), macOS litter.
_TEMP_NAME = re.compile(
    r"(\.sw[a-p]$|\.swx$|~$|\.tmp$|\.temp$|\.bak$|\.part$|^4913$|^\.#|^#.*#$|^\.DS_Store$)"
)


def is_temp_name(name: str) -> bool:
    """True for editor swap/backup/temp file names that never hold memory."""
    return bool(_TEMP_NAME.search(name))


def is_watched(rel_path: str) -> bool:
    """Could a change at ``rel_path`` (workspace-relative) matter to the memory index?

    Only ``MEMORY.md`` and things under ``memory/`` do; ``.memdeck/``, ``sessions/``, hidden
    files and editor temp files never do.
    """
    if (
        rel_path != MEMORY_FILE
        and rel_path != MEMORY_DIR
        and not rel_path.startswith(MEMORY_DIR + "/")
    ):
        return False
    parts = rel_path.split("/")
    return not any(part.startswith(".") for part in parts) and not is_temp_name(parts[-1])


def is_session_file(rel_path: str) -> bool:
    """Is ``rel_path`` (workspace-relative) a session's transcript, ``sessions/<id>.jsonl``?
    (Not one in the trash, nor a hidden or temp file.)"""
    folder, _, name = rel_path.partition("/")
    return (
        folder == SESSIONS_DIR
        and "/" not in name
        and name.endswith(".jsonl")
        and not name.startswith(".")
        and not is_temp_name(name)
    )


@dataclass(frozen=True)
class SyncPlan:
    """What to re-sync for a batch: these files, or everything (``rescan``)."""

    paths: list[str]
    rescan: bool


def plan_sync(workspace: Workspace, changed: Iterable[str]) -> SyncPlan:
    """Decide from the disk (not from event kinds) what a batch of changed paths needs.

    Files are re-synced one by one (a missing one is dropped from the index). A folder that
    exists (new, or renamed into place) or a vanished path that was not a Markdown file (most
    likely a folder renamed away) makes the whole workspace re-sync.
    """
    paths: set[str] = set()
    rescan = False
    for rel in changed:
        if not (is_watched(rel) or rel in workspace.extra_files):
            continue
        full = workspace.root / rel
        if full.is_dir():
            rescan = True
        elif workspace.is_memory_path(rel):
            paths.add(rel)
        elif not full.exists() and not Path(rel).suffix:
            rescan = True
    return SyncPlan(sorted(paths), rescan)


class WorkspaceWatcher:
    """Re-syncs changed memory files and reports them; :meth:`stop` ends :meth:`run`."""

    def __init__(
        self,
        engine: MemoryEngine,
        on_failure: Callable[[MemoryChanged], object],
        *,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        force_polling: bool | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        on_sessions: Callable[[], object] | None = None,
    ) -> None:
        """The engine publishes each batch's change: once the files are full-text indexed, and
        again once their new units are embedded (``progress`` is called from the embedding
        thread meanwhile); paths are empty when the whole workspace was re-synced.
        ``on_failure`` is called on the event loop when a sync fails; ``on_sessions`` (on the
        event loop too) when a batch changed a session's transcript."""
        self.engine = engine
        self.on_failure = on_failure
        self.on_sessions = on_sessions
        self.progress = progress
        self.debounce_ms = debounce_ms
        self.force_polling = force_polling
        self._stop_event = asyncio.Event()
        self.ready = asyncio.Event()
        #: Batches of filesystem events looked at so far (the app's own writes included).
        self.batches_handled = 0
        """Set once the filesystem watch is in place (tests wait for it before writing)."""
        self.syncing = False
        """True while changed files are being indexed."""

    def _filter(self, change: Change, path: str) -> bool:
        root = self.engine.workspace.root
        try:
            rel = Path(path).relative_to(root).as_posix()
        except ValueError:
            return False
        return (
            is_watched(rel)
            or rel in self.engine.workspace.extra_files
            or (self.on_sessions is not None and is_session_file(rel))
        )

    async def run(self) -> None:
        """Watch until :meth:`stop` is called (or the worker running this is cancelled)."""
        self._stop_event.clear()
        root = self.engine.workspace.root
        watch = awatch(
            root,
            watch_filter=self._filter,
            debounce=self.debounce_ms,
            stop_event=self._stop_event,
            force_polling=self.force_polling,
            ignore_permission_denied=True,
            yield_on_timeout=True,
            rust_timeout=500,
        )
        async for changes in watch:
            self.ready.set()
            if not changes:
                continue  # a timeout tick: the watch is up
            changed = {Path(path).relative_to(root).as_posix() for _, path in changes}
            if self.on_sessions is not None and any(is_session_file(rel) for rel in changed):
                self.on_sessions()
            await self._sync(plan_sync(self.engine.workspace, changed))
            self.batches_handled += 1

    def stop(self) -> None:
        """Stop watching; :meth:`run` returns shortly after."""
        self._stop_event.set()

    async def _sync(self, plan: SyncPlan) -> None:
        if not plan.paths and not plan.rescan:
            return
        self.syncing = True
        try:
            await self._sync_plan(plan)
        finally:
            self.syncing = False

    async def _sync_plan(self, plan: SyncPlan) -> None:
        changed = [] if plan.rescan else plan.paths
        # Full-text first (searchable at once), then the vectors: a big file takes a while to
        # embed, and the header and Stats show the progress meanwhile.
        engine = self.engine
        try:
            await asyncio.to_thread(
                engine.sync_changed, None if plan.rescan else plan.paths, origin=SOURCE, embed=False
            )
        except Exception as exc:  # the watcher must outlive a failed sync (locked, unreadable...)
            self.on_failure(MemoryChanged(changed, SOURCE, error=str(exc)))
            return
        try:
            await asyncio.to_thread(
                engine.embed_pending, progress=self.progress, origin=SOURCE, paths=changed
            )
        except Exception as exc:
            self.on_failure(MemoryChanged(changed, SOURCE, error=f"embedding: {exc}"))
