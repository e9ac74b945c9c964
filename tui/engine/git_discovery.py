"""Which git repository a workspace is in, and whose it is, read from the files where that is
sure: a workspace with a repository of memdeck's own is told without loading pygit2 (~11 MB);
anything else (an enclosing repository, one without memdeck's mark) is asked of libgit2."""

from __future__ import annotations

import contextlib
from pathlib import Path

AUTHOR_NAME = "memdeck"
AUTHOR_EMAIL = "memdeck@localhost"

#: Set in the config of a repository memdeck made (``git config memdeck.history``).
OWN_REPOSITORY_KEY = "memdeck.history"


def why_not_kept(root: Path) -> str | None:
    """Why the history of the workspace at ``root`` is not kept unless asked (``[history] mode
    = "auto"``): it is inside another repository, or its own was made by another program."""
    outer = enclosing_repository(root)
    if outer is not None:
        return (
            f"history is off: this workspace is inside the git repository {outer}; "
            'set [history] mode = "on" in config.toml to keep it there'
        )
    if foreign_repository(root):
        return (
            "history is off: this workspace's git repository was made by another "
            'program; set [history] mode = "on" in config.toml to commit memory '
            "changes into it"
        )
    return None


def foreign_repository(root: Path) -> bool:
    """Whether ``root/.git`` is a repository another program made (OpenClaw makes its agent
    workspace one): neither marked as memdeck's nor started by a memdeck commit."""
    if not (root / ".git").exists():
        return False
    if _marked_own(root / ".git"):
        return False
    import pygit2

    try:
        repo = pygit2.Repository(str(root))
        if OWN_REPOSITORY_KEY in repo.config:
            return False
        if repo.head_is_unborn:
            return True
        order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
        first = next(iter(repo.walk(repo.head.target, order)))
    except (pygit2.GitError, KeyError, ValueError):
        return False  # unreadable: :meth:`GitHistory.repository` moves it aside and says so
    if first.author.name == AUTHOR_NAME and "Memdeck-Source:" in first.message:
        repo.config[OWN_REPOSITORY_KEY] = "true"  # made before the mark existed
        return False
    return True


def enclosing_repository(root: Path) -> Path | None:
    """The git repository ``root`` is inside of, other than its own ``root/.git``."""
    if _looks_like_git_dir(root / ".git") or not _any_repository_above(root):
        return None  # libgit2 would find ``root/.git`` first, or nothing at all
    import pygit2

    found = pygit2.discover_repository(str(root))
    if not found:
        return None
    git_dir = Path(found).resolve()
    if git_dir == (root / ".git").resolve():
        return None
    return git_dir.parent if git_dir.name == ".git" else git_dir


def head_id(root: Path) -> str | None:
    """The commit ``root/.git``'s HEAD names, read from its files (a loose or packed ref, or
    a detached id); None when it is not plainly there (no commit yet, another layout)."""
    git_dir = root / ".git"
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head if _is_commit_id(head) else None
        ref = head[len("ref: ") :]
        if ".." in ref or not ref.startswith("refs/"):
            return None
        with contextlib.suppress(FileNotFoundError):
            loose = (git_dir / ref).read_text(encoding="utf-8").strip()
            return loose if _is_commit_id(loose) else None
        packed = (git_dir / "packed-refs").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        commit, _, name = line.partition(" ")
        if name == ref and _is_commit_id(commit):
            return commit
    return None


def _is_commit_id(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _looks_like_git_dir(path: Path) -> bool:
    """What libgit2 takes for a repository folder: a HEAD file, objects/ and refs/."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _any_repository_above(root: Path) -> bool:
    """Whether a folder from ``root`` up holds anything libgit2's discovery might take for a
    repository (a ``.git`` of any kind, or a bare repository's HEAD and objects)."""
    start = root.resolve()
    return any(
        _present(folder / ".git") or (_present(folder / "HEAD") and _present(folder / "objects"))
        for folder in (start, *start.parents)
    )


def _present(path: Path) -> bool:
    """Whether anything is at ``path`` (a dangling link counts)."""
    return path.is_symlink() or path.exists()


def _marked_own(git_dir: Path) -> bool:
    """Whether the repository's own config (``git_dir/config``) sets ``memdeck.history``:
    read as git reads it (section and key names in any case, ``;``/``#`` comments)."""
    try:
        text = (git_dir / "config").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    section = ""
    wanted_section, _, wanted_key = OWN_REPOSITORY_KEY.partition(".")
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            header = line[1 : line.find("]")] if "]" in line else ""
            section = header.strip().lower()  # a subsection ("x" "y") never matches
            line = line[line.find("]") + 1 :].strip() if "]" in line else ""
        if not line or line[0] in "#;":
            continue
        key = line.split("=", 1)[0].strip().lower()
        if section == wanted_section and key == wanted_key:
            return True
    return False
