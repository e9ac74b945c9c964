"""``memdeck sessions --restore`` without an id lists what is in the trash (issue 32, item 6);
with an id it restores that session. ``memdeck`` runs as a real process."""

from __future__ import annotations

import json
from pathlib import Path

from support.chat_support import memdeck_env, run_memdeck
from support.workspaces import write_workspace

from tui.chat.sessions import SessionStore
from tui.chat.trash import trashed_sessions
from tui.engine.workspace import Workspace


def test_sessions_restore_without_an_id_lists_the_trash(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws", "# Long-term Memory\n")
    store = SessionStore(Workspace.open(root))
    env = memdeck_env(None, tmp_path)
    listing = ["--workspace", str(root), "sessions", "--restore"]

    empty = run_memdeck(listing, env)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == "the trash is empty"

    kept = store.create("Kept").id
    gone = store.create("Lisbon plans").id
    store.append_message(gone, "user", "hotels in Alfama?")
    store.delete(gone, force=True)
    again = store.create("Lisbon plans").id
    store.delete(again, force=True)  # a second copy in the trash

    listed = run_memdeck(listing, env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and all("Lisbon plans" in line for line in lines)
    assert any(line.startswith(gone) and "1 msg · 1 not logged" in line for line in lines)
    assert kept not in listed.stdout
    assert "memdeck sessions --restore" in listed.stderr  # how to bring one back

    rows = [
        json.loads(line)
        for line in run_memdeck([*listing, "--json"], env).stdout.splitlines()
    ]
    assert {row["id"] for row in rows} == {gone, again}
    assert all(row["title"] == "Lisbon plans" for row in rows)

    restored = run_memdeck([*listing, gone], env)
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.strip() == f"{gone}: restored (1 not logged)"
    assert store.exists(gone) and [row.id for row in trashed_sessions(store)] == [again]
