"""The memory tools on a real engine and workspace (BM25 only: the model is not loaded)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from support.chat_support import TOOLS_TODAY

from tui.chat.tool_specs import MAX_SAVE_CHARS
from tui.chat.tools import MemoryTools, split_statement
from tui.engine.engine import MemoryEngine

TODAY = TOOLS_TODAY


def history(memory: MemoryEngine) -> list[dict[str, Any]]:
    path = memory.workspace.history_path
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def found(memory: MemoryEngine, query: str) -> list[str]:
    return [r.text for r in memory.search(query, min_score=0.0, now=TODAY).results]


def test_save_memory_validation(tools: MemoryTools, memory: MemoryEngine) -> None:
    for bad in ({}, {"content": ""}, {"content": "   \n "}, {"content": 42}):
        result = tools.execute("save_memory", bad)
        assert not result.ok and result.content["error"] == "validation_error"
    too_long = tools.execute("save_memory", {"content": "x" * (MAX_SAVE_CHARS + 1)})
    assert not too_long.ok and too_long.content["error"] == "validation_error"
    assert "5,000" in too_long.content["message"]
    assert tools.execute("save_memory", "{not json").content["error"] == "validation_error"
    assert not memory.workspace.memory_file.exists()
    assert tools.execute("save_memory", {"content": "y" * MAX_SAVE_CHARS}).ok


def test_save_memory_appends_high_confidence_and_indexes_at_once(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    result = tools.execute("save_memory", json.dumps({"content": "Prefers tabs over spaces"}))
    assert result.ok and result.content["saved"] is True
    text = memory.workspace.memory_file.read_text()
    assert f"- Prefers tabs over spaces <!-- mem id={result.content['id']} conf=high" in text
    assert any("Prefers tabs over spaces" in t for t in found(memory, "tabs spaces"))
    again = tools.execute("save_memory", {"content": "prefers tabs over spaces."})
    assert again.ok and again.content["saved"] is False
    assert memory.workspace.memory_file.read_text().count("tabs over spaces") == 1


def test_split_statement_heuristic() -> None:
    assert split_statement("My dog is Max") == ("dog", "max")
    assert split_statement("The user's dog is called Luna.") == ("dog", "luna")
    assert split_statement("Editor: neovim") == ("editor", "neovim")
    assert split_statement("Likes hiking and chess") is None


def test_newer_fact_supersedes_what_the_model_names(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    tools.execute("save_memory", {"content": "Works on project Atlas"})
    first = tools.execute("save_memory", {"content": "My dog is Max"})
    max_id = first.content["id"]
    second = tools.execute(
        "save_memory", {"content": "The user's dog is Luna", "supersedes": max_id}
    )
    assert second.ok and second.content["superseded"] == [{"id": max_id, "text": "My dog is Max"}]
    text = memory.workspace.memory_file.read_text()
    assert "Max" not in text and "Luna" in text and "Atlas" in text
    record = [h for h in history(memory) if h["event"] == "superseded"]
    assert record and record[0]["text"] == "My dog is Max"
    assert record[0]["entry_id"] == max_id
    assert record[0]["replaced_by"] == second.content["id"]
    assert not any("Max" in t for t in found(memory, "dog Max"))
    assert any("Luna" in t for t in found(memory, "dog"))


def test_explicit_supersedes_by_text_not_by_words(tools: MemoryTools, memory: MemoryEngine) -> None:
    tools.execute("save_memory", {"content": "Uses a ThinkPad X1 for work"})
    tools.execute("save_memory", {"content": "Drinks green tea"})
    words = tools.execute(
        "save_memory", {"content": "Switched to a MacBook for work", "supersedes": "ThinkPad"}
    )
    assert "superseded" not in words.content and "nothing was superseded" in words.content["note"]
    assert [c["text"] for c in words.content["candidates"]] == ["Uses a ThinkPad X1 for work"]
    result = tools.execute(
        "save_memory",
        {"content": "Switched to a MacBook for work", "supersedes": "Uses a ThinkPad X1 for work"},
    )
    assert result.content["saved"] is False  # already saved; the named entry is still retired
    assert [e["text"] for e in result.content["superseded"]] == ["Uses a ThinkPad X1 for work"]
    text = memory.workspace.memory_file.read_text()
    assert "ThinkPad" not in text and "green tea" in text and text.count("MacBook") == 1
    missing = tools.execute("save_memory", {"content": "Lives in Lyon", "supersedes": "Paris"})
    assert missing.ok and "nothing was superseded" in missing.content["note"]


def test_memory_search_snippets(tools: MemoryTools, memory: MemoryEngine) -> None:
    memory.workspace.memory_dir.mkdir()
    long_para = "Kubernetes migration notes. " + "The cluster upgrade went fine. " * 60
    (memory.workspace.memory_dir / "2026-11-20.md").write_text(
        f"# 2026-11-20\n\n## Work\n\n{long_para}\n", encoding="utf-8"
    )
    memory.sync(embed=False)
    result = tools.execute("memory_search", {"query": "kubernetes migration", "maxResults": 3})
    assert result.ok and result.content["results"]
    for hit in result.content["results"]:
        assert set(hit) == {"path", "startLine", "endLine", "score", "snippet", "ids"}
        assert len(hit["snippet"]) <= 700
        assert hit["path"] == "memory/2026-11-20.md" and hit["startLine"] >= 1
        assert hit["ids"] == []  # a daily log's lines have no ids
    empty = tools.execute("memory_search", {"query": "zebra", "minScore": 0.9})
    assert empty.ok and empty.content["results"] == []
    assert not tools.execute("memory_search", {"query": ""}).ok
    assert not tools.execute("memory_search", {"query": "x", "minScore": 3}).ok


def test_memory_get_reads_memory_files_only(
    tools: MemoryTools, memory: MemoryEngine, tmp_path: Path
) -> None:
    ws = memory.workspace.root
    (ws / "memory").mkdir()
    (ws / "memory" / "2026-11-21.md").write_text(
        "# 2026-11-21\n\n- line a\n- secret gone <!-- mem state=forgotten -->\n- line c\n"
    )
    ok = tools.execute("memory_get", {"path": "memory/2026-11-21.md", "from": 3, "lines": 3})
    assert ok.ok and ok.content["text"] == "- line a\n- line c"
    assert ok.content["from"] == 3 and ok.content["to"] == 5

    outside = tmp_path / "outside.md"
    outside.write_text("private\n")
    (ws / "memory" / "link.md").symlink_to(outside)
    (ws / "notes.md").write_text("not memory\n")
    for path in (
        "../outside.md",
        "memory/../../outside.md",
        str(outside),
        "/etc/passwd",
        "~/.ssh/id_rsa",
        "memory/link.md",
        "notes.md",
        "sessions/x.jsonl",
        ".memdeck/history.jsonl",
    ):
        result = tools.execute("memory_get", {"path": path})
        assert not result.ok, path
        assert result.content["error"] == "path_refused", (path, result.content)
    assert tools.execute("memory_get", {"path": "memory/none.md"}).content["error"] == "not_found"


def test_forget_memory_moves_entry_to_history_and_survives_reindex(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    tools.execute("save_memory", {"content": "Allergic to peanuts"})
    tools.execute("save_memory", {"content": "Favourite colour is teal"})
    result = tools.execute("forget_memory", {"query": "peanuts"})
    assert result.ok and result.content["forgotten"][0]["text"] == "Allergic to peanuts"
    assert "peanuts" not in memory.workspace.memory_file.read_text()
    assert [h["text"] for h in history(memory) if h["event"] == "forgotten"] == [
        "Allergic to peanuts"
    ]
    assert not found(memory, "peanuts")
    assert "peanuts" not in memory.inject("anything with peanuts?").text
    memory.index.rebuild(embed=False)
    assert not found(memory, "peanuts")
    assert found(memory, "teal")
    assert not tools.execute("forget_memory", {"query": "peanuts"}).ok


def test_forget_in_daily_log_marks_lines(tools: MemoryTools, memory: MemoryEngine) -> None:
    memory.store.append_daily("## Chat\n\n- Met Sarah at the climbing gym\n- Bought milk\n", TODAY)
    memory.sync(embed=False)
    assert found(memory, "Sarah climbing")
    result = tools.execute("forget_memory", {"query": "Sarah climbing"})
    assert result.ok
    text = memory.workspace.daily_log(TODAY).read_text()
    assert "- Met Sarah at the climbing gym <!-- mem state=forgotten -->" in text
    assert not found(memory, "Sarah")
    memory.index.rebuild(embed=False)
    assert not found(memory, "Sarah") and found(memory, "milk")


def test_forget_refuses_a_query_that_is_too_broad(tools: MemoryTools, memory: MemoryEngine) -> None:
    for n in range(7):
        tools.execute("save_memory", {"content": f"Project note {n} mentions python"})
    result = tools.execute("forget_memory", {"query": "python"})
    assert not result.ok and result.content["error"] == "too_broad"
    assert memory.workspace.memory_file.read_text().count("python") == 7


def test_append_daily_log_and_unknown_tool(tools: MemoryTools, memory: MemoryEngine) -> None:
    result = tools.execute("append_daily_log", {"content": "- decided to use Rust"})
    assert result.ok and result.content["appended"] == "memory/2026-11-22.md"
    assert found(memory, "Rust")
    assert tools.execute("rm_rf", {}).content["error"] == "unknown_tool"
    assert os.path.exists(memory.workspace.daily_log(TODAY))
