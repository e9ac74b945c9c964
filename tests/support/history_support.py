"""A workspace's git history written and read with the plain ``git`` command: commits at a
fixed local time (screenshots show the same time in every time zone), attributed with
memdeck's trailers, and the log read back as a reader of ``git log`` sees it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tui.engine.git_history import AUTHOR_EMAIL, AUTHOR_NAME, GITIGNORE
from tui.engine.history_records import Attribution

#: The time of the history's first commit in the test workspaces (local time, no offset).
FIRST_COMMIT_TIME = "2026-11-21T18:00:00"


def git(root: Path, *args: str, when: str | None = None) -> str:
    """Run ``git -C root args`` (no user or system config); its output."""
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": AUTHOR_NAME,
        "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME,
        "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    }
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def commit_memory(
    root: Path, attribution: Attribution | None = None, *, when: str = FIRST_COMMIT_TIME
) -> str:
    """Commit the workspace's Markdown as it is, as ``attribution`` (default: the first
    commit memdeck makes, "memory as it was"), at ``when``; the new commit's id. The first
    call makes the repository and memdeck's ``.gitignore``."""
    if not (root / ".git").exists():
        git(root, "-c", "init.defaultBranch=main", "init", "-q")
        (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    writer = attribution or Attribution("outside", summary="memory as it was")
    git(root, "add", "--all", "--", ".")
    git(root, "commit", "-q", "--allow-empty", "-m", writer.message([]), when=when)
    return git(root, "rev-parse", "HEAD").strip()


def log(root: Path, *paths: str) -> list[dict[str, str]]:
    """The history newest first, as plain git reads it: each commit's id, subject, and its
    ``Memdeck-*`` trailers (``source``, ``session``...)."""
    out = git(
        root,
        "log",
        "--format=%H%x1f%s%x1f%(trailers:only,unfold)%x1e",
        "--",
        *paths,
    )
    found: list[dict[str, str]] = []
    for record in out.split("\x1e"):
        if not record.strip():
            continue
        commit, subject, trailers = record.strip("\n").split("\x1f")
        entry = {"id": commit, "subject": subject}
        for line in trailers.splitlines():
            name, _, value = line.partition(":")
            if name.startswith("Memdeck-"):
                entry[name.removeprefix("Memdeck-").lower()] = value.strip()
        found.append(entry)
    return found
