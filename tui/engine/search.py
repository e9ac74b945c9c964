"""Hybrid search: BM25 and vector candidates, a weighted merge, decay and confidence, with a breakdown.

Every result says why it surfaced: its raw bm25 rank and 0..1 text score, its cosine, the
weighted hybrid, the time decay and the confidence multiplier that produced the final score.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import date

import numpy as np

from .index import ChunkRow, MemoryIndex
from .textsearch import bm25_to_unit, contains_all_terms

CONFIDENCE_WEIGHTS = {"high": 1.0, "medium": 0.9, "low": 0.8}
#: A fully decayed chunk keeps this share of its score: decay reorders, it never buries.
DECAY_FLOOR = 0.5
#: Threshold mode reads at most this many full-text matches.
THRESHOLD_TEXT_LIMIT = 1000


@dataclass(frozen=True)
class SearchOptions:
    """Search knobs; defaults follow OpenClaw."""

    max_results: int = 6
    min_score: float = 0.35
    candidate_multiplier: int = 4
    vector_weight: float = 0.7
    text_weight: float = 0.3
    half_life_days: float = 30.0
    decay: bool = True
    mmr: bool = False
    mmr_lambda: float = 0.7
    #: Threshold mode: every result whose relevance reaches this, with no fixed cap.
    threshold: float | None = None


@dataclass(frozen=True)
class Breakdown:
    """Why a result surfaced."""

    bm25: float | None
    text: float
    vector: float | None
    hybrid: float
    decay: float
    confidence: str
    confidence_weight: float
    keyword_hit: bool


@dataclass(frozen=True)
class SearchResult:
    """One search hit with its score breakdown."""

    chunk_id: int
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    breakdown: Breakdown

    @property
    def location(self) -> str:
        """``path#Lstart-Lend``."""
        return f"{self.path}#L{self.start_line}-{self.end_line}"

    def to_json(self) -> dict[str, object]:
        """The CLI's JSON shape of a result."""
        breakdown = asdict(self.breakdown)
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "text": self.text,
            "score": round(self.score, 6),
            "breakdown": {
                k: (round(v, 6) if isinstance(v, float) else v) for k, v in breakdown.items()
            },
        }


@dataclass
class SearchResponse:
    """Results of a query, the mode that produced them and anything the user should know."""

    query: str
    mode: str
    results: list[SearchResult]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "results": [r.to_json() for r in self.results],
            "notes": self.notes,
        }


def decay_factor(day: date | None, now: date, half_life_days: float) -> float:
    """``exp(-ln2 · age / half_life)`` for dated chunks; 1.0 for evergreen ones and future dates."""
    if day is None or half_life_days <= 0:
        return 1.0
    age = max(0, (now - day).days)
    return math.exp(-math.log(2) * age / half_life_days)


def hybrid_score(vector: float | None, text: float, options: SearchOptions) -> float:
    """Weighted merge of vector and text scores, weights normalised; text alone without vectors."""
    if vector is None:
        return text
    total = options.vector_weight + options.text_weight
    if total <= 0:
        return 0.0
    return (options.vector_weight * vector + options.text_weight * text) / total


