"""Fault suite for issue 8, "Trust the files": the user's Markdown is never modified except by the
edit asked for, byte for byte; nothing outside the workspace is read or written; a bad input
gets one clear line, never a traceback.

Real files, real processes, real SQLite; the LLM is the loopback fake server.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import (
    ROOT,
    SummaryResponder,
    add_messages,
    make_config,
    make_engine,
    memdeck_env,
    run_memdeck,
)
from support.fakeopenai import FakeOpenAI

from tui.chat.chat import ChatEngine
from tui.chat.consolidation import StaleProposalError
from tui.chat.tools import MemoryTools
from tui.engine import fileio
from tui.engine.engine import MemoryEngine
from tui.engine.fileio import ConcurrentEditError, lock_for, sha256_bytes
from tui.engine.store import EntryBatch, MemoryStore
from tui.engine.workspace import PathRefusedError, Workspace

TODAY = date.today().isoformat()
SECRET = "DB_PASSWORD=hunter2"


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    return root


def _no_traceback(process: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in process.stderr, process.stderr
    assert "Traceback" not in process.stdout, process.stdout


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _history(root: Path) -> list[dict[str, Any]]:
    path = root / ".memdeck" / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=SummaryResponder()) as fake:
        yield fake


# -- 1. writes through a symlink leading out of the workspace --


def test_flush_refuses_a_daily_log_symlinked_outside(tmp_path: Path, server: FakeOpenAI) -> None:
    root = _workspace(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text("- not memdeck's file\n")
    before = _digest(outside)
    (root / "memory" / f"{TODAY}.md").symlink_to(outside)

    done = run_memdeck(
        ["--workspace", str(root), "ask", "--bm25", "--flush", "hi"], memdeck_env(server, tmp_path)
    )

    _no_traceback(done)
    assert _digest(outside) == before
    assert (root / "memory" / f"{TODAY}.md").is_symlink()
    refusals = [line for line in done.stderr.splitlines() if "outside" in line]
    assert any(f"memory/{TODAY}.md" in line for line in refusals), done.stderr


def test_every_write_path_goes_through_the_path_guard(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    outside_log = outside_dir / f"{TODAY}.md"
    outside_log.write_text("- outside log\n")
    outside_memory = tmp_path / "outside-MEMORY.md"
    outside_memory.write_text("# Long-term Memory\n\n- My dog is Max\n")
    (root / "memory" / f"{TODAY}.md").symlink_to(outside_log)
    (root / "MEMORY.md").symlink_to(outside_memory)
    digests = {p: _digest(p) for p in (outside_log, outside_memory)}
    memory = MemoryEngine(Workspace.open(root))
    tools = MemoryTools(memory)
    try:
        for name, arguments in [
            ("append_daily_log", {"content": "a note"}),
            ("save_memory", {"content": "Likes trains"}),
            ("forget_memory", {"query": "My dog is Max"}),
        ]:
            result = tools.execute(name, arguments)
            assert not result.ok and "outside" in result.content["message"], (name, result)
        store = memory.store
        for write in (
            lambda: store.append_daily("- x\n"),
            lambda: store.edit_memory(lambda text: text + "- y\n"),  # consolidation accept
            lambda: store.save_memory_text("- z\n", sha256_bytes(outside_memory.read_bytes())),
            lambda: store.add_entries(EntryBatch(["a fact"], "medium", "auto")),
        ):
            with pytest.raises(PathRefusedError, match="outside"):
                write()
    finally:
        memory.close()
    assert {p: _digest(p) for p in digests} == digests
    assert (root / "MEMORY.md").is_symlink() and (root / "memory" / f"{TODAY}.md").is_symlink()


# -- 2. reads through a symlink leading out of the workspace --


def test_memory_md_symlinked_outside_is_never_read(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    outside = tmp_path / "secrets.env"
    outside.write_text(f"{SECRET}\n")
    (root / "MEMORY.md").symlink_to(outside)

    with FakeOpenAI(FakeOpenAI.tool_call("save_memory", {"content": "Likes trains"}), "ok") as fake:
        env = memdeck_env(fake, tmp_path)
        injected = run_memdeck(["--workspace", str(root), "inject", "--bm25", "password"], env)
        asked = run_memdeck(["--workspace", str(root), "ask", "--bm25", "what is it?"], env)
        prompts = [r.system_prompt or "" for r in fake.chat_requests]
    for process in (injected, asked):
        _no_traceback(process)
        assert SECRET not in process.stdout + process.stderr
    assert injected.returncode == 0
    assert any("MEMORY.md" in line and "outside" in line for line in injected.stderr.splitlines())
    assert prompts and not any("hunter2" in prompt for prompt in prompts)
    # save_memory was refused: the link is still a link, the outside file untouched.
    assert (root / "MEMORY.md").is_symlink()
    assert outside.read_text() == f"{SECRET}\n"


def test_a_symlink_inside_the_workspace_is_followed(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    (root / "notes").mkdir()
    real = root / "notes" / "long-term.md"
    real.write_text("# Long-term Memory\n\n- Prefers tea\n")
    (root / "MEMORY.md").symlink_to(Path("notes") / "long-term.md")
    memory = MemoryEngine(Workspace.open(root))
    try:
        assert "Prefers tea" in memory.store.read_memory().text
        assert MemoryTools(memory).execute("save_memory", {"content": "Likes trains"}).ok
    finally:
        memory.close()
    assert (root / "MEMORY.md").is_symlink()
    assert "Likes trains" in real.read_text() and "Prefers tea" in real.read_text()


# -- 3. symlink loops --


def test_symlink_loops_are_skipped_with_a_warning(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    mem = root / "memory"
    (mem / "2026-11-01.md").write_text("- kayaking on Sunday\n")
    (mem / "a.md").symlink_to("b.md")
    (mem / "b.md").symlink_to("a.md")
    (mem / "d1").symlink_to("d2")
    (mem / "d2").symlink_to("d1")

    ws = Workspace.open(root)
    warnings: list[str] = []
    assert [rel for rel, _ in ws.iter_memory_files(warnings)] == ["memory/2026-11-01.md"]
    assert any("memory/a.md" in w and "loop" in w for w in warnings), warnings
    assert any("memory/d1" in w and "loop" in w for w in warnings), warnings
    for looping in ("memory/a.md", "memory/d1/x.md"):
        with pytest.raises(PathRefusedError, match="loop"):
            ws.resolve_memory_path(looping)

    get = FakeOpenAI.tool_call("memory_get", {"path": "memory/d1/x.md"})
    with FakeOpenAI(get, "done") as fake:
        env = memdeck_env(fake, tmp_path)
        runs = [
            run_memdeck(["--workspace", str(root), *args], env)
            for args in (["reindex"], ["stats"], ["search", "kayaking"], ["ask", "--bm25", "hi"])
        ]
        tool_messages = [m for m in fake.chat_requests[-1].messages if m.get("role") == "tool"]
    for process in runs:
        _no_traceback(process)
        assert process.returncode == 0, process.stderr
    assert "kayaking" in runs[2].stdout
    assert "loop" in runs[0].stderr
    assert tool_messages and "loop" in tool_messages[0]["content"]


# -- 4. appending after bytes that are not UTF-8 --


def test_flush_appends_after_latin1_bytes(tmp_path: Path, server: FakeOpenAI) -> None:
    root = _workspace(tmp_path)
    log = root / "memory" / f"{TODAY}.md"
    log.write_bytes(b"- caf\xe9\n")

    done = run_memdeck(
        ["--workspace", str(root), "ask", "--bm25", "--flush", "hi"], memdeck_env(server, tmp_path)
    )

    _no_traceback(done)
    assert "logged 2 messages" in done.stdout, done.stderr
    data = log.read_bytes()
    assert data.startswith(b"- caf\xe9\n") and b"Summary number 1" in data


# -- 5. an edit changes its entry and nothing else, byte for byte --

ODD_MEMORY = (
    b"\xef\xbb\xbf# Long-term Memory\r\n"
    b"\r\n"
    b"- caf\xe9 cr\xe8me on Sundays\r\n"
    b"- alpha \xe2\x80\xa8 beta gamma\r\n"
    b"- Forget this dentist note\r\n"
    b"  with a continuation line\r\n"
    b"- tab\there and a trailing space \n"
    b"- last line without a newline"
)


def _remove(data: bytes, piece: bytes) -> bytes:
    assert data.count(piece) == 1
    return data.replace(piece, b"")


@pytest.mark.parametrize(
    ("query", "removed"),
    [
        (
            "Forget this dentist note",
            b"- Forget this dentist note\r\n  with a continuation line\r\n",
        ),
        ("alpha", b"- alpha \xe2\x80\xa8 beta gamma\r\n"),
        ("last line without a newline", b"- last line without a newline"),
    ],
)
def test_forget_changes_only_its_entry(tmp_path: Path, query: str, removed: bytes) -> None:
    root = _workspace(tmp_path)
    (root / "MEMORY.md").write_bytes(ODD_MEMORY)
    memory = MemoryEngine(Workspace.open(root))
    try:
        result = MemoryTools(memory).execute("forget_memory", {"query": query})
    finally:
        memory.close()
    assert result.ok, result.content
    assert (root / "MEMORY.md").read_bytes() == _remove(ODD_MEMORY, removed)
    assert any(e["event"] == "forgotten" and query.split()[0] in e["text"] for e in _history(root))


def test_save_keeps_every_existing_byte(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    (root / "MEMORY.md").write_bytes(ODD_MEMORY)
    memory = MemoryEngine(Workspace.open(root))
    try:
        assert MemoryTools(memory).execute("save_memory", {"content": "Likes trains"}).ok
    finally:
        memory.close()
    data = (root / "MEMORY.md").read_bytes()
    assert data.startswith(ODD_MEMORY)
    added = data[len(ODD_MEMORY) :]
    assert added.startswith(b"\r\n- Likes trains <!-- mem ") and added.endswith(b"-->\r\n")


def test_forget_in_a_daily_log_marks_only_its_line(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    log = root / "memory" / "2026-11-01.md"
    original = (
        b"# 2026-11-01\r\n\r\n- caf\xe9 visit\r\n- met Bob at the zoo\r\n- tail \xe2\x80\xa8 x"
    )
    log.write_bytes(original)
    store = MemoryStore(Workspace.open(root))
    entry = next(e for e in store.entries("memory/2026-11-01.md") if "Bob" in e.text)
    assert store.retire_entries([entry], state="forgotten") == [entry]
    head, tail = original.split(b"- met Bob at the zoo")
    data = log.read_bytes()
    assert data.startswith(head) and data.endswith(b" -->" + tail)
    assert b"- met Bob at the zoo <!-- mem state=forgotten -->" in data


# -- 6. a hand edit racing an app write is never lost --

MEMORY = "# Long-term Memory\n\n- My dog is Max\n- Forget the dentist note\n"
STEPS = ("checked", "fsync", "before_swap", "after_swap")


class Editor:
    """A hand edit made at one step of the app's write: tmp+rename, in place, in place through
    a file descriptor opened when the app checked the file ("late"), or in place with the
    file left empty for 30 ms between the truncation and the write ("slow")."""

    def __init__(self, path: Path, step: str, how: str) -> None:
        self.path, self.step, self.how = path, step, how
        self.marker = f"- Hand edit at {step} ({how})"
        self.saved: bytes | None = None
        self._handle: int | None = None

    def __call__(self, step: str, path: Path) -> None:
        if path != self.path or self.saved is not None:
            return
        if self.how == "late" and step == "checked":
            self._handle = os.open(self.path, os.O_RDWR)
        if step != self.step:
            return
        if self.how == "late":
            assert self._handle is not None
            data = os.pread(self._handle, 1 << 20, 0) + f"{self.marker}\n".encode()
            os.ftruncate(self._handle, 0)
            os.pwrite(self._handle, data, 0)
            os.close(self._handle)
        elif self.how == "slow":
            data = self.path.read_bytes() + f"{self.marker}\n".encode()
            handle = open(self.path, "wb")  # noqa: SIM115 - written and closed by the timer

            def write_and_close() -> None:
                handle.write(data)
                handle.close()

            self.timer = threading.Timer(0.03, write_and_close)
            self.timer.start()
        else:
            data = self.path.read_bytes() + f"{self.marker}\n".encode()
            if self.how == "rename":
                tmp = self.path.with_name(".editor-save.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, self.path)
            else:
                with open(self.path, "r+b") as rewritten:
                    rewritten.truncate(0)
                    rewritten.write(data)
        self.saved = data


@pytest.fixture(params=["exchange", "recheck"])
def swap_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run with renameat2(RENAME_EXCHANGE), then with the portable re-check fallback."""
    previous = fileio.RENAME_EXCHANGE_ENABLED
    fileio.RENAME_EXCHANGE_ENABLED = request.param == "exchange"
    yield request.param
    fileio.RENAME_EXCHANGE_ENABLED = previous


