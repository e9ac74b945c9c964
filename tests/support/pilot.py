"""Pilot helpers shared by the app tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

import pytest
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI
from textual.pilot import Pilot

from tui.app.app import MemdeckApp
from tui.chat.chat import ChatEngine
from tui.chat.sessions import SessionStore
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace

#: Upper bound for anything the app does in the background (a bound, not a speed test).
WAIT_S = 60.0


async def wait_until(pilot: Pilot, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition`` holds; fail after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await pilot.pause(0.02)


# -- a small app over a fresh workspace (the fault tests) ------------------------------------

PINNED_DAY = date(2026, 11, 22)
#: MEMORY.md of the small workspace of the app-level fault tests.
APP_MEMORY = "# Long-term Memory\n\n- Likes tea\n- Has a dog called Max\n"


def fixed_clock() -> datetime:
    """The app's clock in these tests: a fixed morning."""
    return datetime(2026, 11, 22, 9, 30).astimezone()


def open_chat_engine(tmp_path: Path, server: FakeOpenAI, memory_text: str) -> ChatEngine:
    """A BM25-only chat engine over ``tmp_path/ws`` with ``memory_text`` as MEMORY.md."""
    config = make_config(tmp_path, server, tick_seconds=0.2)
    workspace = Workspace.open(tmp_path / "ws")
    (workspace.root / "MEMORY.md").write_text(memory_text, encoding="utf-8")
    memory = MemoryEngine(
        workspace,
        search_options=config.search_options(),
        injection_options=config.injection_options(),
    )
    return ChatEngine(config, memory, sessions=SessionStore(workspace), clock=fixed_clock)


async def close_chat_engine(engine: ChatEngine) -> None:
    """Close ``engine`` once the app's worker threads are done with it."""
    await asyncio.get_running_loop().shutdown_default_executor()
    engine.close()


def small_app(engine: ChatEngine, tmp_path: Path) -> MemdeckApp:
    """The app over ``engine``: pinned dates, no model load."""
    return MemdeckApp(
        engine,
        now=PINNED_DAY,
        clock=fixed_clock,
        config_file=tmp_path / "config.toml",
        load_model=False,
    )


async def app_ready(pilot: Pilot) -> MemdeckApp:
    """Wait until the index is synced and the panels are up."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    await wait_until(pilot, lambda: app.main_screen.header.chunks is not None, "the index")
    return app
