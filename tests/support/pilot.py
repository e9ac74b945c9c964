"""Pilot helpers shared by the app tests."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI
from support.history_support import commit_memory
from support.workspaces import write_workspace
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from tui.app.app import MemdeckApp
from tui.app.panels.search_panel import SearchPanel
from tui.app.widgets.chat_input import ChatInput
from tui.chat.chat import ChatEngine
from tui.chat.config import Config
from tui.chat.sessions import SessionStore
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]

#: Upper bound for anything the app does in the background (a bound, not a speed test).
WAIT_S = 60.0

#: pytest-textual-snapshot's ``snap_compare`` fixture (the plugin ships no types).
SnapCompare = Callable[..., bool]


async def wait_until(pilot: Pilot[Any], condition: Callable[[], object], what: str) -> None:
    """Let the app run until ``condition`` holds; fail after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await pilot.pause(0.02)


def text_of(widget: Static) -> str:
    """Plain text of what a Static shows (a Rich renderable or Content)."""
    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


class PanelHost(App[None]):
    """Mounts one widget, with cursor blink off so screenshots are stable."""

    def __init__(self, make_widget: Callable[[], Widget]) -> None:
        super().__init__()
        self._make_widget = make_widget

    def compose(self) -> ComposeResult:
        yield self._make_widget()

    def on_mount(self) -> None:
        for widget in self.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]


# -- a small app over a fresh workspace (the fault tests) ------------------------------------

PINNED_DAY = NOW = date(2026, 11, 22)
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


@pytest.fixture(name="server")
def small_app_server() -> Iterator[FakeOpenAI]:
    """The fake server of a small app (a module imports this as its ``server`` fixture)."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(name="engine")
async def small_app_engine(tmp_path: Path, server: FakeOpenAI) -> AsyncIterator[ChatEngine]:
    """A chat engine over a small workspace (:data:`APP_MEMORY`), closed after the app."""
    chat = open_chat_engine(tmp_path, server, APP_MEMORY)
    yield chat
    await close_chat_engine(chat)


def small_app(engine: ChatEngine, tmp_path: Path) -> MemdeckApp:
    """The app over ``engine``: pinned dates, no model load."""
    return MemdeckApp(
        engine,
        now=PINNED_DAY,
        clock=fixed_clock,
        config_file=tmp_path / "config.toml",
        load_model=False,
    )


async def app_ready(pilot: Pilot[Any]) -> MemdeckApp:
    """Wait until the index is synced and the panels are up."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    await wait_until(pilot, lambda: app.main_screen.header.chunks is not None, "the index")
    return app


async def paste(pilot: Pilot[Any], text: str) -> ChatInput:
    """Focus the message box and paste ``text`` into it as the terminal delivers a paste."""
    app = await app_ready(pilot)
    box = app.main_screen.chat_pane.chat_input
    box.focus()
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: box.text == text, "the paste")
    return box


async def sent_message(pilot: Pilot[Any], server: FakeOpenAI) -> str | None:
    """The user message of the model request once the app's first turn has finished."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    pane = app.main_screen.chat_pane
    await wait_until(pilot, lambda: pane.turns_finished > 0, "the turn to finish")
    return server.chat_requests[-1].last_user_message


# -- the whole app over the deck workspace (tests/app) ---------------------------------------

#: Terminal size of the app tests.
SIZE = (140, 40)
#: Where the no-LLM explainer says the config file is (fixed, so snapshots are stable).
SHOWN_CONFIG = "/home/user/.config/memdeck/config.toml"

DECK_MEMORY = """# Long-term Memory

## Preferences
- Prefers window seats on long train rides
- Drinks green tea, never coffee

## Family
- Has a dog called Max who loves the beach
"""

DECK_DAILY = {
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Daily Summary\n"
        "- Planned a trip to Lisbon in March, looking at hotels in Alfama.\n"
    ),
    "memory/2026-11-21.md": (
        "# 2026-11-21\n\n## Daily Summary\n- Repaired the bike's back brake before the ride.\n"
    ),
}


def build_engine(
    tmp_path: Path,
    config: Config,
    embedder: Embedder | None,
    *,
    clock: Callable[[], datetime] = fixed_clock,
) -> ChatEngine:
    """A ChatEngine over the deck workspace (hybrid when ``embedder`` is the loaded model); its
    history's first commit is at a fixed time, so the memories' origins are."""
    root = write_workspace(tmp_path / "ws", DECK_MEMORY, DECK_DAILY)
    commit_memory(root)
    workspace = Workspace.open(root)
    memory = MemoryEngine(
        workspace,
        embedder=embedder,
        search_options=config.search_options(),
        injection_options=config.injection_options(),
    )
    return ChatEngine(config, memory, sessions=SessionStore(workspace), clock=clock)


def build_app(engine: ChatEngine, tmp_path: Path | None = None, **kwargs: Any) -> MemdeckApp:
    """The app over ``engine`` with pinned dates, its config file in ``tmp_path`` (default: the
    folder of the engine's workspace); ``kwargs`` go to :class:`MemdeckApp`."""
    folder = tmp_path if tmp_path is not None else engine.memory.workspace.root.parent
    kwargs.setdefault("config_file", folder / "config.toml")
    return MemdeckApp(engine, now=NOW, clock=fixed_clock, **kwargs)


async def ready(pilot: Pilot[Any]) -> MemdeckApp:
    """Wait for the start-up work: index synced, model state known, first preview shown."""
    app = await app_ready(pilot)
    await wait_until(pilot, lambda: app.main_screen.header.model_state != "loading", "the model")
    panel = app.main_screen.memory_panels.injection_panel
    await wait_until(pilot, lambda: panel.injection is not None, "the first preview")
    return app


async def searched(pilot: Pilot[Any], query: str) -> SearchPanel:
    """Open the Search tab of a :func:`ready` app, search ``query`` and wait for results."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    panels = app.main_screen.memory_panels
    panels.show_tab("search")
    panel = panels.search_panel
    panel.set_query(query)
    await wait_until(
        pilot, lambda: panel.response is not None and panel.response.results, "results"
    )
    return panel


async def send(pilot: Pilot[Any], text: str) -> None:
    """Type ``text`` into the message box and press Enter; wait for the answer to finish."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    pane = app.main_screen.chat_pane
    finished = pane.turns_finished
    pane.chat_input.focus()
    await pilot.press(*text, "enter")
    await wait_until(pilot, lambda: pane.turns_finished > finished, "the turn to finish")


def partial_redraws(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first line of each offstage picture drawn from below its top, as they are drawn
    (``textual_compat._lines_from`` watched for the test's length)."""
    from tui.app import textual_compat

    firsts: list[int] = []
    lines_from = textual_compat._lines_from

    def watched(compositor: Any, first: int, size: Any) -> Any:
        firsts.append(first)
        return lines_from(compositor, first, size)

    monkeypatch.setattr(textual_compat, "_lines_from", watched)
    return firsts
