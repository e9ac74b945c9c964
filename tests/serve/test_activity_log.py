"""The activity log of memdeck mcp: private, bounded, tolerant of damage; undo finds what a
forget retired."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.chat.activity import ActivityLog, ActivityRecord, retired_by, short_arguments
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace


def record(number: int, **fields: object) -> ActivityRecord:
    base: dict[str, object] = {
        "at": f"2026-11-25T10:00:{number % 60:02d}+00:00",
        "client": "agent 1.0",
        "kind": "tool",
        "name": "memory_search",
        "arguments": f'query="question {number}"',
        "ok": True,
        "summary": "1 result",
    }
    base.update(fields)
    return ActivityRecord(**base)  # type: ignore[arg-type]


def test_the_log_is_private_and_trimmed_to_its_newest_half(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path, max_bytes=4_000)
    for number in range(200):
        log.append(record(number))
    size = log.path.stat().st_size
    assert size <= 4_000
    records = log.read()
    assert records[-1].arguments == 'query="question 199"'  # the newest kept, in order
    numbers = [int(r.arguments.split()[-1].rstrip('"')) for r in records]
    assert numbers == sorted(numbers) and numbers == list(range(numbers[0], 200))
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
    assert not list(tmp_path.rglob("*.tmp"))


def test_damaged_lines_are_skipped_and_the_rest_read(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path)
    log.append(record(1))
    with log.path.open("ab") as out:
        out.write(b'{"at": "x"}\n')  # no name
        out.write(b"not json at all\n")
        out.write(b"\xff\xfe binary\n")
        out.write(b'["a", "list"]\n')
    log.append(record(2))
    assert [r.arguments for r in log.read()] == ['query="question 1"', 'query="question 2"']
    assert log.read(limit=1)[0].arguments == 'query="question 2"'


def test_a_missing_log_reads_empty_and_has_no_stamp(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path)
    assert log.read() == [] and log.stamp() is None


def test_arguments_are_shortened_for_the_log() -> None:
    short = short_arguments({"query": "x" * 500, "maxResults": 3})
    assert short.startswith('query="xxx') and short.endswith("… maxResults=3")
    assert len(short) < 120


@pytest.fixture
def tea_engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """An engine over a MEMORY.md of two look-alike entries: 'Likes tea' and '… with lemon'."""
    workspace = Workspace.open(tmp_path / "ws")
    workspace.memory_file.write_text("# Memory\n\n- Likes tea\n- Likes tea with lemon\n")
    engine = MemoryEngine(workspace)
    engine.sync()
    try:
        yield engine
    finally:
        engine.close()


def test_undo_finds_the_audit_records_of_what_a_forget_retired(tea_engine: MemoryEngine) -> None:
    engine = tea_engine
    entries = [e for e in engine.store.entries("MEMORY.md") if e.text.endswith("lemon")]
    engine.forget(entries, reason="test", origin="test")
    forget = record(
        3,
        name="forget_memory",
        summary="Forgot 1 memory.",
        forgotten=[{"path": "MEMORY.md", "text": "Likes tea with lemon"}],
    )
    [found] = retired_by(forget, engine.store.retired_records())
    assert found.text == "Likes tea with lemon"
    assert engine.restore(found) is not None
    assert "- Likes tea with lemon" in engine.workspace.memory_file.read_text()
    # restored: nothing is left to bring back
    assert retired_by(forget, engine.store.retired_records()) == []


def test_undo_brings_back_only_the_entry_the_forget_named(tea_engine: MemoryEngine) -> None:
    engine = tea_engine
    engine.forget([e for e in engine.store.entries("MEMORY.md") if e.text], reason="t", origin="t")
    forget = record(4, name="forget_memory", forgotten=[{"path": "MEMORY.md", "text": "Likes tea"}])
    [found] = retired_by(forget, engine.store.retired_records())
    assert found.text == "Likes tea"
    cut = record(
        5, name="forget_memory", forgotten=[{"path": "MEMORY.md", "text": "Likes tea with…"}]
    )
    [found] = retired_by(cut, engine.store.retired_records())
    assert found.text == "Likes tea with lemon"
