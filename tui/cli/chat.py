"""``memdeck ask``, ``memdeck flush``, ``memdeck sessions`` and ``memdeck consolidate``: the chat
engine from a shell."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..chat.config import ConfigError, check_setting, config_path, load_config, workspace_root
from .memory import load_model
from .registry import CliError, Command

# The chat engine (and with it the index, numpy and the model's runtime) is imported by the
# commands that run it, not to parse the command line: `memdeck mcp` and --help start faster.
if TYPE_CHECKING:
    from ..chat.chat import ChatEngine
    from ..chat.config import Config
    from ..chat.consolidation import Proposal
    from ..chat.events import TriggerEvent, WorkbenchEvent
    from ..chat.workbench import Workbench
    from ..engine.workspace import Workspace


def _add_llm_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=None,
        help="config file (default: $MEMDECK_CONFIG or the platform config dir)",
    )
    parser.add_argument("--model", default=None, help="chat model (overrides MEMDECK_MODEL)")
    parser.add_argument("--summary-model", default=None, help="model for summaries")
    parser.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (overrides OPENAI_BASE_URL)"
    )


def _open(args: argparse.Namespace, *, create: bool) -> ChatEngine:
    from ..chat.chat import ChatEngine

    try:
        config = load_config(
            args.config,
            overrides={
                "model": args.model,
                "summary_model": args.summary_model,
                "base_url": args.base_url,
            },
        )
        return ChatEngine.open(config, workspace=args.workspace, create=create)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc


def _workbench(args: argparse.Namespace, engine: ChatEngine) -> Workbench:
    """The orchestration the app uses, over ``engine`` (one ``asyncio.run`` per step)."""
    from ..chat.workbench import Workbench

    config_file = Path(args.config).expanduser() if args.config else config_path()
    return Workbench(engine, config_file=config_file)


def _short(arguments: dict[str, Any], limit: int = 120) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_trigger(event: TriggerEvent) -> None:
    outcome = event.outcome
    where = f"{event.session_id}: " if event.session_id else ""
    extra = f" → {outcome.daily_log}" if outcome.daily_log else ""
    print(
        f"{where}{outcome.summary}{extra}",
        file=sys.stderr if outcome.status in ("skipped", "failed") else sys.stdout,
    )
    if outcome.out_of_date:
        print(f"{where}{outcome.out_of_date}")
    for line in outcome.changed:
        print(f"  {line}")


# -- ask --


def _configure_ask(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "question", help="what to ask (- reads it from stdin: a paste too long for a command line)"
    )
    parser.add_argument(
        "--session", default=None, help="continue this session (default: a new one)"
    )
    parser.add_argument("--title", default=None, help="title of the new session")
    parser.add_argument(
        "--flush", action="store_true", help="log the session to the daily log afterwards"
    )
    parser.add_argument(
        "--bm25",
        action="store_true",
        help="full-text memory search only, do not load the embedding model",
    )
    parser.add_argument(
        "--allow-forget",
        action="store_true",
        help="let the model forget more than max_forgets_per_turn memories in this turn "
        "(refused otherwise; `memdeck forgotten --restore` undoes a forget)",
    )
    parser.add_argument(
        "--fold",
        action="store_true",
        help="if the question is too long for the model's context, send its head and tail "
        "with a note of what was left out (refused otherwise)",
    )
    _add_llm_flags(parser)


async def _allow_forget(_memories: list[str], _already: int) -> bool:
    return True


async def _stream_turn(workbench: Workbench, question: str) -> int:
    """Run ``question`` as a turn of the workbench's open session, printing its events from
    the workbench's stream: the answer on stdout, tools and errors on stderr. 1 if it failed."""
    from ..chat.events import (
        Compacted,
        CompactionFailed,
        CompactionStarted,
        TextDelta,
        ToolCallFinished,
        ToolCallStarted,
        TurnDone,
        TurnError,
    )

    status = 0
    wrote_text = False

    def show(event: WorkbenchEvent) -> None:
        nonlocal status, wrote_text
        if isinstance(event, TextDelta):
            sys.stdout.write(event.text)
            sys.stdout.flush()
            wrote_text = True
        elif isinstance(event, ToolCallStarted):
            print(f"▸ {event.name} {_short(event.arguments)}", file=sys.stderr, flush=True)
        elif isinstance(event, ToolCallFinished):
            mark = "✓" if event.ok else "✗"
            detail = (
                "" if event.ok else f": {event.result.get('message', event.result.get('error'))}"
            )
            print(f"  {mark} {event.name}{detail}", file=sys.stderr, flush=True)
        elif isinstance(event, CompactionStarted):
            print(
                f"(compacting: ~{event.estimated_tokens} of {event.limit} tokens)", file=sys.stderr
            )
        elif isinstance(event, Compacted):
            print(
                f"(compacted: ~{event.tokens_before} → ~{event.tokens_after} tokens)",
                file=sys.stderr,
            )
        elif isinstance(event, CompactionFailed):
            print(f"(compaction skipped: {event.message})", file=sys.stderr)
        elif isinstance(event, TurnError):
            if wrote_text:
                sys.stdout.write("\n")
            print(f"memdeck: error: {event.kind}: {event.message}", file=sys.stderr)
            status = 1
        elif isinstance(event, TurnDone) and wrote_text:
            sys.stdout.write("\n")
            sys.stdout.flush()

    stop_showing = workbench.subscribe(show)
    try:
        await workbench.run_turn(question)
    finally:
        stop_showing()
    return status


