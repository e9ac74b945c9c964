"""A line-based three-way merge: keep both the user's unsaved edits and an outside change to the
same file when they touch different lines.

``merge3(base, mine, theirs)`` takes the text both sides started from and returns one text with
both sides' changes, byte for byte (line endings, a missing final newline and any character are
kept as they are), or None when a line was changed on both sides in different ways.

Identical lines are matched by position, not by content: each side's changes are a shortest
edit script from base (Myers' diff). Where lines repeat, such a script can be lined up with base
in several ways (which of three identical lines was deleted?); the merge is tried for each way
and given only when every way gives the same text. (A heuristic diff once described one
inserted line as "insert a copy here, delete one there"; an outside deletion of one copy then
looked like the same change, and "Keep both" undid it.)
"""

from __future__ import annotations

import difflib
from bisect import bisect_left

from .entries import split_lines

#: Lines above which no merge is tried; the user still has every other choice.
MAX_MERGE_LINES = 20_000
#: Lines one side inserted plus deleted above which no merge is tried: the diff's cost grows
#: with their square.
MAX_MERGE_CHANGES = 400

#: ``(start, end, replacement)``: base lines ``start:end`` become ``replacement``.
Hunk = tuple[int, int, tuple[str, ...]]
#: ``(base_start, base_end, other_start, other_end)``: one change of an edit script.
Span = tuple[int, int, int, int]


def shortest_edit(
    base: list[str], other: list[str], limit: int = MAX_MERGE_CHANGES
) -> list[Span] | None:
    """The changes of a shortest edit script from ``base`` to ``other`` (Myers' greedy diff),
    in order, each a run of deleted and inserted lines with no common line inside; None when
    it needs more than ``limit`` inserted plus deleted lines."""
    head = 0
    while head < min(len(base), len(other)) and base[head] == other[head]:
        head += 1
    tail = 0
    while tail < min(len(base), len(other)) - head and base[-1 - tail] == other[-1 - tail]:
        tail += 1
    codes: dict[str, int] = {}
    a = [codes.setdefault(line, len(codes)) for line in base[head : len(base) - tail]]
    b = [codes.setdefault(line, len(codes)) for line in other[head : len(other) - tail]]
    edits = _myers_edits(a, b, limit)
    if edits is None:
        return None
    spans: list[Span] = []
    for deleted, x, y in edits:
        x, y = x + head, y + head
        end = (x + 1, y) if deleted else (x, y + 1)
        if spans and spans[-1][1] == x and spans[-1][3] == y:
            spans[-1] = (spans[-1][0], end[0], spans[-1][2], end[1])
        else:
            spans.append((x, end[0], y, end[1]))
    return spans


def _myers_edits(a: list[int], b: list[int], limit: int) -> list[tuple[bool, int, int]] | None:
    """The single-line edits of a shortest script from ``a`` to ``b``, in order: ``(True, x,
    y)`` deletes ``a[x]``, ``(False, x, y)`` inserts ``b[y]`` before ``a[x]``."""
    n, m = len(a), len(b)
    most = min(limit, n + m)
    offset = most + 1
    frontier = [0] * (2 * offset + 1)  # the furthest x reached on each diagonal k = x - y
    trace: list[list[int]] = []  # frontier[k] for k in -cost-1..cost+1, before each cost
    for cost in range(most + 1):
        trace.append(frontier[offset - cost - 1 : offset + cost + 2])
        for k in range(-cost, cost + 1, 2):
            if k == -cost or (k != cost and frontier[offset + k - 1] < frontier[offset + k + 1]):
                x = frontier[offset + k + 1]  # down from diagonal k + 1: an insertion
            else:
                x = frontier[offset + k - 1] + 1  # right from diagonal k - 1: a deletion
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            frontier[offset + k] = x
            if x >= n and y >= m:
                return _walk_back(trace, n, m)
    return None


def _walk_back(trace: list[list[int]], n: int, m: int) -> list[tuple[bool, int, int]]:
    """The edits of the path the Myers trace found, from its end back to ``(0, 0)``."""
    edits: list[tuple[bool, int, int]] = []
    x, y = n, m
    for cost in range(len(trace) - 1, 0, -1):
        before = trace[cost]
        at = cost + 1  # diagonal 0's index in ``before``
        k = x - y
        inserted = k == -cost or (k != cost and before[at + k - 1] < before[at + k + 1])
        previous_k = k + 1 if inserted else k - 1
        x = before[at + previous_k]
        y = x - previous_k
        edits.append((not inserted, x, y))
    edits.reverse()
    return edits


def _alignments(base: list[str], other: list[str]) -> list[list[Hunk]] | None:
    """The ways a shortest edit script can line ``other``'s changes up with ``base`` where
    lines repeat: Myers' diff forwards and backwards; each change moved to the first and to
    the last place it can go among identical lines; a replacement kept whole or taken as a
    deletion and an insertion that move on their own. None when there are too many changes."""
    forward = shortest_edit(base, other)
    backward = shortest_edit(base[::-1], other[::-1]) if forward is not None else None
    if forward is None or backward is None:
        return None
    n, m = len(base), len(other)
    unreversed = [(n - i2, n - i1, m - j2, m - j1) for i1, i2, j1, j2 in reversed(backward)]
    found: list[list[Hunk]] = []
    for spans in (forward, unreversed):
        for upwards in (True, False):
            for split in (None, "deletion first", "insertion first"):
                hunks = _slid(base, other, _pieces(spans, split), upwards=upwards)
                if hunks not in found:
                    found.append(hunks)
    return found


