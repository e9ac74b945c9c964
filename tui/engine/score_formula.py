"""The score formula in words: how :func:`~tui.engine.search.search` ranks a memory, generated
from the options and constants it uses, so the app's help and the README cannot drift."""

from __future__ import annotations

from .options import SearchOptions
from .search import (
    CONFIDENCE_WEIGHTS,
    DECAY_FLOOR,
    NEIGHBOUR_FALLOFF,
    RRF_K,
    WINDOW_OUTSIDE,
    WINDOW_UNDATED,
)
from .search_links import LINK_WEIGHT, SUPERSEDED


def score_formula(options: SearchOptions = SearchOptions()) -> str:
    """How a result's score is computed with ``options``, as the lines the app, its help and
    the README show (generated from the constants, so the explanation cannot drift)."""

    def number(value: float) -> str:
        text = f"{value:.2f}".rstrip("0")
        return text + "0" if text.endswith(".") else text

    if options.fusion == "rrf":
        hybrid = f"hybrid = reciprocal rank fusion of vector and text ranks (k = {RRF_K})"
    else:
        total = options.vector_weight + options.text_weight or 1.0
        hybrid = (
            f"hybrid = {number(options.vector_weight / total)}·vector"
            f" + {number(options.text_weight / total)}·text   (text alone without vectors)"
        )
    text = {
        "idf": "bm25 as a share of the query's summed idf",
        "saturate": "bm25 / (1 + bm25)",
    }.get(options.text_norm, "bm25 relative to the query's best text match")
    confidence = " · ".join(f"{name} {number(w)}" for name, w in CONFIDENCE_WEIGHTS.items())
    if not options.decay:
        decay = "decay = 1   (dates are ignored: decay is off)"
        recency = "recency = 1"
        window = "time_window = 1"
    else:
        decay = (
            f"decay = 0.5^(age in days / {options.half_life_days:g}) for a dated"
            " daily-log entry, 1 for MEMORY.md   (shown; it weighs in only through recency)"
        )
        factor = f"{number(DECAY_FLOOR)} + {number(1 - DECAY_FLOOR)}·decay"
        recency = {
            "always": f"recency = {factor}",
            "never": "recency = 1   (age never weighs in)",
        }.get(
            options.recency,
            f"recency = {factor} when the question asks about the present"
            " (now, currently, these days), else 1",
        )
        window = (
            "time_window = 1 inside the time the question names (a day of slack) or when it names"
            f" none; {number(WINDOW_OUTSIDE)} for a dated entry outside it,"
            f" {number(WINDOW_UNDATED)} for MEMORY.md"
        )
    return "\n".join(
        [
            "score = relevance · recency · time_window · superseded · confidence",
            "relevance = max(hybrid, neighbour, linked)   "
            f"(neighbour = {number(options.neighbour_weight)}·hybrid of an adjacent daily-log entry,"
            f" ×{number(NEIGHBOUR_FALLOFF)} per entry further, up to {options.neighbour_reach};"
            f" linked = {number(LINK_WEIGHT)}·relevance of an entry this one updates)",
            f"superseded = {number(SUPERSEDED)} for an entry a newer one changed, for a MEMORY.md"
            f" entry lower if needed to score {number(SUPERSEDED)}× that entry"
            " (current-state questions), else 1",
            hybrid,
            f"text = {text}; a daily-log entry is full-text indexed with the entry before it,"
            f" whose words count {number(options.context_weight)} (a match through them, or a"
            " neighbour's share, says via L6)",
            recency,
            decay,
            window,
            f"confidence = {confidence}",
        ]
    )
