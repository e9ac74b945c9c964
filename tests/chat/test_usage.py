"""The usage ledger: what chat, flush and embedding calls record, and ``memdeck usage``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import make_config, make_engine
from support.fakeopenai import FakeOpenAI

from tui.cli import main
from tui.engine import usage


def records(root: Path) -> list[dict[str, Any]]:
    return list(usage.read(root))


async def test_chat_and_flush_record_tokens(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path, fake_openai))
    try:
        session = engine.sessions.create("usage").id
        fake_openai.enqueue(FakeOpenAI.text(["Hello ", "there"]))
        [event async for event in engine.run_turn(session, "hi, count my tokens")]
        assert fake_openai.chat_requests[-1].json["stream_options"] == {"include_usage": True}
        engine.flusher.flush_session(session)
        root = engine.memory.workspace.root
    finally:
        engine.close()
    found = records(root)
    chat = [r for r in found if r["purpose"] == "chat"]
    flush = [r for r in found if r["purpose"] == "flush"]
    assert len(chat) == 1 and flush
    assert chat[0]["session"] == session and chat[0]["model"] == "fake-model"
    assert chat[0]["prompt_tokens"] > 0 and chat[0]["completion_tokens"] == 2
    assert flush[0]["prompt_tokens"] > 0
    datetime.fromisoformat(chat[0]["time"])


async def test_a_server_without_usage_is_recorded_as_unknown(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path, fake_openai, stream_usage=False))
    try:
        session = engine.sessions.create("no usage").id
        [event async for event in engine.run_turn(session, "hello")]
        root = engine.memory.workspace.root
    finally:
        engine.close()
    (chat,) = records(root)
    assert chat["prompt_tokens"] is None and chat["completion_tokens"] is None
    today = usage.summary(root)["today"]
    assert today["total"]["unknown_calls"] == 1
    assert today["total"]["prompt_tokens"] is None  # unknown, not zero


def test_summary_groups_today_and_month(tmp_path: Path) -> None:
    now = datetime(2026, 11, 23, 12, 0).astimezone()
    for when, purpose, model, p, c in [
        (now, "chat", "gpt-4o-mini", 1000, 100),
        (now, "chat", "gpt-4o-mini", 2000, 200),
        (now, "embedding", "text-embedding-3-small", 500, 0),
        (now - timedelta(days=3), "flush", "gpt-4o-mini", 300, 30),
        (now - timedelta(days=40), "chat", "gpt-4o-mini", 9999, 9999),
    ]:
        usage.record(
            tmp_path, purpose=purpose, model=model, prompt_tokens=p, completion_tokens=c, when=when
        )
    report = usage.summary(
        tmp_path, now=now, prices={"gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    )
    chat = next(r for r in report["today"]["rows"] if r["purpose"] == "chat")
    assert (chat["calls"], chat["prompt_tokens"], chat["completion_tokens"]) == (2, 3000, 300)
    assert chat["cost"] == (3000 * 0.15 + 300 * 0.6) / 1e6
    embedding = next(r for r in report["today"]["rows"] if r["purpose"] == "embedding")
    assert embedding["cost"] is None  # no price set
    assert report["month"]["total"]["calls"] == 4
    assert report["today"]["total"]["calls"] == 3


def test_ledger_ignores_broken_lines(tmp_path: Path) -> None:
    usage.record(tmp_path, purpose="chat", model="m", prompt_tokens=1, completion_tokens=1)
    with usage.ledger_path(tmp_path).open("a") as f:
        f.write("{not json\n")
    usage.record(tmp_path, purpose="chat", model="m", prompt_tokens=2, completion_tokens=2)
    assert [r["prompt_tokens"] for r in records(tmp_path)] == [1, 2]


def test_usage_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("# Memory\n")
    usage.record(
        workspace,
        purpose="chat",
        model="gpt-4o-mini",
        prompt_tokens=1_000_000,
        completion_tokens=1_000_000,
        session="s1",
    )
    usage.record(
        workspace, purpose="chat", model="local", prompt_tokens=None, completion_tokens=None
    )
    config = tmp_path / "config.toml"
    config.write_text('[prices]\n"gpt-4o-mini" = {input = 0.15, output = 0.6}\n')
    assert main(["--workspace", str(workspace), "usage", "--json", "--config", str(config)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["today"]["total"]["cost"] == 0.75
    assert report["today"]["total"]["unknown_calls"] == 1
    assert main(["--workspace", str(workspace), "usage", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "chat · gpt-4o-mini" in out and "$0.7500" in out and "1 without usage" in out
    # headings for people: the day and the month, never the report's dict
    assert "today (" in out and "this month (" in out and "{" not in out


def test_stats_panel_shows_today_totals(tmp_path: Path) -> None:
    from tui.app.panels.stats_panel import StatsPanel
    from tui.engine.engine import MemoryEngine

    engine = MemoryEngine(tmp_path)
    try:
        panel = StatsPanel(engine)
        stats = {"files": 1, "chunks": 1, "embedded": 1, "model": "m", "model_loaded": False}
        panel.stats = stats
        assert "usage today" not in dict(panel.describe_stats())
        panel.stats = {
            **stats,
            "usage_today": {"calls": 3, "prompt_tokens": 1200, "completion_tokens": None},
        }
        rows = {label: value.plain for label, value in panel.describe_stats()}
        assert rows["usage today"] == "3 calls · 1,200 tokens"
    finally:
        engine.close()