def _question(args: argparse.Namespace, engine: ChatEngine) -> str:
    """The question to send: refused in one line when the model's context cannot hold it,
    folded to its head and tail instead with ``--fold``."""
    question: str = sys.stdin.read() if args.question == "-" else args.question
    if not question.strip():
        raise CliError("the question is empty")
    size = engine.measure_message(question)
    if size.fits:
        return question
    if not args.fold:
        raise CliError(size.refusal("shorten it, or add --fold to send its head and tail"))
    print(
        f"memdeck: note: the question is ~{size.tokens:,} tokens; only its head and tail are "
        f"sent ({size.room:,} tokens fit)",
        file=sys.stderr,
    )
    return engine.fit_message(question, size.room)


def _run_ask(args: argparse.Namespace) -> int:
    from ..chat.sessions import SessionError

    engine = _open(args, create=True)
    try:
        problem = engine.llm_problem
        if problem:
            raise CliError(problem)
        question = _question(args, engine)
        try:
            if args.session:
                if not engine.sessions.exists(args.session):
                    raise CliError(f"no session {args.session!r} (see `memdeck sessions`)")
                session_id = args.session
            else:
                session_id = engine.sessions.create(args.title).id
                print(f"session: {session_id}", file=sys.stderr)
        except SessionError as exc:
            raise CliError(str(exc)) from exc
        if not args.bm25:
            load_model(engine.memory)
        for warning in engine.memory.sync().warnings:
            print(f"memdeck: warning: {warning}", file=sys.stderr)
        workbench = _workbench(args, engine)
        asyncio.run(workbench.flush_left(session_id, workbench.open(session_id)))
        if args.allow_forget:
            engine.confirm_forget = _allow_forget
        status = asyncio.run(_stream_turn(workbench, question))
        # a session holding only a question nobody answered is no conversation to list
        if status and not args.session and engine.sessions.discard_unanswered(session_id):
            print(
                f"memdeck: nothing was answered: session {session_id} moved to the trash "
                f"(`memdeck sessions --restore {session_id}` brings it back)",
                file=sys.stderr,
            )
            return status
        if args.flush:
            for event in asyncio.run(workbench.end_session()):
                _print_trigger(event)
        return status
    finally:
        engine.close()


# -- flush --


def _configure_flush(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session",
        nargs="?",
        help="session id (default: every session with messages not yet logged)",
    )
    _add_llm_flags(parser)


def _run_flush(args: argparse.Namespace) -> int:
    from ..chat.sessions import SessionError

    engine = _open(args, create=False)
    try:
        try:
            if args.session and not engine.sessions.exists(args.session):
                raise CliError(f"no session {args.session!r} (see `memdeck sessions`)")
        except SessionError as exc:
            raise CliError(str(exc)) from exc
        workbench = _workbench(args, engine)
        ids = [args.session] if args.session else asyncio.run(workbench.sessions_to_flush())
        if not ids:
            print("nothing new to log")
            return 0
        events = asyncio.run(workbench.flush(ids, reason="memdeck flush"))
        for event in events:
            _print_trigger(event)
        return 1 if any(e.outcome.status in ("skipped", "failed") for e in events) else 0
    finally:
        engine.close()


# -- sessions --


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per session")
    parser.add_argument("--rename", nargs=2, metavar=("ID", "TITLE"), help="give a session a title")
    parser.add_argument(
        "--delete",
        metavar="ID",
        help="flush a session, then move it to the trash (refused if its messages cannot be logged)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --delete: move it to the trash even if its messages are not logged",
    )
    parser.add_argument(
        "--restore",
        nargs="?",
        const="",
        metavar="ID",
        help="bring a deleted session back; without ID: list what is in the trash",
    )
    parser.add_argument(
        "--export", metavar="ID", help="print a session as Markdown (or write it to --output)"
    )
    parser.add_argument(
        "--output", metavar="FILE", type=Path, help="with --export: write it to FILE"
    )
    _add_llm_flags(parser)


