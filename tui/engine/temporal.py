"""Time awareness for memory search: what period a question points at, and whether it asks
about the present state.

``parse_time_intent(query, now)`` is pure (stdlib only, no I/O, never raises) and returns a
:class:`TimeIntent`. Every regex is anchored on a literal word or digit, whitespace is collapsed
first, and no pattern nests quantifiers, so a 100 KB query is parsed in linear time.

The expressions recognised, and the window each gives, are listed in
:mod:`tui.engine.time_rules`.

Several expressions: connected ones (ranges, since/before...) are combined first; then the
shortest window wins (ties: explicit dates, then named periods, then vague ones; then the
earliest in the text). An open end never inverts a window (end >= start).

``current`` is True for an explicit current-state marker: now, currently, current, these days,
nowadays, still, anymore, "any more" (at the end of a clause), latest, most recent(ly), at the
moment, right now, at present, presently, as of today/now, up to date, recently, lately (a
preference for newer entries, not a window: what is recent depends on the topic), and "today" when the
question is in the present tense ("what do I use today"; not after earlier / later / of / for):
that "today" gives no window.

``present_tense`` is True when the text has a present-tense auxiliary or copula (do, does, am,
is, are, have, has, their negations, I'm, 're, 've, and 's after a pronoun or wh-word) and no
past-tense one (did, was, were, had, used to, and their negations).

A date that does not exist (Feb 29 2023, month 13) or falls outside ``date`` gives no window.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import date, timedelta

from .calendar_windows import (
    Window,
    easter_sunday,
    thanksgiving,
)
from .time_rules import (
    ASCII_LOWER,
    FLAGS,
    RULES,
    WEEKDAY_NUM,
    Hit,
    next_weekday,
    previous_weekday,
)

__all__ = ["TimeIntent", "easter_sunday", "parse_time_intent", "thanksgiving"]


@dataclass(frozen=True)
class TimeIntent:
    """What a query says about time."""

    current: bool = False
    present_tense: bool = False
    window: Window | None = None
    phrase: str | None = None
    #: The question asks about an earlier state ("before Zed", "used to", "my old dog").
    past_state: bool = False
    #: The question is about the user ("I", "my", "me"): in the present tense, it asks for
    #: their current state ("who is my manager?"), where a question about someone else's
    #: habits ("what does Melanie do to relax?") may not.
    first_person: bool = False

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict; the window as ISO dates."""
        window = None if self.window is None else [d.isoformat() for d in self.window]
        return {
            "current": self.current,
            "present_tense": self.present_tense,
            "window": window,
            "phrase": self.phrase,
            "past_state": self.past_state,
            "first_person": self.first_person,
        }


# ---------------------------------------------------------------------------------------------
# Current-state markers, tense, connectors

_CURRENT = re.compile(
    r"\b(?:right now|as of (?:today|now)|at the moment|at present|these days|"
    r"most recent(?:ly)?|up[ -]to[ -]date|now(?:adays)?|currently|current|presently|still|"
    r"anymore|latest|recently|lately|any more(?= ?[.?!,;:]| ?$))\b",
    FLAGS,
)
_PRESENT = re.compile(
    r"\b(?:do|does|am|is|are|have|has|don't|doesn't|isn't|aren't|haven't|hasn't|i'm)\b|"
    r"\b(?:what|where|who|how|when|which|that|it|he|she|there|here)'s\b|[a-z]'(?:re|ve)\b",
    FLAGS,
)
_PAST = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used to)\b",
    FLAGS,
)
_PAST_STATE = re.compile(
    r"\b(?:used to|did \w+ use to|previous(?:ly)?|former(?:ly)?|original(?:ly)?|at first|before|my old|our old|"
    r"the old|first|earlier|back then|prior to)\b",
    FLAGS,
)
_FIRST_PERSON = re.compile(r"\b(?:i|my|me|mine|myself|i'm|i've)\b", FLAGS)
_CONNECTOR = re.compile(
    r"\b(?:since|after|before|until|till|up until|prior to|from|between|starting(?: in| from)?|"
    r"as of)\b",
    FLAGS,
)
_FILLER = re.compile(r" (?:(?:the|in|on|at|during) )*", FLAGS)
_JOINER = re.compile(
    r" ?[-\u2013\u2014] ?| (?:to|until|till|through|thru|and)(?: the| on| in)? ", FLAGS
)
_OPEN_KINDS = {
    "since": "since",
    "as of": "until",
    "starting": "since",
    "starting in": "since",
    "starting from": "since",
    "after": "after",
    "before": "before",
    "prior to": "before",
    "until": "until",
    "till": "until",
    "up until": "until",
}


