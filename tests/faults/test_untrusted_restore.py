"""Issue 29 C.8 and C.11: a restore puts a forgotten entry back where it was, and "Keep both"
never undoes the other side's change when lines repeat.

Real workspaces, real files, the real engine and ``memdeck forgotten`` as a real process; the
three-way merge is checked with properties over small line lists full of repeats.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.engine.merge import merge3
from tui.engine.store import MemoryStore
from tui.engine.workspace import Workspace

# -- C.11: Keep both over repeated lines ------------------------------------------------------

COPY = "- Water the plants\n"
THREE_COPIES = COPY * 3  # a hand-written MEMORY.md: no title


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1]


def test_an_outside_forget_of_one_copy_survives_a_local_insert(tmp_path: Path) -> None:
    """The issue's case: three identical lines, the user types a line, an outside forget
    removes one copy. Keep both gives two copies and the typed line, or is not offered."""
    store = MemoryStore(Workspace.open(tmp_path))
    for forgotten in range(3):
        (tmp_path / "MEMORY.md").write_text(THREE_COPIES, encoding="utf-8")
        store.retire_entries([store.entries()[forgotten]], state="forgotten")
        theirs = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")
        assert theirs == COPY * 2
        for typed_at in range(4):
            mine = COPY * typed_at + "- typed\n" + COPY * (3 - typed_at)
            for one, other in ((mine, theirs), (theirs, mine)):
                merged = merge3(THREE_COPIES, one, other)
                if typed_at in (0, 3):  # before or after all copies: nothing is unclear
                    kept = 2 if typed_at else 0
                    assert merged == COPY * kept + "- typed\n" + COPY * (2 - kept)
                elif merged is not None:  # which copy went is not known
                    assert merged.count(COPY) == 2, merged
                    assert merged.count("- typed\n") == 1


def _run_around(lines: list[str], index: int) -> tuple[int, int]:
    """The run of lines equal to ``lines[index]`` around it: ``(start, end)``."""
    start, end = index, index + 1
    while start > 0 and lines[start - 1] == lines[index]:
        start -= 1
    while end < len(lines) and lines[end] == lines[index]:
        end += 1
    return start, end


REPEATING = st.lists(st.sampled_from(["- a", "- b", ""]), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(base=REPEATING, data=st.data())
def test_a_deletion_and_an_insertion_elsewhere_both_survive(base: list[str], data) -> None:
    deleted = data.draw(st.integers(0, len(base) - 1), label="deleted")
    inserted_at = data.draw(st.integers(0, len(base)), label="inserted at")
    theirs = base[:deleted] + base[deleted + 1 :]
    mine = [*base[:inserted_at], "- new", *base[inserted_at:]]
    start, end = _run_around(base, deleted)
    for one, other in ((mine, theirs), (theirs, mine)):
        merged = merge3(_text(base), _text(one), _text(other))
        if merged is None:
            # Only when the insertion is among the copies one of which was deleted: then
            # where it goes depends on which copy that was.
            assert start <= inserted_at <= end
            continue
        result = _lines(merged)
        without_new = list(result)
        without_new.remove("- new")
        assert without_new == theirs  # the deletion survived
        assert any(mine[:i] + mine[i + 1 :] == result for i in range(len(mine)))  # the insertion


def _changed(lines: list[str], start: int, end: int, new: list[str]) -> list[str]:
    return [*lines[:start], *new, *lines[end:]]


CHANGE = st.tuples(st.integers(0, 8), st.integers(0, 1), st.lists(st.just("- C"), max_size=1))


@settings(max_examples=400, deadline=None)
@given(base=REPEATING, common=CHANGE, extra=CHANGE)
def test_the_same_change_on_both_sides_is_taken_once(
    base: list[str], common: tuple[int, int, list[str]], extra: tuple[int, int, list[str]]
) -> None:
    """Both sides made one change; mine also another, apart from it: the result is mine (or,
    where repeats make it unclear which lines the changes are, no merge), never a doubled
    change."""
    start, size, new = common
    start = min(start, len(base))
    end = min(start + size, len(base))
    if end == start and not new:
        return
    other_start, other_size, _ = extra
    other_start = min(other_start, len(base))
    other_end = min(other_start + other_size, len(base))
    if not (other_end < start or end < other_start):
        return  # not apart: that is the clash case
    edits = sorted([(start, end, new), (other_start, other_end, ["- M"])], reverse=True)
    mine = base
    for edit_start, edit_end, lines in edits:
        mine = _changed(mine, edit_start, edit_end, lines)
    theirs = _changed(base, start, end, new)
    for one, other in ((mine, theirs), (theirs, mine)):
        merged = merge3(_text(base), _text(one), _text(other))
        assert merged in (None, _text(mine))
        if len(set(base)) == len(base):
            assert merged == _text(mine)  # no repeats: nothing is unclear
    assert merge3(_text(base), _text(theirs), _text(theirs)) == _text(theirs)


@settings(max_examples=300, deadline=None)
@given(base=REPEATING, data=st.data())
def test_overlapping_different_changes_clash(base: list[str], data) -> None:
    start = data.draw(st.integers(0, len(base) - 1), label="start")
    mine = _changed(base, start, start + 1, ["- mine"])
    other_start = data.draw(st.integers(max(0, start - 1), start), label="other start")
    theirs = _changed(base, other_start, start + 1, ["- theirs"])
    assert merge3(_text(base), _text(mine), _text(theirs)) is None
    assert merge3(_text(base), _text(theirs), _text(mine)) is None
