"""The fake OpenAI server works with the real ``openai`` client (sync and async)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)
from support.fakeopenai import FakeOpenAI

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi there"}]
TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Store a fact.",
            "parameters": {"type": "object", "properties": {"fact": {"type": "string"}}},
        },
    }
]


def client(server: FakeOpenAI, **kwargs: Any) -> openai.OpenAI:
    """A real sync client for ``server`` without retries."""
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", **kwargs)


def aclient(server: FakeOpenAI, **kwargs: Any) -> openai.AsyncOpenAI:
    """A real async client for ``server`` without retries."""
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", **kwargs)


def collect_tool_calls(chunks: list[Any]) -> dict[int, dict[str, str]]:
    """Reassemble streamed tool-call deltas by index, like an app would."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for tc in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += tc.id or ""
            if tc.function is not None:
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
    return calls


def fake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fakeopenai")]


def test_stream_text_reassembles(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.text("hello big wide world"))
    with client(fake_openai) as c:
        stream = c.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [ch.choices[0].delta.content for ch in chunks if ch.choices]
    assert len([p for p in pieces if p]) >= 4
    assert "".join(p or "" for p in pieces) == "hello big wide world"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


def test_stream_without_usage_and_exact_pieces(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.text(["hel", "lo"]))
    with client(fake_openai) as c:
        chunks = list(c.chat.completions.create(model="m", messages=USER, stream=True))
    assert [ch.choices[0].delta.content for ch in chunks] == ["", "hel", "lo", None]
    assert all(ch.usage is None for ch in chunks)


def test_non_streamed_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.text("hello world"))
    with client(fake_openai) as c:
        r = c.chat.completions.create(model="my-model", messages=USER)
    assert r.object == "chat.completion"
    assert r.model == "my-model"
    assert r.choices[0].message.content == "hello world"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None and r.usage.total_tokens > 0


def test_stream_two_tool_calls_reassemble(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        FakeOpenAI.tool_calls(
            FakeOpenAI.tool_call(
                "remember", {"fact": "likes tea", "weight": 0.5}, call_id="call_1"
            ),
            ("forget", '{"id": 42}'),
        )
    )
    with client(fake_openai) as c:
        chunks = list(c.chat.completions.create(model="m", messages=USER, tools=TOOLS, stream=True))
    calls = collect_tool_calls(chunks)
    assert calls[0] == {
        "id": "call_1",
        "name": "remember",
        "arguments": json.dumps({"fact": "likes tea", "weight": 0.5}),
    }
    assert calls[1]["name"] == "forget" and json.loads(calls[1]["arguments"]) == {"id": 42}
    assert calls[1]["id"].startswith("call_")
    # Arguments arrive in several fragments after a header delta carrying id + name.
    fragments = [
        tc for ch in chunks for tc in ch.choices[0].delta.tool_calls or [] if tc.index == 0
    ]
    header = fragments[0]
    assert header.id == "call_1" and header.function is not None
    assert header.function.arguments == ""
    assert len(fragments) > 3 and all(f.id is None for f in fragments[1:])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_non_streamed_tool_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.tool_call("remember", {"fact": "x"}, content="Noting that."))
    with client(fake_openai) as c:
        r = c.chat.completions.create(model="m", messages=USER, tools=TOOLS)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Noting that."
    assert msg.tool_calls is not None and len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "remember"
    assert json.loads(call.function.arguments) == {"fact": "x"}


