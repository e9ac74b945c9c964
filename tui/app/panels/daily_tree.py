"""Daily-log browser: month → date → entries (the ``##`` sections of each log), rendered on select."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Markdown, Static, Tree
from textual.widgets.tree import TreeNode

from tui.app.messages import while_attached
from tui.app.panels.base import EnginePanel, format_source
from tui.engine.engine import MemoryEngine
from tui.engine.markdown import is_fence, parse_heading
from tui.engine.workspace import MEMORY_DIR, date_for_path


@dataclass(frozen=True)
class LogEntry:
    """One ``##`` section of a daily log (lines ``start_line..end_line``, 1-based)."""

    title: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class DailyLogOutline:
    """A daily log file, its date and its sections."""

    path: str
    day: date | None
    text: str
    entries: list[LogEntry] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The date, plus the file name when it says more than the date (``2025-11-01 garden``)."""
        if self.day is None:
            return self.path.removeprefix(MEMORY_DIR + "/")
        stem = self.path.rsplit("/", 1)[-1].removesuffix(".md")
        extra = stem.replace(self.day.isoformat(), "").strip(" -_")
        return f"{self.day.isoformat()} {self.day:%a}" + (f" · {extra}" if extra else "")

    def section(self, entry: LogEntry) -> str:
        """The Markdown of one entry."""
        lines = self.text.splitlines()
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


UNDATED = "undated"


class DailyTree(EnginePanel):
    """Browses ``memory/`` daily logs by month and date; the selected log or entry is rendered.

    :meth:`reload` re-reads the logs in a worker (called when flushes or edits change them);
    expanded months and dates and the shown node survive a reload.
    """

    @dataclass
    class Loaded(Message, bubble=False):
        """Every daily log with its entries."""

        logs: list[DailyLogOutline]

        def can_replace(self, message: Message) -> bool:
            """A fresher listing makes a pending one pointless."""
            return isinstance(message, type(self))

    HELP = """\
## Daily

Daily logs under `memory/`, by month → date → entries (each `##` section of a log).
Select a date to read the whole log, or an entry to read just that section.
New entries appear as flushes write them.
"""

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
        self._shown: tuple[str, str] | None = None  # (log path, entry key or "") on display

    def compose(self) -> ComposeResult:
        tree: Tree[_NodeRef] = Tree("memory/", id="daily-tree")
        tree.show_root = False
        yield tree
        yield Static("", id="daily-title")
        with VerticalScroll(id="daily-view-scroll"):
            yield Markdown("", id="daily-view")

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Re-read the daily logs from disk (in a worker) and rebuild the tree."""
        self._load_logs()

    def index_changed(self, paths: list[str]) -> None:
        """Reload when a daily log changed (an empty list means anything may have)."""
        if not paths or any(path.startswith(MEMORY_DIR + "/") for path in paths):
            self.reload()

    @work(thread=True, exclusive=True, group="daily-logs", exit_on_error=False)
    def _load_logs(self) -> None:
        logs = []
        for rel, path in self.engine.workspace.iter_memory_files():
            if not rel.startswith(MEMORY_DIR + "/"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            logs.append(DailyLogOutline(rel, date_for_path(rel), text, outline_entries(text)))
        logs.sort(key=lambda log: (log.day or date.min, log.path), reverse=True)
        self.post_message(self.Loaded(logs))

    @on(Loaded)
    @while_attached
    def _rebuild(self, message: Loaded) -> None:
        first_load = not self.logs
        known = {log.path for log in self.logs}
        self.logs = message.logs
        tree = self.query_one("#daily-tree", Tree)
        expanded = {node.data.key for node in _walk(tree.root) if node.data and node.is_expanded}
        cursor = tree.cursor_node
        cursor_key = cursor.data.key if cursor is not None and cursor.data else None
        tree.clear()
        months: dict[str, TreeNode[_NodeRef]] = {}
        for log in self.logs:
            month = f"{log.day:%Y-%m}" if log.day else UNDATED
            if month not in months:
                label = f"{log.day:%Y-%m · %B %Y}" if log.day else "undated"
                months[month] = tree.root.add(Text(label), _NodeRef("month", month))
            log_node = months[month].add(Text(log.label), _NodeRef("log", log.path, log))
            for entry in log.entries:
                log_node.add_leaf(
                    Text(f"{entry.title}  L{entry.start_line}"),
                    _NodeRef("entry", f"{log.path}#L{entry.start_line}", log, entry),
                )
            if not log.entries:
                log_node.allow_expand = False
        if self.logs and (first_load or self.logs[0].path not in known):
            # Open the newest log (at start-up, or when a flush has just started a new day).
            newest = self.logs[0]
            expanded |= {next(iter(months)), newest.path}
            if first_load:
                self._shown = (newest.path, "")
        for node in _walk(tree.root):
            if node.data and node.data.key in expanded:
                node.expand()
        # Keep the cursor where the user left it (a flush may reload the tree while they browse).
        for node in _walk(tree.root):
            if node.data and node.data.key == cursor_key:
                # Line numbers exist once the tree has laid out its new nodes.
                self.call_after_refresh(tree.move_cursor, node)
                break
        self._refresh_view()

    @on(Tree.NodeSelected, "#daily-tree")
    def _node_selected(self, event: Tree.NodeSelected[_NodeRef]) -> None:
        ref = event.node.data
        if ref is None or ref.log is None:
            return
        self._shown = (ref.log.path, ref.key if ref.kind == "entry" else "")
        self._refresh_view()

    def _refresh_view(self) -> None:
        """Show the selected log or entry again, from the freshly loaded text."""
        title = self.query_one("#daily-title", Static)
        view = self.query_one("#daily-view", Markdown)
        log = next((log for log in self.logs if self._shown and log.path == self._shown[0]), None)
        if log is None:
            title.update("no daily logs yet" if not self.logs else "select a date or an entry")
            view.update("")
            return
        entry = next(
            (
                e
                for e in log.entries
                if self._shown and f"{log.path}#L{e.start_line}" == self._shown[1]
            ),
            None,
        )
        if entry is None:
            title.update(Text(log.path, style="bold"))
            view.update(log.text)
        else:
            title.update(
                Text(format_source(log.path, entry.start_line, entry.end_line), style="bold")
            )
            view.update(log.section(entry))


def _walk(node: TreeNode[_NodeRef]):
    """Every node below ``node``, depth first."""
    for child in node.children:
        yield child
        yield from _walk(child)
