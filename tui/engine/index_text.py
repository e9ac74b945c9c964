"""Full-text reads of the index: the best matches of a query, how many chunks hold a term,
porter stems and idf, all counted by FTS5 itself so its stemming applies."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Sequence

import sqlean as sqlite3

from .index_db import FTS_TOKENIZER
from .textsearch import SKIP_COMMON_FROM_CHUNKS, build_match_query, query_terms

#: Below this many chunks every query term is searched, however common (but see
#: :func:`weightless_words`).
MIN_CHUNKS_TO_PRUNE = 2000
#: A word in at most this share of chunks makes the words in half of them or more weightless
#: beside it (:func:`weightless_words`): its idf is at least ln 3 (1.1), theirs 1e-6.
WEIGHTY_TERM_SHARE = 0.25


#: Stems already asked for (the tokenizer never changes): three statements each otherwise, and
#: update links stem every word of their best matches on each current-state question.
_STEMS: dict[str, str] = {}
MAX_STEMS = 50_000
#: Chunk counts by term kept until the next text change (the cache starts over past this).
MAX_TERM_COUNTS = 50_000


#: Where :meth:`FullTextReads.rank_matches` holds a query's matches (one per connection).
_RANKS = "temp.memdeck_text_ranks"
_fills = itertools.count(1)

#: A match: chunk id, bm25 rank, rank of its own words, rank of its context's.
Match = tuple[int, float, float, float]


def _rank_columns(context_weight: float) -> str:
    """The ranks read of each match: ``rank`` (own words count 1, the context's
    ``context_weight``), ``own`` and ``context`` (each alone)."""
    return (
        f"bm25(chunks_fts, 1.0, {float(context_weight)!r}) AS rank,"
        " bm25(chunks_fts, 1.0, 0.0) AS own, bm25(chunks_fts, 0.0, 1.0) AS context"
    )


class RankedMatches:
    """Every full-text match of one query, ranked, held in one connection's temp table until
    that connection ranks another query: its best matches and those of chosen chunks, read
    without evaluating the query again (so a search can rank the text while the query's
    vector is computed, and name its vector candidates afterwards)."""

    def __init__(self, conn: sqlite3.Connection, local: threading.local, fill: int) -> None:
        self._conn = conn
        self._local = local
        self._fill = fill

    def take(
        self,
        limit: int | None,
        also: Sequence[int] = (),
        *,
        best: tuple[list[Match], int] | None = None,
    ) -> list[Match]:
        """What :meth:`FullTextReads.fts_matches` answers: the matches among ``also`` (best
        first), then the best ``limit`` others.

        ``best``: what an earlier ``take(n)`` answered, and ``n``; the best matches are taken
        from it when it holds enough of them (sorting every match again costs a scan of them
        all, most of a take's time when a common word matched thousands)."""
        if getattr(self._local, "ranks_fill", None) != self._fill:
            raise RuntimeError("these matches were replaced by another query's on this thread")
        columns = f"SELECT id, rank, own, context FROM {_RANKS}"
        try:
            wanted: list[Match] = (
                self._conn.execute(
                    f"{columns} WHERE id IN ({','.join('?' * len(also))}) ORDER BY rank", also
                ).fetchall()
                if also
                else []
            )
            if best is not None and _enough(best, limit, len(wanted)):
                others = best[0]
            else:
                query = f"{columns} ORDER BY rank"
                if limit is not None:
                    query += f" LIMIT {int(limit) + len(wanted)}"
                others = self._conn.execute(query).fetchall()
        except sqlite3.Error:  # the index file was replaced meanwhile (its readers closed)
            return []
        return _named_first(wanted, others, limit)


def _enough(best: tuple[list[Match], int], limit: int | None, named: int) -> bool:
    """Whether ``best`` (the best matches, as many as were asked for) holds the best ``limit``
    matches that are not among ``named`` others: all the matches there are, or enough."""
    matches, asked = best
    return len(matches) < asked or limit is not None and len(matches) >= limit + named


def _named_first(named: list[Match], ranked: list[Match], limit: int | None) -> list[Match]:
    """The matches of the named chunks, then the best ``limit`` of the others in ``ranked``."""
    ids = {row[0] for row in named}
    others = [row for row in ranked if row[0] not in ids]
    return named + (others if limit is None else others[:limit])


def _remember_stems(stems: dict[str, str]) -> None:
    if len(_STEMS) + len(stems) >= MAX_STEMS:
        _STEMS.clear()
    _STEMS.update(stems)


class FullTextReads:
    """The full-text half of :class:`~tui.engine.index.MemoryIndex` (a mixin over its
    connections: ``_reader`` gives each thread its own, ``_track`` closes one with the index)."""

    #: Chunk counts by term, until the next text change (see :meth:`_term_docs`).
    _doc_shares: dict[tuple[str, ...], int]
    _local: threading.local

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _track(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        raise NotImplementedError

    def fts_candidates(
        self,
        query: str,
        limit: int | None,
        *,
        also: Sequence[int] = (),
        vectors_ran: bool = False,
        context_weight: float = 1.0,
    ) -> list[tuple[int, float]]:
        """``(chunk id, bm25 rank)`` of the best full-text matches (rank: negative, lower is
        better); :meth:`fts_matches` without the parts."""
        return [
            (chunk_id, rank)
            for chunk_id, rank, _, _ in self.fts_matches(
                query, limit, also=also, vectors_ran=vectors_ran, context_weight=context_weight
            )
        ]

    def fts_matches(
        self,
        query: str,
        limit: int | None,
        *,
        also: Sequence[int] = (),
        vectors_ran: bool = False,
        context_weight: float = 1.0,
        every_word: bool = False,
    ) -> list[tuple[int, float, float, float]]:
        """``(chunk id, bm25 rank, rank of its own words, rank of its context's)`` of the best
        full-text matches (ranks: negative, lower is better; 0.0 where nothing matched).

        ``also`` names chunks (vector candidates) whose rank is wanted too if they match at all:
        they come back in the same FTS evaluation, which costs as much as the query itself.
        ``vectors_ran``: the vector side ran for this query (see :func:`build_match_query`).
        ``context_weight``: what a word of a unit's context (the entry before it) counts for
        against one of its own text (1). The two parts say which words made the rank (they
        cost nothing measurable beside it; a second query for them cost 0.45 ms a search).
        ``every_word``: match even the words bm25 weighs ~0 (:func:`weightless_words`).
        """
        match = self._match(query, vectors_ran, every_word)
        if match is None:
            return []
        order = "rank"
        args: list[object] = [match]
        if also:
            order = f"rowid IN ({','.join('?' * len(also))}) DESC, rank"
            args.extend(also)
        sql = (
            f"SELECT rowid, {_rank_columns(context_weight)} FROM chunks_fts"
            " WHERE chunks_fts MATCH ?"
            f" ORDER BY {order}"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit) + len(also)}"
        try:
            rows: list[tuple[int, float, float, float]] = (
                self._reader().execute(sql, args).fetchall()
            )
        except sqlite3.OperationalError:
            return []
        if limit is None or not also:
            return rows
        named = set(also)
        return _named_first([row for row in rows if row[0] in named], rows, limit)

    def rank_matches(
        self,
        query: str,
        *,
        vectors_ran: bool = False,
        context_weight: float = 1.0,
        every_word: bool = False,
    ) -> RankedMatches | None:
        """Every full-text match of ``query`` ranked once, to be read by
        :meth:`RankedMatches.take` (None: nothing worth searching). Arguments as for
        :meth:`fts_matches`; the evaluation costs what one :meth:`fts_matches` costs."""
        match = self._match(query, vectors_ran, every_word)
        if match is None:
            return None
        conn = self._reader()
        if getattr(self._local, "ranks_table", None) is not conn:
            # In memory: the matches never reach a temp file outside the workspace.
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_RANKS}"
                " (id INTEGER PRIMARY KEY, rank REAL, own REAL, context REAL)"
            )
            self._local.ranks_table = conn
        fill = next(_fills)
        self._local.ranks_fill = fill
        conn.execute(f"DELETE FROM {_RANKS}")
        try:
            conn.execute(
                f"INSERT INTO {_RANKS} SELECT rowid, {_rank_columns(context_weight)}"
                " FROM chunks_fts WHERE chunks_fts MATCH ?",
                (match,),
            )
        except sqlite3.OperationalError:
            return None
        return RankedMatches(conn, self._local, fill)

    def _match(self, query: str, vectors_ran: bool, every_word: bool = False) -> str | None:
        """The MATCH expression of ``query`` (None: nothing worth searching). Beside vectors,
        the words bm25 weighs ~0 are left out (:func:`weightless_words`) unless ``every_word``."""
        total = self._term_docs(())
        skip_common = vectors_ran and total >= SKIP_COMMON_FROM_CHUNKS
        words = [term[0] for term in query_terms(query) if len(term) == 1]
        prune = total >= MIN_CHUNKS_TO_PRUNE
        drop_weightless = vectors_ran and not every_word and total * WEIGHTY_TERM_SHARE >= 1
        weightless: set[tuple[str, ...]] = set()
        if len(words) > 1 and (prune or drop_weightless):
            # words not seen yet: one statement, not four for each
            docs = self.doc_counts(words)
            if drop_weightless:
                weightless = weightless_words(docs, total)
        return build_match_query(
            query, self._doc_share, skip_common=skip_common, leave_out=weightless
        )

    def _term_docs(self, term: tuple[str, ...]) -> int:
        """How many chunks match ``term`` (a token or a phrase's tokens; ``()``: all chunks).

        Counted by FTS5 itself, so its stemming applies. Cached until the next text change: a
        count walks the term's whole doclist (a few ms for a word in every chunk of 100k), and
        the same words recur query after query.
        """
        cached = self._doc_shares.get(term)
        if cached is not None:
            return cached
        conn = self._reader()
        if len(term) == 1:
            # fts5vocab reads the stored count of the stemmed token (a MATCH count would walk
            # its doclist: tens of ms for a common word at 100k chunks).
            row = conn.execute(
                "SELECT doc FROM chunks_vocab WHERE term = ?", (self._stem(term[0]),)
            ).fetchone()
            count = row[0] if row else 0
        elif term:
            phrase = '"' + " ".join(term).replace('"', "") + '"'
            try:
                count = conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
                ).fetchone()[0]
            except sqlite3.OperationalError:
                count = 0
        else:
            count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        self._remember_counts({term: count})
        return count

    def _remember_counts(self, counts: dict[tuple[str, ...], int]) -> None:
        if len(self._doc_shares) + len(counts) > MAX_TERM_COUNTS:
            self._doc_shares.clear()
        self._doc_shares.update(counts)

    def doc_count(self, token: str | None = None) -> int:
        """How many chunks contain ``token`` (FTS-stemmed); with no token, how many chunks."""
        return self._term_docs(() if token is None else (token,))

    def stem(self, token: str) -> str:
        """``token`` as the full-text index stores it (its porter stem, lower-cased)."""
        return self._stem(token)

    def stems(self, tokens: Sequence[str]) -> dict[str, str]:
        """The stems of many single-word tokens, those not known yet in one statement pair."""
        unknown = [t for t in dict.fromkeys(tokens) if t not in _STEMS]
        if len(unknown) > 1 and all(t.isalpha() for t in unknown):
            scratch = self._stemmer()
            scratch.execute("DELETE FROM s")
            scratch.execute("INSERT INTO s(x) VALUES (?)", (" ".join(unknown),))
            found = dict(scratch.execute("SELECT offset, term FROM si"))
            if len(found) == len(unknown):  # an alphabetic word is one token: offsets line up
                _remember_stems({token: found[at] for at, token in enumerate(unknown)})
        return {t: self._stem(t) for t in tokens}

    def doc_counts(self, tokens: Sequence[str]) -> dict[str, int]:
        """:meth:`doc_count` of many single-word tokens, those not counted yet in one query."""
        stems = self.stems(tokens)
        unknown = sorted({stems[t] for t in tokens if (t,) not in self._doc_shares})
        if unknown:
            counts = dict(
                self._reader().execute(
                    "SELECT term, doc FROM chunks_vocab WHERE term IN "
                    f"({', '.join('?' * len(unknown))})",
                    unknown,
                )
            )
            self._remember_counts(
                {(t,): counts.get(stems[t], 0) for t in tokens if (t,) not in self._doc_shares}
            )
        return {t: self.doc_count(t) for t in tokens}

    def _stemmer(self) -> sqlite3.Connection:
        """This thread's scratch FTS table, tokenised as the index is (``si``: its tokens)."""
        scratch = getattr(self._local, "stemmer", None)
        if scratch is None:
            scratch = self._track(sqlite3.connect(":memory:", check_same_thread=False))
            scratch.execute(f"CREATE VIRTUAL TABLE s USING fts5(x, tokenize = '{FTS_TOKENIZER}')")
            scratch.execute("CREATE VIRTUAL TABLE sv USING fts5vocab(s, 'row')")
            scratch.execute("CREATE VIRTUAL TABLE si USING fts5vocab(s, 'instance')")
            self._local.stemmer = scratch
        return scratch

    def _stem(self, token: str) -> str:
        """``token`` as the FTS tokenizer stores it (porter stem), from a scratch in-memory table."""
        stem = _STEMS.get(token)
        if stem is not None:
            return stem
        scratch = self._stemmer()
        scratch.execute("DELETE FROM s")
        scratch.execute("INSERT INTO s(x) VALUES (?)", (token,))
        row = scratch.execute("SELECT term FROM sv LIMIT 1").fetchone()
        stem = row[0] if row else token
        _remember_stems({token: stem})
        return stem

    def _doc_share(self, token: str) -> float:
        """Share of chunks containing ``token`` (0 on small indexes, where it does not matter)."""
        total = self._term_docs(())
        if total < MIN_CHUNKS_TO_PRUNE:
            return 0.0
        return self._term_docs((token,)) / total

    def query_idf(self, query: str) -> float:
        """Sum of the query terms' inverse document frequencies, as FTS5's bm25 computes them.

        A short chunk holding every term once scores about this much, so ``bm25 / query_idf``
        says how much of the query a match covers, weighted by how rare each term is.
        """
        total = self._term_docs(())
        idf = 0.0
        for term in query_terms(query):
            docs = self._term_docs(term)
            idf += max(1e-6, math.log((total - docs + 0.5) / (docs + 0.5)))
        return idf


def weightless_words(docs: dict[str, int], total: int) -> set[tuple[str, ...]]:
    """The words of a query (with how many of ``total`` chunks hold each) in half the chunks or
    more, when it also has a word found in at most ``WEIGHTY_TERM_SHARE`` of them (and at
    least one).

    FTS5's bm25 clamps such a word's idf to 1e-6, so it adds ~nothing to any rank, and a chunk
    that matches it alone ranks ~1e-6 of one holding the specific word: every text score (max-,
    idf- or unit-scaled) leaves that chunk at ~0 either way. Searching it only made every chunk
    a match to rank (a conversation's speaker names are in nearly all of its entries: 1.1 ms of
    a search's 3.5 ms after the vector, on LoCoMo). Reciprocal rank fusion counts a match by
    its place, not its score: it asks for ``every_word``. Text alone (no vectors) keeps them:
    with no floor (``min_score`` 0) its tail is those ~0 ranks, in their order (LoCoMo's BM25
    recall@10 lost .003).
    """
    if not any(1 <= n <= total * WEIGHTY_TERM_SHARE for n in docs.values()):
        return set()
    return {(word,) for word, n in docs.items() if 2 * n >= total}
