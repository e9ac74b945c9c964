"""The workbench without a UI: the app's orchestration driven with asyncio alone, against the
fake loopback server, a real workspace and the real SQLite index (no Pilot, no Textual)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from support.chat_support import SummaryResponder, add_messages
from support.fakeopenai import FakeOpenAI, Responder

from tui.chat.chat import ChatEngine
from tui.chat.events import TriggerEvent, TriggerListenerEvent
from tui.chat.workbench import ConfigOutcome, IndexOutcome, Workbench


@pytest.fixture
def responder() -> Responder | None:
    return SummaryResponder(facts=["Keeps bees on the roof"])


@pytest.fixture
def workbench(engine: ChatEngine, tmp_path: Path) -> Workbench:
    return Workbench(engine, config_file=tmp_path / "config.toml")


def test_switching_opens_a_session_and_flushes_the_one_left(
    workbench: Workbench, engine: ChatEngine
) -> None:
    heard: list[TriggerListenerEvent] = []
    workbench.add_trigger_listener(heard.append)

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
