"""Issue 16 A.3 and A.4: what the user types in the chat reaches the model whole, and an answer
cut by quitting stays in the transcript.

The whole app under Pilot against the loopback fake server, a real workspace and index.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support.fakeopenai import FakeOpenAI
from support.pilot import app_ready, paste, sent_message, small_app, wait_until
from textual import events
from textual.pilot import Pilot
from textual.widgets import Static

from tui.app.app import MemdeckApp
from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.chat_pane import ChatPane
from tui.chat.chat import ChatEngine
from tui.chat.events import TextDelta

SIZE = (120, 36)
TRACE = """Traceback (most recent call last):
  File "app.py", line 3, in <module>
    main()
  File "app.py", line 2, in main
    raise ValueError("boom")
ValueError: boom"""


async def test_a_pasted_two_line_text_is_sent_whole(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text("Got both lines."))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        box = await paste(pilot, "line one\nline two")  # as the driver delivers a bracketed paste
        assert box.value == "line one\nline two"
        await pilot.press("enter")
        assert await sent_message(pilot, server) == "line one\nline two"


async def test_a_pasted_stack_trace_reaches_the_model_whole(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text("That is a ValueError."))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        box = app.main_screen.chat_pane.chat_input
        box.focus()
        await pilot.press(*"why does this fail?")
        await pilot.press("ctrl+j")
        app.post_message(
            events.Paste(  # as the driver delivers a bracketed paste
                TRACE
            )
        )
        await pilot.pause()
        # The box grew to show several lines (up to its cap), not one.
        assert box.size.height > 3
        await pilot.press("enter")
        assert await sent_message(pilot, server) == "why does this fail?\n" + TRACE


@pytest.mark.parametrize("key", ["ctrl+j", "alt+enter", "shift+enter"])
async def test_the_newline_keys_start_a_line_and_enter_sends(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path, key: str
) -> None:
    server.enqueue(FakeOpenAI.text("Two lines."))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        box = app.main_screen.chat_pane.chat_input
        box.focus()
        await pilot.press(*"first", key, *"second")
        assert box.value == "first\nsecond"
        assert "ctrl+j" in str(box.placeholder)
        await pilot.press("enter")
        assert await sent_message(pilot, server) == "first\nsecond"


# -- 4. quitting mid-answer keeps what streamed ---------------------------------------------

PIECES = ["The answer ", "starts ", "here", *[" and goes on"] * 40]


async def test_a_turn_cancelled_mid_answer_keeps_the_partial_answer(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text(PIECES, chunk_delay=0.2))
    session = engine.sessions.create().id
    seen: list[str] = []

    async def consume() -> None:
        async for event in engine.run_turn(session, "tell me a long story"):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(consume())
    while len(seen) < 3:
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answers = [m for m in engine.sessions.load(session).messages if m.role == "assistant"]
    assert len(answers) == 1 and answers[0].content.startswith("The answer starts here")
    assert answers[0].incomplete


async def start_a_long_answer(pilot: Pilot[Any], app: MemdeckApp) -> ChatPane:
    """Type and send a message whose answer streams slowly; return once it has begun."""
    await app_ready(pilot)
    pane = app.main_screen.chat_pane
    pane.chat_input.focus()
    await pilot.press(*"tell me a long story", "enter")
    await wait_until(
        pilot, lambda: "starts here" in "".join(m.text for m in pane.messages), "the stream"
    )
    return pane


def notices_of(message: ChatMessage) -> str:
    """The text of a message's parts, the dim notices ("(stopped)") included."""
    return "".join(str(getattr(part, "content", "")) for part in message.walk_children())


async def test_escape_in_the_message_box_stops_the_answer_and_keeps_what_streamed(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text(PIECES, chunk_delay=0.2))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        pane = await start_a_long_answer(pilot, app)
        status = pane.query_one("#chat-status", Static)
        assert "Escape stops" in str(status.content)  # how to stop is said where the user looks
        await pilot.press("escape")
        await wait_until(pilot, lambda: not pane.busy, "the turn to stop")
        shown = pane.messages[-1]
        assert shown.text.startswith("The answer starts here") and len(shown.text) < len(
            "".join(PIECES)
        )
        assert "(stopped)" in notices_of(shown)


async def test_quitting_mid_answer_keeps_it_marked_interrupted_after_a_restart(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text(PIECES, chunk_delay=0.2))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        pane = await start_a_long_answer(pilot, app)
        session = pane.session_id
        await pilot.press("ctrl+q", "ctrl+q")  # quit now, without waiting for the flush
    assert session is not None
    records = engine.sessions.load(session).messages
    answer = [m for m in records if m.role == "assistant"]
    assert answer and answer[-1].content.startswith("The answer starts here")

    restarted = small_app(engine, tmp_path)
    async with restarted.run_test(size=SIZE) as pilot:
        await app_ready(pilot)
        pane = restarted.main_screen.chat_pane
        await wait_until(pilot, lambda: pane.session_id == session, "the session to reopen")
        await wait_until(pilot, lambda: len(pane.messages) >= 2, "the transcript")
        shown = pane.messages[-1]
        assert shown.role == "assistant" and "The answer starts here" in shown.text
        assert "(interrupted)" in notices_of(shown)
