"""memdeck's one Markdown vocabulary: headings, list items (bullets) and code fences.

Every module that needs to know what a line of a memory file, a daily log, a model's answer or
a streamed message *is* asks here, so the chunker, the entry parser, the daily-log tree,
consolidation, the flush and the chat view never disagree. The rules follow CommonMark where
it matters for memory files (ATX headings indented at most three spaces, ``#`` to ``######``
followed by a space, a tab or the end of the line; fences of three backticks or tildes) and
every function runs in linear time on any line, however long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_HEADING_START = re.compile(r"#{1,6}(?=[ \t]|$)")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_BULLET = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+")


def parse_heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line, else None. Linear time on any line."""
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    match = _HEADING_START.match(stripped)
    if not match:
        return None
    title = stripped[match.end() :].strip()
    closing = title.rstrip("#")
    if closing != title and (not closing or closing[-1] in " \t"):
        title = closing.rstrip()
    return len(match.group(0)), title


def is_heading(line: str) -> bool:
    """True for an ATX heading line (an empty title counts)."""
    return parse_heading(line) is not None


def is_fence(line: str) -> bool:
    """True for a line that opens or closes a code fence."""
    return _FENCE.match(line) is not None


def inside_fence(text: str) -> bool:
    """True when ``text`` ends inside an open code fence."""
    return sum(1 for line in text.split("\n") if is_fence(line)) % 2 == 1


def match_bullet(line: str) -> re.Match[str] | None:
    """The list marker at the start of ``line`` (``-``, ``*``, ``+``, ``1.``, ``1)``) with the
    spaces after it; group 1 is the indentation, group 2 the marker. None for other lines."""
    return _BULLET.match(line)


def strip_bullet(line: str) -> str:
    """``line`` without its list marker (and the indentation before it)."""
    match = _BULLET.match(line)
    return line[match.end() :] if match else line


def is_list_item(line: str) -> bool:
    """True for a list item with some text after its marker."""
    match = _BULLET.match(line)
    return match is not None and bool(line[match.end() :].strip())


@dataclass(frozen=True)
class FencedBlock:
    """A fenced code block: its info string (``python``, ``markdown``...) and its body."""

    info: str
    body: str


def _opening(line: str) -> tuple[str, str] | None:
    """``(marker, info)`` of a fence that starts at column 0, else None."""
    for marker in ("```", "~~~"):
        if line.startswith(marker):
            return marker, line[len(marker) :].strip(" \t")
    return None


def _closes(line: str, marker: str) -> bool:
    return line.startswith(marker) and not line[len(marker) :].strip(" \t")


def fenced_blocks(lines: Iterable[str]) -> list[FencedBlock]:
    """The blocks fenced at column 0, each closed by a bare fence of the same marker."""
    found: list[FencedBlock] = []
    opened: tuple[str, str] | None = None
    body: list[str] = []
    for line in lines:
        if opened is None:
            opened = _opening(line)
            body = []
        elif _closes(line, opened[0]):
            found.append(FencedBlock(opened[1], "\n".join(body)))
            opened = None
        else:
            body.append(line)
    return found


def unwrap_fenced_document(text: str, infos: tuple[str, ...] = ("markdown", "md")) -> str:
    """The document in ``text``: the body of a fence around all of it (no info string, or one
    of ``infos``), or of the single ``infos`` block amid other text; else ``text`` stripped."""
    text = text.strip()
    lines = text.split("\n")
    first = _opening(lines[0])
    if (
        first is not None
        and len(lines) > 1
        and _closes(lines[-1], first[0])
        and (first[1] == "" or first[1].lower() in infos)
    ):
        return "\n".join(lines[1:-1]).strip()
    documents = [b for b in fenced_blocks(lines) if b.info.lower() in infos]
    if len(documents) == 1:
        return documents[0].body.strip()
    return text
