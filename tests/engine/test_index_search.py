"""Integration: real SQLite (FTS5 + sqlite-vec), the real ONNX model, a workspace in a temp dir."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from support.workspaces import write_workspace

from tui.engine.chunker import ChunkParams
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.index import ChunkRow
from tui.engine.inject import ALWAYS_INJECTED
from tui.engine.textsearch import contains_all_terms

NOW = date(2026, 11, 22)

MEMORY = """# Long-term Memory

## Preferences
- Prefers dark mode in every editor <!-- mem id=a1 conf=high src=user at=2026-11-01 -->
- Writes Python with snake_case names and tests everything with pytest

## Family
- 我的狗叫旺财，它喜欢在公园散步
"""

DAILY = {
    "memory/2026-11-20.md": "# 2026-11-20\n\n## Daily Summary\n- Planned a trip to Lisbon in March, looking at hotels in Alfama.\n",
    "memory/2026-11-21.md": "# 2026-11-21\n\n## Daily Summary\n- Fixed a flaky test in watcher.py caused by a race condition.\n",
    "memory/2025/2025-11-01-garden.md": "# 2025-11-01\n\n- Planted tulip bulbs in the garden; the zucchini harvest failed this year.\n",
}


@pytest.fixture
def engine(tmp_path: Path, embedder: Embedder) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY), embedder=embedder)
    eng.load_model()
    eng.sync()
    yield eng
    eng.close()


def test_semantic_query_finds_the_trip_with_a_consistent_breakdown(engine: MemoryEngine) -> None:
    response = engine.search("holiday travel to Portugal", now=NOW, min_score=0.0)
    assert response.mode == "hybrid"
    top = response.results[0]
    assert top.path == "memory/2026-11-20.md" and "Lisbon" in top.text
    b = top.breakdown
    assert b.vector is not None and 0 < b.vector <= 1
    assert b.hybrid == pytest.approx(0.7 * b.vector + 0.3 * b.text)
    assert b.decay == pytest.approx(0.5 ** (2 / 30))
    assert response.intent.window is None and not response.intent.current
    assert b.recency == 1.0 and b.time_window == 1.0  # no time in the question: age is shown only
    assert b.relevance == max(b.hybrid, b.neighbour)
    assert top.score == pytest.approx(b.relevance * b.recency * b.time_window * b.confidence_weight)
    assert top.location == f"memory/2026-11-20.md#L{top.start_line}-{top.end_line}"


def test_exact_keyword_hit_survives_min_score(engine: MemoryEngine) -> None:
    log = engine.workspace.root / "memory/2026-11-19.md"
    log.write_text(
        "- Long standup: discussed the quarterly roadmap, hiring two designers, the office move to the "
        "third floor, lunch options, the holiday party budget, and the incident report for ticket "
        "qx7-kestrel that still needs a reviewer.\n"
    )
    engine.sync()
    # A min_score no hybrid score reaches: only the exact keyword hit may pass.
    response = engine.search("qx7-kestrel", now=NOW, min_score=0.9)
    assert len(response.results) == 1, "an exact keyword hit must not be filtered out by min_score"
    hit = response.results[0]
    assert "qx7-kestrel" in hit.text and hit.breakdown.keyword_hit
    assert hit.breakdown.hybrid < 0.9


def test_every_returned_result_says_whether_it_is_a_keyword_hit(engine: MemoryEngine) -> None:
    """The keyword check runs only where it decides a result's place, and on the results
    returned: what they say is what the check says, passing the floor on relevance or not."""
    for query, floor in [("Lisbon hotels", 0.0), ("Lisbon hotels", 0.9), ("flaky test", 0.0)]:
        results = engine.search(query, now=NOW, min_score=floor).results
        assert results
        for r in results:
            expected = r.breakdown.bm25 is not None and contains_all_terms(
                f"{r.heading}\n{r.text}", query
            )
            assert r.breakdown.keyword_hit == expected, (query, floor, r.location)
    assert any(r.breakdown.keyword_hit for r in engine.search("Lisbon hotels", now=NOW).results)


def test_strong_old_match_is_still_reachable_and_decay_only_reorders(engine: MemoryEngine) -> None:
    old = engine.search("tulip bulbs garden", now=NOW).results
    assert old and old[0].path == "memory/2025/2025-11-01-garden.md"
    assert old[0].breakdown.decay < 0.001 and old[0].breakdown.recency == 1.0
    no_decay = engine.search("tulip bulbs garden", now=NOW, decay=False).results[0]
    assert no_decay.breakdown.decay == 1.0 and no_decay.score == pytest.approx(old[0].score)
    # asking about the present weighs age in, but never below the floor
    current = engine.search("what is in my garden now", now=NOW).results
    garden = next(r for r in current if r.path == "memory/2025/2025-11-01-garden.md")
    assert garden.breakdown.recency == pytest.approx(0.5, abs=0.01)


def test_code_tokens_and_cjk(engine: MemoryEngine) -> None:
    assert any("watcher.py" in r.text for r in engine.search("watcher.py", now=NOW).results)
    assert any("snake_case" in r.text for r in engine.search("snake_case", now=NOW).results)
    cjk = engine.search("旺财", now=NOW).results
    assert cjk and "旺财" in cjk[0].text


def test_bm25_only_until_the_model_is_loaded(tmp_path: Path) -> None:
    eng = MemoryEngine(write_workspace(tmp_path / "ws", MEMORY, DAILY), embedder=Embedder())
    try:
        eng.sync()
        assert not eng.model_loaded
        response = eng.search("zucchini", now=NOW)
        assert response.mode == "bm25" and response.results
        assert response.results[0].breakdown.vector is None
        assert any("BM25" in note for note in response.notes)
        assert eng.index.pending_embeddings() > 0
    finally:
        eng.close()


def test_incremental_sync_embeds_only_changed_text(engine: MemoryEngine) -> None:
    again = engine.sync()
    assert (again.files_changed, again.embedded) == (0, 0)
    path = engine.workspace.root / "memory/2026-11-21.md"
    path.write_text(path.read_text() + "\n## Evening\n- Reviewed the index design with Ana.\n")
    report = engine.sync()
    assert report.files_changed == 1
    assert (
        report.embedded == 1
    )  # only the new section's chunk; the unchanged one comes from the cache
    assert (
        engine.search("index design review with Ana", now=NOW).results[0].path
        == "memory/2026-11-21.md"
    )


def test_deleted_file_disappears(engine: MemoryEngine) -> None:
    (engine.workspace.root / "memory/2026-11-20.md").unlink()
    report = engine.sync()
    assert report.files_removed == 1 and report.chunks_removed >= 1
    assert all(
        r.path != "memory/2026-11-20.md"
        for r in engine.search("Lisbon hotels", now=NOW, min_score=0).results
    )


def test_confidence_breaks_ties(tmp_path: Path, embedder: Embedder) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text(
        "## A\n- The deploy key rotates every Friday <!-- mem id=m1 conf=medium src=auto -->\n\n"
        "## B\n- The deploy key rotates every Friday <!-- mem id=h1 conf=high src=user -->\n"
    )
    eng = MemoryEngine(root, embedder=embedder)
    eng.load_model()
    eng.sync()
    results = eng.search("when does the deploy key rotate", now=NOW, min_score=0).results
    assert [r.breakdown.confidence for r in results[:2]] == ["high", "medium"]
    eng.close()


def test_threshold_mode_has_no_fixed_cap(tmp_path: Path, embedder: Embedder) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    for day in range(1, 13):
        (root / f"memory/2026-10-{day:02d}.md").write_text(
            f"- Walked the dog Max in the park, day {day}.\n"
        )
    eng = MemoryEngine(root, embedder=embedder)
    eng.load_model()
    eng.sync()
    capped = eng.search("walking my dog in the park", now=NOW, min_score=0)
    unlimited = eng.search("walking my dog in the park", now=NOW, threshold=0.3)
    assert len(capped.results) == 6
    assert len(unlimited.results) == 12
    assert all(r.breakdown.hybrid >= 0.3 or r.breakdown.keyword_hit for r in unlimited.results)
    diverse = eng.search("walking my dog in the park", now=NOW, min_score=0, mmr=True)
    assert len(diverse.results) == 6
    eng.close()


def test_forgotten_entries_never_surface_even_after_a_rebuild(engine: MemoryEngine) -> None:
    memory = engine.workspace.memory_file
    memory.write_text(
        memory.read_text().replace(
            "Prefers dark mode in every editor <!-- mem id=a1",
            "Prefers dark mode in every editor <!-- mem id=a1 state=forgotten",
        )
    )
    engine.sync()
    assert all(
        "dark mode" not in r.text
        for r in engine.search("dark mode editor", now=NOW, min_score=0).results
    )
    engine.reindex()
    assert all(
        "dark mode" not in r.text
        for r in engine.search("dark mode editor", now=NOW, min_score=0).results
    )


def test_corrupt_index_is_rebuilt_with_a_notice(tmp_path: Path, embedder: Embedder) -> None:
    root = write_workspace(tmp_path / "ws", MEMORY, DAILY)
    (root / ".memdeck").mkdir()
    (root / ".memdeck/index.db").write_bytes(b"this is not a database" * 100)
    eng = MemoryEngine(root, embedder=embedder)
    try:
        assert any("unreadable" in n for n in eng.notices)
        eng.sync()
        assert eng.search("zucchini", now=NOW).results
        assert list((root / ".memdeck").glob("index.db.corrupt-*"))
    finally:
        eng.close()


class ExplodingEmbedder(Embedder):
    """The real embedder, made to fail after a number of calls (a crash half-way through)."""

    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_after = fail_after

    def embed(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        self.calls += 1
        if self.calls > self.fail_after:
            raise RuntimeError("simulated crash during rebuild")
        return super().embed(texts, progress)


def test_fingerprint_change_rebuilds_and_a_crash_leaves_the_old_index(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = write_workspace(tmp_path / "ws", MEMORY, DAILY)
    eng = MemoryEngine(root, embedder=embedder)
    eng.load_model()
    eng.sync()
    before = eng.stats()["chunks"]
    eng.close()

    windows = ChunkParams(24, 4, units=False)
    crashing = MemoryEngine(root, embedder=ExplodingEmbedder(fail_after=0), chunk_params=windows)
    with pytest.raises(RuntimeError):
        crashing.sync(embed=True)
    crashing.close()
    assert not list((root / ".memdeck").glob("index.db.rebuild-*"))
    survivor = MemoryEngine(root, embedder=embedder)
    assert survivor.stats()["chunks"] == before
    assert survivor.search("zucchini", now=NOW).results
    survivor.close()

    rebuilt = MemoryEngine(root, embedder=embedder, chunk_params=windows)
    rebuilt.load_model()
    report = rebuilt.sync()
    assert "chunker=md-v2:24/4" in str(rebuilt.stats()["fingerprint"])
    assert report.files_changed == len(DAILY) + 1
    assert (
        rebuilt.search("holiday travel to Portugal", now=NOW, min_score=0).results[0].path
        == "memory/2026-11-20.md"
    )
    rebuilt.close()


def test_bad_files_are_skipped_with_warnings_and_never_modified(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = write_workspace(tmp_path / "ws", MEMORY, DAILY)
    mem = root / "memory"
    (mem / "empty.md").write_text("")
    (mem / "binary.md").write_bytes(b"\x00\x01\x02PNG\x00" * 100)
    with open(mem / "huge.md", "wb") as handle:
        handle.write(b"- line of memory\n" * (50 * 1024 * 1024 // 17))
    (mem / "latin1.md").write_bytes("- caf\xe9 cr\xe8me br\xfbl\xe9e recipe\n".encode("latin-1"))
    (mem / "half.md").write_bytes(b"- complete line about kayaking\n- half-writ")
    outside = tmp_path / "outside.md"
    outside.write_text("- secret outside the workspace\n")
    os.symlink(outside, mem / "escape.md")

    def snapshot() -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*")
            if p.is_file() and not {".memdeck", ".git", ".gitignore"} & set(p.parts)
        }

    before = snapshot()
    eng = MemoryEngine(root, embedder=embedder)
    eng.load_model()
    report = eng.sync()
    text = "\n".join(report.warnings)
    for name in ("binary.md", "huge.md", "latin1.md", "escape.md"):
        assert name in text, f"no warning naming {name}: {text}"
    assert snapshot() == before
    assert any("kayaking" in r.text for r in eng.search("kayaking", now=NOW).results)
    assert any("recipe" in r.text for r in eng.search("recipe", now=NOW).results)
    assert not any(
        "secret" in r.text for r in eng.search("secret outside", now=NOW, min_score=0).results
    )
    eng.close()


def test_searching_while_a_sync_writes(engine: MemoryEngine) -> None:
    root = engine.workspace.root
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(15):
                (root / f"memory/2026-10-{i + 1:02d}.md").write_text(
                    f"- note {i} about sailing lessons\n"
                )
                engine.sync()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        engine.search("sailing lessons", now=NOW)
    thread.join()
    assert not errors
    assert len(engine.search("sailing lessons", now=NOW, threshold=0.0).results) >= 15


def test_a_matched_memory_md_entry_is_explained_and_counted_not_cut(engine: MemoryEngine) -> None:
    """The answer is in MEMORY.md (always in the block): the match is one of the injected
    results, with its scores, counted as included at no extra cost, never listed as cut."""
    injection = engine.inject("which editor theme do I prefer, dark mode?", now=NOW)
    matched = [r for r in injection.results if r.path == "MEMORY.md"]
    assert matched and "dark mode" in matched[0].text
    assert matched[0].breakdown.relevance > 0
    item = next(i for i in injection.report.included if i.location == matched[0].location)
    assert (item.kind, item.tokens, item.reason) == ("relevant", 0, ALWAYS_INJECTED)
    assert not any(c.location.startswith("MEMORY.md#") for c in injection.report.cut)
    assert injection.text.count("Prefers dark mode") == 1  # not packed a second time


def test_injection_respects_budget_and_reports_cuts(engine: MemoryEngine) -> None:
    full = engine.inject("trip to Lisbon", now=NOW)
    assert full.text.startswith("<memory-notes>\n## Long-term Memory\n")
    assert "## Relevant Memories\n### memory/2026-11-20.md\n- L4: Planned a trip" in full.text
    assert "<!--" not in full.text
    assert full.report.tokens_used <= full.report.budget
    assert not full.report.memory_truncated
    # a matched MEMORY.md entry is in the block already: included at no cost, with its scores
    for item in full.report.included[1:]:
        if item.location.startswith("MEMORY.md"):
            assert (item.tokens, item.reason) == (0, ALWAYS_INJECTED)
            assert any(r.location == item.location for r in full.results)
        else:
            assert item.tokens > 0 and not item.reason

    tight = engine.inject("trip to Lisbon", budget=60, now=NOW)
    assert tight.report.tokens_used <= 60
    assert tight.report.memory_truncated
    assert any("truncated" in note for note in tight.report.notes)
    assert tight.report.cut


def test_a_recorded_result_reads_back_typed_and_bad_fields_read_neutral() -> None:
    from tui.engine.search import Breakdown, SearchResult

    recorded = {
        "path": "memory/2026-11-20.md",
        "start_line": 3,
        "end_line": 4,
        "score": 0.82,
        "breakdown": {
            "bm25": -4.2,
            "text": 0.61,
            "vector": 0.91,
            "hybrid": 0.82,
            "relevance": 0.82,
            "confidence": "medium",
            "superseded": "x",
            "recency": float("nan"),
            "linked": True,
        },
    }
    result = SearchResult.from_json(recorded)
    assert result.location == "memory/2026-11-20.md#L3-4" and result.score == 0.82
    b = result.breakdown
    assert (b.bm25, b.vector, b.hybrid, b.confidence) == (-4.2, 0.91, 0.82, "medium")
    assert (b.superseded, b.recency, b.linked) == (1.0, 1.0, 0.0)  # malformed: neutral
    empty = Breakdown.from_json(None)
    assert empty.vector is None and empty.bm25 is None and empty.relevance == 0.0
    assert SearchResult.from_json({"start_line": "3"}).start_line == 0


def test_a_lone_common_word_does_not_pass_for_a_perfect_text_match(
    tmp_path: Path, embedder: Embedder
) -> None:
    """ "can you give me one example" shares only "one" with "Code review SLA is one working
    day": relative to the best text match alone that scored text 1.00 and passed min_score."""
    memory = (
        "# Long-term Memory\n\n## Work\n- Code review SLA is one working day\n"
        "- Our on-call rotation changes every Monday at 10:00\n"
    )
    eng = MemoryEngine(write_workspace(tmp_path / "ws", memory, {}), embedder=embedder)
    eng.load_model()
    eng.sync()
    try:
        assert eng.search("can you give me one example", now=NOW).results == []
        loose = eng.search("can you give me one example", now=NOW, min_score=0.0).results
        sla = next(r for r in loose if "SLA" in r.text)
        assert sla.breakdown.bm25 is not None and sla.breakdown.text < 0.9
        # a match of the query's own words still scores as one
        (hit, *_) = eng.search("code review SLA", now=NOW).results
        assert "SLA" in hit.text and hit.breakdown.text == pytest.approx(1.0)
    finally:
        eng.close()


