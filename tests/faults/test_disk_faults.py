"""Issue 16 B.7 and C.8: the files memdeck writes are private, and a full disk never leaves a
truncated flush behind.

Real ``memdeck`` processes against the loopback fake server, real files and SQLite.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.chat_support import SummaryResponder, memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI

from tui.engine.workspace import Workspace


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
def test_memory_and_conversations_are_private_whatever_the_umask(
    tmp_path: Path, mask: int
) -> None:
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
    assert {rel: mode for rel, mode in files.items() if mode != 0o600} == {}
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
