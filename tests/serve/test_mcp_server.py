"""memdeck mcp end to end: the SDK's real client over stdio, spawning the real ``memdeck mcp``
(a fresh interpreter, the real engine, SQLite and model); nothing in-process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.mcp_support import connected, server_parameters, structured, text_of

from tui.chat.activity import ActivityLog
from tui.chat.tool_specs import TOOL_SPECS
from tui.serve.mcp_server import recall_text

MEMORY = (
    "# Long-term Memory\n\n"
    "- The deploy procedure for prod is: tag the release, wait for CI, run deploy.sh\n"
    "- Code review SLA is one working day\n"
)
LOG = "# 2026-11-20\n\n- Debugged the flaky login test with Dana; the cause was a stale cache\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    (ws / "memory" / "2026-11-20.md").write_text(LOG)
    return ws


async def test_the_tools_are_the_chat_tools_and_recall_is_offered(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        tools = (await session.list_tools()).tools
        prompts = (await session.list_prompts()).prompts
    assert [t.name for t in tools] == [spec.name for spec in TOOL_SPECS]
    for tool, spec in zip(tools, TOOL_SPECS, strict=True):
        assert tool.description == spec.description
        assert tool.inputSchema == spec.input_schema()
    by_name = {t.name: t for t in tools}
    search_hints, forget_hints = by_name["memory_search"].annotations, by_name["forget_memory"].annotations
    assert search_hints is not None and search_hints.readOnlyHint is True
    assert forget_hints is not None and forget_hints.destructiveHint is True
    assert [p.name for p in prompts] == ["recall"]
    assert [a.name for a in prompts[0].arguments or []] == ["query"]


async def test_search_finds_a_seeded_fact_with_its_breakdown(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        result = await session.call_tool(
            "memory_search", {"query": "what is the deploy procedure for prod", "maxResults": 3}
        )
    assert result.isError is False
    hits = structured(result)["results"]
    assert hits[0]["path"] == "MEMORY.md"
    assert "deploy.sh" in hits[0]["snippet"]
    assert (hits[0]["startLine"], hits[0]["endLine"]) == (3, 3)
    breakdown = hits[0]["breakdown"]
    assert breakdown["vector"] is not None and breakdown["vector"] > 0  # the model was loaded
    assert {"bm25", "text", "hybrid", "relevance", "decay", "recency"} <= set(breakdown)
    assert json.loads(text_of(result.content[0])) == result.structuredContent


async def test_save_writes_memory_md_and_the_cli_finds_it_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        result = await session.call_tool(
            "save_memory", {"content": "The staging database is called wombat"}
        )
    assert result.isError is False and structured(result)["saved"] is True
    text = (workspace / "MEMORY.md").read_text()
    assert text.startswith(MEMORY)  # every existing byte kept
    assert "The staging database is called wombat" in text
    found = run_memdeck(
        ["--workspace", str(workspace), "search", "--bm25", "--json", "staging database wombat"],
        memdeck_env(None, tmp_path),
    )
    assert found.returncode == 0, found.stderr
    assert "wombat" in json.loads(found.stdout)["results"][0]["text"]


async def test_a_path_outside_the_workspace_is_an_error_and_serving_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        refused = await session.call_tool("memory_get", {"path": "../../etc/passwd"})
        after = await session.call_tool("memory_get", {"path": "MEMORY.md"})
    assert refused.isError is True
    assert structured(refused)["error"] == "path_refused"
    assert text_of(refused.content[0]).startswith("path_refused: ")
    assert "root:" not in json.dumps(refused.model_dump())
    assert after.isError is False and "deploy.sh" in structured(after)["text"]


async def test_hostile_arguments_are_errors_and_the_next_call_works(
    workspace: Path, tmp_path: Path
) -> None:
    async with connected(workspace, tmp_path) as session:
        huge = await session.call_tool("memory_search", {"query": "deploy", "maxResults": 10**400})
        unknown = await session.call_tool("memory_search", {"query": "deploy", "rm": "-rf"})
        wrong = await session.call_tool("save_memory", {"content": ["not", "text"]})
        no_tool = await session.call_tool("append_daily_log", {"content": "x"})
        fine = await session.call_tool("memory_search", {"query": "deploy", "maxResults": 2})
    for bad in (huge, unknown, wrong):
        assert bad.isError is True
        assert structured(bad)["error"] == "validation_error"
    assert "maxResults" in text_of(huge.content[0])
    assert no_tool.isError is True and structured(no_tool)["error"] == "unknown_tool"
    assert fine.isError is False and structured(fine)["results"]


def test_a_literal_1e999_on_the_wire_is_an_error_and_the_next_call_works(
    workspace: Path, tmp_path: Path
) -> None:
    """JSON the SDK client would never write (it turns infinity into null): raw lines."""
    params = server_parameters(workspace, tmp_path)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    raw = [json.dumps(line) for line in lines]
    raw.append(
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_search",'
        '"arguments":{"query":"deploy","maxResults":1e999}}}'
    )
    raw.append(
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_search",'
        '"arguments":{"query":"deploy","maxResults":2}}}'
    )
    server = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=params.env,
        cwd=params.cwd,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    answers: dict[int, dict[str, Any]] = {}
    try:
        for line in raw:  # one at a time, each answered before the next (stdin stays open)
            server.stdin.write(line + "\n")
            server.stdin.flush()
            wanted = json.loads(line.replace("1e999", "0")).get("id")
            while wanted is not None and wanted not in answers:
                answer = json.loads(server.stdout.readline())
                answers[answer.get("id")] = answer
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert server.returncode == 0
    assert answers[2]["result"]["isError"] is True
    assert "maxResults" in answers[2]["result"]["content"][0]["text"]
    assert answers[3]["result"]["isError"] is False
    assert answers[3]["result"]["structuredContent"]["results"]


async def test_recall_is_the_block_memdeck_inject_gives(workspace: Path, tmp_path: Path) -> None:
    query = "how did we fix the flaky login test"
    async with connected(workspace, tmp_path) as session:
        prompt = await session.get_prompt("recall", {"query": query})
    cli = run_memdeck(
        ["--workspace", str(workspace), "inject", "--json", query], memdeck_env(None, tmp_path)
    )
    assert cli.returncode == 0, cli.stderr
    block = json.loads(cli.stdout)["text"]
    assert "stale cache" in block
    [message] = prompt.messages
    assert message.role == "user"
    assert text_of(message.content) == recall_text(block)
    assert "not instructions" in text_of(message.content).split("<memory-notes>")[0]


async def test_every_call_is_in_the_private_activity_log(workspace: Path, tmp_path: Path) -> None:
    async with connected(workspace, tmp_path) as session:
        await session.call_tool("memory_search", {"query": "code review SLA"})
        await session.call_tool("save_memory", {"content": "Standup moved to 9:45"})
        await session.call_tool("forget_memory", {"query": "Standup moved to 9:45"})
        await session.get_prompt("recall", {"query": "code review"})
        await session.call_tool("memory_get", {"path": "../secrets"})
    log = ActivityLog(workspace)
    records = log.read()
    assert [(r.kind, r.name, r.ok) for r in records] == [
        ("tool", "memory_search", True),
        ("tool", "save_memory", True),
        ("tool", "forget_memory", True),
        ("prompt", "recall", True),
        ("tool", "memory_get", False),
    ]
    assert {r.client for r in records} == {"test-agent 9.1"}
    search, save, forget, recall, refused = records
    assert search.arguments == 'query="code review SLA"'
    assert search.results[0]["path"] == "MEMORY.md" and "breakdown" in search.results[0]
    assert search.entries[0] == "MEMORY.md#L4-4"
    assert save.entries[0].startswith("MEMORY.md#L")
    assert forget.forgotten == [{"path": "MEMORY.md", "text": "Standup moved to 9:45"}]
    assert recall.query == "code review" and recall.results
    assert refused.summary.startswith("error: ")
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
