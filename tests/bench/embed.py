"""Embedding benchmark: load time, memory, query latency, bulk throughput.

Run with ``.venv/bin/python tests/bench/embed.py`` (not collected by pytest). Figures are
printed; they depend on the machine and on whatever else is running on it.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench_words import FILLER_WORDS

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui.engine.heap import tune_process  # noqa: E402

tune_process()  # as the app's entry point does, before numpy loads

from tui.engine.embeddings import Embedder, count_tokens, count_tokens_batch  # noqa: E402

CHUNK_TOKENS = (150, 200)  # production chunk size, in word-pieces
BULK_CHUNKS = 300
QUERY_RUNS = 50

_WORDS = FILLER_WORDS


# --------------------------------------------------------------------------- helpers


def _status(field: str) -> int:
    """A /proc/self/status field in kB (0 if unavailable)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_mb() -> float:
    """Current resident set size (VmRSS) in MB."""
    return _status("VmRSS") / 1024


@contextmanager
def peak_rss() -> Iterator[list[float]]:
    """Measure peak RSS (MB) inside the block; the value is in ``result[0]`` afterwards.

    Uses VmHWM after resetting it (Linux >= 4.0); elsewhere falls back to sampling VmRSS.
    """
    result = [0.0]
    try:  # writing 5 resets VmHWM to the current RSS
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        stop = threading.Event()
        samples = [rss_mb()]

        def sample() -> None:
            while not stop.wait(0.02):
                samples.append(rss_mb())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            yield result
        finally:
            stop.set()
            sampler.join()
            result[0] = max(samples)
        return
    try:
        yield result
    finally:
        result[0] = _status("VmHWM") / 1024


def make_chunks(n: int = BULK_CHUNKS, tokens: tuple[int, int] = CHUNK_TOKENS) -> list[str]:
    """``n`` deterministic note-like texts of ``tokens[0]``-``tokens[1]`` word-pieces each."""
    rng = random.Random(1234)
    chunks: list[str] = []
    while len(chunks) < n:
        target = rng.randint(*tokens)
        words: list[str] = []
        while count_tokens(" ".join(words)) < target:
            sentence = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
            sentence[0] = sentence[0].capitalize()
            words += sentence[:-1] + [sentence[-1] + "."]
        while count_tokens(" ".join(words)) > tokens[1]:
            words.pop()
        chunks.append(" ".join(words))
    return chunks


def raw_throughput(
    texts: Sequence[str],
    embedder: Embedder | None = None,
    batch_size: int = 32,
    max_batch_tokens: int | None = 512,
) -> float:
    """Model throughput in texts/s for embedding ``texts`` in one call (session preloaded)."""
    emb = embedder or Embedder(batch_size=batch_size, max_batch_tokens=max_batch_tokens)
    emb.load()
    start = time.perf_counter()
    emb.embed(texts)
    return len(texts) / (time.perf_counter() - start)


# --------------------------------------------------------------------------- sections


def bench_load() -> Embedder:
    """Cold load: onnxruntime import + sha256 check + tokenizer + session."""
    print(f"rss before load: {rss_mb():.0f} MB")
    t0 = time.perf_counter()
    import onnxruntime

    t1 = time.perf_counter()
    emb = Embedder()
    emb.load()
    t2 = time.perf_counter()
    print(f"onnxruntime {onnxruntime.__version__}, {os.cpu_count()} CPUs")
    print(
        f"cold load: {t2 - t0:.2f} s (import onnxruntime {t1 - t0:.2f} s, "
        f"sha256 + tokenizer + session {t2 - t1:.2f} s)"
    )
    print(f"rss after load: {rss_mb():.0f} MB")
    return emb


def bench_query(emb: Embedder) -> None:
    """Single short query latency."""
    queries = ["what is my dog called?", "dark mode preference", "train to lisbon", "postgres"]
    for q in queries:  # warm up
        emb.embed_query(q)
    times = []
    for i in range(QUERY_RUNS):
        start = time.perf_counter()
        emb.embed_query(queries[i % len(queries)])
        times.append((time.perf_counter() - start) * 1000)
    p50 = statistics.median(times)
    p95 = statistics.quantiles(times, n=20)[-1]
    print(f"query ({QUERY_RUNS} runs): p50 {p50:.1f} ms, p95 {p95:.1f} ms")


def bench_bulk(emb: Embedder) -> None:
    """Bulk throughput at batch 32 on production-size chunks, and peak RSS meanwhile."""
    texts = make_chunks()
    toks = [count_tokens(t) for t in texts]
    print(
        f"bulk: {len(texts)} chunks of {min(toks)}-{max(toks)} word-pieces "
        f"(mean {statistics.mean(toks):.0f})"
    )
    default_cap = emb.max_batch_tokens
    for cap in (default_cap, None):
        emb.max_batch_tokens = cap
        try:
            cpu = time.process_time()
            with peak_rss() as peak:
                rate = raw_throughput(texts, emb)
            cpu = time.process_time() - cpu
        finally:
            emb.max_batch_tokens = default_cap
        label = "default" if cap == default_cap else "no token cap"
        print(
            f"  batch {emb.batch_size}, max_batch_tokens {cap} ({label}): {rate:.1f} chunks/s "
            f"wall, {len(texts) / cpu:.1f} chunks per CPU-second, peak rss {peak[0]:.0f} MB"
        )


