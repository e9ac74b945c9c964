"""Every use of Textual's private API, in one place.

Textual moves its internals in minor releases. Each name here is checked by
``tests/app/test_textual_compat.py``, whose failure names the internal that moved, instead of
streaming, folding or a key quietly breaking. Three private methods are overridden where they
belong, and checked there too: ``MarkdownBlock._update_from_block`` (``GrowingList`` in
``widgets/chat_markdown.py``), ``TextArea._on_key`` (``widgets/chat_input.py``) and
``Tree._invalidate`` (``DailyLogTree`` in ``panels/daily_log_tree.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from textual._compositor import ChopsUpdate, Compositor
from textual.command import CommandPalette
from textual.geometry import Region, Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets._markdown import (
    MarkdownBulletList,
    MarkdownOrderedList,
    MarkdownOrderedListItem,
    MarkdownUnorderedListItem,
)
from textual.widgets._tabbed_content import ContentTabs
from textual.widgets._toast import Toast
from textual.widgets.markdown import MarkdownBlock

__all__ = [
    "LIST_ITEMS",
    "ContentTabs",
    "MarkdownBulletList",
    "MarkdownOrderedList",
    "Toast",
    "block_kind",
    "child_blocks",
    "copy_block_context",
    "alike_lines",
    "draw_offstage",
    "OffstagePicture",
    "redraw_offstage",
    "release_offstage",
    "layout_pending",
    "list_bullet",
    "palette_search_group",
    "palette_select",
    "picture_of",
    "register_offstage",
    "repaint_apart",
]

#: Dirty regions are repainted as one when the box around them is at most this many times
#: their areas (see :func:`repaint_apart`)...
REPAINT_SLACK = 1.5
#: ...in at most this many boxes (each draws the widgets it meets whole)...
REPAINT_BOXES = 6
#: ...and in one box when there are more regions than this.
REPAINT_REGIONS = 100

#: The item blocks of Textual's Markdown lists.
LIST_ITEMS = (MarkdownOrderedListItem, MarkdownUnorderedListItem)


def picture_of(widget: Widget) -> list[Strip]:
    """The lines ``widget`` and its children draw at its current size, as the screen would
    (no public API draws a widget's subtree to lines)."""
    compositor = Compositor()
    compositor.reflow(widget, widget.outer_size)
    return compositor.render_strips()


def register_offstage(screen: Screen[Any]) -> None:
    """Start ``screen`` without showing it: widgets can be mounted in it (and are closed with
    the app), and it is never laid out or painted by Textual (see :func:`draw_offstage`)."""
    app = screen.app
    app._register(app, screen)


def draw_offstage(widget: Widget, size: Size) -> list[Strip]:
    """The lines ``widget`` (a child of a screen started by :func:`register_offstage`) and its
    children draw at ``size``, as they would on a shown screen.

    A widget draws at the size its screen's layout gave it: the widget is laid out here in its
    screen's own compositor (where Textual looks its size up), each widget in it is told its
    size as a shown screen's layout tells it, and the result drawn."""
    return redraw_offstage(widget, size, None).strips


@dataclass(frozen=True)
class OffstagePicture:
    """What :func:`redraw_offstage` drew: the lines, and where each widget in them was."""

    strips: list[Strip]
    regions: dict[Widget, Region]


def redraw_offstage(widget: Widget, size: Size, before: OffstagePicture | None) -> OffstagePicture:
    """:func:`draw_offstage`, drawing again only the lines from the first one that may differ
    from ``before`` (the last picture of ``widget``, at the same width and colours).

    Textual draws a container again whole when its height changes, and every widget over the
    area drawn whole: a streamed segment's picture drew all its lines at each write, for the
    few at its end that changed (``tests/bench/ui_speed.py``: 4-13 ms a picture). The lines
    above the first widget that is new, moved, has content to draw again (a refreshed leaf), or
    is a container that grew or shrank (from its old or new bottom, whichever is higher, and
    its bottom gutter) are taken from ``before``. For widgets whose containers draw no content
    of their own, as Markdown's blocks: a container's lines (background, borders, padding)
    change with its size and styles, not when Textual marks it dirty for a child's change; a
    new background under the widget is the caller's to tell (see ``LiveStage.picture``).
    """
    compositor = widget.screen._compositor
    compositor.reflow(widget, size)
    for node, (region, _order, _clip, virtual_size, container_size, _, _) in compositor.layers:
        node._size_updated(region.size, virtual_size, container_size)
    placed = compositor.visible_widgets
    regions = {node: region for node, (region, _clip) in placed.items()}
    if before is None:
        return OffstagePicture(compositor.render_strips(), regions)
    first = min(_first_changed_line(regions, before.regions), len(before.strips), size.height)
    if first == 0:
        return OffstagePicture(compositor.render_strips(), regions)
    lines = before.strips[:first] + _lines_from(compositor, first, size)
    for node, region in regions.items():
        # Lines above ``first`` are dirty only in a container that grew (its cache is cleared
        # with any new size): they are the lines kept, not ones to draw again next time.
        node._styles_cache._dirty_lines.difference_update(range(first - region.y))
    return OffstagePicture(lines, regions)


def release_offstage(screen: Screen[Any]) -> None:
    """Let go of the widgets drawn on ``screen`` by :func:`redraw_offstage`: its compositor
    keeps the last ones (a closed segment's blocks) until it draws again, and the screen every
    one that asked it for a layout."""
    compositor = screen._compositor
    compositor.clear()
    compositor.root = None
    # The widgets that asked the screen for a layout, kept until its layout runs: a screen
    # never shown never runs it, and every streamed segment's blocks stayed there.
    screen._layout_widgets.clear()


def _first_changed_line(regions: dict[Widget, Region], before: dict[Widget, Region]) -> int:
    """The first line of a picture whose widgets are at ``regions`` that may differ from the
    last one, whose widgets were at ``before``."""
    parents = {node.parent for node in regions}
    first = min(
        (region.y for node, region in before.items() if node not in regions), default=1 << 30
    )
    for node, region in regions.items():
        old = before.get(node)
        if old is None or (old.x, old.y, old.width) != (region.x, region.y, region.width):
            first = min(first, region.y if old is None else min(old.y, region.y))
        elif old.height != region.height:
            if node not in parents:  # content that reflowed
                first = min(first, region.y)
            else:  # its own lines are the same above its bottom gutter
                bottom = min(old.bottom, region.bottom) - node.styles.gutter.bottom - 1
                first = min(first, max(region.y, bottom))
        elif node not in parents:  # a leaf told to draw its content again
            dirty = node._styles_cache._dirty_lines
            if dirty:
                first = min(first, region.y + min(dirty))
    return first


def _lines_from(compositor: Compositor, first: int, size: Size) -> list[Strip]:
    """Lines ``first``.. of what ``compositor`` lays out, drawn as ``render_strips`` draws them
    but asking each widget only for its lines there (Textual's crop picks the widgets it
    meets and draws each of them whole)."""
    crop = Region(0, first, size.width, size.height - first)
    cuts = compositor.cuts
    chops: list[dict[int, Strip | None]] = [
        dict.fromkeys(cut_set[:-1]) for cut_set in cuts[first : size.height]
    ]
    for node, (region, clip) in compositor.visible_widgets.items():
        area = region.intersection(clip).intersection(crop)
        if not area:
            continue
        strips = node.render_lines(
            Region(area.x - region.x, area.y - region.y, area.width, area.height)
        )
        first_cut, last_cut = area.column_span
        for y, strip in zip(area.line_range, strips, strict=False):
            line = chops[y - first]
            final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
            pieces = strip.divide([cut - area.x for cut in final_cuts[1:]])
            for cut, piece in zip(final_cuts, pieces, strict=False):  # front to back: first wins
                if line.get(cut) is None:
                    line[cut] = piece
    return [Strip.join(line.values()) for line in chops]


def alike_lines(widget: Widget, crop: Region) -> list[Strip]:
    """The lines of a container in ``crop``, drawn once when they are all alike.

    A container draws its own lines under its children (background, left and right borders,
    padding): Textual draws each of them again whenever the container's size changes, as the
    chat log and the streamed message do at every new line (a third of a frame's drawing).
    With no top or bottom border, outline, padding or title, and no content of its own (the
    caller says so), every line is the same line: it is drawn once and repeated.
    """
    styles = widget.styles
    alike = (
        not styles.padding.top
        and not styles.padding.bottom
        and not styles.border_top[0]
        and not styles.border_bottom[0]
        and not styles.outline_top[0]
        and not styles.outline_bottom[0]
        and widget.border_title is None
        and widget.border_subtitle is None
    )
    if not alike or crop.height <= 1:
        return widget._styles_cache.render_widget(widget, crop)
    line = widget._styles_cache.render_widget(widget, Region(crop.x, 0, crop.width, 1))[0]
    return [line] * crop.height


def layout_pending(widget: Widget) -> bool:
    """True if ``widget`` or a widget in it is not mounted yet, or has a layout (or a
    recompose) it has not handed to the screen yet: the last layout may not be its last."""
    return any(
        not node.is_mounted or node._layout_required or node._recompose_required
        for node in widget.walk_children(Widget, with_self=True)
    )


def child_blocks(block: MarkdownBlock) -> list[MarkdownBlock]:
    """The blocks a parsed (not yet mounted) Markdown block holds, e.g. a list's items."""
    return block._blocks


def copy_block_context(target: MarkdownBlock, source: MarkdownBlock) -> None:
    """Give ``target`` the parse context (token, source lines…) of ``source``."""
    target._copy_context(source)


def block_kind(block: MarkdownBlock) -> str | None:
    """The markdown-it token type a block was made from (``paragraph_open``…), if known."""
    token = block._token
    return None if token is None else token.type


def list_bullet(item: MarkdownBlock) -> str:
    """An ordered list item's number as written (``"7"``), or ``""`` for other blocks."""
    return str(getattr(item, "bullet", ""))


def palette_search_group() -> str:
    """The worker group in which the command palette searches for the typed text."""
    return CommandPalette._GATHER_COMMANDS_GROUP


def palette_select(palette: CommandPalette) -> None:
    """Act on the palette's highlighted hit as its Enter would (run it or fill it in)."""
    palette._select_or_command()


def repaint_apart(screen: Screen[Any]) -> None:
    """Make ``screen`` repaint far-apart changes apart, and draw only what shows in them.

    Textual repaints the box around every region that changed since the last frame, every
    widget in it drawn whole: a line of the header, the chat log and a key of the footer
    changed in one frame made it draw the whole screen (50-100 ms at 160×48, the stalls of a
    turn's start and of indexing progress). Here the changes are gathered into boxes not much
    bigger than what they hold, each drawn alone; the terminal gets the same cells.
    """
    compositor = screen._compositor

    def render_partial_update() -> ChopsUpdate | None:
        regions = list(compositor._dirty_regions)
        compositor._dirty_regions.clear()
        if not regions:
            return None
        spans = list(compositor._regions_to_spans(regions))
        rendered = {y for y, _, _ in spans}
        screen_region = compositor.size.region
        boxes = [box for box in map(screen_region.intersection, _boxes(regions)) if box]
        cuts = compositor.cuts
        ends = [cut_set[1:] for cut_set in cuts]
        if len(boxes) == 1:  # (Textual's own way)
            return ChopsUpdate(
                compositor._render_chops(boxes[0], rendered.__contains__), spans, ends
            )
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        for box in boxes:
            lines = rendered.intersection(box.line_range)
            drawn = compositor._render_chops(box, lines.__contains__)
            for y in lines:
                line = chops[y]
                for (x, strip), end in zip(drawn[y].items(), ends[y], strict=True):
                    if strip is not None and x < box.right and end > box.x:
                        line[x] = strip
        return ChopsUpdate(chops, spans, ends)

    compositor.render_partial_update = render_partial_update  # type: ignore[method-assign]
    whole_renders = compositor._get_renders

    def renders(crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        return whole_renders(None) if crop is None else _renders_in(compositor, crop)

    compositor._get_renders = renders  # type: ignore[method-assign]


def _renders_in(
    compositor: Compositor, crop: Region
) -> Iterator[tuple[Region, Region, list[Strip]]]:
    """The widgets that show in ``crop``, each drawn for the lines of it in ``crop`` only.

    Textual's own draws every widget whose clip touches ``crop``, whole: a widget straight on
    the screen (the header, the footer, the side panels' containers) was drawn in full for a
    change anywhere, and a tall one for a change of one of its lines. A widget's lines
    outside ``crop`` are never sent (the update is cut to the changed regions, inside it), so
    they are not drawn; across, a widget is drawn whole, as its cuts need.
    """
    for widget, (region, clip) in compositor.visible_widgets.items():
        if not crop.overlaps(region.intersection(clip)):
            continue
        band = clip.intersection(Region(clip.x, crop.y, clip.width, crop.height))
        drawn = region.intersection(band)
        if drawn:
            yield (
                region,
                band,
                widget.render_lines(
                    Region(drawn.x - region.x, drawn.y - region.y, drawn.width, drawn.height)
                ),
            )


def _boxes(regions: list[Region]) -> list[Region]:
    """``regions`` gathered into at most :data:`REPAINT_BOXES` boxes, each at most
    :data:`REPAINT_SLACK` times the area of what it holds where it can be (past that, the two
    that grow least joined); one box around them all when they are many (a whole view)."""
    if len(regions) > REPAINT_REGIONS:
        return [Region.from_union(regions)]
    boxes: list[tuple[Region, int]] = []  # a box, and the area of what it holds
    for region in _outermost(regions):
        box, area = region, region.area
        merged = True
        while merged:  # a grown box may now take in another
            merged = False
            for index, (other, other_area) in enumerate(boxes):
                union = box.union(other)
                if union.area <= REPAINT_SLACK * (area + other_area):
                    box, area = union, area + other_area
                    del boxes[index]
                    merged = True
                    break
        boxes.append((box, area))
        if len(boxes) > REPAINT_BOXES:
            pairs = [(a, b) for a in range(len(boxes)) for b in range(a + 1, len(boxes))]
            a, b = min(pairs, key=lambda pair: _growth(boxes[pair[0]][0], boxes[pair[1]][0]))
            (box_a, area_a), (box_b, area_b) = boxes[a], boxes[b]
            del boxes[b], boxes[a]
            boxes.append((box_a.union(box_b), area_a + area_b))
    return [box for box, _ in boxes]


def _outermost(regions: list[Region]) -> list[Region]:
    """``regions`` without those inside another: a container that changed with its children
    (a chat message and its parts) counted their areas over and over, so that what a box
    held looked several times its size and a box took in far regions (the whole screen
    repainted at a turn's start, the side panel that had not changed included)."""
    kept: list[Region] = []
    for region in sorted(regions, key=lambda region: region.area, reverse=True):
        if not any(outer.contains_region(region) for outer in kept):
            kept.append(region)
    return kept


def _growth(one: Region, other: Region) -> int:
    return one.union(other).area - one.area - other.area
