"""The open segment of a streamed answer is drawn by one widget (``LiveText``) from its
Markdown laid out on a screen never shown: it must draw, cell for cell, what that Markdown
draws in the message, and leave nothing behind when it closes."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from support.pilot import PanelHost, partial_redraws, wait_until
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.strip import Strip

from tui.app import textual_compat  # noqa
from tui.app.screens.live_stage import LiveStage
from tui.app.textual_compat import picture_of
from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.folded_text import FoldedText
from tui.app.widgets.live_text import LiveText

ANSWER = (
    "# Lisbon\n\nThe plan, with **bold** words and `code`, long enough to wrap at this width.\n\n"
    "- the hotel near Alfama\n- the train on Monday\n  - first class\n\n"
    "1. pack\n2. go\n\n> a quote\n\n```python\nprint('hi')\n```\n\nThe end.\n"
)


@pytest.fixture
async def host() -> Any:
    """The pilot of a small app, and its one chat message (alone in a scrolling log)."""
    app = PanelHost(lambda: VerticalScroll(ChatMessage("assistant")))
    async with app.run_test(size=(60, 50)) as pilot:
        yield pilot, app.query_one(ChatMessage)


async def in_place(pilot: Pilot[Any], message: ChatMessage, source: str) -> list[Strip]:
    """What ``source`` draws as Markdown in ``message`` (mounted there for the look)."""
    markdown = ChatMarkdown(source)
    await message.mount(markdown, before=message.query_one(".message-meta"))
    await pilot.pause()
    picture = picture_of(markdown)
    await markdown.remove()
    await pilot.pause()
    return picture


async def streamed_to(pilot: Pilot[Any], message: ChatMessage, end: int) -> LiveText:
    """Stream ``ANSWER`` up to ``end`` into ``message``; its live part once drawn with it."""
    await message.append_text(ANSWER[len(message.text) : end])
    (live,) = message.text_parts()
    assert isinstance(live, LiveText)
    await wait_until(pilot, lambda: live.drawn_source == ANSWER[:end], "the write drawn")
    return live


@pytest.mark.parametrize("focused", [False, True], ids=["plain", "focused"])
async def test_the_open_segment_draws_as_its_markdown_would_in_the_message(
    host: tuple[Pilot[Any], ChatMessage], focused: bool
) -> None:
    pilot, message = host
    if focused:
        message.focus()  # another background under the text
    for end in (9, 80, 150, 190, len(ANSWER)):
        live = await streamed_to(pilot, message, end)
        assert live.picture, "nothing drawn"
        assert live.picture == await in_place(pilot, message, live.source), f"at {end}"
        assert "".join(strip.text for strip in live.picture).count("Lisbon") == 1
        assert live.outer_size.height == len(live.picture)
    # its blocks are on the stage, not in the chat
    assert not message.query(ChatMarkdown)
    assert isinstance(live.markdown.screen, LiveStage)


async def test_each_write_draws_what_its_whole_text_would_though_it_draws_its_end_only(
    host: tuple[Pilot[Any], ChatMessage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write draws again only the lines from the first that may have changed; the lines
    above it are the last picture's. After every small write (a new list item, a word, a line
    of code), and once focus changes the background under it, the picture is still what the
    whole text draws."""
    pilot, message = host
    drawn_from = partial_redraws(monkeypatch)
    ends = [*range(5, len(ANSWER), 7), len(ANSWER)]
    for step, end in enumerate(ends):
        if step == len(ends) // 2:
            message.focus()  # another background: drawn whole again
        live = await streamed_to(pilot, message, end)
        assert live.picture == await in_place(pilot, message, live.source), f"at {end}"
    assert len(drawn_from) > len(ends) // 2, "most writes draw from a line below the top"
    assert max(drawn_from) > 5


async def test_a_closed_segment_becomes_a_picture_and_leaves_the_stage(
    host: tuple[Pilot[Any], ChatMessage],
) -> None:
    pilot, message = host
    live = await streamed_to(pilot, message, len(ANSWER))
    stage = live.markdown.screen
    await message.finish()
    await pilot.pause()
    (part,) = message.text_parts()
    assert isinstance(part, FoldedText) and not part.stale
    assert part.picture == await in_place(pilot, message, ANSWER)
    assert message.shown_text() == ANSWER
    assert not stage.children, "the segment's Markdown stays on the stage"
    assert live not in message.children
    # Once another answer has streamed, nothing holds the closed segment's blocks: the stage,
    # never laid out by Textual, kept every widget that asked it for a layout.
    closed = weakref.ref(live.markdown)
    del live
    another = ChatMessage("assistant")
    await pilot.app.query_one(VerticalScroll).mount(another)
    await another.append_text("Another answer, *streamed*.")
    await another.finish()
    await pilot.pause()
    gc.collect()
    assert closed() is None, "a closed segment's blocks are held"


async def test_a_message_removed_while_it_streams_leaves_nothing_on_the_stage(
    host: tuple[Pilot[Any], ChatMessage],
) -> None:
    pilot, message = host
    live = await streamed_to(pilot, message, 80)
    stage = live.markdown.screen
    assert list(stage.children) == [live.markdown]
    await message.remove()
    await wait_until(pilot, lambda: not stage.children, "the stage emptied")


async def test_the_open_segment_is_drawn_again_at_a_new_width(
    host: tuple[Pilot[Any], ChatMessage],
) -> None:
    pilot, message = host
    live = await streamed_to(pilot, message, 150)
    narrow = live.picture
    await pilot.resize_terminal(40, 50)
    await wait_until(pilot, lambda: live.picture is not narrow, "a new picture")
    await pilot.pause()
    assert live.picture[0].cell_length == live.size.width < len(narrow[0].text)
    assert live.picture == await in_place(pilot, message, live.source)
