"""Injection cost against the size of MEMORY.md (issue 16 D.16): a 100k-line file must cost at
most twice a 1k-line one (it took 5-8 s, 6.9 s of it counting tokens over lines that never fit).

    .venv/bin/python tests/bench/inject_size.py [--lines 1000,100000] [--runs 15]

A script, not a test: it prints its figures (median and best of ``--runs`` calls, the ratio to
the first size) and asserts nothing. Two measures per size: ``build_injection`` alone (the
packing over MEMORY.md's text) and ``MemoryEngine.inject`` whole, BM25 only (reading the file,
searching, packing: what the live preview does for every keystroke pause).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.engine.embeddings import count_tokens  # noqa: E402
from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.inject import build_injection  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402

TOPICS = ["garden", "bikes", "Rust", "Lisbon", "the dentist", "tea", "the cello", "bees"]
QUERY = "what did I decide about the garden and the bees?"


def memory_text(lines: int) -> str:
    """A MEMORY.md of ``lines`` entries, some with metadata, under a few headings."""
    out = ["# Long-term Memory", ""]
    for i in range(lines):
        if i % 500 == 0:
            out += ["", f"## Section {i // 500}"]
        topic = TOPICS[i % len(TOPICS)]
        meta = f" <!-- mem id=a{i:06x} conf=high src=user at=2026-11-01 -->" if i % 3 == 0 else ""
        out.append(f"- Fact {i}: the user mentioned {topic} while planning week {i % 52}{meta}")
    return "\n".join(out) + "\n"


def timed(call: Callable[..., object], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="1000,100000")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    sizes = [int(n) for n in args.lines.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs per figure")
    build_injection(memory_text(10), [], count_tokens)  # the tokenizer loads once
    baseline: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lines in sizes:
            text = memory_text(lines)
            pack = timed(lambda text=text: build_injection(text, [], count_tokens), args.runs)
            root = Path(tmp) / f"ws{lines}"
            workspace = Workspace.open(root)
            (root / "MEMORY.md").write_text(text, encoding="utf-8")
            engine = MemoryEngine(workspace)
            try:
                engine.sync(embed=False)
                engine.inject(QUERY)
                whole = timed(lambda engine=engine: engine.inject(QUERY), args.runs)
                injection = engine.inject(QUERY)
            finally:
                engine.close()
            for name, (median, best) in (("build_injection", pack), ("engine.inject", whole)):
                baseline.setdefault(name, median)
                ratio = median / baseline[name]
                print(
                    f"{lines:>7,} lines  {name:<16} median {median * 1000:8.1f} ms  "
                    f"best {best * 1000:8.1f} ms  x{ratio:4.2f} of {sizes[0]:,} lines"
                    + ("  (target <= x2)" if lines != sizes[0] else "")
                )
            print(
                f"{'':>14}packed {injection.report.memory_tokens:,} of ~"
                f"{injection.report.memory_total_tokens:,} MEMORY.md tokens, "
                f"{injection.report.tokens_used:,} / {injection.report.budget:,} used"
            )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
