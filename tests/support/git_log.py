"""A workspace's history read back with the plain ``git`` command (never through memdeck)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Commit:
    """One commit as ``git log`` shows it: id, subject, ``Memdeck-*`` trailers, files."""

    id: str
    subject: str
    trailers: dict[str, str]
    files: tuple[str, ...]


def git(root: Path, *args: str) -> str:
    """``git -C root ARGS``'s stdout; a failure raises with git's stderr."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def commits(root: Path) -> list[Commit]:
    """The history of the repository at ``root``, newest first (empty: no commit yet)."""
    if not (root / ".git").exists():
        return []
    out = git(root, "log", "--format=%H%x1f%s%x1f%(trailers:only,unfold)%x1e")
    found = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        commit_id, subject, trailer_text = record.split("\x1f")
        trailers = dict(
            line.split(": ", 1) for line in trailer_text.splitlines() if ": " in line
        )
        names = git(root, "show", "--name-only", "--format=", commit_id).split()
        found.append(Commit(commit_id, subject, trailers, tuple(names)))
    return found


def new_commits(root: Path, before: list[Commit]) -> list[Commit]:
    """The commits made since ``before`` was read (newest first)."""
    now = commits(root)
    assert now[len(now) - len(before) :] == before, "the history was rewritten"
    return now[: len(now) - len(before)]
