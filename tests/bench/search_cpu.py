"""CPU time of one default search on one real conversation's memory (LoCoMo, dev split).

    .venv/bin/python tests/bench/search_cpu.py [--conversation conv-44] [--rounds 3]

A script, not a test: it prints its figures and asserts nothing (the load average is printed).

The conversation's sessions become daily logs (``tests/bench/locomo.py``'s workspace: about 700
entries over some 30 logs), the model is loaded in-process as ``memdeck search`` loads it, and
each of the conversation's questions is searched at the shipped defaults. Per search: CPU time
(user + sys, all of the process's threads, ``time.process_time``) and wall time, and the same
for the query embedding alone, and for ``search()`` given the query's vector (what is left
without the model). Start-up is excluded. Target (issues #21, #33): at most 12 ms of CPU per
default search, wall time not worse.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path[:1]:
    sys.path.insert(0, str(REPO))

TARGET_CPU_MS = 12.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--conversation", default="conv-44")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the questions")
    args = parser.parse_args(argv)

    from tui.engine.heap import tune_process

    tune_process()  # before numpy loads (locomo imports it), as the entry point does

    from locomo import DEFAULT_DATA, load_conversations, write_workspace

    from tui.engine.embeddings import Embedder
    from tui.engine.engine import MemoryEngine
    from tui.engine.search import search

    conv = next(c for c in load_conversations(DEFAULT_DATA) if c.sample_id == args.conversation)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        embedder = Embedder()
        engine = MemoryEngine(Path(tmp), embedder=embedder)
        try:
            write_workspace(engine, conv)
            engine.load_model()
            engine.sync()
            entries = engine.stats()["chunks"]
            questions = [q.text for q in conv.questions]
            for text in questions[:10]:  # warm: the mirror, caches, the model's first runs
                engine.search(f"warm {text}", now=conv.now)
            cpu, wall, embed_cpu, embed_wall, rest_cpu, rest_wall = [], [], [], [], [], []
            for round_ in range(args.rounds):
                for text in questions:
                    text = f"{text} ({round_})"  # never the same question twice (kept vectors)
                    c, t = time.process_time(), time.perf_counter()
                    engine.search(text, now=conv.now)
                    cpu.append(time.process_time() - c)
                    wall.append(time.perf_counter() - t)
                    c, t = time.process_time(), time.perf_counter()
                    vector = embedder.embed_query(f"{text}?")
                    embed_cpu.append(time.process_time() - c)
                    embed_wall.append(time.perf_counter() - t)
                    options = engine.search_options
                    c, t = time.process_time(), time.perf_counter()
                    search(engine.index, text, vector, options, now=conv.now)
                    rest_cpu.append(time.process_time() - c)
                    rest_wall.append(time.perf_counter() - t)
        finally:
            engine.close()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f}"

    print(
        f"{args.conversation}: {entries} entries in {len(conv.sessions)} daily logs, "
        f"{len(cpu)} searches ({len(questions)} questions × {args.rounds})"
    )
    print(f"  default search:        CPU p50 {ms(cpu)} ms, wall p50 {ms(wall)} ms")
    print(f"  query embedding alone: CPU p50 {ms(embed_cpu)} ms, wall p50 {ms(embed_wall)} ms")
    print(f"  search() given vector: CPU p50 {ms(rest_cpu)} ms, wall p50 {ms(rest_wall)} ms")
    worst = statistics.median(cpu) * 1000
    print(
        f"  target: CPU per default search <= {TARGET_CPU_MS:.0f} ms: "
        f"{'MET' if worst <= TARGET_CPU_MS else 'MISSED'}"
    )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
