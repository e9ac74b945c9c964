"""Hybrid search: BM25 and vector candidates, a weighted merge, recency and confidence, with a breakdown.

Every result says why it surfaced: its raw bm25 rank and 0..1 text score, its cosine, the
weighted hybrid, the support lent by an adjacent daily-log entry, the recency and time-window
factors and the confidence multiplier that produced the final score (:func:`score_formula`).

Recency is not applied to every query: a question with no time in it ranks by relevance
alone (the age of a daily log is shown as ``decay`` but does not change the order). A
current-state question ("which editor do I use now") weighs age in (``recency``); a question
naming a time ("last week", "in May 2023") favours the daily logs of that window
(``time_window``).

The result types (:class:`SearchResult`, its :class:`Breakdown`, :class:`SearchResponse`) are
in :mod:`.search_results` and importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, TypeAlias

from .index import ChunkRow, MemoryIndex
from .index_text import Match, RankedMatches
from .options import SearchOptions
from .search_early import EarlyReads, read_early
from .search_fusion import RRF_K as RRF_K
from .search_fusion import hybrid_score as hybrid_score
from .search_fusion import needs_query_idf, rrf_scores, text_scale, text_scores
from .search_links import SUPERSEDED, update_links
from .search_results import Breakdown as Breakdown
from .search_results import SearchResponse as SearchResponse
from .search_results import SearchResult as SearchResult
from .search_results import change_note as change_note
from .search_results import describe_change as describe_change
from .search_via import NEIGHBOUR_FALLOFF as NEIGHBOUR_FALLOFF
from .search_via import explain_via, neighbour_support
from .temporal import TimeIntent, parse_time_intent
from .textsearch import contains_all_terms, has_content_terms
from .workspace import MEMORY_FILE

if TYPE_CHECKING:  # numpy loads at the first search, not with the app
    import numpy as np

    from .vectors import QueryCosines

#: A query's vector, or what waits for it (being computed meanwhile; None: it failed).
QueryVector: TypeAlias = "np.ndarray | Callable[[], np.ndarray | None]"

CONFIDENCE_WEIGHTS = {"high": 1.0, "medium": 0.9, "low": 0.8}
#: A fully decayed chunk keeps this share of its score: decay reorders, it never buries.
DECAY_FLOOR = 0.5
#: A question naming a time also considers up to this many entries dated in that window.
WINDOW_CANDIDATES = 200
#: Dated entries outside the question's window keep this share of their score; undated
#: (MEMORY.md) entries this one. Days of slack around the window count as inside.
WINDOW_OUTSIDE = 0.1
WINDOW_UNDATED = 0.8
WINDOW_SLACK = timedelta(days=1)
#: What a search without a query vector says (the engine says why instead, when it knows).
NO_MODEL_NOTE = "embedding model not loaded: BM25 only"
#: Threshold mode reads at most this many full-text matches.
THRESHOLD_TEXT_LIMIT = 1000


def decay_factor(day: date | None, now: date, half_life_days: float) -> float:
    """``exp(-ln2 · age / half_life)`` for dated chunks; 1.0 for evergreen ones and future dates."""
    if day is None or half_life_days <= 0:
        return 1.0
    age = max(0, (now - day).days)
    return math.exp(-math.log(2) * age / half_life_days)


def search(
    index: MemoryIndex,
    query: str,
    query_vector: QueryVector | None,
    options: SearchOptions = SearchOptions(),
    *,
    now: date | None = None,
    intent: TimeIntent | None = None,
) -> SearchResponse:
    """Hybrid search over the index. Without ``query_vector`` it runs BM25-only (mode ``bm25``).

    ``intent`` is what the question says about time (parsed here when not given); the words
    that named a time window are left out of the full-text query, since the window itself
    selects the entries (``query_vector`` should be of :func:`retrieval_text` likewise).
    ``query_vector`` may be a callable that waits for the vector being computed: the full
    text is ranked meanwhile. If it answers None, the search is BM25-only.

    A chunk passes ``min_score`` on its relevance or by containing every content word of the
    query (a keyword hit is never lost to the threshold). Stages: candidates (vector KNN, full
    text, the time window) → fuse → lend relevance (neighbours, update links) → score → select.
    """
    now = now or date.today()
    query = query.strip()
    response = SearchResponse(
        query=query, mode="hybrid" if query_vector is not None else "bm25", results=[]
    )
    if not query:
        return response
    if intent is None:
        intent = parse_time_intent(query, now) if options.decay else TimeIntent()
    response.intent = intent
    text_query = retrieval_text(query, intent)
    pool = _candidates(index, text_query, query_vector, intent, options, response)
    if pool is None:
        return response
    _fuse(pool, index, text_query, options)
    _lend_relevance(pool, index, text_query, intent, options, now)
    ranked = _select(index, _score_all(pool, query, intent, options, now), pool, options)
    response.results = explain_via(
        index,
        [_result(pool, r, query, options, now) for r in ranked],
        pool.text_parts,
        text_scale=pool.text_scale,
        lenders=pool.lenders,
    )
    future = sorted(
        {row.path for i, row in pool.rows.items() if i in pool.hybrids and _future(row, now)}
    )
    if future:
        response.notes.append(
            f"dated after today, so they never mark other entries as outdated: {', '.join(future)}"
        )
    return response


@dataclass
class _Pool:
    """The candidates of one query and what each stage found out about them."""

    query_vector: np.ndarray | None
    #: The query's cosines with the stored vectors (None: no vector).
    cosines: QueryCosines | None
    #: How many candidates a ranked list contributes (unbounded with a threshold).
    size: int
    threshold_mode: bool
    rows: dict[int, ChunkRow]
    #: The candidates in the order they were found (text, vector, window).
    order: list[int]
    #: Raw bm25 rank of each full-text match.
    text_hits: dict[int, float]
    #: The bm25 ranks of each match's own words and of its context's (0.0: none matched).
    text_parts: dict[int, tuple[float, float]]
    #: Cosine of each candidate with a vector (0..1 once fused).
    vectors: dict[int, float]
    texts: dict[int, float] = field(default_factory=dict)
    hybrids: dict[int, float] = field(default_factory=dict)
    #: The divisor of the text scores (see :func:`text_scale`).
    text_scale: float | None = None
    support: dict[int, float] = field(default_factory=dict)
    #: Where each entry's ``support`` came from (the lending entry's location).
    lenders: dict[int, str] = field(default_factory=dict)
    linked: dict[int, float] = field(default_factory=dict)
    #: Entries a newer linked entry changed, each with the entries that changed it.
    superseded: dict[int, set[int]] = field(default_factory=dict)
    #: The query's idf, when it was read before the vector came (None: not read).
    query_idf: float | None = None


def _candidates(
    index: MemoryIndex,
    text_query: str,
    query_vector: QueryVector | None,
    intent: TimeIntent,
    options: SearchOptions,
    response: SearchResponse,
) -> _Pool | None:
    """Stage 1: the nearest vectors, the full-text matches and the entries of the question's
    time window, with their rows (None when nothing matched). When the query's vector is
    being computed, the best full-text matches are read meanwhile (:func:`read_early`)."""
    threshold_mode = options.threshold is not None
    size = max(1, options.max_results * options.candidate_multiplier)
    if query_vector is not None and len(index.ensure_mirror()) == 0:
        response.mode = "bm25"
        response.notes.append("no vectors indexed yet: BM25 only")
        query_vector = None
    elif query_vector is None:
        response.notes.append(NO_MODEL_NOTE)
    window_ids: list[int] = []
    if intent.window is not None:
        window_ids = index.chunk_ids_between(*intent.window, limit=WINDOW_CANDIDATES)
    wants_text = has_content_terms(text_query) or intent.window is None
    text_limit = THRESHOLD_TEXT_LIMIT if threshold_mode else size
    ranked_first = callable(query_vector)
    ranked = None
    early = EarlyReads()
    if callable(query_vector):
        # The text is ranked first, while the vector being computed gets ready.
        ranked = _rank_text(index, text_query, wants_text, True, options)
        if ranked is not None:
            early = read_early(index, ranked, text_limit, size, text_query, options)
        query_vector = query_vector()
        if query_vector is None:  # the embedding failed (the caller may say why instead)
            response.mode = "bm25"
            response.notes.append(NO_MODEL_NOTE)
            ranked = _rank_text(index, text_query, wants_text, False, options)
            early.best = None  # of the matches as first ranked
    cosines = (
        index.ensure_mirror().nearest(query_vector, size, options.threshold)
        if query_vector is not None
        else None
    )
    vector_hits = dict(cosines.hits) if cosines is not None else {}
    also = list(dict.fromkeys([*vector_hits, *window_ids]))[:THRESHOLD_TEXT_LIMIT]
    matches: list[Match] = []
    if ranked is not None:
        matches = ranked.take(text_limit, also, best=early.best)
    elif wants_text and not ranked_first:
        matches = index.fts_matches(
            text_query,
            text_limit,
            also=also,
            vectors_ran=query_vector is not None,
            context_weight=options.context_weight,
            every_word=options.fusion == "rrf",
        )
    text_hits = {chunk_id: rank for chunk_id, rank, _, _ in matches}
    candidate_ids = list(dict.fromkeys([*text_hits, *vector_hits, *window_ids]))
    if not candidate_ids:
        return None
    if cosines is not None:
        vector_hits.update(cosines.of([i for i in candidate_ids if i not in vector_hits]))
    return _Pool(
        query_vector=query_vector,
        cosines=cosines,
        size=size,
        threshold_mode=threshold_mode,
        rows=early.rows_of(index, candidate_ids),
        order=candidate_ids,
        text_hits=text_hits,
        text_parts={chunk_id: (own, context) for chunk_id, _, own, context in matches},
        vectors=vector_hits,
        query_idf=early.query_idf,
    )


def _rank_text(
    index: MemoryIndex, text_query: str, wanted: bool, vectors_ran: bool, options: SearchOptions
) -> RankedMatches | None:
    """Every full-text match of the query, ranked (None: not wanted, or nothing to search)."""
    if not wanted:
        return None
    return index.rank_matches(
        text_query,
        vectors_ran=vectors_ran,
        context_weight=options.context_weight,
        every_word=options.fusion == "rrf",  # it counts a match by its place, not its score
    )


def _fuse(pool: _Pool, index: MemoryIndex, text_query: str, options: SearchOptions) -> None:
    """Stage 2: each candidate's text score and hybrid (weighted, or reciprocal rank fusion)."""
    query_idf = 0.0  # the max-normalised score ignores a zero idf
    if pool.text_hits and needs_query_idf(options, with_vectors=pool.query_vector is not None):
        query_idf = pool.query_idf if pool.query_idf is not None else index.query_idf(text_query)
    pool.text_scale = text_scale(pool.text_hits, options, query_idf)
    pool.texts = text_scores(pool.text_hits, options, query_idf)
    pool.vectors = (
        {i: max(0.0, min(1.0, v)) for i, v in pool.vectors.items()}
        if pool.query_vector is not None
        else {}
    )
    fused = (
        rrf_scores(pool.texts, pool.vectors, options)
        if options.fusion == "rrf" and pool.vectors
        else None
    )
    for chunk_id in pool.order:
        if chunk_id in pool.rows:
            pool.hybrids[chunk_id] = (
                fused.get(chunk_id, 0.0)
                if fused is not None
                else hybrid_score(
                    pool.vectors.get(chunk_id), pool.texts.get(chunk_id, 0.0), options
                )
            )