def _race(tmp_path: Path, step: str, how: str, write: Callable[[MemoryStore], object]) -> Editor:
    root = _workspace(tmp_path)
    path = root / "MEMORY.md"
    path.write_text(MEMORY)
    store = MemoryStore(Workspace.open(root))
    editor = Editor(store.workspace.root / "MEMORY.md", step, how)
    fileio.write_hook = editor
    try:
        write(store)
    finally:
        fileio.write_hook = None
    assert editor.saved is not None, "the editor never got to save"
    if editor.how == "slow":
        editor.timer.join()
    return editor


HOWS = ("rename", "inplace", "late", "slow")
RACES = [(step, how) for step in STEPS for how in HOWS if (step, how) != ("after_swap", "slow")]


@pytest.mark.parametrize(("step", "how"), RACES)
def test_hand_edit_during_save_survives(
    tmp_path: Path, swap_mode: str, step: str, how: str
) -> None:
    def save(store: MemoryStore) -> None:
        store.add_entry("Likes trains", confidence="high", source="user")

    editor = _race(tmp_path, step, how, save)
    text = editor.path.read_text()
    assert editor.marker in text and "Likes trains" in text and "My dog is Max" in text
    conflicts = [e for e in _history(editor.path.parent) if e["event"] == "write_conflict"]
    if not (step == "after_swap" and how != "late"):
        assert conflicts and conflicts[0]["path"] == "MEMORY.md"


