"""The ``memdeck`` entry point: settle the process first, then load and run the command line."""

from __future__ import annotations

from collections.abc import Sequence

from .engine.heap import tune_process


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``memdeck`` (the app with no subcommand) with the process tuned before numpy loads."""
    tune_process()
    from .cli import main as run_cli

    return run_cli(argv)
