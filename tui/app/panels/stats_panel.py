"""Stats and activity: index counts, model state, last flush per trigger, and a live event log."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.app.panels.base import EnginePanel
from tui.chat.events import FlushOutcome
from tui.chat.state import WorkspaceState
from tui.engine import usage
from tui.engine.engine import MemoryEngine
from tui.engine.visible import control_pictures

#: Lines kept in the activity log.
LOG_LINES = 1000
#: Files the index skipped named in the summary, at most.
WARNINGS_SHOWN = 5

#: Flush outcomes shown as a warning.
UNWRITTEN = ("skipped", "failed")
#: How a flush that left a session's messages unlogged is shown when only the state file says so.
NOT_WRITTEN = "not written:"

#: Model states the app reports through :meth:`StatsPanel.set_model_state`.
MODEL_STATES = {
    "loading": ("loading…", "yellow"),
    "loaded": ("loaded", "green"),
    "failed": ("BM25 only (model failed to load)", "red"),
    "none": ("BM25 only", "yellow"),
}


def format_bytes(size: int) -> str:
    """``1.4 MB``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def describe_memory(stats: dict[str, object]) -> str:
    """ "113 MB · embedding helper 125 MB" (or "… stopped while idle"): the app's resident
    memory and, when the model runs in a helper process, the helper's."""
    parts = []
    app = stats.get("memory_mb")
    if isinstance(app, int | float):
        parts.append(f"{app:,.0f} MB")
    if "helper_memory_mb" in stats:
        helper = stats["helper_memory_mb"]
        if isinstance(helper, int | float):
            parts.append(f"embedding helper {helper:,.0f} MB")
        else:
            parts.append("embedding helper stopped while idle")
    return " · ".join(parts)


def remembered_flushes(state: WorkspaceState) -> dict[str, tuple[datetime, str]]:
    """The last flush of each trigger as ``.memdeck/state.json`` keeps it (an earlier run's,
    or ``memdeck flush``'s): trigger → (when, what happened)."""
    flushes = {}
    for trigger, record in state.last_triggers().items():
        if not isinstance(record, dict):
            continue
        try:
            when = datetime.fromisoformat(str(record.get("at")))
            messages = int(record.get("messages") or 0)
        except (TypeError, ValueError):
            continue
        status = record.get("status")
        if status not in ("flushed", "nothing_new", *UNWRITTEN):
            continue
        outcome = FlushOutcome(status, messages=messages, detail=str(record.get("detail") or ""))
        flushes[trigger] = (when, outcome.summary)
    # One firing flushes several sessions (a quit: each used in the run) and the trigger's
    # record is its last session's: a session it could not log is what to show.
    skipped = state.read().get("skipped", {})
    for session_id, record in (skipped.items() if isinstance(skipped, dict) else ()):
        fired = record.get("trigger") if isinstance(record, dict) else None
        try:
            when = datetime.fromisoformat(str(record.get("at")))
            newer = fired not in flushes or flushes[fired][0] <= when
        except (AttributeError, TypeError, ValueError):
            continue
        if isinstance(fired, str) and newer:
            flushes[fired] = (when, f"{NOT_WRITTEN} {record.get('detail')} ({session_id})")
    return flushes


def describe_warnings(warnings: list[str]) -> Text:
    """The files the index skipped, each with why (``memory/bad.md: skipped, looks binary``),
    one a line, the first :data:`WARNINGS_SHOWN` of them; a file's name shown as text."""
    lines = [control_pictures(warning) for warning in warnings[:WARNINGS_SHOWN]]
    if len(warnings) > WARNINGS_SHOWN:
        lines.append(f"… and {len(warnings) - WARNINGS_SHOWN:,} more (memdeck stats lists them)")
    return Text("\n".join(lines), style="yellow")


def _count(stats: dict[str, object], key: str) -> int:
    value = stats.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0


def fill(static: Static, content: Table) -> None:
    """Put ``content`` in ``static``, laid out only if it is on screen. Hidden (another tab in
    front), a layout is for nothing: showing the tab lays it out. While a log was indexed,
    each progress line laid the whole screen out again (~100 layouts in 15 s, each one the
    stream's, when both ran)."""
    static.update(content, layout=bool(static.region))


