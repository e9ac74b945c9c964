"""What the app imports, and when: the idle app holds no library it does not use yet (memory),
and the first answer does not wait for the chat SDK's import (it is warmed up in a thread
from the first key). Each runs a fresh interpreter: only it tells what the app imports.

An idle app over memory that did not change while it was closed holds neither pygit2 (no
``git status``: the files are as last committed) nor the tokenizer (MEMORY.md's counts are
kept); an outside edit made while it was closed is still committed at start, through pygit2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.chat_support import ROOT, make_config
from support.fakeopenai import FakeOpenAI
from support.git_log import commits
from support.pilot import (
    SIZE,
    build_app,
    build_engine,
    close_chat_engine,
    ready,
    text_of,
    wait_until,
)
from textual.widgets import Static

from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine

PROBE = ROOT / "tests" / "support" / "fresh_app_probe.py"


def run_probe(
    tmp_path: Path,
    server: FakeOpenAI,
    embedder: Embedder,
    while_closed: Callable[[Path], None] | None = None,
) -> list[dict[str, Any]]:
    """The probe's two lines over a workspace indexed beforehand (the app embeds nothing), its
    files written a day ago, opened once before (its history started, the empty draft's
    preview shown); ``while_closed`` changes it before the app opens again."""
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Long-term Memory\n\n- Likes tea\n", encoding="utf-8")
    (workspace / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n\n## Trip\n- Booked the train to Lisbon\n", encoding="utf-8"
    )
    yesterday = time.time() - 86_400  # a file stamped seconds after its change is checked again
    for path in (workspace / "MEMORY.md", workspace / "memory" / "2026-11-20.md"):
        os.utime(path, (yesterday, yesterday))
    memory = MemoryEngine(workspace, embedder=embedder)
    assert memory.sync(embed=True).embedded > 0
    assert memory.inject("").text  # the preview of the empty draft, as the app shows it
    memory.close()
    if while_closed is not None:
        while_closed(workspace)
    output = run_python(str(PROBE), str(workspace), server.base_url, timeout=280)
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def run_python(*args: str, timeout: float) -> str:
    """What a fresh interpreter run from the repository with ``args`` prints (its failure
    fails the test with its stderr)."""
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_idle_app_imports_no_sdk_and_the_first_answer_waits_for_none(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    server.enqueue(FakeOpenAI.text(["Hello ", "there."]))
    idle, first = run_probe(tmp_path, server, embedder)
    # idle, model loaded, index synced: the chat SDK, MCP, schema validation, numpy (first
    # search), onnxruntime (the helper process's), pygit2 (nothing to commit) and the
    # tokenizer (MEMORY.md's counts kept) are not loaded
    assert idle == {"idle": []}
    # the first key warmed the chat client up in a thread: the SDK was not imported on the
    # event loop, and a connection was opened before the message was sent
    assert first == {"openai_imported_on": first["openai_imported_on"], "answered": True}
    assert first["openai_imported_on"] not in (None, "MainThread")
    paths = [(r.method, r.path) for r in server.requests]
    assert paths.index(("GET", "/v1/models")) < paths.index(("POST", "/v1/chat/completions"))


#: A fresh interpreter's first request with a client never warmed up: the thread that imported
#: each module of the SDK's chat resources, printed as JSON.
COLD_REQUEST = """
import asyncio, importlib.abc, json, sys, threading
from pathlib import Path

imported_on = {}

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("openai.resources.chat"):
            imported_on.setdefault(name, threading.current_thread().name)
        return None

sys.meta_path.insert(0, Spy())
from tui.chat.client import LLMClient, StreamEnd
from tui.chat.config import load_config

async def main():
    env = {"OPENAI_BASE_URL": sys.argv[1], "MEMDECK_MODEL": "fake-model"}
    config = load_config(Path(sys.argv[2]), env=env, overrides={"max_retries": 0})
    pieces = [p async for p in LLMClient(config.llm).stream_chat([{"role": "user", "content": "hi"}])]
    loop_thread = threading.current_thread().name
    print(json.dumps({"on_loop": sorted(m for m, t in imported_on.items() if t == loop_thread),
                      "imported": len(imported_on), "ended": isinstance(pieces[-1], StreamEnd)}))

asyncio.run(main())
"""


def test_a_cold_client_s_first_request_imports_the_chat_sdk_off_the_loop(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    """Sent before any key warmed the client up, the first request made its client in a
    thread but imported the SDK's chat modules on the event loop: ~40-65 ms of one turn of the
    loop at the start of that answer."""
    server.enqueue(FakeOpenAI.text(["Hello ", "there."]))
    output = run_python(
        "-c", COLD_REQUEST, server.base_url, str(tmp_path / "no-config.toml"), timeout=120
    )
    report = json.loads(output.splitlines()[-1])
    assert report["ended"] and report["imported"] > 0
    assert report["on_loop"] == []


def test_an_outside_edit_made_while_the_app_was_closed_is_committed_at_start(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    def edit(workspace: Path) -> None:
        with (workspace / "memory" / "2026-11-20.md").open("a", encoding="utf-8") as log:
            log.write("- Changed trains in Porto\n")

    server.enqueue(FakeOpenAI.text(["Hello."]))
    idle, first = run_probe(tmp_path, server, embedder, while_closed=edit)
    assert first["answered"]
    newest, start = commits(tmp_path / "ws")  # the history's start, then the edit
    assert newest.trailers == {"Memdeck-Source": "outside"}
    assert newest.files == ("memory/2026-11-20.md",)
    assert start.files == ("MEMORY.md", "memory/2026-11-20.md")
    # the files were not as last committed: git was asked (and the changed log re-chunked)
    assert "pygit2" in idle["idle"]


async def test_a_dead_server_is_said_by_the_send_not_by_the_warm_up(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "MEMDECK_MODEL": "fake-model"}
    config = make_config(tmp_path, env=env)
    engine = build_engine(tmp_path, config, None)
    app = build_app(engine, tmp_path, load_model=False)
    try:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await ready(pilot)
            main = app.main_screen
            pane = main.chat_pane
            pane.chat_input.focus()
            await pilot.press("h")
            await wait_until(
                pilot,
                lambda: main._sdk_import_started
                and not any(w.group == "llm-sdk" for w in main.workers),
                "the warm-up",
            )
            said = [str(n.message) for n in app._notifications if n.severity == "error"]
            assert said == []  # a failed worker would be said there
            assert not any(str(port) in str(n.message) for n in app._notifications)
            assert pane.messages == []
            await pilot.press("enter")
            await wait_until(pilot, lambda: pane.turns_finished == 1, "the turn to fail")
            error = text_of(pane.messages[-1].query_one(".message-error", Static))
            assert f"127.0.0.1:{port}" in error and "\n" not in error.strip()
    finally:
        await close_chat_engine(engine)
