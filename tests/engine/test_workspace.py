"""The workspace: dated paths and the path guard."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from tui.engine.workspace import PathRefusedError, Workspace, date_for_path


def test_dated_paths() -> None:
    assert date_for_path("memory/2026-11-03.md") == date(2026, 11, 3)
    assert date_for_path("memory/2026/2026-11-03-trip.md") == date(2026, 11, 3)
    assert date_for_path("memory/notes.md") is None
    assert date_for_path("MEMORY.md") is None
    assert date_for_path("memory/2026-13-40.md") is None


def test_path_guard(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    (ws.memory_dir / "sub").mkdir(parents=True)
    (ws.memory_dir / "sub" / "2026-11-01.md").write_text("- x\n")
    assert ws.resolve_memory_path("memory/sub/2026-11-01.md").is_file()
    assert ws.resolve_memory_path("./MEMORY.md") == ws.root / "MEMORY.md"
    outside = tmp_path / "secret.md"
    outside.write_text("secret")
    os.symlink(outside, ws.memory_dir / "link.md")
    for bad in [
        "../secret.md",
        "memory/../../secret.md",
        "/etc/passwd",
        str(outside),
        "~/x.md",
        "sessions/a.jsonl",
        ".memdeck/index.db",
        "memory/link.md",
        "C:/x.md",
        "",
    ]:
        with pytest.raises(PathRefusedError):
            ws.resolve_memory_path(bad)