@pytest.mark.parametrize(
    ("status", "exc_class"),
    [
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_statuses(
    fake_openai: FakeOpenAI, status: int, exc_class: type[Exception], stream: bool
) -> None:
    fake_openai.enqueue(FakeOpenAI.error(status, "scripted failure"))
    with client(fake_openai) as c, pytest.raises(exc_class) as info:
        c.chat.completions.create(model="m", messages=USER, stream=stream)
    assert "scripted failure" in str(info.value)
    if status == 429:
        assert isinstance(info.value, openai.APIStatusError)
        assert info.value.response.headers["retry-after"] == "1"


def test_rate_limit_retry_after_is_honoured(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.error(429, retry_after=0.05), FakeOpenAI.text("ok"))
    with client(fake_openai, max_retries=1) as c:
        r = c.chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.content == "ok"
    assert len(fake_openai.chat_requests) == 2


def test_hang_times_out_and_stops_fast() -> None:
    server = FakeOpenAI(FakeOpenAI.hang(30)).start()
    try:
        with client(server, timeout=0.3) as c, pytest.raises(openai.APITimeoutError):
            c.chat.completions.create(model="m", messages=USER, stream=True)
    finally:
        started = time.monotonic()
        server.stop()
    assert time.monotonic() - started < 1.5
    assert fake_threads() == []


def test_malformed_stream_truncated_raises(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.malformed_stream())
    got: list[str] = []
    with client(fake_openai) as c, pytest.raises(openai.APIConnectionError):
        for ch in c.chat.completions.create(model="m", messages=USER, stream=True):
            got.append(ch.choices[0].delta.content or "")
    assert "".join(got) == "partial "


def test_malformed_stream_bad_json_raises(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.malformed_stream("bad_json"))
    with client(fake_openai) as c, pytest.raises(ValueError):
        list(c.chat.completions.create(model="m", messages=USER, stream=True))


def test_malformed_non_streamed_raises(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.malformed_stream())
    with client(fake_openai) as c, pytest.raises(openai.APIConnectionError):
        c.chat.completions.create(model="m", messages=USER)


def test_requests_recorded(fake_openai: FakeOpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are memdeck."},
        {"role": "user", "content": "remember tea"},
    ]
    with client(fake_openai) as c:
        c.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        c.chat.completions.create(
            model="m", messages=USER, extra_headers={"Authorization": openai.Omit()}
        )
    first, second = fake_openai.requests
    assert first.method == "POST" and first.path == "/v1/chat/completions"
    assert first.api_key == "sk-test" and first.authorization == "Bearer sk-test"
    assert first.header("Content-Type") == "application/json"
    assert first.system_prompt == "You are memdeck."
    assert first.last_user_message == "remember tea"
    assert first.messages == messages and first.body["messages"] == messages
    assert first.tool_names == ["remember"] and first.tools == TOOLS
    assert first.model == "m" and not first.stream
    assert second.api_key is None and second.authorization is None and second.tools == []


def test_default_echo_and_callables(fake_openai: FakeOpenAI) -> None:
    def summariser(body: dict[str, Any]) -> str | None:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        return "SUMMARY" if "Daily Summary" in system else None

    fake_openai.responder = summariser
    fake_openai.enqueue(lambda body: FakeOpenAI.text(f"{len(body['messages'])} messages"))
    summary_req: list[ChatCompletionMessageParam] = [{"role": "system", "content": "Write the Daily Summary."}, *USER]
    with client(fake_openai) as c:
        ask = c.chat.completions.create
        assert ask(model="m", messages=summary_req).choices[0].message.content == "SUMMARY"
        assert ask(model="m", messages=USER).choices[0].message.content == "1 messages"
        assert fake_openai.pending == 0
        assert ask(model="m", messages=USER).choices[0].message.content == "hi there"
        assert ask(model="m", messages=summary_req).choices[0].message.content == "SUMMARY"
        fake_openai.default = FakeOpenAI.error(500, "script exhausted")
        with pytest.raises(openai.InternalServerError):
            ask(model="m", messages=USER)
    assert fake_openai.errors == []


def test_responder_exception_becomes_500(fake_openai: FakeOpenAI) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    fake_openai.enqueue(broken)
    with client(fake_openai) as c, pytest.raises(openai.InternalServerError, match="boom"):
        c.chat.completions.create(model="m", messages=USER)
    assert [type(e) for e in fake_openai.errors] == [RuntimeError]


def test_models_and_base_url_without_v1() -> None:
    with FakeOpenAI(FakeOpenAI.text("plain"), models=["alpha", "beta"]) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with openai.OpenAI(base_url=server.url, api_key="k", max_retries=0) as c:
            assert [m.id for m in c.models.list()] == ["alpha", "beta"]
            r = c.chat.completions.create(model="alpha", messages=USER)
        assert r.choices[0].message.content == "plain"
        assert [r.path for r in server.requests] == ["/models", "/chat/completions"]
    assert fake_threads() == []


def test_require_api_key() -> None:
    with FakeOpenAI(require_api_key="right") as server:
        wrong = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with wrong as c, pytest.raises(openai.AuthenticationError):
            c.chat.completions.create(model="m", messages=USER)
        with openai.OpenAI(base_url=server.base_url, api_key="right", max_retries=0) as c:
            assert c.chat.completions.create(model="m", messages=USER).choices[0].message.content


def test_concurrent_requests_are_thread_safe(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(*(FakeOpenAI.text(f"r{i}") for i in range(8)))
    results: list[str] = []

    def worker() -> None:
        with client(fake_openai) as c:
            for _ in range(2):
                stream = c.chat.completions.create(model="m", messages=USER, stream=True)
                results.append("".join(ch.choices[0].delta.content or "" for ch in stream))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(results) == sorted(f"r{i}" for i in range(8))
    assert len(fake_openai.wait_for_requests(8, timeout=1)) == 8


async def test_async_stream_text_and_tool_calls(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        FakeOpenAI.text("async hello world"),
        FakeOpenAI.tool_calls(("a", {"x": "1234567890"}), ("b", {"y": [1, 2, 3]})),
    )
    async with aclient(fake_openai) as c:
        stream = await c.chat.completions.create(model="m", messages=USER, stream=True)
        text = "".join([ch.choices[0].delta.content or "" async for ch in stream])
        stream = await c.chat.completions.create(model="m", messages=USER, stream=True)
        chunks = [ch async for ch in stream]
    assert text == "async hello world"
    calls = collect_tool_calls(chunks)
    assert [calls[0]["name"], calls[1]["name"]] == ["a", "b"]
    assert json.loads(calls[0]["arguments"]) == {"x": "1234567890"}
    assert json.loads(calls[1]["arguments"]) == {"y": [1, 2, 3]}


async def test_async_non_streamed_and_errors(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        FakeOpenAI.text("async plain"),
        FakeOpenAI.error(401),
        FakeOpenAI.error(429),
        FakeOpenAI.error(503),
    )
    async with aclient(fake_openai) as c:
        r = await c.chat.completions.create(model="m", messages=USER)
        assert r.choices[0].message.content == "async plain"
        for exc_class in (openai.AuthenticationError, openai.RateLimitError):
            with pytest.raises(exc_class):
                await c.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.InternalServerError):
            await c.chat.completions.create(model="m", messages=USER, stream=True)


async def test_async_hang_and_malformed(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.hang(30), FakeOpenAI.malformed_stream())
    async with aclient(fake_openai, timeout=0.3) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=USER)
        stream = await c.chat.completions.create(model="m", messages=USER, stream=True)
        with pytest.raises(openai.APIConnectionError):
            async for _ in stream:
                pass


def test_parse_reply_script_forms() -> None:
    assert FakeOpenAI.parse_reply("hi") == FakeOpenAI.text("hi")
    call = FakeOpenAI.parse_reply({"tool_calls": [{"name": "f", "arguments": {"a": 1}, "id": "c"}]})
    assert call.tool_calls[0].id == "c" and call.tool_calls[0].arguments == '{"a": 1}'
    err = FakeOpenAI.parse_reply({"error": 429, "message": "slow", "retry_after": 2})
    assert (err.status, err.message, dict(err.headers)) == (429, "slow", {"Retry-After": "2"})
    assert FakeOpenAI.parse_reply({"hang": 1.5}).seconds == 1.5
    assert FakeOpenAI.parse_reply({"malformed": True}).how == "truncated"
    with pytest.raises(ValueError):
        FakeOpenAI.parse_reply({"nonsense": 1})


def test_main_runs_as_subprocess(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    record = tmp_path / "requests.jsonl"
    script.write_text(
        json.dumps(
            {
                "models": ["scripted"],
                "replies": ["first answer", {"tool_calls": [{"name": "f", "arguments": {}}]}],
                "rules": [{"system_contains": "Daily Summary", "reply": "the summary"}],
            }
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve().parents[1] / "support" / "fakeopenai.py"),
            "--port",
            "0",
        ]
        + ["--script", str(script), "--record", str(record)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=5) as c:
            assert [m.id for m in c.models.list()] == ["scripted"]
            summary: list[ChatCompletionMessageParam] = [
                {"role": "system", "content": "Daily Summary"},
                *USER,
            ]
            ask = c.chat.completions.create
            assert ask(model="m", messages=summary).choices[0].message.content == "the summary"
            stream = ask(model="m", messages=USER, stream=True)
            assert "".join(ch.choices[0].delta.content or "" for ch in stream) == "first answer"
            tool = ask(model="m", messages=USER).choices[0].message.tool_calls
            assert tool is not None and isinstance(tool[0], ChatCompletionMessageFunctionToolCall)
            assert tool[0].function.name == "f"
            # Replies can be added to a running process through the control endpoint.
            control = urllib.request.Request(
                base_url.removesuffix("/v1") + "/_fake/replies",
                data=json.dumps([{"error": 500}]).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(control, timeout=5) as resp:
                assert json.load(resp) == {"pending": 1}
            with pytest.raises(openai.InternalServerError):
                ask(model="m", messages=USER)
    finally:
        proc.terminate()
        returncode = proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert returncode == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["path"] for line in lines] == ["/v1/models"] + ["/v1/chat/completions"] * 4
    assert lines[1]["headers"]["authorization"] == "Bearer k"
    assert lines[1]["body"]["messages"][0]["content"] == "Daily Summary"
