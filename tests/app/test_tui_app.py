"""Pilot tests of the whole app against the fake loopback OpenAI server.

Real workspace in a temp dir, real SQLite index, the real embedding model (loaded once per test
session by the ``embedder`` fixture), a real HTTP server on 127.0.0.1 scripted per test. Waits
are bounded polls (``wait_until``), never speed assertions. Snapshots: ``pytest
--snapshot-update`` after an intended change, then look at ``tests/__snapshots__/test_tui_app/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.segment import Segment
from support.chat_support import SummaryResponder, make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import wait_until
from textual import events
from textual.pilot import Pilot
from textual.widgets import Markdown, Static

from tui.app.app import MemdeckApp
from tui.app.screens.help_screen import HelpScreen
from tui.app.themes import load_themes, parse_theme
from tui.app.widgets import chat_pane as chat_pane_module
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_pane import transcript_messages
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.chat.chat import ChatEngine
from tui.chat.config import Config
from tui.chat.sessions import SessionStore
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.inject import InjectionReport
from tui.engine.search import score_formula
from tui.engine.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
NOW = date(2026, 11, 22)
SIZE = (140, 40)
#: Upper bound for anything the UI waits for; a hang fails instead of blocking forever.
#: Where the no-LLM explainer says the config file is (fixed, so snapshots are stable).
SHOWN_CONFIG = "/home/user/.config/memdeck/config.toml"

MEMORY = """# Long-term Memory

## Preferences
- Prefers window seats on long train rides
- Drinks green tea, never coffee

## Family
- Has a dog called Max who loves the beach
"""

DAILY = {
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Daily Summary\n"
        "- Planned a trip to Lisbon in March, looking at hotels in Alfama.\n"
    ),
    "memory/2026-11-21.md": (
        "# 2026-11-21\n\n## Daily Summary\n- Repaired the bike's back brake before the ride.\n"
    ),
}


def fixed_clock() -> datetime:
    return datetime(2026, 11, 22, 9, 30).astimezone()


def write_workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    for rel, text in DAILY.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def build_engine(
    tmp_path: Path, config: Config, embedder: Embedder | None, *, clock: Callable = fixed_clock
) -> ChatEngine:
    """A ChatEngine over the test workspace (hybrid when ``embedder`` is the loaded model)."""
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    memory = MemoryEngine(
        workspace,
        embedder=embedder,
        search_options=config.search_options(),
        injection_options=config.injection_options(),
    )
    return ChatEngine(config, memory, sessions=SessionStore(workspace), clock=clock)


def build_app(engine: ChatEngine, tmp_path: Path, **kwargs: Any) -> MemdeckApp:
    kwargs.setdefault("config_file", tmp_path / "config.toml")
    return MemdeckApp(engine, now=NOW, clock=fixed_clock, **kwargs)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """The fake server; flush (summary) requests are answered by a SummaryResponder."""
    with FakeOpenAI(responder=SummaryResponder()) as fake:
        yield fake


async def close_engine(engine: ChatEngine) -> None:
    """Close ``engine`` once the app's worker threads are done with it.

    ``run_test`` does not wait for thread workers still running when the app exits (a preview,
    a sync); closing the SQLite index under a query in flight could crash the process.
    """
    await asyncio.get_running_loop().shutdown_default_executor()
    engine.close()


@pytest.fixture
async def engine(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> AsyncIterator[ChatEngine]:
    config = make_config(tmp_path, server, tick_seconds=0.2)
    chat = build_engine(tmp_path, config, embedder)
    yield chat
    await close_engine(chat)



async def ready(pilot: Pilot) -> MemdeckApp:
    """Wait for the start-up work: index synced, model state known, first preview shown."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    await wait_until(pilot, lambda: app.main_screen.header.chunks is not None, "the index")
    await wait_until(pilot, lambda: app.main_screen.header.model_state != "loading", "the model")
    panel = app.main_screen.memory_panels.injection_panel
    await wait_until(pilot, lambda: panel.injection is not None, "the first preview")
    return app


