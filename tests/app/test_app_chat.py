"""The chat pane against the fake loopback server: streaming, tool calls, errors, the live
preview, segments and folding of long answers, input history, following the output.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rich.segment import Segment
from support.fakeopenai import FakeOpenAI
from support.pilot import (
    SIZE,
    build_app,
    ready,
    send,
    text_of,
    wait_until,
)
from textual.pilot import Pilot
from textual.widgets import Markdown, Static

from tui.app.app import MemdeckApp
from tui.app.widgets import chat_pane as chat_pane_module
from tui.app.widgets.folded_text import FoldedText
from tui.chat.chat import ChatEngine


async def test_a_message_streams_into_the_chat(engine: ChatEngine, server: FakeOpenAI) -> None:
    pieces = ["Lisbon ", "in March, ", "and the hotel ", "in **Alfama** ", "is booked."]
    server.enqueue(FakeOpenAI.text(pieces, chunk_delay=0.15))
    app = build_app(engine)
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
        assert answer.shown_text() == "".join(pieces)
        (part,) = answer.text_parts()
        assert isinstance(part, FoldedText), "a streamed segment settles into a picture"
        assert "in Alfama is booked." in "".join(strip.text for strip in part.picture)
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
    app = build_app(engine)
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
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hello?")
        error = app.main_screen.chat_pane.messages[-1].query_one(".message-error", Static)
        assert text_of(error).startswith("server error: ") and "the model fell over" in text_of(
            error
        )
        await send(pilot, "hello again")
        assert app.main_screen.chat_pane.messages[-1].text == "Back again."


async def test_the_preview_follows_the_draft(engine: ChatEngine) -> None:
    app = build_app(engine)
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
    from tui.app.widgets.chat_message import SEGMENT_CHARS
    from tui.engine.markdown import inside_fence

    block = (
        "Some words about the trip, the hotel and the train. " * 8
        + "\n\n```python\ndef plan():\n\n    return 'Lisbon'\n```\n\n- a list item\n- another\n\n"
    )
    answer = block * (SEGMENT_CHARS * 3 // len(block) + 1)
    pieces = [answer[i : i + 7] for i in range(0, len(answer), 7)]
    server.enqueue(FakeOpenAI.text(pieces))
    app = build_app(engine)
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


async def fold_all(pilot: Pilot[Any]) -> None:
    """Run the chat's fold passes until two in a row change nothing (a part is folded at the
    pass after the one that saw it finished; each pass has a time budget). A pass while a part
    just unfolded is not laid out yet does not count: it cannot fold what has no size."""
    app = pilot.app
    assert isinstance(app, MemdeckApp)
    pane = app.main_screen.chat_pane

    def laid_out() -> bool:
        return all(part.region for message in pane.messages for part in message.text_parts())

    idle = 0
    for _ in range(400):
        await pilot.pause()
        changed = await pane.fold_finished_text()
        idle = 0 if changed or not laid_out() else idle + 1
        if idle == 2:
            return
    raise AssertionError("the fold passes never settled")


@contextlib.asynccontextmanager
async def after_a_long_answer(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[MemdeckApp, Pilot[Any], str]]:
    """The app once a message got a streamed answer many segments long: the app, its pilot
    and the answer, every part of it unfolded and laid out. Finished text folds only when the
    test asks (no fold timer; segments folded as they closed are unfolded)."""
    from tui.app.widgets.chat_message import SEGMENT_CHARS

    monkeypatch.setattr(chat_pane_module, "FOLD_INTERVAL", 3600.0)
    block = "- an item about the **trip**, the hotel and the `train`\n" * 6 + "\n"
    answer = "## The trip\n\n" + block * (SEGMENT_CHARS * 8 // len(block) + 1)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        server.enqueue(FakeOpenAI.text([answer[i : i + 50] for i in range(0, len(answer), 50)]))
        await pilot.hover("#chat-input")
        await send(pilot, "tell me everything")
        message = app.main_screen.chat_pane.messages[-1]

        def folded() -> bool:
            return all(isinstance(part, FoldedText) for part in message.text_parts())

        await wait_until(pilot, folded, "the segments folded as they closed")
        for part in message.text_parts():
            assert isinstance(part, FoldedText)
            await message.swap_part(part, part.unfold())
        await pilot.pause()
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
        log_lines = chat_log_lines(app)
        assert any("trip" in "".join(segment.text for segment in line) for line in log_lines)

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
        assert isinstance(part, Markdown)
        stand_in = FoldedText.of(part)
        app.main_screen.action_new_session()  # a session switch clears the log meanwhile
        await wait_until(pilot, lambda: not pane.messages, "the log cleared")
        await message.swap_part(part, stand_in)
        assert stand_in.parent is None and not message.is_attached


async def test_a_long_answer_that_arrives_at_once_ends_in_view(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        answer = "".join(f"- item {n} of a long list\n" for n in range(120))
        reply = FakeOpenAI.text([answer[i : i + 50] for i in range(0, len(answer), 50)])
        # for this turn only: a flush the app starts meanwhile must not take the answer
        server.responder = lambda body: (
            reply if body["messages"][-1].get("content") == "list everything" else None
        )
        await send(pilot, "list everything")  # faster than the writes are laid out
        pane = app.main_screen.chat_pane
        assert pane.messages[-1].text == answer
        log = pane.log_view
        await wait_until(pilot, lambda: log.max_scroll_y > 0, "the answer laid out")
        await pilot.pause()
        assert log.is_anchored and log.scroll_y == log.max_scroll_y


async def test_input_history_walks_back_and_returns_the_draft(engine: ChatEngine) -> None:
    app = build_app(engine)
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
    app = build_app(engine)
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
