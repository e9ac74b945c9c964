"""The three-way merge behind the conflict dialog's "Keep both"."""

from __future__ import annotations

import pytest

from tui.engine.merge import merge3

BASE = "# Long-term Memory\n\n- Likes tea\n- Has a dog called Max\n- Lives in Lyon\n"


def test_an_outside_append_and_an_edit_elsewhere_both_stay() -> None:
    mine = BASE.replace("- Likes tea\n", "- Likes green tea\n")
    theirs = BASE + "- outside\n"
    assert merge3(BASE, mine, theirs) == mine + "- outside\n"


def test_two_appends_at_the_end_both_stay_theirs_first() -> None:
    mine = BASE + "- typed by me\n"
    theirs = BASE + "- outside\n"
    assert merge3(BASE, mine, theirs) == BASE + "- outside\n- typed by me\n"


def test_the_same_line_changed_two_ways_is_no_merge() -> None:
    mine = BASE.replace("Max", "Rex")
    theirs = BASE.replace("Max", "Bella")
    assert merge3(BASE, mine, theirs) is None


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    both = BASE.replace("Lyon", "Paris")
    theirs = both.replace("tea", "coffee")
    assert merge3(BASE, both, theirs) == theirs


def test_a_deleted_line_and_a_neighbour_edit_merge() -> None:
    mine = BASE.replace("- Has a dog called Max\n", "")
    theirs = BASE.replace("- Lives in Lyon\n", "- Lives in Paris\n")
    assert merge3(BASE, mine, theirs) == ("# Long-term Memory\n\n- Likes tea\n- Lives in Paris\n")


@pytest.mark.parametrize(
    "base",
    [
        BASE.replace("\n", "\r\n"),
        "# Mémoire\n\n- Café au lait \u2028 chaque matin\n- 犬の名前はマックス\n",
    ],
)
def test_merging_keeps_every_byte_of_both_sides(base: str) -> None:
    newline = "\r\n" if "\r\n" in base else "\n"
    mine = base + f"- mine{newline}"
    first = base.split(newline, 1)
    theirs = first[0] + " (edited)" + newline + first[1]
    merged = merge3(base, mine, theirs)
    assert merged == first[0] + " (edited)" + newline + first[1] + f"- mine{newline}"


def test_no_final_newline_never_joins_two_lines() -> None:
    base = "- a\n"
    assert merge3(base, base + "- mine\n", base + "- theirs") is None
    assert merge3("- a", "- a\n- mine\n", "- b") is None
