"""``memdeck sync``: two workspaces carry their memory through a local bare repository
(``file://``, no network). History is read back with the plain ``git`` command."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from support.chat_support import memdeck_env, run_memdeck

from tui.engine.engine import MemoryEngine
from tui.engine.git_sync import merge_lines, sync
from tui.engine.history_records import HistoryError
from tui.engine.workspace import MEMORY_FILE, Workspace

SEED = "# Long-term Memory\n\n- line one\n- line two\n- line three\n- line four\n- line five\n"


def git(root: Path, *args: str) -> str:
    """The plain ``git`` command's output in ``root``."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def sources(root: Path) -> list[str]:
    """Each commit's subject and Memdeck-Source, newest first."""
    out = git(root, "log", "--format=%s|%(trailers:key=Memdeck-Source,valueonly,separator=)")
    return [line for line in out.splitlines() if line]


def remote_main(bare: Path) -> str | None:
    repo = pygit2.Repository(str(bare))
    ref = repo.references.get("refs/heads/main")
    return None if ref is None else str(ref.target)


def edit(engine: MemoryEngine, old: str, new: str) -> None:
    engine.store.edit_memory(lambda text: text.replace(old, new))


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """An empty bare repository, as a user makes one for their memory."""
    bare = tmp_path / "memory.git"
    pygit2.init_repository(str(bare), bare=True)
    return bare


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    """Two machines' workspaces, A and B."""
    engines = tuple(
        MemoryEngine(Workspace.open(tmp_path / name, create=True), history="on")
        for name in ("A", "B")
    )
    yield engines[0], engines[1]
    for engine in engines:
        engine.close()


def seeded(a: MemoryEngine, b: MemoryEngine, url: str) -> None:
    """A writes SEED, both sync: the two workspaces share it."""
    a.store.edit_memory(lambda _text: SEED)
    sync(a, url)
    sync(b, url)
    assert (b.workspace.root / MEMORY_FILE).read_text() == SEED