class StatsPanel(EnginePanel):
    """Files, chunks, embedded chunks, index size and model state, the last flush of each trigger,
    and a live log of trigger and index events.

    The app calls :meth:`record_flush`, :meth:`log_event` and :meth:`set_model_state` (on the UI
    thread); :meth:`refresh_stats` re-reads the index counts in a worker.
    """

    @dataclass
    class Loaded(Answer):
        """``engine.stats()`` as read by a worker."""

        stats: dict[str, object] = field(default_factory=dict)

    HELP = """\
## Stats

The index behind memory search: files and chunks indexed, chunks with vectors, index size,
and the embedding model (search is BM25-only until it has loaded).

**Last flush** shows, per trigger (session switch, idle, day change, quit, …), when memory was
last written and what happened (a flush that wrote nothing in yellow), in this run or an
earlier one. The log below records trigger and index events as they happen.
"""

    DEFAULT_CSS = """
    StatsPanel {
        layout: vertical;
        height: 1fr;
    }
    StatsPanel #stats-summary {
        height: auto;
        padding: 0 1;
    }
    StatsPanel #stats-flushes {
        height: auto;
        padding: 0 1;
        margin-top: 1;
    }
    StatsPanel #stats-log-title {
        height: 1;
        padding: 0 1;
        margin-top: 1;
        background: $boost;
    }
    StatsPanel #stats-log {
        height: 1fr;
        min-height: 4;
    }
    StatsPanel #stats-log-lines {
        padding: 0 1;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        clock: Callable[[], datetime] = datetime.now,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """``clock`` stamps flushes and log lines (tests pass a fixed one)."""
        super().__init__(engine, name=name, id=id, classes=classes)
        self.clock = clock
        self.stats: dict[str, object] = {}
        self._loads = Requests()
        self.model_state: str | None = None
        #: Indexing in progress (``embedding 120/400 units``), else empty.
        self.progress = ""
        self.flushes: dict[str, tuple[datetime, str]] = {}
        #: The activity log's lines, newest last (the RichLog only renders once it has a size).
        self.events: deque[str] = deque(maxlen=LOG_LINES)

    def compose(self) -> ComposeResult:
        yield Static("reading the index…", id="stats-summary")
        yield Static("", id="stats-flushes")
        yield Static(Text("Activity", style="bold"), id="stats-log-title")
        # A Static in a scroll (not a RichLog): it wraps each line at the width it is shown at,
        # now and after a resize, without losing characters at the wrap.
        with VerticalScroll(id="stats-log"):
            yield Static("", id="stats-log-lines")

    def on_mount(self) -> None:
        self._render_flushes()
        self.refresh_stats()

    def refresh_stats(self) -> None:
        """Re-read the index counts (in a worker)."""
        self._load_stats(self._loads.new())

    def index_changed(self, paths: list[str]) -> None:
        """The index changed: re-read its counts."""
        self.refresh_stats()

    def set_model_state(self, state: str) -> None:
        """``loading``, ``loaded``, ``failed`` or ``none`` (no model: BM25 only)."""
        self.model_state = state
        self._render_summary()

    def set_progress(self, text: str) -> None:
        """Indexing progress (``embedding 120/400 units``); empty when indexing is done."""
        if text != self.progress:
            self.progress = text
            self._render_summary()
            if not text:
                self.refresh_stats()

    def record_flush(self, trigger: str, outcome: str) -> None:
        """Remember the last flush of ``trigger`` (e.g. ``idle``, ``"3 messages → 2026-11-22.md"``)."""
        self.flushes[trigger] = (self.clock(), outcome)
        self._render_flushes()
        self.log_event(f"flush ({trigger}): {outcome}")

    def log_event(self, text: str) -> None:
        """Append a timestamped line to the activity log."""
        stamp = f"{self.clock():%H:%M:%S}"
        self.events.append(f"{stamp} {text}")
        log = self.query_one("#stats-log", VerticalScroll)
        at_bottom = log.scroll_y >= log.max_scroll_y
        lines = Text(overflow="fold")
        for number, event in enumerate(self.events):
            if number:
                lines.append("\n")
            event_stamp, _, event_text = event.partition(" ")
            lines.append(event_stamp, style="dim")
            lines.append(" " + event_text)
        self.query_one("#stats-log-lines", Static).update(lines)
        if at_bottom:
            log.call_after_refresh(log.scroll_end, animate=False)

    @work(thread=True, exclusive=True, group="stats", exit_on_error=False)
    def _load_stats(self, number: int) -> None:
        stats = self.engine.stats()
        report = usage.summary(self.engine.workspace.root)
        stats["usage_today"] = report["today"]["total"]
        stats["usage_skipped"] = report["skipped"]
        stats["last_flushes"] = remembered_flushes(WorkspaceState(self.engine.workspace))
        self.post_message(self.Loaded(number, stats))

    @on(Loaded)
    @while_attached
    def _stats_loaded(self, message: Loaded) -> None:
        if not self._loads.is_latest(message):
            return
        self.stats = message.stats
        remembered = message.stats.get("last_flushes")
        if isinstance(remembered, dict):
            # A trigger that fired in this run is shown as this run saw it.
            for trigger, flush in remembered.items():
                self.flushes.setdefault(trigger, flush)
            self._render_flushes()
        self._render_summary()

    def describe_stats(self) -> list[tuple[str, Text]]:
        """The summary rows (label, value) shown from :attr:`stats` and :attr:`model_state`."""
        stats = self.stats
        if not stats:
            return []
        chunks = _count(stats, "chunks")
        embedded = _count(stats, "embedded")
        model_loaded = bool(stats.get("model_loaded"))
        state = self.model_state or ("loaded" if model_loaded else "none")
        if model_loaded:
            state = "loaded"
        label, color = MODEL_STATES.get(state, (state, "yellow"))
        rows = [
            ("workspace", Text(str(stats.get("workspace", "")))),
            ("files", Text(f"{_count(stats, 'files'):,}")),
            ("chunks", Text(f"{chunks:,}")),
            (
                "embedded",
                Text(f"{embedded:,} / {chunks:,}", style="" if embedded >= chunks else "yellow"),
            ),
            ("index size", Text(format_bytes(_count(stats, "index_bytes")))),
            ("model", Text.assemble(str(stats.get("model", "")), " ", (label, color))),
        ]
        memory = describe_memory(stats)
        if memory:
            rows.append(("memory", Text(memory)))
        if self.progress:
            note = (
                " — BM25 only for them meanwhile" if self.progress.startswith("embedding") else ""
            )
            rows.append(("indexing", Text(self.progress + note, style="bold yellow")))
        today = stats.get("usage_today")
        if isinstance(today, dict) and today.get("calls"):
            tokens = (today["prompt_tokens"] or 0) + (today["completion_tokens"] or 0)
            rows.append(("usage today", Text(f"{today['calls']:,} calls · {tokens:,} tokens")))
        skipped = _count(stats, "usage_skipped")
        if skipped:
            rows.append(
                ("usage ledger", Text(f"{skipped:,} unreadable line(s) skipped", style="yellow"))
            )
        warnings = stats.get("warnings")
        if isinstance(warnings, list) and warnings:
            rows.append(("skipped", describe_warnings([str(w) for w in warnings])))
        return rows

    def _render_summary(self) -> None:
        rows = self.describe_stats()
        if not rows:
            return
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim", no_wrap=True)
        table.add_column(overflow="fold")
        for label, value in rows:
            table.add_row(label, value)
        fill(self.query_one("#stats-summary", Static), table)

    def _render_flushes(self) -> None:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        if not self.flushes:
            table.add_row("last flush", "—", Text("none yet", style="dim"))
        today = self.clock().date()
        for number, (trigger, (when, outcome)) in enumerate(sorted(self.flushes.items())):
            # A Rich table parses a str cell as markup: an outcome names files and errors.
            label = "last flush" if number == 0 else ""
            stamp = f"{when:%H:%M}" if when.date() == today else f"{when:%Y-%m-%d %H:%M}"
            warn = (NOT_WRITTEN, *(f"{status}:" for status in UNWRITTEN))
            style = "yellow" if outcome.startswith(warn) else ""
            table.add_row(label, Text(f"{trigger} {stamp}"), Text(outcome, style=style))
        fill(self.query_one("#stats-flushes", Static), table)
