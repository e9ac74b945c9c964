"""The knobs of search and injection, apart from the code that uses them: the config reads
them before (and without) loading the index, numpy or the model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchOptions:
    """Search knobs; defaults follow OpenClaw."""

    max_results: int = 6
    min_score: float = 0.3
    candidate_multiplier: int = 4
    vector_weight: float = 0.7
    text_weight: float = 0.3
    half_life_days: float = 30.0
    #: False: ignore dates altogether (no recency, no time windows).
    decay: bool = True
    #: When age weighs in: "intent" (current-state questions only), "always", or "never".
    recency: str = "intent"
    #: With ``recency="intent"``: a present-tense question ("where do I live?") counts as
    #: asking for the current state, not only one with a marker ("now", "these days").
    present_is_current: bool = False
    #: How the bm25 strength becomes a 0..1 text score: "max" (relative to the query's best
    #: text match), "idf" (share of the query's summed idf) or "saturate" (:func:`bm25_to_unit`).
    text_norm: str = "max"
    #: With ``text_norm="max"`` and vectors: the best text match scores 1 only when it covers at
    #: least this share of the query's summed idf, so a lone common word matched scores less and
    #: cannot carry an unrelated memory past ``min_score`` (0: off; BM25-only search skips it).
    text_floor: float = 0.3
    #: "weighted" (vector_weight·vector + text_weight·text) or "rrf" (reciprocal rank fusion).
    fusion: str = "weighted"
    #: A daily-log entry next to a relevant one (same file) is relevant by this share of it:
    #: a log is a narrative, and the answer often sits beside the line that matched.
    neighbour_weight: float = 0.9
    #: What a word of a daily-log unit's context (the entry before it, indexed with it) counts
    #: for in the full-text score, against 1 for a word of its own text.
    #: 0.5 kept LoCoMo's recall (docs/retrieval.md) and ranks the entry that holds the words
    #: above the one after it.
    context_weight: float = 0.5
    #: How many entries away from a relevant one the support reaches (each step further lends
    #: ``NEIGHBOUR_FALLOFF`` less).
    neighbour_reach: int = 2
    mmr: bool = False
    mmr_lambda: float = 0.7
    #: Threshold mode: every result whose relevance reaches this, with no fixed cap.
    threshold: float | None = None


@dataclass(frozen=True)
class InjectionOptions:
    """Budget knobs. Tokens are counted in the embedding tokenizer's word-pieces (close to LLM tokens)."""

    budget_tokens: int = 2000
    #: MEMORY.md may take at most this share of the budget when relevant memories compete for it.
    memory_share: float = 0.6
    #: Search results offered to the budget, best first; packing stops when the budget is full.
    #: 60 units of ~35 tokens overfill 2,000 tokens; more cost time and carried no more evidence
    #: on LoCoMo (100 results from a pool of 400: same recall, 2.6x the time).
    max_memories: int = 60
    #: Candidates searched per offered result (search's default is 4).
    candidate_multiplier: int = 2
