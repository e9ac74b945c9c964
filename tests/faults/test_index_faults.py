"""Fault suite for issue 8, the index half: the SQLite index is disposable, but "locked" is never
"corrupt", a rebuild by another process is followed, bad numbers get one clear line.

Real files, real processes, real SQLite (sqlean + sqlite-vec). Waits are bounded polls, never
speed assertions; a lock is held "longer than the busy timeout" by holding it until told to let
go, not by timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlean
from support.chat_support import ROOT, memdeck_env, run_memdeck, start_memdeck
from support.fakeopenai import Reply

from tui.engine.embeddings import Embedder, count_tokens_batch
from tui.engine.engine import MemoryEngine
from tui.engine.index import MemoryIndex
from tui.engine.index_db import IndexLockedError, _IndexReplaced
from tui.engine.workspace import Workspace

#: Upper bound for anything a test waits for; a hang fails instead of blocking forever.
WAIT_S = 60.0

MEMORY = "# Long-term Memory\n\n- Keeps bees on the allotment behind the station\n"

#: Holds ``BEGIN EXCLUSIVE`` on the index (with a row written in it) until a line on stdin.
HOLDER = r"""
import sys
import sqlean
conn = sqlean.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('held_by_test', 'yes')")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
print("committed", flush=True)
"""


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    return root


def _indexed_workspace(tmp_path: Path) -> Path:
    root = _workspace(tmp_path)
    engine = MemoryEngine(root)
    engine.sync(embed=False)
    engine.close()
    return root


def _identity(path: Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _no_traceback(process: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in process.stderr, process.stderr
    assert "Traceback" not in process.stdout, process.stdout


class Holder:
    """A separate process holding the index's write lock until :meth:`release`."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert self.process.stderr is not None
        assert line.strip() == "locked", line + self.process.stderr.read()

    def release(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        out, err = self.process.communicate(timeout=WAIT_S)
        assert self.process.returncode == 0 and "committed" in out, err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.kill()


def _committed_by_holder(db: Path) -> bool:
    conn = sqlean.connect(str(db))
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'held_by_test'").fetchone()
    finally:
        conn.close()
    return row is not None


def _moved_aside(root: Path) -> list[Path]:
    return sorted((root / ".memdeck").glob("index.db.corrupt-*"))


# -- 7. a locked index is waited for, then refused in one line; never moved aside --


def test_a_locked_index_is_not_moved_aside_on_open_or_sync(
    tmp_path: Path, holders: list[Holder]
) -> None:
    root = _indexed_workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    workspace = Workspace.open(root)
    # Opened before the lock is taken: a later write must fail clearly, not as "corrupt".
    early = MemoryIndex(workspace, Embedder(), count_tokens_batch, busy_timeout=0.2)
    before = _identity(db)
    holder = Holder(db)
    holders.append(holder)

    with pytest.raises(IndexLockedError) as opening:
        MemoryIndex(workspace, Embedder(), count_tokens_batch, busy_timeout=0.2)
    message = str(opening.value)
    assert "locked" in message and "\n" not in message and str(db) in message

    (root / "memory" / "2026-01-02.md").write_text("- Bought a second hive\n", encoding="utf-8")
    with pytest.raises(IndexLockedError):
        early.sync(embed=False)
    early.close()

    assert _identity(db) == before and not _moved_aside(root)
    holder.release()
    assert _committed_by_holder(db)  # the holder's transaction landed in the live file
    after = MemoryIndex(workspace, Embedder(), count_tokens_batch, busy_timeout=0.2)
    assert after.sync(embed=False).files_changed == 1 and not after.notices
    after.close()


def test_cli_search_on_a_locked_index_fails_in_one_line(
    tmp_path: Path, holders: list[Holder]
) -> None:
    root = _indexed_workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    before = _identity(db)
    holder = Holder(db)
    holders.append(holder)

    # The default busy timeout (5 s) runs out: the lock is held until released below.
    process = run_memdeck(
        ["--workspace", str(root), "search", "--bm25", "bees"], memdeck_env(None, tmp_path)
    )

    _no_traceback(process)
    assert process.returncode != 0
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memdeck: "), process.stderr
    assert "locked" in lines[0] and "moved aside" not in lines[0]
    assert _identity(db) == before and not _moved_aside(root)
    holder.release()
    assert _committed_by_holder(db)


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.path.realpath(fd) == str(path.resolve()) for fd in fds.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see open files")
def test_cli_search_waits_for_a_short_lock(tmp_path: Path, holders: list[Holder]) -> None:
    root = _indexed_workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    holder = Holder(db)
    holders.append(holder)
    process = start_memdeck(
        ["--workspace", str(root), "search", "--bm25", "bees"], memdeck_env(None, tmp_path)
    )
    try:
        # Let go once the command has the index open (it is then waiting for the lock).
        deadline = time.monotonic() + WAIT_S
        while not _has_open(process.pid, db) and process.poll() is None:
            assert time.monotonic() < deadline, "memdeck never opened the index"
            time.sleep(0.02)
        time.sleep(0.3)
        holder.release()
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "Traceback" not in err and "allotment" in out
    assert not _moved_aside(root) and _committed_by_holder(db)


def test_a_non_database_file_is_still_moved_aside(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    (root / ".memdeck").mkdir()
    (root / ".memdeck" / "index.db").write_bytes(b"this is not a database" * 100)
    engine = MemoryEngine(root)
    try:
        assert any("unreadable" in notice for notice in engine.notices)
        engine.sync(embed=False)
        assert engine.search("allotment").results
        assert len(_moved_aside(root)) == 1
    finally:
        engine.close()


# -- 8. a rebuild by another engine or process is followed --


def _live_chunks_with(db: Path, word: str) -> int:
    conn = sqlean.connect(str(db))
    try:
        count: int = conn.execute(
            "SELECT count(*) FROM chunks WHERE text LIKE ?", (f"%{word}%",)
        ).fetchone()[0]
        return count
    finally:
        conn.close()


def _found(engine: MemoryEngine, query: str) -> bool:
    return any(query in r.text for r in engine.search(query, min_score=0.0).results)


def test_a_reindex_by_another_engine_is_followed(tmp_path: Path, embedder: Embedder) -> None:
    root = _workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    app = MemoryEngine(root, embedder=embedder)
    app.sync()
    assert _found(app, "allotment")
    generation = app.index.generation

    other = MemoryEngine(root, embedder=embedder)
    other.reindex()
    assert other.index.generation == generation + 1
    (root / "memory" / "2026-01-02.md").write_text("- Saw a quokka at the zoo\n", encoding="utf-8")
    other.sync()

    # The app reads the rebuilt file: it finds what the other engine indexed after the rebuild.
    assert _found(app, "quokka")
    assert app.index.generation == generation + 1
    # ... and its own writes land in the live file, where the other engine sees them.
    (root / "memory" / "2026-01-03.md").write_text(
        "- Painted the narwhal mural\n", encoding="utf-8"
    )
    app.sync()
    assert _live_chunks_with(db, "narwhal") == 1
    assert _found(other, "narwhal") and _found(app, "narwhal")
    assert app.index.pending_embeddings() == 0
    other.close()
    app.close()


def test_a_write_started_on_a_replaced_file_is_redone_on_the_live_one(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = _workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    app = MemoryEngine(root, embedder=embedder)
    app.sync()
    MemoryEngine(root, embedder=embedder).reindex()  # swapped in after app's last check
    # A write transaction taken on the old file notices the swap before writing anything.
    with pytest.raises(_IndexReplaced), app.index._writing() as conn:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('stale', 'write')")
    # sync_file redoes it on the live file (the check before each call reopens it).
    (root / "MEMORY.md").write_text(MEMORY + "- Repaired the narwhal gate\n", encoding="utf-8")
    assert app.index.sync_file("MEMORY.md").files_changed == 1
    assert _live_chunks_with(db, "narwhal gate") == 1 and not app.index.replaced()
    app.close()


def test_memdeck_reindex_in_another_process_is_followed(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    db = root / ".memdeck" / "index.db"
    app = MemoryEngine(root)  # the app before its model is loaded: BM25 only
    app.sync()
    assert _found(app, "allotment")

    process = run_memdeck(["--workspace", str(root), "reindex"], memdeck_env(None, tmp_path))
    _no_traceback(process)
    assert process.returncode == 0, process.stderr

    (root / "memory" / "2026-01-03.md").write_text(
        "- Painted the narwhal mural\n", encoding="utf-8"
    )
    app.index.sync_file("memory/2026-01-03.md", embed=False)
    assert _live_chunks_with(db, "narwhal") == 1
    assert _found(app, "narwhal") and _found(app, "allotment")
    app.close()


# -- numeric options of search and inject --


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["search", "--limit", "nan", "q"], "--limit must be"),
        (["search", "--limit", "-3", "q"], "--limit must be"),
        (["search", "--limit", "100000000000000000000", "q"], "--limit must be"),
        (["search", "--min-score", "nan", "q"], "--min-score must be"),
        (["search", "--min-score", "-0.5", "q"], "--min-score must be"),
        (["search", "--threshold", "inf", "q"], "--threshold must be"),
        (["search", "--threshold", "7", "q"], "--threshold must be"),
        (["inject", "--budget", "-1", "q"], "--budget must be"),
        (["inject", "--budget", "nan", "q"], "--budget must be"),
        (["inject", "--budget", "1e300", "q"], "--budget must be"),
    ],
)
def test_bad_numbers_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    from tui.cli import main

    root = _workspace(tmp_path)
    code = main(["--workspace", str(root), *args])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1, captured.err
    assert lines[0].startswith("memdeck: error: ") and says in lines[0]
    assert not (root / ".memdeck" / "index.db").exists()  # refused before opening anything


def test_bad_numbers_as_a_process(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    process = run_memdeck(
        ["--workspace", str(root), "search", "--min-score", "NaN", "bees"],
        memdeck_env(None, tmp_path),
    )
    _no_traceback(process)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "memdeck: error: --min-score must be a number from 0 to 1, not nan"
    ]
    ok = run_memdeck(
        ["--workspace", str(root), "search", "--bm25", "--limit", "2", "--min-score", "0", "bees"],
        memdeck_env(None, tmp_path),
    )
    assert ok.returncode == 0 and "allotment" in ok.stdout, ok.stderr


# -- the MEMORY.md editor when the path guard refuses MEMORY.md --


async def test_editor_save_refused_by_the_path_guard_says_why(tmp_path: Path) -> None:
    from support.pilot import PanelHost, text_of, wait_until
    from textual.widgets import Static

    from tui.app.panels import MemoryEditor

    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("- not memdeck's file\n", encoding="utf-8")
    (root / "MEMORY.md").symlink_to(outside)
    engine = MemoryEngine(root)
    app = PanelHost(lambda: MemoryEditor(engine))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            editor = app.query_one(MemoryEditor)
            status = editor.query_one("#memory-status", Static)
            await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md read")
            assert "outside the workspace" in text_of(status)  # said at once, not at save
            area = editor.text_area
            area.focus()
            await pilot.press(*"- typed here")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not editor._saving, "the save to finish")
            await wait_until(pilot, lambda: bool(app._notifications), "a notification")
            shown = text_of(status)
            assert "not saved" in shown and "outside the workspace" in shown
            assert "saving" not in shown and "_save" not in shown
            notes = [n.message for n in app._notifications]
            assert any("outside the workspace" in n and "\n" not in n for n in notes), notes
            assert editor.is_dirty  # the edit is kept in the buffer
    finally:
        engine.close()
    assert outside.read_text(encoding="utf-8") == "- not memdeck's file\n"