async def send(pilot: Pilot, text: str) -> None:
    """Type ``text`` into the message box and press Enter; wait for the answer to finish."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    pane = app.main_screen.chat_pane
    finished = pane.turns_finished
    pane.chat_input.focus()
    await pilot.press(*text, "enter")
    await wait_until(pilot, lambda: pane.turns_finished > finished, "the turn to finish")


def text_of(widget: Static) -> str:
    """Plain text of what a Static shows (a Rich renderable or Content)."""
    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


# -- chat --


async def test_a_message_streams_into_the_chat(engine: ChatEngine, server: FakeOpenAI) -> None:
    pieces = ["Lisbon ", "in March, ", "and the hotel ", "in **Alfama** ", "is booked."]
    server.enqueue(FakeOpenAI.text(pieces, chunk_delay=0.15))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        pane.chat_input.focus()
        await pilot.press(*"where am I going?", "enter")

        def partly_streamed() -> bool:
            messages = pane.messages
            return (
                pane.busy
                and len(messages) == 2
                and messages[1].text.startswith("Lisbon")
                and messages[1].text != "".join(pieces)
            )

        await wait_until(pilot, partly_streamed, "part of the answer while it streams")
        await wait_until(pilot, lambda: not pane.busy, "the end of the answer")
        user, answer = pane.messages
        assert (user.role, user.text) == ("user", "where am I going?")
        assert answer.text == "".join(pieces)
        assert answer.query_one(Markdown).source == "".join(pieces)
        assert "memory" in text_of(answer.query_one(".message-meta", Static))
        # the transcript is the chat engine's, on disk
        transcript = engine.sessions.load(pane.session_id or "")
        assert [m.content for m in transcript.messages] == ["where am I going?", "".join(pieces)]
        # the system prompt carried the memory the preview showed
        assert "Prefers window seats" in (server.chat_requests[-1].system_prompt or "")
        await wait_until(
            pilot,
            lambda: app.main_screen.header.session_title == "where am I going?",
            "the session title",
        )


async def test_a_tool_call_shows_inline_and_memory_gets_the_entry(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(
        FakeOpenAI.tool_call("save_memory", {"content": "Is learning Portuguese for the trip"}),
        FakeOpenAI.text("Noted — boa sorte!"),
    )
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "remember that I am learning Portuguese")
        pane = app.main_screen.chat_pane
        [call] = pane.tool_calls
        assert call.tool_name == "save_memory" and call.ok is True
        assert call.title.startswith("save_memory ✓ Is learning Portuguese")
        assert call.collapsed
        memory_file = engine.memory.workspace.memory_file
        assert "Is learning Portuguese for the trip" in memory_file.read_text()
        assert pane.messages[-1].text == "Noted — boa sorte!"
        # expanding shows what was sent and what came back
        call.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        assert not call.collapsed
        body = text_of(call.query_one(".tool-call-body", Static))
        assert "Is learning Portuguese for the trip" in body and '"saved": true' in body
        # the panels follow: the editor reloads, search finds it
        editor = app.main_screen.memory_panels.memory_editor
        await wait_until(
            pilot,
            lambda: "learning Portuguese" in editor.text_area.text,
            "the MEMORY.md editor to reload",
        )
        assert any(
            "assistant: save_memory" in e for e in app.main_screen.memory_panels.stats_panel.events
        )


async def test_errors_show_as_errors_and_the_chat_goes_on(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.error(500, "the model fell over"), FakeOpenAI.text("Back again."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hello?")
        error = app.main_screen.chat_pane.messages[-1].query_one(".message-error", Static)
        assert "error (server)" in text_of(error)
        await send(pilot, "hello again")
        assert app.main_screen.chat_pane.messages[-1].text == "Back again."


async def test_the_preview_follows_the_draft(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = app.main_screen.memory_panels.injection_panel
        assert panel.injection is not None
        assert "Alfama" not in panel.injection.text  # empty draft: MEMORY.md only
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press(*"which hotel in Lisbon")
        await wait_until(
            pilot,
            lambda: (
                panel.draft == "which hotel in Lisbon"
                and panel.injection is not None
                and "Alfama" in panel.injection.text
            ),
            "the preview of the typed draft",
        )
        await pilot.press("ctrl+u")  # clear the box
        await wait_until(
            pilot,
            lambda: (
                panel.draft == ""
                and panel.injection is not None
                and "Alfama" not in panel.injection.text
            ),
            "the preview of the cleared draft",
        )


async def test_a_long_answer_streams_in_segments_cut_outside_code_fences(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    from tui.app.widgets.chat_message import SEGMENT_CHARS, inside_fence

    block = (
        "Some words about the trip, the hotel and the train. " * 8
        + "\n\n```python\ndef plan():\n\n    return 'Lisbon'\n```\n\n- a list item\n- another\n\n"
    )
    answer = block * (SEGMENT_CHARS * 3 // len(block) + 1)
    pieces = [answer[i : i + 7] for i in range(0, len(answer), 7)]
    server.enqueue(FakeOpenAI.text(pieces))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "tell me everything")
        message = app.main_screen.chat_pane.messages[-1]
        segments = message.text_parts()
        assert message.text == answer
        assert len(segments) >= 3
        assert "".join(segment.source for segment in segments) == answer
        for segment in segments:
            assert not inside_fence(segment.source)  # never cut inside a code fence
    assert inside_fence("text\n```\ncode\n") and not inside_fence("```\ncode\n```\n")


def chat_log_lines(app: MemdeckApp) -> list[list[Segment]]:
    """The segments (text and style) the screen shows in the chat log, line by line."""
    region = app.main_screen.chat_pane.log_view.region
    strips = app.screen._compositor.render_strips()
    return [list(strips[y].crop(region.x, region.right)) for y in region.line_range]


async def fold_all(pilot: Pilot) -> None:
    """Run the chat's fold passes until two in a row change nothing (a part is folded at the
    pass after the one that saw it finished; each pass has a time budget)."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    idle = 0
    for _ in range(40):
        await pilot.pause()
        idle = 0 if await app.main_screen.chat_pane.fold_finished_text() else idle + 1
        if idle == 2:
            return
    raise AssertionError("the fold passes never settled")


