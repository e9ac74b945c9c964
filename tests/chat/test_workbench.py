"""The workbench without a UI: the app's orchestration driven with asyncio alone, against the
fake loopback server, a real workspace and the real SQLite index (no Pilot, no Textual)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from support.chat_support import SummaryResponder, add_messages
from support.fakeopenai import FakeOpenAI, Responder

from tui.chat.chat import ChatEngine
from tui.chat.events import (
    ChatEvent,
    SessionOpened,
    TextDelta,
    ToolCallFinished,
    TriggerEvent,
    TurnDone,
    TurnEnded,
    TurnError,
    TurnOpened,
    WorkbenchEvent,
)
from tui.chat.workbench import ConfigOutcome, IndexOutcome, TurnAlreadyRunning, Workbench
from tui.engine.engine import MemoryChange

T = TypeVar("T")


@pytest.fixture
def responder() -> Responder | None:
    return SummaryResponder(facts=["Keeps bees on the roof"])


@pytest.fixture
def workbench(engine: ChatEngine, tmp_path: Path) -> Workbench:
    return Workbench(engine, config_file=tmp_path / "config.toml")


def test_switching_opens_a_session_and_flushes_the_one_left(
    workbench: Workbench, engine: ChatEngine
) -> None:
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)

    async def scenario() -> None:
        first = await workbench.new_session()
        assert workbench.open(first.id) is None
        add_messages(engine.sessions, first.id, 4)
        second = await workbench.new_session()
        left = workbench.open(second.id)
        assert left == first.id and workbench.active_session == second.id
        await workbench.flush_left(second.id, left)

    asyncio.run(scenario())
    done = [e for e in heard if isinstance(e, TriggerEvent) and e.session_id is not None]
    assert [(e.trigger, e.outcome.status) for e in done] == [("session_switch", "flushed")]
    log = next((engine.memory.workspace.root / "memory").glob("*.md")).read_text()
    assert "Summary number 1" in log
    # the triggers follow the workbench's open session
    assert engine.triggers.active_session_id == workbench.active_session


def test_rename_delete_and_the_last_session(workbench: Workbench, engine: ChatEngine) -> None:
    async def scenario() -> None:
        older = await workbench.new_session()
        newer = await workbench.new_session()
        assert await workbench.last_session() in (older.id, newer.id)
        renamed = await workbench.rename(older.id, "Bee notes")
        assert renamed.title == "Bee notes"
        workbench.open(newer.id)
        trash, event = await workbench.delete(newer.id)
        assert trash.exists() and ".trash" in trash.parts
        assert event.trigger == "session_delete"
        assert workbench.active_session is None  # the open session was the one deleted
        assert await workbench.last_session() == older.id

    asyncio.run(scenario())


def test_reindex_and_the_start_up_sync_report_or_say_what_failed(
    workbench: Workbench, engine: ChatEngine
) -> None:
    (engine.memory.workspace.root / "MEMORY.md").write_text("# Memory\n\n- Keeps bees\n")
    workbench.without_model()

    async def scenario() -> list[IndexOutcome]:
        outcomes = [o async for o in workbench.prepare_index()]
        outcomes.append(await workbench.reindex())
        return outcomes

    start, reindex = asyncio.run(scenario())
    assert (start.reason, start.error) == ("start", None) and start.report is not None
    assert (reindex.reason, reindex.error) == ("reindex", None)
    stats = asyncio.run(workbench.index_stats())
    assert stats["chunks"] == 1


def test_a_bad_config_file_is_one_error_line_and_changes_nothing(
    workbench: Workbench, engine: ChatEngine, tmp_path: Path
) -> None:
    before = engine.config
    (tmp_path / "config.toml").write_text("[memory]\ninjection_budget = 'lots'\n")
    outcome = asyncio.run(workbench.reload_config())
    assert isinstance(outcome, IndexOutcome) and outcome.reason == "config reload"
    assert outcome.error and "\n" not in outcome.error and "injection_budget" in outcome.error
    assert engine.config is before

    (tmp_path / "config.toml").write_text("[memory]\ninjection_budget = 1500\n")
    applied = asyncio.run(workbench.reload_config())
    assert isinstance(applied, ConfigOutcome) and applied.config.injection_budget == 1500
    assert workbench.config.injection_budget == 1500


def test_the_manual_flush_and_the_quit_flush_log_the_open_session_once(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    async def scenario() -> None:
        session = await workbench.new_session()
        workbench.open(session.id)
        add_messages(engine.sessions, session.id, 4)
        await workbench.flush()

    asyncio.run(scenario())
    events = workbench.quit_flush()  # nothing new since the manual flush
    assert all(e.outcome.status != "flushed" for e in events)
    log = next((engine.memory.workspace.root / "memory").glob("*.md")).read_text()
    assert log.count("Summary number") == 1
    assert (engine.memory.workspace.root / "MEMORY.md").read_text().count("Keeps bees on") == 1


def test_named_sessions_are_flushed_each_once_as_the_cli_asks(
    workbench: Workbench, engine: ChatEngine
) -> None:
    async def scenario() -> tuple[list[str], list[TriggerEvent], list[str]]:
        ids = [(await workbench.new_session()).id for _ in range(2)]
        for session_id in ids:
            add_messages(engine.sessions, session_id, 4)
        pending = await workbench.sessions_to_flush()
        events = await workbench.flush(pending, reason="memdeck flush")
        return pending, events, await workbench.sessions_to_flush()

    pending, events, after = asyncio.run(scenario())
    assert len(pending) == 2
    assert sorted(e.session_id or "" for e in events) == sorted(pending)
    assert {(e.trigger, e.outcome.status) for e in events} == {("manual", "flushed")}
    assert after == []


def test_a_turn_runs_in_the_workbench_and_comes_out_on_its_one_stream(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    """One one-tool turn: the session opened, the turn's events between TurnOpened and
    TurnEnded, and the memory change the tool made (with its origin), all on one stream."""
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Keeps bees on the roof"}),
        FakeOpenAI.text("Noted."),
    )
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)

    async def scenario() -> str:
        session = await workbench.new_session()
        workbench.open(session.id)
        return await workbench.run_turn("remember that I keep bees")

    assert asyncio.run(scenario()) == "completed"
    session_id = workbench.active_session
    assert session_id is not None
    kinds = [type(event) for event in heard]
    assert heard[0] == SessionOpened(session_id, None)
    opened, ended = kinds.index(TurnOpened), kinds.index(TurnEnded)
    assert heard[opened] == TurnOpened(session_id, "remember that I keep bees")
    assert heard[ended] == TurnEnded(session_id, "remember that I keep bees", "completed")
    turn = heard[opened + 1 : ended]
    assert isinstance(turn[-1], TurnDone) and turn[-1].text == "Noted."
    finished = [e for e in turn if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.ok) for e in finished] == [("save_memory", True)]
    changes = [e for e in turn if isinstance(e, MemoryChange)]
    assert changes and changes[0].paths == ("MEMORY.md",) and changes[0].origin
    assert all(isinstance(e, ChatEvent | MemoryChange) for e in turn)
    assert not workbench.turn_running


def test_a_one_tool_turn_crosses_to_a_thread_five_times(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message stored with its measure, the request prepared (injection and its record),
    the answer, the tool with its two records, the final answer: one hop each (it was 11)."""
    server.enqueue(
        FakeOpenAI.text("Hello."),
        FakeOpenAI.tool_call("save_memory", {"content": "Keeps bees on the roof"}),
        FakeOpenAI.text("Noted."),
    )
    hops: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        hops.append(getattr(func, "__name__", type(func).__name__))
        return await to_thread(func, *args, **kwargs)

    async def scenario() -> None:
        workbench.open((await workbench.new_session()).id)
        await workbench.run_turn("hello")  # the first request also makes the HTTP client
        monkeypatch.setattr(asyncio, "to_thread", counted)
        await workbench.run_turn("remember that I keep bees")

    asyncio.run(scenario())
    assert hops == ["_admit", "_prepare_request", "append_message", "run_here", "append_message"]


