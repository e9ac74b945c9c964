"""Issue 16 D: input that crashed, hid or crawled. Each kept fixed by a test here.

Real ``memdeck`` processes where a traceback or an exit code is what matters, real files and
SQLite otherwise. No wall-clock thresholds: linear time is checked by counting work, not timing.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck

from tui.engine import temporal, usage
from tui.engine.embeddings import Embedder, count_tokens
from tui.engine.engine import MemoryEngine
from tui.engine.inject import Injection, build_injection
from tui.engine.search import SearchResult
from tui.engine.store import EntryBatch
from tui.engine.temporal import parse_time_intent
from tui.engine.workspace import Workspace

NOW = date(2026, 11, 24)


def one_line_or_none(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert len([line for line in stderr.splitlines() if line.startswith("memdeck: error")]) <= 1


# -- 12. time parsing is total, bounded and linear -----------------------------------------

HOSTILE_TIMES = [
    "the monday before 0001-01-01",
    "the monday after 9999-12-31",
    "the weekend after 9999-12-31",
    "the sunday before 0001-01-07",
    "the monday before " * 500 + "july 24",
    "the weekend after " * 2000 + "4 october",
]


@pytest.mark.parametrize("query", HOSTILE_TIMES, ids=lambda q: q[:30])
def test_any_query_parses_to_a_window_or_none(query: str) -> None:
    intent = parse_time_intent(query, NOW)
    if intent.window is not None:
        start, end = intent.window
        assert date.min <= start <= end <= date.max


def test_time_parsing_is_not_recursive() -> None:
    """500 nested "the monday before" once recursed 500 deep (RecursionError at 1,000) and
    rescanned the rest at every level: the parse must not depend on the nesting depth."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # far below the nesting depth of the query
    try:
        parse_time_intent("the monday before " * 500 + "july 24", NOW)
    finally:
        sys.setrecursionlimit(limit)
    assert temporal.MAX_TIME_QUERY_CHARS <= 10_000


def test_the_anchored_day_still_reads_a_real_anchor() -> None:
    intent = parse_time_intent("what did we do the monday before july 24, 2023?", NOW)
    assert intent.window == (date(2023, 7, 17), date(2023, 7, 24))


@pytest.mark.parametrize("command", ["search", "inject"])
def test_search_and_inject_with_out_of_range_dates_answer(tmp_path: Path, command: str) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- Likes tea\n", encoding="utf-8")
    env = memdeck_env(None, tmp_path)
    for query in HOSTILE_TIMES[:4]:
        result = run_memdeck(["--workspace", str(root), command, "--bm25", query], env)
        assert result.returncode == 0, result.stderr
        one_line_or_none(result.stderr)


# -- 13. one corrupt ledger line ------------------------------------------------------------

GOOD = {"purpose": "chat", "model": "m", "prompt_tokens": 10, "completion_tokens": 5}
CORRUPT_LINES = [
    '{"time": "%s", "purpose": "chat", "model": "m", "prompt_tokens": Infinity}',
    '{"time": "%s", "purpose": "chat", "model": "m", "prompt_tokens": NaN}',
    '{"time": "%s", "purpose": "chat", "model": "m", "completion_tokens": 1e400}',
    '{"time": "%s", "purpose": "chat", "model": "m", "prompt_tokens": -5}',
    '{"time": "0001-01-01T00:00:00+05:00", "purpose": "chat", "model": "m"}%s',
    '{"time": "9999-12-31T23:59:59-05:00", "purpose": "chat", "model": "m"}%s',
    "not json at all %s",
]