@contextlib.asynccontextmanager
async def after_a_long_answer(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[MemdeckApp, Pilot, str]]:
    """The app once a message got a streamed answer many segments long: the app, its pilot
    and the answer. Finished text folds only when the test asks (no fold timer)."""
    from tui.app.widgets.chat_message import SEGMENT_CHARS

    monkeypatch.setattr(chat_pane_module, "FOLD_INTERVAL", 3600.0)
    block = "- an item about the **trip**, the hotel and the `train`\n" * 6 + "\n"
    answer = "## The trip\n\n" + block * (SEGMENT_CHARS * 8 // len(block) + 1)
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        server.enqueue(FakeOpenAI.text([answer[i : i + 50] for i in range(0, len(answer), 50)]))
        await send(pilot, "tell me everything")
        yield app, pilot, answer


async def test_finished_answer_text_folds_into_a_picture_that_looks_the_same(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with after_a_long_answer(engine, server, monkeypatch) as (app, pilot, answer):
        message = app.main_screen.chat_pane.messages[-1]
        assert not message.query_children(FoldedText)
        await pilot.pause()
        shown = chat_log_lines(app)
        heights = [part.outer_size.height for part in message.text_parts()]
        await fold_all(pilot)
        parts = message.text_parts()
        assert parts and all(isinstance(part, FoldedText) for part in parts)
        assert [part.outer_size.height for part in parts] == heights
        assert chat_log_lines(app) == shown, "the pictures look like the Markdown they replace"
        assert message.shown_text() == answer  # nothing lost


async def test_folded_text_comes_back_under_the_mouse_or_at_a_new_width_or_theme(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with after_a_long_answer(engine, server, monkeypatch) as (app, pilot, answer):
        pane = app.main_screen.chat_pane
        message = pane.messages[-1]
        await fold_all(pilot)
        view = pane.log_view.region
        index, shown = next(
            (index, part)
            for index, part in enumerate(message.text_parts())
            if part.region.overlaps(view)
        )
        assert isinstance(shown, FoldedText)

        # links, selection and wide code need the real widgets
        await pilot.hover(shown, offset=(2, max(0, view.y - shown.region.y) + 1))
        await wait_until(pilot, lambda: shown.parent is None, "the part under the mouse unfolding")
        assert isinstance(message.text_parts()[index], Markdown)
        await pilot.hover("#chat-input")
        await fold_all(pilot)
        assert all(isinstance(part, FoldedText) for part in message.text_parts())

        width = view.width
        await pilot.resize_terminal(SIZE[0] - 20, SIZE[1])
        await fold_all(pilot)  # stale pictures near the view unfold, then fold again
        view = pane.log_view.region
        near = [part for part in message.text_parts() if part.region.overlaps(view)]
        assert near and view.width != width
        for part in near:
            assert isinstance(part, FoldedText) and not part.stale
        assert message.shown_text() == answer
        shown = chat_log_lines(app)
        assert any("trip" in "".join(segment.text for segment in line) for line in shown)

        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        folded = message.text_parts()
        assert all(isinstance(part, FoldedText) and part.stale for part in folded)
        await fold_all(pilot)
        near = [part for part in message.text_parts() if part.region.overlaps(view)]
        assert all(isinstance(part, FoldedText) and not part.stale for part in near)
        assert message.shown_text() == answer


async def test_a_fold_that_finds_its_message_gone_does_nothing(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with after_a_long_answer(engine, server, monkeypatch) as (app, pilot, _answer):
        pane = app.main_screen.chat_pane
        message = pane.messages[-1]
        part = message.text_parts()[0]
        stand_in = FoldedText.of(part)
        app.main_screen.action_new_session()  # a session switch clears the log meanwhile
        await wait_until(pilot, lambda: not pane.messages, "the log cleared")
        await message.swap_part(part, stand_in)
        assert stand_in.parent is None and not message.is_attached


async def test_a_long_answer_that_arrives_at_once_ends_in_view(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        answer = "".join(f"- item {n} of a long list\n" for n in range(120))
        server.enqueue(FakeOpenAI.text([answer[i : i + 50] for i in range(0, len(answer), 50)]))
        await send(pilot, "list everything")  # faster than the writes are laid out
        log = app.main_screen.chat_pane.log_view
        await wait_until(pilot, lambda: log.max_scroll_y > 0, "the answer laid out")
        await pilot.pause()
        assert log.is_anchored and log.scroll_y == log.max_scroll_y


async def test_input_history_walks_back_and_returns_the_draft(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        box = app.main_screen.chat_pane.chat_input
        box.remember("first")
        box.remember("second")
        box.focus()
        await pilot.press(*"draft", "up")
        assert box.value == "second"
        await pilot.press("up", "up")
        assert box.value == "first"
        await pilot.press("down")
        assert box.value == "second"
        await pilot.press("down")
        assert box.value == "draft"


async def test_the_log_follows_output_only_at_the_bottom(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    long_answer = [f"line {n}\n\n" for n in range(80)]
    server.enqueue(FakeOpenAI.text(long_answer, chunk_delay=0.03))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        log = pane.log_view
        pane.send("count for me")
        await wait_until(pilot, lambda: log.max_scroll_y > 5, "an overflowing log")
        # while at the bottom, the log follows the stream
        await wait_until(pilot, lambda: log.scroll_y > 0, "the log following the stream")
        assert pane.busy
        log.scroll_home(animate=False)  # the user scrolls up to read
        await pilot.pause()
        height = log.max_scroll_y
        await wait_until(pilot, lambda: pane.turns_finished == 1, "the end of the answer")
        await pilot.pause(0.1)
        assert log.max_scroll_y > height  # more arrived...
        assert log.scroll_y == 0  # ...and the view stayed where the user put it
        assert pane.messages[-1].text == "".join(long_answer)


# -- start-up --


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
            await close_engine(engine)


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
            await close_engine(engine)
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


# -- sessions --


async def test_switching_sessions_flushes_the_one_left(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Alfama is lovely in March."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "tell me about Alfama")
        first = app.main_screen.active_session
        assert first is not None
        await pilot.press("ctrl+n")
        await wait_until(
            pilot, lambda: app.main_screen.active_session not in (None, first), "the new session"
        )
        triggers = engine.triggers
        await wait_until(
            pilot, lambda: "session_switch" in triggers.last_events, "the session-switch flush"
        )
        outcome = triggers.last_events["session_switch"].outcome
        assert outcome.status == "flushed" and outcome.session_id == first
        assert outcome.daily_log is not None
        daily = (engine.memory.workspace.root / outcome.daily_log).read_text()
        assert "Summary number 1 of the chat." in daily
        panels = app.main_screen.memory_panels
        assert "session_switch" in panels.stats_panel.flushes
        await wait_until(
            pilot,
            lambda: any(log.path == outcome.daily_log for log in panels.daily_tree.logs),
            "the daily tree to show the flushed log",
        )
        assert app.main_screen.chat_pane.messages == []  # the new session is empty

        # switching back resumes the first session's transcript
        await wait_until(
            pilot, lambda: len(app.main_screen.session_list.infos) == 2, "two sessions listed"
        )
        app.main_screen.session_list.option_list.focus()
        index = [info.id for info in app.main_screen.session_list.infos].index(first)
        app.main_screen.session_list.option_list.highlighted = index
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: len(app.main_screen.chat_pane.messages) == 2, "the first transcript"
        )
        assert app.main_screen.chat_pane.transcript_text() == [
            ("user", "tell me about Alfama"),
            ("assistant", "Alfama is lovely in March."),
        ]
        assert app.main_screen.header.session_title == "tell me about Alfama"


async def test_a_resumed_session_shows_its_tool_calls(engine: ChatEngine) -> None:
    store = engine.sessions
    session = store.create("Trip notes").id
    store.append_message(session, "user", "what do you know about my dog?")
    answer = store.append_message(session, "assistant", "")
    call = {"query": "dog"}
    store.append(
        session,
        {
            "type": "tool_call",
            "id": "c1",
            "message_id": answer,
            "tool": "memory_search",
            "arguments": '{"query": "dog"}',
            "input": call,
        },
    )
    store.append(
        session,
        {
            "type": "tool_result",
            "id": "c1",
            "tool": "memory_search",
            "ok": True,
            "output": {"results": [{"text": "Has a dog called Max"}]},
        },
    )
    store.append_message(session, "assistant", "Max, who loves the beach!")
    store.append(session, {"type": "error", "kind": "timeout", "message": "no answer in time"})
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            pilot,
            lambda: (
                len(app.main_screen.chat_pane.messages) == 2
                and len(app.main_screen.chat_pane.tool_calls) == 1
            ),
            "the resumed session with its tool call",
        )
        assert app.main_screen.active_session == session
        assert app.main_screen.header.session_title == "Trip notes"
        user, assistant = app.main_screen.chat_pane.messages
        assert user.text == "what do you know about my dog?"
        assert assistant.text == "Max, who loves the beach!"
        [view] = app.main_screen.chat_pane.tool_calls
        assert (
            view.tool_name == "memory_search"
            and view.ok
            and view.title.startswith("memory_search ✓ dog")
        )
        assert "no answer in time" in text_of(assistant.query_one(".message-error", Static))
        # Up recalls the session's messages
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press("up")
        assert app.main_screen.chat_pane.chat_input.value == "what do you know about my dog?"


def test_transcript_messages_keeps_the_last_ones(tmp_path: Path) -> None:
    store = SessionStore(Workspace.open(tmp_path / "ws"))
    session = store.create().id
    for number in range(10):
        store.append_message(session, "user", f"question {number}")
        store.append_message(session, "assistant", f"answer {number}")
    store.append_message(session, "user", "silent flush prompt", silent=True)
    widgets, hidden = transcript_messages(store.load(session), limit=4)
    assert hidden == 16
    assert [(w.role, w.text) for w in widgets] == [
        ("user", "question 8"),
        ("assistant", "answer 8"),
        ("user", "question 9"),
        ("assistant", "answer 9"),
    ]


async def test_rename_and_delete(engine: ChatEngine, server: FakeOpenAI) -> None:
    server.enqueue(FakeOpenAI.text("Sure."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "plan the bike ride")
        session = app.main_screen.active_session
        assert session is not None
        app.main_screen.action_rename_session()
        await wait_until(pilot, lambda: app.screen.query("#rename-input"), "the rename box")
        await pilot.press("ctrl+u", *"Bike ride", "enter")
        await wait_until(
            pilot, lambda: app.main_screen.header.session_title == "Bike ride", "the new title"
        )
        assert engine.sessions.info(session).title == "Bike ride"

        app.main_screen.action_delete_session()
        await wait_until(pilot, lambda: app.screen.query("#confirm-ok"), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.main_screen.active_session is None, "the deletion")
        assert not engine.sessions.exists(session)
        event = engine.triggers.last_events["session_delete"]
        assert event.outcome.status == "flushed"  # logged before it went to the trash
        assert (engine.sessions.trash / f"{session}.jsonl").exists()
        assert app.main_screen.chat_pane.messages == []


# -- triggers, keys, quitting --


async def test_losing_focus_fires_the_background_flush(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    config = make_config(tmp_path, server, blur_debounce_seconds=0.0, tick_seconds=30.0)
    engine = build_engine(tmp_path, config, embedder)
    server.enqueue(FakeOpenAI.text("Green tea it is."))
    app = build_app(engine, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await send(pilot, "tea or coffee?")
            app.post_message(events.AppBlur())
            await wait_until(
                pilot, lambda: "background" in engine.triggers.last_events, "the background flush"
            )
            assert engine.triggers.last_events["background"].outcome.status == "flushed"
    finally:
        await close_engine(engine)


async def test_bindings_are_remapped_from_the_config_keymap(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    config = make_config(tmp_path, server, keymap={"app.flush": "ctrl+g"})
    engine = build_engine(tmp_path, config, embedder)
    server.enqueue(FakeOpenAI.text("Noted."))
    app = build_app(engine, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await send(pilot, "the brake is fixed")
            await pilot.press("ctrl+f")  # the old key no longer flushes
            await pilot.pause(0.2)
            assert "manual" not in engine.triggers.last_events
            await pilot.press("ctrl+g")
            await wait_until(
                pilot, lambda: "manual" in engine.triggers.last_events, "the manual flush"
            )
            assert engine.triggers.last_events["manual"].outcome.status == "flushed"
    finally:
        await close_engine(engine)


async def test_quitting_flushes_then_exits(engine: ChatEngine, server: FakeOpenAI) -> None:
    server.enqueue(FakeOpenAI.text("See you."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "bye for now")
        session = app.main_screen.active_session
        await pilot.press("ctrl+q")
        assert "flushing memory" in app.main_screen.header.notice
        await wait_until(pilot, lambda: not app.is_running, "the app to exit")
    assert app.quit_flush_done and not app.quit_flush_pending
    event = engine.triggers.last_events["app_quit"]
    assert event.session_id == session and event.outcome.status == "flushed"
    assert (
        "Summary number 1" in (engine.memory.workspace.root / event.outcome.daily_log).read_text()
    )


def consolidation_reply(body: dict[str, Any]) -> FakeOpenAI | Any:
    """Answers a consolidation request with MEMORY.md plus one new fact."""
    system = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "system")
    if "memory consolidation assistant" not in system:
        return None
    return FakeOpenAI.text(MEMORY + "- Plans trips months ahead\n")


@pytest.mark.parametrize("choice", ["a", "r"])
async def test_consolidation_is_reviewed_then_accepted_or_rejected(
    engine: ChatEngine, server: FakeOpenAI, choice: str
) -> None:
    from tui.app.screens.consolidation_screen import ConsolidationScreen

    server.responder = consolidation_reply
    app = build_app(engine, engine.memory.workspace.root.parent)
    memory_file = engine.memory.workspace.memory_file
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.main_screen.action_consolidate()
        await wait_until(
            pilot,
            lambda: (
                isinstance(app.screen, ConsolidationScreen)
                and bool(app.screen.query("#consolidation-diff"))
            ),
            "the proposal to review",
        )
        diff = text_of(app.screen.query_one("#consolidation-diff", Static))
        assert "+- Plans trips months ahead" in diff
        assert "+1 added" in text_of(app.screen.query_one("#consolidation-summary", Static))
        await pilot.press(choice)
        await wait_until(
            pilot, lambda: not isinstance(app.screen, ConsolidationScreen), "the decision"
        )
        if choice == "a":
            await wait_until(
                pilot, lambda: "Plans trips months ahead" in memory_file.read_text(), "the write"
            )
            editor = app.main_screen.memory_panels.memory_editor
            await wait_until(
                pilot, lambda: "Plans trips months ahead" in editor.text_area.text, "the editor"
            )
        else:
            await wait_until(
                pilot,
                lambda: any(
                    "consolidation rejected" in e
                    for e in app.main_screen.memory_panels.stats_panel.events
                ),
                "the rejection",
            )
            assert "Plans trips" not in memory_file.read_text()


# -- without a model --


@pytest.fixture
async def no_llm_engine(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ChatEngine]:
    monkeypatch.setenv("MEMDECK_CONFIG", SHOWN_CONFIG)
    config = make_config(tmp_path, None)
    assert config.llm_problem()
    chat = build_engine(tmp_path, config, embedder)
    yield chat
    await close_engine(chat)


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


# -- help, commands, themes --


async def test_f1_explains_the_focused_widget_and_its_keys(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        app.main_screen.chat_pane.chat_input.focus()
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        assert screen.widget_help == ChatInput.HELP
        for binding_id in ("app.flush", "app.new_session", "chat_input.history_previous"):
            assert f"`{binding_id}`" in screen.keys
        formula = screen.query_one("#help-formula", Markdown).source
        assert score_formula(engine.memory.search_options) in formula
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")


async def test_every_action_is_in_the_command_palette(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE):
        titles = {command.title for command in app.get_system_commands(app.screen)}
    for title in (
        "New session",
        "Rename session",
        "Delete session",
        "Flush memory now",
        "Reindex memory",
        "Why did this surface?",
        "Consolidate memory",
        "Show workspace path",
        "Theme",
        "Show Search",
        "Help",
        "Quit",
    ):
        assert title in titles


async def test_why_shows_what_the_last_turn_injected_also_after_a_restart(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Alfama, near the castle."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "which hotels in Lisbon did I look at?")
        session = app.main_screen.active_session
        assert session is not None
        (recorded,) = engine.sessions.load(session).injections
        assert recorded.results  # the turn injected a relevant memory (the Lisbon trip)
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn's injection")
        assert app.main_screen.memory_panels.active_tab == "inject"
        assert "Alfama" in text_of(panel.query_one("#inject-block", Static))
        items = text_of(panel.query_one("#inject-cuts", Static))
        assert "memory/2026-11-20.md" in items and "relevance" in items and "vector" in items
        await pilot.press("escape", "x")  # typing brings the live preview back
        await wait_until(pilot, lambda: panel.turn is None, "the live preview")

    restarted = build_app(engine, engine.memory.workspace.root.parent)
    async with restarted.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = restarted.main_screen.chat_pane
        await wait_until(pilot, lambda: len(pane.messages) == 2, "the resumed session")
        meta = text_of(pane.messages[1].query_one(".message-meta", Static))
        assert f"memory {InjectionReport.from_json(recorded.report).tokens_used}/" in meta
        assert "1 relevant" in meta or "relevant" in meta
        await pilot.press("ctrl+o")
        panel = restarted.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn after a restart")


async def test_a_theme_from_themes_dir_is_applied_and_remembered(
    engine: ChatEngine, tmp_path: Path
) -> None:
    config_file = tmp_path / "config.toml"
    app = build_app(engine, tmp_path, config_file=config_file)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "memdeck-dark"
        assert {"memdeck-dark", "memdeck-light"} <= set(app.available_themes)
        app.theme = "memdeck-light"
        await wait_until(
            pilot,
            lambda: config_file.exists() and 'theme = "memdeck-light"' in config_file.read_text(),
            "the theme saved in the config",
        )
        app.theme = "nord"  # built-in themes work too
        await wait_until(
            pilot, lambda: 'theme = "nord"' in config_file.read_text(), "the built-in theme saved"
        )


def test_theme_files_load_and_bad_ones_are_skipped(tmp_path: Path) -> None:
    loaded = load_themes()
    names = {theme.name: theme for theme in loaded.themes}
    assert not names["memdeck-dark"].to_color_system().background.is_transparent
    assert names["memdeck-light"].dark is False and names["memdeck-dark"].dark is True
    assert loaded.warnings == []
    (tmp_path / "broken.toml").write_text('name = "x"\nprimary = "not-a-colour"\n')
    (tmp_path / "extra.toml").write_text('name = "y"\nprimary = "#fff"\nsparkle = 1\n')
    (tmp_path / "mine.toml").write_text('name = "mine"\nprimary = "#123456"\n')
    custom = load_themes([tmp_path])
    assert [theme.name for theme in custom.themes] == ["mine"]
    assert len(custom.warnings) == 2 and any("sparkle" in w for w in custom.warnings)
    assert parse_theme(tmp_path / "mine.toml").primary == "#123456"


def test_the_themes_folder_is_found_from_a_checkout() -> None:
    code = (
        "from tui.app.themes import bundled_themes_dir, load_themes;"
        "print(bundled_themes_dir()); print(sorted(t.name for t in load_themes().themes))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert Path(out[0]) == ROOT / "themes"
    assert "memdeck-dark" in out[1] and "memdeck-light" in out[1]


# -- snapshots (140×40, fixed workspace, fixed dates, no cursor blink) --


def _snapshot(snap_compare, app: MemdeckApp, before: Callable[[Pilot], Any] | None) -> bool:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        if before is not None:
            result = before(pilot)
            if asyncio.iscoroutine(result):
                await result
        for widget in app.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        app.clear_notifications()
        await pilot.pause(0.1)

    return snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_main_screen(snap_compare, engine: ChatEngine, server: FakeOpenAI) -> None:
    server.enqueue(
        FakeOpenAI.tool_call("memory_search", {"query": "trip"}),
        FakeOpenAI.text(
            "You were planning a **trip to Lisbon** in March — still looking at hotels in "
            "Alfama?\n\n- window seat on the train\n- green tea on board"
        ),
        FakeOpenAI.text("Then Alfama it is. I will keep it in mind."),
    )
    app = build_app(engine, engine.memory.workspace.root.parent)

    async def conversation(pilot: Pilot) -> None:
        await send(pilot, "Where was I planning to travel?")
        await send(pilot, "Yes, somewhere quiet")
        await pilot.press(*"hotels in Lisbon")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(
            pilot,
            lambda: (
                panel.draft == "hotels in Lisbon"
                and panel.injection is not None
                and "Alfama" in panel.injection.text
            ),
            "the preview",
        )
        await wait_until(
            pilot,
            lambda: app.main_screen.memory_panels.search_panel.query_text == "Yes, somewhere quiet",
            "the default search",
        )

    assert _snapshot(snap_compare, app, conversation)


def test_snapshot_without_a_model(snap_compare, no_llm_engine: ChatEngine, tmp_path: Path) -> None:
    app = build_app(no_llm_engine, tmp_path, config_file=Path(SHOWN_CONFIG))
    assert _snapshot(snap_compare, app, None)


# -- issue 10: the memory stays in view (layout, keys, focus) --


async def test_a_narrow_screen_flips_between_chat_and_memory(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = app.main_screen
        panels, pane = screen.memory_panels, screen.chat_pane
        mode_bar = screen.query_one("#mode-bar", Static)
        assert screen.has_class("-narrow") and screen.view == "chat"
        assert pane.region.width == 80 and panels.region.width == 0
        assert screen.session_list.region.width == 0
        assert "▸ chat" in str(mode_bar.render()) and "ctrl+t" in str(mode_bar.render())
        await pilot.press("ctrl+t")
        assert screen.view == "memory" and panels.region.width == 80 and pane.region.width == 0
        assert "▸ memory: Inject" in str(mode_bar.render())
        await pilot.press("f3")
        await wait_until(
            pilot,
            lambda: app.focused is panels.search_panel.query_one("#search-query"),
            "the search box",
        )
        assert panels.active_tab == "search" and "memory: Search" in str(mode_bar.render())
        await pilot.press("escape")
        assert screen.view == "chat" and app.focused is pane.chat_input
        await pilot.press("f5")  # straight from the chat to the editor
        await wait_until(pilot, lambda: app.focused is panels.memory_editor.text_area, "the editor")
        assert screen.view == "memory"
        await pilot.press("escape")  # leaves the editor too
        assert screen.view == "chat" and app.focused is pane.chat_input
        # while typing, the mode bar carries the Inject tab's news
        await pilot.press(*"hotels in Lisbon")
        await wait_until(pilot, lambda: "relevant" in str(mode_bar.render()), "the Inject badge")
        # the collapsed session list is laid over the chat on request
        screen.action_focus_sessions()
        await wait_until(pilot, lambda: screen.session_list.region.width > 0, "the session list")
        await pilot.press("escape")
        assert screen.session_list.region.width == 0 and app.focused is pane.chat_input


async def test_at_100_columns_the_session_list_collapses_and_the_panels_stay(
    engine: ChatEngine,
) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = app.main_screen
        assert screen.has_class("-medium")
        assert screen.session_list.region.width == 0
        assert screen.memory_panels.region.width >= 44 and screen.chat_pane.region.width >= 40
        assert screen.query_one("#mode-bar").region.height == 0
        await pilot.press("f4")
        await wait_until(pilot, lambda: screen.memory_panels.active_tab == "daily", "Daily")
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: screen.has_class("-wide"), "the wide layout")
        assert screen.session_list.region.width > 0


async def test_every_tab_has_a_key_in_the_footer_and_keys_are_remapped_by_id(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> None:
    from textual.widgets._footer import FooterKey

    config = make_config(tmp_path, server, keymap={"app.show_daily": "ctrl+g"})
    engine = build_engine(tmp_path, config, embedder)
    app = build_app(engine, tmp_path)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await ready(pilot)
            panels = app.main_screen.memory_panels
            await wait_until(pilot, lambda: len(app.query(FooterKey)) > 5, "the footer keys")
            shown = {key.key: key.description for key in app.query(FooterKey)}
            for key, label in (("f2", "inject"), ("f3", "search"), ("ctrl+g", "daily")):
                assert shown.get(key) == label
            assert {"f5", "f6"} <= set(shown) and "f4" not in shown
            await pilot.press("f4")  # the old key does nothing now
            await pilot.pause(0.1)
            assert panels.active_tab == "inject"
            await pilot.press("ctrl+g")
            tree = panels.daily_tree.query_one("#daily-tree")
            await wait_until(pilot, lambda: app.focused is tree, "the daily tree")
            await pilot.press("f6")
            await wait_until(
                pilot,
                lambda: panels.active_tab == "stats"
                and app.focused is not None
                and panels in app.focused.ancestors,
                "focus in the Stats tab",
            )
            assert "escape" in {key.key for key in app.query(FooterKey)}  # the way back, shown
            await pilot.press("escape")
            assert app.focused is app.main_screen.chat_pane.chat_input
    finally:
        await close_engine(engine)


async def test_the_palette_shows_daily_from_the_search_box(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        await pilot.press("f3")
        query = panels.search_panel.query_one("#search-query")
        await wait_until(pilot, lambda: app.focused is query, "the search box")
        await pilot.press("ctrl+p", *"Show Daily", "enter")
        await wait_until(pilot, lambda: panels.active_tab == "daily", "the Daily tab")
        tree = panels.daily_tree.query_one("#daily-tree")
        await wait_until(pilot, lambda: app.focused is tree, "focus in the Daily tab")
        await pilot.pause(0.2)
        assert panels.active_tab == "daily"  # not switched back by focus returning


async def test_enter_in_the_palette_runs_the_typed_command_once_it_is_found(
    engine: ChatEngine,
) -> None:
    from textual.command import Hit, Hits, Provider

    ran: list[str] = []

    class SlowCommands(Provider):
        async def search(self, query: str) -> Hits:
            await asyncio.sleep(0.6)  # a slow provider: Enter comes before its hits
            matcher = self.matcher(query)
            score = matcher.match("Pack the zeppelin")
            if score > 0:
                yield Hit(score, matcher.highlight("Pack the zeppelin"), lambda: ran.append("z"))

    class SlowPaletteApp(MemdeckApp):
        CSS_PATH = str(ROOT / "tui" / "app" / "screens" / "main_screen.tcss")
        COMMANDS = MemdeckApp.COMMANDS | {SlowCommands}

    app = SlowPaletteApp(
        engine, now=NOW, clock=fixed_clock, config_file=engine.memory.workspace.root / "c.toml"
    )
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p", *"pack the zeppelin", "enter")
        await wait_until(pilot, lambda: ran == ["z"], "the typed command to run")


async def test_typing_after_ctrl_n_is_never_lost_whatever_had_focus(engine: ChatEngine) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.main_screen
        panels, pane = screen.memory_panels, screen.chat_pane
        focus_states: dict[str, Callable[[], None]] = {
            "message box": pane.chat_input.focus,
            "sessions": screen.session_list.option_list.focus,
            "inject": lambda: panels.show_tab("inject", focus=True),
            "search box": lambda: panels.show_tab("search", focus=True),
            "results": lambda: panels.search_panel.query_one("#search-results").focus(),
            "daily": lambda: panels.show_tab("daily", focus=True),
            "editor": lambda: panels.show_tab("memory", focus=True),
            "stats": lambda: panels.show_tab("stats", focus=True),
            "nothing": lambda: app.set_focus(None),
        }
        for state, give_focus in focus_states.items():
            give_focus()
            await pilot.pause(0.05)
            sessions = len(engine.sessions.ids())
            await pilot.press("ctrl+n", *f"typed after {state}")
            await wait_until(
                pilot,
                lambda state=state: pane.chat_input.value == f"typed after {state}",
                f"the text typed from {state}",
            )
            await wait_until(
                pilot, lambda n=sessions: len(engine.sessions.ids()) == n + 1, "the new session"
            )
            pane.chat_input.clear()
        # and with nothing focused, typing alone lands in the message box too
        app.set_focus(None)
        await pilot.press(*"hello")
        assert pane.chat_input.value == "hello" and app.focused is pane.chat_input


async def test_the_inject_tab_comes_forward_while_typing_unless_another_was_chosen(
    engine: ChatEngine,
) -> None:
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panels = app.main_screen.memory_panels
        await pilot.press("f3", "escape", *"Lisbon")  # the user chose Search in this session
        await pilot.pause(0.2)
        assert panels.active_tab == "search"
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.main_screen.active_session is not None, "a session")
        app.main_screen.chat_pane.chat_input.clear()
        await pilot.press(*"hotel")  # a new session: Inject comes forward again
        await wait_until(pilot, lambda: panels.active_tab == "inject", "the Inject tab")


async def test_indexing_progress_is_shown_while_a_dropped_file_is_embedded(
    engine: ChatEngine,
) -> None:
    from tui.app.widgets.app_header import AppHeader

    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.main_screen
        await wait_until(
            pilot, lambda: screen.watcher is not None and screen.watcher.ready.is_set(), "watcher"
        )
        before = screen.header.chunks or 0
        seen: list[tuple[str, int, int]] = []
        watcher = screen.watcher
        assert watcher is not None and watcher.progress is not None
        report = watcher.progress
        watcher.progress = lambda stage, done, total: (
            seen.append((stage, done, total)),
            report(stage, done, total),
        )  # type: ignore[assignment]
        notes = "\n\n".join(
            f"- Note {n}: the blue notebook page {n} about trains" for n in range(80)
        )
        (engine.memory.workspace.root / "memory" / "notes.md").write_text(notes + "\n")
        await wait_until(
            pilot, lambda: bool(seen) and seen[-1][1] == seen[-1][2], "the embedding to finish"
        )
        assert all(stage == "embedding" for stage, _, _ in seen) and seen[-1][2] >= 80
        await wait_until(pilot, lambda: (screen.header.chunks or 0) >= before + 80, "the count")
        assert screen.header.progress == "" and "✓ hybrid" in str(screen.header.render())
        # what a progress report looks like while it runs
        screen.post_message(screen.IndexProgress("embedding", 120, 400))
        await wait_until(pilot, lambda: screen.header.progress != "", "a progress report")
        header = str(app.query_one(AppHeader).render())
        assert "BM25 only · embedding 120/400 units" in header
        stats = dict((k, v.plain) for k, v in screen.memory_panels.stats_panel.describe_stats())
        assert stats["indexing"].startswith("embedding 120/400 units")


def _layout_snapshot(
    snap_compare, app: MemdeckApp, size: tuple[int, int], keys: tuple[str, ...]
) -> bool:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "Which hotels in Lisbon did I look at?")
        await pilot.press(*keys)
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(
            pilot,
            lambda: (
                panel.injection is not None
                and panel.draft == app.main_screen.chat_pane.chat_input.value
            ),
            "the preview",
        )
        for widget in app.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        app.clear_notifications()
        await pilot.pause(0.1)

    return snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), tuple("quiet room")),
        ((80, 24), ("ctrl+t",)),
        ((100, 30), tuple("quiet room")),
        ((160, 48), tuple("quiet room")),
    ],
    ids=["80x24-chat", "80x24-memory", "100x30", "160x48"],
)
def test_snapshot_layouts(
    snap_compare,
    engine: ChatEngine,
    server: FakeOpenAI,
    size: tuple[int, int],
    keys: tuple[str, ...],
) -> None:
    server.enqueue(FakeOpenAI.text("You looked at hotels in **Alfama**, near the castle."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    assert _layout_snapshot(snap_compare, app, size, keys)


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
                lambda: app.main_screen.config.embeddings.provider == "openai"
                and app.main_screen.header.progress == "",
                "the reload",
            )
            assert isinstance(memory.embedder, RemoteEmbedder)
            assert memory.index.mirror.dims == 16
            assert memory.index.stored_fingerprint() == memory.index.fingerprint
            assert memory.model_loaded
            assert app.main_screen.header.model_state == "loaded"
            assert memory.search("trip to Lisbon", now=NOW).mode == "hybrid"
    finally:
        await close_engine(engine)
