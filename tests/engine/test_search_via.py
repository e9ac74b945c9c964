"""Search that explains itself (issue 32, item 1): an entry that holds the words ranks above the
entries that only neighbour them, and the breakdown names the entry a match came through.

A daily-log unit is full-text indexed with the entry before it (its context, at
``context_weight``) but embedded alone; a relevant entry lends its neighbours
``neighbour_weight`` of its relevance. Real index, real model, ``memdeck`` as a process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
import sqlean as sqlite3
from support.chat_support import memdeck_env, run_memdeck

from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.index_db import FTS_TOKENIZER
from tui.engine.search_results import SearchResult, describe_via
from tui.engine.search_via import neighbour_support

NOW = date(2026, 11, 26)
LOG = "memory/2026-11-26.md"
#: The workspace of the issue: L5, L6, L7 of one daily log.
ISSUE_LOG = (
    "# 2026-11-26\n\n## Notes\n\n"
    "- Uses Vim for everything, with lazy.nvim plugins.\n"
    "- My manager is Dana Whitfield.\n"
    "- Prefers dark themes in every app and terminal.\n"
)
L5, L6, L7 = (f"{LOG}#L{n}-{n}" for n in (5, 6, 7))


def write_log(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / LOG).write_text(ISSUE_LOG, encoding="utf-8")
    return root


@pytest.fixture
def engine(tmp_path: Path, embedder: Embedder) -> Iterator[MemoryEngine]:
    memory = MemoryEngine(write_log(tmp_path / "ws"), embedder=embedder)
    memory.load_model()
    memory.sync()
    yield memory
    memory.close()


def by_location(engine: MemoryEngine, query: str) -> tuple[list[str], dict[str, SearchResult]]:
    """The locations in rank order and the results by location (every result: min_score 0)."""
    results = engine.search(query, now=NOW, min_score=0.0, max_results=20).results
    return [r.location for r in results], {r.location: r for r in results}


def test_the_entry_that_holds_the_word_ranks_above_the_one_after_it(
    engine: MemoryEngine,
) -> None:
    order, results = by_location(engine, "Whitfield")
    assert order[0] == L6, order
    assert order.index(L6) < order.index(L7)
    own, after = results[L6].breakdown, results[L7].breakdown
    # L6 holds the word: its text score is its own, nothing came through another entry
    assert own.text == own.own_text == 1.0 and own.text_via == ""
    # L7 only has L6 before it: its text match is all L6's words, weighed less, and it says so
    assert after.text_via == L6 and after.own_text == 0.0
    assert 0 < after.text < own.text
    assert after.neighbour_via == L6 and after.neighbour > after.hybrid
    assert describe_via(after, LOG) == ("via L6", "via L6")
    assert results[L5].breakdown.neighbour_via == L6


def test_a_question_by_meaning_finds_the_entry_not_the_one_after_it(
    engine: MemoryEngine,
) -> None:
    """The vector is the entry's own: L6 ("My manager…") no longer carries L5's Vim."""
    order, results = by_location(engine, "which editor do I use now")
    assert order.index(L5) < order.index(L6), order
    after = results[L6].breakdown
    assert after.neighbour_via == L5 and after.neighbour > after.hybrid
    holder = results[L5].breakdown.vector
    assert holder is not None and after.vector is not None and holder > after.vector


def test_a_match_partly_through_the_entry_before_says_partly(engine: MemoryEngine) -> None:
    _, results = by_location(engine, "Whitfield terminal")
    b = results[L7].breakdown  # "terminal" its own, "Whitfield" in L6 before it
    assert b.text_via == L6
    assert 0 < b.own_text < b.text and b.text_own == b.own_text
    assert describe_via(b, LOG)[0] == "partly via L6"


def test_the_explanation_survives_a_recorded_turn(engine: MemoryEngine) -> None:
    """why? shows a turn's results as recorded (``to_json``); the via fields come back."""
    _, results = by_location(engine, "Whitfield")
    b = results[L7].breakdown
    again = SearchResult.from_json(results[L7].to_json()).breakdown
    assert (again.text_via, again.neighbour_via, again.text_own) == (L6, L6, 0.0)
    assert again.neighbour == pytest.approx(b.neighbour, abs=1e-6)
    # a turn recorded before the fields existed: its text was its own, as far as it says
    old = {k: v for k, v in results[L7].to_json().items() if k != "breakdown"}
    old["breakdown"] = {
        k: v
        for k, v in results[L7].to_json()["breakdown"].items()  # type: ignore[attr-defined]
        if k not in {"text_own", "text_via", "neighbour_via"}
    }
    legacy = SearchResult.from_json(old).breakdown
    assert legacy.text_via == legacy.neighbour_via == "" and legacy.own_text == legacy.text


