"""Search benchmark: hybrid latency, KNN recall and speed, and the naive seed design, in one run.

The naive design is the search of ``../shared/seeds/rfc-013-agent-memory-system.txt`` (RFC-013
below): every row read from SQLite, BM25 in Python, cosine per row.

    .venv/bin/python tests/bench/search.py [--sizes 10000,100000] [--queries 200]
        [--blas-threads N] [--keep]          (--help lists the rest)

A script, not a test: it prints its figures with the targets beside them and asserts nothing.
The machine is shared: the load average is printed at the start and the end; read the
figures with it.

Per corpus size:

* A workspace of Markdown daily logs over two years (``memory/YYYY-MM-DD.md``, plus
  ``memory/YYYY/YYYY-MM-DD-partN.md`` when a day has several files) and a ``MEMORY.md``:
  headed sections of bullets and paragraphs (some with ``<!-- mem ... -->`` metadata) of
  ~100-155 words. Words follow a Zipf-Mandelbrot law over the ~21.7k whole English words of the
  model's WordPiece vocabulary ranked by id, which tracks English frequency ("the", "of", "and",
  "in", "to", "a", "was", "he", "is", ...). Each block quotes a real sentence, an "anchor"
  (LoCoMo turns from ``../shared/data/locomo``, evidence turns first; generated sentences when
  absent), and leans on that anchor's topic words.
* Vectors are synthetic but shaped like real ones: the anchors are embedded with the real
  model; a chunk's vector is the normalised mix of the anchors it quotes, a shared "style"
  direction (the mean real embedding of filler text: real embeddings are not centred) and noise
  drawn mostly from the anchors' own anisotropic span. A check prints their statistics beside
  real embeddings of sampled chunks.
* They enter the index through the production path: ``MemoryIndex.sync(embed=False)`` chunks
  and stores the files; the ``embedding_cache`` is filled (model fingerprint, sha256 of each
  chunk's ``embed_text``, the key ``embed_pending`` joins on); ``MemoryIndex.sync()`` then finds
  every vector in the cache and stores it into sqlite-vec. Its embedder refuses to embed, so a
  cache-key mismatch fails loudly instead of running the model for hours.
* ``MemoryEngine.search`` (model loaded, query embedding included) over the queries: common-word
  sentences, real questions (LoCoMo), topic words, quoted phrases; then each stage of
  ``search()`` timed alone; FTS5 query shapes (production, hidden ``rank``, terms pruned by
  document frequency); KNN recall@24 of the mirror vs exact on three query sets, latency of
  mirror, exact numpy and vec0, and other pre-selections (more sign-bit rescoring, PCA).
* At the first size, the naive RFC-013 search (every row from SQLite, Python BM25, per-row
  cosine), as the RFC writes it and a kinder port, over some of the same queries.

Everything lives in a temp dir removed at exit (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import math
import os
import re
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar, cast

# First: BLAS pinned to one thread before numpy loads, as the app's entry point does.
importlib.import_module("tui.engine.heap").tune_process()

import numpy as np  # noqa: E402

from tui.engine.chunker import ChunkParams, chunk_markdown, embed_text  # noqa: E402
from tui.engine.embeddings import (  # noqa: E402
    Embedder,
    TextEmbedder,
    count_tokens_batch,
    load_tokenizer,
)
from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.fileio import sha256_text  # noqa: E402
from tui.engine.index import MemoryIndex  # noqa: E402
from tui.engine.index_db import connect  # noqa: E402
from tui.engine.search import search  # noqa: E402
from tui.engine.textsearch import build_match_query, query_terms  # noqa: E402
from tui.engine.vectors import EXACT_BELOW  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"

#: Hybrid search (query embedding included) p50 / p95 targets per size, ms (issue #21).
TARGET_P50_MS = {10_000: 10.0, 100_000: 30.0}
TARGET_P95_MS = {10_000: 25.0, 100_000: 60.0}
#: Merge and scoring (search() minus FTS and KNN) p50 at 10k, ms.
TARGET_MERGE_P50_MS = 3.0
TARGET_RECALL = 0.99
TARGET_RATIO = 50.0
K = 24
FIRST_DAY = date(2024, 1, 1)
DAYS = 730
NOW = FIRST_DAY + timedelta(days=DAYS)
BLOCKS_PER_FILE = 20
N_ANCHORS = 400
SEED = 20240101
#: FTS alternative measured here: query terms found in more than this share of chunks are dropped.
PRUNE_DF = 0.05
#: The naive RFC-013 search runs at the first size up to this (it reads every row per query).
NAIVE_MAX = 20_000

# Common English words that are not in the engine's stop list: they sit at the top of the
# Zipf ranking and each occurs in a large share of chunks.
COMMON_QUERIES = [
    "what is the plan for the project and the team",
    "what did we say about the time and the work",
    "how is the new work going with the people",
    "what are the first things to do this year",
    "is there any news about the city and the school",
    "who said that the team would work on it again",
    "when did we talk about the family and the house",
    "what was the right way to do the work",
    "the people said they would like to know more",
    "what did the man say about the new house",
]


# --------------------------------------------------------------------------- small helpers


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: Sequence[float]) -> list[float]:
    return [s * 1000 for s in seconds]


def rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) in MB."""
    current = float("nan")
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return current, peak


def load() -> str:
    """The 1/5/15-minute load averages: other jobs on this shared 2-core machine skew timings."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def timed(fn: Callable[..., T]) -> tuple[float, T]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def say(*parts: object) -> None:
    print(*parts, flush=True)


# --------------------------------------------------------------------------- text


@dataclass
class Vocabulary:
    words: np.ndarray  # object array, rank order
    cdf: np.ndarray

    @classmethod
    def from_model(cls, s: float = 1.0, q: float = 2.7) -> Vocabulary:
        """Whole words of the model's WordPiece vocabulary in id order (≈ English frequency)."""
        vocab = load_tokenizer().get_vocab()
        ranked = [
            w for _, w in sorted((i, w) for w, i in vocab.items() if re.fullmatch("[a-z]{2,}", w))
        ]
        ranked[5:5] = [
            "a"
        ]  # single letters sit apart in the vocabulary: put them where they belong
        ranked[12:12] = ["i"]
        words = np.array(ranked, dtype=object)
        weights = 1.0 / (np.arange(len(words)) + 1 + q) ** s
        cdf = np.cumsum(weights)
        return cls(words, cdf / cdf[-1])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.searchsorted(self.cdf, rng.random(n))


def sentences(words: list[str], rng: np.random.Generator) -> str:
    """Shape a word list into sentences: capitals, commas, full stops."""
    out: list[str] = []
    i = 0
    while i < len(words):
        n = int(rng.integers(6, 19))
        part = words[i : i + n]
        if len(part) > 8 and rng.random() < 0.4:
            cut = int(rng.integers(3, len(part) - 3))
            part[cut] += ","
        part[0] = part[0].capitalize()
        out.append(" ".join(part) + ".")
        i += n
    return " ".join(out)


