"""Update links: a fact that changed is written twice, months apart ("Uses Vim for
everything", then "Switched from Vim to Zed"); on a question about now the newer entry is lent
the old one's relevance and the old one is marked superseded, on a question about before the
other way round. See :func:`update_links`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Set
from datetime import date
from functools import lru_cache

from .index import ChunkRow, MemoryIndex
from .textsearch import STOP_WORDS, query_terms
from .workspace import MEMORY_FILE

#: Update links (:func:`update_links`): an entry that changes one of the best matches gets
#: this share of its relevance; the entry it changed is multiplied by ``SUPERSEDED`` on a
#: current-state question.
LINK_WEIGHT = 0.9
SUPERSEDED = 0.7
#: Best matches whose updates are looked for, and the rarest words of each that name the thing
#: that changed (in at most ``LINK_SHARE`` of entries, at least ``LINK_MIN_DOCS``).
LINK_SEEDS = 3
LINK_TERMS = 12
LINK_SHARE = 0.01
LINK_MIN_DOCS = 5
#: Cosine between the two entries' vectors: a link by a shared rare word needs
#: ``LINK_COSINE``; without one, ``LINK_STRONG`` and half the best match's own relevance.
LINK_COSINE = 0.3
LINK_STRONG = 0.55
#: ``LINK_COSINE`` from a MEMORY.md entry: its stored vector carries the file's heading and a
#: log entry's carries its neighbours, so the same two statements sit lower ("Lives in a flat
#: in Prenzlauer Berg" and "Moved to Hamburg…; the flat in Ottensen": .45 as bare text, under .3
#: as stored); a shared rare word and a change word are needed all the same.
LINK_COSINE_MEMORY = 0.2
#: ``LINK_MIN_DOCS`` from a MEMORY.md fact: a fact is a short line, its naming word may be a
#: common one ("the flat in Prenzlauer Berg" / "the flat in Ottensen", in 7 entries of 273).
LINK_MIN_DOCS_MEMORY = 10

#: Words that tell of a change of state ("switched from Vim to Zed", "now report to Priya"):
#: one-word changes, word beginnings, and phrases (each phrase holds one of ``_PHRASE_WORDS``).
#: :func:`tells_of_change` decides on a unit's words by these parts, and runs only the phrases'
#: pattern when one of their words is there: the whole pattern over every candidate was most
#: of a current-state question's time.
_CHANGE_WORDS = frozenset(
    "switch switched switching moves moved moving instead sold quit stopped changed swapped "
    "transferred ditched dropped upgraded now slipped postponed anymore".split()
)
_CHANGE_STARTS = ("migrat", "replac")
_PHRASES = (
    r"no longer|any ?more|not going back|from [^\s,;]+(?: [^\s,;]+)? to|off (?:the )?[^\s,;]+"
)
_PHRASE_WORDS = frozenset("longer more back from off".split())
_CHANGE = re.compile(
    r"\b(?:"
    + "|".join([*sorted(_CHANGE_WORDS), *(start + r"\w*" for start in _CHANGE_STARTS), _PHRASES])
    + r")\b",
    re.IGNORECASE,
)
_CHANGE_PHRASE = re.compile(rf"\b(?:{_PHRASES})\b", re.IGNORECASE)
#: Words that say what holds now, not that something changed: by themselves they tell of a
#: change only of what the older entry says in the same words (see :func:`tells_change_of`).
_PRESENT_WORDS = frozenset({"now"})
#: ``_CHANGE`` without ``_PRESENT_WORDS``: a change told outright ("switched", "from X to").
_CHANGE_VERB = re.compile(
    r"\b(?:"
    + "|".join(
        [
            *sorted(_CHANGE_WORDS - _PRESENT_WORDS),
            *(start + r"\w*" for start in _CHANGE_STARTS),
            _PHRASES,
        ]
    )
    + r")\b",
    re.IGNORECASE,
)
#: Where a clause ends: what a change verb in one clause is about is in that clause
#: ("Moved the CI to GitHub Actions; nightly now runs in 12 minutes" moved no commute).
_CLAUSE_END = re.compile(r"[;:.!?\n]+(?:\s|$)|,\s")
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
#: Units whose words :func:`own_words` keeps (a few MB at most).
OWN_WORDS_CACHE = 2048
#: Rare in a memory, yet never the name of what changed ("exported everything from LastPass to
#: 1Password" is no update of "Replaced VS Code with Helix for everything").
_PRONOUNS = frozenset(
    f"{some}{thing}"
    for some in ("every", "some", "any", "no")
    for thing in ("thing", "one", "body", "where")
)


def _names_nothing(word: str) -> bool:
    """An indefinite pronoun or a change word: shared by two entries, it does not make one an
    update of the other ("migrating Harbor's database" / "migrating dotfiles off the ThinkPad")."""
    if word in _PRONOUNS:
        return True
    if word.isascii() and word.isalnum():
        # What ``_CHANGE.fullmatch`` says of one ASCII word (its phrases need a space), without
        # running the whole pattern: it ran for every word of every candidate's phrases.
        low = word.lower()
        return low in _CHANGE_WORDS or low.startswith(_CHANGE_STARTS)
    return _CHANGE.fullmatch(word) is not None


def rare_words(
    index: MemoryIndex, text: str, query_stems: set[str], min_docs: int = LINK_MIN_DOCS
) -> set[str]:
    """The rarest words of ``text`` that are not the query's: what names the thing itself
    ("Vim", "ThinkPad", "LastPass") rather than the topic the question asked about."""
    limit = max(min_docs, int(LINK_SHARE * index.doc_count()))
    words = [
        term[0]
        for term in query_terms(text)
        if len(term) == 1
        and len(term[0]) >= 3
        and term[0].isalpha()
        and not _names_nothing(term[0])
    ]
    stems = index.stems(words)
    counts = index.doc_counts([w for w in words if stems[w] not in query_stems])
    rare = {(docs, word) for word, docs in counts.items() if docs <= limit}
    return {word for _, word in sorted(rare)[:LINK_TERMS]}


#: The date an undated ``MEMORY.md`` entry takes part in update links with: older than any log.
#: MEMORY.md holds the standing facts and changes are told in the logs ("My editor is Vim",
#: then "Switched from Vim to Zed" in a daily log): a newer log entry that tells of a change can
#: supersede it. An entry whose metadata dates it (``at=``) takes part with that date.
EVERGREEN = date.min


def tells_of_change(text: str, words: Set[str]) -> bool:
    """Whether ``text`` (whose :func:`own_words` are ``words``) tells of a change of state:
    what ``_CHANGE.search(text)`` says, sooner."""
    if "_" in text:  # "now_playing" is one word to the pattern, two to own_words
        return _CHANGE.search(text) is not None
    if not words.isdisjoint(_CHANGE_WORDS):
        return True
    low = text.lower()
    if any(s in low for s in _CHANGE_STARTS) and any(w.startswith(_CHANGE_STARTS) for w in words):
        return True
    return not words.isdisjoint(_PHRASE_WORDS) and _CHANGE_PHRASE.search(text) is not None


#: The words of the change phrases that name nothing ("not going back" / "slow going").
_PHRASE_ONLY_WORDS = frozenset("longer going back".split())


@lru_cache(maxsize=OWN_WORDS_CACHE)
def _content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that can name what a statement is about (no stop words, no
    indefinite pronouns or change words). Kept like :func:`own_words`."""
    return frozenset(
        w
        for w in own_words(text)
        if w not in STOP_WORDS
        and w not in _PHRASE_ONLY_WORDS
        and len(w) > 1
        and not _names_nothing(w)
    )


