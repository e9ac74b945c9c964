"""Unit tests: metadata comments, FTS query building, BM25 mapping, decay, hybrid merge, path guard."""

from __future__ import annotations

import os
from datetime import date

import pytest

from tui.engine.metadata import EntryMeta, format_meta, split_meta, with_meta
from tui.engine.search import SearchOptions, decay_factor, hybrid_score
from tui.engine.textsearch import (
    bm25_to_unit,
    build_match_query,
    contains_all_terms,
    fts_body,
    query_terms,
)
from tui.engine.workspace import PathRefusedError, Workspace, date_for_path


def test_metadata_round_trip():
    line = "- Prefers dark mode <!-- mem id=7f3a conf=high src=user at=2026-11-22 -->"
    text, meta = split_meta(line)
    assert text == "- Prefers dark mode"
    assert meta == EntryMeta(id="7f3a", confidence="high", source="user", at=date(2026, 11, 22))
    assert with_meta(text, meta) == line


def test_metadata_keeps_unknown_keys_and_state():
    text, meta = split_meta('- x <!-- mem id=1 state=superseded by=2 note="two words" -->')
    assert text == "- x"
    assert meta is not None and not meta.active
    assert meta.extra == {"by": "2", "note": "two words"}
    assert split_meta(format_meta(meta))[1] == meta


def test_lines_without_or_with_broken_metadata_are_plain_text():
    assert split_meta("- hand written") == ("- hand written", None)
    text, meta = split_meta("- odd <!-- mem conf=bogus at=notadate -->")
    assert text == "- odd" and meta is not None and meta.confidence is None and meta.at is None
    assert split_meta("- html <!-- a comment -->")[1] is None


def test_bm25_mapping_is_monotonic_bounded_and_not_saturated():
    ranks = [-25.0, -8.0, -3.0, -1.0, -0.2, 0.0]
    mapped = [bm25_to_unit(r) for r in ranks]
    assert mapped == sorted(mapped, reverse=True)
    assert all(0.0 <= m < 1.0 for m in mapped)
    assert mapped[0] > mapped[2] > mapped[4]
    assert bm25_to_unit(0.5) == 0.0  # a positive rank is not a match strength


def test_query_drops_stop_words_but_never_everything():
    assert query_terms("what is the plan for the project") == [("plan",), ("project",)]
    assert query_terms("the and of") == [("the",), ("and",), ("of",)]
    assert build_match_query("   ") is None


def test_code_tokens_become_phrases():
    assert query_terms("snake_case in file.py") == [("snake", "case"), ("file", "py")]
    assert build_match_query("snake_case") == '"snake case"'
    assert build_match_query('quote" injection') == '"quote" OR "injection"'


def test_cjk_is_indexed_and_queried_as_bigrams():
    assert query_terms("旺财") == [("旺财",)]
    body = fts_body("我的狗叫旺财")
    assert "旺财" in body.split() and "狗" in body.split()
    assert contains_all_terms("我的狗叫旺财", "旺财")
    assert not contains_all_terms("我的猫", "旺财")


def test_keyword_hit_needs_every_content_term():
    assert contains_all_terms("Debugged file.py in the watcher", "watcher file.py")
    assert not contains_all_terms("Debugged file.py", "watcher file.py")


def test_decay_halves_every_half_life_and_spares_evergreen():
    now = date(2026, 11, 22)
    assert decay_factor(None, now, 30) == 1.0
    assert decay_factor(now, now, 30) == 1.0
    assert decay_factor(date(2026, 10, 23), now, 30) == pytest.approx(0.5)
    assert decay_factor(date(2026, 9, 23), now, 30) == pytest.approx(0.25)
    assert decay_factor(date(2027, 1, 1), now, 30) == 1.0  # future-dated logs are not boosted


def test_hybrid_weights_are_normalised():
    options = SearchOptions(vector_weight=7, text_weight=3)
    assert hybrid_score(1.0, 0.0, options) == pytest.approx(0.7)
    assert hybrid_score(0.5, 0.5, options) == pytest.approx(0.5)
    assert hybrid_score(None, 0.4, options) == pytest.approx(0.4)  # BM25-only mode


def test_dated_paths():
    assert date_for_path("memory/2026-11-03.md") == date(2026, 11, 3)
    assert date_for_path("memory/2026/2026-11-03-trip.md") == date(2026, 11, 3)
    assert date_for_path("memory/notes.md") is None
    assert date_for_path("MEMORY.md") is None
    assert date_for_path("memory/2026-13-40.md") is None


def test_path_guard(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    (ws.memory_dir / "sub").mkdir(parents=True)
    (ws.memory_dir / "sub" / "2026-11-01.md").write_text("- x\n")
    assert ws.resolve_memory_path("memory/sub/2026-11-01.md").is_file()
    assert ws.resolve_memory_path("./MEMORY.md") == ws.root / "MEMORY.md"
    outside = tmp_path / "secret.md"
    outside.write_text("secret")
    os.symlink(outside, ws.memory_dir / "link.md")
    for bad in [
        "../secret.md",
        "memory/../../secret.md",
        "/etc/passwd",
        str(outside),
        "~/x.md",
        "sessions/a.jsonl",
        ".memdeck/index.db",
        "memory/link.md",
        "C:/x.md",
        "",
    ]:
        with pytest.raises(PathRefusedError):
            ws.resolve_memory_path(bad)


def test_very_common_words_are_pruned_from_match_but_never_all():
    shares = {"people": 0.4, "said": 0.3, "adoption": 0.001}
    share = shares.get
    assert build_match_query("people said adoption", lambda t: share(t, 0.0)) == '"adoption"'
    assert build_match_query("people said", lambda t: share(t, 0.0)) == '"said" OR "people"'
    shares.update({"went": 0.6, "home": 0.2})
    assert build_match_query("people said went home", lambda t: share(t, 0.0)) == '"home" OR "said"'
    assert build_match_query("people file.py", lambda t: share(t, 0.0)) == '"file py"'
