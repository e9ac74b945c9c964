"""Importing memdeck changes nothing in the process; the entry point tunes it (issue #17 item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tui.engine.heap import BLAS_THREAD_VARIABLES

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    env = {k: v for k, v in env.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return done.stdout.strip()


def test_importing_the_packages_sets_no_thread_variables() -> None:
    code = (
        "import os, tui, tui.engine.engine, tui.engine.search, tui.chat.chat, tui.cli\n"
        f"print([os.environ.get(n) for n in {BLAS_THREAD_VARIABLES!r}])"
    )
    assert _run(code) == "[None, None, None]"


def test_the_entry_point_pins_blas_before_numpy_loads() -> None:
    code = (
        "import os, sys\n"
        "from tui.main import main\n"
        "assert 'numpy' not in sys.modules\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        f"print([os.environ.get(n) for n in {BLAS_THREAD_VARIABLES!r}])"
    )
    assert _run(code).splitlines()[-1] == "['1', '1', '1']"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["memdeck"] == "tui.main:main"


def test_a_users_own_thread_setting_wins() -> None:
    code = (
        "import os\nos.environ['OMP_NUM_THREADS'] = '4'\n"
        "from tui.engine.heap import tune_process\ntune_process()\n"
        "print(os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'])"
    )
    assert _run(code) == "4 1"
