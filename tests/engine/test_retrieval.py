"""Retrieval behaviour: units, stemming, the calibrated threshold, time intent, budget packing.

Real model, real SQLite; each test writes a small workspace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import sqlean as sqlite3

from tui.engine.chunker import ChunkParams
from tui.engine.embeddings import Embedder, count_tokens
from tui.engine.engine import MemoryEngine
from tui.engine.inject import build_injection
from tui.engine.options import InjectionOptions
from tui.engine.search import describe_change
from tui.engine.search_results import Breakdown

NOW = date(2026, 11, 22)

PREFERENCES = """# Long-term Memory

## Preferences
- Deploys everything with nix flakes
- The user likes the colour blue more than any other colour.
- Keeps a paper notebook for meeting notes
"""


def make_engine(root: Path, embedder: Embedder, files: dict[str, str]) -> MemoryEngine:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    engine = MemoryEngine(root, embedder=embedder)
    engine.load_model()
    engine.sync()
    return engine


#: The ``workspace`` fixture: an engine over the given files (closed after the test).
BuildWorkspace = Callable[[dict[str, str]], MemoryEngine]


@pytest.fixture
def workspace(tmp_path: Path, embedder: Embedder) -> Iterator[BuildWorkspace]:
    engines: list[MemoryEngine] = []

    def build(files: dict[str, str]) -> MemoryEngine:
        engine = make_engine(tmp_path / f"ws{len(engines)}", embedder, files)
        engines.append(engine)
        return engine

    yield build
    for engine in engines:
        engine.close()


def test_a_lone_preference_is_found_by_a_semantic_question(workspace: BuildWorkspace) -> None:
    engine = workspace({"MEMORY.md": PREFERENCES})
    results = engine.search("what is my favourite color", now=NOW).results
    assert results, "the preference must pass the default min_score"
    assert "colour blue" in results[0].text
    assert (results[0].start_line, results[0].end_line) == (5, 5)  # the unit's own line


def test_unrelated_questions_return_nothing(workspace: BuildWorkspace) -> None:
    engine = workspace({"MEMORY.md": PREFERENCES})
    for question in ("how tall is mount everest", "recipe for sourdough bread"):
        assert engine.search(question, now=NOW).results == [], question


def test_stemming_matches_other_word_forms(workspace: BuildWorkspace) -> None:
    engine = workspace(
        {"memory/2026-11-20.md": "# 2026-11-20\n\n- Deployed the billing services\n"}
    )
    response = engine.search("deploying service", now=NOW, vector_weight=0.0, text_weight=1.0)
    assert response.results and response.results[0].breakdown.bm25 is not None


def test_current_state_question_prefers_the_newer_entry(workspace: BuildWorkspace) -> None:
    engine = workspace(
        {
            "memory/2025-03-02.md": "# 2025-03-02\n\n- Uses Vim as the editor for everything\n",
            "memory/2026-10-12.md": "# 2026-10-12\n\n- Switched editor from Vim to Zed\n",
        }
    )
    history = engine.search("which editor did I use in 2025", now=NOW).results
    assert history[0].path == "memory/2025-03-02.md"
    current = engine.search("which editor do I use now", now=NOW)
    assert current.intent.current
    assert current.results[0].path == "memory/2026-10-12.md"
    older = next(r for r in current.results if r.path == "memory/2025-03-02.md")
    assert older.breakdown.recency < current.results[0].breakdown.recency


def test_a_current_state_marker_is_not_searched_for_as_a_word(workspace: BuildWorkspace) -> None:
    """'these days' asks for the present; its 'days' must not match every 'day' in the logs
    ("Tokyo day 3" for "what workouts do I do these days?")."""
    engine = workspace(
        {
            "memory/2026-04-16.md": "# 2026-04-16\n\n- Tokyo day 3: tonkotsu at Fuunji\n",
            "memory/2026-09-20.md": "# 2026-09-20\n\n- Bouldering twice a week with Kai\n",
        }
    )
    response = engine.search("what workouts do I do these days?", now=NOW, min_score=0.0)
    assert response.intent.current
    tokyo = [r for r in response.results if r.path == "memory/2026-04-16.md"]
    assert all(r.breakdown.bm25 is None for r in tokyo), "matched by the marker's word"


def test_a_shared_change_word_is_no_update_link(workspace: BuildWorkspace) -> None:
    """Two migrations that share only 'migrating' are not one thing changing."""
    engine = workspace(
        {
            "memory/2026-07-19.md": (
                "# 2026-07-19\n\n- Finished migrating the Harbor database off Postgres onto SQLite\n"
            ),
            "memory/2026-08-14.md": "# 2026-08-14\n\n- Migrating the Harbor docs site off Netlify now\n",
        }
    )
    results = engine.search("what database does Harbor use now?", now=NOW, min_score=0.0).results
    database = next(r for r in results if r.path == "memory/2026-07-19.md")
    assert database.breakdown.superseded == 1.0, database.breakdown.changed_by
    assert all(r.breakdown.linked == 0.0 for r in results)


EDITOR_LOGS = {
    "memory/2025-09-15.md": (
        "# 2025-09-15\n\n- Uses Vim as the editor for everything; the vimrc is 400 lines\n"
        "- Lunch at the noodle bar\n"
    ),
    "memory/2026-05-01.md": "# 2026-05-01\n\n- Wrote a Vim macro for the release notes\n",
    "memory/2026-10-12.md": (
        "# 2026-10-12\n\n- Switched from Vim to Zed last week; multiplayer mode won me over\n"
    ),
    "memory/2026-11-02.md": "# 2026-11-02\n\n- Ran 10 km along the river\n",
}


def test_an_update_link_puts_the_change_above_the_fact_it_replaced(workspace: BuildWorkspace) -> None:
    engine = workspace(EDITOR_LOGS)
    response = engine.search("which editor do I use now?", now=NOW)
    by_path = {r.path: r for r in response.results}
    top = response.results[0]
    assert top.path == "memory/2026-10-12.md"
    assert top.breakdown.linked > 0 and top.breakdown.relevance >= top.breakdown.linked
    old = by_path["memory/2025-09-15.md"]
    assert old.breakdown.superseded < 1.0 and top.breakdown.superseded == 1.0
    # A later mention that tells of no change is not an update.
    macro = by_path.get("memory/2026-05-01.md")
    assert macro is None or macro.breakdown.linked == 0.0


def test_a_question_about_an_earlier_state_links_back_to_the_old_fact(workspace: BuildWorkspace) -> None:
    engine = workspace(EDITOR_LOGS)
    response = engine.search("what editor did I use before Zed?", now=NOW)
    assert response.intent.past_state
    top3 = [r.path for r in response.results[:3]]
    assert "memory/2025-09-15.md" in top3
    assert all(r.breakdown.superseded == 1.0 for r in response.results)


FACT_IN_MEMORY = {
    "MEMORY.md": "# Long-term Memory\n\n- My editor is Vim\n- Keeps a paper notebook\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Switched from Vim to Zed for everything\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\n- Ran 10 km along the river\n",
}


def test_a_newer_log_entry_that_changes_a_memory_md_fact_wins_and_says_so(workspace: BuildWorkspace) -> None:
    engine = workspace(FACT_IN_MEMORY)
    response = engine.search("which editor do I use now?", now=NOW)
    top, *rest = response.results
    assert top.path == "memory/2026-11-20.md" and top.breakdown.linked > 0
    old = next(r for r in rest if r.path == "MEMORY.md")
    assert old.score <= 0.7 * top.score + 1e-9
    assert old.breakdown.superseded < 1.0
    assert old.breakdown.changed_by == "memory/2026-11-20.md#L3-3"
    assert describe_change(old.breakdown) == ("changed on 2026-11-20? (memory/2026-11-20.md#L3-3)")
    # the same in the JSON the CLI and memdeck mcp give
    as_json: dict[str, Any] = old.to_json()
    assert as_json["breakdown"]["changed_by"] == "memory/2026-11-20.md#L3-3"


def test_a_memory_md_fact_written_after_the_change_is_not_superseded(workspace: BuildWorkspace) -> None:
    files = dict(FACT_IN_MEMORY)
    files["MEMORY.md"] = (
        "# Long-term Memory\n\n"
        "- My editor is Zed <!-- mem id=e1 conf=high src=assistant at=2026-11-21 -->\n"
    )
    engine = workspace(files)
    response = engine.search("which editor do I use now?", now=NOW)
    memory = next(r for r in response.results if r.path == "MEMORY.md")
    assert memory.breakdown.superseded == 1.0 and memory.breakdown.changed_by == ""


def test_an_undated_memory_md_fact_is_never_superseded_without_a_question_about_now(workspace: BuildWorkspace) -> None:
    engine = workspace(FACT_IN_MEMORY)
    response = engine.search("vim editor", now=NOW)
    assert all(r.breakdown.superseded == 1.0 for r in response.results)
    assert all(r.breakdown.changed_by == "" for r in response.results)


def test_no_update_links_without_time_intent(workspace: BuildWorkspace) -> None:
    engine = workspace(EDITOR_LOGS)
    response = engine.search("vim editor", now=NOW)
    assert response.results
    assert all(r.breakdown.linked == 0.0 for r in response.results)
    assert all(r.breakdown.superseded == 1.0 for r in response.results)


def test_neighbour_support_reaches_two_entries_and_stays_in_its_file(workspace: BuildWorkspace) -> None:
    # The match is the log's last entry: an entry is indexed with the one before it as context,
    # so the entries before the match share none of its words.
    engine = workspace(
        {
            "memory/2026-11-10.md": (
                "# 2026-11-10\n\n- Cleaned the bike chain\n- Lunch at the noodle bar\n"
                "- Paid the electricity bill\n- Aunt Greta asked about the sourdough starter recipe\n"
            ),
            "memory/2026-11-11.md": "# 2026-11-11\n\n- Watered the plants\n",
        }
    )

    def breakdowns(**options: Any) -> dict[tuple[str, int], Breakdown]:
        response = engine.search(
            "sourdough starter recipe", now=NOW, min_score=0.0, max_results=20, **options
        )
        return {(r.path, r.start_line): r.breakdown for r in response.results}

    by_line = breakdowns()
    match = by_line[("memory/2026-11-10.md", 6)]
    one, two = by_line[("memory/2026-11-10.md", 5)], by_line[("memory/2026-11-10.md", 4)]
    assert one.neighbour == pytest.approx(0.9 * match.hybrid)
    assert two.neighbour == pytest.approx(0.9 * 0.8 * match.hybrid)
    assert breakdowns(neighbour_reach=1)[("memory/2026-11-10.md", 4)].neighbour < two.neighbour
    other = by_line.get(("memory/2026-11-11.md", 3))
    assert other is None or other.neighbour == 0.0


def test_a_time_window_selects_the_logs_of_that_day(workspace: BuildWorkspace) -> None:
    engine = workspace(
        {
            "memory/2026-11-21.md": "# 2026-11-21\n\n- Repotted the basil on the balcony\n",
            "memory/2026-11-10.md": "# 2026-11-10\n\n- Did a lot of coding work on the parser\n",
        }
    )
    response = engine.search("what did I do yesterday?", now=NOW)
    assert response.intent.window == (date(2026, 11, 21), date(2026, 11, 21))
    top = response.results[0]
    assert top.path == "memory/2026-11-21.md" and top.breakdown.time_window == 1.0
    outside = [r for r in response.results if r.path == "memory/2026-11-10.md"]
    assert all(r.breakdown.time_window < 1.0 for r in outside)
    as_json: dict[str, Any] = response.to_json()
    assert as_json["intent"]["window"] == ["2026-11-21", "2026-11-21"]
    assert {"recency", "time_window", "neighbour", "relevance"} <= set(
        as_json["results"][0]["breakdown"]
    )


def test_injection_fills_the_budget_and_groups_by_file(workspace: BuildWorkspace) -> None:
    lines = "".join(f"- Sailing lesson {i}: practised tacking and knots\n" for i in range(60))
    engine = workspace({"memory/2026-11-20.md": "# 2026-11-20\n\n" + lines})
    injection = engine.inject("sailing lessons", now=NOW, budget=400)
    report = injection.report
    relevant = [item for item in report.included if item.kind == "relevant"]
    assert len(relevant) > 12, "packing stops at the budget, not at a fixed count"
    assert report.tokens_used <= 400
    assert any(item.reason.startswith("over budget") for item in report.cut)
    assert injection.text.count("### memory/2026-11-20.md") == 1
    assert "\n- L" in injection.text


def test_packing_skips_what_does_not_fit_and_keeps_going(workspace: BuildWorkspace) -> None:
    engine = workspace(
        {
            "memory/2026-11-20.md": "# 2026-11-20\n\n- short sailing note\n- "
            + "long sailing story " * 60
            + "\n- another short sailing note\n"
        }
    )
    results = engine.search("sailing", now=NOW, max_results=10, min_score=0.0).results
    ordered = sorted(results, key=lambda r: -len(r.text))  # the long one first
    injection = build_injection("", ordered, count_tokens, InjectionOptions(budget_tokens=80))
    assert injection.report.cut[0].location == ordered[0].location
    assert len(injection.report.included) == len(ordered) - 1


def test_inject_stdin_prints_one_json_object_per_query(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(PREFERENCES, encoding="utf-8")
    (root / "memory/2026-11-20.md").write_text("# 2026-11-20\n\n- Flew to Lisbon\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui",
            "--workspace",
            str(root),
            "inject",
            "--stdin",
            "--now",
            "2026-11-22",
        ],
        input="trip to Lisbon\nfavourite colour\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    objects = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(objects) == 2
    first = objects[0]["report"]
    assert any(item["location"] == "memory/2026-11-20.md#L3-3" for item in first["included"])
    assert "### memory/2026-11-20.md" in objects[0]["text"]


def test_an_index_written_by_the_previous_version_opens_and_is_rebuilt(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = tmp_path / "ws"
    engine = make_engine(root, embedder, {"MEMORY.md": PREFERENCES})
    engine.close()
    # Make it look like the previous version's index: no context column, old fingerprint.
    conn = sqlite3.connect(str(root / ".memdeck" / "index.db"))
    conn.execute("ALTER TABLE chunks DROP COLUMN context")
    conn.execute(
        "UPDATE meta SET value = 'schema=1;model=old;chunker=md-v1:200/32' WHERE key = 'fingerprint'"
    )
    conn.commit()
    conn.close()
    reopened = MemoryEngine(root, embedder=embedder)
    try:
        reopened.load_model()
        assert reopened.search("nix flakes", now=NOW).results  # readable before the rebuild
        reopened.sync()
        assert ChunkParams().fingerprint in str(reopened.stats()["fingerprint"])
        assert reopened.search("what is my favourite color", now=NOW).results
    finally:
        reopened.close()
