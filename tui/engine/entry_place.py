"""Where a MEMORY.md entry was, so that a restore puts it back there; and where a new one
goes (:func:`append_saved`).

When an entry is forgotten or superseded, the audit trail keeps its :class:`EntryPlace`: the
headings above it, the entries before and after it in that section (the nearest few, as
fingerprints) and the blank lines around it. A restore (:func:`insertion_point`) puts it after
the nearest of those before it still there, else before the nearest after it, else at the
start or the end of its section: entries forgotten together come back in their order whatever
the order of the restores. Only when the section is gone does it go to the end of the file
(and the caller says so).

Lines here are bodies (:func:`tui.engine.store.file_lines`); an entry block is its first line's
index and its lines as written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from .entries import append_entries, insert_lines, line_body, split_lines
from .managed_regions import is_entry_marker, managed_regions
from .markdown import is_fence, parse_heading

#: An entry of a file: the index of its first line and its lines, as written.
Block = tuple[int, tuple[str, ...]]
#: A heading path longer than this in a history record is not a place (the record was edited).
MAX_SECTION_DEPTH = 64
#: Neighbours kept on each side of an entry.
NEIGHBOURS = 4
#: The heading saves go under when none is configured and MEMORY.md ends in a section
#: another tool writes (see :func:`append_saved`).
SAVE_HEADING = "## Saved by memdeck"


@dataclass(frozen=True)
class EntryPlace:
    """Where an entry was: ``section`` the heading lines above it, outermost first (empty
    above the first heading); ``previous``/``following`` the fingerprints (:func:`fingerprint`)
    of the entries before and after it in that section, nearest first (empty when it was
    first/last); ``blank_above``/``blank_below`` the blank lines between it and what was
    above/below it; ``occurrence`` which of the sections with that heading path it was in;
    ``unterminated`` when it was the file's last line, with no line ending."""

    section: tuple[str, ...]
    previous: tuple[str, ...]
    following: tuple[str, ...]
    blank_above: int
    blank_below: int
    occurrence: int = 0
    unterminated: bool = False

    def as_record(self) -> dict[str, object]:
        """The place as JSON for the audit trail (see :meth:`from_record`)."""
        return {
            "section": list(self.section),
            "previous": list(self.previous),
            "following": list(self.following),
            "blank_above": self.blank_above,
            "blank_below": self.blank_below,
            "occurrence": self.occurrence,
            "unterminated": self.unterminated,
        }

    @classmethod
    def from_record(cls, value: object) -> EntryPlace | None:
        """The place an audit-trail record keeps; None when it keeps none, or one of the
        wrong shape (the file is the user's: anyone may have edited it)."""
        if not isinstance(value, dict):
            return None
        lines = {key: value.get(key) for key in ("section", "previous", "following")}
        counts = {key: value.get(key, 0) for key in ("blank_above", "blank_below", "occurrence")}
        texts: dict[str, tuple[str, ...]] = {}
        for key, item in lines.items():
            if not isinstance(item, list) or not all(isinstance(line, str) for line in item):
                return None
            texts[key] = tuple(item)
        numbers: dict[str, int] = {}
        for key, count in counts.items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                return None
            numbers[key] = count
        if len(texts["section"]) > MAX_SECTION_DEPTH or any(
            len(texts[key]) > NEIGHBOURS for key in ("previous", "following")
        ):
            return None
        return cls(
            texts["section"],
            texts["previous"],
            texts["following"],
            numbers["blank_above"],
            numbers["blank_below"],
            numbers["occurrence"],
            value.get("unterminated") is True,
        )

    @property
    def heading(self) -> str:
        """The heading the entry was under ("" above the first heading)."""
        return self.section[-1] if self.section else ""


def _headings(bodies: Sequence[str]) -> tuple[list[tuple[str, ...]], list[int]]:
    """For each line the heading lines it is under, outermost first (a heading is under
    itself), and the indices of the heading lines; headings inside code fences do not count."""
    paths: list[tuple[str, ...]] = []
    heading_lines: list[int] = []
    stack: list[tuple[int, str]] = []
    in_fence = False
    for index, body in enumerate(bodies):
        line = body.removeprefix("\ufeff") if index == 0 else body
        if is_fence(line):
            in_fence = not in_fence
        heading = None if in_fence else parse_heading(line)
        if heading is not None:
            while stack and stack[-1][0] >= heading[0]:
                stack.pop()
            stack.append((heading[0], body))
            heading_lines.append(index)
        paths.append(tuple(text for _, text in stack))
    return paths, heading_lines


def _region(heading_lines: list[int], heading: int | None, total: int) -> tuple[int, int]:
    """The lines between heading line ``heading`` (None: the top of the file) and the next
    heading of any level: ``(start, end)``."""
    start = 0 if heading is None else heading + 1
    end = next((i for i in heading_lines if i >= start), total)
    return start, end


def _blank(body: str) -> bool:
    return not body.strip()


def _blanks_after(bodies: Sequence[str], index: int, limit: int, end: int) -> int:
    """How many blank lines start at ``index`` (at most ``limit``, none at or after ``end``)."""
    count = 0
    while count < limit and index + count < end and _blank(bodies[index + count]):
        count += 1
    return count


