"""The SDK's real MCP client connected to a real ``memdeck mcp`` process (stdio)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation
from support.chat_support import ROOT, memdeck_env


def server_parameters(workspace: Path, tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "import sys; from tui.main import main; sys.exit(main())",
            "--workspace",
            str(workspace),
            "mcp",
        ],
        env=memdeck_env(None, tmp_path, PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )


@asynccontextmanager
async def connected(workspace: Path, tmp_path: Path) -> AsyncIterator[ClientSession]:
    """A client session with a ``memdeck mcp`` process, initialised."""
    errlog = (tmp_path / "server-stderr.txt").open("w")
    try:
        async with (
            stdio_client(server_parameters(workspace, tmp_path), errlog=errlog) as (read, write),
            ClientSession(
                read, write, client_info=Implementation(name="test-agent", version="9.1")
            ) as session,
        ):
            await session.initialize()
            yield session
    finally:
        errlog.close()
