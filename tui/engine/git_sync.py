"""The memory on every machine: :func:`sync` pulls the remote's ``main`` branch into the
workspace's history and pushes it back.

A pull fast-forwards, or merges line-wise (libgit2's merge; a file both machines changed on
the same lines keeps both versions between conflict marks, nothing lost). The working files
are written through the store, each under its lock, so the index follows and the editor's
conflict flow sees them; the merge is one commit, ``Memdeck-Source: sync``. Nothing is pushed
while a file holds conflict marks: the user resolves them, then syncs again. Fetch and push
use their own repository handle: the network never holds the history's lock, so no memory
write waits on it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import pygit2

from .fileio import decode_exact, encode_exact, lock_for
from .git_history import AUTHOR_EMAIL, AUTHOR_NAME
from .history_records import Attribution, HistoryError, one_line, parse_trailers
from .merge import matched_lines
from .workspace import MEMORY_DIR, MEMORY_FILE

if TYPE_CHECKING:
    from .engine import MemoryEngine

#: The remote branch every machine syncs.
BRANCH = "main"
#: Where the last fetch of the remote's branch is kept in the workspace's repository.
TRACKING_REF = "refs/remotes/memdeck/main"
#: The origin of a sync's memory change (see :attr:`MemoryChange.origin`).
SYNC = "sync"
#: The labels of a conflict's two versions in the file.
OURS_LABEL, THEIRS_LABEL = "this machine", "remote"
#: Rounds of fetch, merge and push when the remote moves between them.
ATTEMPTS = 3

_MARKS = re.compile(rb"^<<<<<<< .*?^=======\r?$.*?^>>>>>>> ", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class SyncOutcome:
    """What a sync did: changes pulled and pushed, the files it wrote, the files left with
    conflict marks (nothing is pushed while there are any)."""

    pulled: int = 0
    pushed: int = 0
    files: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    created: bool = False

    def describe(self) -> str:
        """One line: ``pulled 3 changes, pushed 2``, ``up to date``..."""
        parts = []
        if self.pulled:
            parts.append(f"pulled {_changes(self.pulled)}")
        if self.pushed:
            made = f" (created the remote's {BRANCH} branch)" if self.created else ""
            parts.append(f"pushed {_changes(self.pushed) if not parts else self.pushed}{made}")
        return ", ".join(parts) if parts else "up to date"

    def advice(self) -> str | None:
        """The one line saying what to do about the conflicts; None without any."""
        if not self.conflicts:
            return None
        files = ", ".join(self.conflicts)
        return (
            f"{files}: both machines changed the same lines; both versions are kept between "
            f"<<<<<<< and >>>>>>> marks: edit {files} to keep what you want, then run "
            "`memdeck sync` again (nothing was pushed)"
        )


def _changes(count: int) -> str:
    return f"{count} change{'s' if count != 1 else ''}"


def remote_url(remote: str) -> str:
    """A git URL as libgit2 takes it: URLs and ``user@host:path`` as they are, a plain path
    made absolute (``~`` expanded)."""
    text = remote.strip()
    return text if _is_url(text) else str(Path(text).expanduser().resolve())


def shown(remote: str) -> str:
    """``remote`` as a message may show it: one line, a password in it hidden."""
    parts = urlsplit(remote.strip())
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        remote = parts._replace(netloc=f"{parts.username}:***@{host}").geturl()
    return one_line(remote)


def _without_password(text: str, remote: str) -> str:
    password = urlsplit(remote.strip()).password
    return one_line(text.replace(password, "***") if password else text)


def _is_url(text: str) -> bool:
    return "://" in text or re.match(r"^[\w.-]+@[\w.-]+:", text) is not None


def sync(engine: MemoryEngine, remote: str) -> SyncOutcome:
    """Pull ``remote``'s ``main`` into the workspace's history and files, then push. Raises
    :class:`HistoryError` (one line) when history is off or the remote cannot be reached;
    then no memory file and no commit was changed."""
    history = engine.history
    if not history.enabled:
        raise HistoryError(
            f"{history.problem or 'history is off for this workspace'}; sync needs it"
        )
    url = remote_url(remote)
    if not _is_url(remote.strip()) and not Path(url).is_dir():
        raise HistoryError(f"cannot reach the remote {shown(remote)}: no such folder")
    with history._locked():  # made (with its first commit) before a second handle opens it
        history.repository()
    repo = pygit2.Repository(str(engine.workspace.root))
    try:
        return _sync(engine, repo, url, remote)
    finally:
        repo.free()


def _sync(engine: MemoryEngine, repo: pygit2.Repository, url: str, remote: str) -> SyncOutcome:
    pulled, written, conflicts = 0, list[str](), list[str]()
    for _attempt in range(ATTEMPTS):
        fetched = _fetch(repo, url, remote)
        engine.history.commit_outside()  # what is on disk is in HEAD before the merge
        if fetched is not None:
            count, files, marked = _pull(engine, repo, fetched)
            pulled += count
            written += [rel for rel in files if rel not in written]
            conflicts += [rel for rel in marked if rel not in conflicts]
        unresolved = conflicts or _marked_files(repo, fetched)
        if unresolved:
            return SyncOutcome(pulled, 0, tuple(written), tuple(unresolved))
        pushed = _push(repo, url, remote, fetched)
        if pushed is not None:
            created = fetched is None and pushed > 0
            return SyncOutcome(pulled, pushed, tuple(written), created=created)
    raise HistoryError(
        f"the remote {shown(remote)} kept changing while syncing; run `memdeck sync` again"
    )


# -- the network --


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials (asked once, never in a loop): the ssh agent's keys, or a user and password
    written in the URL; and the reason a push was refused."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.asked = False
        self.refused: str | None = None

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: pygit2.enums.CredentialType
    ) -> pygit2.KeypairFromAgent | pygit2.UserPass:
        if self.asked:
            raise HistoryError("the remote refused the credentials")
        self.asked = True
        if allowed_types & pygit2.enums.CredentialType.SSH_KEY:
            return pygit2.KeypairFromAgent(username_from_url or "git")
        parts = urlsplit(self.url)
        if allowed_types & pygit2.enums.CredentialType.USERPASS_PLAINTEXT and parts.password:
            return pygit2.UserPass(unquote(parts.username or ""), unquote(parts.password))
        raise HistoryError(
            "the remote asks for credentials: use an ssh URL (keys from your ssh agent), or "
            "write them in the URL"
        )

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message:
            self.refused = message


def _fetch(repo: pygit2.Repository, url: str, remote: str) -> pygit2.Oid | None:
    """The remote's ``main`` after a fetch (None: the remote has no such branch yet)."""
    with _unreachable(remote):
        if TRACKING_REF in repo.references:
            repo.references.delete(TRACKING_REF)
        handle = repo.remotes.create_anonymous(url)
        handle.fetch([f"+refs/heads/{BRANCH}:{TRACKING_REF}"], callbacks=_Callbacks(url))
    ref = repo.references.get(TRACKING_REF)
    return None if ref is None else ref.peel(pygit2.Commit).id


