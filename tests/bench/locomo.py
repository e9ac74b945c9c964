"""Retrieval quality of the memory engine on the LoCoMo development split.

Usage::

    .venv/bin/python tests/bench/locomo.py [--data ../shared/data/locomo/locomo-dev.json]
        [--out FILE.md] [--no-experiments] [--workdir DIR] [--memory dialogue|notes]

Protocol (``../shared/data/locomo/README.md``): every session becomes the daily log of its date
(``memory/YYYY-MM-DD.md``, written with the production ``MemoryStore.append_daily``; two sessions
on one date go to the same file), one bullet per turn carrying its dia_id
(``- [D3:7] **Caroline**: ... (shares a photo: ...)``). Each conversation gets its own workspace,
indexed by the real :class:`MemoryEngine` (production chunker, real ONNX model, sqlite-vec) and
queried with the question verbatim, with ``now`` fixed to the day after the conversation's last
session (so time decay is realistic) and again with ``decay=False``.

``--memory notes`` writes LoCoMo's own per-session observations instead ("Caroline attended an
LGBTQ support group…"), one bullet per observation under its session's date, tagged with the
turns it came from (``- [D1:3] ...``): the kind of memory a flush writes. Only questions whose
evidence the notes carry are scored.

Score: evidence recall, the share of a question's evidence dia_ids contained in the retrieved
chunks (a chunk contains a turn when its line range covers the turn's line: a turn longer than
the chunk target is split by words and only its first piece carries the ``[D..]`` tag), at k = 5
and 10 results, and within 500 / 1,000 / 2,000 tokens of retrieved text: results in rank order
(``max_results`` large, ``min_score`` 0), each costing what ``build_injection`` charges for it
(``- [path#Lx-y] text`` + 1, counted with ``count_tokens``); a result that does not fit is
skipped and the next tried, as the injection does. Categories 1-4 (5, adversarial, has no
evidence to retrieve).

Modes: ``hybrid`` (``engine.search``), ``bm25`` (the same search with no query vector, as
before the model is loaded) and ``vector`` (``vector_weight=1, text_weight=0``). The ``inject``
row is what the app would put in the prompt with every default (``engine.inject``: packed to the budget,
min_score 0.35, 2,000-token budget).

The experiments then vary the chunk size (``ChunkParams``), the hybrid weights, the decay
half-life and ``min_score``, all through public parameters (no engine code changed). ``--workdir`` keeps the workspaces (and their embedding caches) so
a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from tui.engine.chunker import ChunkParams
from tui.engine.embeddings import Embedder, TextEmbedder, count_tokens
from tui.engine.engine import MemoryEngine
from tui.engine.inject import build_injection
from tui.engine.options import InjectionOptions, SearchOptions
from tui.engine.remote_embeddings import RemoteEmbedder
from tui.engine.search import SearchResult, search

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BUDGETS = (500, 1000, 2000)
KS = (5, 10)
#: Results fetched for the token-budget metrics (min_score 0): enough to fill 2,000 tokens
#: with one-turn units.
BUDGET_POOL = 150
DEFAULTS = SearchOptions()
DEFAULT_CHUNKS = ChunkParams()

#: README reference points (other seven LoCoMo conversations, one chunk per turn).
REFERENCE = {
    ("bm25", "recall@5"): ".468",
    ("vector", "recall@5"): ".354 (MiniLM)",
    ("hybrid", "recall@5"): ".464 (RRF)",
    ("bm25", "≤2000 tok"): ".757",
    ("hybrid", "≤2000 tok"): ".839 (RRF)",
}

_TAG = re.compile(r"^\s*[-*+]\s+\[(D\d+:\d+(?:, D\d+:\d+)*)\]")
_DATE = re.compile(r"(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})")


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    #: (date, bullet lines) per session, in session order.
    sessions: list[tuple[date, list[str]]]
    questions: list[Question]
    skipped: int = 0

    @property
    def now(self) -> date:
        """The day after the last session."""
        return max(day for day, _ in self.sessions) + timedelta(days=1)


def parse_session_date(text: str) -> date:
    """``"1:56 pm on 8 May, 2023"`` → 2023-05-08."""
    match = _DATE.search(text)
    if not match:
        raise ValueError(f"unrecognised session date {text!r}")
    day, month, year = match.groups()
    for fmt in ("%d %B %Y", "%d %b %Y"):
        try:
            return datetime.strptime(f"{day} {month} {year}", fmt).date()
        except ValueError:
            continue
    raise ValueError(f"unrecognised session date {text!r}")


def turn_bullet(turn: dict[str, Any]) -> str:
    """One daily-log bullet for a turn, on one line."""
    text = " ".join(str(turn.get("text", "")).split())
    line = f"- [{turn['dia_id']}] **{turn['speaker']}**: {text}"
    caption = " ".join(str(turn.get("blip_caption") or "").split())
    if caption:
        line += f" (shares a photo: {caption})"
    return line


def note_bullet(speaker: str, text: str, ids: Iterable[str]) -> str:
    """One daily-log bullet for an observation, tagged with the turns it came from."""
    return f"- [{', '.join(ids)}] {' '.join(str(text).split())}"


def observation_bullets(observations: object) -> list[str]:
    """A session's LoCoMo ``observation`` (speaker → [[text, dia_id(s)], ...]) as bullets."""
    bullets: list[str] = []
    if not isinstance(observations, dict):
        return bullets
    for speaker, items in observations.items():
        for item in items or []:
            if not isinstance(item, list) or len(item) < 2:
                continue
            text, ids = item[0], item[1]
            found = sorted(split_evidence(ids if isinstance(ids, list) else [str(ids)]))
            if found:
                bullets.append(note_bullet(speaker, text, found))
    return bullets


