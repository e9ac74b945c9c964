"""``[history] sync_on_start`` / ``sync_on_quit``: the app syncs its memory with the remote (a
local bare repository) in a worker after the engine opens, and before it exits."""

from __future__ import annotations

from pathlib import Path

import pygit2
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, build_app, build_engine, close_chat_engine, wait_until

from tui.engine.engine import MemoryEngine
from tui.engine.git_sync import sync
from tui.engine.workspace import MEMORY_FILE, Workspace


def laptop_with(tmp_path: Path, entry: str) -> Path:
    """A bare remote holding the memory of another machine that saved ``entry``."""
    bare = tmp_path / "memory.git"
    pygit2.init_repository(str(bare), bare=True)
    laptop = MemoryEngine(Workspace.open(tmp_path / "laptop", create=True), history="on")
    try:
        laptop.save_entry(entry, confidence="high", source="user")
        sync(laptop, str(bare))
    finally:
        laptop.close()
    return bare


def remote_main(bare: Path) -> str:
    return str(pygit2.Repository(str(bare)).references["refs/heads/main"].target)


async def test_the_app_syncs_at_start_when_configured(tmp_path: Path, server: FakeOpenAI) -> None:
    bare = laptop_with(tmp_path, "Waters the basil on Sundays")
    config = make_config(tmp_path, server, remote=str(bare), sync_on_start=True)
    engine = build_engine(tmp_path, config, None)
    root = engine.memory.workspace.root
    app = build_app(engine, load_model=False, watch=False)
    try:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_until(
                pilot,
                lambda: any("pulled" in str(n.message) for n in app._notifications),
                "the sync's toast",
            )
            text = (root / MEMORY_FILE).read_text()
            assert "Waters the basil on Sundays" in text
            assert "<<<<<<<" not in text  # both machines' memories, no conflict
            head = pygit2.Repository(str(root)).head.target
            assert remote_main(bare) == str(head)  # the merge went back to the remote
            hits = engine.memory.search("basil Sundays", min_score=0).results
            assert any("basil" in hit.text for hit in hits)
    finally:
        await close_chat_engine(engine)


async def test_the_app_syncs_before_it_quits_when_configured(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    bare = tmp_path / "memory.git"
    pygit2.init_repository(str(bare), bare=True)
    config = make_config(tmp_path, server, remote=f"file://{bare}", sync_on_quit=True)
    engine = build_engine(tmp_path, config, None)
    root = engine.memory.workspace.root
    app = build_app(engine, load_model=False, watch=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.ready, "the main widgets")
            engine.memory.save_entry("Prefers the window seat", confidence="high", source="user")
            assert pygit2.Repository(str(bare)).references.get("refs/heads/main") is None
            await pilot.press("ctrl+q")
            await wait_until(pilot, lambda: not app.is_running, "the app to exit")
        assert app.quit_flush_done
        assert remote_main(bare) == str(pygit2.Repository(str(root)).head.target)
    finally:
        await close_chat_engine(engine)