# --------------------------------------------------------------------------- anchors


def anchor_sentences(vocab: Vocabulary, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """A few hundred real sentences and real questions about them.

    From LoCoMo when present: every turn that is evidence for a question (categories 1-4), then
    other turns, and the questions themselves. Otherwise Zipf sentences and no questions.
    """
    evidence: list[str] = []
    others: list[str] = []
    questions: list[str] = []
    if LOCOMO.is_file():
        for conv in json.loads(LOCOMO.read_text(encoding="utf-8")):
            turns = {
                turn["dia_id"]: " ".join(turn.get("text", "").split())
                for key, session in conv["conversation"].items()
                if key.startswith("session_") and isinstance(session, list)
                for turn in session
            }
            wanted: set[str] = set()
            for qa in conv["qa"]:
                if qa.get("category") in (1, 2, 3, 4):
                    questions.append(qa["question"])
                    for ev in qa.get("evidence", []):
                        wanted.update(e.strip() for e in str(ev).split(";"))
            evidence += [turns[d] for d in sorted(wanted) if turns.get(d)]
            others += [
                t for d, t in turns.items() if d not in wanted and 10 <= len(t.split()) <= 40
            ]
    texts = sorted(set(evidence))[:N_ANCHORS]
    rest = sorted(set(others) - set(texts))
    if rest and len(texts) < N_ANCHORS:
        picked = rng.choice(len(rest), min(len(rest), N_ANCHORS - len(texts)), replace=False)
        texts += [rest[i] for i in sorted(picked)]
    texts += [
        sentences(vocab.words[vocab.sample(rng, 16)].tolist(), rng)
        for _ in range(N_ANCHORS - len(texts))
    ]
    return texts, questions


@dataclass
class Anchors:
    texts: list[str]
    vectors: np.ndarray  # (n, d) unit: real embeddings of the sentences
    topics: list[np.ndarray]  # per anchor: vocabulary ranks of its topic words
    basis: np.ndarray  # centred anchors: noise drawn from their (anisotropic) span
    style: np.ndarray  # unit: mean real embedding of Zipf filler paragraphs
    questions: list[str]  # real questions whose evidence the anchors quote (LoCoMo)


def build_anchors(embedder: Embedder, vocab: Vocabulary, rng: np.random.Generator) -> Anchors:
    texts, questions = anchor_sentences(vocab, rng)
    vectors = embedder.embed(texts)
    topics = [rng.integers(150, min(len(vocab.words), 12_000), 25) for _ in texts]
    filler = embedder.embed(
        [sentences(vocab.words[vocab.sample(rng, 140)].tolist(), rng) for _ in range(16)]
    )
    style = filler.mean(axis=0)
    return Anchors(
        texts,
        vectors,
        topics,
        vectors - vectors.mean(axis=0),
        style / np.linalg.norm(style),
        questions,
    )


# --------------------------------------------------------------------------- corpus


@dataclass
class Corpus:
    root: Path
    n_files: int = 0
    words: int = 0
    blocks: int = 0
    #: per file: the anchor mixture of each line (0-based), None for lines quoting none
    line_mix: dict[str, list[dict[int, float] | None]] = field(default_factory=dict)
    seconds: float = 0.0


def _block(
    anchors: Anchors, vocab: Vocabulary, rng: np.random.Generator, short: bool
) -> tuple[str, dict[int, float]]:
    """One bullet or paragraph: a quoted anchor sentence (or two) and topical Zipf filler."""
    primary = int(rng.integers(len(anchors.texts)))
    mix = {primary: 1.0}
    parts = [anchors.texts[primary]]
    if not short and rng.random() < 0.4:
        second = int(rng.integers(len(anchors.texts)))
        mix[second] = mix.get(second, 0.0) + 0.5
        parts.append(anchors.texts[second])
    used = sum(len(p.split()) for p in parts)
    total = int(rng.integers(30, 60)) if short else int(rng.integers(100, 156))
    n = max(8, total - used)
    ranks = vocab.sample(rng, n)
    topical = rng.random(n) < 0.15
    ranks[topical] = rng.choice(anchors.topics[primary], int(topical.sum()))
    pieces = [*parts, sentences(vocab.words[ranks].tolist(), rng)]
    return " ".join(pieces[i] for i in rng.permutation(len(pieces))), mix


def _markdown_file(
    title: str,
    day: date,
    anchors: Anchors,
    vocab: Vocabulary,
    rng: np.random.Generator,
    n_blocks: int,
) -> tuple[str, list[dict[int, float] | None]]:
    """A daily log (or MEMORY.md): sections of bullets and paragraphs, some with metadata."""
    lines = [f"# {title}", ""]
    per_line: list[dict[int, float] | None] = [None, None]
    blocks = 0
    while blocks < n_blocks:
        topic = anchors.topics[int(rng.integers(len(anchors.texts)))]
        heading = " ".join(w.capitalize() for w in vocab.words[rng.choice(topic, 2)].tolist())
        lines += [f"## {heading}", ""]
        per_line += [None, None]
        for _ in range(min(n_blocks - blocks, int(rng.integers(2, 7)))):
            text, mix = _block(anchors, vocab, rng, short=rng.random() < 0.2)
            if rng.random() < 0.75:
                text = "- " + text
                if rng.random() < 0.1:
                    conf = "high" if rng.random() < 0.5 else "medium"
                    entry = f"{int(rng.integers(16**6)):06x}"
                    text += f" <!-- mem id={entry} conf={conf} src=user at={day.isoformat()} -->"
                lines.append(text)
                per_line.append(mix)
            else:
                lines += [text, ""]
                per_line += [mix, None]
            blocks += 1
        if lines[-1] != "":
            lines.append("")
            per_line.append(None)
    return "\n".join(lines) + "\n", per_line


def write_files(
    corpus: Corpus,
    n_blocks: int,
    anchors: Anchors,
    vocab: Vocabulary,
    rng: np.random.Generator,
    *,
    tag: str = "",
) -> None:
    """Add about ``n_blocks`` blocks of daily logs spread over two years (and MEMORY.md once)."""
    started = time.perf_counter()
    root = corpus.root
    plan: list[tuple[str, str, date, int]] = []
    if not (root / "MEMORY.md").exists():
        mem_blocks = max(10, min(300, n_blocks // 200))
        plan.append(("MEMORY.md", "Long-term memory", FIRST_DAY, mem_blocks))
        n_blocks -= mem_blocks
    n_files = max(1, math.ceil(n_blocks / BLOCKS_PER_FILE))
    for i in range(n_files):
        day = FIRST_DAY + timedelta(days=i * DAYS // n_files)
        blocks = n_blocks * (i + 1) // n_files - n_blocks * i // n_files
        rel = f"memory/{day.isoformat()}.md"
        if tag or (root / rel).exists() or any(p[0] == rel for p in plan):
            part = 2
            while True:
                rel = f"memory/{day.year}/{day.isoformat()}-{tag or 'part'}{part}.md"
                if not (root / rel).exists() and all(p[0] != rel for p in plan):
                    break
                part += 1
        plan.append((rel, day.isoformat(), day, blocks))
    for rel, title, day, blocks in plan:
        text, per_line = _markdown_file(title, day, anchors, vocab, rng, blocks)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        corpus.line_mix[rel] = per_line
        corpus.n_files += 1
        corpus.words += len(text.split())
        corpus.blocks += blocks
    corpus.seconds += time.perf_counter() - started


def chunks_per_block(anchors: Anchors, vocab: Vocabulary, rng: np.random.Generator) -> float:
    """How many chunks the production chunker cuts per generated block (sampled)."""
    blocks = chunks = 0
    for i in range(8):
        day = FIRST_DAY + timedelta(days=i)
        text, _ = _markdown_file(day.isoformat(), day, anchors, vocab, rng, BLOCKS_PER_FILE)
        chunks += len(chunk_markdown(text, f"memory/{day}.md", count_tokens_batch, ChunkParams()))
        blocks += BLOCKS_PER_FILE
    return chunks / blocks


def mix_vectors(
    mixes: Sequence[dict[int, float]], anchors: Anchors, rng: np.random.Generator
) -> np.ndarray:
    """Unit vectors: the anchor mixture, the shared "style" direction of real chunk embeddings,
    and noise drawn mostly from the anchors' own subspace. Calibrated between real embeddings of
    real sentences (mean pairwise cosine ~0.2) and real embeddings of this generated text (whose
    filler makes them all alike, ~0.35): real notes are more on-topic than Zipf filler."""
    n, d = len(mixes), anchors.vectors.shape[1]
    out = np.empty((n, d), dtype=np.float32)
    na = len(anchors.texts)
    for start in range(0, n, 8192):
        part = mixes[start : start + 8192]
        weights = np.zeros((len(part), na), dtype=np.float32)
        for row, mix in enumerate(part):
            for a, w in mix.items():
                weights[row, a] = w * float(rng.uniform(0.7, 1.3))
        signal = weights @ anchors.vectors
        signal /= np.linalg.norm(signal, axis=1, keepdims=True)
        aniso = rng.standard_normal((len(part), na)).astype(np.float32) @ anchors.basis
        aniso /= np.linalg.norm(aniso, axis=1, keepdims=True)
        iso = rng.standard_normal((len(part), d)).astype(np.float32)
        iso /= np.linalg.norm(iso, axis=1, keepdims=True)
        noise = 0.6 * aniso + 0.4 * iso
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        sigma = rng.uniform(0.9, 1.4, (len(part), 1)).astype(np.float32)
        beta = rng.uniform(0.4, 0.6, (len(part), 1)).astype(np.float32)
        vec = signal + beta * anchors.style + sigma * noise
        out[start : start + len(part)] = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    return out


class RefusingEmbedder:
    """Same fingerprint as the real model; fails if the index asks it to embed anything."""

    def __init__(self, real: Embedder) -> None:
        self.dims = real.dims
        self.fingerprint = real.fingerprint
        self.loaded = True

    def embed(self, texts: Sequence[str], progress: object = None) -> np.ndarray:
        raise RuntimeError(
            f"the index asked to embed {len(texts)} texts: the embedding_cache pre-fill missed them"
        )


@dataclass
class Built:
    n_chunks: int
    sample_vectors: np.ndarray
    sample_texts: list[str]
    sample_mix: list[dict[int, float]]
    lines: list[str]


def build_index(
    size: int,
    root: Path,
    embedder: Embedder,
    anchors: Anchors,
    vocab: Vocabulary,
    rng: np.random.Generator,
) -> Built:
    """Write the workspace, sync it with the production index, then give every chunk its vector
    through the embedding cache: fill ``embedding_cache`` (model fingerprint, sha256 of
    ``embed_text``), then ``MemoryIndex.sync`` stores them into sqlite-vec without the model."""
    lines: list[str] = []
    corpus = Corpus(root)
    ratio = chunks_per_block(anchors, vocab, rng)
    write_files(corpus, math.ceil(size / ratio), anchors, vocab, rng)
    ws = Workspace.open(root)
    # the index only reads dims and fingerprint, and would call embed
    refusing = cast("TextEmbedder", RefusingEmbedder(embedder))
    index = MemoryIndex(ws, refusing, count_tokens_batch, ChunkParams())
    report = index.sync(embed=False)
    sync_s = report.seconds
    n = int(str(index.stats()["chunks"]))
    if n < size:  # top up (the chunker packs short blocks together)
        write_files(corpus, math.ceil((size - n) / ratio), anchors, vocab, rng, tag="more")
        extra = index.sync(embed=False)
        sync_s += extra.seconds
        report.merge(extra)
        n = int(str(index.stats()["chunks"]))
    lines.append(
        f"corpus: {corpus.n_files:,} Markdown files, {corpus.blocks:,} bullets/paragraphs, "
        f"{corpus.words:,} words, generated in {corpus.seconds:.1f} s"
    )
    lines.append(
        f"production sync (chunk + FTS5 + rows, no vectors): {n:,} chunks in {sync_s:.1f} s"
        + (f"; {len(report.warnings)} warnings" if report.warnings else "")
    )

    started = time.perf_counter()
    rows = (
        index._reader()
        .execute(  # noqa: SLF001 - read-only look at what sync stored
            "SELECT id, path, start_line, end_line, heading, text, hash FROM chunks"
            " ORDER BY id"
        )
        .fetchall()
    )
    mixes: list[dict[int, float]] = []
    digests: list[str] = []
    mismatched = 0
    words = 0
    for _id, path, start, end, heading, text, stored in rows:
        digest = sha256_text(embed_text(heading, text))
        mismatched += digest != stored
        digests.append(digest)
        words += len(text.split())
        mix: dict[int, float] = {}
        for line in corpus.line_mix[path][start - 1 : end]:
            for a, w in (line or {}).items():
                mix[a] = mix.get(a, 0.0) + w
        mixes.append(mix or {int(rng.integers(len(anchors.texts))): 1.0})  # heading-only chunk
    if mismatched:
        lines.append(f"!! {mismatched} chunks whose stored hash is not sha256(embed_text)")
    vectors = mix_vectors(mixes, anchors, rng)
    pick = rng.choice(len(rows), min(48, len(rows)), replace=False)
    sample_texts = [embed_text(rows[i][4], rows[i][5]) for i in pick]
    sample_mix = [mixes[i] for i in pick]
    conn = connect(index.path)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT OR REPLACE INTO embedding_cache(model, hash, embedding) VALUES (?, ?, ?)",
        ((embedder.fingerprint, h, v.tobytes()) for h, v in zip(digests, vectors, strict=True)),
    )
    conn.execute("COMMIT")
    conn.close()
    fill_s = time.perf_counter() - started
    del rows
    report = index.sync(embed=True)  # files unchanged: only embed_pending, all cache hits
    stats = index.stats()
    index.close()
    if report.embedded or stats["embedded"] != n:
        raise RuntimeError(f"sync embedded {report.embedded}; {stats['embedded']} of {n} stored")
    lines.append(
        f"chunks: {words / n:.0f} words each on average; synthetic vectors + embedding_cache "
        f"pre-fill {fill_s:.1f} s; MemoryIndex.sync stored {report.cache_hits:,} cached vectors "
        f"into vec0 in {report.seconds:.1f} s (0 embedded); index.db {int(str(stats['index_bytes'])) / 2**20:.0f} MB"
    )
    return Built(n, vectors[pick], sample_texts, sample_mix, lines)


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    text: str
    kind: str  # "common", "content", "phrase", "mixed"


def make_queries(
    n: int, anchors: Anchors, vocab: Vocabulary, rng: np.random.Generator
) -> list[Query]:
    """~30% common-word queries, ~20% real questions (LoCoMo), the rest content words, phrases
    quoted from the anchor sentences, and common-word templates with one topic word."""
    out: list[Query] = []
    if anchors.questions:
        n_questions = min(len(anchors.questions), n // 5)
        for i in rng.choice(len(anchors.questions), n_questions, replace=False):
            out.append(Query(anchors.questions[int(i)], "question"))
    n_common = max(len(COMMON_QUERIES), int(n * 0.3)) if n >= 20 else max(1, n // 3)
    common_ranks = np.arange(0, 150)
    for i in range(n_common):
        if i < len(COMMON_QUERIES):
            out.append(Query(COMMON_QUERIES[i], "common"))
        else:
            words = vocab.words[rng.choice(common_ranks, int(rng.integers(6, 11)))].tolist()
            out.append(Query(" ".join(words), "common"))
    kinds = ["content", "phrase", "mixed"]
    i = 0
    while len(out) < n:
        kind = kinds[i % 3]
        i += 1
        if kind == "content":
            a = int(rng.integers(len(anchors.texts)))
            picks = rng.choice(anchors.topics[a], int(rng.integers(2, 4)), replace=False)
            if rng.random() < 0.5:  # a rarer word from the long tail
                picks = np.append(picks[:-1], rng.integers(2000, len(vocab.words)))
            text = " ".join(vocab.words[picks].tolist())
        elif kind == "phrase":
            words = anchors.texts[int(rng.integers(len(anchors.texts)))].split()
            n_words = min(len(words), int(rng.integers(4, 9)))
            start = int(rng.integers(0, len(words) - n_words + 1))
            text = " ".join(words[start : start + n_words])
        else:
            a = int(rng.integers(len(anchors.texts)))
            topic = vocab.words[rng.choice(anchors.topics[a])]
            base = COMMON_QUERIES[int(rng.integers(len(COMMON_QUERIES)))].split()
            base[int(rng.integers(len(base)))] = topic
            text = " ".join(base)
        out.append(Query(text, kind))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


# --------------------------------------------------------------------------- naive RFC-013


_NAIVE_TOKEN = re.compile(r"[^a-z0-9\u4e00-\u9fff\s]")


def naive_tokenize(text: str) -> list[str]:
    return [t for t in _NAIVE_TOKEN.sub(" ", text.lower()).split() if t]


def build_naive_db(path: Path, index_path: Path) -> int:
    """RFC-013's ``memory_index`` table (chunk_text, embedding BLOB, dates) from our index."""
    src = connect(index_path)
    rows = src.execute(
        """SELECT c.id, c.path, c.date, c.heading || char(10) || c.text, v.embedding
           FROM chunks c JOIN chunks_vec v ON v.rowid = c.id"""
    ).fetchall()
    src.close()
    db = sqlite3.connect(path)
    db.execute(
        """CREATE TABLE memory_index (id TEXT PRIMARY KEY, source_type TEXT, source_date TEXT,
           chunk_text TEXT, embedding BLOB, created_at INTEGER, updated_at INTEGER)"""
    )
    epoch = date(1970, 1, 1)
    db.executemany(
        "INSERT INTO memory_index VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            (
                str(r[0]),
                "long_term" if r[1] == "MEMORY.md" else "daily_log",
                r[2],
                r[3],
                r[4],
                (date.fromisoformat(r[2]) - epoch).days * 86_400_000 if r[2] else 0,
                0,
            )
            for r in rows
        ),
    )
    db.commit()
    db.close()
    return len(rows)


def _cosine_loop(a: list[float], b: Sequence[float]) -> float:
    """RFC-013's cosineSimilarity, line for line."""
    dot = norm_a = norm_b = 0.0
    for i in range(len(a)):
        dot += a[i] * b[i]
        norm_a += a[i] * a[i]
        norm_b += b[i] * b[i]
    denom = math.sqrt(norm_a) * math.sqrt(norm_b)
    return dot / denom if denom > 0 else 0.0


def _cosine_numpy(a: np.ndarray, blob: bytes) -> float:
    b = np.frombuffer(blob, dtype=np.float32)
    denom = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return float(a @ b) / denom if denom > 0 else 0.0


def naive_search(
    db: sqlite3.Connection,
    embedder: Embedder,
    query: str,
    *,
    now_ms: int,
    literal: bool,
    top_k: int = 5,
) -> list[tuple[str, float]]:
    """RFC-013 ``HybridSearchEngine.search``: every row from SQLite, Python BM25, per-row cosine.

    ``literal``: as the RFC writes it: ``BM25Scorer`` tokenises every chunk once for the average
    length, once more per query term for its document frequency and once to score it, and
    ``cosineSimilarity`` loops over the 384 floats. Otherwise a kinder port: every chunk
    tokenised once per query and a numpy dot product per row (still one row at a time).
    """
    chunks = db.execute("SELECT * FROM memory_index").fetchall()  # memoryIndexDao.getAll()
    if not chunks:
        return []
    k1, b = 1.2, 0.75
    terms = naive_tokenize(query)
    n = len(chunks)
    bm25: dict[str, float] = {}
    if literal:
        avgdl = sum(len(naive_tokenize(c[3])) for c in chunks) / n
        idf = {}
        for term in terms:
            df = sum(1 for c in chunks if term in naive_tokenize(c[3]))
            idf[term] = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
        for c in chunks:
            doc = naive_tokenize(c[3])
            tf_all = Counter(doc)
            score = 0.0
            for term in terms:
                tf = tf_all.get(term, 0)
                score += idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
            bm25[c[0]] = score
    else:
        docs = [naive_tokenize(c[3]) for c in chunks]
        avgdl = sum(len(d) for d in docs) / n
        sets = [set(d) for d in docs]
        idf = {}
        for term in terms:
            df = sum(1 for s in sets if term in s)
            idf[term] = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
        for c, doc in zip(chunks, docs, strict=True):
            tf_all = Counter(doc)
            score = 0.0
            for term in terms:
                tf = tf_all.get(term, 0)
                score += idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
            bm25[c[0]] = score
    # VectorSearcher.score (the query embedding is part of it)
    qv = embedder.embed_query(query)
    vector: dict[str, float] = {}
    if literal:
        ql = qv.tolist()
        for c in chunks:
            if c[4] is not None:
                vector[c[0]] = _cosine_loop(ql, np.frombuffer(c[4], np.float32).tolist())
    else:
        for c in chunks:
            if c[4] is not None:
                vector[c[0]] = _cosine_numpy(qv, c[4])

    def normalize(scores: dict[str, float]) -> dict[str, float]:
        top = max(scores.values(), default=0.0)
        return {k: v / top for k, v in scores.items()} if top else scores

    nb, nv = normalize(bm25), normalize(vector)
    wb, wv = (0.3, 0.7) if vector else (1.0, 0.0)
    results = []
    for c in chunks:
        combined = wb * nb.get(c[0], 0.0) + wv * nv.get(c[0], 0.0)
        age_days = max(0.0, (now_ms - c[5]) / 86_400_000)
        final = combined * math.exp(-0.01 * age_days)  # TimeDecayCalculator, lambda 0.01
        if final > 0:
            results.append((c[0], final))
    results.sort(key=lambda r: -r[1])
    return results[:top_k]


# --------------------------------------------------------------------------- measurements


def exact_knn(matrix: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    scores = matrix @ q
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top])]
    nearest: list[int] = ids[top].tolist()
    return nearest


def summary(label: str, values_ms: Sequence[float], width: int = 44) -> str:
    return (
        f"  {label:<{width}} p50 {pct(values_ms, 50):8.2f} ms   p95 {pct(values_ms, 95):8.2f} ms"
        f"   max {max(values_ms):8.2f} ms   (n={len(values_ms)})"
    )


@dataclass
class SizeResult:
    size: int
    hybrid_p50: float = float("nan")
    hybrid_p95: float = float("nan")
    merge_p50: float = float("nan")
    recall: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)