@pytest.mark.parametrize(("step", "how"), RACES)
def test_hand_edit_during_forget_survives(
    tmp_path: Path, swap_mode: str, step: str, how: str
) -> None:
    def forget(store: MemoryStore) -> None:
        entry = next(e for e in store.entries() if "dentist" in e.text)
        store.retire_entries([entry], state="forgotten")

    editor = _race(tmp_path, step, how, forget)
    text = editor.path.read_text()
    assert editor.marker in text and "dentist" not in text and "My dog is Max" in text


@pytest.mark.parametrize(("step", "how"), [(s, h) for s, h in RACES if s != "after_swap"])
def test_hand_edit_during_a_whole_buffer_save_wins(
    tmp_path: Path, swap_mode: str, step: str, how: str
) -> None:
    def save_buffer(store: MemoryStore) -> None:
        state = store.read_memory()
        with pytest.raises(ConcurrentEditError):
            store.save_memory_text("# Replaced by the in-app editor\n", state.content_hash)

    editor = _race(tmp_path, step, how, save_buffer)
    assert editor.path.read_bytes() == editor.saved
    assert not [p for p in editor.path.parent.iterdir() if p.name.startswith(".MEMORY.md.")]


def test_hand_edit_during_consolidation_accept_wins(tmp_path: Path, swap_mode: str) -> None:
    answer = MEMORY + "- Writes Rust at work\n"
    with FakeOpenAI(responder=lambda body: FakeOpenAI.text(answer)) as fake:
        chat = make_engine(tmp_path, make_config(tmp_path, fake, summary_model="fake-summary"))
        try:
            path = chat.memory.workspace.memory_file
            path.write_text(MEMORY)
            proposal = chat.consolidator.propose()
            editor = Editor(path, "before_swap", "rename")
            fileio.write_hook = editor
            try:
                with pytest.raises(StaleProposalError):
                    chat.consolidator.accept(proposal)
            finally:
                fileio.write_hook = None
        finally:
            chat.close()
    assert path.read_bytes() == editor.saved


