"""Placeholder: replaced by the time-intent parser (branch ``temporal``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta


@dataclass(frozen=True)
class TimeIntent:
    current: bool = False
    present_tense: bool = False
    window: tuple[date, date] | None = None
    phrase: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "current": self.current,
            "present_tense": self.present_tense,
            "window": [d.isoformat() for d in self.window] if self.window else None,
            "phrase": self.phrase,
        }


_CURRENT = re.compile(r"\b(now|currently|current|these days|nowadays|still|latest|anymore)\b", re.I)


def parse_time_intent(query: str, now: date) -> TimeIntent:
    m = _CURRENT.search(query)
    if re.search(r"\byesterday\b", query, re.I):
        d = now - timedelta(days=1)
        return TimeIntent(window=(d, d), phrase="yesterday")
    return TimeIntent(current=bool(m), phrase=m.group(0) if m else None)