def bench_size(
    size: int,
    tmp: Path,
    embedder: Embedder,
    anchors: Anchors,
    vocab: Vocabulary,
    queries: list[Query],
    query_sets: dict[str, np.ndarray],
    args: argparse.Namespace,
    naive: bool,
) -> SizeResult:
    rng = np.random.default_rng(SEED + size)
    result = SizeResult(size)
    root = tmp / f"ws-{size}"
    say(f"\n=== {size:,} chunks ===")
    built = build_index(size, root, embedder, anchors, vocab, rng)
    for line in built.lines:
        say(line)
    realism_check(built, anchors, embedder)
    gc.collect()

    engine = MemoryEngine(root, embedder=embedder)
    index = engine.index
    mirror_time: list[float] = []
    real_ensure = index.ensure_mirror

    def ensure_timed():  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return real_ensure()
        finally:
            mirror_time.append(time.perf_counter() - start)

    index.ensure_mirror = ensure_timed  # type: ignore[method-assign]
    rss_before, _ = rss_mb()
    first_s, _ = timed(lambda: engine.search(queries[0].text, now=NOW))
    rss_after, peak = rss_mb()
    index.ensure_mirror = real_ensure  # type: ignore[method-assign]
    say(
        f"first search (loads the in-RAM mirror): {first_s * 1000:.0f} ms, of which mirror build "
        f"{mirror_time[0] * 1000:.0f} ms; RSS {rss_before:.0f} -> {rss_after:.0f} MB (peak {peak:.0f} MB)"
    )

    for q in queries[:5]:  # warm-up: caches, branch predictors, sqlite page cache
        engine.search(q.text, now=NOW)

    # Full hybrid search through the engine facade: embedding + FTS + KNN + merge.
    hybrid: list[float] = []
    cpu: list[float] = []
    for q in queries:
        c0 = time.process_time()
        t, response = timed(lambda q=q: engine.search(q.text, now=NOW))
        cpu.append(time.process_time() - c0)
        if response.mode != "hybrid":
            raise RuntimeError(f"search ran in mode {response.mode}")
        hybrid.append(t)
    hyb_ms = ms(hybrid)
    result.hybrid_p50, result.hybrid_p95 = pct(hyb_ms, 50), pct(hyb_ms, 95)
    say(f"hybrid search, MemoryEngine.search incl. query embedding ({len(queries)} queries):")
    say(summary("all queries", hyb_ms))
    for kind in sorted({q.kind for q in queries}):
        say(
            summary(
                f"  {kind} queries",
                [v for v, q in zip(hyb_ms, queries, strict=True) if q.kind == kind],
            )
        )
    common = [v for v, q in zip(hyb_ms, queries, strict=True) if q.kind == "common"]
    other = [v for v, q in zip(hyb_ms, queries, strict=True) if q.kind != "common"]
    say(
        f"  common-word queries p95 {pct(common, 95):.2f} ms vs others {pct(other, 95):.2f} ms "
        f"({pct(common, 95) / pct(other, 95):.2f}x); process CPU time p50 "
        f"{pct(ms(cpu), 50):.2f} ms (all threads)"
    )

    # Stages, each timed alone over the same queries, following search() step by step.
    opts = engine.search_options
    pool = opts.max_results * opts.candidate_multiplier
    mirror = index.ensure_mirror()
    labels = {
        "embed": "query embedding (engine.search ranks the text meanwhile)",
        "fts": f"FTS-only: fts_candidates (top {pool})",
        "knn": f"KNN: mirror.knn (top {pool})",
        "vectors_for": "  mirror.vectors_for (text-only candidates)",
        "fts_ranks": f"  fts_candidates (top {pool} + ranks of the vector candidates, one MATCH)",
        "rows": "  chunks_by_id (all candidates)",
        "search": "search() with a precomputed vector",
        "bm25_only": "search() BM25-only (no vector)",
        "pending": "pending_embeddings() (engine.search adds it)",
    }
    stage: dict[str, list[float]] = {k: [] for k in labels}
    squeries = queries[: args.stage_queries]
    vector_only: list[list[int]] = []
    for q in squeries:
        t, qv = timed(lambda q=q: embedder.embed_query(q.text))
        stage["embed"].append(t)
        t, text_hits = timed(lambda q=q: dict(index.fts_candidates(q.text, pool)))
        stage["fts"].append(t)
        t, vector_hits = timed(lambda qv=qv: dict(mirror.knn(qv, pool)))
        stage["knn"].append(t)
        ids = list(dict.fromkeys([*text_hits, *vector_hits]))
        no_vec = [i for i in ids if i not in vector_hits]
        no_text = [i for i in ids if i not in text_hits]
        vector_only.append(no_text)
        stage["vectors_for"].append(timed(lambda no_vec=no_vec: mirror.vectors_for(no_vec))[0])
        stage["fts_ranks"].append(
            timed(lambda q=q, vh=vector_hits: index.fts_candidates(q.text, pool, also=list(vh)))[0]
        )
        stage["rows"].append(timed(lambda ids=ids: index.chunks_by_id(ids))[0])
        stage["search"].append(
            timed(lambda q=q, qv=qv: search(index, q.text, qv, opts, now=NOW))[0]
        )
        stage["bm25_only"].append(timed(lambda q=q: search(index, q.text, None, opts, now=NOW))[0])
        stage["pending"].append(timed(index.pending_embeddings)[0])
    say(
        f"stages, each timed alone, following search() step by step ({len(squeries)} of the queries):"
    )
    for key, label in labels.items():
        vals = ms(stage[key])
        say(summary(label, vals))
        if key in ("fts", "fts_ranks", "search", "bm25_only"):
            c = [v for v, q in zip(vals, squeries, strict=True) if q.kind == "common"]
            o = [v for v, q in zip(vals, squeries, strict=True) if q.kind != "common"]
            say(
                f"      common-word queries p50/p95 {pct(c, 50):.2f}/{pct(c, 95):.2f} ms, "
                f"others {pct(o, 50):.2f}/{pct(o, 95):.2f} ms"
            )
    rest = [
        s - f - k for s, f, k in zip(stage["search"], stage["fts_ranks"], stage["knn"], strict=True)
    ]
    say(summary("  search() minus FTS (with ranks) and KNN (merge, scoring)", ms(rest)))
    result.merge_p50 = pct(ms(rest), 50)
    worst = sorted(zip(ms(stage["fts"]), squeries, strict=True), key=lambda x: -x[0])[:3]
    for v, q in worst:
        say(
            f"    slowest FTS {v:7.2f} ms [{q.kind}] {q.text!r} -> {build_match_query(q.text, index._doc_share)}"
        )
    fts_section(index, squeries, vector_only, pool)

    knn_section(result, index, mirror, query_sets, anchors, rng, args)

    if naive:
        naive_section(result, tmp, index, embedder, engine, queries, args)
    rss_now, peak = rss_mb()
    say(f"RSS now {rss_now:.0f} MB, peak {peak:.0f} MB")
    engine.close()
    return result


