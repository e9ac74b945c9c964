"""The ``memdeck`` command: the TUI with no subcommand, scriptable commands otherwise.

- :mod:`.registry`: :class:`Command` and :class:`CliError` (imports no command);
- :mod:`.memory`: ``search``, ``inject``, ``reindex``, ``stats`` (the memory engine alone);
- :mod:`.chat`: ``ask``, ``flush``, ``sessions``, ``consolidate`` (the chat engine);
- :mod:`.serve`: ``mcp`` (the memory as an MCP server).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

from .. import __version__
from ..engine.workspace import default_workspace
from . import chat, history, memory, serve, sync
from .output import visible_output
from .registry import CliError, Command

#: Every subcommand by name, in the order ``memdeck --help`` lists them.
COMMANDS: dict[str, Command] = {
    **memory.COMMANDS,
    **chat.COMMANDS,
    **history.COMMANDS,
    **sync.COMMANDS,
    **serve.COMMANDS,
}
#: Commands whose stdout is a protocol stream, written as it is (their stderr shows controls).
PROTOCOL_COMMANDS = frozenset(serve.COMMANDS)

__all__ = [
    "COMMANDS",
    "CliError",
    "Command",
    "add_global_options",
    "build_parser",
    "main",
    "run_tui",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="memdeck",
        description="A terminal chat whose assistant remembers. Without a COMMAND, memdeck "
        "opens the app; with one, it runs that command and exits.",
    )
    add_global_options(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="[COMMAND]")
    for name, (help_text, configure, run) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        configure(child)
        # The global options work after the command too (`memdeck search fish --workspace
        # ws`); given there, they win over the same option given before it.
        add_global_options(child, default=argparse.SUPPRESS)
        child.set_defaults(run=run)
    return parser


def add_global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """``--workspace`` and ``--version`` on ``parser``: the command line's, and each
    subcommand's (with ``default=argparse.SUPPRESS``, so that one not given there leaves the
    value given before the command)."""
    parser.add_argument(
        "--workspace",
        type=Path,
        default=default,
        help="memory workspace (default: $MEMDECK_WORKSPACE, else [memory] workspace in the "
        "config file, else the platform data dir); before or after the command",
    )
    parser.add_argument("--version", action="version", version=f"memdeck {__version__}")


def run_tui(args: argparse.Namespace) -> int:
    """Open the terminal UI."""
    # Imported here so that the scriptable commands never load Textual.
    from ..app.main import run_app

    return run_app(args)


#: Free bytes under which a write error of the index is taken for a full disk.
FULL_DISK_BYTES = 16 * 1024 * 1024
_SQLITE_FULL = 13


def disk_is_full(exc: BaseException, workspace: str | os.PathLike[str] | None) -> bool:
    """Whether an index error comes from a full disk: SQLite says so, or it says "disk I/O
    error" and the workspace's file system has (almost) no space left."""
    if getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or "disk is full" in str(exc):
        return True
    if "I/O error" not in str(exc):
        return False
    try:
        where = Path(workspace).expanduser() if workspace else default_workspace()
        while not where.exists() and where != where.parent:
            where = where.parent
        return shutil.disk_usage(where).free < FULL_DISK_BYTES
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memdeck`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    # A command prints; the app writes to the terminal itself (and its views show controls).
    output = visible_output(stdout=args.command not in PROTOCOL_COMMANDS) if run else nullcontext()
    with output:
        try:
            return run(args) if run else run_tui(args)
        except KeyboardInterrupt:
            return 130
        except Exception as exc:
            message = one_line_error(exc, getattr(args, "workspace", None))
            if message is None:
                raise
            print(f"memdeck: error: {message}", file=sys.stderr)
            return 2


def one_line_error(exc: Exception, workspace: str | os.PathLike[str] | None) -> str | None:
    """What ``memdeck`` says of ``exc`` in one line; None for a bug (its traceback shows).

    The error classes are imported here, when one happened: parsing the command line loads
    neither the index nor the model's runtime."""
    from ..engine.embeddings import EmbeddingError
    from ..engine.fileio import ConcurrentEditError
    from ..engine.index_db import DatabaseError, IndexLockedError, is_busy
    from ..engine.workspace import WorkspaceError

    if isinstance(
        exc, CliError | WorkspaceError | EmbeddingError | ConcurrentEditError | IndexLockedError
    ):
        return str(exc)
    if isinstance(exc, DatabaseError):
        if is_busy(exc):  # locked is never broken: waiting is the cure, not a reindex
            return f"the index is locked by another process ({exc})"
        if disk_is_full(exc, workspace):  # a reindex needs more space
            return (
                f"the disk is full ({exc}); free some space and try again "
                "(your Markdown files are unchanged)"
            )
        return f"the index could not be used ({exc}); run `memdeck reindex`"
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return f"{exc.filename} {reason}" if exc.filename else reason
    return None
