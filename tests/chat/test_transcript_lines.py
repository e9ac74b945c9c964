"""Transcript lines are typed: each is written from its record's ``to_record()`` and read back
into the same record, and no module writes one as a hand-built dict."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from support.chat_support import ROOT

from tui.chat.sessions import (
    Compaction,
    ErrorRecord,
    FlushDone,
    ModelChange,
    PreparedFlush,
    SessionStore,
    ToolCall,
    ToolResult,
    TranscriptLine,
    TurnInjection,
)
from tui.engine.search_results import Breakdown, SearchResult
from tui.engine.workspace import Workspace

RESULT = SearchResult(
    chunk_id=0,
    path="MEMORY.md",
    start_line=3,
    end_line=4,
    heading="Long-term Memory",
    text="",  # a turn's record leaves each result's text in memory
    score=0.42,
    breakdown=Breakdown.from_json({"hybrid": 0.5, "recency": 0.9, "keyword_hit": True}),
)


def test_each_line_reads_back_as_the_record_that_wrote_it(tmp_path: Path) -> None:
    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create("typed").id
    user = store.append_message(session, "user", "Which editor do I use?")
    answer = store.append_message(session, "assistant", "")
    call = ToolCall(
        "call_1", answer, "memory_search", '{"query": "editor"}', {"query": "editor"}, 19
    )
    lines: list[TranscriptLine] = [
        ModelChange("c1", "fake-model"),
        TurnInjection(user, "Which editor do I use?", "<memory-notes>…", {"budget": 1}, [RESULT]),
        call,
        ToolResult("call_1", "memory_search", True, {"results": []}),
        ErrorRecord("timeout", "the model did not answer in 30 s"),
        Compaction("They use Helix.", answer, 2, "k1", 9000),
    ]
    for line in lines:
        written = store.append(session, line)
        assert {k: v for k, v in written.items() if k != "timestamp"} == line.to_record()
    transcript = store.load(session)
    assert transcript.model == "fake-model"
    assert transcript.timeline[2:] == [lines[1], call, lines[4], lines[5]]
    assert transcript.tool_results == {"call_1": lines[3]}
    assert transcript.tool_calls_of(answer) == [call]
    assert transcript.last_compaction == lines[5]


def test_flush_lines_read_back_as_the_records_that_wrote_them(tmp_path: Path) -> None:
    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create().id
    prepared = PreparedFlush(
        "f1", None, "m2", "manual", 1, 2, 2, date(2026, 11, 26), "10:40", "t", "r", "s", ("a",)
    )
    done = FlushDone("f1", None, "m2", 2, facts_added=1)
    store.append(session, prepared)
    store.append(session, done)
    flushes = store.load(session).flushes
    assert [f.phase for f in flushes] == ["prepared", "done"]
    assert PreparedFlush.from_record(flushes[0].data, session) == prepared
    assert {k: v for k, v in flushes[1].data.items() if k != "timestamp"} == done.to_record()


def test_an_old_line_without_the_newer_fields_reads_with_them_empty(tmp_path: Path) -> None:
    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create().id
    store.append(session, {"type": "compaction", "summary": "s", "dropped_before": "m1"})
    store.append(session, {"type": "tool_call", "id": "c", "message_id": "m", "tool": "t"})
    transcript = store.load(session)
    assert transcript.last_compaction == Compaction("s", "m1", None)
    assert transcript.timeline[-1] == ToolCall("c", "m", "t", "", {})


def test_no_module_writes_a_transcript_line_as_a_hand_built_dict() -> None:
    kinds = "tool_call|tool_result|error|compaction|model_change|injection|flush"
    literal = re.compile(rf'"type":\s*"({kinds})"')
    writers = [
        path
        for path in (ROOT / "tui").rglob("*.py")
        if path.name != "transcript.py" and literal.search(path.read_text(encoding="utf-8"))
    ]
    assert writers == []
