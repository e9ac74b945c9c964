"""The ``memdeck`` command: the TUI with no subcommand, scriptable engine commands otherwise."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

from . import __version__
from .engine.embeddings import EmbeddingError
from .engine.fileio import ConcurrentEditError
from .engine.index import DatabaseError
from .engine.workspace import WorkspaceError

#: Subcommands register here: name -> (configure parser, run). Other modules add theirs.
Command = tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: dict[str, tuple[str, Command]] = {}


class CliError(Exception):
    """An error worth one clear line and a non-zero exit."""


def command(name: str, help: str) -> Callable[[Command], Command]:
    """Register a subcommand."""

    def register(spec: Command) -> Command:
        COMMANDS[name] = (help, spec)
        return spec

    return register


def open_engine(args: argparse.Namespace, *, create: bool = False):  # -> MemoryEngine
    """The engine for ``--workspace`` (or its default). Engine commands never create a workspace by accident."""
    from .engine.engine import MemoryEngine
    from .engine.workspace import Workspace

    workspace = Workspace.open(args.workspace, create=create)
    engine = MemoryEngine(workspace)
    for notice in engine.notices:
        print(f"memdeck: {notice}", file=sys.stderr)
    return engine


def _progress_printer(enabled: bool) -> Callable[[str, int, int], None] | None:
    if not enabled:
        return None

    def show(stage: str, done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(1, total))
        sys.stderr.write(f"\r{stage:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _print_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"memdeck: warning: {warning}", file=sys.stderr)


def _parse_day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from exc


# -- search --


def _configure_search(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help="what to look for")
    parser.add_argument(
        "--stdin", action="store_true", help="read one query per line; one JSON object per line out"
    )
    parser.add_argument("--limit", type=int, default=None, help="max results (default 6)")
    parser.add_argument(
        "--min-score", type=float, default=None, help="minimum relevance (default 0.3)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="threshold mode: every result above this, no cap",
    )
    parser.add_argument(
        "--no-decay", action="store_true", help="ignore the age of daily-log entries"
    )
    parser.add_argument("--mmr", action="store_true", help="diversify results (MMR, lambda 0.7)")
    parser.add_argument(
        "--bm25", action="store_true", help="full-text only, do not load the embedding model"
    )
    parser.add_argument("--now", type=_parse_day, default=None, help="pretend today is YYYY-MM-DD")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _run_search(args: argparse.Namespace) -> int:
    if args.stdin == bool(args.query):
        raise CliError("give either a QUERY or --stdin")
    engine = open_engine(args)
    try:
        if not args.bm25:
            engine.load_model()
        report = engine.sync(progress=_progress_printer(sys.stderr.isatty()))
        _print_warnings(report.warnings)
        overrides: dict[str, object] = {"decay": not args.no_decay, "mmr": args.mmr}
        if args.limit is not None:
            overrides["max_results"] = args.limit
        if args.min_score is not None:
            overrides["min_score"] = args.min_score
        if args.threshold is not None:
            overrides["threshold"] = args.threshold
        queries = (line.rstrip("\n") for line in sys.stdin) if args.stdin else [args.query]
        for query in queries:
            response = engine.search(query, now=args.now, **overrides)
            if args.json or args.stdin:
                print(json.dumps(response.to_json(), ensure_ascii=False), flush=True)
            else:
                _print_results(response)
    finally:
        engine.close()
    return 0


def _print_results(response) -> None:  # SearchResponse
    for note in response.notes:
        print(f"({note})")
    intent = response.intent
    if intent.window is not None:
        print(f"(time window {intent.window[0]} .. {intent.window[1]} from {intent.phrase!r})")
    elif intent.current or intent.present_tense:
        print("(asks about the present: newer entries rank higher)")
    if not response.results:
        print("no results")
    for result in response.results:
        b = result.breakdown
        vector = f"{b.vector:.2f}" if b.vector is not None else "  - "
        bm25 = f"{b.bm25:.2f}" if b.bm25 is not None else "-"
        print(
            f"{result.score:.3f}  {result.location}  vec {vector} · text {b.text:.2f} (bm25 {bm25}) · "
            f"hybrid {b.hybrid:.2f} · recency {b.recency:.2f} · window {b.time_window:.2f} · "
            f"{b.confidence}"
        )
        for line in result.text.strip().splitlines()[:4]:
            print(f"    {line}")


# -- inject --


def _configure_inject(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help="the message about to be sent")
    parser.add_argument(
        "--stdin", action="store_true", help="read one query per line; one JSON object per line out"
    )
    parser.add_argument("--budget", type=int, default=None, help="token budget (default 2000)")
    parser.add_argument(
        "--bm25", action="store_true", help="full-text only, do not load the embedding model"
    )
    parser.add_argument("--now", type=_parse_day, default=None, help="pretend today is YYYY-MM-DD")
    parser.add_argument("--json", action="store_true", help="print the text and the report as JSON")


def _run_inject(args: argparse.Namespace) -> int:
    if args.stdin == bool(args.query):
        raise CliError("give either a QUERY or --stdin")
    engine = open_engine(args)
    try:
        if not args.bm25:
            engine.load_model()
        _print_warnings(engine.sync().warnings)
        if args.stdin:
            for line in sys.stdin:
                injection = engine.inject(line.rstrip("\n"), budget=args.budget, now=args.now)
                print(json.dumps(_injection_json(injection), ensure_ascii=False), flush=True)
            return 0
        injection = engine.inject(args.query, budget=args.budget, now=args.now)
        if args.json:
            print(json.dumps(_injection_json(injection), ensure_ascii=False))
            return 0
        print(injection.text)
        report = injection.report
        print(f"\n-- {report.tokens_used} / {report.budget} tokens", file=sys.stderr)
        for item in report.cut:
            print(f"-- cut {item.location}: {item.reason}", file=sys.stderr)
        for note in report.notes:
            print(f"-- {note}", file=sys.stderr)
    finally:
        engine.close()
    return 0


def _injection_json(injection) -> dict[str, object]:  # Injection
    return {"text": injection.text, "report": injection.report.to_json()}


# -- reindex / stats --


def _run_reindex(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    try:
        engine.load_model()
        report = engine.reindex(progress=_progress_printer(sys.stderr.isatty()))
        _print_warnings(report.warnings)
        stats = engine.stats()
        print(
            f"indexed {stats['files']} files, {stats['chunks']} chunks "
            f"({report.embedded} embedded, {report.cache_hits} from cache) in {report.seconds:.1f}s"
        )
    finally:
        engine.close()
    return 0


def _configure_stats(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _run_stats(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    try:
        _print_warnings(engine.sync(embed=False).warnings)
        stats = engine.stats()
        if args.json:
            print(json.dumps(stats))
        else:
            for key, value in stats.items():
                if key != "warnings":
                    print(f"{key:>14}: {value}")
    finally:
        engine.close()
    return 0


command("search", "hybrid search with the score breakdown")((_configure_search, _run_search))
command("inject", "show the memory block the next prompt would get")(
    (_configure_inject, _run_inject)
)
command("reindex", "rebuild the index from the Markdown files")((lambda p: None, _run_reindex))
command("stats", "files, chunks, index size")((_configure_stats, _run_stats))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="memdeck", description="A terminal chat whose assistant remembers."
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        help="memory workspace (default: $MEMDECK_WORKSPACE or the platform data dir)",
    )
    parser.add_argument("--version", action="version", version=f"memdeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, (configure, run)) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        configure(child)
        child.set_defaults(run=run)
    return parser


def _load_plugins() -> None:
    """Import modules that register more subcommands (chat, TUI) when they exist."""
    import importlib

    for module in ("tui.chat.cli",):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not exc.name or not module.startswith(exc.name):
                raise


def run_tui(args: argparse.Namespace) -> int:
    """Open the terminal UI."""
    try:
        from .app.main import run_app
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("tui.app"):
            raise CliError("the terminal UI is not built yet; try `memdeck search QUERY`") from exc
        raise
    return run_app(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memdeck`` console script."""
    _load_plugins()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        run = getattr(args, "run", None)
        return run(args) if run else run_tui(args)
    except (CliError, WorkspaceError, EmbeddingError, ConcurrentEditError) as exc:
        print(f"memdeck: error: {exc}", file=sys.stderr)
        return 2
    except DatabaseError as exc:
        print(
            f"memdeck: error: the index could not be used ({exc}); run `memdeck reindex`",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"memdeck: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run through the imported module so subcommands registered by plugins land in its COMMANDS.
    from tui.cli import main as package_main

    sys.exit(package_main())
