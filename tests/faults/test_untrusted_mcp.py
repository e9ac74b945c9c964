"""Issue 29 items 7, 9, 10 and 20: an MCP client is a writer we do not control. What it may
destroy is bounded (across restarts and servers), a cancel never kills the server or leaves a
write unreported, a huge call cannot empty the activity log, and every JSON-RPC edge gets the
answer the spec gives it.

A real ``memdeck mcp`` process driven by raw JSON-RPC lines over its stdin and stdout (what a
careless or hostile client can send, which the SDK's client never would); real files, SQLite
and model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.mcp_support import RawClient

from tui.chat.activity import ActivityLog, ActivityRecord, retired_by
from tui.engine.engine import MemoryEngine
from tui.engine.fileio import lock_for
from tui.engine.store import HISTORY_COMPACT_BYTES, MAX_HISTORY_NOTE_CHARS, MemoryStore
from tui.engine.workspace import STATE_DIR, Workspace
from tui.serve.mcp_server import RETIRE_BUDGET_LOCK

FACTS = [
    "Keeps bees on the allotment",
    "Drinks oolong tea in the morning",
    "Plays the cello on Sundays",
    "Rides a green bicycle to work",
    "Grows chillies on the balcony",
    "The user is vegetarian",
]
MEMORY = "# Long-term Memory\n\n" + "".join(f"- {fact}\n" for fact in FACTS)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    return ws


@pytest.fixture
def client(workspace: Path, tmp_path: Path) -> Iterator[RawClient]:
    with RawClient(workspace, tmp_path) as raw:
        yield raw


def error_code(answer: dict[str, Any]) -> int:
    assert "error" in answer, answer
    return int(answer["error"]["code"])


# -- item 20: the protocol's edges ------------------------------------------------------------


def test_unreadable_lines_get_json_rpc_errors_and_serving_goes_on(client: RawClient) -> None:
    client.initialize()
    client.send_line("{not json")
    not_json = client.answer(None)
    client.send_line(
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":'
        '"memory_search","arguments":{"query":"bees \\ud800"}}}'
    )
    surrogate = client.answer(7)
    client.send_line("[" * 5_000 + "]" * 5_000)
    too_deep = client.answer(None)
    client.send_line(
        '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":' + "[" * 300 + "]" * 300 + "}"
    )
    deep_params = client.answer(8)
    client.send_line('{"hello": "world"}')
    not_rpc = client.answer(None)
    unknown = client.request(9, "memory/wipe", {})
    known_unserved = client.request(10, "resources/list", {})
    bad_params = client.request(11, "tools/call", {"arguments": {}})
    fine = client.call(12, "memory_search", {"query": "bees"})
    assert error_code(not_json) == -32700 and not_json["id"] is None
    assert "Parse error" in not_json["error"]["message"]
    assert error_code(surrogate) == -32700 and "surrogate" in surrogate["error"]["message"]
    assert error_code(too_deep) == -32700 and "nested too deeply" in too_deep["error"]["message"]
    assert error_code(deep_params) in (-32700, -32600, -32602)
    assert error_code(not_rpc) == -32600 and not_rpc["id"] is None
    assert error_code(unknown) == -32601 and "memory/wipe" in unknown["error"]["message"]
    assert error_code(known_unserved) == -32601
    assert error_code(bad_params) == -32602
    assert fine["result"]["isError"] is False and fine["result"]["structuredContent"]["results"]
    assert client.close() == 0
    assert "Traceback" not in client.stderr


def test_calls_before_initialize_are_refused_and_change_nothing(
    client: RawClient, workspace: Path
) -> None:
    early = client.call(1, "save_memory", {"content": "Written before initialize"})
    listing = client.request(2, "tools/list")
    ping = client.request(3, "ping")
    client.initialize()
    later = client.call(4, "save_memory", {"content": "Written after initialize"})
    assert error_code(early) == -32600 and "initialize" in early["error"]["message"]
    assert error_code(listing) == -32600
    assert ping["result"] == {}
    assert later["result"]["isError"] is False
    text = (workspace / "MEMORY.md").read_text()
    assert "Written before initialize" not in text and "Written after initialize" in text
    assert client.close() == 0


def test_null_for_a_typed_parameter_is_refused_not_taken_as_absent(client: RawClient) -> None:
    client.initialize()
    search = client.call(1, "memory_search", {"query": "bees", "maxResults": None})
    get = client.call(2, "memory_get", {"path": "MEMORY.md", "from": None})
    required = client.call(3, "save_memory", {"content": None})
    for answer, name in ((search, "maxResults"), (get, "from"), (required, "content")):
        result = answer["result"]
        assert result["isError"] is True, result
        assert result["structuredContent"]["error"] == "validation_error"
        assert name in result["content"][0]["text"] and "null" in result["content"][0]["text"]
    assert client.close() == 0


# -- item 9: cancellation ---------------------------------------------------------------------


def test_a_cancelled_read_leaves_the_server_serving(client: RawClient) -> None:
    client.initialize()
    # The first search loads the model in a worker thread, which a cancel cannot stop: the
    # SDK answered "cancelled", then answered again when the thread returned, and died.
    client.start_call(1, "memory_search", {"query": "bees"})
    client.cancel(1)
    ping = client.request(2, "ping")
    after = client.call(3, "memory_search", {"query": "cello"})
    assert ping["result"] == {}
    assert after["result"]["isError"] is False
    assert client.close() == 0
    assert "Request already responded to" not in client.stderr


def test_a_forget_under_way_when_cancelled_is_finished_and_answered(
    client: RawClient, workspace: Path
) -> None:
    client.initialize()
    client.call(0, "memory_search", {"query": "warm up"})  # the engine and model are open
    budget_lock = lock_for(workspace / STATE_DIR / RETIRE_BUDGET_LOCK)
    with budget_lock:  # the forget starts, then waits here for the retire budget
        client.start_call(1, "forget_memory", {"query": FACTS[0]})
        assert client.request(2, "ping")["result"] == {}  # the forget's handler ran first
        client.cancel(1)
        assert client.request(3, "ping")["result"] == {}  # the cancel has been read
    forget = client.answer(1)
    assert "result" in forget, forget  # answered with what it did, not "cancelled"
    assert forget["result"]["isError"] is False
    assert forget["result"]["structuredContent"]["forgotten"][0]["text"] == FACTS[0]
    assert FACTS[0] not in (workspace / "MEMORY.md").read_text()
    [record] = [r for r in ActivityLog(workspace).read() if r.name == "forget_memory"]
    assert record.ok and record.forgotten == [{"path": "MEMORY.md", "text": FACTS[0]}]
    assert client.request(4, "ping")["result"] == {}
    assert client.close() == 0


def test_a_forget_cancelled_before_it_starts_does_not_happen(
    client: RawClient, workspace: Path
) -> None:
    client.initialize()
    client.call(0, "memory_search", {"query": "warm up"})
    budget_lock = lock_for(workspace / STATE_DIR / RETIRE_BUDGET_LOCK)
    with budget_lock:
        for request_id, fact in ((1, FACTS[0]), (2, FACTS[1])):  # 2 waits behind 1
            client.start_call(request_id, "forget_memory", {"query": fact})
        assert client.request(3, "ping")["result"] == {}
        client.cancel(2)
        assert client.request(4, "ping")["result"] == {}
    first, second = client.answer(1), client.answer(2)
    assert first["result"]["isError"] is False
    text = (workspace / "MEMORY.md").read_text()
    assert FACTS[0] not in text and FACTS[1] in text  # the cancelled forget never ran
    cancelled = second.get("error") or second["result"]["structuredContent"]
    assert "cancel" in json.dumps(cancelled).lower()
    forgets = [r for r in ActivityLog(workspace).read() if r.name == "forget_memory"]
    assert [r.forgotten for r in forgets if r.ok] == [[{"path": "MEMORY.md", "text": FACTS[0]}]]
    assert client.close() == 0


# -- item 7: the retire budget ----------------------------------------------------------------


def write_config(tmp_path: Path, max_forgets: int) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text(f"[mcp]\nmax_forgets = {max_forgets}\nforget_window_minutes = 10\n")
    return {"MEMDECK_CONFIG": str(config)}


def test_forgets_past_the_budget_are_refused_across_restarts_and_servers(
    workspace: Path, tmp_path: Path
) -> None:
    env = write_config(tmp_path, 2)
    first = RawClient(workspace, tmp_path, **env)
    first.initialize("agent-one")
    other = RawClient(workspace, tmp_path, **env)  # a second server, running beside it
    other.initialize("agent-two")
    try:
        one = first.call(1, "forget_memory", {"query": FACTS[0]})
        two = other.call(1, "forget_memory", {"query": FACTS[1]})
        refused = first.call(2, "forget_memory", {"query": FACTS[2]})
        superseding = other.call(
            2, "save_memory", {"content": "Plays the viola", "supersedes": FACTS[2]}
        )
        plain_save = other.call(3, "save_memory", {"content": "Likes long walks"})
        negating = other.call(4, "save_memory", {"content": "The user is not vegetarian"})
        assert first.close() == 0 and other.close() == 0
    finally:
        for raw in (first, other):
            if raw.process.poll() is None:
                raw.process.kill()
    restarted = RawClient(workspace, tmp_path, **env)
    try:
        restarted.initialize("agent-one")
        again = restarted.call(1, "forget_memory", {"query": FACTS[3]})
        assert restarted.close() == 0
    finally:
        if restarted.process.poll() is None:
            restarted.process.kill()
    assert one["result"]["isError"] is False and two["result"]["isError"] is False
    for answer in (refused, superseding, negating, again):
        result = answer["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"] == "limit_reached"
        message = result["content"][0]["text"]
        assert "2 memories retired by MCP clients in the last 10 minutes" in message
        assert "limit of 2" in message and "[mcp] max_forgets" in message
    assert plain_save["result"]["isError"] is False  # saving without retiring stays open
    text = (workspace / "MEMORY.md").read_text()
    assert all(fact in text for fact in FACTS[2:]) and "Plays the viola" not in text
    assert "The user is not vegetarian" not in text


def test_the_budget_counts_what_the_log_says_was_retired_in_the_window(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path)

    def forget(at: str, count: int) -> ActivityRecord:
        gone = [{"path": "MEMORY.md", "text": f"fact {i}"} for i in range(count)]
        return ActivityRecord(at, "a 1", "tool", "forget_memory", "", True, "", forgotten=gone)

    log.append(forget("2026-11-26T09:00:00+00:00", 3))  # before the window
    log.append(forget("2026-11-26T09:55:00+01:00", 1))  # 08:55 UTC: before it too
    log.append(forget("2026-11-26T10:05:00+00:00", 2))
    superseding = ActivityRecord(
        "2026-11-26T10:06:00+00:00",
        "a 1",
        "tool",
        "save_memory",
        "",
        True,
        "saved",
        entries=["MEMORY.md#L3", "superseded: old fact"],
    )
    log.append(superseding)
    failed = ActivityRecord(
        "2026-11-26T10:07:00+00:00",
        "a 1",
        "tool",
        "forget_memory",
        "",
        False,
        "error: x",
        forgotten=[{"path": "MEMORY.md", "text": "y"}],
    )
    log.append(failed)
    assert log.retired_since(datetime.fromisoformat("2026-11-26T10:00:00+00:00")) == 3


# -- item 10: bounded logs --------------------------------------------------------------------


def test_a_600kb_search_does_not_empty_the_activity_log_and_undo_still_works(
    client: RawClient, workspace: Path
) -> None:
    client.initialize("[@click=app.quit] " + "n" * 100_000)
    forget = client.call(1, "forget_memory", {"query": FACTS[0]})
    huge = client.call(2, "memory_search", {"query": "q" * 600_000})
    ok = client.call(3, "memory_search", {"query": "cello"})
    assert client.close() == 0
    assert forget["result"]["isError"] is False and huge["result"]["isError"] is True
    assert ok["result"]["isError"] is False
    log = ActivityLog(workspace)
    assert log.path.stat().st_size < 64 * 1024  # every field was cut before writing
    records = log.read()
    assert [r.name for r in records] == ["forget_memory", "memory_search", "memory_search"]
    assert all(len(r.client) <= 200 and len(r.query) <= 1_000 for r in records)
    engine = MemoryEngine(Workspace.open(workspace))
    try:
        [retired] = retired_by(records[0], engine.store.retired_records())
        assert engine.restore(retired) is not None
    finally:
        engine.close()
    assert FACTS[0] in (workspace / "MEMORY.md").read_text()


def test_the_trim_keeps_the_newest_lines_that_fit_and_every_forget_first(
    tmp_path: Path,
) -> None:
    log = ActivityLog(tmp_path, max_bytes=20_000)
    forget = ActivityRecord(
        "2026-11-26T10:00:00+00:00",
        "a 1",
        "tool",
        "forget_memory",
        'query="bees"',
        True,
        "Forgot 1 memory.",
        forgotten=[{"path": "MEMORY.md", "text": FACTS[0]}],
    )
    log.append(forget)
    for number in range(60):  # searches push the forget past the trimmed half
        log.append(
            ActivityRecord(
                "2026-11-26T10:01:00+00:00",
                "a 1",
                "tool",
                "memory_search",
                f"query={number}",
                True,
                "1 result",
                query="x" * 900,
            )
        )
    # A line longer than the whole budget, written by an older memdeck or by hand, last.
    with log.path.open("ab") as out:
        out.write(
            json.dumps(
                {"at": "2026-11-26T10:02:00+00:00", "name": "memory_search", "query": "y" * 50_000}
            ).encode()
            + b"\n"
        )
    log.append(
        ActivityRecord(
            "2026-11-26T10:03:00+00:00", "a 1", "tool", "memory_get", "", True, "read 1 lines"
        )
    )
    records = log.read()
    assert log.path.stat().st_size <= 20_000
    assert records[0].forgotten == forget.forgotten  # kept though older than the rest
    assert records[-1].name == "memory_get"
    searches = [int(r.arguments.split("=")[1]) for r in records if r.name == "memory_search"]
    assert searches and searches == list(range(searches[0], 60))  # the newest, in order


def test_the_audit_trail_is_bounded_and_every_restorable_record_keeps_its_number(
    workspace: Path, tmp_path: Path
) -> None:
    store = MemoryStore(Workspace.open(workspace))
    entries = {e.text: e for e in store.entries()}
    store.retire_entries([entries[FACTS[0]]], state="forgotten", reason="q" * 100_000)
    store.retire_entries([entries[FACTS[1]]], state="forgotten", reason="cello")
    [_, undone] = store.retired_records()
    assert store.restore_entry(undone) is not None
    # An old trail: write conflicts (nothing to restore) up to just below the bound.
    history = store.workspace.history_path
    filler = json.dumps({"event": "write_conflict", "path": "MEMORY.md", "detail": "x" * 400})
    room = HISTORY_COMPACT_BYTES - history.stat().st_size - 100  # the next record crosses it
    count = room // (len(filler) + 1) - 1
    last = {"event": "write_conflict", "detail": ""}
    last["detail"] = "x" * (room - count * (len(filler) + 1) - len(json.dumps(last)) - 1)
    with history.open("a") as out:
        out.write((filler + "\n") * count + json.dumps(last) + "\n")
    assert history.stat().st_size == HISTORY_COMPACT_BYTES - 100
    before = {r.number: r.text for r in store.retired_records()}
    lines_before = len(history.read_text().splitlines())
    entries = {e.text: e for e in store.entries()}
    store.retire_entries([entries[FACTS[2]]], state="forgotten", reason="bicycle")  # crosses it
    after = {r.number: r.text for r in store.retired_records()}
    assert history.stat().st_size < 64 * 1024  # the conflicts and the restored pair blanked
    assert len(history.read_text().splitlines()) == lines_before + 1
    assert after == {**before, lines_before + 1: FACTS[2]}  # the same numbers, one more
    assert list(before.values()) == [FACTS[0]]
    first = json.loads(history.read_text().splitlines()[0])
    assert first["text"] == FACTS[0] and len(first["reason"]) == MAX_HISTORY_NOTE_CHARS
    env = memdeck_env(None, tmp_path)
    number = next(iter(before))
    restored = run_memdeck(
        ["--workspace", str(workspace), "forgotten", "--restore", str(number)], env
    )
    assert restored.returncode == 0, restored.stderr
    assert FACTS[0] in (workspace / "MEMORY.md").read_text()
