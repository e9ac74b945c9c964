"""Issue 10 ("the memory stays in view"), the parts below the UI: the injected block, the score
formula, the turn's injection record, the version flag and the environment documented."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakeopenai import FakeOpenAI

from tui import __version__
from tui.chat.chat import ChatEngine
from tui.chat.events import InjectionBuilt
from tui.chat.sessions import SessionStore
from tui.engine.heap import BLAS_THREAD_VARIABLES
from tui.engine.inject import LONG_TERM_HEADING, InjectionReport, build_injection
from tui.engine.options import SearchOptions
from tui.engine.score_formula import score_formula

ROOT = Path(__file__).resolve().parents[2]


def count_words(text: str) -> int:
    return len(text.split())


# -- 9: the injected block does not double MEMORY.md's title --


def test_memory_title_is_not_nested_under_the_long_term_heading() -> None:
    memory = "# Long-term Memory\n\n## Preferences\n- Likes tea\n"
    injection = build_injection(memory, [], count_words)
    assert injection.text.startswith(
        f"<memory-notes>\n{LONG_TERM_HEADING}\n## Preferences\n- Likes tea"
    )
    assert "# Long-term Memory" not in injection.text.replace(LONG_TERM_HEADING, "")
    # a MEMORY.md without a title loses nothing
    untitled = build_injection("## Preferences\n- Likes tea\n", [], count_words)
    assert "## Preferences\n- Likes tea" in untitled.text


# -- 7: one score formula, from the code's constants --


def test_the_score_formula_follows_the_options_and_is_the_readme_s() -> None:
    formula = score_formula()
    assert formula.splitlines()[:4] == [
        "score = relevance · recency · time_window · superseded · confidence",
        "relevance = max(hybrid, neighbour, linked)   "
        "(neighbour = 0.9·hybrid of an adjacent daily-log entry, ×0.8 per entry further, up to 2;"
        " linked = 0.9·relevance of an entry this one updates)",
        "superseded = 0.7 for an entry a newer one changed, for a MEMORY.md entry lower if needed to score 0.7× that entry (current-state questions), else 1",
        "hybrid = 0.7·vector + 0.3·text   (text alone without vectors)",
    ]
    assert "up to 1;" in score_formula(SearchOptions(neighbour_reach=1))
    assert "hybrid = 0.5·vector + 0.5·text" in score_formula(
        SearchOptions(vector_weight=1, text_weight=1)
    )
    assert "reciprocal rank fusion" in score_formula(SearchOptions(fusion="rrf"))
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## How search scores a memory") :]
    assert f"```\n{formula}\n```" in section.split("\n## ")[0]


# -- 8: a turn's injection is recorded with it and survives a restart --


async def test_a_turn_records_what_it_injected(engine: ChatEngine, server: FakeOpenAI) -> None:
    engine.memory.store.append_daily("## Walks\n\n- Took the dog Max to the beach on Sunday\n")
    engine.memory.sync(embed=False)
    server.enqueue(FakeOpenAI.text("The beach."))
    session = engine.sessions.create().id
    events = [e async for e in engine.run_turn(session, "where did the dog go on Sunday?")]
    built = next(e for e in events if isinstance(e, InjectionBuilt))

    # read back by a fresh store, as after a restart
    reopened = SessionStore(engine.memory.workspace).load(session)
    (turn,) = reopened.injections
    assert turn.user_text == "where did the dog go on Sunday?"
    assert turn.text == built.text and "beach" in turn.text
    report = InjectionReport.from_json(turn.report)
    assert report.tokens_used == built.report.tokens_used
    assert [i.location for i in report.included] == [i.location for i in built.report.included]
    relevant = [i for i in report.included if i.kind == "relevant"]
    assert relevant and len(turn.results) == len(relevant)
    # the results come back typed, with the breakdown search gave (the text stays in the block)
    searched = engine.memory.search("where did the dog go on Sunday?").results[0]
    recorded = turn.results[0]
    assert recorded.location == searched.location and recorded.path.startswith("memory/")
    assert recorded.breakdown.hybrid == pytest.approx(searched.breakdown.hybrid, abs=1e-6)
    assert recorded.breakdown.recency == pytest.approx(searched.breakdown.recency, abs=1e-6)
    assert recorded.text == ""
    line = next(
        json.loads(raw)
        for raw in engine.sessions.path(session).read_text().splitlines()
        if '"injection"' in raw
    )
    assert "text" not in line["results"][0]  # the record stays small


# -- 17: --version, and every environment variable documented --


def test_version_flag() -> None:
    memdeck = Path(sys.executable).with_name("memdeck")
    done = subprocess.run([str(memdeck), "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"memdeck {__version__}"


def test_every_environment_variable_the_code_reads_is_in_the_readme() -> None:
    code = "\n".join(p.read_text() for p in (ROOT / "tui").rglob("*.py"))
    names = set(re.findall(r"os\.environ(?:\.get|\.setdefault)?\(\s*\"([A-Z_]+)\"", code))
    names |= set(re.findall(r"env(?:\.get\(|\[)\"([A-Z_]+)\"", code))
    names |= set(re.findall(r"\"((?:MEMDECK|OPENAI)_[A-Z_]+)\"", code))
    names |= set(BLAS_THREAD_VARIABLES)
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("Environment variables (they win") :].split("\n\n")[1]
    missing = sorted(name for name in names if f"`{name}`" not in table)
    # MEMDECK_<SETTING> covers every setting of config.toml
    from tui.chat.config import _FILE_FIELDS

    settings = {f"MEMDECK_{name.upper()}" for name in _FILE_FIELDS}
    assert [name for name in missing if name not in settings] == []
    assert "`MEMDECK_<SETTING>`" in table


def test_the_readme_stays_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\(((?:docs|tests|tui)/[^)#]+)\)", readme)
    assert "docs/retrieval.md" in links and "docs/performance.md" in links
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_readme_lists_every_command_and_help_says_plain_memdeck_opens_the_app() -> None:
    from tui.cli import COMMANDS, build_parser

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Command line") :].split("\n## ")[0]
    for name in COMMANDS:
        assert f"memdeck [--workspace DIR] {name}" in section, name
    for flag in ("--rename", "--delete", "--restore", "--force"):
        assert flag in section
    helped = " ".join(build_parser().format_help().split())
    assert "Without a COMMAND, memdeck opens the app" in helped
    assert "[COMMAND]" in helped  # not shown as required