def bench_reindex(emb: Embedder, n_chunks: int) -> None:
    """``memdeck reindex`` over an ``n_chunks`` workspace vs the raw model on the same texts."""
    import tempfile

    from tui.engine.engine import MemoryEngine

    texts = make_chunks(n_chunks)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / "memory").mkdir(parents=True)
        per_day = 20
        for day in range(0, n_chunks, per_day):
            sections = [
                f"## Note {i}\n{texts[i]}\n" for i in range(day, min(day + per_day, n_chunks))
            ]
            date = f"2026-{1 + (day // per_day) // 28 % 12:02d}-{1 + (day // per_day) % 28:02d}"
            with (root / "memory" / f"{date}.md").open("a") as handle:
                handle.write("\n".join(sections))
        engine = MemoryEngine(root, embedder=emb)
        start = time.perf_counter()
        report = engine.reindex()
        reindex_seconds = time.perf_counter() - start
        embedded_texts = [row.text for row in engine.index.iter_chunks()]
        engine.close()
    chunks = len(embedded_texts)
    print(
        f"reindex: {chunks} chunks ({report.embedded} embedded) in {reindex_seconds:.1f}s "
        f"= {chunks / reindex_seconds:.1f} chunks/s"
    )
    start = time.perf_counter()
    emb.embed(texts[:chunks])
    raw_seconds = time.perf_counter() - start
    overhead = reindex_seconds / raw_seconds - 1
    print(f"raw model on the same texts: {raw_seconds:.1f}s = {chunks / raw_seconds:.1f} chunks/s")
    print(
        f"indexing overhead over the raw model: {overhead * 100:+.1f}%  (target <= 20%: "
        f"{'met' if overhead <= 0.20 else 'NOT met'})"
    )


def bench_entries_reindex(emb: Embedder, n_entries: int) -> None:
    """Reindex of an ``n_entries``-bullet daily-log workspace: 200-token windows (before issue 7)
    vs one unit per entry, embedded alone, the previous entry full-text indexed beside it (now;
    until issue 32 it was embedded with it too)."""
    import tempfile

    from tui.engine.chunker import ChunkParams, chunk_markdown
    from tui.engine.engine import MemoryEngine

    rng = random.Random(7)
    entries = [" ".join(rng.choices(_WORDS, k=rng.randint(12, 40))) for _ in range(n_entries)]
    for label, params in (
        ("windows 200/32 (before)", ChunkParams(200, 32, units=False)),
        ("units, the previous entry full-text only (now)", ChunkParams()),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ws"
            (root / "memory").mkdir(parents=True)
            per_day = 20
            for first in range(0, n_entries, per_day):
                day = first // per_day
                date = f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}"
                bullets = "".join(f"- {e}\n" for e in entries[first : first + per_day])
                with (root / "memory" / f"{date}.md").open("a") as handle:
                    handle.write(f"# {date}\n\n{bullets}\n")
            engine = MemoryEngine(root, embedder=emb, chunk_params=params)
            start = time.perf_counter()
            report = engine.reindex()
            seconds = time.perf_counter() - start
            chunks = engine.stats()["chunks"]
            engine.close()
            # The model alone on exactly the texts the index embedded: the floor for a reindex
            # with the same vectors (best batching; the rest is chunking, FTS and SQLite).
            texts = [
                chunk.embed_text
                for path in sorted((root / "memory").glob("*.md"))
                for chunk in chunk_markdown(
                    path.read_text(), f"memory/{path.name}", count_tokens_batch, params
                )
            ]
            start = time.perf_counter()
            emb.embed(texts)
            model_seconds = time.perf_counter() - start
        print(
            f"reindex of {n_entries} daily-log entries, {label}: {chunks} chunks "
            f"({report.embedded} embedded) in {seconds:.1f} s; the model alone on the same "
            f"{len(texts)} texts {model_seconds:.1f} s ({model_seconds / seconds:.0%} of it)"
        )


def bench_helper(emb: Embedder) -> None:
    """The same model in the app's helper process: start time, query latency with the pipe
    round trip, the helper's RSS, and whether its vectors equal the in-process ones."""
    from tui.engine.embed_helper import HelperEmbedder

    helper = HelperEmbedder(idle_exit=None)
    try:
        start = time.perf_counter()
        helper.load()
        print(
            f"helper process: started and loaded in {time.perf_counter() - start:.2f} s, "
            f"this process {rss_mb():.0f} MB, the helper {helper.helper_rss_mb():.0f} MB"
        )
        print("helper ", end="")
        bench_query(helper)
        texts = make_chunks(64)
        same = bool((helper.embed(texts) == emb.embed(texts)).all())
        print(f"helper vectors identical to in-process (64 chunks): {same}")
        print(f"helper RSS after 64 chunks: {helper.helper_rss_mb():.0f} MB")
    finally:
        helper.close()


def main() -> None:
    """Run every section in order (``EMBED_BENCH=query,helper`` runs only those)."""
    only = set(filter(None, os.environ.get("EMBED_BENCH", "").split(",")))
    emb = bench_load()
    bench_query(emb)
    if not only or "helper" in only:
        bench_helper(emb)
    if only:
        return
    bench_bulk(emb)
    bench_reindex(emb, int(os.environ.get("REINDEX_CHUNKS", "2000")))
    bench_entries_reindex(emb, int(os.environ.get("REINDEX_ENTRIES", "2000")))


if __name__ == "__main__":
    main()