def _run_sessions(args: argparse.Namespace) -> int:
    from ..chat.sessions import SessionError

    engine = _open(args, create=False)
    try:
        try:
            if args.rename:
                info = engine.sessions.rename(*args.rename)
                print(f"{info.id}: {info.title}")
                return 0
            if args.restore == "":
                return _list_trash(engine, as_json=args.json)
            if args.restore:
                info = engine.sessions.restore(args.restore)
                pending = f" ({info.unlogged_count} not logged)" if info.unlogged_count else ""
                print(f"{info.id}: restored{pending}")
                return 0
            if args.delete:
                return _delete_session(_workbench(args, engine), args.delete, force=args.force)
            if args.export:
                return _export_session(engine, args.export, args.output)
            if args.output:
                raise CliError("--output goes with --export ID")
        except SessionError as exc:
            raise CliError(str(exc)) from exc
        infos = engine.sessions.list()
        if args.json:
            for info in infos:
                row = {k: v for k, v in info.__dict__.items() if k != "path"}
                print(json.dumps(row, ensure_ascii=False))
            return 0
        if not infos:
            print('no sessions yet; start one with `memdeck ask "..."`')
        for info in infos:
            pending = f" · {info.unlogged_count} not logged" if info.unlogged_count else ""
            print(
                f"{info.id}  {(info.updated or '')[:16]:16}  {info.message_count:>4} msgs{pending}  {info.title}"
            )
        return 0
    finally:
        engine.close()


