"""memdeck mcp start-up: how long from spawning ``memdeck mcp`` to the answer of ``initialize``,
and to the first search (engine opened, model loaded), over N starts.

Run with ``.venv/bin/python tests/bench/mcp_start.py [--runs 10]`` (not collected by pytest).
Raw JSON-RPC lines over the process's pipes, so the figure is the server's, not a client
library's. Beside it, the same measure for a bare ``python -c 'import mcp.server.lowlevel'``
(the SDK's own import, the floor of any server built on it). Figures depend on the machine
and on whatever else runs on it; the target is initialize within 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEMORY = "# Long-term Memory\n\n- The deploy procedure for prod is: tag, wait for CI, deploy.sh\n"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
SEARCH = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "memory_search", "arguments": {"query": "deploy procedure"}},
}


def one_start(workspace: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds to the initialize answer and to the first search's answer."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "tui", "--workspace", str(workspace), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
        text=True,
    )
    assert server.stdin and server.stdout
    try:
        server.stdin.write(json.dumps(INITIALIZE) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        initialized = time.perf_counter() - started
        assert answer["result"]["serverInfo"]["name"] == "memdeck", answer
        server.stdin.write(json.dumps(INITIALIZED) + "\n" + json.dumps(SEARCH) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        searched = time.perf_counter() - started
        assert answer["result"]["structuredContent"]["results"], answer
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    return initialized, searched


def sdk_import() -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import mcp.server.lowlevel, mcp.server.stdio"], check=True
    )
    return time.perf_counter() - started


def summary(name: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
    return (
        f"{name:<28} p50 {statistics.median(values) * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms"
        f"   min {values[0] * 1000:6.0f} ms   max {values[-1] * 1000:6.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="memdeck-mcp-bench-"))
    try:
        workspace = scratch / "ws"
        (workspace / "memory").mkdir(parents=True)
        (workspace / "MEMORY.md").write_text(MEMORY)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMDECK_", "OPENAI_"))}
        env["MEMDECK_CONFIG"] = str(scratch / "no-config.toml")
        env["PYTHONPATH"] = str(ROOT)
        one_start(workspace, env)  # the index is built and the page cache warm
        starts, imports = [], []
        for _ in range(args.runs):  # interleaved: the same load for both
            starts.append(one_start(workspace, env))
            imports.append(sdk_import())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"memdeck mcp start-up, {args.runs} starts (load {os.getloadavg()[0]:.2f})")
    print(summary("initialize answered", [s[0] for s in starts]))
    print(summary("first search answered", [s[1] for s in starts]))
    print(summary("SDK import alone", imports))


if __name__ == "__main__":
    main()
