"""The command line through a real subprocess: the contract other tools depend on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOW = "2026-11-22"


def memdeck(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "MEMDECK_WORKSPACE"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tui", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(
        "# Memory\n\n- My dog is called Max and loves the beach\n- 我喜欢喝乌龙茶\n"
    )
    (root / "memory/2026-11-20.md").write_text(
        "# 2026-11-20\n\n- Booked flights to Lisbon for March.\n"
    )
    (root / "memory/bad.md").write_bytes(b"\x00\x01binary")
    return root


def test_search_json_contract(workspace: Path) -> None:
    result = memdeck(
        "--workspace",
        str(workspace),
        "search",
        "what is my dog's name",
        "--json",
        "--now",
        NOW,
        "--min-score",
        "0",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["query"] == "what is my dog's name"
    assert payload["mode"] == "hybrid"
    first = payload["results"][0]
    assert set(first) >= {"path", "start_line", "end_line", "text", "score", "breakdown"}
    assert set(first["breakdown"]) >= {"bm25", "text", "vector", "hybrid", "decay", "confidence"}
    assert "Max" in first["text"]
    assert "bad.md" in result.stderr and "binary" in result.stderr  # a warning naming the file


def test_search_stdin_gives_one_json_object_per_line(workspace: Path) -> None:
    result = memdeck(
        "--workspace",
        str(workspace),
        "search",
        "--stdin",
        "--now",
        NOW,
        stdin="Lisbon flights\n乌龙茶\nMax\n",
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["Lisbon flights", "乌龙茶", "Max"]
    assert "Lisbon" in lines[0]["results"][0]["text"]
    assert "乌龙茶" in lines[1]["results"][0]["text"]


def test_search_limit_no_decay_and_bm25(workspace: Path) -> None:
    result = memdeck(
        "--workspace",
        str(workspace),
        "search",
        "Lisbon",
        "--json",
        "--limit",
        "1",
        "--no-decay",
        "--bm25",
    )
    payload = json.loads(result.stdout)
    assert payload["mode"] == "bm25" and len(payload["results"]) == 1
    assert payload["results"][0]["breakdown"]["decay"] == 1.0
    assert payload["results"][0]["breakdown"]["vector"] is None


def test_inject_and_stats_and_reindex(workspace: Path) -> None:
    inject = memdeck("--workspace", str(workspace), "inject", "Lisbon trip", "--budget", "500")
    assert inject.returncode == 0, inject.stderr
    assert inject.stdout.startswith("<memory-notes>\n## Long-term Memory")
    assert "## Relevant Memories" in inject.stdout
    stats = memdeck("--workspace", str(workspace), "stats", "--json")
    assert json.loads(stats.stdout)["chunks"] >= 2
    human = memdeck("--workspace", str(workspace), "stats").stdout
    assert "chunks embedded" in human and "embeddings kept (at most 10,000)" in human
    # internals (the fingerprint, the CLI's own model state) are for --json only
    assert "fingerprint" not in human and "model_loaded" not in human and "False" not in human
    reindex = memdeck("--workspace", str(workspace), "reindex")
    assert reindex.returncode == 0, reindex.stderr
    assert "indexed 3 files" in reindex.stdout


def test_workspace_from_environment(workspace: Path) -> None:
    result = memdeck("search", "Max", "--json", "--bm25", env={"MEMDECK_WORKSPACE": str(workspace)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["results"]


def test_errors_are_one_clear_line_without_traceback(tmp_path: Path) -> None:
    missing = memdeck("--workspace", str(tmp_path / "nope"), "search", "x")
    assert missing.returncode != 0
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    a_file = tmp_path / "file"
    a_file.write_text("x")
    not_dir = memdeck("--workspace", str(a_file), "stats")
    assert (
        not_dir.returncode != 0
        and "not a folder" in not_dir.stderr
        and "Traceback" not in not_dir.stderr
    )
    usage = memdeck("--workspace", str(tmp_path), "search")
    assert usage.returncode != 0 and "Traceback" not in usage.stderr