def _push(repo: pygit2.Repository, url: str, remote: str, fetched: pygit2.Oid | None) -> int | None:
    """Push HEAD to the remote's ``main``: the number of changes sent (0: nothing to send);
    None when the remote moved since the fetch (fetch and merge again)."""
    head = repo.head.target
    if fetched is not None and (head == fetched or repo.descendant_of(fetched, head)):
        return 0
    walker = repo.walk(head)
    if fetched is not None:
        walker.hide(fetched)
    count = sum(1 for _ in walker)
    callbacks = _Callbacks(url)
    with _unreachable(remote):
        handle = repo.remotes.create_anonymous(url)
        try:
            handle.push([f"{repo.head.name}:refs/heads/{BRANCH}"], callbacks=callbacks)
        except Exception as exc:
            if "fastforward" in str(exc).replace("-", "").lower():
                return None  # the remote moved since the fetch
            raise
    if callbacks.refused:
        return None
    repo.references.create(TRACKING_REF, head, force=True)
    return count


@contextmanager
def _unreachable(remote: str) -> Iterator[None]:
    """A network failure as one line (the remote as the user wrote it, no password)."""
    try:
        yield
    except HistoryError as exc:
        raise HistoryError(
            f"cannot reach the remote {shown(remote)}: {_without_password(str(exc), remote)}"
        ) from exc
    except (pygit2.GitError, OSError, ValueError, KeyError) as exc:
        raise HistoryError(
            f"cannot reach the remote {shown(remote)}: {_without_password(str(exc), remote)}"
        ) from exc


# -- the pull --