def _lend_relevance(
    pool: _Pool,
    index: MemoryIndex,
    text_query: str,
    intent: TimeIntent,
    options: SearchOptions,
    now: date,
) -> None:
    """Stage 3: relevance lent by neighbouring daily-log entries and along update links; the
    entries that came in only that way join the pool."""
    direction = _link_direction(intent, options)
    if options.neighbour_weight > 0:
        reach = len(pool.hybrids) if pool.threshold_mode else pool.size
        # Unless update links or a time window may lift an entry, one left under the floor
        # is dropped: neighbours that cannot reach it are not read.
        lifted = direction is not None or intent.window is not None
        pool.support, pool.lenders = neighbour_support(
            index,
            pool.rows,
            pool.hybrids,
            options,
            reach,
            floor=None if lifted else _floor(options),
            own=lambda ids: _own_scores(pool, ids, options),
        )
        _add_candidates(pool, pool.support, options)
    if direction is not None:
        pool.linked, pool.superseded = update_links(
            index, pool.rows, pool.hybrids, pool.support, text_query, direction, now
        )
        _add_candidates(pool, pool.linked, options)


@dataclass(slots=True)
class _Ranked:
    """A candidate that passes the floor and the factors of its score; its breakdown is built
    only if it is returned (:func:`_result`)."""

    row: ChunkRow
    relevance: float
    recency: float
    window: float
    weight: float
    superseded: float
    score: float
    #: Whether it holds every content word of the query (None: not checked yet).
    keyword_hit: bool | None
    changed_by: str = ""

    @property
    def chunk_id(self) -> int:
        return self.row.id


