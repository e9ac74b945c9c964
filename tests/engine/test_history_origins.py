"""Every memory's origin: the commit that last wrote its lines, the same whether it comes from
a fresh blame or from the line origins memdeck keeps up to date as it commits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.git_log import git

from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.git_origins import ORIGINS_FILE
from tui.engine.history_records import Attribution
from tui.engine.workspace import STATE_DIR, Workspace


def blame(root: Path, rel: str) -> list[str]:
    """Each line's commit as the plain ``git blame`` says it."""
    out = git(root, "blame", "--porcelain", rel)
    found = []
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts) >= 3 and len(parts[0]) == 40 and parts[2].isdigit():
            found.append(parts[0])
    return found


def test_kept_origins_match_git_blame_after_saves_forgets_and_a_flush(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- Likes tea\n", encoding="utf-8")
    engine = MemoryEngine(workspace, embedder=embedder)
    engine.sync(embed=False)
    assert engine.history.origin("MEMORY.md", 3) is not None  # the first one blames
    with engine.attributed(Attribution("mcp", client="agent 1", summary="save_memory: bees")):
        engine.save_entry("Keeps bees", confidence="high", source="user")
    with engine.attributed(Attribution("chat", session="s1", summary="save_memory: oslo")):
        engine.save_entry("Flies to Oslo", confidence="high", source="user")
    with (
        engine.attributed(Attribution("flush", session="s1", trigger="idle")),
        engine.one_change("flush"),
    ):
        engine.append_daily("## 10:00 trip\n\nPlanned the trip.\n")
        engine.save_entry("Trip in May", confidence="medium", source="auto")
    bees = next(e for e in engine.store.entries() if "Keeps bees" in e.text)
    engine.forget([bees], reason="no longer")
    # Kept up to date by the commits themselves (no blame since the first): the kept
    # version is the committed one, and each line's commit is git blame's.
    kept = json.loads((root / STATE_DIR / ORIGINS_FILE).read_text(encoding="utf-8"))
    assert set(kept) == {"MEMORY.md", "memory/" + next((root / "memory").iterdir()).name}
    assert kept["MEMORY.md"]["blob"] == git(root, "rev-parse", "HEAD:MEMORY.md").strip()
    lines = (root / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    truth = blame(root, "MEMORY.md")
    assert len(truth) == len(lines)
    assert [c for count, c in kept["MEMORY.md"]["runs"] for _ in range(count)] == truth
    for number in range(1, len(lines) + 1):
        origin = engine.history.origin("MEMORY.md", number)
        assert origin is not None and origin.commit == truth[number - 1], lines[number - 1]
    oslo = next(n for n, line in enumerate(lines, 1) if "Flies to Oslo" in line)
    trip = next(n for n, line in enumerate(lines, 1) if "Trip in May" in line)
    assert engine.history.origin("MEMORY.md", oslo).session == "s1"  # type: ignore[union-attr]
    flush = engine.history.origin("MEMORY.md", trip)
    assert flush is not None and (flush.source, flush.trigger) == ("flush", "idle")


def test_a_file_changed_by_a_hand_run_git_commit_is_blamed_again(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- Likes tea\n", encoding="utf-8")
    engine = MemoryEngine(workspace, embedder=embedder)
    engine.sync(embed=False)
    with engine.attributed(Attribution("mcp", client="agent 1")):
        engine.save_entry("Keeps bees", confidence="high", source="user")
    assert engine.history.origin("MEMORY.md", 4) is not None
    with (root / "MEMORY.md").open("a", encoding="utf-8") as memory:
        memory.write("- Added by hand\n")
    subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "-c",
            "user.name=me",
            "-c",
            "user.email=me@x",
            "commit",
            "-qam",
            "by hand",
        ],
        check=True,
    )
    origin = engine.history.origin("MEMORY.md", 5)
    assert origin is not None and origin.commit == blame(root, "MEMORY.md")[4]
    assert origin.source == "outside"  # a commit without memdeck's trailers
