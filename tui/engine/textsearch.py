"""Full-text search helpers: what FTS5 indexes, how a query becomes a MATCH expression, BM25 mapping.

FTS5's ``unicode61`` tokenizer treats a run of Chinese or Japanese characters as one token,
so the indexed body spells CJK runs as overlapping bigrams; the query side does the same.
Code-ish tokens (``snake_case``, ``file.py``) become phrases of their parts. Very common words
are dropped from the query (they make FTS5 walk huge posting lists for no ranking benefit).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+(?:[_.\-/:][^\W_{_CJK}]+)*|[{_CJK}]+", re.UNICODE)
_PART = re.compile(r"[^\W_]+", re.UNICODE)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don let get got also""".split()
)

#: Most terms a MATCH expression gets; the rest of a very long query adds little but cost.
MAX_QUERY_TERMS = 24
#: A word in more than this share of chunks is too common to be worth an FTS lookup.
COMMON_TERM_SHARE = 0.05
#: From this many chunks on, a query of common words only is left to the vectors (when they
#: ran): its few terms' doclists hold thousands of chunks each, and ranking them all by bm25
#: was the slowest search at 100k (tests/bench/search.py: p95 85 ms, up to 120 ms), for terms
#: bm25 weighs little. Below it, nothing changes (LoCoMo's 700-entry workspaces included).
SKIP_COMMON_FROM_CHUNKS = 40_000


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping bigrams of a CJK run (a single character stays as it is)."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def fts_body(text: str) -> str:
    """The text FTS5 indexes for a chunk: CJK runs spelled as bigrams, then their characters.

    The characters come after the bigrams so a one-character query still finds them, while
    bigram phrases keep matching contiguous text.
    """

    def spell(match: re.Match[str]) -> str:
        run = match.group(0)
        unigrams = " ".join(run) if len(run) > 1 else ""
        return " " + " ".join(cjk_bigrams(run)) + " " + unigrams + " "

    return _CJK_RUN.sub(spell, text)


def query_terms(query: str) -> list[tuple[str, ...]]:
    """The query's terms, each a tuple of FTS tokens (one token, or a phrase's parts).

    Stop words are dropped unless the query has nothing else.
    """
    return list(_parse_query(query))


def has_content_terms(query: str) -> bool:
    """True when the query has a searchable word that is not a stop word."""
    return any(not (len(t) == 1 and t[0] in STOP_WORDS) for t in _parse_query(query))


@functools.lru_cache(maxsize=512)
def _parse_query(query: str) -> tuple[tuple[str, ...], ...]:
    # Cached: search checks every candidate chunk against the same query.
    terms: list[tuple[str, ...]] = []
    for match in _WORD.finditer(query.lower()):
        word = match.group(0)
        if _CJK_RUN.fullmatch(word):
            terms.extend((bigram,) for bigram in cjk_bigrams(word))
        else:
            parts = tuple(_PART.findall(word))
            if parts:
                terms.append(parts)
    unique = list(dict.fromkeys(terms))
    content = [
        t
        for t in unique
        if not (len(t) == 1 and (t[0] in STOP_WORDS or len(t[0]) < 2 and t[0].isascii()))
    ]
    return tuple((content or unique)[:MAX_QUERY_TERMS])


def build_match_query(
    query: str,
    doc_share: Callable[[str], float] | None = None,
    *,
    skip_common: bool = False,
    leave_out: Collection[tuple[str, ...]] = (),
) -> str | None:
    """An FTS5 MATCH expression (terms OR-ed, each quoted), or None when nothing is searchable.

    With ``doc_share`` (the share of chunks containing a token), single-word terms found in more
    than ``COMMON_TERM_SHARE`` of chunks are left out (all but the rarest two when no other term
    remains): bm25
    gives them almost no weight, but FTS5 still walks their huge posting lists
    (tests/bench/search.py: 20 ms -> 5 ms per query at 100k chunks). With ``skip_common`` (a
    big index, and the vector side ran), a query of several common words only gets no full-text
    search at all. ``leave_out``: terms not to search (see
    :func:`~tui.engine.index_text.weightless_words`).
    """
    terms = [term for term in query_terms(query) if term not in leave_out]
    if doc_share is not None and len(terms) > 1:
        shares = {t: (0.0 if len(t) > 1 else doc_share(t[0])) for t in terms}
        specific = [t for t in terms if shares[t] <= COMMON_TERM_SHARE]
        if not specific and skip_common:
            return None
        # A query of common words only keeps its rarest two: they rank almost as well, at a fraction of the cost.
        terms = specific or sorted(terms, key=shares.__getitem__)[:2]
    if not terms:
        return None
    return " OR ".join('"' + " ".join(term).replace('"', "") + '"' for term in terms)


def contains_all_terms(text: str, query: str) -> bool:
    """True when every content term of ``query`` occurs in ``text`` (an exact keyword hit)."""
    terms = _parse_query(query)
    if not terms:
        return False
    if text.isascii():
        # Most candidates lack a word outright: a substring test says so without splitting
        # the text into words (a word of its words is a substring of it; the reverse the exact
        # test below decides).
        low = text.lower()
        if not all(word in low for term in terms for word in term):
            return False
    body = _spaced_words(text)
    return all(" " + " ".join(term) + " " in body for term in terms)


@functools.lru_cache(maxsize=2048)
def _spaced_words(text: str) -> str:
    # Cached: each search checks its ~50 best candidates, and the same entries come back query
    # after query (each keystroke of the live preview).
    return " " + " ".join(_PART.findall(fts_body(text).lower())) + " "


def bm25_to_unit(rank: float) -> float:
    """Map FTS5's bm25 rank (negative; more negative is a better match) onto 0..1.

    Monotonic: a stronger match always scores higher, and no finite rank maps to 1.0.
    """
    strength = max(0.0, -rank)
    return strength / (1.0 + strength)