def _score_all(
    pool: _Pool, query: str, intent: TimeIntent, options: SearchOptions, now: date
) -> list[_Ranked]:
    """Stage 4: the score of each candidate that passes the floor (its relevance, a keyword
    hit, or the question's time window), best first. The keyword check reads the entry's words
    (~30 µs), so it runs here only where it decides whether the entry passes."""
    floor = _floor(options)
    ranked: list[_Ranked] = []
    for chunk_id, hybrid in pool.hybrids.items():
        relevance = max(hybrid, pool.support.get(chunk_id, 0.0), pool.linked.get(chunk_id, 0.0))
        matched = chunk_id in pool.text_hits
        if relevance < floor and not matched and intent.window is None:
            continue
        row = pool.rows[chunk_id]
        window = window_factor(row.date, intent) if options.decay else 1.0
        keyword_hit = (
            None if relevance >= floor else matched and _keyword_hit(row.heading, row.text, query)
        )
        if not (relevance >= floor or keyword_hit or (window == 1.0 and intent.window is not None)):
            continue
        recency = recency_factor(row.date, now, intent, options)
        superseded = SUPERSEDED if chunk_id in pool.superseded else 1.0
        weight = CONFIDENCE_WEIGHTS.get(row.confidence, CONFIDENCE_WEIGHTS["medium"])
        score = relevance * recency * window * superseded * weight
        ranked.append(
            _Ranked(row, relevance, recency, window, weight, superseded, score, keyword_hit)
        )
    if pool.superseded:
        _below_their_updates(ranked, pool.superseded, pool.rows)
    ranked.sort(key=lambda r: (-r.score, r.row.path, r.row.start_line))
    return ranked


