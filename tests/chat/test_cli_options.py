"""The command line's global options wherever they are typed, and what ``inject`` says of a
budget too small for MEMORY.md: ``memdeck`` as a real process (issue 32, items 21 and 22)."""

from __future__ import annotations

import json
from pathlib import Path

from support.chat_support import memdeck_env, run_memdeck
from support.workspaces import write_workspace

from tui.cli import COMMANDS, build_parser

MEMORY = "# Memory\n\n- Likes fish and chips on Fridays\n- Has a dog called Max\n"


def test_workspace_after_the_command_opens_that_workspace(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "ws", MEMORY)
    env = memdeck_env(None, tmp_path)
    after = run_memdeck(["search", "fish", "--bm25", "--workspace", str(workspace)], env)
    assert after.returncode == 0, after.stderr
    assert "MEMORY.md#L3-3" in after.stdout and "Likes fish and chips" in after.stdout

    # Given on both sides, the one after the command wins (it is the nearer to what it acts on).
    elsewhere = tmp_path / "missing"
    both = run_memdeck(
        ["--workspace", str(elsewhere), "stats", "--json", "--workspace", str(workspace)], env
    )
    assert both.returncode == 0, both.stderr
    assert Path(json.loads(both.stdout)["workspace"]) == workspace
    # Given only before it, as always.
    before = run_memdeck(["--workspace", str(workspace), "stats", "--json"], env)
    assert Path(json.loads(before.stdout)["workspace"]) == workspace


def test_every_command_takes_the_global_options_after_it() -> None:
    parser = build_parser()
    for name in COMMANDS:
        # A command's own required arguments are not the point: parse_known_args stops at
        # none of the global options.
        args, _rest = parser.parse_known_args([name, "--workspace", "ws", "x", "y"])
        assert args.workspace == Path("ws"), name
        assert args.command == name
    assert parser.parse_args(["stats"]).workspace is None


def test_version_after_the_command(tmp_path: Path) -> None:
    result = run_memdeck(["stats", "--version"], memdeck_env(None, tmp_path))
    assert result.returncode == 0 and result.stdout.startswith("memdeck ")


def test_inject_with_no_room_for_memory_md_says_it_was_left_out(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "ws", MEMORY)
    env = memdeck_env(None, tmp_path)
    result = run_memdeck(
        ["--workspace", str(workspace), "inject", "fish", "--bm25", "--budget", "0"], env
    )
    assert result.returncode == 0, result.stderr
    assert "lines 1-0" not in result.stderr and "#L1-0" not in result.stderr
    assert "MEMORY.md left out" in result.stderr
    report = json.loads(
        run_memdeck(
            ["--workspace", str(workspace), "inject", "fish", "--bm25", "--budget", "0", "--json"],
            env,
        ).stdout
    )["report"]
    assert not [item for item in report["included"] if item["kind"] == "long-term"]