# -- consolidation over a MEMORY.md holding a byte that is not UTF-8 --


def test_consolidation_accepts_a_memory_file_with_a_non_utf8_byte(tmp_path: Path) -> None:
    from support.chat_support import make_config, make_engine
    from support.fakeopenai import FakeOpenAI

    from tui.engine.fileio import sha256_bytes

    answer = "# Long-term Memory\n\n- Caf\ufffd au lait every morning\n- Keeps two hives now\n"

    def respond(body: dict[str, Any]) -> Reply | None:
        system = " ".join(
            str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system"
        )
        if "memory consolidation assistant" in system:
            return FakeOpenAI.text(answer)
        return None

    raw = b"# Long-term Memory\n\n- Caf\xe9 au lait every morning\n"
    with FakeOpenAI(responder=respond) as server:
        chat = make_engine(tmp_path, make_config(tmp_path, server, summary_model="fake-summary"))
        try:
            memory_file = chat.memory.workspace.root / "MEMORY.md"
            memory_file.write_bytes(raw)
            proposal = chat.consolidator.propose()
            assert proposal.base_hash == sha256_bytes(raw)
            result = chat.consolidator.accept(proposal)  # was: always refused as stale
            assert result.written
            assert "Keeps two hives now" in memory_file.read_text(encoding="utf-8")

            # A real change on disk since the proposal is still refused.
            from tui.chat.consolidation import StaleProposalError

            memory_file.write_bytes(raw)
            again = chat.consolidator.propose()
            memory_file.write_bytes(raw + b"- Hand edit \xff\n")
            with pytest.raises(StaleProposalError):
                chat.consolidator.accept(again)
            assert memory_file.read_bytes() == raw + b"- Hand edit \xff\n"
        finally:
            chat.close()
