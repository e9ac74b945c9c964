"""The invisible metadata comment that rides along on a memory entry.

``- Prefers dark mode <!-- mem id=7f3a conf=high src=user at=2026-11-22 -->``

Lines without the comment are valid (hand-written by the user).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import date

CONFIDENCE_LEVELS = ("low", "medium", "high")
INACTIVE_STATES = frozenset({"forgotten", "superseded"})

#: The comment's opening; where it may start is found by scanning, never by backtracking.
_OPENER = re.compile(r"<!--\s*mem\b")
#: A pair starts where a key starts (the look-behind keeps a long key-like run linear).
_PAIR = re.compile(r"(?<![a-z_])(?P<key>[a-z_]+)=(?P<value>\"[^\"]*\"|\S+)")
#: What opens and closes an HTML comment, and their Markdown-escaped forms (shown the same
#: by a Markdown viewer, but neither opens nor closes a comment).
COMMENT_MARKERS = (("<!--", "<\\!--"), ("-->", "--\\>"))


@dataclass(frozen=True)
class EntryMeta:
    """Metadata of one memory entry. ``extra`` keeps keys this version does not know."""

    id: str | None = None
    confidence: str | None = None
    source: str | None = None
    at: date | None = None
    state: str = "active"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """False for forgotten or superseded entries, which never surface."""
        return self.state not in INACTIVE_STATES

    def with_state(self, state: str) -> EntryMeta:
        """A copy with another state."""
        return replace(self, state=state)


def new_entry_id() -> str:
    """A short random id for a new entry."""
    return secrets.token_hex(3)


def split_meta(line: str) -> tuple[str, EntryMeta | None]:
    """Split a line into its visible text and its metadata (None when it has none).

    The metadata is a trailing ``<!-- mem ... -->`` whose body has no ``>``. Linear in the
    length of the line, whatever it holds.
    """
    found = _find_comment(line)
    if found is None:
        return line, None
    start, body = found
    values: dict[str, str] = {}
    for pair in _PAIR.finditer(body):
        value = pair.group("value")
        if value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        values[pair.group("key")] = value
    at = None
    if "at" in values:
        try:
            at = date.fromisoformat(values.pop("at"))
        except ValueError:
            at = None
    confidence = values.pop("conf", None)
    if confidence not in CONFIDENCE_LEVELS:
        confidence = None
    meta = EntryMeta(
        id=values.pop("id", None),
        confidence=confidence,
        source=values.pop("src", None),
        at=at,
        state=values.pop("state", "active"),
        extra=values,
    )
    return line[:start].rstrip(), meta


def _find_comment(line: str) -> tuple[int, str] | None:
    """Where the trailing metadata comment of ``line`` starts, and its body; None without one."""
    end = len(line.rstrip())
    if not line.endswith("-->", 0, end):
        return None
    close = end - 3
    # The body holds no ">": the comment opens after the last ">" before the closing "-->",
    # at the last opener there (text before the real comment may hold one that never closed).
    openers = list(_OPENER.finditer(line, line.rfind(">", 0, close) + 1, close))
    if not openers:
        return None
    opener = openers[-1]
    return opener.start(), line[opener.end() : close]


def escape_comment_markers(text: str) -> tuple[str, int]:
    """``text`` with every ``<!--`` and ``-->`` backslash-escaped, and how many were: text
    from a client or model written before an entry's metadata comment can then neither open
    a comment of its own nor close or extend the real one."""
    count = 0
    for marker, escaped in COMMENT_MARKERS:
        found = text.count(marker)
        if found:
            text = text.replace(marker, escaped)
            count += found
    return text, count


def format_meta(meta: EntryMeta) -> str:
    """Render metadata as the comment that follows an entry's text."""
    parts = ["mem"]
    if meta.id:
        parts.append(f"id={meta.id}")
    if meta.confidence:
        parts.append(f"conf={meta.confidence}")
    if meta.source:
        parts.append(f"src={meta.source}")
    if meta.at:
        parts.append(f"at={meta.at.isoformat()}")
    if meta.state != "active":
        parts.append(f"state={meta.state}")
    for key, value in meta.extra.items():
        quoted = f'"{value}"' if (" " in value or not value) else value
        parts.append(f"{key}={quoted}")
    return "<!-- " + " ".join(parts) + " -->"


def with_meta(text: str, meta: EntryMeta) -> str:
    """A line of ``text`` carrying ``meta``."""
    return f"{text.rstrip()} {format_meta(meta)}"