# -- 9. metadata parsing is linear-time --

_TIMING = """
import json, sys, time
from tui.engine.metadata import split_meta
n = 150_000
lines = {
    "whitespace run": "- x" + " " * n + "y",
    "whitespace in a comment": "- x <!-- mem" + " " * n + "y",
    "comment then spaces": "- x <!-- mem id=1 -->" + " \\t" * (n // 2) + "z",
    "letters in a comment": "- x <!-- mem " + "a" * n + " -->",
    "many comment openers": "- x " + "<!-- mem " * (n // 9),
    "many closers": "- x <!-- mem " + "-->" * (n // 3) + "y",
    "quotes in a comment": "- x <!-- mem " + 'k="v ' * (n // 5) + "-->",
    "pairs in a comment": "- x <!-- mem " + "k=v " * (n // 4) + "-->",
}
times = {}
for name, line in lines.items():
    start = time.perf_counter()
    split_meta(line)
    times[name] = time.perf_counter() - start
print(json.dumps(times))
"""


def test_metadata_parsing_is_linear_time() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _TIMING], cwd=ROOT, capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr
    slow = {name: t for name, t in json.loads(done.stdout).items() if t > 1.0}
    assert not slow, f"150 KB lines should parse in well under a second: {slow}"


# -- 15. two flushes waiting at the MEMORY.md lock write a fact once --


def test_two_flushes_held_at_the_memory_lock_write_a_fact_once(tmp_path: Path) -> None:
    responder = SummaryResponder(facts=["Likes night trains"])
    with FakeOpenAI(responder=responder) as fake:
        chat: ChatEngine = make_engine(tmp_path, make_config(tmp_path, fake))
        try:
            sessions = [chat.sessions.create(f"s{i}").id for i in range(2)]
            for session in sessions:
                add_messages(chat.sessions, session, 2)
            workspace = chat.memory.workspace
            daily = workspace.daily_log(datetime.now().astimezone().date())
            held = lock_for(workspace.memory_file)
            held.acquire()
            try:
                threads = [
                    threading.Thread(target=chat.flusher.flush_session, args=(s,)) for s in sessions
                ]
                for thread in threads:
                    thread.start()
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # both past _new_facts, waiting for the lock
                    if daily.exists() and daily.read_text().count("flush=") == 2:
                        break
                    time.sleep(0.02)
                time.sleep(0.5)
            finally:
                held.release()
            for thread in threads:
                thread.join(timeout=30)
            memory_md = workspace.memory_file.read_text()
        finally:
            chat.close()
    assert responder.count == 2
    assert memory_md.count("Likes night trains") == 1, memory_md
