"""Each private Textual API memdeck uses still exists and does what memdeck relies on.

When one of these fails after a Textual upgrade, its name says which internal moved; the fix
belongs in ``tui/app/textual_compat.py`` (or the override named here).
"""

from __future__ import annotations

import inspect
import io

import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from rich.segment import ControlType
from support.pilot import partial_redraws
from textual._compositor import ChopsUpdate
from textual.app import App, ComposeResult
from textual.command import CommandPalette
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Markdown, Static, TabbedContent, TabPane, TextArea
from textual.widgets.markdown import MarkdownBlock

from tui.app import textual_compat as compat
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.chat_markdown import ChatMarkdown, GrowingList


def test_markdown_list_block_classes_are_the_ones_markdown_builds() -> None:
    assert Markdown.BLOCKS["bullet_list_open"] is compat.MarkdownBulletList
    assert Markdown.BLOCKS["ordered_list_open"] is compat.MarkdownOrderedList
    assert set(compat.LIST_ITEMS) == {
        Markdown.BLOCKS["list_item_ordered_open"],
        Markdown.BLOCKS["list_item_unordered_open"],
    }


@pytest.mark.parametrize("name", ["_update_from_block", "_copy_context"])
def test_markdown_block_private_method(name: str) -> None:
    assert callable(getattr(MarkdownBlock, name, None)), f"MarkdownBlock.{name} moved"


def test_growing_list_overrides_a_method_textual_still_calls() -> None:
    source = inspect.getsource(Markdown)
    assert "_update_from_block" in source, "Markdown no longer updates blocks in place"
    assert GrowingList._update_from_block is not MarkdownBlock._update_from_block


def test_text_area_key_handler_that_chat_input_overrides() -> None:
    assert inspect.iscoroutinefunction(TextArea._on_key), "TextArea._on_key moved"
    assert ChatInput._on_key is not TextArea._on_key


def test_tree_invalidation_that_daily_log_tree_defers() -> None:
    from textual.widgets import Tree
    from textual.widgets.tree import TreeNode

    from tui.app.panels.daily_log_tree import DailyLogTree

    for changes in (TreeNode.add, TreeNode.expand, TreeNode.remove, TreeNode.remove_children):
        assert "_invalidate()" in inspect.getsource(changes), f"{changes.__qualname__} moved"
    assert DailyLogTree._invalidate is not Tree._invalidate


def test_command_palette_internals() -> None:
    assert isinstance(compat.palette_search_group(), str)
    assert callable(getattr(CommandPalette, "_select_or_command", None)), (
        "CommandPalette._select_or_command moved"
    )


class _Blocks(App[None]):
    def compose(self) -> ComposeResult:
        yield Markdown("- one\n- two\n\n7. seven\n8. eight\n\nA paragraph.\n")
        with TabbedContent():
            yield TabPane("A", id="a")


async def test_markdown_block_internals_and_tabs_and_pictures() -> None:
    app = _Blocks()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        markdown = app.query_one(Markdown)
        blocks = [b for b in markdown.children if isinstance(b, MarkdownBlock)]
        kinds = [compat.block_kind(b) for b in blocks]
        assert kinds == ["bullet_list_open", "ordered_list_open", "paragraph_open"]
        # a list block holds its item blocks: what GrowingList reads while streaming
        # (a parsed one, before mounting; mounted, they are its children)
        token = MarkdownIt("gfm-like").parse("7. seven\n")[0]
        ordered = compat.MarkdownOrderedList(markdown, token)
        # BLOCKS is typed by the base block; an ordered item's third parameter is its bullet
        item = Markdown.BLOCKS["list_item_ordered_open"](markdown, token, "7")  # type: ignore[arg-type]
        compat.child_blocks(ordered).append(item)
        assert compat.list_bullet(item) == "7" and compat.list_bullet(ordered) == ""
        assert len(list(ordered.compose())) == 1  # one row per item block it holds
        target = compat.MarkdownOrderedList(markdown, token)
        compat.copy_block_context(target, blocks[0])
        assert compat.block_kind(target) == "bullet_list_open"
        assert app.query_one(TabbedContent).query(compat.ContentTabs)
        lines = compat.picture_of(markdown)
        assert any("seven" in line.text for line in lines)


async def test_a_screen_started_offstage_holds_widgets_and_draws_them_as_a_shown_one() -> None:
    text = "- one\n- two\n\nA paragraph, long enough to wrap at forty columns.\n"
    app = App[None]()
    async with app.run_test(size=(40, 12)) as pilot:
        shown = Markdown(text)
        await app.screen.mount(shown)
        stage = Screen[None]()
        compat.register_offstage(stage)
        offstage = Markdown(text)
        await stage.mount(offstage)
        await pilot.pause()
        assert app.screen is not stage and offstage.is_mounted and not offstage.size
        size = shown.outer_size
        assert compat.draw_offstage(offstage, size) == compat.picture_of(shown)
        assert offstage.size.width == shown.size.width, "told the size it was drawn at"
    assert not offstage.is_running, "closed with the app"


