"""The OpenClaw fixture workspace (tests/fixtures/openclaw_workspace), copied for a test."""

from __future__ import annotations

import shutil
from pathlib import Path

OPENCLAW_WORKSPACE = Path(__file__).resolve().parent.parent / "fixtures" / "openclaw_workspace"


def copy_openclaw_workspace(tmp_path: Path) -> Path:
    """A byte-exact copy of the fixture under ``tmp_path`` (the original is never written)."""
    root = tmp_path / "openclaw_workspace"
    shutil.copytree(OPENCLAW_WORKSPACE, root)
    return root
