"""Watch the workspace for memory files changed outside the app and keep the index following.

Run :meth:`WorkspaceWatcher.run` from ONE exclusive async worker of the app::

    @work(exclusive=True, group="workspace-watcher", exit_on_error=False)
    async def watch_workspace(self) -> None:
        await self.watcher.run()

Each debounced batch of filesystem events is treated as a set of paths, and the disk is looked
at rather than the event kinds: a tmp-then-rename save arrives as "added", a vim save as
added+deleted of the same file, and a renamed or new folder arrives without its files (so the
whole workspace is re-synced). The sync runs in a thread; then the ``on_change`` callback gets a
:class:`~tui.app.messages.MemoryChanged` (e.g. ``memory_panels.post_message``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, awatch

from tui.app.messages import MemoryChanged
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import MEMORY_DIR, MEMORY_FILE, Workspace

#: Who changed the files, for the activity log.
SOURCE = "changed on disk"
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
        if not is_watched(rel):
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
        on_change: Callable[[MemoryChanged], object],
        *,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        force_polling: bool | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """``on_change`` is called on the event loop with each batch's :class:`MemoryChanged`
        (its paths are empty when the whole workspace was re-synced): once the files are
        full-text indexed, and again once their new units are embedded (``progress`` is called
        from the embedding thread meanwhile)."""
        self.engine = engine
        self.on_change = on_change
        self.progress = progress
        self.debounce_ms = debounce_ms
        self.force_polling = force_polling
        self._stop_event = asyncio.Event()
        self.ready = asyncio.Event()
        """Set once the filesystem watch is in place (tests wait for it before writing)."""
        self.syncing = False
        """True while changed files are being indexed."""

    def _filter(self, change: Change, path: str) -> bool:
        root = self.engine.workspace.root
        try:
            rel = Path(path).relative_to(root).as_posix()
        except ValueError:
            return False
        return is_watched(rel)

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
            await self._sync(plan_sync(self.engine.workspace, changed))

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
        try:
            if plan.rescan:
                report = await asyncio.to_thread(self.engine.sync, embed=False)
            else:
                report = await asyncio.to_thread(self.engine.sync_paths, plan.paths, embed=False)
        except Exception as exc:  # the watcher must outlive a failed sync (locked, unreadable...)
            self.on_change(MemoryChanged(changed, SOURCE, error=str(exc)))
            return
        self.on_change(MemoryChanged(changed, SOURCE, report))
        try:
            embedded = await asyncio.to_thread(self.engine.embed_pending, progress=self.progress)
        except Exception as exc:
            self.on_change(MemoryChanged(changed, SOURCE, error=f"embedding: {exc}"))
            return
        if embedded.embedded or embedded.cache_hits:
            self.on_change(MemoryChanged(changed, SOURCE, embedded))
