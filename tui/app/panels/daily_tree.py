"""Daily-log browser: month → date → entries (the ``##`` sections of each log), rendered on select."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Markdown, Static, Tree
from textual.widgets.markdown import MarkdownBlock
from textual.widgets.tree import TreeNode

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.app.panels.base import EnginePanel, format_source
from tui.app.panels.daily_log_tree import DailyLogTree
from tui.app.panels.daily_marks import block_at, is_retired_block, mark_retired, retired_lines
from tui.engine.engine import MemoryEngine
from tui.engine.markdown import is_fence, parse_heading
from tui.engine.workspace import MEMORY_DIR, MEMORY_FILE, date_for_path

#: Seconds between two looks whether a hidden panel holding a re-read log is shown again.
HIDDEN_CHECK_S = 0.5
#: The month of logs without a date in their name.
UNDATED = "undated"
#: Lines of a log (or an entry) the view renders at most.
VIEW_MAX_LINES = 150


@dataclass(frozen=True)
class LogEntry:
    """One ``##`` section of a daily log (lines ``start_line..end_line``, 1-based)."""

    title: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class DailyLogOutline:
    """A daily log file, its date and its sections (not its text: that is read when shown)."""

    path: str
    day: date | None
    entries: tuple[LogEntry, ...] = ()

    @property
    def label(self) -> str:
        """The date, plus the file name when it says more than the date (``2025-11-01 garden``)."""
        if self.day is None:
            return self.path.removeprefix(MEMORY_DIR + "/")
        stem = self.path.rsplit("/", 1)[-1].removesuffix(".md")
        extra = stem.replace(self.day.isoformat(), "").strip(" -_")
        return f"{self.day.isoformat()} {self.day:%a}" + (f" · {extra}" if extra else "")

    @property
    def month(self) -> str:
        """``2026-11`` (or :data:`UNDATED`): the tree's first level."""
        return f"{self.day:%Y-%m}" if self.day else UNDATED


def shown_text(text: str, max_lines: int) -> str:
    """``text`` as the view renders it: at most ``max_lines`` lines (cut before a ``##`` entry
    when one starts in the second half), a code fence left open closed, and a line saying how
    much was left out.

    Rendering Markdown mounts a widget per block on the UI thread: a 3,000-line log would
    freeze the screen for seconds, and one reads a long log entry by entry anyway."""
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    cut = max_lines
    in_fence = False
    for number, line in enumerate(lines[:max_lines]):
        if is_fence(line):
            in_fence = not in_fence
        elif not in_fence and number > max_lines // 2 and line.startswith("## "):
            cut = number
    kept = lines[:cut]
    if sum(1 for line in kept if is_fence(line)) % 2:
        kept.append("```")
    return (
        "\n".join(kept)
        + f"\n\n*… {len(lines) - cut:,} more lines: select an entry in the tree to read it.*\n"
    )


def section_text(text: str, entry: LogEntry) -> str:
    """The Markdown of one entry of a log whose text is ``text``."""
    lines = text.splitlines()
    return "\n".join(lines[entry.start_line - 1 : entry.end_line])


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def clean_title(heading: str) -> str:
    """A heading as a label: without metadata comments (``<!-- mem src=auto … -->``) or
    doubled spaces."""
    return " ".join(_COMMENT.sub(" ", heading).split())


