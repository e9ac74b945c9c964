"""Sessions and triggers: switching, resuming, renaming and deleting sessions, the flush
triggers (switch, focus lost, quit), keymaps and consolidation.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.chat_support import make_config
from support.fakeopenai import FakeOpenAI, Reply
from support.pilot import (
    DECK_MEMORY,
    SIZE,
    build_app,
    build_engine,
    close_chat_engine,
    ready,
    send,
    text_of,
    wait_until,
)
from textual import events
from textual.message import Message
from textual.widgets import Static

from tui.app.messages import WorkbenchMessage
from tui.app.widgets.chat_transcript import transcript_messages
from tui.app.widgets.session_list import SessionList
from tui.chat.chat import ChatEngine
from tui.chat.sessions import SessionStore
from tui.engine.embeddings import Embedder
from tui.engine.workspace import Workspace


async def test_switching_sessions_flushes_the_one_left(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text("Alfama is lovely in March."))
    app = build_app(engine)
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


async def test_a_first_message_s_session_is_listed_while_its_answer_streams(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    """Sent with no session open, a message opens one: listed once the turn's messages are
    shown (listing it in their frame made a turn's start stall), before the answer ends."""
    server.enqueue(FakeOpenAI.text([f"word{n} " for n in range(12)], chunk_delay=0.25))
    # (no workspace watcher: it lists the sessions again whenever a transcript changes on disk,
    # this one's too, ~50 ms after the write, whenever that falls on a loaded machine)
    app = build_app(engine, watch=False)
    # in the order they arrived: each listing's (ids, messages shown, answering), and the
    # name of each event the workbench published
    arrived: list[tuple[list[str], int, bool] | str] = []

    def hook(message: Message) -> None:
        if isinstance(message, SessionList.Loaded):
            pane = app.main_screen.chat_pane
            arrived.append(([info.id for info in message.sessions], len(pane.messages), pane.busy))
        elif isinstance(message, WorkbenchMessage):
            arrived.append(type(message.event).__name__)

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await ready(pilot)
        pane, listed = app.main_screen.chat_pane, app.main_screen.session_list
        assert app.main_screen.active_session is None and not listed.infos
        pane.chat_input.focus()
        await pilot.press(*"hello there", "enter")
        await wait_until(pilot, lambda: listed.option_list.option_count == 1, "the session listed")
        session = app.main_screen.active_session
        first = next(
            i for i, item in enumerate(arrived) if not isinstance(item, str) and session in item[0]
        )
        assert arrived[first][1:] == (2, True)  # the user's message and the answer's, streaming
        assert "InjectionBuilt" in arrived[:first]  # the turn's messages were shown before
        assert listed.option_list.get_option_at_index(0).id == session
        await wait_until(pilot, lambda: not pane.busy, "the answer's end")


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
    app = build_app(engine)
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
    app = build_app(engine)
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
        await close_chat_engine(engine)


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
        await close_chat_engine(engine)


async def test_quitting_flushes_then_exits(engine: ChatEngine, server: FakeOpenAI) -> None:
    server.enqueue(FakeOpenAI.text("See you."))
    app = build_app(engine)
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
    assert event.outcome.daily_log is not None
    assert (
        "Summary number 1" in (engine.memory.workspace.root / event.outcome.daily_log).read_text()
    )


def consolidation_reply(body: dict[str, Any]) -> Reply | None:
    """Answers a consolidation request with MEMORY.md plus one new fact."""
    system = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "system")
    if "memory consolidation assistant" not in system:
        return None
    return FakeOpenAI.text(DECK_MEMORY + "- Plans trips months ahead\n")


@pytest.mark.parametrize("choice", ["a", "r"])
async def test_consolidation_is_reviewed_then_accepted_or_rejected(
    engine: ChatEngine, server: FakeOpenAI, choice: str
) -> None:
    from tui.app.screens.consolidation_screen import ConsolidationScreen

    server.responder = consolidation_reply
    app = build_app(engine)
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
