"""Daily-log flush: summary and facts written and indexed, exactly once under crashes and races."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import (
    SummaryResponder,
    add_messages,
    is_summary_request,
    make_config,
    make_engine,
    memdeck_env,
    run_memdeck,
    start_memdeck,
)
from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.chat import ChatEngine
from tui.chat.events import TriggerEvent, TriggerName
from tui.chat.flush import CRASH_POINTS, parse_summary
from tui.chat.sessions import FlushDone, PreparedFlush, SessionStore
from tui.engine.embeddings import Embedder
from tui.engine.engine import FLUSH, MemoryChange, MemoryEngine
from tui.engine.workspace import Workspace


@pytest.fixture
def responder() -> SummaryResponder:
    return SummaryResponder()


def flush_lines(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    return [r for r in store.load(session_id).records if r.get("type") == "flush"]


def daily_text(workspace_root: Path) -> str:
    return "".join(p.read_text() for p in sorted((workspace_root / "memory").glob("*.md")))


def test_parse_summary() -> None:
    summary, facts = parse_summary(
        "## Daily Summary\n- Planned a trip\n## Notes\n\n## Long-term Facts\n- Likes trains\n* Dog: Max\nNone\n"
    )
    assert summary == "- Planned a trip\n### Notes" and facts == ["Likes trains", "Dog: Max"]
    assert parse_summary("## Daily Summary\n- x\n\n## Long-term Facts\nNone.") == ("- x", [])
    assert parse_summary("just some text") == ("just some text", [])


def test_flush_writes_summary_facts_indexes_and_moves_pointer(
    engine: ChatEngine, server: FakeOpenAI, responder: SummaryResponder
) -> None:
    session = engine.sessions.create("trip planning").id
    ids = add_messages(engine.sessions, session, 4)
    outcome = engine.flusher.flush_session(session, trigger="manual")
    assert outcome.status == "flushed" and outcome.messages == 4
    assert (outcome.first, outcome.last, outcome.facts) == (1, 4, 1)

    request = server.chat_requests[-1]
    assert is_summary_request(request.body) and not request.stream
    assert "message 3 about topic3" in request.messages[-1]["content"]

    root = engine.memory.workspace.root
    assert outcome.daily_log is not None
    daily = (root / outcome.daily_log).read_text()
    heading_line = re.search(r"^## .*$", daily, re.M)
    assert heading_line is not None
    heading = heading_line.group(0)
    assert "trip planning" in heading and "4 messages" in heading
    assert f"flush={outcome.flush_id}" in heading
    assert "- Summary number 1 of the chat." in daily
    memory_md = engine.memory.workspace.memory_file.read_text()
    assert re.search(r"- Summary fact number 1 <!-- mem id=\w+ conf=medium src=auto", memory_md)

    hits = engine.memory.search("Summary number", min_score=0.0).results
    assert {h.path for h in hits} == {outcome.daily_log, "MEMORY.md"}
    assert engine.sessions.load(session).last_logged_message_id == ids[-1]

    again = engine.flusher.flush_session(session)
    assert again.status == "nothing_new" and responder.count == 1
    more = add_messages(engine.sessions, session, 2, start=5)
    third = engine.flusher.flush_session(session)
    assert (third.status, third.first, third.last) == ("flushed", 5, 6)
    assert engine.sessions.load(session).last_logged_message_id == more[-1]
    assert responder.count == 2


def test_a_flush_publishes_one_memory_change_for_its_daily_log_and_memory_md(
    engine: ChatEngine, server: FakeOpenAI, responder: SummaryResponder
) -> None:
    session = engine.sessions.create("trip planning").id
    add_messages(engine.sessions, session, 4)
    heard: list[MemoryChange] = []
    engine.memory.on_change(heard.append)
    outcome = engine.flusher.flush_session(session, trigger="manual")
    assert outcome.status == "flushed" and outcome.daily_log is not None
    assert [(change.paths, change.origin) for change in heard] == [
        ((outcome.daily_log, "MEMORY.md"), FLUSH)
    ]
    assert heard[0].report.files_changed == 2 and heard[0].report.chunks_added >= 2
    # a write outside a flush is still heard on its own
    engine.memory.append_daily("- a note\n", origin="test")
    assert len(heard) == 2 and heard[1].origin == "test"


def test_without_a_model_the_conversation_is_logged_as_an_extract(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path))
    session = engine.sessions.create().id
    long_answer = "word " * 200
    engine.sessions.append_message(session, "user", "where should   I walk\nthe dog?")
    engine.sessions.append_message(session, "assistant", long_answer)
    outcome = engine.flusher.flush_session(session)
    assert (outcome.status, outcome.messages, outcome.facts) == ("flushed", 2, 0)
    assert outcome.daily_log is not None
    daily = (engine.memory.workspace.root / outcome.daily_log).read_text()
    heading_line = re.search(r"^## .*$", daily, re.M)
    assert heading_line is not None
    heading = heading_line.group(0)
    assert "2 messages · not summarised (no model)" in heading
    assert "- You: where should I walk the dog?" in daily
    assert "- Assistant: word word" in daily and "…" in daily and long_answer not in daily
    assert engine.sessions.load(session).last_logged_message_id is not None
    # exactly once: nothing new, nothing appended again
    assert engine.flusher.flush_session(session).status == "nothing_new"
    assert (engine.memory.workspace.root / outcome.daily_log).read_text() == daily
    assert engine.memory.search("walk the dog", min_score=0.0).results
    engine.close()


def test_endpoint_down_is_skipped_then_retried(tmp_path: Path) -> None:
    with FakeOpenAI(FakeOpenAI.error(503), responder=None) as server:
        responder = SummaryResponder()
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        session = engine.sessions.create().id
        add_messages(engine.sessions, session, 2)
        down = engine.flusher.flush_session(session)
        assert down.status == "skipped" and "server" in down.detail
        assert engine.sessions.load(session).last_logged_message_id is None
        assert not (engine.memory.workspace.memory_dir).exists()
        server.responder = responder
        retried = engine.flusher.flush_session(session)
        assert retried.status == "flushed" and retried.messages == 2
        engine.close()


def test_facts_already_known_or_forgotten_are_not_added(tmp_path: Path) -> None:
    responder = SummaryResponder(
        facts=["The user's dog is called Max", "Allergic to peanuts", "Plays the cello"]
    )
    with FakeOpenAI(responder=responder) as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        engine.tools.execute("save_memory", {"content": "My dog is Max"})
        engine.tools.execute("save_memory", {"content": "Allergic to peanuts"})
        engine.tools.execute("forget_memory", {"query": "peanuts"})
        session = engine.sessions.create().id
        add_messages(engine.sessions, session, 2)
        outcome = engine.flusher.flush_session(session)
        assert outcome.facts == 1
        text = engine.memory.workspace.memory_file.read_text()
        assert "cello" in text and "peanuts" not in text and "called Max" not in text
        engine.close()


@pytest.mark.parametrize(
    "summary, stale",
    [
        ("Switched from Vim to Zed for everything", True),
        ("Set up Vim's spell checker for commit messages", False),  # no change told
        ("Switched from Slack to Zulip for the team chat", False),  # another thing changed
    ],
)
def test_a_flush_that_tells_of_a_changed_fact_says_memory_md_is_out_of_date(
    tmp_path: Path, embedder: Embedder, summary: str, stale: bool
) -> None:
    """The conversation said the user switched editors; MEMORY.md still says Vim. The flush
    logs it and names the MEMORY.md entry, for consolidation to propose the update."""
    responder = SummaryResponder(facts=[], summary=summary)
    with FakeOpenAI(responder=responder) as server:
        config = make_config(tmp_path, server)
        workspace = Workspace.open(tmp_path / "ws")
        memory_text = "# Long-term Memory\n\n- My editor is Vim\n- Likes tea\n"
        workspace.memory_file.write_text(memory_text)
        memory = MemoryEngine(workspace, embedder=embedder)
        memory.sync()
        engine = ChatEngine(config, memory, sessions=SessionStore(workspace))
        session = engine.sessions.create().id
        add_messages(engine.sessions, session, 2)
        outcome = engine.flusher.flush_session(session)
        engine.close()
    assert outcome.status == "flushed"
    # MEMORY.md itself is untouched: the update is proposed, never made behind the user
    assert workspace.memory_file.read_text() == memory_text
    if not stale:
        assert outcome.changed == () and outcome.out_of_date == ""
        return
    [line] = outcome.changed
    assert line.startswith("MEMORY.md#L3: My editor is Vim — changed on ")
    assert f"({outcome.daily_log}#L" in line
    assert outcome.out_of_date == (
        "MEMORY.md may be out of date (1 entry changed: consolidate to update)"
    )


def test_only_silent_messages_move_the_pointer_without_a_request(
    engine: ChatEngine, responder: SummaryResponder
) -> None:
    session = engine.sessions.create().id
    last = engine.sessions.append_message(session, "user", "compaction prompt", silent=True)
    outcome = engine.flusher.flush_session(session)
    assert outcome.status == "nothing_new" and responder.count == 0
    assert engine.sessions.load(session).last_logged_message_id == last


def test_the_flush_journal_lines_read_back_as_the_typed_records_written(
    engine: ChatEngine, responder: SummaryResponder
) -> None:
    """What a restart replays is exactly what the ``prepared`` line holds: each journal line
    is a typed record, written and read back field for field."""
    session = engine.sessions.create("journal").id
    ids = add_messages(engine.sessions, session, 2)
    outcome = engine.flusher.flush_session(session, trigger="manual", reason="test")
    prepared_line, done_line = flush_lines(engine.sessions, session)
    prepared = PreparedFlush.from_record(prepared_line, session)
    assert (prepared.from_id, prepared.to_id, prepared.first, prepared.last) == (
        ids[0], ids[-1], 1, 2
    )
    assert (prepared.count, prepared.trigger, prepared.reason, prepared.title) == (
        2, "manual", "test", "journal"
    )
    assert prepared.facts == ("Summary fact number 1",) and prepared.summarised
    assert prepared.to_record() == {k: v for k, v in prepared_line.items() if k != "timestamp"}
    done = FlushDone(prepared.flush_id, ids[0], ids[-1], 2, facts_added=outcome.facts)
    assert done.to_record() == {k: v for k, v in done_line.items() if k != "timestamp"}
    assert engine.sessions.load(session).pending_flush() is None


def test_two_concurrent_flushes_in_one_process_log_once(
    engine: ChatEngine, server: FakeOpenAI, responder: SummaryResponder
) -> None:
    slow = threading.Event()

    def slow_summary(body: dict[str, Any]) -> Reply | None:
        if is_summary_request(body):
            slow.set()
            time.sleep(0.4)
        return responder(body)

    server.responder = slow_summary
    session = engine.sessions.create().id
    add_messages(engine.sessions, session, 4)
    outcomes: list[TriggerEvent] = []
    barrier = threading.Barrier(2)

    def fire(trigger: TriggerName) -> None:
        barrier.wait()
        outcomes.extend(engine.triggers.fire(trigger, session))

    threads = [threading.Thread(target=fire, args=(t,)) for t in ("idle", "background")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    statuses = sorted(e.outcome.status for e in outcomes)
    assert statuses == ["flushed", "nothing_new"]
    assert responder.count == 1
    assert daily_text(engine.memory.workspace.root).count("flush=") == 1


def test_two_concurrent_flush_processes_log_once(tmp_path: Path) -> None:
    responder = SummaryResponder()

    def slow_summary(body: dict[str, Any]) -> Reply | None:
        if is_summary_request(body):
            time.sleep(1.0)
        return responder(body)

    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create().id
    add_messages(store, session, 4)
    with FakeOpenAI(responder=slow_summary) as server:
        env = memdeck_env(server, tmp_path)
        args = ["--workspace", str(tmp_path / "ws"), "flush", session]
        first, second = start_memdeck(args, env), start_memdeck(args, env)
        outputs = [p.communicate(timeout=60) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outputs
    joined = "".join(out for out, _ in outputs)
    assert joined.count("logged 4 messages") == 1 and joined.count("nothing new") == 1
    assert responder.count == 1
    assert daily_text(tmp_path / "ws").count("flush=") == 1


def _crash_setup(tmp_path: Path) -> tuple[Path, str, list[str]]:
    root = tmp_path / "ws"
    store = SessionStore(Workspace.open(root))
    session = store.create("crash test").id
    ids = add_messages(store, session, 4)
    return root, session, ids


def _assert_logged_exactly_once(root: Path, session: str, ids: list[str], summaries: int) -> None:
    store = SessionStore(Workspace.open(root))
    transcript = store.load(session)
    assert transcript.last_logged_message_id == ids[-1]
    assert transcript.pending_flush() is None
    daily = daily_text(root)
    assert daily.count("flush=") == 1, daily
    assert daily.count("Summary number") == 1 and summaries == 1
    memory_md = (root / "MEMORY.md").read_text()
    assert memory_md.count("Summary fact number") == 1, memory_md
    flushes = [r for r in transcript.records if r.get("type") == "flush"]
    assert [f["phase"] for f in flushes] == ["prepared", "done"]
    assert flushes[0]["flush_id"] == flushes[1]["flush_id"]
    engine = MemoryEngine(Workspace.open(root))
    try:  # both files were indexed by the recovering process
        paths = {r.path for r in engine.search("Summary number", min_score=0.0).results}
        assert "MEMORY.md" in paths and any(p.startswith("memory/") for p in paths)
    finally:
        engine.close()


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_sigkill_at_each_point_then_restart_logs_exactly_once(tmp_path: Path, point: str) -> None:
    root, session, ids = _crash_setup(tmp_path)
    responder = SummaryResponder()
    with FakeOpenAI(responder=responder) as server:
        args = ["--workspace", str(root), "flush", session]
        crashed = run_memdeck(args, memdeck_env(server, tmp_path, MEMDECK_CRASH_AT=point))
        assert crashed.returncode == -signal.SIGKILL, (crashed.stdout, crashed.stderr)
        expected_before = 0 if point == "before_llm_answer" else 1
        assert responder.count == expected_before
        restarted = run_memdeck(args, memdeck_env(server, tmp_path))
        assert restarted.returncode == 0, restarted.stderr
        assert "logged 4 messages" in restarted.stdout
    _assert_logged_exactly_once(root, session, ids, responder.count)
    # The next messages continue the range: nothing skipped, nothing repeated.
    with FakeOpenAI(responder=responder) as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        add_messages(engine.sessions, session, 2, start=5)
        outcome = engine.flusher.flush_session(session)
        assert (outcome.first, outcome.last) == (5, 6)
        engine.close()


def test_sigkill_while_waiting_for_the_answer(tmp_path: Path) -> None:
    root, session, ids = _crash_setup(tmp_path)
    responder = SummaryResponder()
    with FakeOpenAI(FakeOpenAI.hang(20), responder=None) as server:
        args = ["--workspace", str(root), "flush", session]
        process = start_memdeck(args, memdeck_env(server, tmp_path))
        server.wait_for_requests(1, timeout=30)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=10)
        assert process.returncode == -signal.SIGKILL
        server.responder = responder
        restarted = run_memdeck(args, memdeck_env(server, tmp_path))
        assert restarted.returncode == 0, restarted.stderr
    _assert_logged_exactly_once(root, session, ids, responder.count)


def test_cli_flush_all_and_skip_reason(tmp_path: Path) -> None:
    root, session, _ = _crash_setup(tmp_path)
    unreachable = memdeck_env(
        None, tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1", MEMDECK_MODEL="unreachable"
    )
    down = run_memdeck(["--workspace", str(root), "flush"], unreachable)
    assert down.returncode == 1 and "skipped" in down.stderr
    state = json.loads((root / ".memdeck" / "state.json").read_text())
    assert state["skipped"][session]["detail"]
    responder = SummaryResponder()
    with FakeOpenAI(responder=responder) as server:
        done = run_memdeck(["--workspace", str(root), "flush"], memdeck_env(server, tmp_path))
        assert done.returncode == 0 and "logged 4 messages" in done.stdout
        again = run_memdeck(["--workspace", str(root), "flush"], memdeck_env(server, tmp_path))
        assert again.returncode == 0 and "nothing new" in again.stdout
    state = json.loads((root / ".memdeck" / "state.json").read_text())
    assert session not in state["skipped"]
    assert state["triggers"]["manual"]["status"] == "flushed"
