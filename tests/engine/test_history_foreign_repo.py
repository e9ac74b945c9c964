"""Issue 34: an OpenClaw workspace is a git repository OpenClaw made (its docs say `git add .`).
memdeck does not commit into a repository it did not make unless told to, and when told to it
commits only the memory it wrote: what the user staged stays staged and out of its commits.
Real repositories, read back with the plain ``git`` command."""

from __future__ import annotations

from pathlib import Path

from support.git_log import commits, git
from support.openclaw_fixture import copy_openclaw_workspace

from tui.engine.engine import MemoryEngine
from tui.engine.git_history import OWN_REPOSITORY_KEY
from tui.engine.history_records import HistoryMode
from tui.engine.workspace import Workspace


def openclaw_repository(tmp_path: Path) -> Path:
    """The fixture as its owner keeps it: a git repository with everything committed."""
    root = copy_openclaw_workspace(tmp_path)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=Dana", "-c", "user.email=d@example.com", "commit", "-qm", "start")
    return root


def save(root: Path, text: str, history: HistoryMode = "auto") -> MemoryEngine:
    engine = MemoryEngine(Workspace.open(root), history=history)
    engine.sync()
    engine.save_entry(text, confidence="high", source="user")
    return engine


def test_history_is_off_in_a_repository_another_program_made(tmp_path: Path) -> None:
    root = openclaw_repository(tmp_path)
    head = git(root, "rev-parse", "HEAD")

    engine = save(root, "Dana's laptop is called ferrous")
    try:
        problem = engine.history.problem
        assert not engine.history.enabled
        assert problem is not None and "another program" in problem and 'mode = "on"' in problem
    finally:
        engine.close()

    assert git(root, "rev-parse", "HEAD") == head  # no commit of memdeck's in the owner's history
    assert [c.subject for c in commits(root)] == ["start"]
    assert git(root, "status", "--porcelain") == " M MEMORY.md\n"  # the save, for its owner
    assert "ferrous" in (root / "MEMORY.md").read_text()


def test_with_mode_on_a_commit_holds_only_the_memory_and_staged_work_stays_staged(
    tmp_path: Path,
) -> None:
    root = openclaw_repository(tmp_path)
    agents = (root / "AGENTS.md").read_bytes()
    (root / "AGENTS.md").write_bytes(agents + b"\n- Ask before deleting branches.\n")
    git(root, "add", "AGENTS.md")  # the user's own work in progress

    engine = save(root, "Dana's laptop is called ferrous", history="on")
    engine.close()

    newest = commits(root)[0]
    assert newest.files == ("MEMORY.md",)
    assert newest.trailers.get("Memdeck-Source")
    assert git(root, "diff", "--cached", "--name-only") == "AGENTS.md\n"  # still staged
    assert git(root, "status", "--porcelain") == "M  AGENTS.md\n"  # MEMORY.md clean
    assert "Ask before deleting" not in git(root, "show", "HEAD:AGENTS.md")
    assert "ferrous" in git(root, "show", "HEAD:MEMORY.md")


def test_a_repository_memdeck_made_is_its_own_even_without_the_mark(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- My dog is Max\n", encoding="utf-8")
    save(root, "Likes green tea").close()
    assert git(root, "config", OWN_REPOSITORY_KEY).strip() == "true"
    git(root, "config", "--unset", OWN_REPOSITORY_KEY)  # as a repository made before the mark

    engine = save(root, "Drinks oolong")
    engine.close()

    assert engine.history.problem is None
    assert commits(root)[0].trailers == {"Memdeck-Source": "cli"}
    assert "Drinks oolong" in git(root, "show", "HEAD:MEMORY.md")
    assert git(root, "config", OWN_REPOSITORY_KEY).strip() == "true"
