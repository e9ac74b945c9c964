"""The wheel is a real install: built, installed into a fresh venv, run from there (offline).

The wheel is built without build isolation (``setuptools>=68`` and ``wheel`` come with the
``test`` extra) and installed with ``--no-deps --no-index`` into a new venv that sees this
environment's site-packages through a ``.pth`` line, so nothing is downloaded. Skip with
``-m "not wheel"``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import tui

ROOT = Path(__file__).resolve().parents[2]
SOURCE_IGNORE = (".git", ".venv", ".ci", "build", "dist", "*.egg-info", "__pycache__", "tests")

pytestmark = [
    pytest.mark.wheel,
    pytest.mark.skipif(
        importlib.util.find_spec("wheel") is None or importlib.util.find_spec("setuptools") is None,
        reason="needs setuptools and wheel to build offline (pip install -e '.[test]')",
    ),
]

APP_START = """
import asyncio, json, sys
from pathlib import Path

import tui
from tui.app.app import MemdeckApp
from tui.app.themes import bundled_themes_dir
from tui.chat.chat import ChatEngine
from tui.chat.config import load_config

root = Path(sys.argv[1])
config_file = root.parent / "config.toml"
config = load_config(config_file, env={}, overrides={})
app = MemdeckApp(
    config=config,
    open_engine=lambda: ChatEngine.open(config, workspace=root, create=False),
    config_file=config_file,
    load_model=False,
    watch=False,
)


async def main() -> None:
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(400):
            if app.ready:
                break
            await pilot.pause(0.05)
        for _ in range(5):  # let the panels finish mounting before the app shuts down
            await pilot.pause(0.1)
        print(json.dumps({
            "tui": tui.__file__,
            "themes_dir": str(bundled_themes_dir()),
            "theme": app.theme,
            "ready": app.ready,
            "warnings": app.startup_warnings,
        }))


asyncio.run(main())
"""


def _clean_env(home: Path) -> dict[str, str]:
    """No PYTHONPATH (the checkout must not leak in), no user config or data dirs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME") and not k.startswith(("MEMDECK_", "OPENAI_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 60) -> str:
    done = subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_installs_and_runs_without_the_checkout(tmp_path: Path) -> None:
    env = _clean_env(tmp_path / "home")
    dist = tmp_path / "dist"
    # Build from a copy of the sources: a stale build/ folder in the checkout would otherwise
    # put files in the wheel that a fresh clone does not ship.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SOURCE_IGNORE))
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(dist), str(source)],
        env,
        cwd=tmp_path,
        timeout=120,
    )
    (wheel,) = dist.glob("memdeck-*.whl")
    assert wheel.name.startswith(f"memdeck-{tui.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    for theme in (ROOT / "themes").glob("*.toml"):
        assert f"tui/themes/{theme.name}" in names
    assert "tui/engine/models/all-MiniLM-L6-v2/tokenizer.json" in names
    assert "tui/app/screens/main_screen.tcss" in names
    assert not any(name.startswith(("tests/", "themes/")) for name in names)

    # A fresh venv that borrows this environment's packages (the dependencies) via a .pth
    # line: its own site-packages comes first, so `tui` is the installed wheel, not the
    # editable checkout (a .pth line adds a path without running that path's .pth files).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, cwd=tmp_path)
    python = venv / "bin" / "python"
    venv_site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            env,
            cwd=tmp_path,
        ).strip()
    )
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    (venv_site / "_memdeck_test_deps.pth").write_text(
        "\n".join(sorted(p for p in ours if Path(p).is_dir())) + "\n", encoding="utf-8"
    )
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        + ["--no-deps", "--no-index", str(wheel)],
        env,
        cwd=tmp_path,
    )
    memdeck = venv / "bin" / "memdeck"
    assert _run([str(memdeck), "--version"], env, cwd=tmp_path).strip() == (
        f"memdeck {tui.__version__}"
    )

    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(
        "# Long-term Memory\n\n## Pets\n- Has a dog called Luna\n", encoding="utf-8"
    )
    (workspace / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n\n- Booked the train to Lisbon\n", encoding="utf-8"
    )
    stats = json.loads(
        _run([str(memdeck), "--workspace", str(workspace), "stats", "--json"], env, cwd=tmp_path)
    )
    assert stats["files"] == 2 and stats["chunks"] >= 2

    started = json.loads(
        _run([str(python), "-c", APP_START, str(workspace)], env, cwd=tmp_path).splitlines()[-1]
    )
    assert Path(started["tui"]).is_relative_to(venv), started
    assert Path(started["themes_dir"]) == venv_site / "tui" / "themes"
    assert started["theme"] == "memdeck-dark" and not started["warnings"], started
    assert started["ready"], started