def _phrases_with(text: str, words: Set[str]) -> set[tuple[str, str]]:
    """The two-word phrases of ``text``'s clauses (lower-cased) that hold one of ``words`` and
    no change word ("now runs" is no attribute). Only the phrases that hold one of ``words``
    are tested for a change word: a candidate's phrases are many and ``words`` a few."""
    return {
        (a, b)
        for seq in _clause_words(text)
        for a, b in itertools.pairwise(seq)
        if (a in words or b in words) and not (_names_nothing(a) or _names_nothing(b))
    }


@lru_cache(maxsize=OWN_WORDS_CACHE)
def _clause_words(text: str) -> tuple[tuple[str, ...], ...]:
    """The words of each of ``text``'s clauses, lower-cased, in order."""
    return tuple(
        tuple(w.lower() for w in _WORDS.findall(clause)) for clause in _CLAUSE_END.split(text)
    )


@lru_cache(maxsize=OWN_WORDS_CACHE)
def _changed_clauses(text: str) -> tuple[frozenset[str], ...]:
    """The words of each clause of ``text`` with a change verb in it."""
    return tuple(
        own_words(clause) for clause in _CLAUSE_END.split(text) if _CHANGE_VERB.search(clause)
    )


def tells_change_of(old_text: str, new_text: str) -> bool:
    """Whether ``new_text`` tells of a change to what ``old_text`` says: evidence that the same
    attribute changed, not a word both hold and a "now".

    Either a change verb in a clause that names something ``old_text`` names ("Switched from
    Vim to Zed" for "Uses Vim for everything", "Tomasz moves to the platform group" for "1:1
    with Tomasz, my manager"), or a change told anywhere (a mere "now" will do) while a word of
    both stands in the same phrase in both: the same attribute with another value ("cycling to
    the office now" for "Commutes to the office by metro"). "Now reading a history book about
    penicillin" changes nothing of "Is allergic to penicillin"."""
    shared = _content_words(old_text) & _content_words(new_text)
    if not shared:
        return False
    if any(not shared.isdisjoint(words) for words in _changed_clauses(new_text)):
        return True
    if not unit_tells_of_change(new_text):
        return False
    return not _phrases_with(old_text, shared).isdisjoint(_phrases_with(new_text, shared))