def write_ledger(root: Path, now: str) -> None:
    path = usage.ledger_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"time": now, **GOOD})]
    lines += [
        line % (now if "%s" in line and '"time": "%s"' in line else "") for line in CORRUPT_LINES
    ]
    lines.append(json.dumps({"time": now, **GOOD}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_corrupt_ledger_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    now = "2026-11-24T10:00:00+00:00"
    write_ledger(root, now)
    report = usage.summary(root, now=datetime.fromisoformat(now))
    assert report["skipped"] == len(CORRUPT_LINES)
    assert report["today"]["total"]["calls"] == 2
    assert report["today"]["total"]["prompt_tokens"] == 20


def test_memdeck_usage_survives_a_corrupt_ledger_and_says_how_many(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    write_ledger(root, datetime.now().astimezone().isoformat(timespec="seconds"))
    result = run_memdeck(["--workspace", str(root), "usage"], memdeck_env(None, tmp_path))
    assert result.returncode == 0, result.stderr
    one_line_or_none(result.stderr)
    assert f"{len(CORRUPT_LINES)} unreadable lines of .memdeck/usage.jsonl skipped" in result.stderr
    assert "2 calls" in result.stdout


# -- 14. one NUL byte no longer hides a day --------------------------------------------------


def test_appends_never_write_nul_and_a_stray_nul_hides_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    engine = MemoryEngine(workspace)
    try:
        day = date(2026, 11, 24)
        engine.append_daily("- Booked the dentist for Friday\n", day)
        engine.append_daily("- Pasted terminal output: build ok\x00\n", day)
        engine.save_entries(EntryBatch(["Uses tmux\x00 daily"], "high", "user"))
        log = workspace.daily_log(day)
        assert b"\x00" not in log.read_bytes()
        assert b"\x00" not in (root / "MEMORY.md").read_bytes()
        assert "build ok" in log.read_text(encoding="utf-8")
        # A NUL that got in another way (an editor, a script) is replaced, not a reason to drop
        # the day.
        with log.open("ab") as handle:
            handle.write(b"- Fixed the flaky test\x00 at last\n")
        report = engine.sync(embed=False)
        found = engine.search("dentist friday", max_results=5, min_score=0.0)
    finally:
        engine.close()
    assert any(r.path == "memory/2026-11-24.md" for r in found.results)
    assert any("NUL" in w for w in report.warnings)


# -- 16. the cost of an injection follows what is packed -----------------------------------


def big_memory(lines: int) -> str:
    return "# Long-term Memory\n\n" + "".join(
        f"- Fact {i}: planned the garden for week {i % 52} <!-- mem id=a{i:06x} conf=high -->\n"
        for i in range(lines)
    )


@pytest.mark.parametrize("lines", [1_000, 100_000])
def test_injection_counts_only_what_can_be_packed(lines: int) -> None:
    """A 100k-line MEMORY.md counted every line's tokens (6.9 of 7.5 s) though ~2,000 tokens
    fit: the work done must not grow with the file. Counted in calls, not seconds."""

    def calls_for(memory: str) -> tuple[int, Injection]:
        calls = 0

        def counting(text: str) -> int:
            nonlocal calls
            calls += 1
            return count_tokens(text)

        injection = build_injection(memory, [], counting)
        return calls, injection

    small_calls, _ = calls_for(big_memory(1_000))
    calls, injection = calls_for(big_memory(lines))
    assert calls <= 2 * small_calls
    assert injection.report.memory_truncated and injection.report.memory_tokens > 1_000
    # The report still says how big the file is (an estimate past what was read).
    total = injection.report.memory_total_tokens
    assert total > injection.report.memory_tokens * (lines // 1_000) // 2
    cut = injection.report.cut[0].location
    assert cut.endswith(f"-{lines + 2}")


# -- 15. a future-dated log changes nothing, visibly ---------------------------------------


def test_a_future_dated_log_does_not_demote_the_true_latest_fact(
    tmp_path: Path, embedder: Embedder
) -> None:
    def editor_search(with_future: bool) -> tuple[list[SearchResult], list[str]]:
        root = tmp_path / ("with" if with_future else "without")
        workspace = Workspace.open(root)
        (root / "memory").mkdir()
        logs = {
            "2026-03-02": "- Uses Vim for everything, with a long vimrc.\n",
            "2026-10-20": "- Switched from Vim to Zed for everything, now.\n",
        }
        if with_future:
            logs["9999-12-31"] = "- Switched from Zed to Notepad for everything, now.\n"
        for day, text in logs.items():
            (root / "memory" / f"{day}.md").write_text(f"# {day}\n\n{text}", encoding="utf-8")
        engine = MemoryEngine(workspace, embedder=embedder)
        try:
            engine.sync()
            # min_score 0: in two or three one-line logs most shared words have no idf, so the
            # text scores are honestly ~0; the ranking and supersession are under test here
            found = engine.search("which editor do I use now for everything?", now=NOW, min_score=0)
        finally:
            engine.close()
        return found.results, found.notes

    alone, _ = editor_search(with_future=False)
    beside_future, notes = editor_search(with_future=True)
    # the latest true fact leads either way (the future line changes the corpus' idf, so the
    # scores themselves may differ) and is not superseded by the future-dated line
    assert "Vim to Zed" in alone[0].text and "Vim to Zed" in beside_future[0].text
    assert beside_future[0].breakdown.superseded == 1.0
    assert any("9999-12-31" in note and "dated after today" in note for note in notes)