def test_a_big_index_leaves_a_query_of_common_words_to_the_vectors(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tui.engine.index_text as index_text

    # "a big index": the floors lowered to this workspace's few chunks, every word common
    monkeypatch.setattr(index_text, "MIN_CHUNKS_TO_PRUNE", 1)
    monkeypatch.setattr(index_text, "SKIP_COMMON_FROM_CHUNKS", 1)
    monkeypatch.setattr("tui.engine.textsearch.COMMON_TERM_SHARE", 0.0)
    index = engine.index
    assert index.fts_candidates("trip Lisbon", 5)  # BM25 alone keeps its rarest words
    assert index.fts_candidates("trip Lisbon", 5, vectors_ran=True) == []
    assert index.fts_candidates("Lisbon", 5, vectors_ran=True)  # a lone word stays a lookup
    response = engine.search("trip Lisbon", now=NOW, min_score=0.0)
    assert response.mode == "hybrid" and "Lisbon" in response.results[0].text
    monkeypatch.setattr(index_text, "SKIP_COMMON_FROM_CHUNKS", 10_000)  # a small index
    assert index.fts_candidates("trip Lisbon", 5, vectors_ran=True)


def test_a_query_s_new_words_are_counted_in_one_statement(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tui.engine.index_text as index_text

    monkeypatch.setattr(index_text, "MIN_CHUNKS_TO_PRUNE", 1)  # word shares decide the terms
    index = engine.index
    statements: list[str] = []
    index._reader().set_trace_callback(statements.append)
    try:
        index.fts_candidates("quarterly Lisbon trip budget review", 5)
    finally:
        index._reader().set_trace_callback(None)
    counted = [s for s in statements if "chunks_vocab" in s]
    assert len(counted) == 1, counted  # four words, four lookups before
    assert all(index._doc_shares.get((w,)) is not None for w in ("quarterly", "lisbon", "trip"))


def test_matches_ranked_once_answer_as_the_one_query_does(engine: MemoryEngine) -> None:
    """A search ranks the full text while its vector is computed, and names its vector
    candidates afterwards: those answers are the single query's, for any limit and names."""
    index = engine.index
    query = "the trip to Lisbon garden test in March"
    every = index.fts_matches(query, None)
    ids = [row[0] for row in every]
    assert len(ids) >= 3
    ranked = index.rank_matches(query)
    assert ranked is not None
    for limit in (None, 1, 2, 10):
        for also in ((), ids[-1:], [ids[-1], 999_999], ids[1:]):
            expected = index.fts_matches(query, limit, also=also)
            assert ranked.take(limit, also) == expected
            for asked in (1, 2, 3, len(ids), len(ids) + 5):  # the best, taken before
                best = (ranked.take(asked), asked)
                assert ranked.take(limit, also, best=best) == expected, (limit, also, asked)
    assert index.rank_matches("  ?! ") is None  # nothing worth searching
    # ranking another query on this thread retires the first one's matches
    assert index.rank_matches("watcher race condition") is not None
    with pytest.raises(RuntimeError):
        ranked.take(5)


def test_a_search_ranks_the_text_before_it_waits_for_the_vector(engine: MemoryEngine) -> None:
    from tui.engine.search import search

    index = engine.index
    query = "holiday travel to Portugal"
    vector = engine.embedder.embed_query(query)
    ranked_first: list[bool] = []

    def when_ready() -> np.ndarray:
        ranked_first.append(getattr(index._local, "ranks_fill", None) is not None)
        return vector

    index._local.ranks_fill = None
    waited = search(index, query, when_ready, now=NOW)
    given = search(index, query, vector, now=NOW)
    assert ranked_first == [True]
    assert waited.mode == given.mode == "hybrid"
    assert [(r.path, r.score, r.breakdown) for r in waited.results] == [
        (r.path, r.score, r.breakdown) for r in given.results
    ]
    failed = search(index, "Lisbon trip", lambda: None, now=NOW)
    alone = search(index, "Lisbon trip", None, now=NOW)
    assert failed.mode == alone.mode == "bm25" and failed.notes == alone.notes
    assert [r.path for r in failed.results] == [r.path for r in alone.results]


def test_a_search_reads_its_best_text_matches_while_it_waits_for_the_vector(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of the best full-text matches are read before the wait, and not again after."""
    from tui.engine.search import search

    index = engine.index
    query = "Lisbon trip"
    vector = engine.embedder.embed_query(query)
    best = [chunk_id for chunk_id, _ in index.fts_candidates(query, 10, vectors_ran=True)]
    assert best
    read: list[int] = []
    read_before_the_wait: list[int] = []
    real_read = index.chunks_by_id

    def chunks_by_id(ids: Sequence[int]) -> dict[int, ChunkRow]:
        read.extend(ids)
        return real_read(ids)

    def when_ready() -> np.ndarray:
        read_before_the_wait.extend(read)
        return vector

    given = search(index, query, vector, now=NOW)
    monkeypatch.setattr(index, "chunks_by_id", chunks_by_id)
    waited = search(index, query, when_ready, now=NOW)
    assert set(best) <= set(read_before_the_wait)
    assert set(best).isdisjoint(read[len(read_before_the_wait) :])
    assert [(r.path, r.score, r.breakdown) for r in waited.results] == [
        (r.path, r.score, r.breakdown) for r in given.results
    ]


def test_a_big_index_ranks_the_text_while_the_query_is_embedded(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below RANK_WHILE_EMBEDDING_FROM chunks the query is embedded first, in line (the
    overlap cost more CPU than it saved); from it, on a worker thread: the same answers."""
    import tui.engine.engine as engine_module

    inline = engine.search("holiday travel to Portugal", now=NOW)
    assert engine.query_vectors._workers is None
    monkeypatch.setattr(engine_module, "RANK_WHILE_EMBEDDING_FROM", 1)
    overlapped = engine.search("holiday travel to Portugal!", now=NOW)
    assert engine.query_vectors._workers is not None
    assert overlapped.mode == inline.mode == "hybrid"
    assert [(r.path, r.start_line) for r in overlapped.results] == [
        (r.path, r.start_line) for r in inline.results
    ]


def _names_log(tmp_path: Path, embedder: Embedder) -> MemoryEngine:
    """A log where "Audrey" is in every entry and "Lisbon" in one (a conversation's speaker
    names are in nearly all of its entries)."""
    topics = ["walked the dogs", "baked bread", "fixed the bike", "read a novel", "planted herbs"]
    topics += ["painted the fence", "called her sister", "cleaned the garage", "went swimming"]
    entries = [f"- Audrey {topic} in the morning" for topic in topics]
    entries.insert(2, "- Audrey booked a trip to Lisbon for March")
    log = "# 2026-11-20\n\n" + "\n".join(entries) + "\n"
    eng = MemoryEngine(
        write_workspace(tmp_path / "ws", "# Long-term Memory\n", {"memory/2026-11-20.md": log}),
        embedder=embedder,
    )
    eng.load_model()
    eng.sync()
    return eng


def test_a_word_bm25_weighs_nothing_is_not_searched_beside_vectors(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word in half the entries or more gets FTS5's floor idf (1e-6): beside a rarer word of
    the query it adds nothing to any rank, so it is not searched (every entry was a match to
    rank) and the search answers as before, to the scores."""
    import tui.engine.index_text as index_text

    eng = _names_log(tmp_path, embedder)
    index = eng.index
    try:
        query = "Audrey Lisbon"
        every = index.fts_matches(query, None)
        beside_vectors = index.fts_matches(query, None, vectors_ran=True)
        # the Lisbon entry, and the next one by its context (the entry before it)
        assert len(every) == 10 and len(beside_vectors) == 2
        ranks = {row[0]: row[1:] for row in every}
        for chunk_id, *rank in beside_vectors:
            assert rank == pytest.approx(ranks[chunk_id], abs=1e-5)
        kept = {row[0] for row in beside_vectors}
        assert all(abs(rank[0]) < 1e-5 for i, rank in ranks.items() if i not in kept)
        # reciprocal rank fusion counts matches by place: it keeps every word
        assert len(index.fts_matches(query, None, vectors_ran=True, every_word=True)) == 10

        question = "When is Audrey going to Lisbon?"
        pruned = eng.search(question, now=NOW, min_score=0.0).results
        monkeypatch.setattr(index_text, "WEIGHTY_TERM_SHARE", 0.0)  # the rule off
        assert len(index.fts_matches(query, None, vectors_ran=True)) == 10
        full = eng.search(question, now=NOW, min_score=0.0).results
        assert [r.chunk_id for r in pruned] == [r.chunk_id for r in full]
        assert [r.score for r in pruned] == pytest.approx([r.score for r in full], abs=1e-6)
        assert "Lisbon" in pruned[0].text
    finally:
        eng.close()


def test_rank_fusion_searches_every_word_of_the_query(tmp_path: Path, embedder: Embedder) -> None:
    eng = _names_log(tmp_path, embedder)
    statements: list[str] = []
    eng.index._reader().set_trace_callback(statements.append)
    try:
        eng.search("Audrey Lisbon", now=NOW, min_score=0.0)
        weighted = [s for s in statements if "MATCH" in s and "bm25" in s]
        statements.clear()
        eng.search("Audrey Lisbon", now=NOW, min_score=0.0, fusion="rrf")
        fused = [s for s in statements if "MATCH" in s and "bm25" in s]
    finally:
        eng.index._reader().set_trace_callback(None)
        eng.close()
    assert weighted and all("audrey" not in s.lower() for s in weighted)
    assert fused and all("audrey" in s.lower() for s in fused)
