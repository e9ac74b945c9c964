"""``memdeck sync``: pull and push the memory's history to the configured remote."""

from __future__ import annotations

import argparse
import sys

from .memory import open_engine
from .registry import CliError, Command

NO_REMOTE = (
    'no remote to sync with: set [history] remote = "<git URL or folder>" in config.toml, '
    "or give --remote URL"
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remote",
        metavar="URL",
        default=None,
        help="git URL or folder to sync with (default: [history] remote in config.toml)",
    )


def _run(args: argparse.Namespace) -> int:
    from ..chat.config import ConfigError, load_config
    from ..engine.git_sync import sync
    from ..engine.history_records import HistoryError

    try:
        remote = args.remote or load_config().history.remote
    except ConfigError as exc:
        raise CliError(str(exc)) from exc
    if not remote.strip():
        raise CliError(NO_REMOTE)
    engine = open_engine(args)
    try:
        outcome = sync(engine, remote)
    except HistoryError as exc:
        print(f"memdeck: error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    print(outcome.describe())
    advice = outcome.advice()
    if advice is not None:
        print(f"memdeck: {advice}", file=sys.stderr)
        return 1
    return 0


COMMANDS = {
    "sync": Command(
        "pull and push the memory's history to the [history] remote (a git URL or folder)",
        _configure,
        _run,
    ),
}
