"""``memdeck mcp`` in the history: each save and forget of an agent is ONE commit as ``mcp`` by
the client's name and version (its ``initialize`` clientInfo), read back with plain ``git``;
its search results, and ``memdeck search --json``'s, say where each memory came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.git_log import commits, git, new_commits
from support.mcp_support import connected, structured

MEMORY = "# Long-term Memory\n\n- Code review SLA is one working day\n"
AGENT = {"Memdeck-Source": "mcp", "Memdeck-Client": "test-agent 9.1"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    return ws


async def test_an_agent_s_save_and_forget_are_one_commit_each_with_its_name(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        await session.call_tool("memory_search", {"query": "review"})  # opens the memory
        [start] = commits(workspace)
        assert start.trailers == {"Memdeck-Source": "outside"}  # what was there

        saved = await session.call_tool(
            "save_memory", {"content": "The staging database is called wombat"}
        )
        assert saved.isError is False
        [save] = new_commits(workspace, [start])
        assert save.trailers == AGENT
        assert save.subject == "save_memory: The staging database is called wombat"
        assert save.files == ("MEMORY.md",)

        found = await session.call_tool("memory_search", {"query": "staging database wombat"})
        hit = structured(found)["results"][0]
        assert "wombat" in hit["snippet"]
        assert hit["origin"]["source"] == "mcp" and hit["origin"]["commit"] == save.id
        assert hit["origin"]["client"] == "test-agent 9.1"

        forgot = await session.call_tool("forget_memory", {"query": "staging database wombat"})
        assert forgot.isError is False and structured(forgot)["forgotten"]
        [forget] = new_commits(workspace, [save, start])
        assert forget.trailers == AGENT
        assert forget.subject == "forget_memory: staging database wombat"
    assert git(workspace, "show", "HEAD:MEMORY.md") == MEMORY
    assert git(workspace, "status", "--porcelain") == ""


async def test_search_json_gives_each_result_s_origin_or_null(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        await session.call_tool("save_memory", {"content": "Deploys go out on Tuesdays"})
    (workspace / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Deploys froze\n")
    env = memdeck_env(None, tmp_path)

    found = run_memdeck(
        ["--workspace", str(workspace), "search", "--bm25", "--json", "deploys"], env
    )

    assert found.returncode == 0, found.stderr
    origins = {r["path"]: r["origin"] for r in json.loads(found.stdout)["results"]}
    head = commits(workspace)[0]
    assert origins["memory/2026-11-20.md"] == {  # an outside edit, committed by the search
        "source": "outside",
        "time": origins["memory/2026-11-20.md"]["time"],
        "commit": head.id,
    }
    assert origins["MEMORY.md"]["source"] == "mcp"
    assert origins["MEMORY.md"]["client"] == "test-agent 9.1"

    (workspace / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Deploys thawed\n")
    off = tmp_path / "off.toml"
    off.write_text('[history]\nmode = "off"\n')
    unknown = run_memdeck(
        ["--workspace", str(workspace), "search", "--bm25", "--json", "deploys"],
        {**env, "MEMDECK_CONFIG": str(off)},
    )
    assert unknown.returncode == 0, unknown.stderr
    assert [r["origin"] for r in json.loads(unknown.stdout)["results"]] == [None, None]
    human = run_memdeck(["--workspace", str(workspace), "search", "--bm25", "tuesdays"], env)
    assert 'from agent "test-agent 9.1" · ' in human.stdout
