"""A start finds the outside edits made while memdeck was closed without ``git status`` when
there are none (each memory file's stamp is kept as last committed), and still commits every
one there is: a file changed (even keeping its size and mtime, as ``touch -d`` leaves it),
added or removed, or a HEAD moved by hand. Read back with plain ``git``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support.chat_support import ROOT
from support.git_log import commits, git, new_commits

from tui.engine.engine import MemoryEngine
from tui.engine.git_discovery import head_id
from tui.engine.history_stamps import RACY_NS, FileStamps
from tui.engine.workspace import Workspace

#: A start in a process of its own: whether it loaded pygit2 (asked git anything).
START = """
import sys
from tui.engine.engine import MemoryEngine
engine = MemoryEngine(sys.argv[1])
engine.sync(embed=False)
engine.close()
print("pygit2" in sys.modules)
"""


def started(tmp_path: Path) -> Path:
    """A workspace written a day ago, opened once (its history started)."""
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- My dog is Max\n", encoding="utf-8")
    (root / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Went to Lyon\n")
    (root / "memory" / "2026-11-21.md").write_text("# 2026-11-21\n\n- Back home\n")
    yesterday = time.time() - 86_400
    for path in (root / "MEMORY.md", *(root / "memory").glob("*.md")):
        os.utime(path, (yesterday, yesterday))
    sync(root)
    return root


def sync(root: Path) -> None:
    engine = MemoryEngine(Workspace.open(root))
    try:
        engine.sync(embed=False)
    finally:
        engine.close()


def start_loads_pygit2(root: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", START, str(root)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip() == "True"


def test_a_start_asks_git_only_when_a_file_changed_even_keeping_size_and_mtime(
    tmp_path: Path,
) -> None:
    root = started(tmp_path)
    before = commits(root)
    assert not start_loads_pygit2(root)  # nothing changed: no git status
    assert commits(root) == before

    log = root / "memory" / "2026-11-20.md"
    old = log.stat()
    log.write_text(log.read_text().replace("Lyon", "Caen"))  # same size
    os.utime(log, ns=(old.st_atime_ns, old.st_mtime_ns))  # and the same mtime: touch -d
    assert log.stat().st_size == old.st_size and log.stat().st_mtime_ns == old.st_mtime_ns

    assert start_loads_pygit2(root)
    [made] = new_commits(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"} and made.files == (
        "memory/2026-11-20.md",
    )
    assert "Caen" in git(root, "show", "HEAD:memory/2026-11-20.md")


def test_files_added_or_removed_while_closed_are_committed_at_start(tmp_path: Path) -> None:
    root = started(tmp_path)
    before = commits(root)
    (root / "memory" / "2026-11-21.md").unlink()
    (root / "memory" / "notes").mkdir()
    (root / "memory" / "notes" / "trip.md").write_text("- Train at 9\n")

    sync(root)

    [made] = new_commits(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"}
    assert made.files == ("memory/2026-11-21.md", "memory/notes/trip.md")
    assert "memory/2026-11-21.md" not in git(root, "ls-files")


def test_a_head_moved_by_hand_is_checked_with_git(tmp_path: Path) -> None:
    root = started(tmp_path)
    git(root, "rm", "-q", "--cached", "MEMORY.md")  # the file stays as it was on disk
    git(root, "-c", "user.name=Dana", "-c", "user.email=d@example.com", "commit", "-qm", "drop")
    before = commits(root)

    sync(root)

    [made] = new_commits(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"} and made.files == ("MEMORY.md",)


def test_a_stamp_taken_in_the_same_tick_as_a_change_is_not_trusted(tmp_path: Path) -> None:
    root = started(tmp_path)
    stamps = FileStamps(root, ())
    now = stamps.on_disk()
    assert stamps.unchanged(now)  # as recorded by the first start

    def recorded_after(seconds: float) -> bool:
        """Whether the files would be trusted had they been stamped ``seconds`` after their mtime."""
        taken = {rel: (*stamp[:4], stamp[1] + int(seconds * 1e9)) for rel, stamp in now.items()}
        stamps.checked(head_id(root), taken, [])
        return stamps.unchanged(now)

    assert recorded_after(RACY_NS / 1e9 + 1)
    assert not recorded_after(RACY_NS / 1e9 - 1)  # it may have changed again unseen
    assert oct((root / ".memdeck" / "history-files.json").stat().st_mode & 0o777) == "0o600"
