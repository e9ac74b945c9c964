"""``memdeck`` with no subcommand: open the terminal UI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tui.chat.config import Config, ConfigError, config_path, load_config
from tui.engine.visible import visible_text

if TYPE_CHECKING:
    from tui.chat.chat import ChatEngine


def run_app(args: argparse.Namespace) -> int:
    """Open the workspace (``args.workspace``, else the config's) and run the app until quit.

    Only the config is read before the first frame; the engine is opened by the app in a
    thread right after it (see :class:`tui.app.app.MemdeckApp`).
    """
    from tui.app.app import MemdeckApp

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        print(visible_text(f"memdeck: error: {exc}"), file=sys.stderr)
        return 2
    workspace = getattr(args, "workspace", None)
    app = MemdeckApp(
        config=config,
        open_engine=lambda: open_engine(config, workspace),
        config_file=config.source or config_path(),
    )
    try:
        app.run()
    finally:
        engine = app.opened_engine
        if engine is not None and not app.quit_flush_pending:
            engine.close()
    if app.quit_flush_pending:
        print(
            "memdeck: the memory flush is still running; it finishes before the process ends "
            "(ctrl+c abandons it; it is picked up again at the next start)",
            file=sys.stderr,
        )
    from tui.app.quit_report import quit_flush_problems

    for line in quit_flush_problems(app.quit_flush_events):
        print(visible_text(line), file=sys.stderr)
    return app.return_code or 0


def open_engine(config: Config, workspace: Path | None) -> ChatEngine:
    """The chat engine over ``workspace`` (imported here: it pulls numpy and the tokenizer)."""
    from tui.chat.chat import ChatEngine
    from tui.engine.history_records import Attribution

    engine = ChatEngine.open(config, workspace=workspace, resident=True)
    engine.memory.attribution = Attribution("editor")  # what the app writes, the user asked
    return engine
