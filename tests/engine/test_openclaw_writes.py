"""memdeck in an OpenClaw workspace (issue 34, items 3-5): its USER.md as memory when
configured, memdeck's own files never committed by a ``git add .``, the regions another tool
manages left as they are, and saves under memdeck's heading, not OpenClaw's last one. Every
check of the user's files is byte for byte; the fixture is tests/fixtures/openclaw_workspace."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI
from support.history_support import git
from support.mcp_support import connected, text_of
from support.openclaw_fixture import copy_openclaw_workspace

from tui.app.workspace_watcher import plan_sync
from tui.chat.config import ConfigError, load_config, open_memory
from tui.chat.tools import MemoryTools
from tui.engine.engine import MemoryEngine
from tui.engine.entry_place import SAVE_HEADING, append_saved
from tui.engine.managed_regions import ReadOnlyRegionError, managed_regions
from tui.engine.store import EntryBatch
from tui.engine.workspace import OWN_GITIGNORE, Workspace

TODAY = date(2026, 3, 11)
DAILY = "memory/2026-03-05.md"
LIGHT_START = b"<!-- openclaw:dreaming:light:start -->"
LIGHT_END = b"<!-- openclaw:dreaming:light:end -->\n"
PROMOTION = (
    b"<!-- openclaw-memory-promotion:memory:memory/2026-03-04.md:3:3 -->\n"
    b"- The staging database is Postgres 16 on db-staging-2; migrations run with sqitch."
    b" [score=0.861 recalls=4 avg=0.702 source=memory/2026-03-04.md:3-3]\n"
)


def block(data: bytes, start: bytes, end: bytes) -> bytes:
    """The bytes of a managed block, its markers included."""
    first = data.index(start)
    return data[first : data.index(end, first) + len(end)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_openclaw_workspace(tmp_path)


def open_engine(root: Path, *extra: str) -> MemoryEngine:
    engine = MemoryEngine(Workspace.open(root, extra_files=extra), history="off")
    engine.sync(embed=False)
    return engine


@pytest.fixture
def engine(root: Path) -> Iterator[MemoryEngine]:
    opened = open_engine(root)
    yield opened
    opened.close()


@pytest.fixture
def tools(engine: MemoryEngine) -> MemoryTools:
    return MemoryTools(engine, today=lambda: TODAY)


# -- item 3: USER.md and the other root memory files --


def test_a_configured_user_md_is_searched_read_and_watched_like_memory_md(root: Path) -> None:
    plain = open_engine(root)
    refused = MemoryTools(plain, today=lambda: TODAY).execute("memory_get", {"path": "USER.md"})
    assert refused.content["error"] == "path_refused"
    assert all(r.path != "USER.md" for r in plain.search("hazelnuts", now=TODAY).results)
    plain.close()

    engine = open_engine(root, "USER.md")
    try:
        assert "USER.md" in [rel for rel, _ in engine.workspace.iter_memory_files()]
        assert engine.search("allergic to hazelnuts", now=TODAY).results[0].path == "USER.md"
        got = MemoryTools(engine, today=lambda: TODAY).execute("memory_get", {"path": "USER.md"})
        assert got.ok and "Dana is allergic to hazelnuts" in got.content["text"]
        assert plan_sync(engine.workspace, ["USER.md", "SOUL.md"]).paths == ["USER.md"]
    finally:
        engine.close()


def test_a_configured_user_md_is_in_the_memory_history(root: Path) -> None:
    engine = MemoryEngine(Workspace.open(root, extra_files=("USER.md",)))  # history: auto
    try:
        engine.save_entry("Dana's laptop is a ThinkPad X1.", confidence="high", source="user")
        (root / "USER.md").write_text((root / "USER.md").read_text() + "- Likes rye bread.\n")
        engine.sync(embed=False)
    finally:
        engine.close()
    tracked = git(root, "ls-files").split()
    assert {"MEMORY.md", "USER.md"} <= set(tracked) and "SOUL.md" not in tracked
    assert "Likes rye bread" in git(root, "show", "HEAD:USER.md")


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ('["../outside.md"]', "'..' is not allowed"),
        ('["/etc/motd.md"]', "relative to the workspace folder"),
        ('["notes.txt"]', "only Markdown files"),
        ('[".memdeck/x.md"]', "hidden files and memdeck's own folders"),
    ],
)
def test_a_bad_extra_file_is_refused_with_one_line(tmp_path: Path, written: str, said: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[memory]\nextra_files = {written}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(config, env={})
    message = str(raised.value)
    assert said in message and "\n" not in message and f"{config}:2" in message


def test_the_config_reaches_the_workspace_and_the_store(root: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[memory]\nextra_files = ["./USER.md"]\nsave_heading = "## Notes"\n')
    engine = open_memory(load_config(config, env={}), root)
    try:
        assert engine.workspace.extra_files == ("USER.md",)
        assert engine.store.save_heading == "## Notes"
    finally:
        engine.close()
    config.write_text('[memory]\nsave_heading = "Notes"\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: save_heading: 'Notes' is not a Mark"):
        load_config(config, env={})


def test_an_extra_file_linking_out_of_the_workspace_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("- the neighbour's wifi password\n")
    (root / "USER.md").unlink()
    (root / "USER.md").symlink_to(outside)
    engine = open_engine(root, "USER.md")
    try:
        warnings: list[str] = []
        assert "USER.md" not in [rel for rel, _ in engine.workspace.iter_memory_files(warnings)]
        assert warnings == ["USER.md: symlink leads outside the workspace, not followed; skipped"]
        got = MemoryTools(engine, today=lambda: TODAY).execute("memory_get", {"path": "USER.md"})
        assert got.content["error"] == "path_refused"
    finally:
        engine.close()


def test_an_openclaw_workspace_suggests_its_user_md_in_one_line(
    root: Path, tmp_path: Path
) -> None:
    env = memdeck_env(None, tmp_path)
    stats = run_memdeck(["--workspace", str(root), "stats"], env)
    assert stats.returncode == 0, stats.stderr
    hints = [line for line in stats.stdout.splitlines() if line.startswith("hint")]
    assert len(hints) == 1 and 'extra_files = ["USER.md"]' in hints[0]
    search = run_memdeck(["--workspace", str(root), "search", "--bm25", "orders API"], env)
    assert "USER.md" not in search.stderr + search.stdout  # said by stats, not by every command

    (tmp_path / "no-config.toml").write_text('[memory]\nextra_files = ["USER.md"]\n')
    configured = run_memdeck(["--workspace", str(root), "stats"], env)
    assert configured.returncode == 0, configured.stderr
    assert "hint" not in configured.stdout


# -- item 4: memdeck's state never committed --


def test_git_add_in_an_openclaw_repository_takes_nothing_of_memdecks(
    root: Path, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    git(root, "init", "-q")
    env = memdeck_env(fake_openai, tmp_path)
    fake_openai.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Dana's laptop is a ThinkPad X1"}), "Noted."
    )
    for args in (
        ["search", "--bm25", "orders API pagination"],
        ["ask", "--bm25", "remember my laptop"],
        ["reindex"],
    ):
        done = run_memdeck(["--workspace", str(root), *args], env, timeout=240)
        assert done.returncode == 0, (args, done.stderr)
    assert "ThinkPad" in (root / "MEMORY.md").read_text()

    git(root, "add", ".")
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    added = {line[3:] for line in status}
    assert not [p for p in added if p.startswith((".memdeck/", "sessions/"))], status
    # the user's own files are still there to add: memdeck hid nothing of theirs
    assert {"AGENTS.md", "SOUL.md", "USER.md"} <= added
    assert not (root / ".gitignore").exists()
    assert (root / ".memdeck" / ".gitignore").read_text() == OWN_GITIGNORE
    assert (root / "sessions" / ".gitignore").read_text() == OWN_GITIGNORE
    locks = list((root / ".memdeck").rglob("*.lock"))
    assert locks
    assert {stat.S_IMODE(os.stat(lock).st_mode) for lock in locks} == {0o600}


def test_an_existing_state_folder_gets_its_gitignore(root: Path) -> None:
    (root / ".memdeck").mkdir()
    Workspace.open(root)
    assert (root / ".memdeck" / ".gitignore").read_bytes() == OWN_GITIGNORE.encode()
    (root / ".memdeck" / ".gitignore").write_text("index.db\n")  # the user's: kept
    Workspace.open(root)
    assert (root / ".memdeck" / ".gitignore").read_text() == "index.db\n"


# -- item 5: managed regions are read-only; saves under memdeck's heading --


def test_a_forget_inside_a_dreaming_block_is_refused_and_the_file_unchanged(
    root: Path, tools: MemoryTools
) -> None:
    before = (root / DAILY).read_bytes()
    result = tools.execute("forget_memory", {"query": "Candidate: Backups nightly backup job"})
    assert not result.ok and result.content["error"] == "read_only"
    message = result.content["message"]
    assert "openclaw:dreaming:light block" in message and "\n" not in message
    assert (root / DAILY).read_bytes() == before
    assert not (root / ".memdeck" / "history.jsonl").exists()


def test_a_forget_matching_a_fact_and_its_dreaming_copy_forgets_the_fact_only(
    root: Path, tools: MemoryTools
) -> None:
    before = (root / DAILY).read_bytes()
    result = tools.execute("forget_memory", {"query": "nightly backup job 03:15"})
    assert result.ok
    assert [f["path"] for f in result.content["forgotten"]] == [DAILY]
    assert len(result.content["left"]) == 1 and "read-only" in result.content["message"]
    after = (root / DAILY).read_bytes()
    fact = b"- Moved the nightly backup job to 03:15 so it no longer overlaps the invoice run."
    assert after == before.replace(fact + b"\n", fact + b" <!-- mem state=forgotten -->\n", 1)
    assert block(after, LIGHT_START, LIGHT_END) == block(before, LIGHT_START, LIGHT_END)


def test_a_block_in_memory_md_is_not_forgotten_nor_superseded(
    root: Path, engine: MemoryEngine, tools: MemoryTools
) -> None:
    before = (root / "MEMORY.md").read_bytes()
    forget = tools.execute("forget_memory", {"query": "deploys kept surfacing"})
    assert forget.content["error"] == "read_only"
    [reflection] = [e for e in engine.store.entries() if "kept surfacing" in e.text]
    with pytest.raises(ReadOnlyRegionError):
        engine.forget([reflection])
    with pytest.raises(ReadOnlyRegionError):
        engine.supersede([reflection])
    assert (root / "MEMORY.md").read_bytes() == before

    saved = tools.execute(
        "save_memory",
        {"content": "Deploys no longer come up in memories.", "supersedes": reflection.text},
    )
    assert saved.ok and "superseded" not in saved.content
    assert "openclaw:dreaming:rem block" in saved.content["note"]
    rem = b"<!-- openclaw:dreaming:rem:start -->", b"<!-- openclaw:dreaming:rem:end -->\n"
    assert block((root / "MEMORY.md").read_bytes(), *rem) == block(before, *rem)


def test_a_block_without_its_end_marker_is_read_only_up_to_the_next_heading() -> None:
    bodies = [
        "# 2026-03-05",
        "## Light Sleep",
        "<!-- openclaw:dreaming:light:start -->",
        "- Candidate: Old staged summary.",
        "",
        "## Ops",
        "- Rotate access keys.",
        "## Light Sleep",
        "<!-- openclaw:dreaming:light:start -->",
        "- Candidate: Fresh staged summary.",
        "<!-- openclaw:dreaming:light:end -->",
        "```",
        "<!-- example:start -->",
        "```",
    ]
    regions = [(r.name, r.first, r.last, r.closed) for r in managed_regions(bodies)]
    assert regions == [
        ("openclaw:dreaming:light", 2, 4, False),
        ("openclaw:dreaming:light", 8, 10, True),
    ]


def test_forgetting_a_promoted_entry_takes_its_marker_and_a_restore_brings_both_back(
    root: Path, engine: MemoryEngine, tools: MemoryTools
) -> None:
    before = (root / "MEMORY.md").read_bytes()
    result = tools.execute("forget_memory", {"query": "staging database Postgres 16 sqitch"})
    assert result.ok
    assert (root / "MEMORY.md").read_bytes() == before.replace(PROMOTION, b"", 1)
    [record] = [r for r in engine.store.retired_records() if r.path == "MEMORY.md"]
    assert engine.restore(record) is not None
    assert (root / "MEMORY.md").read_bytes() == before


def test_a_save_goes_under_memdecks_heading_not_openclaws_last_one(
    root: Path, engine: MemoryEngine, tools: MemoryTools
) -> None:
    before = (root / "MEMORY.md").read_bytes()
    assert tools.execute("save_memory", {"content": "Dana's laptop is a ThinkPad X1."}).ok
    # the flush's long-term facts take the same road (MemoryEngine.save_entries)
    engine.save_entries(EntryBatch(["Dana's phone is a Pixel 8."], "medium", "auto", TODAY))
    after = (root / "MEMORY.md").read_bytes()
    assert after.startswith(before)
    added = after[len(before) :].decode().splitlines()
    assert added[:2] == ["", SAVE_HEADING]
    assert [line.split(" <!--")[0] for line in added[2:]] == [
        "",
        "- Dana's laptop is a ThinkPad X1.",
        "- Dana's phone is a Pixel 8.",
    ]


def test_the_configured_heading_takes_the_saves(root: Path, engine: MemoryEngine) -> None:
    before = (root / "MEMORY.md").read_bytes()
    engine.store.save_heading = "## Preferences"
    engine.save_entry("Dana drinks her coffee black.", confidence="high", source="user")
    after = (root / "MEMORY.md").read_bytes()
    last = b"- Standups are at 09:30 Berlin time; Dana skips them on Fridays.\n"
    [saved] = [line for line in after.splitlines(keepends=True) if b"coffee" in line]
    assert saved.startswith(b"- Dana drinks her coffee black. <!-- mem ")
    assert after == before.replace(last, last + saved, 1)


@pytest.mark.parametrize(
    "text",
    [
        "# Long-term Memory\n\n## Work\n\n- Uses Vim.\n",
        "# Long-term Memory\r\n\r\n## Work\r\n- Uses Vim.",
        "- no heading at all\n\n\n",
    ],
)
def test_a_workspace_without_another_tool_saves_at_the_end_as_before(text: str) -> None:
    entry = "- Likes green tea. <!-- mem id=1 -->"
    newline = "\r\n" if "\r\n" in text else "\n"
    ending = "" if text.endswith("\n") else newline
    assert append_saved(text, [entry]) == text + ending + entry + newline


# -- the refused forget through the command line and over MCP --


def test_memdeck_ask_cannot_forget_inside_a_dreaming_block(
    root: Path, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    before = (root / DAILY).read_bytes()
    fake_openai.enqueue(
        FakeOpenAI.tool_call("forget_memory", {"query": "Candidate: Naming shopfront"}), "Done."
    )
    asked = run_memdeck(
        ["--workspace", str(root), "ask", "--bm25", "forget the naming candidate"],
        memdeck_env(fake_openai, tmp_path),
    )
    assert asked.returncode == 0, asked.stderr
    result = fake_openai.chat_requests[-1].messages[-1]
    assert result["role"] == "tool" and '"error": "read_only"' in result["content"]
    assert "openclaw:dreaming:light block" in result["content"]
    assert (root / DAILY).read_bytes() == before


async def test_an_mcp_client_cannot_forget_inside_a_dreaming_block(
    root: Path, tmp_path: Path
) -> None:
    before = (root / "MEMORY.md").read_bytes()
    async with connected(root, tmp_path) as session:
        result = await session.call_tool("forget_memory", {"query": "deploys kept surfacing"})
    assert result.isError
    said = text_of(result.content[0])
    assert "openclaw:dreaming:rem block" in said and "another tool manages" in said
    assert (root / "MEMORY.md").read_bytes() == before
