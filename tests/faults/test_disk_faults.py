"""Issue 16 B.7 and C.8: the files memdeck writes are private, and a full disk never leaves a
truncated flush behind.

Real ``memdeck`` processes against the loopback fake server, real files and SQLite.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import pytest
from support.chat_support import SummaryResponder, memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI

from tui.cli import disk_is_full
from tui.engine.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    """Mode of everything under ``root`` (locks excluded: they hold nothing)."""
    found = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if "/locks" in f"/{rel}" or path.name.endswith(".lock"):
            continue
        found[rel] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_memory_and_conversations_are_private_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    root = tmp_path / "ws"
    with (
        umask(mask),
        FakeOpenAI(
            FakeOpenAI.tool_call("save_memory", {"content": "Keeps bees on the allotment"}),
            FakeOpenAI.text("Noted."),
            responder=SummaryResponder(),
        ) as server,
    ):
        env = memdeck_env(server, tmp_path)
        result = run_memdeck(
            ["--workspace", str(root), "ask", "--bm25", "--flush", "I keep bees, remember it"],
            env,
        )
    assert result.returncode == 0, result.stderr
    found = modes(root)
    files = {rel: mode for rel, mode in found.items() if (root / rel).is_file()}
    folders = {rel: mode for rel, mode in found.items() if (root / rel).is_dir()}
    # What the run wrote: MEMORY.md, a daily log, the transcript, the index, the audit trail.
    assert "MEMORY.md" in files and any(rel.startswith("memory/") for rel in files)
    assert any(rel.startswith("sessions/") for rel in files)
    assert ".memdeck/index.db" in files
    # git's own files are private too: libgit2 makes its objects read-only (0400).
    history = {rel: mode for rel, mode in files.items() if rel.startswith(".git/")}
    assert history and {rel: mode for rel, mode in history.items() if mode & 0o077} == {}
    own = {rel: mode for rel, mode in files.items() if rel not in history}
    assert {rel: mode for rel, mode in own.items() if mode != 0o600} == {}
    assert {rel: mode for rel, mode in folders.items() if mode != 0o700} == {}
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_a_rewrite_keeps_the_mode_the_user_gave_a_file(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    memory = root / "MEMORY.md"
    memory.write_text("# Long-term Memory\n\n- Likes tea\n", encoding="utf-8")
    memory.chmod(0o640)
    with FakeOpenAI(
        FakeOpenAI.tool_call("save_memory", {"content": "Keeps bees"}), FakeOpenAI.text("Ok.")
    ) as server:
        result = run_memdeck(
            ["--workspace", str(root), "ask", "--bm25", "remember the bees"],
            memdeck_env(server, tmp_path),
        )
    assert result.returncode == 0, result.stderr
    assert "Keeps bees" in memory.read_text(encoding="utf-8")
    assert stat.S_IMODE(memory.stat().st_mode) == 0o640


# -- 8. a write cut short by a full disk ----------------------------------------------------

#: Largest file the flush run below may write (RLIMIT_FSIZE): the daily log is filled to just
#: under it, so the flush's block is cut after a few bytes, as on a full disk.
SIZE_LIMIT = 65_536


def limited(size: int) -> None:
    """In the child: files may not grow past ``size`` bytes; a write past it is cut short and
    fails (EFBIG) instead of killing the process."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_flush_cut_short_by_the_disk_is_completed_not_truncated(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    responder = SummaryResponder()
    with FakeOpenAI(FakeOpenAI.text("Sure."), responder=responder) as server:
        env = memdeck_env(server, tmp_path)
        asked = run_memdeck(["--workspace", str(root), "ask", "--bm25", "plan the trip"], env)
        assert asked.returncode == 0, asked.stderr
        log = next(iter((root / "memory").glob("*.md")), None) or root / "memory" / (
            date.today().isoformat() + ".md"
        )
        log.parent.mkdir(exist_ok=True, mode=0o700)
        filler = "".join(f"- earlier note {i:04d} about the garden\n" for i in range(2000))
        before = f"# {log.stem}\n\n{filler}"[: SIZE_LIMIT - 40]
        before = before[: before.rfind("\n") + 1]
        log.write_text(before, encoding="utf-8")
        synced = run_memdeck(["--workspace", str(root), "stats"], env)
        assert synced.returncode == 0, synced.stderr
        transcript = max((root / "sessions").glob("*.jsonl"), key=lambda p: p.stat().st_size)
        assert transcript.stat().st_size < SIZE_LIMIT - 2000  # only the log hits the limit

        cut = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tui.cli import main; sys.exit(main())",
                "--workspace",
                str(root),
                "flush",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: limited(SIZE_LIMIT),
        )
        assert "Traceback" not in cut.stderr, cut.stderr
        assert "File too large" in cut.stderr or "flush" in cut.stderr, cut.stderr
        # All or nothing: the cut-short block was taken back off.
        assert log.read_text(encoding="utf-8") == before

        again = run_memdeck(["--workspace", str(root), "flush"], env)
        assert again.returncode == 0, again.stderr
    text = log.read_text(encoding="utf-8")
    assert text.startswith(before)
    added = text[len(before) :]
    assert added.count("flush=") == 1
    summary = "Summary 1" if "Summary 1" in added else "summary"
    assert summary.lower() in added.lower()
    assert added.rstrip().endswith(added.rstrip().splitlines()[-1])
    assert len(added.strip().splitlines()) >= 3  # heading, blank, the summary itself


def test_a_cut_short_block_left_by_an_older_version_is_completed(tmp_path: Path) -> None:
    """The log holds the tagged heading of a flush and 45 bytes of it (what an append cut by a
    full disk left before appends were all-or-nothing): the recovery completes the block."""
    root = tmp_path / "ws"
    with FakeOpenAI(FakeOpenAI.text("Sure."), responder=SummaryResponder()) as server:
        env = memdeck_env(server, tmp_path)
        asked = run_memdeck(["--workspace", str(root), "ask", "--bm25", "plan the trip"], env)
        assert asked.returncode == 0, asked.stderr
        crashed = run_memdeck(
            ["--workspace", str(root), "flush"], {**env, "MEMDECK_CRASH_AT": "after_daily_append"}
        )
        assert crashed.returncode != 0
        log = next((root / "memory").glob("*.md"))
        whole = log.read_text(encoding="utf-8")
        heading_at = whole.index("## ")
        cut = whole[: whole.index("\n", heading_at) + 1 + 12]
        assert len(cut) < len(whole)
        log.write_text(cut, encoding="utf-8")
        recovered = run_memdeck(["--workspace", str(root), "flush"], env)
        assert recovered.returncode == 0, recovered.stderr
    assert log.read_text(encoding="utf-8") == whole


def test_a_full_disk_is_named_and_no_reindex_is_advised(tmp_path: Path) -> None:
    full = sqlite3.OperationalError("database or disk is full")
    assert disk_is_full(full, tmp_path)
    # "disk I/O error" is a full disk only when the workspace's file system has no room left.
    io_error = sqlite3.OperationalError("disk I/O error")
    assert not disk_is_full(io_error, tmp_path)
    assert not disk_is_full(sqlite3.DatabaseError("file is not a database"), tmp_path)
