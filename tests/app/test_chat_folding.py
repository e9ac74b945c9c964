"""When finished answer text folds into a picture: only once a layout gave it the size of its
final text at its width (never on a size that may still change), and for a streamed segment at
the first such layout after it closed, with no timer."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, PanelHost, build_app, ready, wait_until
from textual.containers import VerticalScroll
from textual.pilot import Pilot

from tui.app.textual_compat import picture_of
from tui.app.widgets import chat_pane as chat_pane_module
from tui.app.widgets.chat_folding import TextFolder, laid_out_final
from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.chat_message import SEGMENT_CHARS, ChatMessage
from tui.app.widgets.folded_text import FoldedText
from tui.chat.chat import ChatEngine

FIRST = "The plan for **Lisbon**:\n\n- the hotel near Alfama\n- the train on Monday\n"
REST = "\n\nThen the talk, and after it:\n\n- dinner with the team\n- a walk by the river\n"


def lines_of(widget: Any) -> list[list[Segment]]:
    """What ``widget`` and its children draw, line by line (text and style)."""
    return [list(strip) for strip in picture_of(widget)]


async def test_a_segment_whose_last_text_is_not_laid_out_yet_does_not_fold(
    pilot_host: tuple[PanelHost, Pilot[Any]],
) -> None:
    app, pilot = pilot_host
    log = app.query_one(VerticalScroll)
    message = app.query_one(ChatMessage)
    folder = TextFolder()
    segment = ChatMarkdown(FIRST)  # (a segment settles as Markdown when it has no picture)
    await message.mount(segment, before=message.query_one(".message-meta"))
    await pilot.pause()
    assert segment.region
    early_height = segment.outer_size.height

    with app.batch_update():  # no layout meanwhile (as on a loaded machine, for a while)
        await segment.update(FIRST + REST)
        assert message.finished_part(segment) and segment.outer_size.height == early_height
        assert not laid_out_final(segment)
        # two looks see the same size: the size held, yet it is not the final one
        assert await folder.fold(log, [message]) == 0
        assert await folder.fold(log, [message]) == 0
        folder.segment_closed(segment)
        folder.laid_out()  # a layout that did not reach it (a scroll-only one)
        assert await folder.fold_closed(log) == 0
        assert message.text_parts() == [segment]

    await pilot.pause()  # the layout at its final size
    final_height = segment.outer_size.height
    assert final_height > early_height
    assert laid_out_final(segment)
    shown = lines_of(log)
    assert await folder.fold_closed(log) == 1
    await pilot.pause()
    (folded,) = message.text_parts()
    assert isinstance(folded, FoldedText) and folded.outer_size.height == final_height
    assert lines_of(log) == shown, "no line moved"
    assert message.shown_text() == FIRST + REST


@pytest.fixture
async def pilot_host() -> Any:
    """A chat message alone in a scrolling log, in a small app."""
    app = PanelHost(lambda: VerticalScroll(ChatMessage("assistant")))
    async with app.run_test(size=(60, 30)) as pilot:
        yield app, pilot


async def test_streamed_segments_fold_at_a_layout_with_no_timer_at_their_laid_out_height(
    engine: ChatEngine, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat_pane_module, "FOLD_INTERVAL", 3600.0)  # no look: layouts alone
    block = "- an item about the **trip**, the hotel and the `train`\n" * 6 + "\n"
    answer = "## The trip\n\n" + block * (SEGMENT_CHARS * 6 // len(block) + 1)
    pieces = [answer[i : i + 40] for i in range(0, len(answer), 40)]
    server.enqueue(FakeOpenAI.text(pieces, chunk_delay=0.01))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        await pilot.hover("#chat-input")  # the mouse over no part of the answer
        pane.send("tell me everything")

        def answer_parts() -> list[Any]:
            messages = pane.messages
            return messages[-1].text_parts() if len(messages) == 2 else []

        def all_folded() -> bool:
            parts = answer_parts()
            return (
                pane.turns_finished == 1
                and len(parts) > 3
                and all(isinstance(part, FoldedText) for part in parts)
            )

        await wait_until(pilot, all_folded, "every segment folded")
        message = pane.messages[-1]
        assert message.shown_text() == answer
        # each picture has the height its Markdown takes, laid out, at the log's width now
        for folded in message.text_parts():
            assert isinstance(folded, FoldedText) and not folded.stale
            markdown = folded.unfold()
            await message.swap_part(folded, markdown)
            await pilot.pause()
            assert markdown.outer_size.height == folded.outer_size.height
