"""What of a memory file belongs to another tool: the regions it manages between its own
``<!-- name:start -->`` and ``<!-- name:end -->`` lines (OpenClaw's dreaming blocks,
``<!-- openclaw:dreaming:light:start -->``), and the marker lines an entry carries above it
(``<!-- openclaw-memory-promotion:KEY -->``).

memdeck never changes a managed region (the tool rewrites it whole: a change there would be
lost, or break it): a forget or a supersede of an entry inside one is refused with
:class:`ReadOnlyRegionError`. A region whose end marker is missing ends at the next heading,
as OpenClaw itself reads one. Lines are bodies (:func:`tui.engine.entries.file_lines`);
markers inside fenced code do not count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .markdown import is_fence, is_heading

_BOUNDARY = re.compile(r"^\s{0,3}<!--\s*(?P<name>[^\s<>]+?):(?P<side>start|end)\s*-->\s*$")
#: A comment line that is one tool's key for the entry below it (``<!-- tool:key -->``).
_ENTRY_MARKER = re.compile(r"^\s{0,3}<!--\s*[A-Za-z][\w.-]*:[^\s<>]+\s*-->\s*$")


class ReadOnlyRegionError(ValueError):
    """A write memdeck was asked to make inside a region another tool manages."""


@dataclass(frozen=True)
class ManagedRegion:
    """The lines ``first``..``last`` (0-based, markers included) that tool ``name`` manages;
    ``closed`` False when its end marker is missing."""

    name: str
    first: int
    last: int
    closed: bool = True

    def overlaps(self, first: int, last: int) -> bool:
        """Whether any of the lines ``first``..``last`` is in the region."""
        return first <= self.last and self.first <= last

    def describe(self, path: str) -> str:
        """The region in words, for a one-line refusal."""
        lines = f"{path}#L{self.first + 1}-{self.last + 1}"
        ending = "" if self.closed else ", its end marker missing"
        return f"the {self.name} block ({lines}{ending})"


def _boundaries(bodies: Sequence[str]) -> list[tuple[int, str, str]]:
    """``(index, name, "start" | "end")`` of each marker line outside fenced code."""
    found: list[tuple[int, str, str]] = []
    in_fence = False
    for index, body in enumerate(bodies):
        if is_fence(body):
            in_fence = not in_fence
            continue
        match = None if in_fence else _BOUNDARY.match(body)
        if match:
            found.append((index, match.group("name"), match.group("side")))
    return found


def managed_regions(bodies: Sequence[str]) -> list[ManagedRegion]:
    """The managed regions of a file, in order. A start pairs with the first end of the same
    name before that name starts again; one without runs to the line before the next heading
    (or to the end of the file)."""
    marks = _boundaries(bodies)
    regions: list[ManagedRegion] = []
    covered = -1
    for position, (index, name, side) in enumerate(marks):
        if side != "start" or index <= covered:
            continue
        end = None
        for other, other_name, other_side in marks[position + 1 :]:
            if other_name != name:
                continue
            if other_side == "end":
                end = other
            break
        if end is not None:
            regions.append(ManagedRegion(name, index, end))
            covered = end
            continue
        stop = next(
            (i for i in range(index + 1, len(bodies)) if is_heading(bodies[i])), len(bodies)
        )
        regions.append(ManagedRegion(name, index, stop - 1, closed=False))
        covered = stop - 1
    return regions


def region_holding(
    regions: Sequence[ManagedRegion], first: int, last: int
) -> ManagedRegion | None:
    """The region any of the lines ``first``..``last`` (0-based) is in, else None."""
    return next((region for region in regions if region.overlaps(first, last)), None)


def is_entry_marker(body: str) -> bool:
    """A line that is only one tool's key for the entry below it
    (``<!-- openclaw-memory-promotion:memory:memory/2026-03-04.md:3:3 -->``), not a region's
    start or end."""
    return bool(_ENTRY_MARKER.match(body)) and not _BOUNDARY.match(body)


def markers_above(bodies: Sequence[str], at: int) -> int:
    """How many entry-marker lines sit directly above line ``at`` (no blank line between):
    they belong to the entry there and go with it when it is removed."""
    count = 0
    while at - count - 1 >= 0 and is_entry_marker(bodies[at - count - 1]):
        count += 1
    return count
