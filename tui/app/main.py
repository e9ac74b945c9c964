"""``memdeck`` with no subcommand: open the terminal UI."""

from __future__ import annotations

import argparse
import sys

from tui.chat.chat import ChatEngine
from tui.chat.config import ConfigError, config_path, load_config


def run_app(args: argparse.Namespace) -> int:
    """Open the workspace (``args.workspace``, else the config's) and run the app until quit."""
    from tui.app.app import MemdeckApp

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        print(f"memdeck: error: {exc}", file=sys.stderr)
        return 2
    engine = ChatEngine.open(config, workspace=getattr(args, "workspace", None))
    app = MemdeckApp(engine, config_file=config.source or config_path())
    try:
        app.run()
    finally:
        if not app.quit_flush_pending:
            engine.close()
    if app.quit_flush_pending:
        print(
            "memdeck: the memory flush is still running; it finishes before the process ends "
            "(ctrl+c abandons it; it is picked up again at the next start)",
            file=sys.stderr,
        )
    return app.return_code or 0
