"""A line-based three-way merge: keep both the user's unsaved edits and an outside change to the
same file when they touch different lines.

``merge3(base, mine, theirs)`` takes the text both sides started from and returns one text with
both sides' changes, byte for byte (line endings, a missing final newline and any character are
kept as they are), or None when a line was changed on both sides in different ways.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from .store import split_lines

#: Lines above which no merge is tried (the diff is quadratic at worst); the user still has
#: every other choice.
MAX_MERGE_LINES = 20_000

Hunk = tuple[int, int, list[str]]


def _hunks(base: list[str], other: list[str]) -> list[Hunk]:
    """The changes from ``base`` to ``other``: ``(start, end, replacement)`` over base's lines."""
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [
        (i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    ]


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
    """``base`` with the changes of both ``mine`` and ``theirs``; None when they clash.

    Where both sides insert at the same place, their lines come first, then mine.
    """
    if mine == theirs:
        return mine
    lines = split_lines(base)
    if len(lines) > MAX_MERGE_LINES:
        return None
    mine_hunks = _hunks(lines, split_lines(mine))
    their_hunks = _hunks(lines, split_lines(theirs))
    for ours in mine_hunks:
        for other in their_hunks:
            if ours != other and _clash(ours, other):
                return None
    # Theirs first: at one insertion point the outside lines precede the user's.
    ordered: list[Hunk] = []
    for hunk in [*their_hunks, *mine_hunks]:
        if hunk not in ordered:
            ordered.append(hunk)
    ordered.sort(key=lambda h: (h[0], h[1] != h[0]))
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