def fts_section(
    index: MemoryIndex, queries: list[Query], vector_only: list[list[int]], pool: int
) -> None:
    """FTS5 query shapes, measured on the same index: the production MATCH and SQL, the hidden
    ``rank`` column, and terms pruned by document frequency (read from a temp fts5vocab table)."""
    conn = connect(index.path)
    conn.execute("CREATE VIRTUAL TABLE temp.bench_vocab USING fts5vocab(main, chunks_fts, 'row')")
    n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    top_sql = (
        "SELECT rowid, bm25(chunks_fts) AS rank FROM chunks_fts WHERE chunks_fts MATCH ? "
        "ORDER BY rank LIMIT ?"
    )
    hidden_sql = "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?"
    in_sql = (
        "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({})"
    )
    eq_sql = "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?"

    def df(token: str) -> int:
        row = conn.execute("SELECT doc FROM temp.bench_vocab WHERE term = ?", (token,)).fetchone()
        return row[0] if row else 0

    def match(terms: Sequence[tuple[str, ...]]) -> str:
        return " OR ".join('"' + " ".join(t).replace('"', "") + '"' for t in terms)

    def run(sql: str, args: Sequence[object]) -> list[tuple[int, float]]:
        rows: list[tuple[int, float]] = conn.execute(sql, list(args)).fetchall()
        return rows

    rows: list[tuple[str, dict[str, float]]] = []  # (query kind, {variant: seconds})
    overlap: list[float] = []
    shares: list[float] = []
    for q, ids in zip(queries, vector_only, strict=True):
        terms = query_terms(q.text)
        if not terms:
            continue
        freq = {t: min(df(p) for p in t) for t in terms}
        shares.append(max(freq.values()) / n)
        keep = [t for t in terms if freq[t] <= PRUNE_DF * n] or sorted(terms, key=freq.__getitem__)[
            :2
        ]
        full, cut = match(terms), match(keep)
        got: dict[str, float] = {}
        got["prod"], a = timed(lambda full=full: run(top_sql, (full, pool)))
        got["hidden"] = timed(lambda full=full: run(hidden_sql, (full, pool)))[0]
        got["pruned"], b = timed(lambda cut=cut: run(top_sql, (cut, pool)))
        if a:
            overlap.append(len({r[0] for r in a} & {r[0] for r in b}) / len(a))
        if ids:
            sql = in_sql.format(",".join("?" * len(ids)))
            got["ranks"] = timed(lambda full=full, ids=ids, sql=sql: run(sql, [full, *ids]))[0]
            got["ranks_pruned"] = timed(lambda cut=cut, ids=ids, sql=sql: run(sql, [cut, *ids]))[0]
            got["ranks_eq"] = timed(
                lambda full=full, ids=ids: [run(eq_sql, (full, i)) for i in ids]
            )[0]
        rows.append((q.kind, got))
    conn.close()
    say(
        f"FTS5 query shapes over the same queries (share of chunks holding the query's most "
        f"common term: median {pct(shares, 50):.0%}, max {max(shares):.0%}):"
    )
    for key, label in (
        ("prod", f"production: bm25() AS rank ORDER BY rank LIMIT {pool}"),
        ("hidden", "hidden rank column: ORDER BY rank"),
        ("pruned", f"terms in > {PRUNE_DF:.0%} of chunks dropped"),
        ("ranks", "fts_ranks: MATCH AND rowid IN (vector-only)"),
        ("ranks_pruned", "  same with the pruned terms"),
        ("ranks_eq", "  same as one MATCH AND rowid = ? per id"),
    ):
        vals = [ms([got[key]])[0] for _, got in rows if key in got]
        common = [ms([got[key]])[0] for kind, got in rows if key in got and kind == "common"]
        if vals:
            say(summary(label, vals) + f"   common-word p95 {pct(common, 95):7.2f} ms")
    say(
        f"  top-{pool} overlap of the pruned query with the production one: {statistics.fmean(overlap):.2f}"
    )