def _collect_hits(text: str, now: date, blocked: bytearray) -> list[Hit]:
    """All non-overlapping hits, longest phrase first, then in text order."""
    hits: list[Hit] = []
    for pattern, builder in RULES:
        for m in pattern.finditer(text):
            try:
                hit = builder(m, now)
            except (ValueError, OverflowError):
                continue
            if hit is not None:
                hits.append(hit)
    hits.sort(key=lambda h: (-(h.end - h.pstart), h.pstart))
    kept = []
    for hit in hits:
        if blocked.find(1, hit.pstart, hit.end) == -1:
            blocked[hit.pstart : hit.end] = b"\x01" * (hit.end - hit.pstart)
            kept.append(hit)
    kept.sort(key=lambda h: h.start)
    return kept


def _connector_for(
    hit: Hit, text: str, connectors: list[re.Match[str]], ends: list[int]
) -> re.Match[str] | None:
    """The connector ("since", "between"...) governing a hit: just before it or its first word."""
    i = bisect_right(ends, hit.start) - 1
    for j in (i, i + 1):
        if 0 <= j < len(connectors):
            c = connectors[j]
            gap = text[c.end() : hit.pstart]
            if hit.pstart <= c.start() and c.end() <= hit.start:
                return c  # matched as part of the hit: "since May", "between 2021"
            if c.end() <= hit.pstart and len(gap) <= 24 and _FILLER.fullmatch(gap):
                return c
    return None


def _union(left: Hit, right: Hit) -> Window:
    """A range's window; a year on one side lends itself to the other."""
    lw, rw = left.window, right.window
    try:
        if left.rebuild and left.year is None and right.year is not None:
            lw = left.rebuild(right.year)
            if lw[0] > rw[0]:
                lw = left.rebuild(right.year - 1)
        elif right.rebuild and right.year is None and left.year is not None:
            rw = right.rebuild(left.year)
            if rw[1] < lw[1]:
                rw = right.rebuild(left.year + 1)
    except (ValueError, OverflowError):
        lw, rw = left.window, right.window
    return min(lw[0], rw[0]), max(lw[1], rw[1])


def _open(kind: str, window: Window, now: date) -> Window:
    start, end = window
    if kind == "since":
        return start, max(now, start)
    if kind == "after":
        after = end + timedelta(days=1) if end < date.max else end
        return after, max(now, after)
    if kind == "before":
        return date.min, start - timedelta(days=1) if start > date.min else start
    return date.min, end


@dataclass
class _Candidate:
    window: Window
    rank: int
    start: int
    phrase: str


def _is_state_today(hit: Hit, text: str, present: bool) -> bool:
    """ "What do I use today": "today" in a present-tense question asks about the current state."""
    before = text[max(0, hit.start - 9) : hit.start]
    return hit.today and present and not re.search(r"\b(?:earlier|later|of|for) $", before, FLAGS)


def _candidates(
    low: str, text: str, now: date, hits: list[Hit], present: bool
) -> tuple[list[_Candidate], Hit | None]:
    """Combine connected hits into ranges; return the windows and a state "today" if any.

    ``low`` is the lowercased ``text`` that the patterns ran on; phrases come from ``text``.
    """
    covered = bytearray(len(low))
    for hit in hits:
        covered[hit.pstart + 1 : hit.end] = b"\x01" * max(0, hit.end - hit.pstart - 1)
    connectors = [c for c in _CONNECTOR.finditer(low) if not covered[c.start()]]
    ends = [c.end() for c in connectors]
    out: list[_Candidate] = []
    state_today: Hit | None = None
    i = 0
    while i < len(hits):
        hit = hits[i]
        c = _connector_for(hit, low, connectors, ends)
        conn = c.group(0).lower() if c else ""
        start = min(hit.pstart, c.start()) if c else hit.pstart
        nxt = hits[i + 1] if i + 1 < len(hits) else None
        joiner = _JOINER.fullmatch(low[hit.end : nxt.start]) if nxt else None
        if nxt is not None and joiner is not None:
            with_and = "and" in joiner.group(0).lower()
            if conn == "between" or (conn in ("", "from") and not with_and):
                window = _union(hit, nxt)
                out.append(_Candidate(window, 1, start, text[start : nxt.end]))
                i += 2
                continue
        if conn in _OPEN_KINDS:
            window = _open(_OPEN_KINDS[conn], hit.window, now)
            out.append(_Candidate(window, 1, start, text[start : hit.end]))
        elif _is_state_today(hit, low, present):
            state_today = state_today or hit
        else:
            out.append(_Candidate(hit.window, hit.rank, hit.pstart, text[hit.pstart : hit.end]))
        i += 1
    return out, state_today


