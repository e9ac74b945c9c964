"""``memdeck mcp``: the workspace's memory as an MCP server on stdin/stdout (see
:mod:`tui.serve.mcp_server`). The SDK is imported only by this command."""

from __future__ import annotations

import argparse

from .chat import configured_workspace
from .registry import Command


def _configure_mcp(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=None,
        help="config file (default: $MEMDECK_CONFIG or the platform config dir)",
    )


def _run_mcp(args: argparse.Namespace) -> int:
    # A typo in a client's configuration must not serve an empty memory: the workspace exists.
    config, workspace = configured_workspace(args)
    from ..serve.mcp_server import serve

    serve(config, workspace.root)
    return 0


COMMANDS = {
    "mcp": Command(
        "serve this workspace's memory to other agents over MCP (stdio)", _configure_mcp, _run_mcp
    ),
}
