"""Every route that writes memory makes exactly ONE commit with the right ``Memdeck-*``
trailers, read back with the plain ``git`` command: the editor's save, the chat's
save_memory and forget_memory, a flush, an accepted consolidation, a restore and a revert from
the command line, an outside edit (noticed by the watcher's sync, a start-up sync, a reindex).
Only the Markdown memory is tracked; ``.git`` is private. (MCP: tests/serve/test_mcp_history.py.)"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import (
    FakeClock,
    SummaryResponder,
    add_messages,
    make_config,
    make_engine,
    memdeck_env,
    run_memdeck,
)
from support.fakeopenai import FakeOpenAI, Reply
from support.git_log import Commit, commits, git, new_commits

from tui.chat.chat import ChatEngine
from tui.engine.engine import OUTSIDE, MemoryEngine
from tui.engine.history_records import Attribution
from tui.engine.workspace import Workspace

MEMORY = "# Long-term Memory\n\n- My dog is Max\n- I live in Lyon\n"
NOW = datetime(2026, 11, 22, 12, 0).astimezone()
CONSOLIDATION_MARKER = "memory consolidation assistant"
CONSOLIDATED = "# Long-term Memory\n\n- My dog is Luna\n- I live in Lyon\n"


class Responder:
    """Flush requests get a summary and one fact, consolidation requests a new MEMORY.md."""

    def __init__(self) -> None:
        self.summary = SummaryResponder(facts=["Plays the cello on Sundays"])

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        system = " ".join(
            str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system"
        )
        if CONSOLIDATION_MARKER in system:
            return FakeOpenAI.text(CONSOLIDATED)
        return self.summary(body)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=Responder()) as fake:
        yield fake


@pytest.fixture
def engine(tmp_path: Path, server: FakeOpenAI) -> Iterator[ChatEngine]:
    """A chat engine over a workspace with MEMORY.md, its history started (one commit)."""
    config = make_config(tmp_path, server, summary_model="fake-summary")
    chat = make_engine(tmp_path, config, clock=FakeClock(NOW))
    (chat.memory.workspace.root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    chat.memory.sync()  # as every start does: the history begins with what is there
    yield chat
    chat.close()


def only_new(root: Path, before: list[Commit]) -> Commit:
    made = new_commits(root, before)
    assert len(made) == 1, [(c.subject, c.trailers) for c in made]
    return made[0]


def test_the_history_starts_with_one_commit_of_what_is_there(engine: ChatEngine) -> None:
    root = engine.memory.workspace.root
    [first] = commits(root)
    assert first.trailers == {"Memdeck-Source": "outside"}
    assert first.files == ("MEMORY.md",)
    assert git(root, "show", "HEAD:MEMORY.md") == MEMORY


def test_the_first_write_of_a_new_history_is_a_commit_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    memory = MemoryEngine(Workspace.open(root))
    try:
        memory.save_entry("Drinks oolong", confidence="high", source="user")
    finally:
        memory.close()
    saved, first = commits(root)
    assert first.trailers == {"Memdeck-Source": "outside"}
    assert git(root, "show", f"{first.id}:MEMORY.md") == MEMORY  # as it was before the write
    assert saved.trailers == {"Memdeck-Source": "cli"} and saved.files == ("MEMORY.md",)


def test_an_editor_save_is_one_editor_commit(engine: ChatEngine) -> None:
    memory = engine.memory
    root = memory.workspace.root
    before = commits(root)
    state = memory.store.read_memory()
    with memory.attributed(Attribution("editor", summary="edit MEMORY.md")):
        memory.store.save_memory_text(state.text + "- Likes green tea\n", state.content_hash)
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "editor"}
    assert made.subject == "edit MEMORY.md" and made.files == ("MEMORY.md",)


async def test_the_chat_s_save_and_forget_are_one_commit_each_with_the_session(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    root = engine.memory.workspace.root
    session = engine.sessions.create("tea talk").id
    before = commits(root)
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Likes green tea"}), "Noted."
    )
    [_ async for _ in engine.run_turn(session, "remember I like green tea")]
    saved = only_new(root, before)
    assert saved.trailers == {"Memdeck-Source": "chat", "Memdeck-Session": session}
    assert saved.subject == "save_memory: Likes green tea"
    assert saved.files == ("MEMORY.md",)

    before = commits(root)
    server.enqueue(FakeOpenAI.tool_call("forget_memory", {"query": "green tea"}), "Forgotten.")
    [_ async for _ in engine.run_turn(session, "forget the tea")]
    forgot = only_new(root, before)
    assert forgot.trailers == {"Memdeck-Source": "chat", "Memdeck-Session": session}
    assert forgot.subject == "forget_memory: green tea"
    assert git(root, "show", "HEAD:MEMORY.md") == MEMORY  # the entry left the file


def test_a_flush_is_one_commit_of_both_files_with_its_session_and_trigger(
    engine: ChatEngine,
) -> None:
    root = engine.memory.workspace.root
    session = engine.sessions.create("music").id
    add_messages(engine.sessions, session, 4)
    before = commits(root)
    outcome = engine.flusher.flush_session(session, trigger="idle")
    assert outcome.status == "flushed" and outcome.daily_log is not None
    made = only_new(root, before)
    assert made.trailers == {
        "Memdeck-Source": "flush",
        "Memdeck-Session": session,
        "Memdeck-Trigger": "idle",
    }
    assert set(made.files) == {"MEMORY.md", outcome.daily_log}
    assert "Plays the cello on Sundays" in git(root, "show", "HEAD:MEMORY.md")


def test_an_accepted_consolidation_is_one_consolidation_commit(engine: ChatEngine) -> None:
    root = engine.memory.workspace.root
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / "2026-11-21.md").write_text("# 2026-11-21\n\n- Adopted a dog, Luna\n")
    engine.memory.sync()  # the new log: an outside edit, committed before the proposal
    proposal = engine.consolidator.propose()
    before = commits(root)
    engine.consolidator.accept(proposal)
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "consolidation"}
    assert made.files == ("MEMORY.md",)
    assert git(root, "show", "HEAD:MEMORY.md") == proposal.text


def test_outside_edits_are_committed_as_outside_when_noticed(
    engine: ChatEngine, tmp_path: Path
) -> None:
    memory = engine.memory
    root = memory.workspace.root
    before = commits(root)
    with (root / "MEMORY.md").open("a", encoding="utf-8") as file:
        file.write("- Edited in vim\n")
    memory.sync_changed(["MEMORY.md"], origin=OUTSIDE)  # what the watcher calls
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"} and made.files == ("MEMORY.md",)
    memory.sync_changed(["MEMORY.md"], origin=OUTSIDE)
    assert len(commits(root)) == len(before) + 1  # seen again: nothing new

    # A start-up sync (the app's, every command's) commits what changed while nobody watched.
    before = commits(root)
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Pulled by hand\n")
    memory.sync()
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"}
    assert made.files == ("memory/2026-11-20.md",)

    # ... and so does `memdeck reindex`, in a process of its own.
    before = commits(root)
    (root / "memory" / "2026-11-20.md").unlink()
    reindex = run_memdeck(["--workspace", str(root), "reindex"], memdeck_env(None, tmp_path))
    assert reindex.returncode == 0, reindex.stderr
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "outside"}
    assert made.files == ("memory/2026-11-20.md",)


def test_a_restore_from_the_command_line_is_one_restore_commit(
    engine: ChatEngine, tmp_path: Path
) -> None:
    memory = engine.memory
    root = memory.workspace.root
    [max_entry] = [e for e in memory.store.entries() if "Max" in e.text]
    memory.forget([max_entry], reason="test")
    before = commits(root)
    restored = run_memdeck(
        ["--workspace", str(root), "forgotten", "--restore", "1"], memdeck_env(None, tmp_path)
    )
    assert restored.returncode == 0, restored.stderr
    assert "1: restored" in restored.stdout
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "restore"} and made.files == ("MEMORY.md",)
    assert git(root, "show", "HEAD:MEMORY.md") == MEMORY


def test_a_write_nobody_attributed_is_the_command_line_s(engine: ChatEngine) -> None:
    memory = engine.memory
    root = memory.workspace.root
    before = commits(root)
    memory.save_entry("Drinks oolong", confidence="high", source="user")
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "cli"}


def test_reverting_a_flush_puts_both_files_back_in_one_revert_commit(
    engine: ChatEngine, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    session = engine.sessions.create("music").id
    add_messages(engine.sessions, session, 4)
    outcome = engine.flusher.flush_session(session, trigger="idle")
    assert outcome.daily_log is not None
    flush = commits(root)[0]
    engine.memory.save_entry("Drinks oolong", confidence="high", source="user")  # after it
    before = commits(root)

    reverted = run_memdeck(
        ["--workspace", str(root), "revert", flush.id[:8]], memdeck_env(None, tmp_path)
    )

    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout.startswith(f"reverted {flush.id[:10]}: flush (idle): music (")
    made = only_new(root, before)
    assert made.trailers == {"Memdeck-Source": "revert"}
    assert set(made.files) == {"MEMORY.md", outcome.daily_log}
    assert not (root / outcome.daily_log).exists()  # the flush made it: gone again
    text = (root / "MEMORY.md").read_text(encoding="utf-8")
    assert "Plays the cello" not in text and text.startswith(MEMORY)
    assert "Drinks oolong" in text  # the later change next to it stays
    assert git(root, "status", "--porcelain") == ""


def test_a_conflicting_revert_says_one_line_shows_the_diff_and_changes_nothing(
    engine: ChatEngine, tmp_path: Path
) -> None:
    memory = engine.memory
    root = memory.workspace.root
    memory.save_entry("Drinks oolong", confidence="high", source="user")
    saved = commits(root)[0]
    text = (root / "MEMORY.md").read_text(encoding="utf-8")
    state = memory.store.read_memory()
    with memory.attributed(Attribution("editor")):
        memory.store.save_memory_text(text.replace("oolong", "sencha"), state.content_hash)
    before = commits(root)
    on_disk = (root / "MEMORY.md").read_bytes()

    refused = run_memdeck(["--workspace", str(root), "revert", saved.id], memdeck_env(None, tmp_path))

    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "changed on the same lines" in refused.stderr
    assert "+- Drinks oolong" in refused.stdout  # the change's diff
    assert commits(root) == before and (root / "MEMORY.md").read_bytes() == on_disk


def test_history_lists_json_and_diff_from_the_command_line(
    engine: ChatEngine, tmp_path: Path
) -> None:
    memory = engine.memory
    root = memory.workspace.root
    memory.save_entry("Drinks oolong", confidence="high", source="user")
    (root / "memory").mkdir(exist_ok=True)
    memory.append_daily("- went climbing")
    env = memdeck_env(None, tmp_path)

    listed = run_memdeck(["--workspace", str(root), "history", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    changes = json.loads(listed.stdout)
    assert [c["source"] for c in changes] == ["cli", "cli", "outside"]
    assert changes[1]["files"] == ["MEMORY.md"] and changes[1]["added"] == 1
    assert set(changes[0]) >= {"id", "time", "source", "files", "summary"}
    assert [c["id"] for c in changes] == [c.id for c in commits(root)]

    human = run_memdeck(["--workspace", str(root), "history", "MEMORY.md"], env)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert len(lines) == 4  # two changes of MEMORY.md, two lines each
    assert lines[0].startswith(changes[1]["id"][:10]) and "you (command line)" in lines[0]
    assert "MEMORY.md +1 -0" in lines[0]
    assert "an outside edit" in lines[2] and lines[3] == "    memory as it was"

    only = run_memdeck(["--workspace", str(root), "history", "--source", "outside"], env)
    assert only.stdout.count("an outside edit") == 1 and "command line" not in only.stdout
    later = run_memdeck(["--workspace", str(root), "history", "--since", "2999-01-01"], env)
    assert later.stdout == "no changes\n"

    diff = run_memdeck(["--workspace", str(root), "history", "--diff", changes[1]["id"][:7]], env)
    assert diff.returncode == 0, diff.stderr
    assert "+- Drinks oolong" in diff.stdout and "--- a/MEMORY.md" in diff.stdout

    unknown = run_memdeck(["--workspace", str(root), "history", "--diff", "feedbeef"], env)
    assert unknown.returncode != 0 and unknown.stderr.count("\n") == 1
    assert "no change 'feedbeef'" in unknown.stderr


def test_only_the_markdown_memory_is_tracked_and_git_is_private(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    memory = engine.memory
    root = memory.workspace.root
    session = engine.sessions.create("x").id
    add_messages(engine.sessions, session, 2)
    daily_log = engine.flusher.flush_session(session, trigger="manual").daily_log
    (root / "config.toml").write_text("[ui]\n")
    (root / "memory" / "notes.txt").write_text("not markdown\n")
    (root / "memory" / "trips").mkdir()
    (root / "memory" / "trips" / "lisbon.md").write_text("# Lisbon\n\n- tram 28\n")
    memory.sync()
    tracked = set(git(root, "ls-files").split())
    assert tracked == {"MEMORY.md", daily_log, "memory/trips/lisbon.md"}
    assert (root / ".memdeck").is_dir() and (root / ".gitignore").is_file()
    assert stat.S_IMODE((root / ".git").stat().st_mode) == 0o700
    assert git(root, "status", "--porcelain") == ""  # nothing else shows as untracked


def test_memdeck_ask_commits_the_model_s_save_in_its_session_and_the_flush(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    root = engine.memory.workspace.root
    before = commits(root)
    server.enqueue(FakeOpenAI.tool_call("save_memory", {"content": "Likes green tea"}), "Noted.")
    asked = run_memdeck(
        ["--workspace", str(root), "ask", "--bm25", "--flush", "remember: green tea"],
        memdeck_env(server, tmp_path),
    )
    assert asked.returncode == 0, asked.stderr
    flush, save = new_commits(root, before)
    [session] = [info.id for info in engine.sessions.list()]
    assert save.trailers == {"Memdeck-Source": "chat", "Memdeck-Session": session}
    assert flush.trailers == {
        "Memdeck-Source": "flush",
        "Memdeck-Session": session,
        "Memdeck-Trigger": "session_end",
    }