def search(
    index: MemoryIndex,
    query: str,
    query_vector: np.ndarray | None,
    options: SearchOptions = SearchOptions(),
    *,
    now: date | None = None,
) -> SearchResponse:
    """Hybrid search over the index. Without ``query_vector`` it runs BM25-only (mode ``bm25``).

    A chunk passes the ``min_score`` filter on its relevance (the hybrid score) or because it
    contains every content word of the query, so an exact keyword hit is never lost to a
    threshold above the text weight. Decay and confidence then order what passed.
    """
    now = now or date.today()
    query = query.strip()
    response = SearchResponse(
        query=query, mode="hybrid" if query_vector is not None else "bm25", results=[]
    )
    if not query:
        return response
    threshold_mode = options.threshold is not None
    pool = None if threshold_mode else max(1, options.max_results * options.candidate_multiplier)

    vector_hits: dict[int, float] = {}
    if query_vector is not None:
        mirror = index.ensure_mirror()
        if len(mirror) == 0:
            response.mode = "bm25"
            response.notes.append("no vectors indexed yet: BM25 only")
            query_vector = None
        elif threshold_mode:
            vector_hits = dict(mirror.above(query_vector, options.threshold))
        else:
            vector_hits = dict(mirror.knn(query_vector, pool))
    else:
        response.notes.append("embedding model not loaded: BM25 only")
    text_limit = THRESHOLD_TEXT_LIMIT if threshold_mode else pool
    text_hits = dict(
        index.fts_candidates(query, text_limit, also=list(vector_hits)[:THRESHOLD_TEXT_LIMIT])
    )

    candidate_ids = list(dict.fromkeys([*text_hits, *vector_hits]))
    if not candidate_ids:
        return response
    if query_vector is not None:
        missing = [i for i in candidate_ids if i not in vector_hits]
        for chunk_id, vector in index.mirror.vectors_for(missing).items():
            vector_hits[chunk_id] = float(vector @ query_vector)
    rows = index.chunks_by_id(candidate_ids)

    floor = options.threshold if threshold_mode else options.min_score
    scored: list[SearchResult] = []
    for chunk_id in candidate_ids:
        row = rows.get(chunk_id)
        if row is None:
            continue
        result = _score(
            row,
            text_hits.get(chunk_id),
            vector_hits.get(chunk_id) if query_vector is not None else None,
            query,
            options,
            now,
        )
        if result.breakdown.hybrid >= floor or result.breakdown.keyword_hit:
            scored.append(result)
    scored.sort(key=lambda r: (-r.score, r.path, r.start_line))
    if options.mmr and query_vector is not None and len(scored) > 1:
        scored = _mmr(
            index, scored, options.mmr_lambda, None if threshold_mode else options.max_results
        )
    response.results = scored if threshold_mode else scored[: options.max_results]
    return response


def _score(
    row: ChunkRow,
    rank: float | None,
    cosine: float | None,
    query: str,
    options: SearchOptions,
    now: date,
) -> SearchResult:
    text = bm25_to_unit(rank) if rank is not None else 0.0
    vector = max(0.0, min(1.0, cosine)) if cosine is not None else None
    hybrid = hybrid_score(vector, text, options)
    decay = decay_factor(row.date, now, options.half_life_days) if options.decay else 1.0
    weight = CONFIDENCE_WEIGHTS.get(row.confidence, CONFIDENCE_WEIGHTS["medium"])
    score = hybrid * (DECAY_FLOOR + (1.0 - DECAY_FLOOR) * decay) * weight
    breakdown = Breakdown(
        bm25=rank,
        text=text,
        vector=vector,
        hybrid=hybrid,
        decay=decay,
        confidence=row.confidence,
        confidence_weight=weight,
        keyword_hit=rank is not None and contains_all_terms(f"{row.heading}\n{row.text}", query),
    )
    return SearchResult(
        row.id, row.path, row.start_line, row.end_line, row.heading, row.text, score, breakdown
    )


def _mmr(
    index: MemoryIndex, ranked: list[SearchResult], lam: float, limit: int | None
) -> list[SearchResult]:
    """Maximal marginal relevance: trade a little score for less repetition."""
    vectors = index.mirror.vectors_for([r.chunk_id for r in ranked])
    chosen: list[SearchResult] = []
    remaining = list(ranked)
    while remaining and (limit is None or len(chosen) < limit):

        def gain(candidate: SearchResult) -> float:
            vec = vectors.get(candidate.chunk_id)
            similarity = max(
                (
                    float(vec @ vectors[c.chunk_id])
                    for c in chosen
                    if vec is not None and c.chunk_id in vectors
                ),
                default=0.0,
            )
            return lam * candidate.score - (1 - lam) * similarity

        best = max(remaining, key=gain)
        chosen.append(best)
        remaining.remove(best)
    return chosen
