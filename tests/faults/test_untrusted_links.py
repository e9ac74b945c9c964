"""Issue 29, items 5 and 6: what one writer saves does not retire or mark as changed what
another wrote unless it tells of a change of the same thing.

- Item 6: an update link (search's ``changed_by`` / ``superseded``, the CLI's "changed on …?",
  a flush's hint) needs evidence that the same attribute changed, not a shared word and "now".
- Item 5: ``save_memory`` retires an entry by itself only when the new text negates it with the
  same subject words; a negation of another wording is a proposal, listed with ids.

Real workspaces, the real embedding model, the real tool path and the real ``memdeck`` command.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck

from tui.chat.tools import MemoryTools
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.search import SearchResult, asks_current_state

NOW = date(2026, 11, 25)
ALLERGY = "The user is allergic to penicillin."
BOOK = "Now reading a history book about penicillin and Fleming."


def _workspace(root: Path, memory_md: list[str], logs: dict[str, list[str]]) -> Path:
    """MEMORY.md with ``memory_md`` as bullets and one daily log per day in ``logs``."""
    (root / "memory").mkdir(parents=True)
    bullets = "".join(f"- {line}\n" for line in memory_md)
    (root / "MEMORY.md").write_text(f"# Long-term Memory\n\n{bullets}", encoding="utf-8")
    for day, lines in logs.items():
        body = "".join(f"- {line}\n" for line in lines)
        (root / "memory" / f"{day}.md").write_text(f"# {day}\n\n{body}", encoding="utf-8")
    return root


@pytest.fixture
def open_engine(embedder: Embedder) -> Iterator[list[MemoryEngine]]:
    engines: list[MemoryEngine] = []
    yield engines
    for engine in engines:
        engine.close()


def _indexed(root: Path, embedder: Embedder, engines: list[MemoryEngine]) -> MemoryEngine:
    engine = MemoryEngine(root, embedder=embedder)
    engines.append(engine)
    engine.sync()
    return engine


def _result(results: list[SearchResult], text: str) -> SearchResult:
    return next(r for r in results if text in r.text)


def _penicillin_workspace(tmp_path: Path) -> Path:
    return _workspace(
        tmp_path / "ws",
        [ALLERGY, "Prefers dark mode in every editor."],
        {"2026-11-23": [BOOK]},
    )


def test_a_shared_word_and_now_do_not_mark_a_fact_changed(
    tmp_path: Path, embedder: Embedder, open_engine: list[MemoryEngine]
) -> None:
    engine = _indexed(_penicillin_workspace(tmp_path), embedder, open_engine)
    for question in ("what am I allergic to now?", "am I still allergic to penicillin?"):
        response = engine.search(question, now=NOW)
        # A question about the present: update links run for it.
        assert asks_current_state(response.intent, engine.search_options), question
        fact = _result(response.results, "allergic to penicillin")
        assert fact.breakdown.superseded == 1.0, question
        assert fact.breakdown.changed_by == "", question
        assert all(r.breakdown.linked == 0.0 for r in response.results), question
    # The hint a flush shows after writing the log: no "changed on 2026-11-23?" either.
    assert engine.facts_changed_in("memory/2026-11-23.md", now=NOW) == []


def test_the_cli_does_not_say_the_fact_changed(tmp_path: Path) -> None:
    root = _penicillin_workspace(tmp_path)
    env = memdeck_env(None, tmp_path)
    args = ["--workspace", str(root), "search", "--now", NOW.isoformat()]
    shown = run_memdeck([*args, "what am I allergic to now?"], env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "allergic to penicillin" in shown.stdout
    assert "changed on" not in shown.stdout and "superseded" not in shown.stdout


def test_a_change_of_the_same_thing_still_links(
    tmp_path: Path, embedder: Embedder, open_engine: list[MemoryEngine]
) -> None:
    root = _workspace(
        tmp_path / "ws",
        ["Commutes to the office by metro, line 11", "Is allergic to penicillin."],
        {
            "2026-09-01": ["Uses Vim for everything, even commit messages"],
            "2026-11-20": ["Switched from Vim to Zed; the multiplayer editing won me over"],
            "2026-11-21": ["Bought a folding bike; cycling to the office now, 20 minutes"],
        },
    )
    engine = _indexed(root, embedder, open_engine)
    editor = engine.search("which editor do I use now?", now=NOW).results
    assert editor[0].text.strip().startswith("- Switched from Vim to Zed")
    vim = _result(editor, "Uses Vim for everything")
    assert vim.breakdown.changed_by == "memory/2026-11-20.md#L3-3"
    # "now" alone tells of a change when the same attribute is restated with another value.
    commute = engine.search("how do I get to the office now?", now=NOW).results
    metro = _result(commute, "by metro")
    assert metro.breakdown.changed_by == "memory/2026-11-21.md#L3-3"
    assert metro.breakdown.superseded < 1.0
    assert engine.facts_changed_in("memory/2026-11-21.md", now=NOW) == [
        "MEMORY.md#L3: Commutes to the office by metro, line 11 — changed on 2026-11-21? "
        "(memory/2026-11-21.md#L3-3)"
    ]


def test_a_negation_of_another_wording_is_only_proposed(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    fact = tools.execute("save_memory", {"content": "The user's birthday is in May."})
    assert fact.ok
    result = tools.execute("save_memory", {"content": "His birthday is not in May."})
    assert result.ok and result.content["saved"] is True
    assert "superseded" not in result.content
    assert result.content["candidates"] == [
        {"id": fact.content["id"], "text": "The user's birthday is in May."}
    ]
    assert "supersedes=" in result.content["note"]
    text = memory.workspace.memory_file.read_text(encoding="utf-8")
    assert "- The user's birthday is in May. <!-- mem id=" in text
    assert "state=superseded" not in text

    # Confirmed by id, as the note says: now it is retired.
    confirmed = tools.execute(
        "save_memory",
        {"content": "His birthday is not in May.", "supersedes": fact.content["id"]},
    )
    assert confirmed.ok and [e["id"] for e in confirmed.content["superseded"]] == [
        fact.content["id"]
    ]
    assert "The user's birthday" not in memory.workspace.memory_file.read_text(encoding="utf-8")


def test_a_negation_in_the_same_words_still_retires(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    tools.execute("save_memory", {"content": "The user's birthday is in May."})
    result = tools.execute("save_memory", {"content": "The user's birthday is not in May"})
    assert [e["text"] for e in result.content["superseded"]] == ["The user's birthday is in May."]
    assert "candidates" not in result.content
