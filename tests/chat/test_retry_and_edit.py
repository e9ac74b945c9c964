"""Retry, edit-and-resend and the model switch through the workbench (issue 32, items 2, 5 and
22): what the transcript keeps, what the model is sent, what a flush logs. The fake loopback
server, a real workspace and index; no UI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import SummaryResponder, make_config, make_engine
from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.chat import ChatEngine
from tui.chat.compaction import SILENT_FLUSH_PROMPT
from tui.chat.events import TurnError, TurnStarted, WorkbenchEvent
from tui.chat.sessions import ErrorRecord, Superseded
from tui.chat.workbench import Workbench


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=SummaryResponder(), models=("fake-model", "other-model")) as fake:
        yield fake


@pytest.fixture
def workbench(engine: ChatEngine, tmp_path: Path) -> Workbench:
    bench = Workbench(engine, config_file=tmp_path / "config.toml")
    bench.open(engine.sessions.create().id)
    return bench


def user_messages(server: FakeOpenAI) -> list[str]:
    """The user messages of the last chat request (the conversation the model saw)."""
    return [str(m["content"]) for m in server.chat_requests[-1].messages if m["role"] == "user"]


def test_a_retry_after_an_error_sends_the_message_once_and_replaces_the_error(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    session = workbench.active_session or ""
    server.enqueue(FakeOpenAI.error(503, "overloaded"))
    assert asyncio.run(workbench.run_turn("what is my dog called?")) == "completed"
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)
    first = engine.sessions.load(session).messages[0]

    server.enqueue("Max.")
    asyncio.run(workbench.retry())

    # the model saw the question once, not twice in a row
    assert user_messages(server) == ["what is my dog called?"]
    started = next(e for e in heard if isinstance(e, TurnStarted))
    assert started.replaces == first.id
    transcript = engine.sessions.load(session)
    # the failed attempt stays in the file, superseded; what is shown has no error
    assert [(m.content, m.superseded) for m in transcript.messages] == [
        ("what is my dog called?", True),
        ("what is my dog called?", False),
        ("Max.", False),
    ]
    assert not any(isinstance(item, ErrorRecord) for item in transcript.timeline)
    assert any(r.get("type") == "error" for r in transcript.records)
    (line,) = [item for item in transcript.timeline if isinstance(item, Superseded)]
    assert (line.reason, line.replaced) == ("retry", 1)
    assert engine.sessions.info(session).message_count == 2


def test_an_edited_message_replaces_everything_after_it_and_a_flush_logs_only_the_new_turn(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    session = workbench.active_session or ""
    server.enqueue("Tea, noted.", "Lisbon, noted.")
    asyncio.run(workbench.run_turn("I drink coffee"))
    asyncio.run(workbench.run_turn("I am going to Lisbon"))
    first = engine.sessions.load(session).messages[0]

    server.enqueue("Green tea, noted.")
    asyncio.run(workbench.resend(first.id, "I drink green tea, never coffee"))

    assert user_messages(server) == ["I drink green tea, never coffee"]
    transcript = engine.sessions.load(session)
    live = [m.content for m in transcript.messages if m.is_conversation]
    assert live == ["I drink green tea, never coffee", "Green tea, noted."]
    (line,) = [item for item in transcript.timeline if isinstance(item, Superseded)]
    assert (line.reason, line.replaced, line.from_id) == ("edit", 4, first.id)
    assert transcript.display_title == "I drink green tea, never coffee"
    # the flush summarises the conversation as it now is, nothing superseded
    events = asyncio.run(workbench.flush())
    assert events[0].outcome.status == "flushed"
    summary_request = json.dumps(server.requests[-1].body)
    assert "green tea" in summary_request and "Lisbon" not in summary_request


def test_a_message_no_longer_in_the_conversation_cannot_be_replaced(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    session = workbench.active_session or ""
    server.enqueue("one", "two")
    asyncio.run(workbench.run_turn("first"))
    old = engine.sessions.load(session).messages[0]
    asyncio.run(workbench.retry())
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)
    lines = len(engine.sessions.load(session).records)

    assert asyncio.run(workbench.resend(old.id, "again")) == "failed"

    errors = [e for e in heard if isinstance(e, TurnError)]
    assert errors and errors[0].kind == "session" and "no longer" in errors[0].message
    assert len(engine.sessions.load(session).records) == lines  # nothing written


def test_the_model_switch_lists_the_servers_models_and_applies_to_the_next_turn(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    session = workbench.active_session or ""
    choices = asyncio.run(workbench.models())
    assert choices.current == "fake-model" and choices.problem is None
    assert choices.configured == ("fake-model",)
    assert choices.served == ("fake-model", "other-model")

    workbench.use_model("other-model")
    asyncio.run(workbench.run_turn("hello"))

    assert server.chat_requests[-1].model == "other-model"
    assert workbench.model == "other-model"
    assert engine.sessions.load(session).model == "other-model"  # the model_change line


def test_the_models_of_an_unreachable_server_say_why(tmp_path: Path) -> None:
    with FakeOpenAI() as down:
        url = down.base_url
    engine = make_engine(tmp_path, make_config(tmp_path, env={"OPENAI_BASE_URL": url}))
    try:
        choices = asyncio.run(Workbench(engine, config_file=tmp_path / "c.toml").models())
    finally:
        engine.close()
    assert choices.served == () and choices.problem and "could not connect" in choices.problem


class FailingFlushTurn:
    """The silent memory-flush turn before a compaction fails; the answer itself works."""

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        messages = body["messages"]
        system = str(messages[0].get("content")) if messages else ""
        if "You compress conversations" in system:
            return FakeOpenAI.text("- the user talked about words")
        if "Daily Summary" in system or "memory extraction" in system:
            return FakeOpenAI.text("## Daily Summary\n- words\n\n## Long-term Facts\nNone\n")
        if any(SILENT_FLUSH_PROMPT in str(m.get("content")) for m in messages):
            return FakeOpenAI.error(502, "bad gateway")
        return None


async def test_a_failed_memory_flush_turn_is_recorded_as_silent(tmp_path: Path) -> None:
    """Item 22: the silent turn's error was recorded as the turn's own, so after a restart the
    answer showed under an error line the turn never showed."""
    long = " ".join(f"word{n}" for n in range(120))
    with FakeOpenAI(responder=FailingFlushTurn()) as server:
        config = make_config(
            tmp_path, server, context_window=2000, compaction_reserve=0, compaction_keep_messages=2
        )
        engine = make_engine(tmp_path, config)
        try:
            session = engine.sessions.create().id
            for n in range(3):
                engine.sessions.append_message(session, "user", f"q{n} {long}")
                engine.sessions.append_message(session, "assistant", f"a{n} {long}")
            events = [e async for e in engine.run_turn(session, "still there?")]
            transcript = engine.sessions.load(session)
        finally:
            engine.close()
    assert not any(isinstance(e, TurnError) for e in events)  # the turn itself was answered
    errors = [item for item in transcript.timeline if isinstance(item, ErrorRecord)]
    assert errors and all(error.silent for error in errors)
    assert transcript.messages[-1].content == "still there?"  # the echo answered
