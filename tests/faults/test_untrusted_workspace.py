"""Issue 29 D, the workspace's edges: links in memdeck's own folders are never followed out, a
recovery copy is whole or said to have failed, one workspace for every command, a reindex
that always recovers, and a config file too deep to read is one line.

Real ``memdeck`` processes (the command line, ``memdeck mcp`` with the SDK's real client),
real files and SQLite; the fallback places memdeck writes to are under ``tmp_path``.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import sqlean
from support.chat_support import ROOT, memdeck_env, run_memdeck
from support.mcp_support import connected
from support.pty_app import drive_in_a_pty

from tui.chat.activity import ActivityLog, ActivityRecord
from tui.chat.sessions import SessionStore
from tui.chat.state import WorkspaceState
from tui.engine import usage
from tui.engine.engine import MemoryEngine
from tui.engine.fileio import lock_for
from tui.engine.store import MemoryStore, parse_entries
from tui.engine.workspace import LinkRefusedError, PathRefusedError, Workspace

MEMORY = (
    "# Long-term Memory\n\n## Health\n\n- Allergic to penicillin\n- Keeps bees on the allotment\n"
)
#: What a shell rc file looks like to the tests: it must come out of every run byte for byte.
RC_TEXT = "# my shell rc\nexport EDITOR=vi\n"


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    root = tmp_path / name
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    Workspace.open(root)
    return root


def outside_file(tmp_path: Path, name: str = "rc") -> Path:
    """A file outside the workspace (readable by others, as a shell rc is)."""
    target = tmp_path / name
    target.write_text(RC_TEXT, encoding="utf-8")
    target.chmod(0o644)
    return target


def untouched(target: Path) -> bool:
    return (
        target.read_text(encoding="utf-8") == RC_TEXT
        and stat.S_IMODE(target.stat().st_mode) == 0o644
    )


def one_line_error(process: subprocess.CompletedProcess[str]) -> str:
    assert process.returncode != 0, process.stdout
    assert "Traceback" not in process.stderr, process.stderr
    errors = [line for line in process.stderr.splitlines() if line.startswith("memdeck: error")]
    assert len(errors) == 1, process.stderr
    return errors[0]


# -- item 12: links in .memdeck/ and sessions/ are refused, never followed --


async def test_mcp_calls_never_write_through_activity_or_history_links(tmp_path: Path) -> None:
    """The issue's case: ``activity.jsonl`` and ``history.jsonl`` linked to a shell rc file; a
    client searches for ``$(touch X)``, saves and forgets. The rc file is byte for byte as it
    was, and the forget (which could not be put in the audit trail) says so."""
    root = workspace(tmp_path)
    rc = outside_file(tmp_path)
    (root / ".memdeck" / "activity.jsonl").symlink_to(rc)
    (root / ".memdeck" / "history.jsonl").symlink_to(rc)
    async with connected(root, tmp_path) as session:
        await session.call_tool("memory_search", {"query": "$(touch X)"})
        await session.call_tool("save_memory", {"content": "Walks the dog at seven"})
        forgot = await session.call_tool("forget_memory", {"query": "Keeps bees on the allotment"})
    assert untouched(rc)
    said = " ".join(getattr(part, "text", "") for part in forgot.content)
    assert "symbolic link" in said, said
    # The audit copy comes first: with no trail to put it in, nothing was forgotten.
    assert "Keeps bees on the allotment" in (root / "MEMORY.md").read_text(encoding="utf-8")
    assert (root / ".memdeck" / "activity.jsonl").is_symlink()


def test_an_index_link_is_refused_and_its_target_keeps_its_mode(tmp_path: Path) -> None:
    """``index.db`` (or its -wal/-shm side file) linked out: one line, the target neither
    chmod-ed nor written."""
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        root = workspace(tmp_path, f"ws-{name}")
        target = outside_file(tmp_path, f"target-{name}")
        (root / ".memdeck" / name).symlink_to(target)
        process = run_memdeck(
            ["--workspace", str(root), "search", "--bm25", "bees"], memdeck_env(None, tmp_path)
        )
        assert "is a symbolic link" in one_line_error(process)
        assert untouched(target), name


@pytest.mark.parametrize("folder", [".memdeck", "sessions"])
def test_a_linked_own_folder_refuses_the_workspace_in_one_line(tmp_path: Path, folder: str) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / folder).symlink_to(elsewhere, target_is_directory=True)
    process = run_memdeck(
        ["--workspace", str(root), "search", "--bm25", "bees"], memdeck_env(None, tmp_path)
    )
    assert f"{folder} is a symbolic link" in one_line_error(process)
    assert list(elsewhere.iterdir()) == []


def test_every_state_file_refuses_a_link(tmp_path: Path) -> None:
    """Each writer of ``.memdeck/`` and ``sessions/``: the ledger, the activity log, the
    state, the locks, a transcript, the audit trail. The rc file is never written."""
    root = workspace(tmp_path)
    rc = outside_file(tmp_path)
    state = root / ".memdeck"
    for name in ("usage.jsonl", "activity.jsonl", "activity.jsonl.tmp", "state.json"):
        (state / name).symlink_to(rc)
    ws = Workspace.open(root)
    usage.record(root, purpose="chat", model="m", prompt_tokens=1, completion_tokens=1)
    assert usage.read_counted(root) == ([], 0)
    log = ActivityLog(root, max_bytes=10)
    log.append(
        ActivityRecord("2026-11-26T10:00:00", "evil", "tool", "memory_search", "q", True, "")
    )
    assert log.read() == []
    with pytest.raises(LinkRefusedError):
        WorkspaceState(ws).mark_active(date(2026, 11, 26), None)
    assert WorkspaceState(ws).read() == {}
    # A lock file, then the locks folder itself.
    (state / "locks").mkdir(exist_ok=True)
    (state / "locks" / "MEMORY.md.lock").symlink_to(rc)
    with pytest.raises(LinkRefusedError):
        lock_for(root / "MEMORY.md")
    # A transcript.
    sessions = SessionStore(ws)
    session_id = sessions.create().id
    transcript = sessions.path(session_id)
    transcript.unlink()
    transcript.symlink_to(rc)
    with pytest.raises(LinkRefusedError):
        sessions.append_message(session_id, "user", "hello")
    with pytest.raises(OSError, match="symbolic link"):
        sessions.load(session_id)
    assert sessions.list() == []  # listed sessions are the real ones: the app still opens
    assert untouched(rc)


def test_a_memory_link_into_sessions_is_refused_like_one_into_memdeck(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "sessions").mkdir()
    (root / "sessions" / "abc.md").write_text("- a transcript line\n", encoding="utf-8")
    (root / "memory" / "2026-11-01.md").symlink_to(root / "sessions" / "abc.md")
    ws = Workspace.open(root)
    with pytest.raises(PathRefusedError, match="memdeck's own files"):
        ws.resolve_memory_path("memory/2026-11-01.md")
    warnings: list[str] = []
    assert [rel for rel, _ in ws.iter_memory_files(warnings)] == ["MEMORY.md"]
    assert any("memory/2026-11-01.md" in warning for warning in warnings)


# -- item 16: a reindex always recovers --


def _cache_rows(db: Path) -> list[tuple[str, int]]:
    conn = sqlean.connect(str(db))
    try:
        rows: list[tuple[str, int]] = conn.execute(
            "SELECT hash, length(embedding) FROM embedding_cache"
        ).fetchall()
        return rows
    finally:
        conn.close()


@pytest.mark.parametrize(
    "bad",
    [b"\0" * 100, b"\0" * 1537, b"\xff\xff\xff\x7f" * 384],
    ids=["another-width", "no-float32-width", "nan"],
)
def test_a_cache_row_that_does_not_fit_the_model_is_dropped_by_reindex(
    tmp_path: Path, bad: bytes
) -> None:
    """One cache row of the wrong width (or a width no float32 has, or NaN): the reindex the
    error names succeeds, embeds that text again and keeps no row that does not fit."""
    root = workspace(tmp_path)
    env = memdeck_env(None, tmp_path)
    first = run_memdeck(["--workspace", str(root), "reindex"], env)
    assert first.returncode == 0, first.stderr
    db = root / ".memdeck" / "index.db"
    assert {width for _, width in _cache_rows(db)} == {384 * 4}
    conn = sqlean.connect(str(db))
    in_use = conn.execute("SELECT hash FROM chunks WHERE text LIKE '%penicillin%'").fetchone()
    conn.execute("UPDATE embedding_cache SET embedding = ? WHERE hash = ?", (bad, in_use[0]))
    conn.commit()
    conn.close()
    # The bad row is embedded again (1), then the reindex after it finds a cache that fits (0).
    for embedded in (1, 0):
        again = run_memdeck(["--workspace", str(root), "reindex"], env)
        assert again.returncode == 0, again.stderr
        assert f"({embedded} embedded" in again.stdout, again.stdout
    assert {width for _, width in _cache_rows(db)} == {384 * 4}
    found = run_memdeck(["--workspace", str(root), "search", "penicillin"], env)
    assert found.returncode == 0 and "Allergic to penicillin" in found.stdout, found.stderr


def test_an_index_that_is_a_folder_is_moved_aside_in_one_line(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / ".memdeck" / "index.db").mkdir()
    (root / ".memdeck" / "index.db" / "inside").write_text("kept", encoding="utf-8")
    env = memdeck_env(None, tmp_path)
    reindexed = run_memdeck(["--workspace", str(root), "reindex"], env)
    assert reindexed.returncode == 0, reindexed.stderr
    notices = [line for line in reindexed.stderr.splitlines() if "moved aside" in line]
    assert len(notices) == 1 and "not a file" in notices[0], reindexed.stderr
    found = run_memdeck(["--workspace", str(root), "search", "--bm25", "bees"], env)
    assert found.returncode == 0 and "Keeps bees" in found.stdout, found.stderr
    assert "moved aside" not in found.stderr
    aside = [p for p in (root / ".memdeck").iterdir() if p.name.startswith("index.db.corrupt-")]
    assert len(aside) == 1 and (aside[0] / "inside").read_text(encoding="utf-8") == "kept"


# -- item 14: one workspace for every command --


def test_every_command_opens_the_workspace_the_config_names(tmp_path: Path) -> None:
    """``[memory] workspace`` in config.toml: search, inject, reindex, stats and forgotten all
    open it (``--restore`` acts on its trail); the platform default is never created."""
    root = workspace(tmp_path, "configured")
    engine = MemoryEngine(root)
    bees = [e for e in parse_entries(MEMORY) if "bees" in e.text]
    assert engine.forget(bees)[0]
    engine.close()
    config = tmp_path / "config.toml"
    config.write_text(f'[memory]\nworkspace = "{root}"\n', encoding="utf-8")
    default = tmp_path / "platform-data"
    env = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(config), XDG_DATA_HOME=str(default))
    outputs = {}
    for command in (
        ["search", "--bm25", "penicillin"],
        ["inject", "--bm25", "penicillin"],
        ["reindex"],
        ["stats", "--json"],
        ["forgotten"],
        ["forgotten", "--restore", "1"],
    ):
        process = run_memdeck(command, env)
        assert process.returncode == 0, (command, process.stderr)
        outputs[" ".join(command)] = process.stdout
    assert "Allergic to penicillin" in outputs["search --bm25 penicillin"]
    assert "Allergic to penicillin" in outputs["inject --bm25 penicillin"]
    assert json.loads(outputs["stats --json"])["workspace"] == str(root)
    assert "Keeps bees on the allotment" in outputs["forgotten"]
    assert "restored" in outputs["forgotten --restore 1"]
    assert "Keeps bees on the allotment" in (root / "MEMORY.md").read_text(encoding="utf-8")
    assert not default.exists()


def test_the_workspace_is_chosen_in_one_order_for_every_command(tmp_path: Path) -> None:
    """--workspace, then MEMDECK_WORKSPACE, then the config file, then the platform default."""
    flag, variable, configured = (workspace(tmp_path, n) for n in ("flag", "env", "config"))
    config = tmp_path / "config.toml"
    config.write_text(f'[memory]\nworkspace = "{configured}"\n', encoding="utf-8")
    base = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(config))

    def opened(args: list[str], env: dict[str, str]) -> str:
        process = run_memdeck([*args, "stats", "--json"], env)
        assert process.returncode == 0, process.stderr
        return str(json.loads(process.stdout)["workspace"])

    with_variable = {**base, "MEMDECK_WORKSPACE": str(variable)}
    assert opened(["--workspace", str(flag)], with_variable) == str(flag)
    assert opened([], with_variable) == str(variable)
    assert opened([], base) == str(configured)
    # `memdeck usage` (a chat command) resolves it the same way.
    usage_run = run_memdeck(["usage", "--json"], base)
    assert usage_run.returncode == 0, usage_run.stderr


# -- item 17: a config file nested too deep is one line --


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * 500 + "]" * 500 + "\n", "[llm]\nx = " + "{a = " * 500 + "1" + "}" * 500 + "\n"],
    ids=["arrays", "inline-tables"],
)
def test_a_config_nested_500_deep_is_one_line_naming_the_file(tmp_path: Path, text: str) -> None:
    root = workspace(tmp_path)
    config = tmp_path / "deep-config.toml"
    config.write_text(text, encoding="utf-8")
    env = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(config))
    for command in (["search", "--bm25", "bees"], ["usage"]):
        line = one_line_error(run_memdeck(["--workspace", str(root), *command], env))
        assert str(config) in line and "nested too deeply" in line, line


# -- item 13: a recovery copy is whole, or it is said to have failed --

#: Keeps 40 KB of unsaved editor text the way the app's SIGTERM handler does, with files
#: limited to 12 KB (RLIMIT_FSIZE: a write past it is cut short, then fails, as on a full
#: disk); prints where the copy went, or the error.
KEEP_UNDER_A_SIZE_LIMIT = r"""
import resource, signal, sys
from tui.engine.store import MemoryStore
from tui.engine.workspace import Workspace
store = MemoryStore(Workspace.open(sys.argv[1]))
resource.setrlimit(resource.RLIMIT_FSIZE, (12 * 1024, 12 * 1024))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
try:
    print("kept", store.save_recovery_copy("- unsaved line\n" * 2800))