def split_evidence(items: Iterable[str]) -> frozenset[str]:
    """Evidence dia_ids; malformed strings such as ``"D8:6; D9:17"`` are split."""
    return frozenset(re.findall(r"D\d+:\d+", " ".join(items)))


def load_conversations(path: Path, memory: str = "dialogue") -> list[Conversation]:
    """The conversations, each session as the daily log of its date: its turns
    (``memory="dialogue"``) or its distilled observations, each tagged with the turns it came
    from (``"notes"``: the kind of memory a flush writes; only questions whose evidence the
    notes carry are kept)."""
    conversations: list[Conversation] = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        conv = item["conversation"]
        numbers = sorted(
            int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))
        )
        observations = item.get("observation") or {}
        sessions = [
            (
                parse_session_date(conv[f"session_{n}_date_time"]),
                [turn_bullet(t) for t in conv[f"session_{n}"]]
                if memory == "dialogue"
                else observation_bullets(observations.get(f"session_{n}_observation")),
            )
            for n in numbers
            if conv[f"session_{n}"]
        ]
        sessions = [(day, bullets) for day, bullets in sessions if bullets]
        carried = {i for _, bullets in sessions for b in bullets for i in _tag_ids(b)}
        questions, skipped = [], 0
        for qa in item["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = split_evidence(qa.get("evidence") or [])
            if not evidence or (memory == "notes" and not evidence <= carried):
                skipped += 1
                continue
            questions.append(Question(qa["question"], qa["category"], evidence))
        conversations.append(
            Conversation(item.get("sample_id", f"conv-{len(conversations)}"), sessions, questions)
        )
        conversations[-1].skipped = skipped
    return conversations


# --------------------------------------------------------------------------- workspaces


class QueryCachingEmbedder(Embedder):
    """The real ONNX embedder; a question asked again (other mode, other options) is not re-embedded."""

    def __init__(self) -> None:
        super().__init__()
        self._queries: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._queries.get(text)
        if vector is None:
            vector = self._queries[text] = super().embed_query(text)
        return vector


class QueryCachingRemoteEmbedder(RemoteEmbedder):
    """An OpenAI-compatible embedding endpoint; a question asked again is not re-embedded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queries: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._queries.get(text)
        if vector is None:
            vector = self._queries[text] = super().embed_query(text)
        return vector


def make_embedder(args: argparse.Namespace) -> Embedder | RemoteEmbedder:
    """The local ONNX model, or the endpoint ``--provider openai --base-url URL --model M`` names
    (key: ``--api-key`` or ``MEMDECK_EMBEDDINGS_API_KEY``; ``OPENAI_API_KEY`` for OpenAI only)."""
    if args.provider == "local":
        return QueryCachingEmbedder()
    base_url = args.base_url or "https://api.openai.com/v1"
    key = args.api_key or os.environ.get("MEMDECK_EMBEDDINGS_API_KEY")
    if key is None and base_url.startswith("https://api.openai.com/"):
        key = os.environ.get("OPENAI_API_KEY")
    return QueryCachingRemoteEmbedder(
        base_url,
        args.model or "text-embedding-3-small",
        api_key=key,
        dimensions=args.dimensions,
        batch_size=args.batch_size,
    )


def write_workspace(engine: MemoryEngine, conv: Conversation) -> None:
    """Write the conversation's daily logs with the production store (replacing old ones)."""
    memory_dir = engine.workspace.memory_dir
    if memory_dir.exists():
        for old in memory_dir.glob("*.md"):
            old.unlink()
    for day, bullets in conv.sessions:
        existing = engine.workspace.daily_log(day).exists()
        engine.store.append_daily(("\n" if existing else "") + "\n".join(bullets), day)


def _tag_ids(line: str) -> tuple[str, ...]:
    """The dia_ids a bullet is tagged with (``- [D1:3, D1:5] ...``)."""
    match = _TAG.match(line)
    return tuple(match.group(1).split(", ")) if match else ()


def line_ids(engine: MemoryEngine) -> dict[str, dict[int, tuple[str, ...]]]:
    """dia_ids of every bullet line, per workspace-relative path."""
    mapping: dict[str, dict[int, tuple[str, ...]]] = {}
    for path in sorted(engine.workspace.memory_dir.glob("*.md")):
        rel = engine.workspace.relative(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        mapping[rel] = {
            number: ids for number, line in enumerate(lines, start=1) if (ids := _tag_ids(line))
        }
    return mapping


@dataclass
class Indexed:
    """One conversation indexed with one chunk size."""

    conv: Conversation
    engine: MemoryEngine
    lines: dict[str, dict[int, tuple[str, ...]]]
    chunks: int
    embedded: int
    seconds: float
    split_turns: int

    def ids(self, results: Iterable[SearchResult]) -> set[str]:
        found: set[str] = set()
        for r in results:
            by_line = self.lines.get(r.path, {})
            for n in range(r.start_line, r.end_line + 1):
                found.update(by_line.get(n, ()))
        return found


def index_conversation(
    root: Path, conv: Conversation, embedder: TextEmbedder, params: ChunkParams
) -> Indexed:
    engine = MemoryEngine(root / conv.sample_id, embedder=embedder, chunk_params=params)
    write_workspace(engine, conv)
    started = time.perf_counter()
    report = engine.sync()
    seconds = time.perf_counter() - started
    if report.warnings:
        print(f"  warnings: {report.warnings}", file=sys.stderr)
    stats = engine.stats()
    if stats["embedded"] != stats["chunks"]:
        raise RuntimeError(f"{conv.sample_id}: {stats['embedded']}/{stats['chunks']} embedded")
    lines = line_ids(engine)
    split = sum(
        1
        for row in engine.index.iter_chunks()
        if row.start_line == row.end_line
        and row.start_line in lines.get(row.path, {})
        and not _TAG.match(row.text.splitlines()[-1])
    )
    return Indexed(
        conv, engine, lines, int(str(stats["chunks"])), report.embedded, seconds, split_turns=split
    )


# --------------------------------------------------------------------------- retrieval


def retrieve(
    ix: Indexed, question: str, mode: str, **overrides: Any
) -> tuple[list[SearchResult], str]:
    """Ranked results of one mode; ``bm25`` runs the search with no query vector."""
    now = ix.conv.now
    if mode == "bm25":
        options = replace(ix.engine.search_options, **overrides)
        response = search(ix.engine.index, question, None, options, now=now)
    else:
        if mode == "vector":
            overrides = {"vector_weight": 1.0, "text_weight": 0.0, **overrides}
        response = ix.engine.search(question, now=now, **overrides)
    return response.results, response.mode


def within_budget(ix: Indexed, results: Sequence[SearchResult], budget: int) -> list[SearchResult]:
    """Results in rank order as the injection packs them into ``budget`` tokens (no MEMORY.md)."""
    injection = build_injection("", results, count_tokens, InjectionOptions(budget_tokens=budget))
    included = {item.location for item in injection.report.included if item.kind == "relevant"}
    return [r for r in results if r.location in included]


def recall(evidence: frozenset[str], found: set[str]) -> float:
    return len(evidence & found) / len(evidence)


class Scores:
    """Recall values per row label and category, in insertion order."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, ...], dict[int, list[float]]] = {}
        self.extra: dict[tuple[str, ...], list[float]] = defaultdict(list)

    def add(self, key: tuple[str, ...], category: int, value: float) -> None:
        self.values.setdefault(key, defaultdict(list))[category].append(value)

    def flat(self, key: tuple[str, ...]) -> list[float]:
        """Every question's value, in a fixed order (same questions → same order)."""
        vals = self.values[key]
        return [v for c in sorted(vals) for v in vals[c]]

    def overall(self, key: tuple[str, ...]) -> float:
        return statistics.fmean(self.flat(key))

    def delta(self, key: tuple[str, ...], base: tuple[str, ...]) -> str:
        """Paired difference of the overall means, ± its standard error."""
        diffs = [a - b for a, b in zip(self.flat(key), self.flat(base), strict=True)]
        if not any(diffs):
            return "–"
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        return f"{statistics.fmean(diffs):+.3f} ± {se:.3f}"

    def category(self, key: tuple[str, ...], category: int) -> float | None:
        vals = self.values[key].get(category)
        return statistics.fmean(vals) if vals else None


def evaluate(
    ix: Indexed,
    scores: Scores,
    label: tuple[str, ...],
    mode: str,
    *,
    ks: Sequence[int] = KS,
    budgets: Sequence[int] = BUDGETS,
    **overrides: Any,
) -> None:
    """Score one configuration on every question of one indexed conversation."""
    expected_mode = "bm25" if mode == "bm25" else "hybrid"
    for q in ix.conv.questions:
        for k in ks:
            results, got = retrieve(ix, q.text, mode, max_results=k, min_score=0.0, **overrides)
            assert got == expected_mode, (got, mode)
            scores.add((*label, f"recall@{k}"), q.category, recall(q.evidence, ix.ids(results)))
        if budgets:
            results, _ = retrieve(
                ix, q.text, mode, max_results=BUDGET_POOL, min_score=0.0, **overrides
            )
            for budget in budgets:
                kept = within_budget(ix, results, budget)
                scores.add((*label, f"≤{budget} tok"), q.category, recall(q.evidence, ix.ids(kept)))


def inject(ix: Indexed, question: str, **overrides: Any) -> tuple[set[str], int]:
    """Turns covered by what ``engine.inject`` puts in the prompt, and its token count.

    ``overrides`` change the engine's search options for this call (the app's config knobs).
    """
    engine = ix.engine
    saved = engine.search_options
    engine.search_options = replace(saved, **overrides)
    try:
        injection = engine.inject(question, now=ix.conv.now)
    finally:
        engine.search_options = saved
    found: set[str] = set()
    for item in injection.report.included:
        match = re.fullmatch(r"(.+)#L(\d+)-(\d+)", item.location)
        if item.kind == "relevant" and match:
            by_line = ix.lines.get(match.group(1), {})
            lo, hi = int(match.group(2)), int(match.group(3))
            for n in range(lo, hi + 1):
                found.update(by_line.get(n, ()))
    tags = set(re.findall(r"D\d+:\d+", " ".join(re.findall(r"\[(D\d[^\]]*)\]", injection.text))))
    assert tags <= found, (question, tags - found)
    return found, injection.report.tokens_used


def evaluate_defaults(
    ix: Indexed, scores: Scores, label: tuple[str, ...], *, min_score: float = DEFAULTS.min_score
) -> None:
    """Recall@5 under a min_score filter, and what the app's injection would carry."""
    for q in ix.conv.questions:
        results, _ = retrieve(ix, q.text, "hybrid", max_results=5, min_score=min_score)
        key = (*label, f"recall@5, min_score {min_score:g}")
        scores.add(key, q.category, recall(q.evidence, ix.ids(results)))
        scores.extra[key].append(len(results))
        found, tokens = inject(ix, q.text, min_score=min_score)
        key = (*label, f"inject (budget-packed, min_score {min_score:g})")
        scores.add(key, q.category, recall(q.evidence, found))
        scores.extra[key].append(tokens)


# --------------------------------------------------------------------------- tables


def fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}".lstrip("0") if value < 1 else f"{value:.2f}"


def category_table(scores: Scores, counts: dict[int, int], reference: bool = True) -> str:
    head = ["mode", "decay", "metric"]
    head += [f"{c} {name} (n={counts.get(c, 0)})" for c, name in CATEGORIES.items()]
    head += [f"overall (n={sum(counts.values())})"]
    if reference:
        head.append("README ref.*")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in scores.values:
        mode, decay, metric = key
        row = [mode, decay, metric]
        row += [fmt(scores.category(key, c)) for c in CATEGORIES]
        row.append(f"**{fmt(scores.overall(key))}**")
        if reference:
            row.append(REFERENCE.get((mode, metric), "") if decay == "off" else "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


REFERENCE_NOTE = (
    "\\* README reference points, measured on the *other seven* LoCoMo conversations with one "
    "chunk per turn (plain retrieval, so shown beside the decay-off rows; other data and "
    "chunking: only a rough comparison): recall@5 BM25 "
    ".468, all-MiniLM-L6-v2 alone .354, BM25+vector RRF .464; within 2,000 tokens BM25 .757, "
    "RRF .839. LoCoMo paper, DRAGON top-5 turns: single-hop .680, temporal .704, multi-hop .354, "
    "open-domain .331."
)


def overall_table(
    rows: Sequence[tuple[str, ...]], columns: list[str], cell: Callable[[tuple[str, ...], str], str]
) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join([*row, *(cell(row, c) for c in columns[len(row) :])]) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


class Report:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        print(text + "\n", flush=True)
        self.parts.append(text)

    def text(self) -> str:
        return "\n\n".join(self.parts) + "\n"


#: One line per indexing pass, for the report.
INDEX_LOG: list[str] = []


def index_all(
    root: Path, conversations: list[Conversation], embedder: TextEmbedder, params: ChunkParams
) -> list[Indexed]:
    indexed = [index_conversation(root, conv, embedder, params) for conv in conversations]
    chunks = sum(ix.chunks for ix in indexed)
    embedded = sum(ix.embedded for ix in indexed)
    seconds = sum(ix.seconds for ix in indexed)
    rate = f", {embedded / seconds:.1f} chunks/s" if embedded and seconds else ""
    line = (
        f"chunks {params.target_tokens}/{params.overlap_tokens}: {chunks} chunks, "
        f"{embedded} embedded (the rest from the embedding cache), sync {seconds:.1f} s{rate}"
    )
    INDEX_LOG.append(line)
    print("  " + line, file=sys.stderr, flush=True)
    return indexed


def close_all(indexed: list[Indexed]) -> None:
    for ix in indexed:
        ix.engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    parser.add_argument("--no-experiments", action="store_true", help="main table only")
    parser.add_argument(
        "--workdir", type=Path, help="keep the workspaces here (a re-run reuses their embeddings)"
    )
    parser.add_argument("--provider", choices=("local", "openai"), default="local")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (provider openai)")
    parser.add_argument("--model", help="embedding model (provider openai)")
    parser.add_argument("--api-key", help="key for --base-url (else MEMDECK_EMBEDDINGS_API_KEY)")
    parser.add_argument("--dimensions", type=int, help="vector width of an unknown model")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per request")
    parser.add_argument(
        "--memory",
        choices=("dialogue", "notes"),
        default="dialogue",
        help="daily logs of the raw turns, or of LoCoMo's distilled observations (flush-like notes)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    conversations = load_conversations(args.data, args.memory)
    counts: dict[int, int] = defaultdict(int)
    for conv in conversations:
        for q in conv.questions:
            counts[q.category] += 1
    skipped = sum(c.skipped for c in conversations)

    tmp = None
    if args.workdir:
        root = args.workdir.resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="memdeck-locomo-")
        root = Path(tmp.name)

    embedder = make_embedder(args)
    load_started = time.perf_counter()
    embedder.load()
    print(f"model loaded in {time.perf_counter() - load_started:.1f} s", file=sys.stderr)

    report = Report()
    report.add(
        f"## LoCoMo retrieval, {args.memory} "
        f"(dev split: {', '.join(c.sample_id for c in conversations)}; "
        f"{sum(counts.values())} questions in categories 1-4"
        + (f", {skipped} without evidence left out" if skipped else "")
        + ")"
    )
    report.add(
        f"Defaults: one unit per entry (split above {DEFAULT_CHUNKS.target_tokens} word-pieces), "
        f"weights vector {DEFAULTS.vector_weight} / text {DEFAULTS.text_weight} "
        f"(text norm {DEFAULTS.text_norm}), neighbour weight {DEFAULTS.neighbour_weight:g}, "
        f"recency {DEFAULTS.recency} (half-life {DEFAULTS.half_life_days:g} days), now = the day after each conversation's "
        "last session. recall@k and ≤N tok with min_score 0; ≤N tok counts each result as "
        "the injection formats it. `inject` = the app's injection with every default "
        "(packed by score until the 2,000-token budget is full, default min_score budget)."
    )

    # -- main table: default chunking
    phase = time.perf_counter()
    indexed = index_all(root, conversations, embedder, DEFAULT_CHUNKS)
    index_seconds = time.perf_counter() - phase
    scores = Scores()
    for decay in (True, False):
        for mode in ("hybrid", "bm25", "vector"):
            for ix in indexed:
                evaluate(ix, scores, (mode, "on" if decay else "off"), mode, decay=decay)
        if decay:
            for ix in indexed:
                evaluate_defaults(ix, scores, ("hybrid", "on"))
    main_seconds = time.perf_counter() - phase
    report.add(category_table(scores, counts))
    inject_key = ("hybrid", "on", f"inject (budget-packed, min_score {DEFAULTS.min_score:g})")
    filtered_key = ("hybrid", "on", f"recall@5, min_score {DEFAULTS.min_score:g}")
    report.add(
        REFERENCE_NOTE + f"\n\nWith min_score {DEFAULTS.min_score:g} hybrid returns on average "
        f"{statistics.fmean(scores.extra[filtered_key]):.2f} of 5 results; the default "
        f"injection carries {statistics.fmean(scores.extra[inject_key]):.0f} tokens of "
        "memories on average."
    )
    default_indexed = indexed

    # -- experiments
    if not args.no_experiments:
        phase = time.perf_counter()
        chunk_configs = [
            DEFAULT_CHUNKS,
            replace(DEFAULT_CHUNKS, context_entries=0),
            ChunkParams(200, 32, units=False),
        ]
        variants: list[tuple[str, dict[str, object]]] = [
            ("default", {}),
            ("text norm idf", {"text_norm": "idf"}),
            ("text norm saturate", {"text_norm": "saturate"}),
            ("no neighbour support", {"neighbour_weight": 0.0}),
            ("RRF fusion", {"fusion": "rrf"}),
            ("weights 0.5/0.5", {"vector_weight": 0.5, "text_weight": 0.5}),
            ("present tense = current", {"present_is_current": True}),
            ("recency always (old default)", {"recency": "always"}),
        ]
        min_scores = [0.35, 0.3, 0.25, 0.2, 0.0]
        exp = Scores()
        sizes: dict[str, str] = {}
        for params in chunk_configs:
            chunk_label = (
                f"units, context {params.context_entries}"
                if params.units
                else f"windows {params.target_tokens}/{params.overlap_tokens}"
            )
            if params == DEFAULT_CHUNKS:
                indexed = default_indexed
            else:
                close_all(indexed)
                indexed = index_all(root, conversations, embedder, params)
            sizes[chunk_label] = (
                f"{sum(ix.chunks for ix in indexed)} chunks, "
                f"{sum(ix.split_turns for ix in indexed)} split-turn pieces"
            )
            for name, overrides in variants:
                label = (chunk_label, name)
                for ix in indexed:
                    evaluate(ix, exp, label, "hybrid", ks=(5,), budgets=(1000, 2000), **overrides)
                    for q in ix.conv.questions:
                        found, tokens = inject(ix, q.text, **overrides)
                        exp.add((*label, "inject"), q.category, recall(q.evidence, found))
                        exp.extra[(*label, "inject")].append(tokens)
            if params == DEFAULT_CHUNKS:
                for min_score in min_scores:
                    for ix in indexed:
                        evaluate_defaults(ix, exp, (chunk_label, "ms"), min_score=min_score)
        close_all(indexed)
        exp_seconds = time.perf_counter() - phase

        metrics = ["recall@5", "≤1000 tok", "≤2000 tok", "inject"]
        rows = [(c, w) for (c, w, m) in exp.values if m == "recall@5"]
        base = {c: (c, variants[0][0]) for c, _ in rows}

        def cell(row: tuple[str, ...], column: str) -> str:
            if column == "inject tokens":
                return f"{statistics.fmean(exp.extra[(*row, 'inject')]):.0f}"
            if column.startswith("Δ"):
                metric = column.split()[1]
                return exp.delta((*row, metric), (*base[row[0]], metric))
            return fmt(exp.overall((*row, column)))

        report.add(
            "### Experiment: units × scoring options (hybrid, overall recall)\n\n"
            + "Chunk sizes: "
            + "; ".join(f"{k}: {v}" for k, v in sizes.items())
            + ". `inject` = the app's injection (packed by score until the 2,000-token budget is full, default min_score "
            "budget) with the variant's weights / decay. Δ = paired difference from the "
            "default variant of the same chunk size ± its standard error.\n\n"
            + overall_table(
                rows,
                ["chunks", "variant", *metrics, "inject tokens", "Δ recall@5", "Δ inject"],
                cell,
            )
        )

        default_label = f"units, context {DEFAULT_CHUNKS.context_entries}"
        ms_rows = [(default_label, f"{m:g}") for m in min_scores]

        def ms_cell(row: tuple[str, ...], column: str) -> str:
            chunk_label, m = row
            r5 = (chunk_label, "ms", f"recall@5, min_score {m}")
            inj = (chunk_label, "ms", f"inject (budget-packed, min_score {m})")
            return {
                "recall@5": fmt(exp.overall(r5)),
                "results (of 5)": f"{statistics.fmean(exp.extra[r5]):.2f}",
                "inject": fmt(exp.overall(inj)),
                "inject tokens": f"{statistics.fmean(exp.extra[inj]):.0f}",
            }[column]

        report.add(
            "### Experiment: min_score (other options at their defaults, overall recall)\n\n"
            + overall_table(
                ms_rows,
                ["chunks", "min_score", "recall@5", "results (of 5)", "inject", "inject tokens"],
                ms_cell,
            )
        )
    else:
        close_all(indexed)
    total = time.perf_counter() - started
    timing = (
        f"Runtime {total:.0f} s (default index {index_seconds:.0f} s, main table "
        f"{main_seconds:.0f} s"
        + ("" if args.no_experiments else f", experiments {exp_seconds:.0f} s")
        + "). Indexing: "
        + "; ".join(INDEX_LOG)
        + "."
    )
    report.add(timing)
    if args.out:
        args.out.write_text(report.text(), encoding="utf-8")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
