"""``memdeck history`` and ``memdeck revert``: the memory's git history from a shell."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.history_records import SOURCES
from .memory import open_engine
from .registry import CliError, Command

if TYPE_CHECKING:
    from ..engine.engine import MemoryEngine
    from ..engine.history_records import Change


def _since(text: str) -> datetime:
    try:
        day = date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from exc
    return datetime(day.year, day.month, day.day).astimezone()  # local midnight


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _history_on(engine: MemoryEngine) -> None:
    """Refuse in one line when the workspace keeps no history; commit outside edits first,
    so the list (and a revert) sees the files as they are."""
    history = engine.history
    if not history.enabled:
        raise CliError(
            history.problem
            or 'history is off for this workspace ([history] mode = "off" in config.toml)'
        )
    history.commit_outside()


def describe_change(change: Change) -> str:
    """Two lines for a change: id, local time, who, files and +/-; then its subject."""
    when = change.time.astimezone().strftime("%Y-%m-%d %H:%M")
    files = ", ".join(change.files) or "(no files)"
    return (
        f"{change.short_id}  {when}  {change.who()}  {files} +{change.added} -{change.removed}\n"
        f"    {change.summary}"
    )


# -- history --


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        help="only the changes of this file (e.g. MEMORY.md, memory/2026-11-20.md)",
    )
    parser.add_argument("--source", choices=SOURCES, help="only the changes of this writer")
    parser.add_argument(
        "--since",
        type=_since,
        default=None,
        metavar="YYYY-MM-DD",
        help="only changes since that day",
    )
    parser.add_argument("--limit", type=_limit, default=200, help="at most N changes (default 200)")
    parser.add_argument("--diff", metavar="ID", help="print the diff of change ID instead")
    parser.add_argument("--json", action="store_true", help="a JSON list of the changes")


def _workspace_path(engine: MemoryEngine, text: str) -> str:
    """``text`` as a workspace path (an absolute path inside the workspace is made relative)."""
    path = Path(text)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(engine.workspace.root.resolve()).as_posix()
        except ValueError as exc:
            raise CliError(f"{text} is not inside the workspace {engine.workspace.root}") from exc
    return path.as_posix()


def _run_history(args: argparse.Namespace) -> int:
    from ..engine.history_records import HistoryError

    engine = open_engine(args)
    try:
        _history_on(engine)
        history = engine.history
        if args.diff:
            try:
                change = history.change(args.diff)
                patch = history.diff(change.id)
            except HistoryError as exc:
                raise CliError(str(exc)) from exc
            print(describe_change(change))
            print()
            sys.stdout.write(patch)
            return 0
        path = _workspace_path(engine, args.path) if args.path else None
        changes = history.changes(path, source=args.source, since=args.since, limit=args.limit)
        if args.json:
            print(json.dumps([change.to_json() for change in changes], ensure_ascii=False))
        elif not changes:
            print("no changes")
        else:
            print("\n".join(describe_change(change) for change in changes))
        if history.problem:  # a failed commit waiting, a repository moved aside
            print(f"memdeck: {history.problem}", file=sys.stderr)
    finally:
        engine.close()
    return 0


# -- revert --


def _configure_revert(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the change to undo (its id, or the start of it)")


def _run_revert(args: argparse.Namespace) -> int:
    from ..engine.history_actions import RevertConflict, revert_change
    from ..engine.history_records import HistoryError

    engine = open_engine(args)
    try:
        _history_on(engine)
        try:
            outcome = revert_change(engine, args.id)
        except RevertConflict as exc:
            print(f"memdeck: {exc}", file=sys.stderr)
            sys.stdout.write(engine.history.diff(args.id))
            return 1
        except HistoryError as exc:
            print(f"memdeck: {exc}", file=sys.stderr)
            return 1
        reverted = outcome.reverted
        files = ", ".join(outcome.files) or "nothing left to change"
        print(f"reverted {reverted.short_id}: {reverted.summary} ({files})")
    finally:
        engine.close()
    return 0


COMMANDS = {
    "history": Command(
        "the memory's changes, newest first: who, when, files; --diff ID shows one",
        _configure_history,
        _run_history,
    ),
    "revert": Command(
        "undo one change of the history (a new commit)", _configure_revert, _run_revert
    ),
}
