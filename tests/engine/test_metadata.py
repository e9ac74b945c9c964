"""Metadata comments on memory entries: round trip, unknown keys, broken comments."""

from __future__ import annotations

from datetime import date

from tui.engine.metadata import EntryMeta, format_meta, split_meta, with_meta


def test_metadata_round_trip() -> None:
    line = "- Prefers dark mode <!-- mem id=7f3a conf=high src=user at=2026-11-22 -->"
    text, meta = split_meta(line)
    assert text == "- Prefers dark mode"
    assert meta == EntryMeta(id="7f3a", confidence="high", source="user", at=date(2026, 11, 22))
    assert with_meta(text, meta) == line


def test_metadata_keeps_unknown_keys_and_state() -> None:
    text, meta = split_meta('- x <!-- mem id=1 state=superseded by=2 note="two words" -->')
    assert text == "- x"
    assert meta is not None and not meta.active
    assert meta.extra == {"by": "2", "note": "two words"}
    assert split_meta(format_meta(meta))[1] == meta


def test_lines_without_or_with_broken_metadata_are_plain_text() -> None:
    assert split_meta("- hand written") == ("- hand written", None)
    text, meta = split_meta("- odd <!-- mem conf=bogus at=notadate -->")
    assert text == "- odd" and meta is not None and meta.confidence is None and meta.at is None
    assert split_meta("- html <!-- a comment -->")[1] is None