def _pieces(spans: list[Span], split: str | None) -> list[Span]:
    """``spans``, each replacement cut into a deletion and an insertion (in ``split``'s order)
    unless ``split`` is None."""
    if split is None:
        return spans
    pieces: list[Span] = []
    for i1, i2, j1, j2 in spans:
        if i1 == i2 or j1 == j2:
            pieces.append((i1, i2, j1, j2))
        elif split == "deletion first":
            pieces += [(i1, i2, j1, j1), (i2, i2, j1, j2)]
        else:
            pieces += [(i1, i1, j1, j2), (i1, i2, j2, j2)]
    return pieces


def _slid(base: list[str], other: list[str], pieces: list[Span], *, upwards: bool) -> list[Hunk]:
    """``pieces`` as hunks, each pure insertion or deletion moved as far up (or down) as it
    can go among identical lines without passing its neighbours (the result is the same);
    pieces that then meet are one hunk."""
    moved = list(pieces)
    order = range(len(moved)) if upwards else range(len(moved) - 1, -1, -1)
    for index in order:
        i1, i2, j1, j2 = moved[index]
        if i1 < i2 and j1 < j2:
            continue  # a replacement stays where it is
        if upwards:
            floor = moved[index - 1][1] if index else 0
            while i1 > floor and base[i1 - 1] == (base[i2 - 1] if i1 < i2 else other[j2 - 1]):
                i1, i2, j1, j2 = i1 - 1, i2 - 1, j1 - 1, j2 - 1
        else:
            ceiling = moved[index + 1][0] if index + 1 < len(moved) else len(base)
            while i2 < ceiling and base[i2] == (base[i1] if i1 < i2 else other[j1]):
                i1, i2, j1, j2 = i1 + 1, i2 + 1, j1 + 1, j2 + 1
        moved[index] = (i1, i2, j1, j2)
    hunks: list[Hunk] = []
    for i1, i2, j1, j2 in moved:
        if hunks and hunks[-1][1] == i1:
            start, _, lines = hunks[-1]
            hunks[-1] = (start, i2, (*lines, *other[j1:j2]))
        else:
            hunks.append((i1, i2, tuple(other[j1:j2])))
    return hunks


def _clash(first: Hunk, second: Hunk) -> bool:
    """Whether two changes touch the same lines of base (an insertion clashes only with a
    change of the lines around its point, not with another insertion or a neighbour)."""
    (a1, a2, _), (b1, b2, _) = first, second
    if a1 == a2 and b1 == b2:
        return False  # two insertions: both go in
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return max(a1, b1) < min(a2, b2)


def merge3(base: str, mine: str, theirs: str) -> str | None:
    """``base`` with the changes of both ``mine`` and ``theirs``; None when they clash, when
    the result would depend on which of some identical lines a side changed, or when either
    side changed more than :data:`MAX_MERGE_CHANGES` lines.

    Where both sides insert at the same place, their lines come first, then mine.
    """
    if mine == theirs:
        return mine
    lines = split_lines(base)
    if len(lines) > MAX_MERGE_LINES:
        return None
    mine_ways = _alignments(lines, split_lines(mine))
    their_ways = _alignments(lines, split_lines(theirs)) if mine_ways is not None else None
    if mine_ways is None or their_ways is None:
        return None
    results = {
        _merged(lines, mine_hunks, their_hunks)
        for mine_hunks in mine_ways
        for their_hunks in their_ways
    }
    if len(results) != 1:
        return None  # the result depends on how identical lines are lined up: no guess
    return results.pop()


def _merged(lines: list[str], mine_hunks: list[Hunk], their_hunks: list[Hunk]) -> str | None:
    """``lines`` with both sides' hunks applied; None when two of them clash."""
    their_ends = [end for _, end, _ in their_hunks]
    for ours in mine_hunks:
        # Their hunks are in order and apart: only those ending at or after ours can clash.
        for other in their_hunks[bisect_left(their_ends, ours[0]) :]:
            if other[0] > ours[1]:
                break
            if ours != other and _clash(ours, other):
                return None
    # Theirs first: at one insertion point the outside lines precede the user's.
    ordered = sorted(dict.fromkeys([*their_hunks, *mine_hunks]), key=lambda h: (h[0], h[1] != h[0]))
    out: list[str] = []
    position = 0
    for start, end, replacement in ordered:
        out.extend(lines[position:start])
        out.extend(replacement)
        position = max(position, end)
    out.extend(lines[position:])
    if any(not line.endswith("\n") for line in out[:-1]):
        return None  # a side's last line had no newline and the other's lines follow it
    return "".join(out)


def matched_lines(old: list[bytes], new: list[bytes]) -> dict[int, int]:
    """Where each line of ``old`` that ``new`` kept is in ``new`` (difflib's matching blocks,
    no junk heuristic)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return {
        block.a + k: block.b + k
        for block in matcher.get_matching_blocks()
        for k in range(block.size)
    }