async def test_an_offstage_picture_drawn_again_from_a_line_is_the_whole_picture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``redraw_offstage`` reads the compositor's cuts and widget order, and each widget's
    dirty lines: after a streamed list grows (``ChatMarkdown``: Textual's own append of a list
    item drops its first one), the lines it draws from below the top, under the lines kept,
    are the whole picture of the same text."""
    drawn_from = partial_redraws(monkeypatch)
    app = App[None]()
    async with app.run_test(size=(40, 12)) as pilot:
        stage = Screen[None]()
        compat.register_offstage(stage)
        growing, whole = ChatMarkdown(), ChatMarkdown()
        await stage.mount_all([growing, whole])
        await growing.append("# Plan\n\n- one\n- two\n")  # streamed, as a segment is
        await pilot.pause()
        size = Size(40, 10)
        before = compat.redraw_offstage(growing, size, None)
        await growing.append("- three, which is long enough to wrap at forty columns\n")
        await whole.update(growing.source)
        await pilot.pause()
        after = compat.redraw_offstage(growing, size, before)
        assert drawn_from and drawn_from[-1] > 2, "the heading and first items kept"
        assert after.strips == compat.draw_offstage(whole, size)
        assert "three" in "".join(strip.text for strip in after.strips)


def test_a_container_changed_with_its_children_does_not_draw_far_regions_in() -> None:
    """A turn's start: the header, the session list and the chat pane changed, the chat pane
    with its messages and their parts inside it; the side panel on the right did not."""
    header, sessions = Region(0, 0, 160, 1), Region(0, 2, 25, 45)
    chat = Region(26, 1, 67, 46)
    inside_chat = [Region(26, 1, 67, 42), Region(26, 1, 66, 41), Region(28, 7, 63, 23)]
    inside_chat += [Region(28, 1, 63, 6), Region(28, 30, 63, 11), Region(92, 1, 1, 42)]
    boxes = compat._boxes([header, *inside_chat, sessions, chat])
    covered = {(x, y) for box in boxes for x in range(box.x, box.right) for y in box.line_range}
    changed = [header, sessions, chat]
    assert all(
        (x, y) in covered for r in changed for x in range(r.x, r.right) for y in r.line_range
    )
    side_panel = Region(94, 2, 66, 45)
    assert not any(box.overlaps(side_panel) for box in boxes), boxes


async def test_notices_are_toasts_in_a_rack_the_screen_css_can_name() -> None:
    app = App[None]()
    async with app.run_test(size=(60, 12), notifications=True) as pilot:
        app.notify("hello")
        await pilot.pause()
        await pilot.pause()
        toast = app.screen.query_one(compat.Toast)
        # main_screen.tcss moves the rack by this type name
        assert type(toast.parent.parent).__name__ == "ToastRack"  # type: ignore[union-attr]


async def test_a_layout_asked_for_is_pending_until_handed_to_the_screen() -> None:
    app = _Blocks()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        markdown = app.query_one(Markdown)
        assert not compat.layout_pending(markdown)
        block = next(b for b in markdown.children if isinstance(b, MarkdownBlock))
        block.refresh(layout=True)  # a block inside it: the Markdown's size may change
        assert compat.layout_pending(markdown)
        await pilot.pause()
        assert not compat.layout_pending(markdown)


class _Counted(Static):
    """A Static that counts the times the compositor draws it."""

    draws = 0

    def render_lines(self, crop: Region) -> list[Strip]:
        self.draws += 1
        return super().render_lines(crop)


class _Apart(App[None]):
    CSS = """
    #top { height: 1; } #middle { height: 10; width: 30; } #bottom { dock: bottom; height: 1; }
    #right { dock: right; width: 20; height: 10; }
    """

    def compose(self) -> ComposeResult:
        yield Static("top", id="top")
        with Vertical(id="middle"):  # (a widget in a container, as the app's all are)
            yield _Counted("a bystander\n" * 8)
        yield Static("right", id="right")
        yield Static("bottom", id="bottom")

    def on_mount(self) -> None:
        compat.repaint_apart(self.screen)


class _Terminal:
    """What a terminal shows of ``app``'s screen: a full render, then the partial updates
    it is sent from now on (:meth:`shows` applies them)."""

    def __init__(self, app: App[None]) -> None:
        self.compositor = compositor = app.screen._compositor
        self.lines = [list(strip.text) for strip in compositor.render_strips()]
        self.console = Console(width=app.size.width, height=app.size.height, file=io.StringIO())
        self.updates: list[ChopsUpdate | None] = []
        render_partial_update = compositor.render_partial_update

        def recorded() -> ChopsUpdate | None:
            update = render_partial_update()
            self.updates.append(update)
            return update

        compositor.render_partial_update = recorded  # type: ignore[method-assign]

    def shows(self) -> list[str]:
        """The terminal's lines once the updates are applied."""
        for update in self.updates:
            if update is not None:
                _apply(update, self.lines, self.console)
        self.updates = []
        return ["".join(line) for line in self.lines]

    def full_render(self) -> list[str]:
        return [strip.text for strip in self.compositor.render_strips()]


