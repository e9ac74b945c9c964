"""History never blocks or loses a memory write: a lock held by a git command, a broken
repository, a workspace inside someone else's repository. Read back with plain ``git``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.git_log import commits, git, new_commits

from tui.engine.engine import MemoryEngine
from tui.engine.history_records import HistoryMode
from tui.engine.workspace import Workspace

MEMORY = "# Long-term Memory\n\n- My dog is Max\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    return ws


def open_engine(root: Path, history: HistoryMode = "auto") -> MemoryEngine:
    return MemoryEngine(Workspace.open(root), history=history)


def test_a_held_index_lock_does_not_block_a_save_and_nothing_is_lost(root: Path) -> None:
    engine = open_engine(root)
    try:
        engine.sync()
        before = commits(root)
        lock = root / ".git" / "index.lock"
        lock.write_text("")  # a git command running (or one that crashed)

        meta, _change = engine.save_entry("Likes green tea", confidence="high", source="user")

        assert meta.id and "Likes green tea" in (root / "MEMORY.md").read_text()
        problem = engine.history.problem
        assert problem is not None and "\n" not in problem
        assert "could not be committed" in problem and "locked" in problem
        assert commits(root) == before

        lock.unlink()
        engine.save_entry("Drinks oolong", confidence="high", source="user")

        [made] = new_commits(root, before)
        committed = git(root, "show", "HEAD:MEMORY.md")
        assert "Likes green tea" in committed and "Drinks oolong" in committed
        assert committed == (root / "MEMORY.md").read_text()
        assert engine.history.problem is None
    finally:
        engine.close()


def test_a_broken_repository_is_moved_aside_and_history_starts_again(
    root: Path, tmp_path: Path
) -> None:
    engine = open_engine(root)
    try:
        engine.save_entry("Likes green tea", confidence="high", source="user")
    finally:
        engine.close()
    (root / ".git" / "HEAD").write_text("garbage\n")

    engine = open_engine(root)
    try:
        engine.save_entry("Drinks oolong", confidence="high", source="user")
        problem = engine.history.problem
    finally:
        engine.close()

    [aside] = list(root.glob(".git.broken-*"))
    assert (aside / "objects").is_dir()  # the old history is kept, not deleted
    assert problem is not None and "\n" not in problem
    assert aside.name in problem and "history starts again" in problem
    saved, first = commits(root)
    assert first.subject == "memory as it was"
    assert saved.trailers == {"Memdeck-Source": "cli"}
    text = (root / "MEMORY.md").read_text()
    assert "Likes green tea" in text and "Drinks oolong" in text
    assert git(root, "show", "HEAD:MEMORY.md") == text

    listed = run_memdeck(["--workspace", str(root), "history"], memdeck_env(None, tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("\n    ") == 2  # two changes


@pytest.fixture
def outer(tmp_path: Path) -> Path:
    """A git repository of the user's, with one commit; the workspace is a folder in it."""
    repo = tmp_path / "project"
    (repo / "ws").mkdir(parents=True)
    (repo / "README").write_text("a project\n")
    git(repo, "init", "-q")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "mine")
    (repo / "ws" / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    return repo


def test_inside_another_repository_history_is_off_with_a_notice(
    outer: Path, tmp_path: Path
) -> None:
    root = outer / "ws"
    before = commits(outer)
    engine = open_engine(root)
    try:
        engine.sync()
        engine.save_entry("Likes green tea", confidence="high", source="user")
        assert not engine.history.enabled
        problem = engine.history.problem
        assert problem is not None and "\n" not in problem
        assert str(outer) in problem and '[history] mode = "on"' in problem
    finally:
        engine.close()
    assert "Likes green tea" in (root / "MEMORY.md").read_text()
    assert commits(outer) == before and git(outer, "diff", "--cached") == ""
    assert not (root / ".git").exists()

    env = memdeck_env(None, tmp_path)
    listed = run_memdeck(["--workspace", str(root), "history"], env)
    assert listed.returncode != 0 and listed.stdout == ""
    assert listed.stderr.count("\n") == 1 and '[history] mode = "on"' in listed.stderr
    reverted = run_memdeck(["--workspace", str(root), "revert", before[0].id], env)
    assert reverted.returncode != 0 and '[history] mode = "on"' in reverted.stderr
    found = run_memdeck(["--workspace", str(root), "search", "--bm25", "--json", "tea"], env)
    assert [r["origin"] for r in json.loads(found.stdout)["results"]] == [None]
    assert commits(outer) == before


def test_with_mode_on_inside_another_repository_the_workspace_gets_its_own(
    outer: Path,
) -> None:
    root = outer / "ws"
    before = commits(outer)
    engine = open_engine(root, history="on")
    try:
        engine.save_entry("Likes green tea", confidence="high", source="user")
        assert engine.history.enabled and engine.history.problem is None
    finally:
        engine.close()
    assert (root / ".git").is_dir()
    assert Path(git(root, "rev-parse", "--show-toplevel").strip()) == root.resolve()
    saved, first = commits(root)
    assert saved.trailers == {"Memdeck-Source": "cli"} and first.subject == "memory as it was"
    assert commits(outer) == before  # the user's repository is untouched


def test_mode_off_keeps_no_history(root: Path, tmp_path: Path) -> None:
    engine = open_engine(root, history="off")
    try:
        engine.sync()
        engine.save_entry("Likes green tea", confidence="high", source="user")
        assert not engine.history.enabled
    finally:
        engine.close()
    assert not (root / ".git").exists()
    off = tmp_path / "off.toml"
    off.write_text('[history]\nmode = "off"\n')
    listed = run_memdeck(
        ["--workspace", str(root), "history"], memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(off))
    )
    assert listed.returncode != 0 and listed.stderr.count("\n") == 1
    assert '[history] mode = "off"' in listed.stderr