def test_a_stopped_turn_ends_stopped_and_one_turn_runs_at_a_time(
    workbench: Workbench, engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text([f"word{n} " for n in range(200)], chunk_delay=0.02))
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)

    async def scenario() -> None:
        workbench.open((await workbench.new_session()).id)
        turn = asyncio.ensure_future(workbench.run_turn("tell me a long story"))
        while not any(isinstance(e, TextDelta) for e in heard):
            await asyncio.sleep(0.01)
        assert workbench.turn_running
        with pytest.raises(TurnAlreadyRunning):
            await workbench.run_turn("and another")
        workbench.stop_turn()
        with pytest.raises(asyncio.CancelledError):
            await turn

    asyncio.run(scenario())
    ended = [e for e in heard if isinstance(e, TurnEnded)]
    assert [e.ending for e in ended] == ["stopped"]
    assert not workbench.turn_running
    # what streamed before the stop is in the transcript
    session_id = workbench.active_session or ""
    answer = [m for m in engine.sessions.load(session_id).messages if m.role == "assistant"]
    assert answer and answer[-1].interrupted and answer[-1].content.startswith("word0")


def test_a_turn_needs_an_open_session_and_a_gone_one_is_said_on_the_stream(
    workbench: Workbench, engine: ChatEngine
) -> None:
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)
    with pytest.raises(ValueError):
        asyncio.run(workbench.run_turn("hello"))
    workbench.open("no-such-session")
    assert asyncio.run(workbench.run_turn("hello")) == "failed"
    errors = [e for e in heard if isinstance(e, TurnError)]
    assert [e.kind for e in errors] == ["session"] and "no-such-session" in errors[0].message
    assert isinstance(heard[-1], TurnEnded) and heard[-1].ending == "failed"