def test_the_cli_prints_the_part_that_drives_the_score_and_where_it_came_from(
    tmp_path: Path,
) -> None:
    root = write_log(tmp_path / "ws")
    env = memdeck_env(None, tmp_path)
    args = ["--workspace", str(root), "search", "Whitfield", "--now", NOW.isoformat()]
    human = run_memdeck(args, env, timeout=240)
    assert human.returncode == 0, human.stderr
    lines = {line.split()[1]: line for line in human.stdout.splitlines() if line[:1].isdigit()}
    first = next(line for line in human.stdout.splitlines() if line[:1].isdigit())
    assert first.split()[1] == L6
    assert " via " not in lines[L6]
    # L7's score is its neighbour support (0.9 × L6's): printed, with where it came from
    assert "neighbour 0." in lines[L7] and "neighbour" in lines[L7].split(" via L6")[1]
    assert "text 0." in lines[L7] and lines[L7].count("via L6") == 2
    assert "neighbour 0." in lines[L5] and "via L6" in lines[L5]
    as_json = run_memdeck([*args, "--json"], env, timeout=240)
    assert as_json.returncode == 0, as_json.stderr
    payload = {r["start_line"]: r for r in json.loads(as_json.stdout)["results"]}
    assert payload[6]["score"] > payload[7]["score"]
    seven = payload[7]["breakdown"]
    assert seven["text_via"] == L6 and seven["neighbour_via"] == L6 and seven["text_own"] == 0
    assert payload[6]["breakdown"]["text_via"] == ""


def test_an_index_with_one_full_text_column_searches_and_takes_writes_until_rebuilt(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = write_log(tmp_path / "ws")
    first = MemoryEngine(root, embedder=embedder)
    first.sync()
    first.close()
    # The index of the previous schema: one full-text column holding context and text alike.
    conn = sqlite3.connect(str(root / ".memdeck" / "index.db"))
    conn.execute("DROP TABLE chunks_vocab")
    conn.execute("DROP TABLE chunks_fts")
    conn.execute(f"CREATE VIRTUAL TABLE chunks_fts USING fts5(body, tokenize = '{FTS_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
    conn.execute(
        "INSERT INTO chunks_fts(rowid, body) SELECT id, context || ' ' || text FROM chunks"
    )
    conn.execute("UPDATE meta SET value = 'schema=3;old' WHERE key = 'fingerprint'")
    conn.commit()
    conn.close()
    engine = MemoryEngine(root, embedder=embedder)
    try:
        engine.load_model()
        results = engine.search("Whitfield", now=NOW, min_score=0.0).results
        assert L6 in [r.location for r in results]
        assert all(r.breakdown.text_via == "" for r in results)  # it cannot tell: says nothing
        # a file the watcher re-reads before the rebuild is written as the old table holds it
        with (root / LOG).open("a", encoding="utf-8") as log:
            log.write("- Booked the dentist for Friday.\n")
        engine.index.sync_paths([LOG])
        assert engine.search("dentist", now=NOW).results
        engine.sync()  # the schema changed: rebuilt
        index = sqlite3.connect(str(root / ".memdeck" / "index.db"))
        columns = [row[1] for row in index.execute("PRAGMA table_info(chunks_fts)")]
        index.close()
        assert columns == ["body", "context"]
        assert engine.search("dentist", now=NOW).results
        order, rebuilt = by_location(engine, "Whitfield")
        assert order[0] == L6 and rebuilt[L7].breakdown.text_via == L6
    finally:
        engine.close()


def test_neighbours_are_read_only_where_they_can_pass_the_floor(
    tmp_path: Path, embedder: Embedder
) -> None:
    """With a floor, neighbour_support leaves unread a neighbour that is no candidate and can
    reach the floor neither lent nor by itself; every entry it does lend to gets what it gets
    without the floor, and one on the way to such an entry or to a candidate is read."""
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    notes = "".join(f"- Note number {n} of the day.\n" for n in range(9))
    (root / LOG).write_text(f"# 2026-11-26\n\n## Notes\n\n{notes}", encoding="utf-8")
    memory = MemoryEngine(root, embedder=embedder)
    try:
        memory.sync()
        index = memory.index
        ids = [row.id for row in index.iter_chunks(LOG)]
        assert len(ids) == 9
        options = memory.search_options  # neighbour weight 0.9, falloff 0.8, reach 2
        # ids[0] lends 0.315 one entry away; ids[4] 0.18 and 0.144; ids[6] 0.09 and 0.072
        hybrids = {ids[0]: 0.35, ids[4]: 0.2, ids[6]: 0.1}
        own = {ids[2]: 0.5}  # passes the floor by itself

        def support(floor: float | None) -> tuple[dict[int, float], set[int]]:
            rows = index.chunks_by_id(list(hybrids))
            lent, _ = neighbour_support(
                index,
                rows,
                dict(hybrids),
                options,
                len(hybrids),
                floor=floor,
                own=lambda wanted: {i: own.get(i, 0.0) for i in wanted},
            )
            return lent, set(rows)

        everything, all_read = support(None)
        pruned, read = support(0.3)
        # lent enough; passes by itself; on the way to ids[2]; on the way to the candidate ids[6]
        assert {ids[1], ids[2], ids[3], ids[5]} <= read
        assert {ids[7], ids[8]} <= all_read - read  # 0.09 and 0.072 lent, nothing of their own
        assert ids[7] not in pruned and ids[8] not in pruned
        assert pruned == {i: s for i, s in everything.items() if i in read}
        assert pruned[ids[6]] == everything[ids[6]] > 0  # reached through ids[5]
    finally:
        memory.close()
