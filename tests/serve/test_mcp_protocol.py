"""Issue 34 item 6: what ``memdeck mcp`` says about its protocol is true, and a newer client's
probe gets a plain answer. A real ``memdeck mcp`` process over raw JSON-RPC lines, as the MCP
Inspector 2.12 sends them (``--protocol-era auto``: a ``server/discover`` probe first)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from support.mcp_support import RawClient

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
#: The probe the Inspector sends before ``initialize`` (its ``_meta`` shortened).
DISCOVER = {
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "inspector-cli", "version": "2.12.0"},
    }
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Long-term Memory\n\n- Keeps bees on the allotment\n")
    (ws / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Checked the bees today\n")
    return ws


@pytest.fixture
def client(workspace: Path, tmp_path: Path) -> Iterator[RawClient]:
    with RawClient(workspace, tmp_path) as raw:
        yield raw


def test_the_docs_name_the_protocol_versions_served() -> None:
    first = DOCS.read_text().split("## Client configuration")[0]
    named = set(re.findall(r"\b20\d\d-\d\d-\d\d\b", first)) - {"2026-07-28"}
    assert named == set(SUPPORTED_PROTOCOL_VERSIONS)


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
def test_each_version_is_agreed_after_a_discover_probe(client: RawClient, version: str) -> None:
    probe = client.request("server-discover-probe-1", "server/discover", DISCOVER)
    client.send({"jsonrpc": "2.0", "method": "server/discover", "params": DISCOVER})
    client.send({"jsonrpc": "2.0", "method": "notifications/some/newer/thing"})
    answer = client.request(
        1,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "inspector-cli", "version": "2.12.0"},
        },
    )
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listing = client.request(2, "tools/list")
    assert probe["error"]["code"] == -32601 and "server/discover" in probe["error"]["message"]
    assert answer["result"]["protocolVersion"] == version
    assert [tool["name"] for tool in listing["result"]["tools"]]
    assert client.close() == 0
    assert client.stderr.strip() == ""  # no validation warnings for the unknown notifications


def test_hints_and_ids_are_what_the_docs_say(client: RawClient) -> None:
    client.initialize()
    tools = {t["name"]: t for t in client.request(2, "tools/list")["result"]["tools"]}
    saved = client.call(3, "save_memory", {"content": "Sells the bees' honey at the market"})
    search = client.call(4, "memory_search", {"query": "bees", "maxResults": 5})
    hints = {name: tool["annotations"] for name, tool in tools.items()}
    assert hints["save_memory"]["idempotentHint"] is True
    assert hints["forget_memory"]["idempotentHint"] is False
    assert hints["forget_memory"]["destructiveHint"] is True
    assert all(hints[name]["idempotentHint"] for name in ("memory_search", "memory_get"))
    hits = search["result"]["structuredContent"]["results"]
    assert saved["result"]["isError"] is False
    assert {hit["path"] for hit in hits} == {"MEMORY.md", "memory/2026-11-20.md"}
    with_ids = [hit["snippet"] for hit in hits if hit["ids"]]
    assert all(isinstance(hit["ids"], list) for hit in hits)
    # memdeck's own entries have ids; a hand-written line and a daily log's line have none
    assert len(with_ids) == 1 and "honey" in with_ids[0]
    assert client.close() == 0