def _truth(matrix: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    """Exact top-k row numbers for many queries (one matrix product per block of queries)."""
    out: list[set[int]] = []
    for start in range(0, len(queries), 64):
        scores = queries[start : start + 64] @ matrix.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        out.extend(set(row.tolist()) for row in top)
    return out


def _recall(got: Sequence[Sequence[int]], truth: Sequence[set[int]], k: int) -> float:
    return statistics.fmean(len(set(g) & t) / k for g, t in zip(got, truth, strict=True))


class Preselect:
    """Approximate pre-selection then exact float rescoring, as candidates for the mirror.

    ``sign``: Hamming distance on the signs of mean-centred vectors (the mirror's method).
    ``pca``: a float32 product in an r-dimensional PCA projection of the centred vectors.
    """

    def __init__(self, matrix: np.ndarray, kind: str, factor: int, dims: int = 0) -> None:
        self.matrix, self.kind, self.factor = matrix, kind, factor
        self.mean = matrix.mean(axis=0).astype(np.float32)
        if kind == "sign":
            packed = np.packbits((matrix - self.mean) > 0, axis=1)
            self.codes = np.ascontiguousarray(packed).view(np.uint64)
        else:
            sample = matrix[:: max(1, len(matrix) // 10_000)] - self.mean
            _, _, vt = np.linalg.svd(sample, full_matrices=False)
            self.proj = np.ascontiguousarray(vt[:dims].T, dtype=np.float32)
            self.codes = np.ascontiguousarray((matrix - self.mean) @ self.proj, dtype=np.float32)

    def knn(self, q: np.ndarray, k: int) -> list[int]:
        keep = min(len(self.matrix), k * self.factor)
        if self.kind == "sign":
            qb = np.ascontiguousarray(np.packbits((q - self.mean) > 0)).view(np.uint64)
            dist = np.bitwise_count(self.codes ^ qb).sum(axis=1, dtype=np.int32)
            rows = np.argpartition(dist, keep - 1)[:keep]
        else:
            approx = self.codes @ ((q - self.mean) @ self.proj)
            rows = np.argpartition(-approx, keep - 1)[:keep]
        scores = self.matrix[rows] @ q
        best = np.argpartition(-scores, k - 1)[:k]
        nearest: list[int] = rows[best[np.argsort(-scores[best])]].tolist()
        return nearest


def knn_section(
    result: SizeResult,
    index: MemoryIndex,
    mirror: object,
    query_sets: dict[str, np.ndarray],
    anchors: Anchors,
    rng: np.random.Generator,
    args: argparse.Namespace,
) -> None:
    """Recall@K of the mirror vs exact brute force; latency of mirror, numpy exact and vec0;
    and the recall/latency of other pre-selections, measured on the same vectors."""
    knn = mirror.knn  # type: ignore[attr-defined]
    conn = connect(index.path)
    rows = conn.execute("SELECT rowid, embedding FROM chunks_vec ORDER BY rowid").fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    del rows
    n = len(ids)
    row_of = {int(i): r for r, i in enumerate(ids)}
    sets = dict(query_sets)
    # In-distribution vectors: fresh mixtures like the corpus's, not in it.
    sets["in-distribution vectors"] = mix_vectors(
        [{int(a): 1.0} for a in rng.integers(len(anchors.texts), size=200)], anchors, rng
    )
    path = "exact" if n < EXACT_BELOW else "sign-bit + rescoring"
    say(f"vector KNN, k={K}, {n:,} vectors (mirror path at this size: {path}):")
    truths = {label: _truth(matrix, vecs, K) for label, vecs in sets.items()}
    for label, vecs in sets.items():
        best = float((vecs @ matrix.T).max(axis=1).mean())
        got = [[row_of[i] for i, _ in knn(q, K)] for q in vecs]
        rec = _recall(got, truths[label], K)
        line = (
            f"  recall@{K} mirror.knn vs exact, {label} (n={len(vecs)}, mean best cosine "
            f"{best:.2f}): {rec:.4f}"
        )
        if n < EXACT_BELOW:
            forced = [[row_of[i] for i, _ in knn(q, K, exact=False)] for q in vecs]
            line += f"   (sign-bit path forced: {_recall(forced, truths[label], K):.4f})"
        say(line)
        if label != "in-distribution vectors":
            result.recall[label] = rec
    qvecs = next(iter(query_sets.values()))
    n_time = min(len(qvecs), args.knn_queries)
    times: dict[str, list[float]] = {"mirror": [], "exact": [], "vec0": []}
    if n < EXACT_BELOW:
        times["forced"] = []
    n_vec0 = min(len(qvecs), args.vec0_queries)
    vec0_hits = []
    for j, q in enumerate(qvecs[:n_time]):
        times["mirror"].append(timed(lambda q=q: knn(q, K))[0])
        times["exact"].append(timed(lambda q=q: exact_knn(matrix, ids, q, K))[0])
        if "forced" in times:
            times["forced"].append(timed(lambda q=q: knn(q, K, exact=False))[0])
        if j < n_vec0:
            blob = q.astype(np.float32).tobytes()
            t, hits = timed(
                lambda blob=blob: conn.execute(
                    f"SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = {K}",
                    (blob,),
                ).fetchall()
            )
            times["vec0"].append(t)
            vec0_hits.append([row_of[h[0]] for h in hits])
    conn.close()
    first = next(iter(truths.values()))
    vec0_recall = _recall(vec0_hits, first[: len(vec0_hits)], K)
    say(f"  KNN latency over {n_time} benchmark queries:")
    for label, key in (
        ("mirror.knn (production path)", "mirror"),
        ("mirror.knn, sign-bit path forced", "forced"),
        ("exact numpy (matrix @ q, argpartition)", "exact"),
        (f"sqlite-vec vec0 MATCH k={K} (recall {vec0_recall:.3f})", "vec0"),
    ):
        if key in times:
            say(summary(label, ms(times[key])))
    if n < 5000:
        return
    labels = list(sets)
    say(
        f"  other pre-selections + exact rescoring, recall on {' / '.join(labels)}; "
        f"time over {n_time} queries:"
    )
    variants = [("sign", f, 0) for f in (10, 40, 160)] + [("pca", 10, 128)]
    for kind, factor, dims in variants:
        t_build, pre = timed(
            lambda kind=kind, factor=factor, dims=dims: Preselect(matrix, kind, factor, dims)
        )
        recs = [_recall([pre.knn(q, K) for q in sets[lb]], truths[lb], K) for lb in labels]
        knn_times = [timed(lambda q=q, pre=pre: pre.knn(q, K))[0] for q in qvecs[:n_time]]
        name = (
            f"sign bits, keep {factor}x{K}"
            if kind == "sign"
            else f"PCA-{dims} float, keep {factor}x{K}"
        )
        say(
            f"  {name:<30} recall {' / '.join(f'{r:.4f}' for r in recs)}   "
            f"p50 {pct(ms(knn_times), 50):6.2f} ms   p95 {pct(ms(knn_times), 95):6.2f} ms   (built in {t_build:.1f} s)"
        )


def naive_section(
    result: SizeResult,
    tmp: Path,
    index: MemoryIndex,
    embedder: Embedder,
    engine: MemoryEngine,
    queries: list[Query],
    args: argparse.Namespace,
) -> None:
    path = tmp / f"naive-{result.size}.db"
    n = build_naive_db(path, index.path)
    db = sqlite3.connect(path)
    subset = [q for q in queries if q.kind == "common"][: args.naive_queries // 3]
    subset += [q for q in queries if q.kind != "common"][: args.naive_queries - len(subset)]
    now_ms = (NOW - date(1970, 1, 1)).days * 86_400_000
    naive_search(db, embedder, subset[0].text, now_ms=now_ms, literal=False)  # warm the page cache
    runs: dict[str, list[float]] = {"literal": [], "kind": [], "ours": []}
    for q in subset:
        runs["literal"].append(
            timed(lambda q=q: naive_search(db, embedder, q.text, now_ms=now_ms, literal=True))[0]
        )
        runs["kind"].append(
            timed(lambda q=q: naive_search(db, embedder, q.text, now_ms=now_ms, literal=False))[0]
        )
    # Ours in a loop of its own, as in use: right after a naive query, which turns every row
    # into Python objects, its caches are cold and it measures slower than it runs.
    for q in subset[:3]:
        engine.search(q.text, now=NOW)
    runs["ours"] = [timed(lambda q=q: engine.search(q.text, now=NOW))[0] for q in subset]
    db.close()
    say(
        f"naive RFC-013 search over {n:,} rows ({len(subset)} of the same queries, "
        "query embedding included in all):"
    )
    say(summary("naive as the RFC writes it", ms(runs["literal"])))
    say(summary("naive, tokenise once + numpy per-row cosine", ms(runs["kind"])))
    say(summary("ours, MemoryEngine.search, same queries", ms(runs["ours"])))
    ours = pct(ms(runs["ours"]), 50)
    result.ratios = {
        "literal": pct(ms(runs["literal"]), 50) / ours,
        "kind": pct(ms(runs["kind"]), 50) / ours,
    }


def realism_check(built: Built, anchors: Anchors, embedder: Embedder) -> None:
    """Compare synthetic vectors with real embeddings of a sample of the same chunks, and with
    real embeddings of real sentences (the anchors)."""
    real = embedder.embed(built.sample_texts)
    synth = built.sample_vectors

    def pairwise(m: np.ndarray) -> float:
        s = m @ m.T
        return float(s[~np.eye(len(m), dtype=bool)].mean())

    def to_anchor(m: np.ndarray) -> float:
        main = [max(mix, key=mix.__getitem__) for mix in built.sample_mix]
        return float(np.mean([m[j] @ anchors.vectors[a] for j, a in enumerate(main)]))

    say(
        f"vectors vs real embeddings, {len(real)} sampled chunks: mean pairwise cosine synthetic "
        f"{pairwise(synth):.3f}, real model on the same text {pairwise(real):.3f}, real sentences "
        f"(anchors) {pairwise(anchors.vectors):.3f}; cosine to the quoted sentence synthetic "
        f"{to_anchor(synth):.3f}, real model {to_anchor(real):.3f}"
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes in chunks")
    parser.add_argument("--queries", type=int, default=200, help="queries per size")
    parser.add_argument("--naive-queries", type=int, default=8, help="queries for the naive search")
    parser.add_argument("--vec0-queries", type=int, default=30, help="queries timed on vec0 KNN")
    parser.add_argument(
        "--stage-queries", type=int, default=100, help="queries for the per-stage timings"
    )
    parser.add_argument("--knn-queries", type=int, default=100, help="queries timed per KNN method")
    parser.add_argument("--keep", action="store_true", help="keep the temp workspaces")
    parser.add_argument(
        "--blas-threads",
        type=int,
        help="re-run with OPENBLAS/OMP/MKL_NUM_THREADS set (numpy reads them at import)",
    )
    args = parser.parse_args(argv)
    if args.blas_threads and os.environ.get("OPENBLAS_NUM_THREADS") != str(args.blas_threads):
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.blas_threads)
        os.execv(sys.executable, [sys.executable, *sys.argv])
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    started = time.perf_counter()
    say(
        f"memdeck search benchmark: sizes {sizes}, {args.queries} queries, python "
        f"{sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs, BLAS threads "
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, load average {load()}"
    )
    embedder = Embedder()
    t, _ = timed(embedder.load)
    say(f"model {embedder.fingerprint} loaded in {t:.1f} s")
    rng = np.random.default_rng(SEED)
    vocab = Vocabulary.from_model()
    t, anchors = timed(lambda: build_anchors(embedder, vocab, rng))
    say(
        f"vocabulary: {len(vocab.words):,} words, Zipf-Mandelbrot (s=1.0, q=2.7): top words "
        f"{', '.join(vocab.words[:8])}; {len(anchors.texts)} anchor sentences embedded in {t:.1f} s "
        f"({'LoCoMo turns' if LOCOMO.is_file() else 'generated'})"
    )
    queries = make_queries(args.queries, anchors, vocab, rng)
    query_sets = {"benchmark queries": embedder.embed([q.text for q in queries])}
    if anchors.questions:
        picked = rng.choice(len(anchors.questions), min(200, len(anchors.questions)), replace=False)
        query_sets["LoCoMo questions"] = embedder.embed([anchors.questions[int(i)] for i in picked])
    counts = Counter(q.kind for q in queries)
    say(
        f"queries: {dict(sorted(counts.items()))}; e.g. "
        + "; ".join(repr(q.text) for q in queries[:4])
    )

    tmp_ctx = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix="memdeck-bench-"))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="memdeck-bench-")
    )
    results: list[SizeResult] = []
    with tmp_ctx as tmp_name:
        tmp = Path(tmp_name)
        # The naive design loads every row per query: run it once, at the first size <= 20k.
        naive_at = next((size for size in sizes if size <= NAIVE_MAX), None)
        if naive_at is None:
            say(f"(no size <= {NAIVE_MAX:,} in --sizes: the naive RFC-013 comparison is skipped)")
        for size in sizes:
            results.append(
                bench_size(
                    size,
                    tmp,
                    embedder,
                    anchors,
                    vocab,
                    queries,
                    query_sets,
                    args,
                    naive=size == naive_at,
                )
            )
        if args.keep:
            say(f"workspaces kept in {tmp}")

    say("\n=== targets ===")
    for r in results:
        target = TARGET_P50_MS.get(r.size)
        if target is not None:
            p95 = TARGET_P95_MS[r.size]
            say(
                f"hybrid p50 at {r.size:,}: {r.hybrid_p50:.2f} ms, target <= {target:.0f} ms: "
                f"{verdict(r.hybrid_p50 <= target)}; p95 {r.hybrid_p95:.2f} ms, target <= "
                f"{p95:.0f} ms: {verdict(r.hybrid_p95 <= p95)}"
            )
            if r.size == 10_000:
                say(
                    f"merge + scoring p50 at 10,000: {r.merge_p50:.2f} ms, target <= "
                    f"{TARGET_MERGE_P50_MS:.0f} ms: {verdict(r.merge_p50 <= TARGET_MERGE_P50_MS)}"
                )
        else:
            say(
                f"hybrid p50 at {r.size:,}: {r.hybrid_p50:.2f} ms (p95 {r.hybrid_p95:.2f}), no target"
            )
    for r in results:
        for label, rec in r.recall.items():
            say(
                f"recall@{K} at {r.size:,}, {label}: {rec:.4f}, target >= {TARGET_RECALL}: "
                f"{verdict(rec >= TARGET_RECALL)}"
            )
    for r in results:
        if r.ratios:
            ratio, kind = r.ratios["literal"], r.ratios["kind"]
            say(
                f"naive RFC-013 (as written) / ours p50 at {r.size:,}: {ratio:.0f}x, target >= "
                f"{TARGET_RATIO:.0f}x: {verdict(ratio >= TARGET_RATIO)}; against the kinder naive "
                f"port (tokenise once, numpy cosine per row): {kind:.0f}x: {verdict(kind >= TARGET_RATIO)}"
            )
    say(f"total run time {time.perf_counter() - started:.0f} s; load average {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