@lru_cache(maxsize=OWN_WORDS_CACHE)
def unit_tells_of_change(text: str) -> bool:
    """:func:`tells_of_change` of a unit's own text, kept like :func:`own_words`."""
    return tells_of_change(text, own_words(text))


@lru_cache(maxsize=OWN_WORDS_CACHE)
def own_words(text: str) -> frozenset[str]:
    """The lower-cased words of ``text`` (a unit's own text, not the context it is indexed with).

    Cached: the same candidates come back query after query (and keystroke after keystroke),
    and splitting ~150 of them was most of a current-state question's update links at 10k.
    """
    if text.isascii():  # lower-casing first cannot move a word's edges
        return frozenset(_WORDS.findall(text.lower()))
    return frozenset(w.lower() for w in _WORDS.findall(text))


def date_by(row: ChunkRow, now: date) -> date | None:
    """The date ``row`` takes part in update links with (a daily log's date; a MEMORY.md
    entry's ``at=``, else :data:`EVERGREEN`); None when it has none or it is after ``now``."""
    day = row.date or row.written or (EVERGREEN if row.path == MEMORY_FILE else None)
    return day if day is not None and day <= now else None


def update_links(
    index: MemoryIndex,
    rows: dict[int, ChunkRow],
    hybrids: dict[int, float],
    support: dict[int, float],
    query: str,
    direction: str,
    now: date,
) -> tuple[dict[int, float], dict[int, set[int]]]:
    """Relevance lent along update links, and the entries a newer one changed (each with the
    entries that changed it). Entries dated
    after ``now`` take no part: a log misdated into the future must not retire today's facts.

    A fact that changed is written twice, months apart: "Uses Vim for everything", then
    "Switched from Vim to Zed". The question ("which editor do I use now?") often matches the
    old entry best. For each of the best dated matches, an entry on the ``direction`` side of
    it (newer/older) is linked when it shares one of its rare words (or is very similar to it
    and relevant by itself) and, going newer, tells of a change ("switched", "moved", "now",
    "from X to Y"...); going older, the best match must tell of the change. Rows of linked
    entries that were not candidates are added to ``rows``.
    """
    relevance = {i: max(h, support.get(i, 0.0)) for i, h in hybrids.items()}
    seeds = sorted((i for i in relevance if date_by(rows[i], now)), key=lambda i: -relevance[i])[
        :LINK_SEEDS
    ]
    query_stems = {index.stem(t[0]) for t in query_terms(query) if len(t) == 1}
    linked: dict[int, float] = {}
    superseded: dict[int, set[int]] = {}
    for seed in seeds:
        row = rows[seed]
        row_date = date_by(row, now)
        if row_date is None or direction == "older" and not _CHANGE.search(row.text):
            continue
        # A MEMORY.md fact may share only the question's word with its change ("Commutes to
        # the office by metro" / "cycling to the office now"); a log entry keeps to other words.
        rare = (
            rare_words(index, row.text, set(), LINK_MIN_DOCS_MEMORY)
            if row.path == MEMORY_FILE
            else rare_words(index, row.text, query_stems)
        )
        hits = [i for i, _ in index.fts_candidates(" ".join(rare), 50)] if rare else []
        floor = LINK_COSINE_MEMORY if row.path == MEMORY_FILE else LINK_COSINE
        # Every link needs at least this cosine: the others are left before their rows are
        # read (a seed's rare words match up to 50 entries) and their words tested.
        cosines = _cosines(
            index, seed, [i for i in dict.fromkeys([*hits, *relevance]) if i != seed]
        )
        near = {i: c for i, c in cosines.items() if c >= min(floor, LINK_STRONG)}
        rows.update(index.chunks_by_id([i for i in near if i not in rows]))
        for chunk_id, cosine in near.items():
            other = rows.get(chunk_id)
            other_date = date_by(other, now) if other is not None else None
            if other is None or other_date is None or other_date == row_date:
                continue
            if (other_date > row_date) != (direction == "newer"):
                continue
            similar = (
                direction == "newer"
                and cosine >= LINK_STRONG
                and hybrids.get(chunk_id, 0.0) >= 0.5 * relevance[seed]
            )
            # Its own words, not its context: a unit's index text includes the entry before
            # it. Most near entries hold none of the rare words: a substring test rules them
            # out before their words are split (the cheap tests first; they all must hold).
            if not (similar or cosine >= floor and _shares_word(rare, other.text)):
                continue
            if direction == "newer" and not unit_tells_of_change(other.text):
                continue
            older, newer = (row, other) if direction == "newer" else (other, row)
            if not tells_change_of(older.text, newer.text):
                continue  # a shared word and a "now" are no change of what the older one says
            linked[chunk_id] = max(linked.get(chunk_id, 0.0), LINK_WEIGHT * relevance[seed])
            if direction == "newer":
                superseded.setdefault(seed, set()).add(chunk_id)
    return linked, superseded


