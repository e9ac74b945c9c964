"""The memory's history in git: every write memdeck makes is one commit, attributed.

The workspace's Markdown (``MEMORY.md``, ``memory/**/*.md``) is versioned in a git repository in
the workspace folder, so plain ``git log -p`` works without memdeck. Nothing else is tracked: the
``.gitignore`` memdeck writes ignores everything else (itself included), and commits stage the
memory paths they name, never ``add -A``. libgit2 through ``pygit2`` does the work in-process (a
commit in a workspace of 700 files is a few ms, no ``git`` program is needed; see
``docs/history.md`` for the measurement against the ``git`` command).

Each commit says who wrote in its trailers::

    save_memory: Likes green tea

    Memdeck-Source: chat
    Memdeck-Session: s-20261126-1
    Memdeck-Trigger: idle
    Memdeck-Client: claude-code 2.1

History never blocks or loses a memory write: a failed commit is said once (:attr:`problem`),
its paths are kept and committed with the next one that succeeds; a repository libgit2 cannot
open is moved aside and started again, with a notice.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from .fileio import PRIVATE_DIR_MODE, lock_for, private_lock
from .git_discovery import AUTHOR_EMAIL as AUTHOR_EMAIL
from .git_discovery import AUTHOR_NAME as AUTHOR_NAME
from .git_discovery import OWN_REPOSITORY_KEY as OWN_REPOSITORY_KEY
from .git_discovery import why_not_kept
from .git_origins import LineOrigins
from .history_records import (
    Attribution,
    Change,
    HistoryError,
    HistoryMode,
    Origin,
    one_line,
    parse_trailers,
)
from .history_stamps import FileStamps, Stamp, stamp
from .workspace import MEMORY_DIR, MEMORY_FILE, STATE_DIR, Workspace

if TYPE_CHECKING:
    import pygit2

GITIGNORE = """\
# Written by memdeck: only the Markdown memory is versioned (MEMORY.md, memory/**/*.md).
# The index, caches, state, recovery copies, logs, sessions and config stay out.
/*
!/MEMORY.md
!/memory/
/memory/**
!/memory/**/
!/memory/**/*.md
"""

#: How :attr:`GitHistory.problem` starts while a commit failed (cleared by the next one made).
COMMIT_FAILED = "history: the change could not be committed"


@dataclass
class _Pending:
    """Commits that failed, kept to be made with the next one that succeeds."""

    paths: dict[str, None] = field(default_factory=dict)
    attributions: list[Attribution] = field(default_factory=list)


class GitHistory:
    """The git history of one workspace's memory. Thread-safe; every method blocks (call it
    from a worker). Other processes (``memdeck mcp``, the CLI) commit to the same repository:
    a lock file in ``.memdeck/locks`` keeps one commit at a time."""

    def __init__(self, workspace: Workspace, mode: HistoryMode = "auto") -> None:
        self.workspace = workspace
        self.root = workspace.root
        self.mode = mode
        #: Why history is not kept, or what went wrong last (one line), for the user; None
        #: when all is well.
        self.problem: str | None = None
        self._lock = threading.RLock()
        self._repo: pygit2.Repository | None = None
        self._pending = _Pending()
        self.origins = LineOrigins(self.root)
        self.stamps = FileStamps(self.root, workspace.extra_files)
        #: Changes read so far by commit id (a commit never changes; its diff stats cost).
        self._read: dict[str, Change] = {}
        if mode == "auto":
            self.problem = why_not_kept(self.root)
        self._disabled = mode == "off" or self.problem is not None

    # -- the repository --

    @property
    def enabled(self) -> bool:
        """Whether writes are committed."""
        return not self._disabled

    def _file_lock(self) -> FileLock:
        locks = self.root / STATE_DIR / "locks"
        locks.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        return private_lock(locks / "history.lock")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, self._file_lock(), _private_files():
            yield

    def repository(self) -> pygit2.Repository:
        """The workspace's repository, created (with one commit of what is there) the first
        time; one libgit2 cannot open is moved aside and started again."""
        if self._repo is not None:
            return self._repo
        import pygit2

        git_dir = self.root / ".git"
        created = not git_dir.exists()
        if not created:
            try:
                repo = pygit2.Repository(str(self.root))
                if not repo.head_is_unborn:
                    repo.head.peel(pygit2.Commit)  # a broken HEAD fails here
            except (pygit2.GitError, KeyError, ValueError) as exc:
                aside = self.root / f".git.broken-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
                os.replace(git_dir, aside)
                self._say(
                    f"the workspace's git repository could not be read ({exc}); it was moved to "
                    f"{aside.name} and history starts again"
                )
                repo = pygit2.init_repository(str(self.root))
        else:
            repo = pygit2.init_repository(str(self.root))
            repo.config[OWN_REPOSITORY_KEY] = "true"
        with contextlib.suppress(OSError):
            os.chmod(git_dir, PRIVATE_DIR_MODE)
        ignore = self.root / ".gitignore"
        # a repository that was there before (OpenClaw makes one) keeps its own ignore rules
        if created and not ignore.exists():
            with _private_files():
                ignore.write_text(GITIGNORE, encoding="utf-8")
        self._repo = repo
        if repo.head_is_unborn:
            paths = self.memory_paths()
            self._commit(repo, paths, Attribution("outside", summary="memory as it was"), True)
        return repo

    def prepare(self) -> None:
        """Create the repository now if it is not there yet (with one commit of what is
        there), so the write about to be made is a commit of its own. Never raises."""
        if self._disabled or self._repo is not None:
            return
        try:
            with self._locked():
                self.repository()
        except Exception as exc:  # noqa: BLE001 - history never blocks a write
            self._say(f"history: {one_line(str(exc))}")

    def memory_paths(self) -> list[str]:
        """The workspace's memory files as workspace-relative paths."""
        return [rel for rel, _path in self.workspace.iter_memory_files()]

    # -- committing --

    def commit(self, paths: Iterable[str], attribution: Attribution) -> str | None:
        """Commit ``paths`` as they are now, attributed; the new commit's id, or None when
        nothing changed or history is off. Never raises: a failure is said once (in
        :attr:`problem`) and its paths are retried with the next commit."""
        if self._disabled:
            return None
        wanted = [p for p in dict.fromkeys(paths) if self._is_tracked_path(p)]
        with self._lock:
            pending = self._pending
            all_paths = list(dict.fromkeys([*pending.paths, *wanted]))
            if not all_paths:
                return None
            try:
                with self._file_lock(), _private_files():
                    repo = self.repository()
                    commit_id = self._commit(repo, all_paths, attribution)
            except Exception as exc:  # noqa: BLE001 - history never blocks a write
                pending.paths.update(dict.fromkeys(wanted))
                pending.attributions.append(attribution)
                self._say(f"{COMMIT_FAILED} ({one_line(str(exc))}); it will be with the next one")
                return None
            self._pending = _Pending()
            if self.problem and self.problem.startswith(COMMIT_FAILED):
                self.problem = None  # a notice (a repository moved aside) stays
            return commit_id

    def commit_outside(self, paths: Iterable[str] | None = None) -> str | None:
        """Commit what changed on disk without memdeck (``paths``, or every memory file) as
        an ``outside`` edit; None when nothing did. Each file's write lock is taken first, so
        a memdeck write in progress is committed as its writer's, not taken for this."""
        if self._disabled:
            return None
        chosen = list(paths) if paths is not None else None
        if chosen is None:
            try:
                with self._locked():
                    chosen = self._changed_since_commit()
            except Exception as exc:  # noqa: BLE001 - history never blocks
                self._say(f"history: {one_line(str(exc))}")
                return None
        chosen = [rel for rel in chosen if self._is_tracked_path(rel)]
        with contextlib.ExitStack() as held:
            for rel in sorted(chosen):
                with contextlib.suppress(OSError, Timeout):
                    held.enter_context(lock_for(self.root / rel))
            return self.commit(chosen, Attribution("outside", summary="outside edit"))

    def commit_if_outside(self, rel: str) -> str | None:
        """Before memdeck writes ``rel`` (under its lock): if the file is not as last committed
        (another program changed it and the watcher has not said so yet), commit it as an
        ``outside`` edit first, so the write's own commit holds only the write. A file whose
        memdeck commit failed earlier is not taken for an outside edit."""
        if self._disabled or not self._is_tracked_path(rel) or rel in self._pending.paths:
            return None
        import pygit2

        try:
            with self._locked():
                repo = self.repository()
                path = self.root / rel
                on_disk = str(pygit2.hashfile(str(path))) if path.is_file() else None
                head = repo.head.peel(pygit2.Commit).tree
                try:
                    committed: str | None = str(head[rel].id)
                except KeyError:
                    committed = None
        except Exception:  # noqa: BLE001 - the write's commit will hold it, then
            return None
        if on_disk == committed:
            return None
        return self.commit([rel], Attribution("outside", summary="outside edit"))

    def squash(self, commits: Sequence[str], attribution: Attribution) -> str | None:
        """Make ``commits`` (consecutive, the last one HEAD) one commit of ``attribution``:
        a flush's daily log and MEMORY.md are one change. Left as they are when another
        commit came between them."""
        if self._disabled or len(commits) < 2:
            return None
        import pygit2

        try:
            with self._locked():
                repo = self.repository()
                chain = [repo.get(commit_id) for commit_id in commits]
                if str(repo.head.target) != commits[-1] or not all(
                    isinstance(c, pygit2.Commit) for c in chain
                ):
                    return None
                for before, after in zip(chain, chain[1:], strict=False):
                    assert isinstance(before, pygit2.Commit) and isinstance(after, pygit2.Commit)
                    if [str(p) for p in after.parent_ids] != [str(before.id)]:
                        return None
                first, last = chain[0], chain[-1]
                assert isinstance(first, pygit2.Commit) and isinstance(last, pygit2.Commit)
                files: dict[str, None] = {}
                for commit in chain:
                    assert isinstance(commit, pygit2.Commit)
                    files.update(dict.fromkeys(self._change(repo, commit).files))
                message = attribution.message(list(files))
                oid = repo.create_commit(
                    None, last.author, last.committer, message, last.tree_id, first.parent_ids
                )
                repo.head.set_target(oid)
                self.stamps.moved(commits[-1], str(oid))
                self.origins.rename(commits, str(oid))
                return str(oid)
        except Exception as exc:  # noqa: BLE001 - the commits stay as they are
            self._say(f"history: {one_line(str(exc))}")
            return None

    def _is_tracked_path(self, rel: str) -> bool:
        return (
            rel == MEMORY_FILE
            or rel in self.workspace.extra_files
            or (rel.startswith(f"{MEMORY_DIR}/") and rel.endswith(".md"))
        )

    def _changed_since_commit(self) -> list[str]:
        """The memory files not as last committed: none without asking git when every one is
        as memdeck last saw it committed (:class:`~.history_stamps.FileStamps`)."""
        files = self.stamps.on_disk()
        if self.stamps.unchanged(files):
            return []
        repo = self.repository()
        changed = self._changed_on_disk(repo)
        self.stamps.checked(None if repo.head_is_unborn else str(repo.head.target), files, changed)
        return changed

    def _changed_on_disk(self, repo: pygit2.Repository) -> list[str]:
        """The memory files that differ from the last commit (new, changed or gone): only
        these are locked and committed, not every file of the workspace."""
        import pygit2

        repo.index.read()
        current = pygit2.enums.FileStatus.CURRENT
        changed = {
            rel
            for rel, flags in repo.status(untracked_files="all").items()
            if flags != current and self._is_tracked_path(rel)
        }
        # an extra file configured after the repository was made may be ignored by its rules
        changed.update(
            rel
            for rel in self.workspace.extra_files
            if rel not in repo.index and (self.root / rel).is_file()
        )
        return sorted(changed)

    def _commit(
        self,
        repo: pygit2.Repository,
        paths: Sequence[str],
        attribution: Attribution,
        allow_empty: bool = False,
    ) -> str | None:
        import pygit2

        # the commit's tree is HEAD's with these paths as they are now, built apart from the
        # repository's index, so what a user staged there is neither committed nor unstaged
        parents = [] if repo.head_is_unborn else [repo.head.target]
        head = repo.get(parents[0]) if parents else None
        assert head is None or isinstance(head, pygit2.Commit)
        staged = pygit2.Index()
        if head is not None:
            staged.read_tree(head.tree)
        present = {
            rel
            for rel in paths
            if (self.root / rel).is_file() and not (self.root / rel).is_symlink()
        }
        # stamped before they are read: a change while they are is seen at the next start
        stamps: dict[str, Stamp | None] = {
            rel: stamp(self.root / rel) if rel in present else None for rel in paths
        }
        for rel in paths:
            if rel in present:
                blob = repo.create_blob_fromworkdir(rel)
                staged.add(pygit2.IndexEntry(rel, blob, pygit2.enums.FileMode.BLOB))
            elif rel in staged:
                staged.remove(rel)
        tree = staged.write_tree(repo)
        if head is not None and not allow_empty and head.tree_id == tree:
            self.stamps.committed(str(parents[0]), str(parents[0]), stamps)
            return None
        index = repo.index
        index.read()
        for rel in paths:
            if rel in present:
                index.add(rel)
            elif rel in index:
                index.remove(rel)
        index.write()
        signature = pygit2.Signature(AUTHOR_NAME, AUTHOR_EMAIL, int(time.time()), _utc_offset())
        oid = repo.create_commit(
            "HEAD", signature, signature, attribution.message(paths), tree, parents
        )
        self.stamps.committed(str(parents[0]) if parents else None, str(oid), stamps)
        before = head.tree if head is not None else None
        after = repo.get(tree)
        assert isinstance(after, pygit2.Tree)
        self.origins.advance(
            [(rel, *_version(repo, before, rel), *_version(repo, after, rel)) for rel in paths],
            str(oid),
        )
        return str(oid)

    def _say(self, line: str) -> None:
        self.problem = line

    # -- reading --

    def changes(
        self,
        path: str | None = None,
        *,
        source: str | None = None,
        since: datetime | None = None,
        limit: int = 200,
    ) -> list[Change]:
        """The history newest first: up to ``limit`` changes, of ``path`` and ``source`` when
        given, not older than ``since``."""
        if self._disabled:
            return []
        import pygit2

        with self._locked():
            repo = self.repository()
            if repo.head_is_unborn:
                return []
            found: list[Change] = []
            for commit in repo.walk(
                repo.head.target, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME
            ):
                when = datetime.fromtimestamp(commit.commit_time, UTC)
                if since is not None and when < since:
                    break
                change = self._change(repo, commit)
                if path is not None and path not in change.files:
                    continue
                if source is not None and change.source != source:
                    continue
                found.append(change)
                if len(found) >= limit:
                    break
            return found

    def _change(self, repo: pygit2.Repository, commit: pygit2.Commit) -> Change:
        known = self._read.get(str(commit.id))
        if known is None:
            known = self._read[str(commit.id)] = self._read_change(repo, commit)
            if len(self._read) > 4096:
                self._read.pop(next(iter(self._read)))
        return known

    def _read_change(self, repo: pygit2.Repository, commit: pygit2.Commit) -> Change:
        trailers = parse_trailers(commit.message)
        if commit.parents:
            diff = repo.diff(commit.parents[0], commit)
        else:
            diff = commit.tree.diff_to_tree(swap=True)
        files = tuple(delta.new_file.path for delta in diff.deltas)
        stats = diff.stats
        return Change(
            id=str(commit.id),
            time=datetime.fromtimestamp(commit.commit_time, UTC),
            source=trailers.get("source", "outside"),
            summary=commit.message.splitlines()[0] if commit.message else "",
            files=files,
            added=stats.insertions,
            removed=stats.deletions,
            session=trailers.get("session"),
            trigger=trailers.get("trigger"),
            client=trailers.get("client"),
        )

    def change(self, commit_id: str) -> Change:
        """One change by id (a prefix will do); HistoryError when there is none."""
        with self._locked():
            repo = self.repository()
            return self._change(repo, self._find(repo, commit_id))

    def _find(self, repo: pygit2.Repository, commit_id: str) -> pygit2.Commit:
        import pygit2

        try:
            found = repo.revparse_single(commit_id.strip())
            commit = found.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
            raise HistoryError(f"no change {commit_id!r} in the history") from exc
        return commit

    def diff(self, commit_id: str) -> str:
        """The change's unified diff (as ``git show`` prints it, without the header)."""
        with self._locked():
            repo = self.repository()
            commit = self._find(repo, commit_id)
            if commit.parents:
                patch = repo.diff(commit.parents[0], commit).patch
            else:
                patch = commit.tree.diff_to_tree(swap=True).patch
            return patch or ""

    def file_at(self, commit_id: str, rel: str) -> bytes | None:
        """``rel`` as commit ``commit_id`` left it (None: it did not exist there)."""
        import pygit2

        with self._locked():
            repo = self.repository()
            commit = self._find(repo, commit_id)
            try:
                entry = commit.tree[rel]
            except KeyError:
                return None
            blob = repo.get(entry.id)
            return blob.data if isinstance(blob, pygit2.Blob) else None

    def parent_id(self, commit_id: str) -> str | None:
        """The commit before ``commit_id`` (None for the first)."""
        with self._locked():
            repo = self.repository()
            commit = self._find(repo, commit_id)
            return str(commit.parents[0].id) if commit.parents else None

    # -- origins --

    def origin(self, rel: str, start_line: int, end_line: int | None = None) -> Origin | None:
        """The change that last wrote lines ``start_line``-``end_line`` (1-based) of ``rel`` as
        it is committed (the newest of them); None when history is off, the file is not
        committed or the lines changed since (not committed yet). The first call for a file
        blames it (seconds in a long history, without holding up writes); after that memdeck's
        commits keep its lines' origins (:class:`~.git_origins.LineOrigins`)."""
        if self._disabled or not self._is_tracked_path(rel):
            return None
        import pygit2

        try:
            with self._locked():
                repo = self.repository()
                if repo.head_is_unborn:
                    return None
                head = repo.head.peel(pygit2.Commit)
                blob_id = str(head.tree[rel].id)
                head_id = head.id
            path = self.root / rel
            # The working file must be the committed one, or the line numbers lie.
            if not path.is_file() or str(pygit2.hashfile(str(path))) != blob_id:
                return None
            commits = self.origins.lines(rel, blob_id)
            reader = pygit2.Repository(str(self.root))  # its own handle: no lock held
            if commits is None:
                blame = reader.blame(rel, newest_commit=head_id)
                commits = [
                    str(hunk.final_commit_id) for hunk in blame for _ in range(hunk.lines_in_hunk)
                ]
                self.origins.remember(rel, blob_id, commits)
            wrote = set(commits[max(0, start_line - 1) : end_line or start_line])
            found = [reader.get(commit_id) for commit_id in wrote]
        except Exception:  # noqa: BLE001 - an origin is never worth an error
            return None
        newest: pygit2.Commit | None = None
        for commit in found:
            if isinstance(commit, pygit2.Commit) and (
                newest is None or commit.commit_time > newest.commit_time
            ):
                newest = commit
        if newest is None:
            return None
        trailers = parse_trailers(newest.message)
        return Origin(
            source=trailers.get("source", "outside"),
            time=datetime.fromtimestamp(newest.commit_time, UTC),
            commit=str(newest.id),
            session=trailers.get("session"),
            client=trailers.get("client"),
            trigger=trailers.get("trigger"),
        )


def _version(
    repo: pygit2.Repository, tree: pygit2.Tree | None, rel: str
) -> tuple[str | None, bytes | None]:
    """``rel``'s blob id and bytes in ``tree`` (None, None: not there)."""
    import pygit2

    if tree is None:
        return None, None
    try:
        blob = repo.get(tree[rel].id)
    except KeyError:
        return None, None
    return (str(blob.id), blob.data) if isinstance(blob, pygit2.Blob) else (None, None)


@contextlib.contextmanager
def _private_files() -> Iterator[None]:
    """What libgit2 creates inside is private (no group or other bits), like every file of a
    workspace. The umask is the process's: memdeck itself creates no file meant to be shared."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _utc_offset() -> int:
    """This machine's UTC offset now, in minutes (a commit's time zone)."""
    offset = datetime.now().astimezone().utcoffset()
    return int(offset.total_seconds() // 60) if offset else 0