def _pull(
    engine: MemoryEngine, repo: pygit2.Repository, fetched: pygit2.Oid
) -> tuple[int, list[str], list[str]]:
    """Bring ``fetched`` into HEAD and the files: (changes pulled, files written, files left
    with conflict marks)."""
    history = engine.history
    with history._locked():
        local = repo.head.target
    if local == fetched or repo.descendant_of(local, fetched):
        return 0, [], []
    walker = repo.walk(fetched)
    walker.hide(local)
    pulled = sum(1 for _ in walker)
    theirs = repo.get(fetched)
    ours = repo.get(local)
    assert isinstance(theirs, pygit2.Commit) and isinstance(ours, pygit2.Commit)
    # A history of nothing but an empty first commit (a new machine) takes the remote's.
    fast_forward = repo.descendant_of(fetched, local) or (
        len(ours.tree) == 0 and repo.merge_base(local, fetched) is None
    )
    conflicts: list[str] = []
    if fast_forward:
        target = theirs.tree
    else:
        tree_id, conflicts = _merged_tree(repo, local, fetched)
        found = repo.get(tree_id)
        assert isinstance(found, pygit2.Tree)
        target = found
    summary = (
        f"sync: {'fast-forward' if fast_forward else 'merge'} of {_changes(pulled)} from the remote"
    )
    writer = Attribution("sync", summary=summary)
    written: list[str] = []
    with engine.attributed(writer), engine.one_change(SYNC):
        for rel, before, after in _file_changes(repo, ours.tree, target):
            if _write(engine, rel, before, after):
                written.append(rel)
        engine.files_changed(written, origin=SYNC)
    _settle(engine, repo, local, fetched, fast_forward, writer)
    return pulled, written, conflicts


def _merged_tree(
    repo: pygit2.Repository, local: pygit2.Oid, fetched: pygit2.Oid
) -> tuple[pygit2.Oid, list[str]]:
    """The merge of the two commits' trees: libgit2's, and :func:`merge_lines` for each file
    it left in conflict (listed when the same lines changed on both sides)."""
    index = repo.merge_commits(local, fetched)
    conflicts: list[str] = []
    if index.conflicts is not None:
        for ancestor, mine, other in list(index.conflicts):
            kept = mine or other
            assert kept is not None  # a conflict has at least one side
            rel = kept.path
            if mine is not None and other is not None:
                base = _data(repo, ancestor.id) if ancestor is not None else b""
                merged, conflicted = merge_lines(base, _data(repo, mine.id), _data(repo, other.id))
                kept = pygit2.IndexEntry(rel, repo.create_blob(merged), mine.mode)
                if conflicted:
                    conflicts.append(rel)
            del index.conflicts[rel]  # a file one side deleted and the other changed stays
            index.add(kept)
    return index.write_tree(repo), conflicts


