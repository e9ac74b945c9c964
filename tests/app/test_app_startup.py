"""Start-up and configuration: the engine opens after the first frame, quitting early, a
workspace that cannot open, no model configured, reloading the config.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import (
    NOW,
    SHOWN_CONFIG,
    SIZE,
    build_app,
    build_engine,
    close_chat_engine,
    ready,
    wait_until,
)
from textual.widgets import Markdown

from tui.app.app import MemdeckApp
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.chat.chat import ChatEngine
from tui.engine.embeddings import Embedder


async def test_the_engine_opens_after_the_first_frame(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    config = make_config(tmp_path, server)
    opened: list[ChatEngine] = []

    def open_engine() -> ChatEngine:
        opened.append(build_engine(tmp_path, config, embedder))
        return opened[-1]

    app = MemdeckApp(
        config=config, open_engine=open_engine, config_file=tmp_path / "config.toml", now=NOW
    )
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert (
                app.main_screen.header.model == "fake-model"
            )  # the header is there from the start
            await wait_until(pilot, lambda: app.ready, "the engine and the main widgets")
            assert not app.query("#starting")
            await ready(pilot)
            assert app.engine is opened[0]
            assert app.focused is app.main_screen.chat_pane.chat_input
    finally:
        for engine in opened:
            await close_chat_engine(engine)


@pytest.mark.parametrize("run", range(4))
@pytest.mark.parametrize("deferred", [False, True], ids=["engine", "open_engine"])
async def test_quitting_right_after_ready_raises_nothing(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder, deferred: bool, run: int
) -> None:
    """Exit as soon as the main widgets are there (``NoMatches '#stats-flushes'`` once): an
    exit while the panels mount, or a worker's answer arriving while they are torn down, must
    not crash the app. Several runs, because what is still in flight at exit varies."""
    config = make_config(tmp_path, server, tick_seconds=0.05)
    opened: list[ChatEngine] = []

    def open_engine() -> ChatEngine:
        opened.append(build_engine(tmp_path, config, embedder))
        return opened[-1]

    if deferred:
        app = MemdeckApp(
            config=config, open_engine=open_engine, config_file=tmp_path / "config.toml", now=NOW
        )
    else:
        app = build_app(open_engine(), tmp_path)
    errors: list[BaseException] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.ready, "the engine and the main widgets")
            for _ in range(run):  # let 0..3 rounds of start-up work get under way
                await asyncio.sleep(0)
            app.exit(0)
    except Exception as exc:  # run_test re-raises what crashed the app
        errors.append(exc)
    finally:
        for engine in opened:
            await close_chat_engine(engine)
    assert errors == []
    assert app.return_code == 0


async def test_a_workspace_that_cannot_open_ends_the_app_with_the_reason(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    def open_engine() -> ChatEngine:
        raise OSError("the disk is on fire")

    config = make_config(tmp_path, server)
    app = MemdeckApp(config=config, open_engine=open_engine, config_file=tmp_path / "c.toml")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running, "the app to exit")
    assert app.return_code == 2


async def test_without_a_model_the_chat_explains_and_memory_works(
    no_llm_engine: ChatEngine, tmp_path: Path
) -> None:
    app = build_app(no_llm_engine, tmp_path, config_file=Path(SHOWN_CONFIG))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        explainer = app.query_one(SetupExplainer)
        shown = explainer.query_one(Markdown).source
        for needle in (
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL=http://localhost:11434/v1",
            "MEMDECK_MODEL",
            SHOWN_CONFIG,
        ):
            assert needle in shown
        assert app.main_screen.header.model == ""
        # typing still previews, Enter does not send
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press(*"Lisbon hotel")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(
            pilot,
            lambda: panel.injection is not None and "Alfama" in panel.injection.text,
            "the preview",
        )
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert not app.main_screen.chat_pane.busy and app.main_screen.chat_pane.messages == []
        assert no_llm_engine.sessions.ids() == []
        assert app.main_screen.chat_pane.chat_input.value == "Lisbon hotel"  # the draft is kept
        # search works
        app.main_screen.memory_panels.explain("dog")
        search = app.main_screen.memory_panels.search_panel
        await wait_until(pilot, lambda: search.response is not None, "search results")
        assert any("Max" in r.text for r in search.response.results)  # type: ignore[union-attr]


async def test_reloading_the_config_swaps_the_embedder_without_a_restart(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    from tui.engine.remote_embeddings import RemoteEmbedder

    config_file = tmp_path / "config.toml"
    engine = build_engine(tmp_path, make_config(tmp_path, server), embedder)
    app = build_app(engine, tmp_path, config_file=config_file)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            assert engine.memory.embedder is embedder
            config_file.write_text(
                f'[llm]\nbase_url = "{server.base_url}"\nmodel = "fake-model"\napi_key = "k"\n'
                f'[embeddings]\nprovider = "openai"\nbase_url = "{server.base_url}"\n'
                'model = "fake-embed"\ndimensions = 16\napi_key = "k"\n',
                encoding="utf-8",
            )
            app.main_screen.action_reload_config()
            memory = engine.memory
            await wait_until(
                pilot,
                # the reload is done once the screen holds the new config (the start-up sync
                # ending meanwhile clears the progress line before that)
                lambda: (
                    app.main_screen.config.embeddings.provider == "openai"
                    and app.main_screen.header.progress == ""
                ),
                "the reload",
            )
            assert isinstance(memory.embedder, RemoteEmbedder)
            assert memory.index.mirror.dims == 16
            assert memory.index.stored_fingerprint() == memory.index.fingerprint
            assert memory.model_loaded
            assert app.main_screen.header.model_state == "loaded"
            assert memory.search("trip to Lisbon", now=NOW).mode == "hybrid"
    finally:
        await close_chat_engine(engine)
