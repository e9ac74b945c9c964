"""ChatMarkdown: streamed text ends up drawn exactly as Textual's Markdown draws the same text
rendered at once."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from tui.app.textual_compat import picture_of
from tui.app.widgets.chat_markdown import ChatMarkdown, GrowingBulletList

BULLETS = "".join(f"- item {n} with **bold** and `code`, some words to wrap\n" for n in range(14))
NESTED = "- top one\n- top two\n  - inner a\n  - inner b\n- top three\n\nA paragraph after.\n"
ORDERED = "".join(f"{n}. step {n} of the plan\n" for n in range(1, 13))
STARTS_AT_THREE = "".join(f"{n}. step {n}\n" for n in range(3, 9))
LOOSE = "".join(f"- loose item {n}\n\n" for n in range(6)) + "The end.\n"


class MarkdownApp(App[None]):
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="log")


@pytest.mark.parametrize(
    "text", [BULLETS, NESTED, ORDERED, STARTS_AT_THREE, LOOSE], ids=lambda t: t[:12]
)
async def test_a_streamed_list_looks_like_the_same_list_rendered_at_once(text: str) -> None:
    app = MarkdownApp()
    async with app.run_test(size=(70, 60)) as pilot:
        log = app.query_one("#log", VerticalScroll)
        streamed = ChatMarkdown()
        await log.mount(streamed)
        stream = Markdown.get_stream(streamed)
        for start in range(0, len(text), 7):
            await stream.write(text[start : start + 7])
            await pilot.pause()
        await stream.stop()
        at_once = Markdown(text)
        await log.mount(at_once)
        await pilot.pause()
        assert streamed.source == text
        assert picture_of(streamed) == picture_of(at_once)
        assert streamed.shows(text), "a segment streamed right needs no final render"


async def test_a_streamed_list_keeps_its_finished_items() -> None:
    app = MarkdownApp()
    async with app.run_test(size=(70, 60)) as pilot:
        streamed = ChatMarkdown()
        await app.query_one("#log").mount(streamed)
        first, rest = BULLETS[:200], BULLETS[200:]
        await streamed.append(first)
        await pilot.pause()
        (growing,) = streamed.query_children(GrowingBulletList)
        rows = list(growing.query_children(Horizontal))
        await streamed.append(rest)
        await pilot.pause()
        assert streamed.query_children(GrowingBulletList).first() is growing
        now = list(growing.query_children(Horizontal))
        assert len(now) == BULLETS.count("\n") and now[: len(rows) - 1] == rows[:-1]


async def test_shows_tells_blocks_that_are_not_those_of_the_text() -> None:
    app = MarkdownApp()
    async with app.run_test(size=(70, 60)) as pilot:
        part = ChatMarkdown(NESTED)
        await app.query_one("#log").mount(part)
        await pilot.pause()
        assert part.shows(NESTED)
        assert not part.shows(NESTED + "\n- one more\n")  # text it does not hold
        await part.append("Title\n")  # a paragraph so far...
        await pilot.pause()
        assert part.shows(NESTED + "Title\n")
        part._markdown += "===\n"  # ...that this makes a heading, not streamed to the blocks
        assert not part.shows(NESTED + "Title\n===\n")


async def test_closing_a_segment_waits_for_the_write_under_way() -> None:
    """A segment closed while its stream is appending (Textual shields that append from the
    stop) keeps its blocks: it is not rendered again, whole, as if it had not been written."""
    from tui.app.textual_compat import block_kind
    from tui.app.widgets.chat_message import ChatMessage
    from tui.app.widgets.folded_text import FoldedText
    from tui.app.widgets.live_text import LiveText

    app = MarkdownApp()
    async with app.run_test(size=(70, 30)) as pilot:
        message = ChatMessage("assistant")
        await app.query_one("#log", VerticalScroll).mount(message)
        await message.append_text("- one\n- two\n\n")
        await pilot.pause(0.3)
        (live,) = message.text_parts()
        assert isinstance(live, LiveText)
        segment = live.markdown
        first = segment.children[0]
        blocks_at_close: list[MarkdownBlock] = []
        settle = live.folded

        def folded() -> FoldedText | None:  # the blocks as the segment closes
            blocks_at_close.extend(b for b in segment.children if isinstance(b, MarkdownBlock))
            return settle()

        live.folded = folded  # type: ignore[method-assign]
        await message.append_text("```python\nx = 1\n```\n\n")
        await message.finish()
        assert blocks_at_close[0] is first, "the segment was rendered again, whole"
        assert [block_kind(block) for block in blocks_at_close] == ["bullet_list_open", "fence"]
        assert message.shown_text() == "- one\n- two\n\n```python\nx = 1\n```\n\n"


async def test_a_segment_is_arranged_once_per_width_and_draws_as_markdown_does() -> None:
    """Its blocks' arrangement (and a list's items') does not depend on its height (no block
    is sized in ``fr`` or ``%``): the one made for its content height serves its layout, and
    it still draws cell for cell as Textual's Markdown."""
    from textual.geometry import Size

    text = (
        "# A title\n\nA paragraph with **bold** words that wraps at this width, surely.\n\n"
        + NESTED
        + "\n> a quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```\n"
    )
    app = MarkdownApp()
    async with app.run_test(size=(70, 80)) as pilot:
        log = app.query_one("#log", VerticalScroll)
        segment, plain = ChatMarkdown(text), Markdown(text)
        await log.mount_all([segment, plain])
        await pilot.pause()
        bullets = segment.query(GrowingBulletList).first()
        for container in (segment, bullets):
            assert container.size.height > 0
            laid_out = container.arrange(container.size)
            assert laid_out is container.arrange(Size(container.size.width, 0))
            assert laid_out.total_region.height == container.size.height
        assert picture_of(segment) == picture_of(plain)