def _data(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    blob = repo.get(oid)
    return blob.data if isinstance(blob, pygit2.Blob) else b""


def merge_lines(base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    """Three-way merge, line-wise: a region one side changed takes that side; lines both
    sides added at the same place are all kept (ours first, lines they share once: two
    machines' new entries at the end of MEMORY.md are no conflict); lines both changed
    differently keep both versions between conflict marks. ``(merged, conflicted)``."""
    old, mine, other = (data.splitlines(keepends=True) for data in (base, ours, theirs))
    in_mine, in_other = matched_lines(old, mine), matched_lines(old, other)
    merged: list[bytes] = []
    conflicted = False
    at_old = at_mine = at_other = 0
    for i in [*range(len(old)), len(old)]:
        if i < len(old) and (i not in in_mine or i not in in_other):
            continue
        to_mine = in_mine[i] if i < len(old) else len(mine)
        to_other = in_other[i] if i < len(old) else len(other)
        chunk, clash = _resolve(old[at_old:i], mine[at_mine:to_mine], other[at_other:to_other])
        merged += chunk
        conflicted = conflicted or clash
        if i < len(old):
            merged.append(old[i])
            at_old, at_mine, at_other = i + 1, to_mine + 1, to_other + 1
    return b"".join(merged), conflicted


def _resolve(old: list[bytes], mine: list[bytes], other: list[bytes]) -> tuple[list[bytes], bool]:
    """One region between lines both sides kept: its merged lines, and whether they clash."""
    if mine == other or other == old:
        return mine, False
    if mine == old:
        return other, False
    if not old:  # both added lines here: all of them, what they share once
        shared = 0
        while shared < min(len(mine), len(other)) and mine[shared] == other[shared]:
            shared += 1
        return _joined(mine, other[shared:]), False
    marks = [f"<<<<<<< {OURS_LABEL}\n".encode(), *_joined(mine, [b"=======\n"])]
    return [*marks, *_joined(other, [f">>>>>>> {THEIRS_LABEL}\n".encode()])], True


def _joined(first: list[bytes], second: list[bytes]) -> list[bytes]:
    """``first`` then ``second``, a line break between them when ``first`` ends without one."""
    if first and second and not first[-1].endswith(b"\n"):
        return [*first[:-1], first[-1] + b"\n", *second]
    return [*first, *second]


def _file_changes(
    repo: pygit2.Repository, before: pygit2.Tree, after: pygit2.Tree
) -> Iterator[tuple[str, bytes | None, bytes | None]]:
    """``(path, bytes before, bytes after)`` of each memory file the trees differ in."""
    for delta in before.diff_to_tree(after).deltas:
        for side in {delta.old_file.path, delta.new_file.path}:
            if not _is_memory_path(side):
                continue
            yield side, _blob(repo, before, side), _blob(repo, after, side)


def _blob(repo: pygit2.Repository, tree: pygit2.Tree, rel: str) -> bytes | None:
    try:
        entry = tree[rel]
    except KeyError:
        return None
    blob = repo.get(entry.id)
    if entry.filemode not in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE):
        return None
    return blob.data if isinstance(blob, pygit2.Blob) else None


def _is_memory_path(rel: str) -> bool:
    return rel == MEMORY_FILE or (rel.startswith(f"{MEMORY_DIR}/") and rel.endswith(".md"))


def _write(engine: MemoryEngine, rel: str, before: bytes | None, after: bytes | None) -> bool:
    """Make the file ``after`` (gone when None), through the store under its lock. A file
    edited here since ``before`` was committed is merged with ``after``, not overwritten.
    Whether it was written."""
    if after is None:
        path = engine.workspace.resolve_memory_path(rel)
        with lock_for(path):
            current = path.read_bytes() if path.is_file() else None
            if current is None or current != before:
                return False  # gone already, or changed here since: kept
            os.remove(path)
            if engine.store.on_written is not None:
                engine.store.on_written(rel)
        return True
    wrote = False

    def change(text: str) -> str:
        nonlocal wrote
        current = encode_exact(text)
        if current in (before or b"", after):
            target = after
        else:  # written here after the merge was computed: both kept
            target, _conflicted = merge_lines(before or b"", current, after)
        wrote = target != current
        return decode_exact(target)

    engine.store.edit_file(rel, change)
    return wrote


def _settle(
    engine: MemoryEngine,
    repo: pygit2.Repository,
    local: pygit2.Oid,
    fetched: pygit2.Oid,
    fast_forward: bool,
    writer: Attribution,
) -> None:
    """Make HEAD the pull: the remote's commit itself for a fast-forward whose files were
    written as they are there; else one ``sync`` commit with both parents (the commit the
    writes made, if nothing came between, becomes it)."""
    with engine.history._locked():
        head_id = repo.head.target
        head = repo.get(head_id)
        theirs = repo.get(fetched)
        assert isinstance(head, pygit2.Commit) and isinstance(theirs, pygit2.Commit)
        ours_only = head_id == local or (
            [str(p) for p in head.parent_ids] == [str(local)]
            and parse_trailers(head.message).get("source") == "sync"
        )
        if fast_forward and ours_only and head.tree_id == theirs.tree_id:
            repo.head.set_target(fetched)
            return
        if ours_only:
            parents, message = (
                [local, fetched],
                (head.message if head_id != local else writer.message([])),
            )
        else:
            parents, message = [head_id, fetched], writer.message([])
        signature = pygit2.Signature(AUTHOR_NAME, AUTHOR_EMAIL)
        merge = repo.create_commit(None, signature, signature, message, head.tree_id, parents)
        repo.head.set_target(merge)


def _marked_files(repo: pygit2.Repository, fetched: pygit2.Oid | None) -> list[str]:
    """The memory files that would be pushed holding conflict marks."""
    head = repo.head.peel(pygit2.Commit)
    if fetched is not None:
        base = repo.get(fetched)
        assert isinstance(base, pygit2.Commit)
        changed = [
            rel for rel, _before, after in _file_changes(repo, base.tree, head.tree) if after
        ]
    else:
        changed = _memory_paths(head.tree, "")
    return [
        rel for rel in dict.fromkeys(changed) if _MARKS.search(_blob(repo, head.tree, rel) or b"")
    ]


def _memory_paths(tree: pygit2.Tree, prefix: str) -> list[str]:
    """The memory files of ``tree`` (its paths below ``prefix``)."""
    found = []
    for entry in tree:
        rel = f"{prefix}{entry.name}"
        if isinstance(entry, pygit2.Tree):
            found += _memory_paths(entry, f"{rel}/")
        elif _is_memory_path(rel):
            found.append(rel)
    return found
