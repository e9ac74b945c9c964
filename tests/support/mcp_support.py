"""Clients of a real ``memdeck mcp`` process (stdio): the SDK's, and one speaking raw JSON-RPC."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, ContentBlock, Implementation, TextContent
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


#: Only a safety net against a hung server (nothing is timed): the first call loads the model.
SAFETY_SECONDS = 240


class RawClient:
    """A ``memdeck mcp`` process spoken to in raw JSON-RPC lines (what a careless or hostile
    client can send, which the SDK's client never would) and the lines it answered, read by a
    thread. At the end of a ``with`` block a server still running is killed."""

    def __init__(self, workspace: Path, tmp_path: Path, **env: str) -> None:
        params = server_parameters(workspace, tmp_path)
        self.stderr_path = tmp_path / f"stderr-{id(self)}.txt"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**(params.env or {}), **env},
            cwd=params.cwd,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self.answers: dict[Any, dict[str, Any]] = {}
        self.unmatched: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send_line(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        data = line.encode("utf-8") if isinstance(line, str) else line
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message))

    def answer(self, request_id: Any) -> dict[str, Any]:
        """The answer with ``request_id`` (null: the next answer without an id)."""
        while True:
            for index, message in enumerate(self.unmatched):
                if message.get("id", "absent") == request_id:
                    return self.unmatched.pop(index)
            line = self._lines.get(timeout=SAFETY_SECONDS)
            assert line, f"the server ended: {self.stderr_path.read_text(errors='replace')}"
            message = json.loads(line)
            if "id" in message:  # notifications (log messages) are not answers
                self.unmatched.append(message)

    def request(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.answer(request_id)

    def initialize(self, name: str = "raw-agent") -> None:
        answer = self.request(
            "init",
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1"},
            },
        )
        assert "result" in answer, answer
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def start_call(self, request_id: Any, tool: str, arguments: dict[str, Any]) -> None:
        """Send a ``tools/call`` without waiting for its answer (see :meth:`answer`)."""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )

    def call(self, request_id: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request(request_id, "tools/call", {"name": tool, "arguments": arguments})

    def cancel(self, request_id: Any) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "changed my mind"},
            }
        )

    def close(self) -> int:
        """Close stdin (the client leaves) and wait for the exit code."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=SAFETY_SECONDS)
        self._stderr.close()
        return code

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def text_of(block: ContentBlock) -> str:
    """The text of an MCP content block that has to be text."""
    assert isinstance(block, TextContent), block
    return block.text


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content, which has to be there."""
    assert result.structuredContent is not None, result
    return result.structuredContent
