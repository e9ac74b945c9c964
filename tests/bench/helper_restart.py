"""The first turn after the embedding helper exited idle: how long its memory search waits.

    .venv/bin/python tests/bench/helper_restart.py [--runs 5] [--typing 1.5]

A script, not a test: it prints its figures and asserts nothing (the load average is printed).

The helper (``[embeddings] process = "helper"``, the app's default) exits after ``idle_exit``
seconds without work; the next embedding starts it again. Two ways to reach the first turn:

* **turn only** — nothing warms the helper: the turn's injection (``engine.inject``, the
  search a turn makes, waiting for the model) starts it and waits.
* **typed first** (the app) — the live preview of the draft at the first keystroke
  (``engine.inject(..., wait_for_model=False)``) answers BM25-only at once and starts the
  helper in the background; the turn comes ``--typing`` seconds later, when the message is sent.

Each figure is the time of the turn's injection alone, p50 and max over ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.engine.embed_helper import HelperEmbedder

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path[:1]:
    sys.path.insert(0, str(REPO))

MEMORY = """# Memory

- Deploys go through the staging cluster first, then prod after a smoke test
- Standup is at 10:30 so the Toronto folks can join
- Uses Zed as the editor, with the Vim keybindings
"""
QUESTION = "what is the deploy procedure for prod?"
NOW = date(2026, 11, 25)
#: Seconds before the helper exits idle: longer than the typing (the app's default is 60 s).
IDLE_EXIT = 3.0


def wait_for_idle_exit(embedder: HelperEmbedder) -> None:
    deadline = time.monotonic() + 30
    while embedder.ready_now:
        if time.monotonic() > deadline:
            raise SystemExit("the helper did not exit idle within 30 s")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--typing", type=float, default=1.5, help="seconds from first key to send")
    args = parser.parse_args(argv)

    from tui.engine.embed_helper import HelperEmbedder
    from tui.engine.engine import MODEL_STARTING, MemoryEngine

    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
        embedder = HelperEmbedder(idle_exit=IDLE_EXIT)
        engine = MemoryEngine(root, embedder=embedder)
        try:
            engine.load_model()
            engine.sync()
            figures: dict[str, list[float]] = {"turn only": [], "typed first": []}
            for run in range(args.runs):
                for way, seconds in figures.items():
                    # A question not asked before: a repeated one needs no model (kept vectors).
                    question = f"{QUESTION} ({way}, {run})"
                    wait_for_idle_exit(embedder)
                    if way == "typed first":
                        preview = engine.inject(question[:4], now=NOW, wait_for_model=False)
                        if MODEL_STARTING not in preview.report.notes:
                            raise SystemExit("the preview did not start the helper")
                        time.sleep(args.typing)
                    start = time.perf_counter()
                    injection = engine.inject(question, now=NOW)
                    seconds.append(time.perf_counter() - start)
                    if not injection.results or injection.results[0].breakdown.vector is None:
                        raise SystemExit("the turn's search was not hybrid")
            for way, seconds in figures.items():
                print(
                    f"first turn after an idle exit, {way:<11}: memory search p50 "
                    f"{statistics.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms"
                    f" ({args.runs} runs{'' if way == 'turn only' else f', sent {args.typing} s after the first key'})"
                )
            print(f"helper starts: {embedder.starts}")
        finally:
            engine.close()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