def _blanks_before(bodies: Sequence[str], index: int, limit: int, start: int) -> int:
    """How many blank lines end just before ``index`` (at most ``limit``, none before
    ``start``)."""
    count = 0
    while count < limit and index - count - 1 >= start and _blank(bodies[index - count - 1]):
        count += 1
    return count


def fingerprint(raw: Sequence[str]) -> str:
    """A short fingerprint of an entry's lines (what a place keeps of its neighbours)."""
    return hashlib.sha256("\n".join(raw).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def entry_place(
    bodies: Sequence[str], blocks: Sequence[Block], at: int, size: int, *, unterminated: bool
) -> EntryPlace:
    """The place of the entry whose ``size`` lines start at line ``at`` of ``bodies``
    (``blocks``: every entry of the file, in order; ``unterminated``: the file's last line
    has no line ending)."""
    paths, heading_lines = _headings(bodies)
    above = [i for i in heading_lines if i < at]
    heading = above[-1] if above else None
    start, end = _region(heading_lines, heading, len(bodies))
    before = [raw for first, raw in blocks if start <= first and first + len(raw) <= at]
    after = [raw for first, raw in blocks if at + size <= first < end]
    section = paths[heading] if heading is not None else ()
    return EntryPlace(
        section,
        tuple(fingerprint(raw) for raw in reversed(before[-NEIGHBOURS:])),
        tuple(fingerprint(raw) for raw in after[:NEIGHBOURS]),
        _blanks_before(bodies, at, len(bodies), start),
        _blanks_after(bodies, at + size, len(bodies), end),
        sum(1 for i in above if paths[i] == section) - 1 if section else 0,
        unterminated and at + size == len(bodies),
    )


def insertion_point(
    bodies: Sequence[str], blocks: Sequence[Block], place: EntryPlace
) -> int | None:
    """Where an entry that was at ``place`` goes back: the index of the line it goes before
    (``len(bodies)``: at the end); None when its section is no longer in the file.

    After the nearest entry that was before it and is still in its section; first in the
    section when it was first; else before the nearest that was after it, else last; with as
    many of the blank lines it had around it as are there. Where several sections have its
    heading path, the one holding such a neighbour, else the one it was in by count.
    """
    paths, heading_lines = _headings(bodies)
    if place.section:
        headings = [i for i in heading_lines if paths[i] == place.section]
        if not headings:
            return None
        regions = [_region(heading_lines, heading, len(bodies)) for heading in headings]
    else:
        regions = [_region(heading_lines, None, len(bodies))]
    marked = [(first, first + len(raw), fingerprint(raw)) for first, raw in blocks]
    for neighbour in place.previous:
        for start, end in regions:
            found = next(
                (
                    stop
                    for first, stop, mark in marked
                    if start <= first < end and mark == neighbour
                ),
                None,
            )
            if found is not None:
                return found + _blanks_after(bodies, found, place.blank_above, end)
    if place.previous:
        for neighbour in place.following:
            for start, end in regions:
                found = next(
                    (
                        first
                        for first, _, mark in marked
                        if start <= first < end and mark == neighbour
                    ),
                    None,
                )
                if found is not None:
                    return found - _blanks_before(bodies, found, place.blank_below, start)
    start, end = regions[min(place.occurrence, len(regions) - 1)]
    if not place.previous:
        return start + _blanks_after(bodies, start, place.blank_above, end)
    return end - _blanks_before(bodies, end, place.blank_below, start)


def _tool_written(bodies: Sequence[str], start: int) -> bool:
    """Whether the lines from ``start`` on hold another tool's marks (an entry marker, or a
    region it manages)."""
    return any(is_entry_marker(body) for body in bodies[start:]) or any(
        region.last >= start for region in managed_regions(bodies)
    )


def save_point(bodies: Sequence[str], heading: str | None) -> tuple[int, list[str]] | None:
    """Where entries saved to MEMORY.md go: ``(line index they go before, lines written
    before them)``; None for the end of the file, as always.

    Under ``heading`` when the file has it (after the last line of its section), or when it
    was configured (then added at the end, after a blank line). Without one, the end of the
    file, unless its last section is another tool's (OpenClaw's ``## Promoted From
    Short-Term Memory``, a dreaming block): then under :data:`SAVE_HEADING`, found or added.
    """
    wanted = parse_heading(heading or SAVE_HEADING)
    _, heading_lines = _headings(bodies)
    mine = [i for i in heading_lines if parse_heading(bodies[i]) == wanted]
    if mine:
        start, end = _region(heading_lines, mine[0], len(bodies))
        last = max((i for i in range(start, end) if bodies[i].strip()), default=None)
        return (start, [""]) if last is None else (last + 1, [])
    if heading is None and not _tool_written(bodies, heading_lines[-1] if heading_lines else 0):
        return None
    blank = [""] if bodies and bodies[-1].strip() else []
    return len(bodies), [*blank, heading or SAVE_HEADING, ""]


def append_saved(text: str, entries: Sequence[str], heading: str | None = None) -> str:
    """MEMORY.md's ``text`` with saved ``entries`` (formatted bullets) where
    :func:`save_point` puts them, in the file's own line endings; every other byte kept."""
    lines = split_lines(text)
    point = save_point([line_body(line) for line in lines], heading) if text.strip() else None
    if point is None:
        return append_entries(text, entries)
    at, before = point
    return insert_lines(text, lines, at, [*before, *"\n".join(entries).split("\n")])
