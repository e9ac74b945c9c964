"""``memdeck ask``, ``memdeck flush`` and ``memdeck sessions`` as real processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.chat_support import SummaryResponder, memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI


def test_ask_streams_answer_and_tools_then_sessions(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    responder = SummaryResponder()
    with FakeOpenAI(
        FakeOpenAI.tool_call("save_memory", {"content": "Prefers window seats"}),
        FakeOpenAI.text("Got it, window seat."),
        FakeOpenAI.text("A window seat, as usual."),
        responder=responder,
    ) as server:
        env = memdeck_env(server, tmp_path)
        first = run_memdeck(
            [
                "--workspace",
                workspace,
                "ask",
                "--bm25",
                "--title",
                "flights",
                "I like window seats",
            ],
            env,
        )
        assert first.returncode == 0, first.stderr
        assert first.stdout == "Got it, window seat.\n"
        assert '▸ save_memory {"content": "Prefers window seats"}' in first.stderr
        assert "✓ save_memory" in first.stderr
        session_line = re.search(r"session: (\S+)", first.stderr)
        assert session_line is not None
        session = session_line.group(1)

        second = run_memdeck(
            ["--workspace", workspace, "ask", "--bm25", "--session", session, "--flush", "seat?"],
            env,
        )
        assert second.returncode == 0, second.stderr
        assert second.stdout.startswith("A window seat, as usual.\n")
        assert f"{session}: logged 4 messages" in second.stdout
        assert "Prefers window seats" in (server.chat_requests[-2].system_prompt or "")

        listed = run_memdeck(["--workspace", workspace, "sessions", "--json"], env)
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(r["id"], r["title"], r["message_count"], r["unlogged_count"]) for r in rows] == [
            (session, "flights", 4, 0)
        ]
        missing = run_memdeck(["--workspace", workspace, "ask", "--session", "nope", "hi"], env)
        assert missing.returncode == 2 and "no session 'nope'" in missing.stderr


def test_ask_without_llm_says_how_to_configure(tmp_path: Path) -> None:
    result = run_memdeck(
        ["--workspace", str(tmp_path / "ws"), "ask", "hello"], memdeck_env(None, tmp_path)
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    for words in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMDECK_MODEL", "no-config.toml"):
        assert words in lines[0]


def test_sessions_rename_and_delete(tmp_path: Path) -> None:
    from tui.chat.sessions import SessionStore
    from tui.engine.workspace import Workspace

    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create().id
    store.append_message(session, "user", "plan the garden")
    # A model that cannot be reached: the session's message cannot be logged.
    env = memdeck_env(
        None, tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1", MEMDECK_MODEL="unreachable"
    )
    workspace = str(tmp_path / "ws")
    renamed = run_memdeck(
        ["--workspace", workspace, "sessions", "--rename", session, "Garden"], env
    )
    assert renamed.returncode == 0 and renamed.stdout.strip() == f"{session}: Garden"
    listed = run_memdeck(["--workspace", workspace, "sessions"], env)
    assert (
        session in listed.stdout and "Garden" in listed.stdout and "1 not logged" in listed.stdout
    )
    delete = ["--workspace", workspace, "sessions", "--delete", session]
    refused = run_memdeck(delete, env)  # its message could not be logged: kept
    assert refused.returncode == 2 and "not deleted: 1 message" in refused.stderr
    assert store.ids() == [session]
    deleted = run_memdeck([*delete, "--force"], env)
    assert deleted.returncode == 0
    assert "skipped:" in deleted.stderr and ".trash" in deleted.stdout
    assert store.ids() == [] and len(store.trashed()) == 1
    bad = run_memdeck(["--workspace", workspace, "flush", "../../etc/passwd"], env)
    assert bad.returncode == 2 and "not a valid session id" in bad.stderr
