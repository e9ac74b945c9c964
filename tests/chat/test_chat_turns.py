"""Chat turns against the fake OpenAI server with the real ``openai`` client and a real engine."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import make_config, make_engine
from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.chat import ChatEngine
from tui.chat.config_sections import NO_KEY_PLACEHOLDER
from tui.chat.events import (
    ChatEvent,
    InjectionBuilt,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnDone,
    TurnError,
    TurnStarted,
    Usage,
)


async def turn(engine: ChatEngine, session_id: str, text: str) -> list[ChatEvent]:
    return [event async for event in engine.run_turn(session_id, text)]


def transcript_lines(engine: ChatEngine, session_id: str) -> list[dict[str, Any]]:
    path = engine.sessions.path(session_id)
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_streamed_answer_with_injection_in_system_prompt(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    engine.memory.store.add_entry("The user's dog is called Max", confidence="high", source="user")
    engine.memory.store.append_daily("## Walks\n\n- Took the dog to the beach on Sunday\n")
    engine.memory.sync(embed=False)
    server.enqueue(FakeOpenAI.text(["How ", "is ", "Max?"]))
    session = engine.sessions.create("dog chat").id
    events = await turn(engine, session, "what did we do at the beach with the dog?")

    started, injection = events[0], events[1]
    assert isinstance(started, TurnStarted) and isinstance(injection, InjectionBuilt)
    assert "## Long-term Memory" in injection.text and "Max" in injection.text
    assert "beach" in injection.text and injection.report.tokens_used > 0
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["How ", "is ", "Max?"]
    assert any(isinstance(e, Usage) for e in events)
    done = events[-1]
    assert isinstance(done, TurnDone) and done.text == "How is Max?"

    request = server.chat_requests[-1]
    assert request.stream and request.model == "fake-model"
    assert request.system_prompt is not None
    assert injection.text in request.system_prompt
    assert (
        "naturally" in request.system_prompt and "according to my memory" in request.system_prompt
    )
    assert set(request.tool_names) == {
        "save_memory",
        "memory_search",
        "memory_get",
        "forget_memory",
    }
    assert request.messages[-1] == {
        "role": "user",
        "content": "what did we do at the beach with the dog?",
    }

    roles = [(r["type"], r.get("role")) for r in transcript_lines(engine, session)]
    assert ("message", "user") in roles and ("message", "assistant") in roles


async def test_preview_matches_the_injected_block(engine: ChatEngine, server: FakeOpenAI) -> None:
    engine.memory.store.add_entry("Prefers Python for scripts", confidence="high", source="user")
    engine.memory.sync(embed=False)
    preview = engine.preview_injection("which language for a script?")
    session = engine.sessions.create().id
    events = await turn(engine, session, "which language for a script?")
    built = next(e for e in events if isinstance(e, InjectionBuilt))
    assert built.text == preview.text and "Python" in preview.text


async def test_history_is_replayed_with_tool_calls(engine: ChatEngine, server: FakeOpenAI) -> None:
    session = engine.sessions.create().id
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Lives in Lyon"}, "call_1"),
        "Noted.",
        "Lyon, of course.",
    )
    await turn(engine, session, "I live in Lyon, remember that")
    await turn(engine, session, "where do I live?")
    replay = server.chat_requests[-1].messages
    assert [m["role"] for m in replay] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert replay[2]["tool_calls"][0]["id"] == "call_1"
    assert replay[3]["tool_call_id"] == "call_1" and '"saved": true' in replay[3]["content"]
    assert "Lives in Lyon" in (server.chat_requests[-1].system_prompt or "")


async def test_every_tool_end_to_end(engine: ChatEngine, server: FakeOpenAI) -> None:
    session = engine.sessions.create().id
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "My cat is Tom"}),
        FakeOpenAI.tool_call("memory_search", {"query": "cat", "maxResults": 2}),
        FakeOpenAI.tool_call("memory_get", {"path": "MEMORY.md", "from": 1, "lines": 5}),
        FakeOpenAI.tool_call("memory_get", {"path": "../../etc/passwd"}),
        FakeOpenAI.tool_call("save_memory", {"content": ""}),
        FakeOpenAI.tool_call("forget_memory", {"query": "cat Tom"}),
        "All done.",
    )
    events = await turn(engine, session, "exercise the tools")
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.name for e in started] == [
        "save_memory",
        "memory_search",
        "memory_get",
        "memory_get",
        "save_memory",
        "forget_memory",
    ]
    assert [e.ok for e in finished] == [True, True, True, False, False, True]
    search = finished[1].result["results"]
    assert search and search[0]["path"] == "MEMORY.md" and "Tom" in search[0]["snippet"]
    assert "My cat is Tom" in finished[2].result["text"]
    assert finished[3].result["error"] == "path_refused"
    assert finished[4].result["error"] == "validation_error"
    assert isinstance(events[-1], TurnDone) and events[-1].text == "All done."
    # Each tool result went back to the model in the next request.
    tool_messages = [m for m in server.chat_requests[-1].messages if m["role"] == "tool"]
    assert len(tool_messages) == 6
    assert "Tom" not in engine.memory.workspace.memory_file.read_text()
    kinds = [r["type"] for r in transcript_lines(engine, session)]
    assert kinds.count("tool_call") == 6 and kinds.count("tool_result") == 6


async def test_tool_loop_is_stopped(tmp_path: Path, server: FakeOpenAI) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path, server, max_tool_rounds=3))
    server.default = FakeOpenAI.tool_call("memory_search", {"query": "again"})
    session = engine.sessions.create().id
    events = await turn(engine, session, "loop forever")
    assert isinstance(events[-1], TurnError) and events[-1].kind == "tool_loop"
    assert len(server.chat_requests) == 3
    engine.close()


def _assert_turn_failed(
    engine: ChatEngine, session: str, events: list[ChatEvent], kind: str
) -> TurnError:
    error = events[-1]
    assert isinstance(error, TurnError), events
    assert error.kind == kind, error
    assert not any(isinstance(e, TurnDone) for e in events)
    lines = transcript_lines(engine, session)
    users = [r for r in lines if r.get("role") == "user"]
    assert users and users[-1]["content"] == "hello?"
    assert lines[-1]["type"] == "error" and lines[-1]["kind"] == kind
    return error


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        (FakeOpenAI.error(429, "Rate limit reached", retry_after=7), "rate_limit", "retry in 7 s"),
        (FakeOpenAI.error(500), "server", "500"),
        (FakeOpenAI.error(503, "overloaded"), "server", "overloaded"),
        (FakeOpenAI.error(400, "bad model"), "bad_request", "bad model"),
        (FakeOpenAI.malformed_stream("truncated"), "malformed", "broke off"),
        (FakeOpenAI.malformed_stream("bad_json"), "malformed", "could not be read"),
        (FakeOpenAI.malformed_stream("no_done"), "malformed", "before the server said"),
    ],
)
async def test_server_errors_end_the_turn_cleanly(
    engine: ChatEngine, server: FakeOpenAI, reply: Reply, kind: str, words: str
) -> None:
    server.enqueue(reply)
    session = engine.sessions.create().id
    events = await turn(engine, session, "hello?")
    error = _assert_turn_failed(engine, session, events, kind)
    assert words in error.message
    if kind == "rate_limit":
        assert error.retry_after == 7
    if reply.kind == "malformed":
        partial = [r for r in transcript_lines(engine, session) if r.get("incomplete")]
        assert partial and partial[0]["content"].startswith("partial")
    # The session still works afterwards, and the failed turn is not replayed as an answer.
    server.enqueue("fine now")
    again = await turn(engine, session, "hello?")
    assert isinstance(again[-1], TurnDone) and again[-1].text == "fine now"
    roles = [m["role"] for m in server.chat_requests[-1].messages]
    assert roles == ["system", "user", "user"]


async def test_timeout(tmp_path: Path, server: FakeOpenAI) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path, server, request_timeout=0.5))
    server.enqueue(FakeOpenAI.hang(5))
    session = engine.sessions.create().id
    events = await turn(engine, session, "hello?")
    error = _assert_turn_failed(engine, session, events, "timeout")
    assert "0.5 s" in error.message
    engine.close()


async def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = make_config(
        tmp_path, env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "MEMDECK_MODEL": "m"}
    )
    engine = make_engine(tmp_path, config)
    session = engine.sessions.create().id
    events = await turn(engine, session, "hello?")
    error = _assert_turn_failed(engine, session, events, "connection")
    assert f"127.0.0.1:{port}" in error.message
    engine.close()


async def test_401_is_explained_and_keys_are_never_written(tmp_path: Path) -> None:
    key = "sk-proj-TOPSECRET0123456789"
    with FakeOpenAI(require_api_key="the-right-key") as server:
        server_config = make_config(
            tmp_path, server, env={"OPENAI_API_KEY": key, "MEMDECK_API_KEY": key}
        )
        engine = make_engine(tmp_path, server_config)
        server.enqueue(FakeOpenAI.error(401, f"Incorrect API key provided: {key}"))
        session = engine.sessions.create().id
        events = await turn(engine, session, "hello?")
        error = _assert_turn_failed(engine, session, events, "auth")
        assert key not in error.message and "401" in error.message
        assert "MEMDECK_API_KEY" in error.message
        engine.close()
    workspace = tmp_path / "ws"
    for path in workspace.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".md", ".json"):
            assert key not in path.read_text(errors="replace"), path


async def test_openai_key_is_not_sent_to_another_server(tmp_path: Path, server: FakeOpenAI) -> None:
    config = make_config(tmp_path, server, env={"OPENAI_API_KEY": "sk-openai-only-123456"})
    engine = make_engine(tmp_path, config)
    session = engine.sessions.create().id
    await turn(engine, session, "hi")
    request = server.chat_requests[-1]
    assert request.api_key == NO_KEY_PLACEHOLDER
    assert "sk-openai-only" not in json.dumps(request.headers)
    engine.close()

    own = make_engine(
        tmp_path, make_config(tmp_path, server, env={"MEMDECK_API_KEY": "local-server-key"})
    )
    await turn(own, own.sessions.create().id, "hi")
    assert server.chat_requests[-1].api_key == "local-server-key"
    own.close()


async def test_no_llm_configured_keeps_the_message(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path))
    session = engine.sessions.create().id
    events = await turn(engine, session, "hello?")
    error = _assert_turn_failed(engine, session, events, "config")
    assert "OPENAI_API_KEY" in error.message
    engine.close()


async def test_reconfigure_switches_model(tmp_path: Path, server: FakeOpenAI) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path, server))
    session = engine.sessions.create().id
    await turn(engine, session, "first")
    engine.reconfigure(make_config(tmp_path, server, model="bigger-model", injection_budget=500))
    await turn(engine, session, "second")
    assert [r.model for r in server.chat_requests] == ["fake-model", "bigger-model"]
    changes = [r["model"] for r in transcript_lines(engine, session) if r["type"] == "model_change"]
    assert changes == ["fake-model", "bigger-model"]
    assert engine.preview_injection("x").report.budget == 500
    engine.close()


def test_tool_call_fragments_from_less_strict_servers() -> None:
    from types import SimpleNamespace as Fragment

    from tui.chat.client import _add_fragment

    calls: dict[int, Any] = {}
    for fragment in (
        Fragment(index=None, id="a", function=Fragment(name="save_memory", arguments='{"con')),
        Fragment(index=None, id="a", function=Fragment(name="save_memory", arguments='tent": 1}')),
        Fragment(index=None, id="b", function=Fragment(name="memory_search", arguments="{}")),
    ):
        _add_fragment(calls, fragment, 1000)
    assembled = [call.assembled(f"call_{i}") for i, call in sorted(calls.items())]
    assert [(c.id, c.name, c.arguments, c.oversized) for c in assembled] == [
        ("a", "save_memory", '{"content": 1}', False),
        ("b", "memory_search", "{}", False),
    ]


def test_a_status_without_a_message_is_named_not_echoed() -> None:
    """A 501 whose body says nothing read ``failed (501: Error code: 501)``: the SDK's
    placeholder; the status's name says more."""
    import importlib

    import openai

    # the HTTP library this openai release speaks through (httpx, or its successor)
    client = openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")
    library = next(c for c in type(client._client).__mro__ if not c.__module__.startswith("openai"))
    httpx = importlib.import_module(library.__module__.split(".")[0])

    from tui.chat.client import _server_message

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx.Response(501, request=request)
    exc = openai.APIStatusError("Error code: 501", response=response, body=None)
    assert _server_message(exc) == "Not Implemented"
    odd = openai.APIStatusError(
        "Error code: 599", response=httpx.Response(599, request=request), body=None
    )
    assert _server_message(odd) == "HTTP 599"
