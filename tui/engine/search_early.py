"""What a search reads of its best full-text matches while its query's vector is computed on
another thread (:func:`read_early`).

These are reads the search makes anyway, after the vector arrives, when it was not started
early: the best matches (a few more than the search takes: with the vector's candidates among
them, the best others are still known), their rows and the query's idf. Made sooner, on the
thread that would otherwise wait, they leave less to do once the vector is there. (Their
keyword hits were tried too: a search tests only some of its candidates, and testing all of
them early cost 0.4 ms of CPU for 0.05 ms less wait.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .index import ChunkRow, MemoryIndex
from .index_text import Match, RankedMatches
from .options import SearchOptions
from .search_fusion import needs_query_idf


@dataclass
class EarlyReads:
    """Matches, rows and the query's idf read before the query's vector was there."""

    #: The best matches, and how many were asked for (see :meth:`RankedMatches.take`).
    best: tuple[list[Match], int] | None = None
    rows: dict[int, ChunkRow] = field(default_factory=dict)
    #: None: not read.
    query_idf: float | None = None

    def rows_of(self, index: MemoryIndex, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` (missing ids left out): those read early, the others now."""
        rows = {i: self.rows[i] for i in ids if i in self.rows}
        rows.update(index.chunks_by_id([i for i in ids if i not in rows]))
        return rows


def read_early(
    index: MemoryIndex,
    ranked: RankedMatches,
    limit: int,
    spare: int,
    text_query: str,
    options: SearchOptions,
) -> EarlyReads:
    """The best ``limit`` + ``spare`` matches of ``text_query`` (``ranked``), the rows of the
    best ``limit`` and, when a search with vectors needs it, the query's idf."""
    asked = limit + spare
    best = ranked.take(asked)
    rows = index.chunks_by_id([match[0] for match in best[:limit]])
    return EarlyReads(
        best=(best, asked),
        rows=rows,
        query_idf=(
            index.query_idf(text_query)
            if rows and needs_query_idf(options, with_vectors=True)
            else None
        ),
    )