def _shares_word(words: Set[str], text: str) -> bool:
    """Whether one of ``words`` (lower-cased) is one of ``text``'s :func:`own_words`."""
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in words):
            return False
    return not words.isdisjoint(own_words(text))


def _cosines(index: MemoryIndex, seed: int, others: list[int]) -> dict[int, float]:
    """The cosine of each of ``others`` with ``seed`` (0.0 where either has no vector yet)."""
    mine = index.mirror.vectors_for([seed]).get(seed)
    if mine is None:
        return dict.fromkeys(others, 0.0)
    found = index.mirror.cosines(mine, others)
    return {i: found.get(i, 0.0) for i in others}


def memory_entries_changed(
    index: MemoryIndex, chunk_ids: list[int], now: date
) -> list[tuple[ChunkRow, ChunkRow]]:
    """``(MEMORY.md entry, the entry that tells of its change)`` for each of ``chunk_ids``
    (entries just written to a daily log) that tells of a change and, by the rule of an update
    link, changes a MEMORY.md entry dated before it: a shared rare word and a cosine of at
    least ``LINK_COSINE_MEMORY`` ("Switched from Vim to Zed" for "My editor is Vim")."""
    pairs: list[tuple[ChunkRow, ChunkRow]] = []
    for row in index.chunks_by_id(chunk_ids).values():
        day = date_by(row, now)
        if day is None or row.path == MEMORY_FILE or not _CHANGE.search(row.text):
            continue
        rare = rare_words(index, row.text, set(), LINK_MIN_DOCS_MEMORY)
        if not rare:
            continue
        hits = [i for i, _ in index.fts_candidates(" ".join(rare), 50)]
        facts = [r for r in index.chunks_by_id(hits).values() if r.path == MEMORY_FILE]
        vectors = index.mirror.vectors_for([row.id, *(r.id for r in facts)])
        for fact in facts:
            fact_day = date_by(fact, now)
            if fact_day is None or fact_day >= day:
                continue
            if not (_shares_word(rare, fact.text) and tells_change_of(fact.text, row.text)):
                continue
            if row.id in vectors and fact.id in vectors:
                if float(vectors[row.id] @ vectors[fact.id]) < LINK_COSINE_MEMORY:
                    continue
            elif row.id in vectors or fact.id in vectors:
                continue  # one side embedded, the other not yet: no cosine to go by
            pairs.append((fact, row))
    return pairs