def test_the_open_session_is_published_when_it_opens_or_closes(workbench: Workbench) -> None:
    heard: list[WorkbenchEvent] = []
    workbench.subscribe(heard.append)

    async def scenario() -> tuple[str, str]:
        first, second = (await workbench.new_session()).id, (await workbench.new_session()).id
        workbench.open(first)
        workbench.open(second)
        await workbench.delete(second)
        workbench.open(first)
        await workbench.end_session()
        return first, second

    first, second = asyncio.run(scenario())
    opened = [e for e in heard if isinstance(e, SessionOpened)]
    assert opened == [
        SessionOpened(first, None),
        SessionOpened(second, first),
        SessionOpened(None, second),
        SessionOpened(first, None),
        SessionOpened(None, first),
    ]


def test_index_outcomes_are_published(workbench: Workbench) -> None:
    heard: list[WorkbenchEvent] = []
    remove = workbench.subscribe(heard.append)
    workbench.without_model()

    async def scenario() -> None:
        async for _outcome in workbench.prepare_index():
            pass
        await workbench.reindex()

    asyncio.run(scenario())
    assert [e.reason for e in heard if isinstance(e, IndexOutcome)] == ["start", "reindex"]
    remove()
    asyncio.run(workbench.reindex())
    assert [e.reason for e in heard if isinstance(e, IndexOutcome)] == ["start", "reindex"]


def test_the_terminal_focus_reaches_the_background_trigger_through_the_workbench(
    workbench: Workbench, engine: ChatEngine
) -> None:
    session = asyncio.run(workbench.new_session())
    workbench.open(session.id)
    add_messages(engine.sessions, session.id, 4)
    later = engine.clock() + engine.triggers.blur_debounce + timedelta(seconds=1)
    workbench.focus_lost()
    workbench.focus_gained()  # back in time: no background flush
    assert engine.triggers.tick(now=later) == []
    workbench.focus_lost()
    events = engine.triggers.tick(now=later)
    assert [(e.trigger, e.outcome.status) for e in events] == [("background", "flushed")]


def test_the_workbench_imports_no_textual() -> None:
    code = (
        "import sys, tui.chat.workbench; "
        "print([m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


QUIT_DURING_START_UP = """
import asyncio, sys
from pathlib import Path

from tui.chat.chat import ChatEngine
from tui.chat.config import load_config
from tui.chat.workbench import Workbench

root = Path(sys.argv[1])
config_file = root.parent / "config.toml"
engine = ChatEngine.open(load_config(config_file, env={}, overrides={}), workspace=root)
workbench = Workbench(engine, config_file=config_file)


async def main() -> None:
    index = workbench.prepare_index()
    print((await anext(index)).reason, flush=True)
    waiting = asyncio.ensure_future(anext(index))  # waits for a model load never started
    await asyncio.sleep(0.2)
    waiting.cancel()


asyncio.run(main())
print("exited", flush=True)
"""


def test_quitting_before_the_model_load_starts_lets_the_loop_exit(tmp_path: Path) -> None:
    """The app quits while the start-up sync waits for a model load that never began: nothing
    may be left waiting in the loop's executor, or ``asyncio.run`` never returns."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n\n- Keeps bees\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", QUIT_DURING_START_UP, str(root)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,  # a hang, not a speed limit: the script takes about a second
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["start", "exited"]
