"""Test workspaces: Markdown files written under a root, for any layer's tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_workspace(root: Path, memory: str, daily: Mapping[str, str] = {}) -> Path:
    """``root`` with ``memory`` as MEMORY.md and ``daily`` (relative path → text) as its logs."""
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text(memory, encoding="utf-8")
    for rel, text in daily.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root