def _below_their_updates(
    ranked: list[_Ranked], superseded: dict[int, set[int]], rows: dict[int, ChunkRow]
) -> None:
    """Each entry a newer one changed names it (``changed_by``: the best-scoring of them); a
    MEMORY.md entry also scores at most ``SUPERSEDED`` × its score (its ``superseded`` factor
    lowered to that): on a question about now, the change outranks the fact it ended, which
    MEMORY.md never lets decay ("My editor is Vim" against a two-month-old "Switched from Vim
    to Zed"). Between daily logs recency does that already; the same cap there cost LoCoMo
    (.646 -> .640 recall@5) for one more recency case."""
    scores = {r.chunk_id: r.score for r in ranked}  # before any cap
    for entry in ranked:
        changers = sorted(
            (i for i in superseded.get(entry.chunk_id, ()) if i in rows),
            key=lambda i: -scores.get(i, -1.0),
        )
        if not changers:
            continue
        entry.changed_by = rows[changers[0]].location
        if changers[0] in scores:
            cap = SUPERSEDED * scores[changers[0]]
            if entry.row.path == MEMORY_FILE and entry.score > cap > 0:
                entry.superseded = entry.superseded * cap / entry.score
                entry.score = cap


def _select(
    index: MemoryIndex, ranked: list[_Ranked], pool: _Pool, options: SearchOptions
) -> list[_Ranked]:
    """Stage 5: the results returned: the best ``max_results`` (all, with a threshold),
    diversified by maximal marginal relevance when asked."""
    limit = None if pool.threshold_mode else options.max_results
    if options.mmr and pool.query_vector is not None and len(ranked) > 1:
        ranked = _mmr(index, ranked, options.mmr_lambda, limit)
    return ranked if limit is None else ranked[:limit]


def _floor(options: SearchOptions) -> float:
    """The relevance a result needs (unless it is a keyword hit or in the time window)."""
    return options.threshold if options.threshold is not None else options.min_score


def _keyword_hit(heading: str, text: str, query: str) -> bool:
    return contains_all_terms(f"{heading}\n{text}", query)


