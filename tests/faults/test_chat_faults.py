"""Issue 8, "Trust the files": the chat side's faults, each kept fixed by a test here.

Real files, real SQLite, the real ``openai`` client against the loopback fake server, and real
``memdeck`` processes where a traceback or an exit code is what matters. No wall-clock
thresholds (the figures for tool-argument assembly are in ``tests/bench/tool_args.py``).
"""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import (
    TOOLS_TODAY,
    SummaryResponder,
    make_config,
    make_engine,
    memdeck_env,
    run_memdeck,
)
from support.fakeopenai import FakeOpenAI

from tui.chat.chat import ChatEngine
from tui.chat.config import _FILE_FIELDS, ConfigError, load_config
from tui.chat.events import ChatEvent, TextDelta, ToolCallFinished, TurnDone, TurnError
from tui.chat.sessions import SessionStore
from tui.chat.tool_specs import DAILY_LOG_SPEC, TOOL_SPECS
from tui.chat.tools import MemoryTools
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace

TODAY = TOOLS_TODAY


async def turn(engine: ChatEngine, session_id: str, text: str) -> list[ChatEvent]:
    return [event async for event in engine.run_turn(session_id, text)]


def history(memory: MemoryEngine) -> list[dict[str, Any]]:
    path = memory.workspace.history_path
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def one_line_error(result: Any) -> str:
    """The single stderr line of a failed ``memdeck`` run (never a traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line: str = lines[0]
    return line


# -- 10. every tool argument is validated -------------------------------------------------

#: A valid call of every tool; each test below breaks one argument of it.
VALID_CALLS: dict[str, dict[str, Any]] = {
    "save_memory": {"content": "Likes tea", "supersedes": "m123"},
    "memory_search": {"query": "tea", "maxResults": 3, "minScore": 0.1},
    "memory_get": {"path": "MEMORY.md", "from": 1, "lines": 10},
    "forget_memory": {"query": "tea"},
    "append_daily_log": {"content": "- drank tea"},
}

_BAD_BY_TYPE: dict[str, list[Any]] = {
    "string": [42, 1.5, True, ["a"], {"a": 1}, "x" * 1_000_000],
    "integer": [True, False, 1.5, "3", math.inf, -math.inf, math.nan, 10**30, -(10**30), [1]],
    "number": [True, "0.5", math.inf, -math.inf, math.nan, 1e300, -1e300, [0.5]],
}


def _bad_calls() -> Iterator[tuple[str, str, Any]]:
    for spec in (*TOOL_SPECS, DAILY_LOG_SPEC):
        assert spec.name in VALID_CALLS, f"add a valid call of {spec.name} to VALID_CALLS"
        for param, schema in spec.parameters.items():
            for bad in _BAD_BY_TYPE[schema["type"]]:
                yield spec.name, param, bad


def test_every_argument_of_every_tool_is_validated(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    memory.store.add_entry("Likes coffee", confidence="high", source="user")
    before = memory.workspace.memory_file.read_bytes()
    checked = 0
    for name, param, bad in _bad_calls():
        arguments = {**VALID_CALLS[name], param: bad}
        for raw in (arguments, json.dumps(arguments)):  # a dict, and the JSON a model sends
            result = tools.execute(name, raw)
            assert not result.ok, (name, param, bad)
            assert result.content["error"] == "validation_error", (name, param, result.content)
            message = result.content["message"]
            assert param in message and "\n" not in message and len(message) < 300, message
            checked += 1
    for name, arguments in VALID_CALLS.items():
        required = next(s for s in (*TOOL_SPECS, DAILY_LOG_SPEC) if s.name == name).required
        for param in required:
            missing = {k: v for k, v in arguments.items() if k != param}
            result = tools.execute(name, missing)
            assert (
                result.content["error"] == "validation_error" and param in result.content["message"]
            )
        unknown = tools.execute(name, {**arguments, "rm": "-rf"})
        assert (
            unknown.content["error"] == "validation_error" and "'rm'" in unknown.content["message"]
        )
    for raw in (
        '{"query": "x", "maxResults": 1e999}',
        '{"query": "x", "minScore": NaN}',
        "[" * 100_000 + "]" * 100_000,
        '["query"]',
    ):
        result = tools.execute("memory_search", raw)
        assert result.content["error"] == "validation_error", result.content
    assert checked > 100
    assert memory.workspace.memory_file.read_bytes() == before  # nothing was written


def test_overflowing_tool_argument_is_a_tool_error_not_a_traceback(tmp_path: Path) -> None:
    with FakeOpenAI(
        FakeOpenAI.tool_call("memory_search", '{"query": "dog", "maxResults": 1e999}', "call_1"),
        FakeOpenAI.text("Sorry, let me try that differently."),
    ) as server:
        result = run_memdeck(
            ["--workspace", str(tmp_path / "ws"), "ask", "--bm25", "what is my dog called?"],
            memdeck_env(server, tmp_path),
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert "✗ memory_search: Parameter 'maxResults'" in result.stderr
        assert result.stdout == "Sorry, let me try that differently.\n"
        tool_message = server.chat_requests[-1].messages[-1]
        assert tool_message["role"] == "tool" and "validation_error" in tool_message["content"]


# -- 11. tool-call arguments: linear assembly, bounded size --------------------------------


async def test_deeply_nested_tool_arguments_are_a_tool_error(tmp_path: Path) -> None:
    nested = '{"query": ' + "[" * 20_000 + "]" * 20_000 + "}"
    with FakeOpenAI(FakeOpenAI.tool_call("memory_search", nested), "Oops.") as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        session = engine.sessions.create().id
        events = await turn(engine, session, "search")
        finished = next(e for e in events if isinstance(e, ToolCallFinished))
        assert finished.result["error"] == "validation_error"
        assert isinstance(events[-1], TurnDone) and events[-1].text == "Oops."
        engine.close()


async def test_oversized_tool_arguments_are_capped_and_refused(tmp_path: Path) -> None:
    cap = 4096
    huge = {"content": "All about my dog. " * 3000}  # ~54 KB, streamed in 8-character pieces
    with FakeOpenAI(
        FakeOpenAI.tool_call("save_memory", huge, "call_big"),
        FakeOpenAI.text("That was too long, I'll keep it short."),
    ) as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server, max_tool_argument_chars=cap))
        session = engine.sessions.create().id
        events = await turn(engine, session, "remember everything about my dog")
        finished = next(e for e in events if isinstance(e, ToolCallFinished))
        assert not finished.ok and finished.result["error"] == "too_large"
        assert f"{cap:,}" in finished.result["message"]
        assert isinstance(events[-1], TurnDone)
        assert not engine.memory.workspace.memory_file.exists()
        # Neither the transcript nor the next request carries the oversized arguments.
        lines = engine.sessions.path(session).read_text().splitlines()
        call = next(json.loads(x) for x in lines if '"type":"tool_call"' in x)
        assert len(call["arguments"]) <= cap and call["arguments_chars"] > cap
        replay = server.chat_requests[-1].messages
        sent = next(m for m in replay if m.get("tool_calls"))
        assert len(sent["tool_calls"][0]["function"]["arguments"]) <= cap
        assert "too_large" in replay[-1]["content"]
        engine.close()


def test_tool_argument_cap_has_a_sensible_default(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    assert 16_000 <= config.max_tool_argument_chars <= 1_000_000


# -- 12. an answer's size is capped ---------------------------------------------------------


async def test_huge_answer_is_truncated_with_a_notice_and_stays_bounded(tmp_path: Path) -> None:
    cap = 10_000
    with FakeOpenAI(FakeOpenAI.text(["word " * 200] * 400)) as server:  # 400 KB streamed
        engine = make_engine(tmp_path, make_config(tmp_path, server, max_answer_chars=cap))
        session = engine.sessions.create().id
        events = await turn(engine, session, "tell me everything")
        deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
        done = events[-1]
        assert isinstance(done, TurnDone) and done.truncated
        assert "truncated" in deltas[cap:] and len(deltas) < cap + 200
        assert done.text == deltas
        stored = engine.sessions.load(session).messages[-1]
        assert stored.role == "assistant" and stored.content == deltas
        assert json.loads(engine.sessions.path(session).read_text().splitlines()[-1])["truncated"]

        # A transcript written before the cap (a 2 MB answer) does not blow up the next request.
        engine.sessions.append_message(session, "user", "and?")
        engine.sessions.append_message(session, "assistant", "x" * 2_000_000)
        server.enqueue("ok")
        await turn(engine, session, "short answer please")
        body = server.chat_requests[-1].raw
        assert len(body) < 4 * cap + 50_000
        engine.close()


# -- 13. every numeric setting has a range -------------------------------------------------

_NUMERIC = {
    name: typing.get_args(hint) or (hint,)
    for name, setting in _FILE_FIELDS.items()
    for hint in [setting.info.annotation]
    if set(typing.get_args(hint) or (hint,)) & {int, float}
}


def test_every_numeric_setting_has_a_range(tmp_path: Path) -> None:
    assert {"idle_minutes", "request_timeout", "max_tool_rounds", "context_window"} <= set(_NUMERIC)
    path = tmp_path / "config.toml"
    for name, types in _NUMERIC.items():
        section, key = _FILE_FIELDS[name].section, _FILE_FIELDS[name].key
        bad = ["nan", "inf", "-inf", "1e300", "-1e300"] if float in types else []
        bad += ["-1000000000000000000", "1000000000000000000"]
        for value in bad:
            path.write_text(f"[{section}]\n# a comment\n{key} = {value}\n", encoding="utf-8")
            with pytest.raises(ConfigError) as caught:
                load_config(path, env={})
            message = str(caught.value)
            assert message.startswith(f"{path}:3: {key} must be "), message
            assert "\n" not in message
        env_value = "inf" if float in types else "-1000000000000000000"
        variable = f"MEMDECK_{name.upper()}"
        with pytest.raises(ConfigError, match=variable):
            load_config(tmp_path / "none.toml", env={variable: env_value})
    for name, number in (("request_timeout", -1), ("max_tool_rounds", -1), ("max_tool_rounds", 0)):
        with pytest.raises(ConfigError, match=name):
            load_config(tmp_path / "none.toml", env={}, overrides={name: number})


def test_bad_numbers_are_one_line_cli_errors(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[triggers]\nidle_minutes = nan\n", encoding="utf-8")
    workspace = str(tmp_path / "ws")
    env = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(config))
    result = run_memdeck(["--workspace", workspace, "ask", "hi"], env)
    assert result.returncode == 2
    assert one_line_error(result).startswith(f"memdeck: error: {config}:2: idle_minutes must be")

    Workspace.open(tmp_path / "ws")  # consolidate never creates a workspace
    env = memdeck_env(None, tmp_path, MEMDECK_IDLE_MINUTES="inf")
    result = run_memdeck(["--workspace", workspace, "consolidate", "--days", "2"], env)
    assert result.returncode == 2 and "MEMDECK_IDLE_MINUTES" in one_line_error(result)
    with FakeOpenAI() as server:
        result = run_memdeck(
            ["--workspace", workspace, "consolidate", "--days", "1000000"],
            memdeck_env(server, tmp_path),
        )
    assert result.returncode == 2 and "--days must be" in one_line_error(result)


# -- 14. deleting a session never loses its unlogged messages ------------------------------


def test_delete_with_the_llm_down_keeps_the_messages(tmp_path: Path) -> None:
    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create("garden").id
    store.append_message(session, "user", "plant the tulips in October")
    store.append_message(session, "assistant", "Noted: tulips in October.")
    workspace = str(tmp_path / "ws")
    delete = ["--workspace", workspace, "sessions", "--delete", session]
    with FakeOpenAI(FakeOpenAI.error(503), FakeOpenAI.error(503)) as server:
        env = memdeck_env(server, tmp_path)
        refused = run_memdeck(delete, env)
        assert refused.returncode == 2, refused.stderr
        assert "Traceback" not in refused.stderr
        error = refused.stderr.strip().splitlines()[-1]
        assert "not deleted" in error and "2 messages" in error and "--force" in error
        assert store.ids() == [session] and store.trashed() == []

        forced = run_memdeck([*delete, "--force"], env)
        assert forced.returncode == 0, forced.stderr
        assert store.ids() == [] and len(store.trashed()) == 1
        assert "not logged" in forced.stderr and "--restore" in forced.stderr

        restored = run_memdeck(["--workspace", workspace, "sessions", "--restore", session], env)
        assert restored.returncode == 0, restored.stderr
        assert store.ids() == [session]
        assert store.info(session).unlogged_count == 2

        server.responder = SummaryResponder()
        deleted = run_memdeck(delete, env)
        assert deleted.returncode == 0, deleted.stderr
        assert store.ids() == [] and f"{session}: logged 2 messages" in deleted.stdout
        logs = list((tmp_path / "ws" / "memory").glob("*.md"))
        assert logs and "Summary number 1" in logs[0].read_text()


# -- 17. secrets are never echoed ----------------------------------------------------------


@pytest.mark.parametrize(
    "value", ['["sk-live-abcdef1234567890"]', "1234567890123456", '{k = "live-abcdef1234567890"}']
)
def test_a_mistyped_api_key_is_not_echoed(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[llm]\nmodel = "m"\napi_key = {value}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert message.startswith(f"{path}:3: api_key must be a string"), message
    for secret in ("abcdef1234567890", "1234567890123456", "sk-live"):
        assert secret not in message
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "none.toml", env={}, overrides={"api_key": ["sk-live-abc123456"]})
    assert "abc123456" not in str(caught.value) and "api_key must be a string" in str(caught.value)


def test_an_http_error_echoing_the_key_is_redacted(tmp_path: Path) -> None:
    key = "live-0123456789abcdef"
    with FakeOpenAI(FakeOpenAI.error(401, f"Incorrect API key provided: {key}.")) as server:
        env = memdeck_env(server, tmp_path, MEMDECK_API_KEY=key)
        result = run_memdeck(["--workspace", str(tmp_path / "ws"), "ask", "--bm25", "hi"], env)
        assert result.returncode == 1 and key not in result.stderr + result.stdout
        assert "401" in result.stderr
        # nothing was answered: the session ask made went to the trash (issue 32, item 17)
        transcripts = list((tmp_path / "ws" / "sessions").glob("**/*.jsonl"))
        assert transcripts and key not in transcripts[0].read_text()


async def test_credentials_in_the_base_url_are_not_echoed(tmp_path: Path) -> None:
    url = "http://memdeck:s3cret-pass-word@127.0.0.1:9/v1?api_key=qu3ry-s3cret"  # nothing listens
    engine = make_engine(tmp_path, make_config(tmp_path, env={"OPENAI_BASE_URL": url}, model="m"))
    session = engine.sessions.create().id
    events = await turn(engine, session, "hello")
    error = events[-1]
    assert isinstance(error, TurnError)
    assert error.kind == "connection" and "127.0.0.1:9" in error.message
    stored = engine.sessions.path(session).read_text()
    for secret in ("s3cret-pass-word", "qu3ry-s3cret"):
        assert secret not in error.message and secret not in stored
    engine.close()


# -- 18. only what the model names is superseded -------------------------------------------


def test_non_contradicting_facts_are_both_kept(tools: MemoryTools, memory: MemoryEngine) -> None:
    for older, newer in (
        ("My dog is called Max", "My dog is a golden retriever"),
        ("deadline: March 3", "deadline: confirmed by the client"),
        ("My dog is Max", "My dog is Luna"),  # two dogs? keep both unless the model says so
    ):
        first = tools.execute("save_memory", {"content": older})
        second = tools.execute("save_memory", {"content": newer})
        assert first.ok and second.ok and second.content["saved"]
        assert "superseded" not in second.content
        text = memory.workspace.memory_file.read_text()
        assert older in text and newer in text
    assert not [h for h in history(memory) if h["event"] == "superseded"]


def test_supersede_by_id_or_exact_text_is_listed_for_undo(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    max_ = tools.execute("save_memory", {"content": "My dog is called Max"}).content["id"]
    tools.execute("save_memory", {"content": "Lives in Paris"})
    memory.store.append_daily("## Chat\n\n- talked about Paris\n", TODAY)
    memory.sync(embed=False)
    hits = tools.execute("memory_search", {"query": "dog Max"}).content["results"]
    assert any(max_ in hit.get("ids", []) for hit in hits)  # the model can see ids to name

    words = tools.execute("save_memory", {"content": "My dog is called Rex", "supersedes": "dog"})
    assert "superseded" not in words.content and "My dog is called Max" in json.dumps(
        words.content["candidates"]
    )
    rex = words.content["id"]
    by_id = tools.execute("save_memory", {"content": "My dog is called Rex", "supersedes": max_})
    assert by_id.ok and by_id.content["superseded"] == [
        {"id": max_, "text": "My dog is called Max"}
    ]
    by_text = tools.execute(
        "save_memory", {"content": "Lives in Lyon", "supersedes": "lives in paris."}
    )
    assert [e["text"] for e in by_text.content["superseded"]] == ["Lives in Paris"]
    text = memory.workspace.memory_file.read_text()
    assert "Max" not in text and "Paris" not in text and "Rex" in text and "Lyon" in text
    retired = [(h["text"], h["replaced_by"]) for h in history(memory) if h["event"] == "superseded"]
    assert retired == [("My dog is called Max", rex), ("Lives in Paris", by_text.content["id"])]
    daily = memory.workspace.daily_log(TODAY).read_text()
    assert "talked about Paris" in daily and "state=" not in daily  # only MEMORY.md is touched


def test_exact_negation_is_the_only_automatic_supersede(
    tools: MemoryTools, memory: MemoryEngine
) -> None:
    tools.execute("save_memory", {"content": "The user is vegetarian"})
    tools.execute("save_memory", {"content": "Likes spicy food"})
    result = tools.execute("save_memory", {"content": "The user is not vegetarian"})
    assert [e["text"] for e in result.content["superseded"]] == ["The user is vegetarian"]
    assert "spicy" in memory.workspace.memory_file.read_text()


async def test_model_supersedes_by_an_id_it_found(tmp_path: Path) -> None:
    def save_with_found_id(body: dict[str, Any]) -> Any:
        found = json.loads(body["messages"][-1]["content"])
        old = found["results"][0]["ids"][0]
        return FakeOpenAI.tool_call(
            "save_memory", {"content": "My dog is called Luna", "supersedes": old}
        )

    with FakeOpenAI(
        FakeOpenAI.tool_call("memory_search", {"query": "dog called"}),
        save_with_found_id,
        "Luna it is.",
    ) as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        engine.tools.execute("save_memory", {"content": "My dog is called Max"})
        engine.tools.execute("save_memory", {"content": "My dog is a golden retriever"})
        session = engine.sessions.create().id
        events = await turn(engine, session, "my dog is called Luna now, not Max")
        saved = [e for e in events if isinstance(e, ToolCallFinished)][-1]
        assert saved.ok and saved.result["superseded"][0]["text"] == "My dog is called Max"
        text = engine.memory.workspace.memory_file.read_text()
        assert "Luna" in text and "golden retriever" in text and "Max" not in text
        offered = {t["function"]["name"]: t["function"] for t in server.chat_requests[0].tools}
        assert (
            "id" in offered["save_memory"]["parameters"]["properties"]["supersedes"]["description"]
        )
        engine.close()
