"""Tool-call argument assembly: memdeck's cost on top of the ``openai`` client's own parsing.

    .venv/bin/python tests/bench/tool_args.py [--sizes 1 2 4] [--runs 1]

A script, not a test: it prints its figures with the targets beside them and asserts nothing.
The machine may be shared: the load average is printed at the start and the end.

For each size N (MB), the loopback fake OpenAI server (``tests/support/fakeopenai.py``, run as its own
process as a real server would be, so the two do not share a GIL) streams one ``save_memory``
call whose arguments are N MB, in 8-character fragments (one SSE event each, as OpenAI streams
them). Two clients read the same stream:

* **openai parsing** — the ``openai`` AsyncOpenAI client iterated directly, touching each
  fragment's ``function.arguments`` and keeping nothing: the floor, what any client pays.
* **memdeck** — :meth:`tui.chat.client.LLMClient.stream_chat` (the same SDK, plus memdeck's
  assembly of the fragments into one :class:`AssembledToolCall`), with
  ``max_tool_argument_chars`` raised to 16 MiB so nothing is refused.

Both are timed as the client process's CPU time (the server is another process, so its work and
the network pacing drop out; this machine may be shared) and as wall time. "assembly" is the
CPU difference (target: under 10 % of the parsing time), and µs/KB shows that both grow
linearly with the size. The best of ``--runs`` is kept for each. A last line times
the assembly alone, in memory, on the 1 MB fragments: memdeck's list-and-join against the
``+=`` on a string held in a dict that it replaced (quadratic: 1.6 MB took 49 s in a turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# Run as a script, this file's folder comes first on sys.path, where the sibling tui.py would
# shadow the ``tui`` package: drop it, then add the repository and tests/ (fakeopenai).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path[:0] = [str(_HERE.parents[1]), str(_HERE.parent)]

from tui.chat.client import LLMClient, StreamEnd, _add_fragment  # noqa: E402
from tui.chat.config import load_config  # noqa: E402

MB = 1_000_000
FRAGMENT = 8


def arguments_of(size: int) -> str:
    """A JSON object of about ``size`` characters (one string argument)."""
    filler = "memdeck remembers. " * (size // 19 + 1)
    return '{"content": "' + filler[: size - 15] + '"}'


class ServerProcess:
    """``tests/support/fakeopenai.py`` in its own process; replies are queued over HTTP."""

    def __init__(self) -> None:
        script = Path(__file__).resolve().parent.parent / "support" / "fakeopenai.py"
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()

    def enqueue(self, arguments: str) -> None:
        reply = {"tool_calls": [{"name": "save_memory", "arguments": arguments, "id": "call_b"}]}
        root = self.base_url.removesuffix("/v1")
        request = urllib.request.Request(
            f"{root}/_fake/replies",
            data=json.dumps([reply]).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=60).read()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


async def openai_parsing(base_url: str) -> tuple[tuple[float, float], int]:
    """(wall, CPU) seconds to read the stream with the bare SDK, and the characters seen."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    started, cpu = time.perf_counter(), time.process_time()
    seen = 0
    stream = await client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "go"}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                if call.function is not None and call.function.arguments:
                    seen += len(call.function.arguments)
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    await client.close()
    return elapsed, seen


async def memdeck_assembly(base_url: str) -> tuple[tuple[float, float], int]:
    """(wall, CPU) seconds to read and assemble the stream with memdeck's client, and the size
    assembled."""
    config = load_config(
        Path("/nonexistent/memdeck-bench.toml"),
        env={"OPENAI_BASE_URL": base_url, "MEMDECK_MODEL": "fake-model"},
        overrides={
            "max_retries": 0,
            "request_timeout": 600.0,
            "max_tool_argument_chars": 16_777_216,
            "stream_usage": False,
        },
    )
    llm = LLMClient(config.llm)
    started, cpu = time.perf_counter(), time.process_time()
    size = 0
    async for piece in llm.stream_chat([{"role": "user", "content": "go"}]):
        if isinstance(piece, StreamEnd):
            size = len(piece.tool_calls[0].arguments)
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    await llm.async_client().close()
    return elapsed, size


def best(
    runs: int,
    server: ServerProcess,
    arguments: str,
    measure: Callable[[str], Coroutine[Any, Any, tuple[tuple[float, float], int]]],
) -> tuple[float, float, int]:
    """The lowest wall and CPU seconds of ``runs`` measurements, and the size read."""
    walls, cpus, sizes = [], [], set()
    for _ in range(runs):
        server.enqueue(arguments)
        (wall, cpu), size = asyncio.run(measure(server.base_url))
        walls.append(wall)
        cpus.append(cpu)
        sizes.add(size)
    assert len(sizes) == 1, sizes
    return min(walls), min(cpus), sizes.pop()


def in_memory(arguments: str) -> tuple[float, float]:
    """Assembly alone on the fragments of ``arguments``: memdeck's, then the old ``+=``."""
    fragments = [
        SimpleNamespace(
            index=0, id=None, function=SimpleNamespace(name=None, arguments=arguments[i : i + 8])
        )
        for i in range(0, len(arguments), FRAGMENT)
    ]
    started = time.perf_counter()
    calls: dict[int, Any] = {}
    for fragment in fragments:
        _add_fragment(calls, fragment, 16_777_216)
    assert calls[0].assembled("x").arguments == arguments
    new = time.perf_counter() - started
    started = time.perf_counter()
    old: dict[int, dict[str, str]] = {}
    for fragment in fragments:
        call = old.setdefault(0, {"id": "", "name": "", "arguments": ""})
        call["arguments"] += fragment.function.arguments or ""
    assert old[0]["arguments"] == arguments
    return new, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4], help="MB")
    parser.add_argument("--runs", type=int, default=1, help="best of this many per figure")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(
        f"{'size':>6} {'fragments':>10} | {'openai parsing':>15} {'memdeck':>9} "
        f"{'assembly':>9} {'share':>7} | {'µs/KB parse':>11} {'µs/KB memdeck':>13} "
        f"| wall: parse, memdeck"
    )
    server = ServerProcess()
    try:
        for megabytes in args.sizes:
            arguments = arguments_of(int(megabytes * MB))
            parse_wall, parse, seen = best(args.runs, server, arguments, openai_parsing)
            ours_wall, ours, size = best(args.runs, server, arguments, memdeck_assembly)
            assert seen == size == len(arguments), (seen, size, len(arguments))
            extra = ours - parse
            kb = len(arguments) / 1000
            print(
                f"{megabytes:>4g}MB {len(arguments) // FRAGMENT:>10,} | {parse:>13.2f}s "
                f"{ours:>8.2f}s {extra:>+8.2f}s {extra / parse:>+7.1%} | "
                f"{parse / kb * 1e6:>11.0f} {ours / kb * 1e6:>13.0f} | "
                f"{parse_wall:.2f}s, {ours_wall:.2f}s",
                flush=True,
            )
    finally:
        server.stop()
    new, old = in_memory(arguments_of(MB))
    print(
        f"assembly alone, 1 MB in memory: list+join {new * 1000:.0f} ms, "
        f"old `+=` in a dict {old * 1000:.0f} ms"
    )
    print(
        "CPU seconds of the client process; target: assembly under +10% of openai parsing, µs/KB flat"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