def _result(
    pool: _Pool, ranked: _Ranked, query: str, options: SearchOptions, now: date
) -> SearchResult:
    """A returned candidate with the breakdown of its score."""
    row, chunk_id = ranked.row, ranked.chunk_id
    rank = pool.text_hits.get(chunk_id)
    keyword_hit = ranked.keyword_hit
    if keyword_hit is None:
        keyword_hit = rank is not None and _keyword_hit(row.heading, row.text, query)
    breakdown = Breakdown(
        bm25=rank,
        text=pool.texts.get(chunk_id, 0.0),
        vector=pool.vectors.get(chunk_id) if pool.query_vector is not None else None,
        hybrid=pool.hybrids[chunk_id],
        neighbour=pool.support.get(chunk_id, 0.0),
        relevance=ranked.relevance,
        decay=decay_factor(row.date, now, options.half_life_days) if options.decay else 1.0,
        confidence=row.confidence,
        confidence_weight=ranked.weight,
        keyword_hit=keyword_hit,
        recency=ranked.recency,
        time_window=ranked.window,
        linked=pool.linked.get(chunk_id, 0.0),
        superseded=ranked.superseded,
        changed_by=ranked.changed_by,
    )
    return SearchResult(
        row.id,
        row.path,
        row.start_line,
        row.end_line,
        row.heading,
        row.text,
        ranked.score,
        breakdown,
    )


def _future(row: ChunkRow, now: date) -> bool:
    return row.date is not None and row.date > now


def retrieval_text(query: str, intent: TimeIntent) -> str:
    """The query without the words that named its time window ("in May 2023") or asked for
    the present ("these days": its "days" would match every "day 3" in the logs).

    What remains may be only stop words ("what did I do yesterday?"): then the window is the
    whole question, and the remaining words must not pick entries by themselves.
    """
    if not intent.phrase or intent.window is None and not intent.current:
        return query
    start = query.lower().find(intent.phrase.lower())
    if start < 0:
        return query
    return " ".join((query[:start] + " " + query[start + len(intent.phrase) :]).split())


def asks_current_state(intent: TimeIntent, options: SearchOptions) -> bool:
    """A current-state marker ("now", "these days"), or the present tense in a question about
    the user ("which editor do I use?"); with ``present_is_current``, any present tense."""
    if intent.current:
        return True
    return intent.present_tense and (intent.first_person or options.present_is_current)


def recency_factor(
    day: date | None, now: date, intent: TimeIntent, options: SearchOptions
) -> float:
    """How much a result's age changes its score: 1.0 unless the question asks for the present."""
    if not options.decay or options.recency == "never":
        return 1.0
    if options.recency == "intent" and not asks_current_state(intent, options):
        return 1.0
    decay = decay_factor(day, now, options.half_life_days)
    return DECAY_FLOOR + (1.0 - DECAY_FLOOR) * decay


def window_factor(day: date | None, intent: TimeIntent) -> float:
    """1.0 inside the question's time window (or without one), less for other dated entries."""
    if intent.window is None:
        return 1.0
    if day is None:
        return WINDOW_UNDATED
    start, end = intent.window
    if start <= day + WINDOW_SLACK and day - WINDOW_SLACK <= end:
        return 1.0
    return WINDOW_OUTSIDE


def _add_candidates(pool: _Pool, lent: dict[int, float], options: SearchOptions) -> None:
    """Score the entries that only came in through ``lent`` relevance (no text match)."""
    pool.hybrids.update(_own_scores(pool, [i for i in lent if i not in pool.hybrids], options))


def _own_scores(pool: _Pool, ids: list[int], options: SearchOptions) -> dict[int, float]:
    """The hybrid of entries that are no full-text match: their vector's alone (0 without
    vectors); their cosines are kept in ``pool.vectors``."""
    if pool.cosines is not None and ids:
        fresh = pool.cosines.of([i for i in ids if i not in pool.vectors])
        pool.vectors.update((i, max(0.0, min(1.0, cosine))) for i, cosine in fresh.items())
    return {
        i: hybrid_score(pool.vectors.get(i), 0.0, options) if pool.vectors else 0.0 for i in ids
    }


def _link_direction(intent: TimeIntent, options: SearchOptions) -> str | None:
    """Which way update links run: to newer entries for a current-state question, to older
    ones for a question about an earlier state ("before Zed", "my old dog"), else none."""
    if not options.decay or options.recency == "never":
        return None
    if asks_current_state(intent, options):
        return "newer"
    if intent.past_state:
        return "older"
    return None


def _mmr(index: MemoryIndex, ranked: list[_Ranked], lam: float, limit: int | None) -> list[_Ranked]:
    """Maximal marginal relevance: trade a little score for less repetition."""
    vectors = index.mirror.vectors_for([r.chunk_id for r in ranked])
    chosen: list[_Ranked] = []
    remaining = list(ranked)
    while remaining and (limit is None or len(chosen) < limit):

        def gain(candidate: _Ranked) -> float:
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
