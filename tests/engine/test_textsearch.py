"""Full-text helpers: query terms, code tokens, CJK bigrams, keyword hits, BM25 mapping, pruning."""

from __future__ import annotations

from tui.engine.textsearch import (
    bm25_to_unit,
    build_match_query,
    contains_all_terms,
    fts_body,
    query_terms,
)


def test_bm25_mapping_is_monotonic_bounded_and_not_saturated() -> None:
    ranks = [-25.0, -8.0, -3.0, -1.0, -0.2, 0.0]
    mapped = [bm25_to_unit(r) for r in ranks]
    assert mapped == sorted(mapped, reverse=True)
    assert all(0.0 <= m < 1.0 for m in mapped)
    assert mapped[0] > mapped[2] > mapped[4]
    assert bm25_to_unit(0.5) == 0.0  # a positive rank is not a match strength


def test_query_drops_stop_words_but_never_everything() -> None:
    assert query_terms("what is the plan for the project") == [("plan",), ("project",)]
    assert query_terms("the and of") == [("the",), ("and",), ("of",)]
    assert build_match_query("   ") is None


def test_code_tokens_become_phrases() -> None:
    assert query_terms("snake_case in file.py") == [("snake", "case"), ("file", "py")]
    assert build_match_query("snake_case") == '"snake case"'
    assert build_match_query('quote" injection') == '"quote" OR "injection"'


def test_cjk_is_indexed_and_queried_as_bigrams() -> None:
    assert query_terms("旺财") == [("旺财",)]
    body = fts_body("我的狗叫旺财")
    assert "旺财" in body.split() and "狗" in body.split()
    assert contains_all_terms("我的狗叫旺财", "旺财")
    assert not contains_all_terms("我的猫", "旺财")


def test_keyword_hit_needs_every_content_term() -> None:
    assert contains_all_terms("Debugged file.py in the watcher", "watcher file.py")
    assert not contains_all_terms("Debugged file.py", "watcher file.py")


def test_keyword_hit_is_a_whole_word_whatever_the_case() -> None:
    assert contains_all_terms("Met CAT at the Café", "cat café")
    assert contains_all_terms("Met CAT at the cafe", "cat CAFE")
    assert not contains_all_terms("concatenate the files", "cat files")  # inside a word
    assert not contains_all_terms("the file and py", "file.py")  # a phrase's words, apart
    assert contains_all_terms("see file-py here", "file.py")  # its words, in that order
    assert not contains_all_terms("plain ascii text", "旺财 text")


def test_very_common_words_are_pruned_from_match_but_never_all() -> None:
    shares = {"people": 0.4, "said": 0.3, "adoption": 0.001}
    share = shares.get
    assert build_match_query("people said adoption", lambda t: share(t, 0.0)) == '"adoption"'
    assert build_match_query("people said", lambda t: share(t, 0.0)) == '"said" OR "people"'
    shares.update({"went": 0.6, "home": 0.2})
    assert build_match_query("people said went home", lambda t: share(t, 0.0)) == '"home" OR "said"'
    assert build_match_query("people file.py", lambda t: share(t, 0.0)) == '"file py"'


def test_a_big_index_leaves_a_query_of_common_words_to_the_vectors() -> None:
    shares = {"people": 0.4, "said": 0.3, "adoption": 0.001}

    def share(token: str) -> float:
        return shares.get(token, 0.0)

    assert build_match_query("people said", share, skip_common=True) is None
    # a specific term keeps the full-text side, as does a lone word the user typed
    assert build_match_query("people said adoption", share, skip_common=True) == '"adoption"'
    assert build_match_query("people", share, skip_common=True) == '"people"'
