"""How a search's text and vector scores become one: 0..1 text scores of FTS5's bm25 ranks, and
the weighted merge or reciprocal rank fusion of both (:func:`~tui.engine.search.search`'s
stage 2)."""

from __future__ import annotations

from .options import SearchOptions
from .textsearch import bm25_to_unit

#: Reciprocal-rank-fusion constant.
RRF_K = 60


def hybrid_score(vector: float | None, text: float, options: SearchOptions) -> float:
    """Weighted merge of vector and text scores, weights normalised; text alone without vectors."""
    if vector is None:
        return text
    total = options.vector_weight + options.text_weight
    if total <= 0:
        return 0.0
    return (options.vector_weight * vector + options.text_weight * text) / total


def text_scores(
    ranks: dict[int, float], options: SearchOptions, query_idf: float = 0.0
) -> dict[int, float]:
    """0..1 text scores of FTS5 bm25 ranks (negative, lower is better) for one query.

    ``idf``: the share of the query a match covers (bm25 over the query terms' summed idf),
    so one common word matched scores low and every rare word matched scores near 1.
    """
    scale = text_scale(ranks, options, query_idf)
    if scale is None:
        return {i: bm25_to_unit(rank) for i, rank in ranks.items()}
    return {
        i: (min(1.0, max(0.0, -rank) / scale) if scale > 0 else 0.0) for i, rank in ranks.items()
    }


def text_scale(ranks: dict[int, float], options: SearchOptions, query_idf: float) -> float | None:
    """What :func:`text_scores` divides a bm25 strength by: the query's best match (``max``,
    at least ``text_floor`` of its idf) or its summed idf; None: :func:`bm25_to_unit`."""
    if options.text_norm == "idf" and query_idf > 0:
        return query_idf
    if options.text_norm == "max":
        best = max((max(0.0, -rank) for rank in ranks.values()), default=0.0)
        return max(best, options.text_floor * query_idf)
    return None


def rrf_scores(
    text: dict[int, float], vector: dict[int, float], options: SearchOptions
) -> dict[int, float]:
    """Reciprocal rank fusion, scaled so a candidate ranked first by both scores 1.0."""
    fused: dict[int, float] = {}
    total = options.vector_weight + options.text_weight
    for scores, weight in ((text, options.text_weight), (vector, options.vector_weight)):
        ordered = sorted(scores, key=lambda i: -scores[i])
        for rank, chunk_id in enumerate(ordered, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (RRF_K + rank)
    scale = (RRF_K + 1) / total if total > 0 else 0.0
    return {i: v * scale for i, v in fused.items()}


def needs_query_idf(options: SearchOptions, *, with_vectors: bool) -> bool:
    """Whether the text scores need the query's idf: its own normalisation, or the floor of the
    max-normalised score, which is on only beside vectors (text alone, where a lone word
    matched may be all there is, keeps the best match at 1)."""
    floor = options.text_norm == "max" and bool(options.text_floor) and with_vectors
    return options.text_norm == "idf" or floor