def outline_entries(text: str) -> list[LogEntry]:
    """The ``##`` sections of a log (headings inside code fences do not count)."""
    lines = text.splitlines()
    starts: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(lines, start=1):
        if is_fence(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else parse_heading(line)
        if heading is not None and heading[0] == 2:
            starts.append((number, heading[1]))
    entries = []
    for index, (start, title) in enumerate(starts):
        end = starts[index + 1][0] - 1 if index + 1 < len(starts) else len(lines)
        while end > start and not lines[end - 1].strip():
            end -= 1
        entries.append(LogEntry(clean_title(title) or "(untitled)", start, end))
    return entries


@dataclass(frozen=True)
class _NodeRef:
    """What a tree node stands for: a month, a log, or an entry of a log."""

    kind: str  # "month" | "log" | "entry"
    key: str
    log: DailyLogOutline | None = None
    entry: LogEntry | None = None


def cursor_to(tree: Tree[_NodeRef], node: TreeNode[_NodeRef]) -> None:
    """Put ``tree``'s cursor on ``node``, a node just added or expanded: its line number
    exists once the tree has listed its lines, which a draw of the tree or its idle turn does
    — or asking for a line, done here (a repaint beside the tree may come first: it draws
    only what changed)."""
    tree.get_node_at_line(0)
    tree.move_cursor(node)


class DailyTree(EnginePanel):
    """Browses ``memory/`` daily logs by month and date; the selected log or entry is rendered.

    :meth:`reload` lists the logs in a worker (called when flushes or edits change them): each
    log's outline (its ``##`` entries) is parsed once and kept while its size and mtime stay
    the same, and no log's text is held. The tree is built lazily: a month's logs become nodes
    when it is expanded, a log's entries when the log is, so a rebuild on the UI thread costs
    the months and the open branches, not every log. The shown log is read in a worker.
    Expanded months and dates and the shown node survive a reload.
    """

    @dataclass
    class Loaded(Answer):
        """Every daily log with its entries, newest first."""

        logs: list[DailyLogOutline]

    class ForgottenWanted(Message):
        """The user asked for the list of forgotten memories (``f``), to restore one."""

    @dataclass
    class ViewLoaded(Answer):
        """The text of the log ``path`` (shown whole, or the entry ``key``), read by a worker."""

        path: str
        key: str
        text: str

    HELP = """\
## Daily

Daily logs under `memory/`, by month → date → entries (each `##` section of a log).
Select a date to read the whole log, or an entry to read just that section.
New entries appear as flushes write them. Entries that were forgotten (or superseded) are
struck through, dimmed and labelled; **f** lists every forgotten memory, to restore one.
**Enter** on a search result opens its section here with its line marked.
"""

    BINDINGS = [
        Binding(
            "f",
            "forgotten",
            "forgotten",
            id="daily.forgotten",
            tooltip="Forgotten and superseded memories: restore one",
        ),
    ]

    DEFAULT_CSS = """
    DailyTree {
        layout: vertical;
        height: 1fr;
    }
    DailyTree #daily-tree {
        height: 2fr;
        min-height: 5;
    }
    DailyTree #daily-title {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    DailyTree #daily-view-scroll {
        height: 3fr;
    }
    DailyTree #daily-view .-retired {
        color: $text-muted;
    }
    DailyTree #daily-view .-marked {
        background: $accent 35%;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(engine, name=name, id=id, classes=classes)
        self.logs: list[DailyLogOutline] = []
        self._by_month: dict[str, list[DailyLogOutline]] = {}
        self._shown: tuple[str, str] | None = None  # (log path, entry key or "") on display
        #: Outlines by path with the (size, mtime) they were parsed at (the worker's cache).
        self._outlines: dict[str, tuple[tuple[int, int], DailyLogOutline]] = {}
        #: An entry asked for (:meth:`show_entry`) before the logs were listed.
        self._entry_after_load: tuple[str, int] | None = None
        #: The line of the shown log that :meth:`show_entry` asked for: marked in the view.
        self.marked_line: int | None = None
        self._listings = Requests()  # of the daily logs
        self._views = Requests()  # of the shown log
        #: The latest read of the shown log, held while the panel is hidden.
        self._view_when_shown: DailyTree.ViewLoaded | None = None
        self._shown_check: Timer | None = None  # looks whether the panel is shown again

    def compose(self) -> ComposeResult:
        tree: Tree[_NodeRef] = DailyLogTree("memory/", id="daily-tree")
        tree.show_root = False
        yield tree
        yield Static("", id="daily-title")
        with VerticalScroll(id="daily-view-scroll"):
            yield Markdown("", id="daily-view")

    @property
    def _tree(self) -> DailyLogTree[_NodeRef]:
        return self.query_one("#daily-tree", DailyLogTree)

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Re-list the daily logs (in a worker) and rebuild the tree."""
        self._load_logs(self._listings.new())

    def action_forgotten(self) -> None:
        self.post_message(self.ForgottenWanted())

    def index_changed(self, paths: list[str]) -> None:
        """Reload when a daily log changed (an empty list means anything may have)."""
        extra = self.engine.workspace.extra_files
        if not paths or any(path.startswith(MEMORY_DIR + "/") or path in extra for path in paths):
            self.reload()

    def show_entry(self, path: str, line: int) -> None:
        """Show the entry of the daily log ``path`` that holds ``line`` (the whole log if no
        entry does) with ``line`` marked and in view, and the tree's cursor on the entry; once
        the logs are listed, if they are not yet."""
        log = next((log for log in self.logs if log.path == path), None)
        if log is None:
            self._entry_after_load = (path, line)
            return
        self.marked_line = line
        entry = next((e for e in log.entries if e.start_line <= line <= e.end_line), None)
        key = f"{path}#L{entry.start_line}" if entry is not None else path
        tree = self._tree
        for node in list(tree.root.children):
            if node.data is not None and node.data.key == log.month:
                self._fill(node)
                node.expand()
                for child in node.children:
                    if child.data is not None and child.data.key == path:
                        self._fill(child)
                        child.expand()
        target = next((n for n in _walk(tree.root) if n.data and n.data.key == key), None)
        if target is not None:
            self.call_after_refresh(cursor_to, tree, target)
        self._shown = (path, key if entry is not None else "")
        self._show_selected()

    @work(thread=True, exclusive=True, group="daily-logs", exit_on_error=False)
    def _load_logs(self, number: int) -> None:
        cached = self._outlines
        outlines: dict[str, tuple[tuple[int, int], DailyLogOutline]] = {}
        for rel, path in self.engine.workspace.iter_memory_files():
            if rel == MEMORY_FILE:  # the MEMORY.md tab's; extra files are listed here
                continue
            try:
                info = os.stat(path)
            except OSError:
                continue
            stamp = (info.st_size, info.st_mtime_ns)
            known = cached.get(rel)
            if known is not None and known[0] == stamp:
                outlines[rel] = known
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            outline = DailyLogOutline(rel, date_for_path(rel), tuple(outline_entries(text)))
            outlines[rel] = (stamp, outline)
            # Parsing many logs is pure Python: let the UI thread take the GIL in between.
            time.sleep(0)
        self._outlines = outlines
        logs = [outline for _, outline in outlines.values()]
        logs.sort(key=lambda log: (log.day or date.min, log.path), reverse=True)
        self.post_message(self.Loaded(number, logs))

    @on(Loaded)
    @while_attached
    def _rebuild(self, message: Loaded) -> None:
        if not self._listings.is_latest(message):
            return
        if self.logs and message.logs == self.logs:
            # No log came, went or changed its sections (a log's text changed, or it was
            # embedded): the tree stays as it is. Rebuilding a long log's entries cost a
            # tick of 25-50 ms while the index was busy.
            self._after_listing()
            return
        first_load = not self.logs
        known = {log.path for log in self.logs}
        self.logs = message.logs
        self._by_month = {}
        for log in self.logs:
            self._by_month.setdefault(log.month, []).append(log)
        tree = self._tree
        expanded = {node.data.key for node in _walk(tree.root) if node.data and node.is_expanded}
        cursor = tree.cursor_node
        cursor_key = cursor.data.key if cursor is not None and cursor.data else None
        if self.logs and (first_load or self.logs[0].path not in known):
            # Open the newest log (at start-up, or when a flush has just started a new day).
            newest = self.logs[0]
            expanded |= {newest.month, newest.path}
            if first_load:
                self._shown = (newest.path, "")
        with tree.adding():
            tree.clear()
            for month, logs in self._by_month.items():
                day = logs[0].day
                label = f"{day:%Y-%m · %B %Y}" if day else "undated"
                node = tree.root.add(Text(label), _NodeRef("month", month))
                if month in expanded:
                    self._fill(node, expanded)
                    node.expand()
        # Keep the cursor where the user left it (a flush may reload the tree while they browse).
        for node in _walk(tree.root):
            if node.data and node.data.key == cursor_key:
                self.call_after_refresh(cursor_to, tree, node)
                break
        self._after_listing()

    def _after_listing(self) -> None:
        """Show the entry asked for before the logs were listed, or the selection again."""
        if self._entry_after_load is not None:
            path, line = self._entry_after_load
            self._entry_after_load = None
            self.show_entry(path, line)
            return
        self._show_selected()

    def _fill(self, node: TreeNode[_NodeRef], expanded: set[str] | None = None) -> None:
        """Give a month node its logs, or a log node its entries (once: nodes are made when
        their parent is first expanded); open the ones in ``expanded``."""
        ref = node.data
        if ref is None or node.children:
            return
        with self._tree.adding():
            if ref.kind == "month":
                for log in self._by_month.get(ref.key, []):
                    child = node.add(Text(log.label), _NodeRef("log", log.path, log))
                    child.allow_expand = bool(log.entries)
                    if expanded is not None and log.path in expanded:
                        self._fill(child)
                        child.expand()
            elif ref.kind == "log" and ref.log is not None:
                log = ref.log
                for entry in log.entries:
                    node.add_leaf(
                        Text(f"{entry.title}  L{entry.start_line}"),
                        _NodeRef("entry", f"{log.path}#L{entry.start_line}", log, entry),
                    )

    @on(Tree.NodeExpanded, "#daily-tree")
    def _node_expanded(self, event: Tree.NodeExpanded[_NodeRef]) -> None:
        self._fill(event.node)

    @on(Tree.NodeSelected, "#daily-tree")
    def _node_selected(self, event: Tree.NodeSelected[_NodeRef]) -> None:
        ref = event.node.data
        if ref is None or ref.log is None:
            return
        shown = (ref.log.path, ref.key if ref.kind == "entry" else "")
        if shown != self._shown:
            self.marked_line = None  # the user chose something else to read
        self._shown = shown
        self._show_selected()

    def _show_selected(self) -> None:
        """Show the selected log or entry again: read it from disk in a worker."""
        shown = self._shown
        if shown is None or not any(log.path == shown[0] for log in self.logs):
            title = self.query_one("#daily-title", Static)
            title.update("no daily logs yet" if not self.logs else "select a date or an entry")
            self.query_one("#daily-view", Markdown).update("")
            return
        self._read_log(self._views.new(), *shown)

    # Not exclusive (a read is short, and cancelling it would not stop the thread): the
    # request number keeps only the latest read.
    @work(thread=True, group="daily-view", exit_on_error=False)
    def _read_log(self, number: int, path: str, key: str) -> None:
        full = self.engine.workspace.root / path
        try:
            text = full.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            text = f"*could not read {path}: {exc.strerror or exc}*"
        self.post_message(self.ViewLoaded(number, path, key, text))

    @on(ViewLoaded)
    @while_attached
    def _view_loaded(self, message: ViewLoaded) -> None:
        if not self._views.is_latest(message):
            return  # another node was selected, or the log re-read, meanwhile
        if not self.region:
            # Hidden (another tab in front): a long log is hundreds of block widgets, and
            # mounting them stalled the chat just after a flush. Shown when the tab is.
            self._view_when_shown = message
            if self._shown_check is None:
                # Show is the prompt way; the check is the sure one (a Show can be missed
                # under load: a Pilot test saw none after a display change)
                self._shown_check = self.set_interval(HIDDEN_CHECK_S, self._show_held_view)
            return
        self._view_when_shown = None
        self._show_view(message)

    def activated(self) -> None:
        """The panel is shown (its tab was activated): render the read held meanwhile."""
        self._show_held_view()

    def _show_held_view(self) -> None:
        """Render the read held while hidden, once the panel is on screen."""
        waiting = self._view_when_shown
        if waiting is None or not self._views.is_latest(waiting):
            self._view_when_shown = None
        elif self.region:
            self._view_when_shown = None
            self._show_view(waiting)
        if self._view_when_shown is None and self._shown_check is not None:
            self._shown_check.stop()
            self._shown_check = None

    def _show_view(self, message: ViewLoaded) -> None:
        """Put the log or entry read by ``message`` in the view."""
        title = self.query_one("#daily-title", Static)
        view = self.query_one("#daily-view", Markdown)
        log = next((log for log in self.logs if log.path == message.path), None)
        entry = None
        if log is not None and message.key:
            entry = next(
                (e for e in log.entries if f"{log.path}#L{e.start_line}" == message.key), None
            )
        if entry is None:
            heading = Text(message.path, style="bold")
            first, text = 1, message.text
        else:
            heading = Text(
                format_source(message.path, entry.start_line, entry.end_line), style="bold"
            )
            first, text = entry.start_line, section_text(message.text, entry)
        if self.marked_line is not None:
            heading.append(f"  ▸ L{self.marked_line}", style="dim")
        title.update(heading)
        markdown = shown_text(mark_retired(text), VIEW_MAX_LINES)
        # A reload of an unchanged log re-renders nothing; the marks are set again anyway.
        rendered = view.update(markdown) if markdown != view.source else None
        self._decorate(rendered, text, first)

    @work(exclusive=True, group="daily-marks", exit_on_error=False)
    async def _decorate(self, rendered: AwaitComplete | None, text: str, first: int) -> None:
        """Once the view has rendered ``text`` (whose first line is line ``first`` of its log):
        dim the blocks of forgotten entries, and mark the block of :attr:`marked_line` and
        bring it into view."""
        if rendered is not None:
            # Shielded: a newer view cancels this worker, and must not cancel the rendering.
            await asyncio.shield(asyncio.ensure_future(rendered()))
        view = self.query_one("#daily-view", Markdown)
        blocks = list(view.query(MarkdownBlock))
        retired = retired_lines(text)
        source = text.split("\n")
        for block in blocks:
            block.set_class(is_retired_block(block, retired, source), "-retired")
            block.remove_class("-marked")
        if self.marked_line is None:
            return
        marked = block_at(blocks, self.marked_line - first)
        if marked is not None:
            marked.add_class("-marked")
            scroll = self.query_one("#daily-view-scroll", VerticalScroll)
            scroll.call_after_refresh(scroll.scroll_to_widget, marked, animate=False, top=True)


def _walk(node: TreeNode[_NodeRef]) -> Iterator[TreeNode[_NodeRef]]:
    """Every node below ``node``, depth first."""
    for child in node.children:
        yield child
        yield from _walk(child)
