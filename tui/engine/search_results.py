"""What a search returns: each result with the breakdown of its score, and the response.

The breakdown is the "why" shown beside every result (the Search and Injection panels, the
CLI's ``--json``, a recorded turn); :mod:`.search` computes it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .temporal import TimeIntent
from .workspace import date_for_path


@dataclass(frozen=True)
class Breakdown:
    """Why a result surfaced."""

    bm25: float | None
    #: The 0..1 text score: the unit's own words, and those of its context (the entry before
    #: it in a daily log) at ``context_weight``.
    text: float
    vector: float | None
    hybrid: float
    #: Relevance lent by an adjacent daily-log entry (``neighbour_weight`` × its hybrid).
    neighbour: float
    #: What ``min_score`` filters on: max(hybrid, neighbour, linked).
    relevance: float
    decay: float
    confidence: str
    confidence_weight: float
    keyword_hit: bool
    #: Multiplier from age: 1.0 unless the question asks about the present.
    recency: float = 1.0
    #: Multiplier from the question's time window ("last week"): 1.0 inside it or without one.
    time_window: float = 1.0
    #: Relevance lent along an update link (``LINK_WEIGHT`` × the linked entry's relevance): on
    #: a current-state question, by an older entry this one changes ("Switched from Vim to
    #: Zed" for "Uses Vim"); on a question about an earlier state, by the newer entry that
    #: changed this one.
    linked: float = 0.0
    #: Multiplier for an entry a newer linked entry changed, on a current-state question.
    superseded: float = 1.0
    #: Where the newer entry that changed this one is (``path#Lstart-end``), when one did.
    changed_by: str = ""
    #: The text score of the unit's own words alone (``text`` when its context matched none).
    text_own: float | None = None
    #: Where the context entries whose words are part of ``text`` are (``path#Lstart-end``):
    #: the match came (partly, when ``text_own`` > 0) through the entry before this one.
    text_via: str = ""
    #: Where the entry that lent ``neighbour`` is.
    neighbour_via: str = ""

    @property
    def own_text(self) -> float:
        """The text score of the unit's own words (``text`` when not known)."""
        return self.text if self.text_own is None else self.text_own

    @classmethod
    def from_json(cls, data: object) -> Breakdown:
        """The breakdown as :meth:`SearchResult.to_json` wrote it (a recorded turn); a missing
        or malformed value reads as its neutral default, never raises."""
        values = data if isinstance(data, dict) else {}

        def number(key: str, default: float) -> float:
            value = values.get(key)
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                return float(value)
            return default

        def optional(key: str) -> float | None:
            value = number(key, math.nan)
            return None if math.isnan(value) else value

        hybrid = number("hybrid", 0.0)
        return cls(
            bm25=optional("bm25"),
            text=number("text", 0.0),
            vector=optional("vector"),
            hybrid=hybrid,
            neighbour=number("neighbour", 0.0),
            relevance=number("relevance", hybrid),
            decay=number("decay", 1.0),
            confidence=str(values.get("confidence", "?")),
            confidence_weight=number("confidence_weight", 1.0),
            keyword_hit=bool(values.get("keyword_hit")),
            recency=number("recency", 1.0),
            time_window=number("time_window", 1.0),
            linked=number("linked", 0.0),
            superseded=number("superseded", 1.0),
            changed_by=str(values.get("changed_by") or ""),
            text_own=optional("text_own"),
            text_via=str(values.get("text_via") or ""),
            neighbour_via=str(values.get("neighbour_via") or ""),
        )


@dataclass(frozen=True)
class SearchResult:
    """One search hit with its score breakdown."""

    chunk_id: int
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    breakdown: Breakdown

    @property
    def location(self) -> str:
        """``path#Lstart-Lend``."""
        return f"{self.path}#L{self.start_line}-{self.end_line}"

    @classmethod
    def from_json(cls, data: dict[str, object]) -> SearchResult:
        """A result as :meth:`to_json` wrote it (``text`` may be left out, as a turn's record
        does); malformed fields read as empty or neutral."""

        def line(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        score = data.get("score")
        return cls(
            chunk_id=0,
            path=str(data.get("path") or ""),
            start_line=line("start_line"),
            end_line=line("end_line"),
            heading=str(data.get("heading") or ""),
            text=str(data.get("text") or ""),
            score=float(score) if isinstance(score, int | float) and math.isfinite(score) else 0.0,
            breakdown=Breakdown.from_json(data.get("breakdown")),
        )

    def to_json(self) -> dict[str, object]:
        """The CLI's JSON shape of a result."""
        breakdown = asdict(self.breakdown)
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "text": self.text,
            "score": round(self.score, 6),
            "breakdown": {
                k: (round(v, 6) if isinstance(v, float) else v) for k, v in breakdown.items()
            },
        }


@dataclass
class SearchResponse:
    """Results of a query, the mode that produced them and anything the user should know."""

    query: str
    mode: str
    results: list[SearchResult]
    notes: list[str] = field(default_factory=list)
    #: What the question says about time (current state, a window), as search read it.
    intent: TimeIntent = field(default_factory=TimeIntent)

    def to_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "intent": self.intent.to_json(),
            "results": [r.to_json() for r in self.results],
            "notes": self.notes,
        }


def short_location(location: str, path: str) -> str:
    """``location`` (``path#L6-6``) as ``L6`` within ``path``, ``L6-7`` for a range; whole
    in another file."""
    file, _, lines = location.partition("#")
    if file != path or not lines:
        return location
    first, _, last = lines.partition("-")
    return first if last in ("", first[1:]) else f"{first}-{last}"


def describe_via(breakdown: Breakdown, path: str) -> tuple[str, str]:
    """``(text, neighbour)``: what the breakdown says of relevance that came through another
    entry of ``path``: ``via L6`` (the text match is all in the entry before this one),
    ``partly via L6``, and ``via L7`` for the entry that lent ``neighbour``; "" where none."""
    text = ""
    if breakdown.text_via:
        where = short_location(breakdown.text_via, path)
        text = f"partly via {where}" if breakdown.own_text > 0 else f"via {where}"
    neighbour = ""
    if breakdown.neighbour_via and breakdown.neighbour > 0:
        neighbour = f"via {short_location(breakdown.neighbour_via, path)}"
    return text, neighbour


def describe_change(breakdown: Breakdown) -> str:
    """:func:`change_note` for an entry a newer one changed; "" otherwise."""
    return change_note(breakdown.changed_by) if breakdown.changed_by else ""


def change_note(location: str) -> str:
    """``changed on 2026-10-12? (memory/2026-10-12.md#L5-5)``: the entry at ``location`` tells
    of a change (the question mark: the link is inferred from the words, not certain)."""
    day = date_for_path(location.split("#", 1)[0])
    return f"changed on {day.isoformat() if day else 'a later date'}? ({location})"
