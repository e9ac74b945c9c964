"""``memdeck search``, ``memdeck inject``, ``memdeck reindex`` and ``memdeck stats``: the memory
engine from a shell (no model request, no Textual)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from .output import terminal_of
from .registry import CliError, Command

if TYPE_CHECKING:  # imported where they are used: a command loads only what it runs
    from ..engine.engine import MemoryEngine
    from ..engine.inject import Injection
    from ..engine.search_results import SearchResponse, SearchResult


def open_engine(args: argparse.Namespace, *, create: bool = False) -> MemoryEngine:
    """The engine for the workspace every command opens (see
    :func:`~tui.chat.config.workspace_root`) with the config's embedder, search options and
    injection budget (as the app has them). Engine commands never create a workspace by
    accident."""
    from ..chat.config import ConfigError, load_config, open_memory

    try:
        config = load_config()
        engine = open_memory(config, args.workspace, create=create)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc
    for notice in engine.notices:
        print(f"memdeck: {notice}", file=sys.stderr)
    return engine


def load_model(engine: MemoryEngine) -> None:
    """Load the embedding model; a remote endpoint that is down only costs the vectors (a
    warning, then BM25 only), a broken local model is an error."""
    from ..engine.remote_embeddings import RemoteEmbeddingError

    try:
        engine.load_model()
    except RemoteEmbeddingError as exc:
        print(f"memdeck: warning: {exc}: BM25 only", file=sys.stderr)


def _progress_printer(enabled: bool) -> Callable[[str, int, int], None] | None:
    if not enabled:
        return None

    def show(stage: str, done: int, total: int) -> None:
        terminal = terminal_of(sys.stderr)  # the bar's own \r, not shown as text
        width = 30
        filled = int(width * done / max(1, total))
        terminal.write(f"\r{stage:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            terminal.write("\n")
        terminal.flush()

    return show


def _print_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"memdeck: warning: {warning}", file=sys.stderr)


def _number(text: str) -> int | float | str:
    """A number as typed (an int when it reads as one); anything else is kept for
    :func:`_checked` to refuse with the usual message."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _checked(setting: str, value: object, option: str) -> object:
    """``value`` checked like the config's ``setting`` (type and range), or a one-line error."""
    from ..chat.config import check_setting

    try:
        return check_setting(setting, value, option)
    except ValueError as exc:
        raise CliError(str(exc)) from exc


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
    parser.add_argument("--limit", type=_number, default=None, help="max results (default 6)")
    parser.add_argument(
        "--min-score", type=_number, default=None, help="minimum relevance (default 0.3)"
    )
    parser.add_argument(
        "--threshold",
        type=_number,
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
    overrides: dict[str, Any] = {"decay": not args.no_decay, "mmr": args.mmr}
    for option, setting, value in (
        ("--limit", "max_results", args.limit),
        ("--min-score", "min_score", args.min_score),
        ("--threshold", "threshold", args.threshold),
    ):
        if value is not None:
            overrides[setting] = _checked(setting, value, option)
    engine = open_engine(args)
    try:
        if not args.bm25:
            load_model(engine)
        report = engine.sync(progress=_progress_printer(sys.stderr.isatty()))
        _print_warnings(report.warnings)
        queries = (line.rstrip("\n") for line in sys.stdin) if args.stdin else [args.query]
        for query in queries:
            response = engine.search(query, now=args.now, **overrides)
            if args.json or args.stdin:
                print(json.dumps(_with_origins(engine, response), ensure_ascii=False), flush=True)
            else:
                _print_results(response, engine)
    finally:
        engine.close()
    return 0


def _with_origins(engine: MemoryEngine, response: SearchResponse) -> dict[str, object]:
    """The JSON of ``response``, each result with its ``origin`` (the change that last wrote
    its lines; null when unknown: history off, or not committed)."""
    payload = response.to_json()
    results = []
    for result in response.results:
        origin = engine.history.origin(result.path, result.start_line, result.end_line)
        results.append({**result.to_json(), "origin": origin.to_json() if origin else None})
    payload["results"] = results
    return payload


def _print_results(response: SearchResponse, engine: MemoryEngine) -> None:
    from tui.engine.search import asks_current_state, describe_change

    options = engine.search_options
    for note in response.notes:
        print(f"({note})")
    intent = response.intent
    if intent.window is not None:
        print(f"(time window {intent.window[0]} .. {intent.window[1]} from {intent.phrase!r})")
    elif asks_current_state(intent, options):
        print("(asks about the present: newer entries rank higher)")
    if not response.results:
        print("no results")
    for result in response.results:
        b = result.breakdown
        print(_breakdown_line(result))
        if b.changed_by:
            print(f"    {describe_change(b)}")
        origin = engine.history.origin(result.path, result.start_line, result.end_line)
        if origin is not None:
            when = origin.time.astimezone().strftime("%Y-%m-%d %H:%M")
            print(f"    from {origin.who()} · {when} · {origin.commit[:10]}")
        for line in result.text.strip().splitlines()[:4]:
            print(f"    {line}")


def _breakdown_line(result: SearchResult) -> str:
    """``0.576  path#L7-7  vec 0.04 · text 0.64 via L6 (bm25 -0.00) · hybrid 0.22 · neighbour
    0.58 via L6 · …``: the score and its parts, the one that drives the relevance included
    (``neighbour`` or ``linked`` when above the hybrid), and the entry a part came through."""
    from tui.engine.search_results import describe_via

    b = result.breakdown
    text_via, neighbour_via = describe_via(b, result.path)
    if text_via.startswith("partly"):
        text_via += f", own {b.own_text:.2f}"
    parts = [
        f"vec {b.vector:.2f}" if b.vector is not None else "vec   - ",
        " ".join(filter(None, [f"text {b.text:.2f}", text_via]))
        + f" (bm25 {f'{b.bm25:.2f}' if b.bm25 is not None else '-'})",
        f"hybrid {b.hybrid:.2f}",
    ]
    if b.neighbour > b.hybrid:
        parts.append(" ".join(filter(None, [f"neighbour {b.neighbour:.2f}", neighbour_via])))
    parts += [f"recency {b.recency:.2f}", f"window {b.time_window:.2f}"]
    if b.linked > 0:
        parts.append(f"linked {b.linked:.2f}")
    if b.superseded < 1:
        parts.append(f"superseded {b.superseded:.2f}")
    parts.append(b.confidence)
    return f"{result.score:.3f}  {result.location}  " + " · ".join(parts)


# -- inject --


def _configure_inject(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help="the message about to be sent")
    parser.add_argument(
        "--stdin", action="store_true", help="read one query per line; one JSON object per line out"
    )
    parser.add_argument("--budget", type=_number, default=None, help="token budget (default 2000)")
    parser.add_argument(
        "--bm25", action="store_true", help="full-text only, do not load the embedding model"
    )
    parser.add_argument("--now", type=_parse_day, default=None, help="pretend today is YYYY-MM-DD")
    parser.add_argument("--json", action="store_true", help="print the text and the report as JSON")


def _run_inject(args: argparse.Namespace) -> int:
    if args.stdin == bool(args.query):
        raise CliError("give either a QUERY or --stdin")
    if args.budget is not None:
        args.budget = _checked("injection_budget", args.budget, "--budget")
    engine = open_engine(args)
    try:
        if not args.bm25:
            load_model(engine)
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


def _injection_json(injection: Injection) -> dict[str, object]:
    return {"text": injection.text, "report": injection.report.to_json()}


# -- reindex / stats --


def _run_reindex(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    try:
        load_model(engine)
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


def describe_stats(stats: Mapping[str, object]) -> str:
    """``memdeck stats`` for people (``--json`` has every field, the index fingerprint too)."""

    def count(key: str) -> str:
        value = stats.get(key)
        return f"{value:,}" if isinstance(value, int) else "?"

    size = stats.get("index_bytes")
    rows = [
        ("workspace", str(stats.get("workspace", "?"))),
        ("files", f"{count('files')} Markdown files, {count('chunks')} chunks"),
        ("vectors", f"{count('embedded')} of {count('chunks')} chunks embedded"),
        ("model", str(stats.get("model") or "none (BM25 only)")),
        (
            "cache",
            f"{count('cache_entries')} embeddings kept (at most {count('cache_max_entries')})",
        ),
        ("index", f"{size / 1e6:.1f} MB" if isinstance(size, int | float) else "?"),
    ]
    return "\n".join(f"{name:<10} {value}" for name, value in rows)


def _run_stats(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    try:
        _print_warnings(engine.sync(embed=False).warnings)
        stats = engine.stats()
        suggestions = engine.workspace.suggestions()
        if args.json:
            print(json.dumps({**stats, "suggestions": suggestions}))
        else:
            print(describe_stats(stats))
            for line in suggestions:
                print(f"{'hint':<10} {line}")
    finally:
        engine.close()
    return 0


# -- forgotten --


def _configure_forgotten(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--restore",
        type=int,
        metavar="N",
        action="append",
        help="bring entry N of the list back (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per entry")


def _run_forgotten(args: argparse.Namespace) -> int:
    from ..engine.workspace import PathRefusedError

    engine = open_engine(args)
    try:
        records = {r.number: r for r in engine.store.retired_records()}
        if args.restore:
            # In the trail's order: entries forgotten together come back top down, exactly.
            for number in sorted(set(args.restore)):
                record = records.get(number)
                if record is None:
                    raise CliError(f"no forgotten entry {number} (see `memdeck forgotten`)")
                try:
                    restored = engine.restore(record)
                except (OSError, PathRefusedError) as exc:
                    raise CliError(f"entry {number} could not be restored: {exc}") from exc
                if restored is None:
                    print(f"{number}: not restored: {record.path} no longer has it as forgotten")
                else:
                    print(f"{number}: restored {restored.describe()}: {record.text[:100]}")
            return 0
        if not records:
            print("nothing forgotten or superseded")
        for record in reversed(list(records.values())):
            if args.json:
                fields = dict(record.__dict__)
                place = fields.pop("place")  # what the JSON says of it: the headings above it
                fields["section"] = list(place.section) if place else None
                print(json.dumps(fields, ensure_ascii=False))
                continue
            text = " ".join(record.text.split())
            print(
                f"{record.number:>5}  {record.at[:16]}  {record.event:<10}  {record.path}: "
                f"{text[:90]}{'…' if len(text) > 90 else ''}"
            )
    finally:
        engine.close()
    return 0


COMMANDS = {
    "search": Command("hybrid search with the score breakdown", _configure_search, _run_search),
    "inject": Command(
        "show the memory block the next prompt would get", _configure_inject, _run_inject
    ),
    "reindex": Command(
        "rebuild the index from the Markdown files", lambda parser: None, _run_reindex
    ),
    "stats": Command("files, chunks, index size", _configure_stats, _run_stats),
    "forgotten": Command(
        "list forgotten and superseded memories; --restore N brings one back",
        _configure_forgotten,
        _run_forgotten,
    ),
}