except OSError as exc:
    print("failed", exc)
"""

#: Forty kilobytes of unsaved MEMORY.md edits.
UNSAVED = "- unsaved line\n" * 2800


def keep_in_a_process(root: Path, env: dict[str, str]) -> str:
    process = subprocess.run(
        [sys.executable, "-c", KEEP_UNDER_A_SIZE_LIMIT, str(root)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0 and "Traceback" not in process.stderr, process.stderr
    return process.stdout.strip()


def test_a_recovery_copy_cut_short_is_never_said_to_be_kept(tmp_path: Path) -> None:
    """Every place is "full": the answer is a failure naming both places, and no cut-short
    copy is left behind to be taken for the edits."""
    root = workspace(tmp_path)
    state_home = tmp_path / "state"
    said = keep_in_a_process(root, memdeck_env(None, tmp_path, XDG_STATE_HOME=str(state_home)))
    assert said.startswith("failed"), said
    assert str(root / ".memdeck" / "recovery") in said and str(state_home) in said, said
    left = [*(root / ".memdeck").rglob("MEMORY.md.*"), *state_home.rglob("MEMORY.md.*")]
    assert left == []


def test_a_recovery_copy_the_workspace_cannot_take_goes_to_the_state_folder(
    tmp_path: Path,
) -> None:
    """The workspace's recovery folder cannot be used (a link, refused): the copy is kept
    whole, private, in the platform's state folder, and the answer says so."""
    root = workspace(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".memdeck" / "recovery").symlink_to(elsewhere, target_is_directory=True)
    state_home = tmp_path / "state"
    store = MemoryStore(Workspace.open(root))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state_home))
        copy = store.save_recovery_copy(UNSAVED)
    assert copy.parent == state_home / "memdeck" / "recovery"
    assert copy.read_text(encoding="utf-8") == UNSAVED
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("state_folder", ["usable", "unusable"])
def test_a_terminated_app_says_where_its_unsaved_edits_went(
    tmp_path: Path, state_folder: str
) -> None:
    """SIGTERM with a dirty MEMORY.md buffer while the workspace's recovery folder cannot be
    used: the edits are kept whole in the platform's state folder and the app's last words
    name that file; when that folder cannot be used either, the last words are the edits."""
    root = workspace(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".memdeck" / "recovery").symlink_to(elsewhere, target_is_directory=True)
    state_home = tmp_path / "state"
    if state_folder == "unusable":
        state_home.write_text("a file where the state folder should be", encoding="utf-8")
    env = memdeck_env(None, tmp_path, XDG_STATE_HOME=str(state_home))
    typed = "- typed before the end"
    keys = [
        (b"\x1b[15~", b"MEMORY.md \xc2\xb7 loaded"),  # F5
        (b"\x1b[15~", b"^s save"),  # F5 again if the editor did not get the focus
        (b"\x1b[1;5F", None),  # ctrl+end
        (b"\r" + typed.encode(), None),
    ]
    screen = drive_in_a_pty(root, env, keys, typed.encode())
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    assert list(elsewhere.iterdir()) == []
    last_words = b"".join(screen.split())  # the terminal may wrap lines
    if state_folder == "unusable":
        said = last_words[last_words.rindex(b"couldnotbekept") :]
        assert b"heretheyare:" in said and b"".join(typed.encode().split()) in said, screen[-2000:]
        assert b"".join(b"Allergic to penicillin".split()) in said
        return
    copies = list((state_home / "memdeck" / "recovery").glob("MEMORY.md.*"))
    assert len(copies) == 1, screen[-2000:]
    kept = copies[0].read_text(encoding="utf-8")
    assert kept.startswith(MEMORY.rstrip("\n")) and typed in kept
    assert b"keptin" + str(copies[0]).encode() in last_words, screen[-2000:]


def test_a_full_recovery_folder_sends_the_whole_copy_to_the_state_folder(tmp_path: Path) -> None:
    """The issue's case on a real full disk: ``.memdeck/recovery`` is a 16 KB tmpfs, the
    buffer 40 KB. The cut-short copy is removed and the whole one is in the state folder."""
    root = workspace(tmp_path)
    recovery = root / ".memdeck" / "recovery"
    recovery.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k,mode=0700", "tmpfs", str(recovery)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip("no tmpfs can be mounted here (the size-limit test covers the cut)")
    try:
        state_home = tmp_path / "state"
        store = MemoryStore(Workspace.open(root))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_STATE_HOME", str(state_home))
            copy = store.save_recovery_copy(UNSAVED)
        assert list(recovery.iterdir()) == []
    finally:
        subprocess.run(["umount", str(recovery)], check=True)
    assert copy.parent == state_home / "memdeck" / "recovery"
    assert copy.read_text(encoding="utf-8") == UNSAVED
