"""``memdeck sessions --export`` and ``memdeck ask`` with the server down, as real processes
(issue 32, items 4 and 17)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from support.chat_support import memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI

from tui.chat.sessions import ErrorRecord, SessionStore, ToolCall, ToolResult
from tui.engine.workspace import Workspace

#: An answer holding an OSC "set window title" and a code fence with backticks inside.
ANSWER = "Here:\n\n```sh\necho `date`\n```\n\x1b]2;pwned\x07done"


def write_session(root: Path) -> str:
    """A session with a question, a saved memory, an answer, an error and a retry."""
    store = SessionStore(Workspace.open(root))
    session = store.create(title="garden plans").id
    first = store.append_message(session, "user", "when do I sow peas?")
    store.append(session, ErrorRecord("connection", "could not connect to http://x/v1"))
    store.supersede(session, first, "when do I sow peas?")
    store.append_message(session, "user", "when do I sow peas?")
    answer = store.append_message(session, "assistant", "")
    store.append(session, ToolCall("c1", answer, "save_memory", '{"content": "Sows peas"}', {}))
    store.append(session, ToolResult("c1", "save_memory", True, {"saved": "Sows peas"}))
    store.append_message(session, "assistant", ANSWER)
    return session


def without_time(document: str) -> list[str]:
    """The document's lines but the one saying when it was exported."""
    return [line for line in document.splitlines() if not line.startswith("- exported:")]


def test_a_session_exports_as_markdown_text(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    session = write_session(workspace)
    env = memdeck_env(None, tmp_path)

    printed = run_memdeck(["--workspace", str(workspace), "sessions", "--export", session], env)

    assert printed.returncode == 0, printed.stderr
    text = printed.stdout
    assert text.startswith("# garden plans\n")
    assert f"- session: `{session}`" in text
    assert text.count("### you") == 1 and "when do I sow peas?" in text
    assert "**tool call** `save_memory` ✓" in text and '"saved": "Sows peas"' in text
    assert "```sh\necho `date`\n```" in text  # the model's Markdown, as written
    assert "\x1b" not in text and "␛]2;pwned␇done" in text  # a control is shown, not sent
    assert "cannot connect" not in text  # superseded by the retry
    assert "(asked again: the earlier attempt stays in the transcript file)" in text

    output = tmp_path / "out" / "garden.md"
    output.parent.mkdir()
    written = run_memdeck(
        ["--workspace", str(workspace), "sessions", "--export", session, "--output", str(output)],
        env,
    )
    assert written.returncode == 0, written.stderr
    assert written.stdout == "" and str(output) in written.stderr
    assert without_time(output.read_text(encoding="utf-8")) == without_time(text)
    assert stat.S_IMODE(output.stat().st_mode) == 0o600

    missing = run_memdeck(["--workspace", str(workspace), "sessions", "--export", "nope"], env)
    assert missing.returncode == 2 and "no session 'nope'" in missing.stderr


def test_ask_with_the_server_down_keeps_no_orphan_session(tmp_path: Path) -> None:
    with FakeOpenAI() as down:
        url = down.base_url
    workspace = str(tmp_path / "ws")
    env = memdeck_env(None, tmp_path, OPENAI_BASE_URL=url, MEMDECK_MODEL="fake-model")

    asked = run_memdeck(["--workspace", workspace, "ask", "--bm25", "hello?"], env)

    assert asked.returncode == 1
    assert "cannot connect" in asked.stderr or "connection" in asked.stderr
    assert "nothing was answered" in asked.stderr and "moved to the trash" in asked.stderr
    listed = run_memdeck(["--workspace", workspace, "sessions", "--json"], env)
    assert listed.returncode == 0 and listed.stdout == ""
    (trashed,) = SessionStore(Workspace.open(Path(workspace))).trashed()  # nothing destroyed
    assert "hello?" in trashed.read_text(encoding="utf-8")

    # a session the user named is theirs: it stays, with the question in it
    store = SessionStore(Workspace.open(Path(workspace)))
    session = store.create().id
    again = run_memdeck(
        ["--workspace", workspace, "ask", "--bm25", "--session", session, "hello?"], env
    )
    assert again.returncode == 1 and "trash" not in again.stderr
    listed = run_memdeck(["--workspace", workspace, "sessions", "--json"], env)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["message_count"]) for r in rows] == [(session, 1)]