def _export_session(engine: ChatEngine, session_id: str, output: Path | None) -> int:
    from ..chat.export import session_markdown

    text = session_markdown(engine.sessions.load(session_id))
    if output is None:
        sys.stdout.write(text)
        return 0
    try:  # private like the transcript it comes from (an existing file keeps its mode)
        fd = os.open(output.expanduser(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        raise CliError(f"could not write {output}: {exc.strerror or exc}") from exc
    print(f"exported {session_id} to {output}", file=sys.stderr)
    return 0


def _list_trash(engine: ChatEngine, *, as_json: bool) -> int:
    """``sessions --restore`` without an id: what the trash holds, most recent first."""
    from ..chat.trash import trashed_sessions

    rows = trashed_sessions(engine.sessions)
    if as_json:
        for row in rows:
            fields = {k: v for k, v in row.__dict__.items() if k != "path"}
            print(json.dumps(fields, ensure_ascii=False))
        return 0
    if not rows:
        print("the trash is empty")
        return 0
    for row in rows:
        print(f"{row.id}  {(row.updated or '')[:16]:16}  {row.describe()}  {row.title}")
    print(f"`memdeck sessions --restore {rows[0].id}` brings one back", file=sys.stderr)
    return 0


def _delete_session(workbench: Workbench, session_id: str, *, force: bool) -> int:
    from ..chat.sessions import UnloggedMessagesError

    engine = workbench.engine
    if not engine.sessions.exists(session_id):
        raise CliError(f"no session {session_id!r}")
    restore = f"`memdeck sessions --restore {session_id}`"
    try:
        trash, event = asyncio.run(workbench.delete(session_id, force=force))
    except UnloggedMessagesError as exc:
        raise CliError(
            f"{exc}; retry when the LLM is reachable, or add --force to move it to the trash "
            f"anyway (recoverable with {restore})"
        ) from exc
    _print_trigger(event)
    unlogged = engine.sessions.load_trashed(trash).unlogged_count
    if unlogged:
        print(
            f"memdeck: warning: {unlogged} message{'s' if unlogged != 1 else ''} not logged "
            f"stay in the trashed transcript; {restore} brings the session back",
            file=sys.stderr,
        )
    print(f"moved to {trash}")
    return 0


# -- consolidate --


def _configure_consolidate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--days",
        type=int,
        default=None,
        metavar="N",
        help="read the daily logs of the last N days (default: since the last consolidation, "
        "at most consolidate_max_days)",
    )
    parser.add_argument("--yes", action="store_true", help="apply the proposal without asking")
    parser.add_argument("--json", action="store_true", help="print the proposal as JSON")
    _add_llm_flags(parser)


def _ask_apply() -> bool:
    print("Apply? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _print_proposal(proposal: Proposal) -> None:
    if proposal.unchanged:
        print("MEMORY.md is already consolidated: no changes proposed")
    else:
        sys.stdout.write(proposal.diff)
    window = f"{proposal.window_start.isoformat()} to {proposal.window_end.isoformat()}"
    logs = len(proposal.sources)
    print(
        f"-- {proposal.stats.summary}; {logs} daily log{'s' if logs != 1 else ''} read ({window})",
        file=sys.stderr,
    )
    for note in proposal.notes:
        print(f"-- {note}", file=sys.stderr)


def _run_consolidate(args: argparse.Namespace) -> int:
    if args.days is not None:
        try:  # the same range as the setting it overrides
            check_setting("consolidate_max_days", args.days, "--days")
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    engine = _open(args, create=False)
    try:
        workbench = _workbench(args, engine)
        proposed = asyncio.run(workbench.propose_consolidation(days=args.days))
        if proposed.proposal is None:
            raise CliError(proposed.detail)
        proposal = proposed.proposal
        interactive = sys.stdin.isatty()
        if args.json:
            payload = proposal.to_json()
        else:
            _print_proposal(proposal)
        if args.yes:
            apply = True
        elif proposal.unchanged:
            apply = False
        elif not interactive or args.json:
            apply = False
            why = "stdin is not a terminal" if not interactive else "--json never asks"
            print(f"memdeck: not applied ({why}); run with --yes to apply", file=sys.stderr)
        else:
            apply = _ask_apply()
            if not apply:
                asyncio.run(
                    workbench.decide_consolidation(proposal, False, reason="declined at the prompt")
                )
                print("not applied; MEMORY.md is unchanged", file=sys.stderr)
        if apply:
            decided = asyncio.run(workbench.decide_consolidation(proposal, True))
            if decided.what == "failed":
                raise CliError(decided.detail)
            if not args.json:
                print(
                    "MEMORY.md updated and re-indexed" if decided.written else "nothing to write",
                    file=sys.stderr,
                )
        if args.json:
            payload["applied"] = apply
            print(json.dumps(payload, ensure_ascii=False))
        return 0
    finally:
        engine.close()


# -- usage --


def _configure_usage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=str, default=None, help="config file (prices)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _tokens(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def configured_workspace(args: argparse.Namespace) -> tuple[Config, Workspace]:
    """The config (``--config``) and the existing workspace (see
    :func:`~tui.chat.config.workspace_root`); a missing workspace is an error, never created."""
    from ..engine.workspace import Workspace

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc
    return config, Workspace.open(workspace_root(config, args.workspace), create=False)


def _run_usage(args: argparse.Namespace) -> int:
    from ..engine import usage

    config, workspace = configured_workspace(args)
    report = usage.summary(workspace.root, prices=config.prices)
    if args.json:
        print(json.dumps(report))
        return 0
    periods = (
        ("today", f"today ({report['date']})"),
        ("month", f"this month ({report['month_label']})"),
    )
    for period, title in periods:
        block = report[period]
        print(f"{title}:")
        if not block["rows"]:
            print("  no calls")
            continue
        for row in [*block["rows"], block["total"]]:
            label = "total" if row["purpose"] == "*" else f"{row['purpose']} · {row['model']}"
            unknown = f" ({row['unknown_calls']} without usage)" if row["unknown_calls"] else ""
            cost = f"  ${row['cost']:.4f}" if row["cost"] is not None else ""
            print(
                f"  {label:<40} {row['calls']:>5} calls  in {_tokens(row['prompt_tokens']):>10}"
                f"  out {_tokens(row['completion_tokens']):>9}{cost}{unknown}"
            )
    if report["skipped"]:
        print(_skipped_note(report["skipped"]), file=sys.stderr)
    return 0


def _skipped_note(skipped: int) -> str:
    lines = "line" if skipped == 1 else "lines"
    return f"memdeck: note: {skipped} unreadable {lines} of .memdeck/usage.jsonl skipped"


COMMANDS = {
    "ask": Command(
        "ask one question (streams the answer; tool calls on stderr)", _configure_ask, _run_ask
    ),
    "flush": Command(
        "log new messages of a session (or all) to the daily log now",
        _configure_flush,
        _run_flush,
    ),
    "sessions": Command(
        "list chat sessions (rename, delete, restore, export as Markdown)",
        _configure_sessions,
        _run_sessions,
    ),
    "usage": Command(
        "tokens (and cost, with [prices]) of today and this month per purpose and model",
        _configure_usage,
        _run_usage,
    ),
    "consolidate": Command(
        "propose an updated MEMORY.md from recent daily logs; show the diff",
        _configure_consolidate,
        _run_consolidate,
    ),
}