def _apply(update: ChopsUpdate | None, lines: list[list[str]], console: Console) -> None:
    """Write what a partial screen update sends to the terminal into ``lines``."""
    assert update is not None
    x = y = 0
    for segment in console.render(update):
        if segment.control:
            code = segment.control[0]
            assert code[0] == ControlType.CURSOR_MOVE_TO and len(code) == 3
            x, y = int(code[1]), int(code[2])
            continue
        for char in segment.text.replace("\n", ""):  # (a line's end: the next move places it)
            lines[y][x] = char
            x += 1


async def test_far_apart_changes_are_repainted_apart_with_the_same_cells() -> None:
    app = _Apart()
    async with app.run_test(size=(60, 16)) as pilot:
        await pilot.pause()
        terminal = _Terminal(app)
        bystander = app.query_one(_Counted)
        draws = bystander.draws
        with app.batch_update():  # one frame
            app.query_one("#top", Static).update("top, changed")
            app.query_one("#right", Static).update("right, changed")
            app.query_one("#bottom", Static).update("bottom, changed")
        await pilot.pause()
        assert terminal.updates and all(update is not None for update in terminal.updates)
        assert bystander.draws == draws, "the widget between the changes was not drawn again"
        assert terminal.shows() == terminal.full_render()


class _CountedBox(Vertical):
    """A container that records the crops the compositor draws it with."""

    def __init__(self, *children: Static, id: str) -> None:
        super().__init__(*children, id=id)
        self.crops: list[Region] = []

    def render_lines(self, crop: Region) -> list[Strip]:
        self.crops.append(crop)
        return super().render_lines(crop)


class _Nested(App[None]):
    CSS = """
    #box { height: 10; width: 40; } #box > Static { height: 1; }
    #foot { dock: bottom; height: 1; }
    """

    def compose(self) -> ComposeResult:
        with _CountedBox(*(Static(f"line {n}", id=f"l{n}") for n in range(10)), id="box"):
            pass
        yield _Counted("the footer", id="foot")

    def on_mount(self) -> None:
        compat.repaint_apart(self.screen)


async def test_a_change_draws_only_the_widgets_and_lines_that_show_in_it() -> None:
    """A one-line change draws the container under it for that line only, and not a widget
    straight on the screen elsewhere (Textual drew both whole); the terminal gets the cells
    a full render gives."""
    app = _Nested()
    async with app.run_test(size=(50, 14)) as pilot:
        await pilot.pause()
        terminal = _Terminal(app)
        box, foot = app.query_one(_CountedBox), app.query_one(_Counted)
        box.crops.clear()
        draws = foot.draws
        app.query_one("#l4", Static).update("line 4, changed")
        await pilot.pause()
        assert foot.draws == draws, "the footer was drawn for a change far from it"
        assert box.crops and all(crop.height == 1 and crop.y == 4 for crop in box.crops)
        shown = terminal.shows()
        assert shown == terminal.full_render()
        assert "line 4, changed" in shown[4]


class _Containers(App[None]):
    CSS = """
    #padded { padding: 1 2; border: round red; height: 6; }
    """

    def compose(self) -> ComposeResult:
        from tui.app.widgets.chat_log import ChatLog
        from tui.app.widgets.chat_message import ChatMessage

        with ChatLog(id="log"):
            yield ChatMessage("user", "a question")
            yield ChatMessage("assistant", "an **answer**\n\n- one\n- two\n")
            yield Vertical(id="padded")


async def test_alike_lines_are_the_lines_textual_draws() -> None:
    """``alike_lines`` relies on ``Widget._styles_cache`` (``StylesCache.render_widget``): a
    container's lines drawn once and repeated are the lines Textual draws one by one."""
    from textual.widget import Widget

    from tui.app.widgets.chat_message import ChatMessage

    app = _Containers()
    async with app.run_test(size=(50, 20)) as pilot:
        await pilot.pause()
        messages = list(app.query(ChatMessage))
        messages[1].focus()
        await pilot.pause()
        widgets = [app.query_one("#log"), *messages, app.query_one("#padded")]
        for widget in widgets:
            crop = Region(0, 0, widget.size.width, widget.size.height)
            for part in (crop, Region(2, 1, crop.width - 3, crop.height - 1)):
                drawn = compat.alike_lines(widget, part)
                widget._styles_cache.clear()
                expected = Widget.render_lines(widget, part)
                assert [list(strip) for strip in drawn] == [list(strip) for strip in expected]
                assert len(drawn) == part.height
