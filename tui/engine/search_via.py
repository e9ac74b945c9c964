"""Relevance that comes through another entry of a daily log, and what the breakdown says of it.

A log is a narrative: the answer often sits beside the line that matched, so a relevant entry
lends its neighbours a share of its relevance (:func:`neighbour_support`), and a unit is
full-text indexed with the entry before it (its context, weighed ``context_weight``). Either
way the breakdown names the entry the relevance came through (:func:`explain_via`: ``via L6``),
so a result that only neighbours the words says so.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace

from .index import ChunkRow, MemoryIndex
from .options import SearchOptions
from .search_results import SearchResult

#: Each entry further from a relevant one is lent this share of what the nearer one got.
NEIGHBOUR_FALLOFF = 0.8


def neighbour_support(
    index: MemoryIndex,
    rows: dict[int, ChunkRow],
    hybrids: dict[int, float],
    options: SearchOptions,
    top: int,
    *,
    floor: float | None = None,
    own: Callable[[list[int]], dict[int, float]] | None = None,
) -> tuple[dict[int, float], dict[int, str]]:
    """Relevance lent to the daily-log entries near the ``top`` best candidates, and where
    each entry's support came from (the location of the entry that lent it).

    Entries of one file are stored with consecutive ids, so a unit's neighbours are its id ± k
    while they sit in the same file: the next one gets ``neighbour_weight`` × its hybrid, each
    further step ``NEIGHBOUR_FALLOFF`` less, up to ``neighbour_reach`` entries away. Rows of
    neighbours that were not candidates are added to ``rows``.

    With ``floor`` (the caller drops whatever stays under it) and ``own`` (the relevance of
    entries that are no candidates: their vector's), a neighbour that is no candidate is read
    only when it may reach the floor, lent or by itself, or lies on the way to one that may.
    """
    reach = max(1, options.neighbour_reach)
    # (the best ``top`` of every candidate: a full sort of hundreds cost more than the rest)
    best = heapq.nlargest(
        top, (i for i in hybrids if rows[i].date is not None), key=hybrids.__getitem__
    )
    wanted = {i + k * side for i in best for k in range(1, reach + 1) for side in (-1, 1)}
    missing = [n for n in wanted if n not in rows]
    if floor is not None and own is not None and missing:
        worth = _worth_reading(best, hybrids, set(missing), options, floor, own(missing))
        missing = [n for n in missing if n in worth]
    rows.update(index.chunks_by_id(missing))
    support: dict[int, float] = {}
    lenders: dict[int, str] = {}
    for chunk_id in best:
        path = rows[chunk_id].path
        for side in (-1, 1):
            lent = options.neighbour_weight * hybrids[chunk_id]
            for k in range(1, reach + 1):
                row = rows.get(chunk_id + side * k)
                if row is None or row.path != path:
                    break
                if lent > support.get(row.id, 0.0):
                    support[row.id] = lent
                    lenders[row.id] = rows[chunk_id].location
                lent *= NEIGHBOUR_FALLOFF
    return support, lenders


def _worth_reading(
    best: list[int],
    hybrids: dict[int, float],
    unread: set[int],
    options: SearchOptions,
    floor: float,
    own: dict[int, float],
) -> set[int]:
    """The ``unread`` neighbours :func:`neighbour_support` needs: those that may reach
    ``floor`` (the most they can be lent, or ``own``) and those on the way to one of them or to
    a candidate (the way must be seen to run through one file)."""
    needed: set[int] = set()
    for chunk_id in best:
        for side in (-1, 1):
            lent = options.neighbour_weight * hybrids[chunk_id]
            way: list[int] = []
            for k in range(1, max(1, options.neighbour_reach) + 1):
                neighbour = chunk_id + side * k
                way.append(neighbour)
                if neighbour not in unread or lent >= floor or own[neighbour] >= floor:
                    needed.update(way)
                    way.clear()
                lent *= NEIGHBOUR_FALLOFF
    return needed & unread


def explain_via(
    index: MemoryIndex,
    results: list[SearchResult],
    text_parts: dict[int, tuple[float, float]],
    *,
    text_scale: float | None,
    lenders: dict[int, str],
) -> list[SearchResult]:
    """``results`` with their breakdown's ``text_own``, ``text_via`` and ``neighbour_via``.

    ``text_parts``: each full-text match's bm25 ranks of its own words and of its context's
    (:meth:`~tui.engine.index.MemoryIndex.fts_matches`). ``text_scale``: what a bm25 strength
    is divided by to make the 0..1 text score (None: :func:`~tui.engine.textsearch.bm25_to_unit`);
    the own words' score is made the same way, so ``text_own`` = ``text`` when the context
    matched none of the query. An index built before the context had a column of its own tells
    nothing: its results say nothing of it.
    """
    columns = {r.chunk_id: text_parts[r.chunk_id] for r in results if r.chunk_id in text_parts}
    places = _context_places(
        index, {r.chunk_id: r.path for r in results if -columns.get(r.chunk_id, (0, 0))[1] > 0}
    )
    explained = []
    for result in results:
        b = result.breakdown
        neighbour_via = lenders.get(result.chunk_id, "") if b.neighbour > 0 else ""
        text_own, text_via = b.own_text, ""
        if result.chunk_id in columns:
            text_via = places.get(result.chunk_id, "")
            own = max(0.0, -columns[result.chunk_id][0])
            if not text_via:
                text_own = b.text  # no context matched (or an old index): all its own words
            elif text_scale is None:
                text_own = own / (1.0 + own)
            else:
                text_own = min(1.0, own / text_scale) if text_scale > 0 else 0.0
        if (text_own, text_via, neighbour_via) != (b.text_own, b.text_via, b.neighbour_via):
            b = replace(b, text_own=text_own, text_via=text_via, neighbour_via=neighbour_via)
            result = replace(result, breakdown=b)
        explained.append(result)
    return explained


def _context_places(index: MemoryIndex, paths: dict[int, str]) -> dict[int, str]:
    """Where the context of each unit of ``paths`` (its id: its file) is: the entries just
    before it in its file whose text it holds (``path#Lfirst-last``)."""
    if not paths:
        return {}
    contexts = {i: c for i, c in index.contexts(list(paths)).items() if c}
    before = index.chunks_by_id(
        sorted({i - k for i, c in contexts.items() for k in range(1, c.count("\n") + 2)})
    )
    places: dict[int, str] = {}
    for chunk_id, context in contexts.items():
        found: list[ChunkRow] = []
        while (row := before.get(chunk_id - len(found) - 1)) is not None:
            if row.path != paths[chunk_id] or row.text not in context:
                break
            found.append(row)
        if found:
            places[chunk_id] = f"{found[0].path}#L{found[-1].start_line}-{found[0].end_line}"
    return places