def test_a_memory_saved_on_one_machine_reaches_the_other(
    machines: tuple[MemoryEngine, MemoryEngine], remote: Path, tmp_path: Path
) -> None:
    a, b = machines
    url = f"file://{remote}"
    a.save_entry("Likes oolong tea in the morning", confidence="high", source="user")
    a.store.append_daily("- Booked the flights to Lisbon")

    first = sync(a, url)

    assert first.created and first.pushed >= 1 and first.pulled == 0
    assert first.describe().startswith("pushed ")
    assert remote_main(remote) == git(a.workspace.root, "rev-parse", "HEAD").strip()

    # B syncs as a user does: `memdeck sync`, a real process, the remote from config.toml.
    config = tmp_path / "config.toml"
    config.write_text(f'[history]\nmode = "on"\nremote = "{url}"\n')
    env = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(config))
    done = run_memdeck(["--workspace", str(b.workspace.root), "sync"], env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("pulled ")
    assert "Likes oolong tea" in (b.workspace.root / MEMORY_FILE).read_text()
    assert [p.name for p in (b.workspace.root / "memory").glob("*.md")] == [
        p.name for p in (a.workspace.root / "memory").glob("*.md")
    ]
    assert git(b.workspace.root, "rev-parse", "HEAD") == git(a.workspace.root, "rev-parse", "HEAD")
    assert git(b.workspace.root, "status", "--porcelain") == ""

    found = run_memdeck(
        ["--workspace", str(b.workspace.root), "search", "oolong tea", "--json", "--bm25"], env
    )
    assert found.returncode == 0, found.stderr
    assert any("oolong" in r["text"] for r in json.loads(found.stdout)["results"])


def test_the_index_follows_what_a_pull_wrote(
    machines: tuple[MemoryEngine, MemoryEngine], remote: Path
) -> None:
    a, b = machines
    url = str(remote)  # a plain path works as well as file://
    sync(b, url)
    a.save_entry(
        "The bike lock code is kept in the blue notebook", confidence="high", source="user"
    )
    sync(a, url)
    heard: list[tuple[str, ...]] = []
    b.on_change(lambda change: heard.append(change.paths))

    outcome = sync(b, url)

    assert outcome.files == (MEMORY_FILE,)
    assert heard == [(MEMORY_FILE,)]  # one memory change, published once
    hits = b.search("bike lock notebook", min_score=0).results
    assert any("blue notebook" in hit.text for hit in hits)


def test_edits_on_different_lines_merge_cleanly_as_one_sync_commit(
    machines: tuple[MemoryEngine, MemoryEngine], remote: Path
) -> None:
    a, b = machines
    url = f"file://{remote}"
    seeded(a, b, url)
    edit(a, "- line two", "- line two, edited on A")
    edit(b, "- line four", "- line four, edited on B")
    b.save_entry("Has a cat called Tom", confidence="high", source="user")
    a.save_entry("Lives in Lisbon", confidence="high", source="user")  # both append: no conflict

    assert sync(b, url).pushed == 2
    before = sources(a.workspace.root)
    merged = sync(a, url)
    assert sync(b, url).pulled == 3  # A's two changes and the merge

    assert merged.pulled == 2 and merged.pushed == 3 and not merged.conflicts
    assert merged.describe() == "pulled 2 changes, pushed 3"
    text = (a.workspace.root / MEMORY_FILE).read_text()
    assert text == (b.workspace.root / MEMORY_FILE).read_text()
    for wanted in ("line two, edited on A", "line four, edited on B", "Tom", "Lisbon"):
        assert text.count(wanted) == 1
    assert "<<<<<<<" not in text
    new = sources(a.workspace.root)[: len(sources(a.workspace.root)) - len(before)]
    assert [line for line in new if line.endswith("|sync")] == [new[0]]  # ONE sync commit
    assert new[0].startswith("sync: merge of 2 changes")
    assert len(git(a.workspace.root, "log", "-1", "--format=%P").split()) == 2  # a merge
    for root in (a.workspace.root, b.workspace.root):
        assert git(root, "status", "--porcelain") == ""


def test_the_same_line_changed_on_both_keeps_both_versions_and_pushes_once_resolved(
    machines: tuple[MemoryEngine, MemoryEngine], remote: Path, tmp_path: Path
) -> None:
    a, b = machines
    url = f"file://{remote}"
    seeded(a, b, url)
    edit(a, "- line three", "- line three, as A says")
    edit(b, "- line three", "- line three, as B says")
    sync(b, url)
    pushed_by_b = remote_main(remote)
    env = memdeck_env(None, tmp_path, MEMDECK_CONFIG=str(tmp_path / "none.toml"))
    command = ["--workspace", str(a.workspace.root), "sync", "--remote", url]

    done = run_memdeck(command, env)

    assert done.returncode == 1
    advice = done.stderr.strip().splitlines()
    assert len(advice) == 1 and "MEMORY.md" in advice[0] and "memdeck sync" in advice[0]
    text = (a.workspace.root / MEMORY_FILE).read_text()
    assert "<<<<<<< this machine\n- line three, as A says\n=======\n" in text
    assert "- line three, as B says\n>>>>>>> remote\n" in text
    assert text.count("- line five") == 1  # the rest once
    assert git(a.workspace.root, "status", "--porcelain") == ""  # committed...
    assert sources(a.workspace.root)[0].endswith("|sync")
    assert remote_main(remote) == pushed_by_b  # ...not pushed

    again = run_memdeck(command, env)  # not resolved yet: still nothing pushed
    assert again.returncode == 1 and remote_main(remote) == pushed_by_b

    start, end = text.index("<<<<<<<"), text.index(">>>>>>> remote\n") + len(">>>>>>> remote\n")
    resolved = text[:start] + "- line three, as A and B agree\n" + text[end:]
    (a.workspace.root / MEMORY_FILE).write_text(resolved)  # the user, in any editor
    done = run_memdeck(command, env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("pushed ")
    assert sources(a.workspace.root)[0].endswith("|outside")  # the resolution, as it was made
    assert sync(b, url).files == (MEMORY_FILE,)
    assert (b.workspace.root / MEMORY_FILE).read_text() == resolved


def test_an_unreachable_remote_is_one_line_and_changes_nothing(
    machines: tuple[MemoryEngine, MemoryEngine], tmp_path: Path
) -> None:
    a, _b = machines
    a.save_entry("Keeps the spare key under the blue pot", confidence="high", source="user")
    (a.workspace.root / MEMORY_FILE).write_text(SEED)  # an outside edit, not committed yet
    head = git(a.workspace.root, "rev-parse", "HEAD")
    env = memdeck_env(None, tmp_path)

    for missing in (f"file://{tmp_path}/nowhere.git", str(tmp_path / "nowhere")):
        done = run_memdeck(["--workspace", str(a.workspace.root), "sync", "--remote", missing], env)

        assert done.returncode == 1
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1
        assert "cannot reach the remote" in done.stderr
    assert git(a.workspace.root, "rev-parse", "HEAD") == head
    assert (a.workspace.root / MEMORY_FILE).read_text() == SEED
    with pytest.raises(HistoryError, match="cannot reach"):
        sync(a, f"file://{tmp_path}/nowhere.git")


def test_a_password_in_the_remote_url_is_never_shown(
    machines: tuple[MemoryEngine, MemoryEngine],
) -> None:
    a, _b = machines
    with pytest.raises(HistoryError) as caught:
        sync(a, "https://me:s3cret@127.0.0.1:9/memory.git")  # a closed loopback port

    assert "s3cret" not in str(caught.value)
    assert "https://me:***@127.0.0.1:9/memory.git" in str(caught.value)


def test_without_a_remote_the_command_says_how_to_set_one(tmp_path: Path) -> None:
    done = run_memdeck(
        ["--workspace", str(tmp_path / "ws"), "sync"],
        memdeck_env(None, tmp_path),
    )

    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "[history] remote" in done.stderr and "--remote" in done.stderr


def test_an_outside_edit_is_committed_as_outside_before_it_is_pushed(
    machines: tuple[MemoryEngine, MemoryEngine], remote: Path
) -> None:
    a, b = machines
    url = f"file://{remote}"
    seeded(a, b, url)
    (a.workspace.root / MEMORY_FILE).write_text(SEED + "- added in another editor\n")

    assert sync(a, url).pushed == 1
    assert sources(a.workspace.root)[0].endswith("|outside")
    assert sync(b, url).pulled == 1
    assert "another editor" in (b.workspace.root / MEMORY_FILE).read_text()


def test_sync_needs_the_history(tmp_path: Path, remote: Path) -> None:
    engine = MemoryEngine(Workspace.open(tmp_path / "off", create=True), history="off")
    try:
        with pytest.raises(HistoryError, match="sync needs it"):
            sync(engine, str(remote))
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "merged", "conflicted"),
    [
        ("a\nb\nc\n", "a\nB\nc\n", "a\nb\nc\n", "a\nB\nc\n", False),
        ("a\nb\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nb\nc\nD\ne\n", "a\nB\nc\nD\ne\n", False),
        ("a\n", "a\nmine\n", "a\ntheirs\n", "a\nmine\ntheirs\n", False),
        ("a\n", "a\nsame\nmine\n", "a\nsame\ntheirs\n", "a\nsame\nmine\ntheirs\n", False),
        ("a\n", "a\nmine", "a\ntheirs\n", "a\nmine\ntheirs\n", False),
        ("", "x\n", "y\n", "x\ny\n", False),
        (
            "a\nb\nc\n",
            "a\nmine\nc\n",
            "a\ntheirs\nc\n",
            "a\n<<<<<<< this machine\nmine\n=======\ntheirs\n>>>>>>> remote\nc\n",
            True,
        ),
    ],
)
def test_merge_lines(base: str, ours: str, theirs: str, merged: str, conflicted: bool) -> None:
    assert merge_lines(base.encode(), ours.encode(), theirs.encode()) == (
        merged.encode(),
        conflicted,
    )
