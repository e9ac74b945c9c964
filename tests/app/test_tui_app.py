"""Pilot tests of the whole app against the fake loopback OpenAI server.

Real workspace in a temp dir, real SQLite index, the real embedding model (loaded once per test
session by the ``embedder`` fixture), a real HTTP server on 127.0.0.1 scripted per test. Waits
are bounded polls (``wait_until``), never speed assertions. Snapshots: ``pytest
--snapshot-update`` after an intended change, then look at ``tests/__snapshots__/test_tui_app/``.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.chat_support import SummaryResponder, make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import wait_until
from textual import events
from textual.pilot import Pilot
from textual.widgets import Markdown, Static

from tui.app.app import MemdeckApp
from tui.app.screens.help_screen import HelpScreen
from tui.app.themes import load_themes, parse_theme
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_pane import transcript_messages
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.chat.chat import ChatEngine
from tui.chat.config import Config
from tui.chat.sessions import SessionStore
from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
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
        segments = list(message.query(Markdown))
        assert message.text == answer
        assert len(segments) >= 3
        assert "".join(segment.source for segment in segments) == answer
        for segment in segments:
            assert not inside_fence(segment.source)  # never cut inside a code fence
    assert inside_fence("text\n```\ncode\n") and not inside_fence("```\ncode\n```\n")


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


async def test_why_jumps_to_search_with_the_last_message(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("The beach, with Max."))
    app = build_app(engine, engine.memory.workspace.root.parent)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "where should I walk the dog")
        search = app.main_screen.memory_panels.search_panel
        await wait_until(
            pilot, lambda: search.query_text == "where should I walk the dog", "the default query"
        )
        await pilot.press("ctrl+o")
        await wait_until(
            pilot, lambda: app.query_one("TabbedContent").active == "search", "the Search tab"
        )
        await wait_until(pilot, lambda: search.response is not None, "the results")
        assert any("Max" in r.text for r in search.response.results)  # type: ignore[union-attr]


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