def _normalise(query: str) -> str:
    text = re.sub(r"\s+", " ", query).strip()
    return text.replace("\u2019", "'").replace("\u2018", "'")


#: "the Monday before July 24, 2023", "the weekend after 4 October": a day named relative to
#: an explicit date, not to now.
_ANCHORED = re.compile(
    r"\b(?:the |on the )?(?P<d>monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend)"
    r" (?P<dir>before|after|following|preceding) ",
    FLAGS,
)


def _anchored_day(text: str, low: str, now: date) -> tuple[Window, str] | None:
    """The window of a weekday or weekend named relative to an explicit date that follows it."""
    m = _ANCHORED.search(low)
    if m is None:
        return None
    # The anchor is read without anchors of its own: one level, so parsing stays linear.
    anchor = _parse(text[m.end() :], low[m.end() :], now, anchored=False)
    if anchor.window is None or not anchor.phrase:
        return None
    at = low.find(anchor.phrase.translate(ASCII_LOWER), m.end())
    if at != m.end() and low[m.end() : at].strip() not in ("", "the", "on"):
        return None  # the date is not the anchor of this day ("the Monday before we met in May")
    start, end = anchor.window
    name = m.group("d")
    weekend = name == "weekend"
    target = WEEKDAY_NUM["saturday" if weekend else name]
    # From the day to its anchor: an entry of the anchor date may be where the day is told of.
    try:
        if m.group("dir") in ("before", "preceding"):
            window = (previous_weekday(start, target), end)
        else:
            day = next_weekday(end, target)
            window = (start, day + timedelta(days=1) if weekend else day)
    except OverflowError:  # a day before 0001-01-01 or after 9999-12-31: no such window
        return None
    return window, text[m.start() : at + len(anchor.phrase)]


#: Characters of a query read for its time intent (a pasted log says nothing more about time
#: past this, and every rule stays linear in it).
MAX_TIME_QUERY_CHARS = 2_000


def parse_time_intent(query: str, now: date) -> TimeIntent:
    """Read the time window, current-state markers and tense of a search query.

    Total and linear: any text parses (dates out of range are no window), in one pass per rule
    over at most :data:`MAX_TIME_QUERY_CHARS` characters.
    """
    text = _normalise(query if isinstance(query, str) else str(query))[:MAX_TIME_QUERY_CHARS]
    return _parse(text, text.translate(ASCII_LOWER), now, anchored=True)


def _parse(text: str, low: str, now: date, *, anchored: bool) -> TimeIntent:
    past_state = _PAST_STATE.search(low) is not None
    first_person = _FIRST_PERSON.search(low) is not None
    present = _PRESENT.search(low) is not None and _PAST.search(low) is None
    anchor = _anchored_day(text, low, now) if anchored else None
    if anchor is not None:
        return TimeIntent(False, present, anchor[0], anchor[1], past_state, first_person)
    blocked = bytearray(len(low))
    markers = list(_CURRENT.finditer(low))
    for marker in markers:
        blocked[marker.start() : marker.end()] = b"\x01" * (marker.end() - marker.start())
    hits = _collect_hits(low, now, blocked)
    candidates, state_today = _candidates(low, text, now, hits, present)
    current = bool(markers) or state_today is not None
    if candidates:
        best = min(candidates, key=lambda c: ((c.window[1] - c.window[0]).days, c.rank, c.start))
        return TimeIntent(current, present, best.window, best.phrase, past_state, first_person)
    if markers:
        phrase: str | None = text[markers[0].start() : markers[0].end()]
    elif state_today is not None:
        phrase = text[state_today.pstart : state_today.end]
    else:
        phrase = None
    return TimeIntent(current, present, None, phrase, past_state, first_person)
