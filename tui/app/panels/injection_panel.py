"""Injection preview: the exact memory block the next message will carry, live as the user types."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.app.panels.base import EnginePanel, describe_breakdown, format_score
from tui.app.panels.origins import Origins, describe_origin, session_of
from tui.app.widgets.memory_list import MemoryList
from tui.chat.sessions import TurnInjection
from tui.engine.engine import MODEL_STARTING, MemoryEngine
from tui.engine.inject import Injection, InjectionReport
from tui.engine.search import SearchResult, describe_change

#: Keystrokes closer together than this are coalesced into one preview.
PREVIEW_DEBOUNCE_S = 0.12
#: How often a BM25-only preview looks whether the embedding model has started again (s).
MODEL_POLL_S = 0.25


def render_block(text: str) -> Text:
    """The injected block as plain text, its ``##`` headings and ``[path#L..]`` sources styled."""
    rendered = Text(no_wrap=False)
    for number, line in enumerate(text.splitlines()):
        if number:
            rendered.append("\n")
        if line.startswith("## "):
            rendered.append(line, style="bold")
        elif line.startswith("- [") and "] " in line:
            source, rest = line[2:].split("] ", 1)
            rendered.append("- ")
            rendered.append(source + "]", style="dim")
            rendered.append(" " + rest)
        else:
            rendered.append(line)
    return rendered


def describe_budget(report: InjectionReport) -> Text:
    """``812 / 2000 tokens · 3 included · 1 cut``."""
    summary = Text()
    summary.append(f"{report.tokens_used} / {report.budget} tokens", style="bold")
    relevant = sum(1 for item in report.included if item.kind == "relevant")
    summary.append(f" · {relevant} relevant included · {len(report.cut)} cut", style="dim")
    return summary


#: One row of the list under the block: its text and the ``path#Lx-y`` it leads to (None: a
#: note).
Row = tuple[Text, str | None]


def describe_items(
    report: InjectionReport, results: Sequence[SearchResult] = (), origins: Origins | None = None
) -> list[Row]:
    """Every relevant memory with its score: what went in (✓, with "changed on <date>?" for a
    fact a newer entry changed, and where it came from when ``origins`` knows), then what was
    left out and why (✂), then the builder's and the search's notes."""
    changes = {r.location: describe_change(r.breakdown) for r in results if r.breakdown.changed_by}
    rows: list[Row] = []
    for item in report.included:
        if item.kind != "relevant":
            continue
        line = Text()
        line.append("✓ ", style="bold green")
        line.append(item.location)
        line.append(f" ({format_score(item.score)})", style="dim")
        line.append(f" · {item.reason or f'{item.tokens} tokens'}", style="dim")
        if item.location in changes:
            line.append(f" · {changes[item.location]}", style="yellow")
        origin = (origins or {}).get(item.location)
        if origin is not None:
            line.append(" · ", style="dim")
            line.append_text(describe_origin(origin, link=False))
        rows.append((line, item.location))
    rows += cut_rows(report)
    rows += [(Text("ℹ " + note, style="italic"), None) for note in report.notes]
    return rows


def cut_rows(report: InjectionReport) -> list[Row]:
    """``✂ MEMORY.md#L3-3 (.64) — already in Long-term Memory``, one row per memory cut."""
    rows: list[Row] = []
    for item in report.cut:
        line = Text()
        line.append("✂ ", style="bold")
        line.append(item.location)
        if item.score is not None:
            line.append(f" ({format_score(item.score)})", style="dim")
        line.append(f" — {item.reason}")
        rows.append((line, item.location))
    return rows


class InjectionPanel(EnginePanel):
    """Shows what ``engine.inject(draft)`` would put in the system prompt, with its budget report.

    Call :meth:`preview` on every keystroke of the chat input; it debounces and runs the engine in
    an exclusive thread worker, so only the latest draft's block is shown.
    """

    @dataclass
    class Ready(Answer):
        """The injection block for ``draft``."""

        draft: str
        injection: Injection

    @dataclass
    class Updated(Message):
        """The live preview was rebuilt; ``summary`` says it in one line (``3 relevant ·
        812/2000 tokens``), for the narrow screen's mode bar."""

        summary: str

    HELP = """\
## Inject

The memory block that will be added to the system prompt of the **next** message,
updated as you type (long-term memory first, then relevant memories found for your draft).

- The first line shows tokens used / budget.
- Below the block: every relevant memory with its score (✓ included, ✂ cut and why: over
  budget, already included, MEMORY.md truncated), and notes such as "BM25 only" while the
  embedding model loads.
- **ctrl+o** ("why?") shows what the last turn *actually* injected, as recorded with it, and
  each memory's score breakdown; typing brings the live preview back.
"""

    DEFAULT_CSS = """
    InjectionPanel {
        layout: vertical;
        height: 1fr;
    }
    InjectionPanel #inject-budget {
        height: auto;
        max-height: 3;
        padding: 0 1;
        background: $boost;
    }
    InjectionPanel #inject-block-scroll {
        height: 1fr;
        padding: 0 1;
    }
    InjectionPanel #inject-cuts {
        height: auto;
        max-height: 40%;
        padding: 0 1;
        border-top: solid $primary-background;
        color: $text-muted;
    }
    InjectionPanel #inject-cuts.-empty {
        display: none;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        budget: int | None = None,
        now: date | None = None,
        debounce: float = PREVIEW_DEBOUNCE_S,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """``budget`` overrides the engine's token budget (None: the configured one);
        ``debounce`` is the quiet time (seconds) that ends a burst of keystrokes."""
        super().__init__(engine, now=now, name=name, id=id, classes=classes)
        self.budget = budget
        self.debounce = debounce
        self.draft = ""
        self.injection: Injection | None = None
        self._previews = Requests()
        self._debounce_timer: Timer | None = None
        self._last_start = float("-inf")
        #: The past turn shown instead of the live preview (ctrl+o), until the draft changes.
        self.turn: TurnInjection | None = None
        self._shown: dict[str, Text] = {}  # what each Static shows (see ``_show``)

    def compose(self) -> ComposeResult:
        yield Static("building…", id="inject-budget")
        with VerticalScroll(id="inject-block-scroll"):
            yield Static("", id="inject-block")
        yield MemoryList(self.engine.workspace, id="inject-cuts", classes="-empty")

    def on_mount(self) -> None:
        self._start_preview()

    def preview(self, draft: str) -> None:
        """The chat draft changed: rebuild the preview.

        A keystroke after a quiet spell rebuilds at once (leading edge); keystrokes that follow
        it within ``debounce`` are coalesced into one rebuild when typing pauses (trailing edge).
        """
        self.draft = draft
        self.show_live()  # typing brings the live preview back
        idle = self._debounce_timer is None
        if idle and time.monotonic() - self._last_start >= self.debounce:
            self._start_preview()
            return
        if self._debounce_timer is not None:
            self._debounce_timer.stop()
        self._debounce_timer = self.set_timer(self.debounce, self._start_preview)

    def index_changed(self, paths: list[str]) -> None:
        """Memory changed: rebuild the preview for the current draft."""
        self._start_preview()

    def _when_model_ready(self) -> None:
        """The preview was BM25-only while the model started: build it again once it is up."""
        if not self.engine.model_loaded:
            return
        if self.engine.model_ready_now:
            self._start_preview()
        else:
            self.set_timer(MODEL_POLL_S, self._when_model_ready)

    def _start_preview(self) -> None:
        if self._debounce_timer is not None:
            self._debounce_timer.stop()
            self._debounce_timer = None
        self._last_start = time.monotonic()
        self._build_injection(self._previews.new(), self.draft)

    @work(thread=True, exclusive=True, group="injection-preview", exit_on_error=False)
    def _build_injection(self, number: int, draft: str) -> None:
        # after the embedding helper's idle exit, preview BM25-only while it starts again
        injection = self.engine.inject(
            draft, budget=self.budget, now=self.now, wait_for_model=False
        )
        if not get_current_worker().is_cancelled:
            self.post_message(self.Ready(number, draft, injection))

    @on(Ready)
    @while_attached
    def _show_injection(self, message: Ready) -> None:
        if not self._previews.is_latest(message):
            return  # a newer draft is on its way
        self.injection = message.injection
        if MODEL_STARTING in message.injection.report.notes:
            self.set_timer(MODEL_POLL_S, self._when_model_ready)
        report = message.injection.report
        relevant = sum(1 for item in report.included if item.kind == "relevant")
        self.post_message(
            self.Updated(f"{relevant} relevant · {report.tokens_used}/{report.budget} tokens")
        )
        if self.turn is None:
            self._render_injection(message.injection)

    def _render_injection(self, injection: Injection) -> None:
        report = injection.report
        self._show("inject-budget", describe_budget(report))
        block = injection.text or "(nothing to inject: MEMORY.md is empty and no memory matched)"
        self._show("inject-block", render_block(block))
        self._show_items(describe_items(report, injection.results, self.origins))
        self.find_origins(item.location for item in report.included if item.kind == "relevant")

    def _show_items(self, rows: list[Row]) -> None:
        items = self.query_one("#inject-cuts", MemoryList)
        items.show(rows, origin_sessions(self.origins))
        items.set_class(not rows, "-empty")

    def origins_found(self) -> None:
        """The memories shown get their origins."""
        if self.turn is not None:
            self._show_items(self._turn_rows(self.turn))
        elif self.injection is not None:
            injection = self.injection
            self._show_items(describe_items(injection.report, injection.results, self.origins))

    @property
    def focus_target(self) -> Widget:
        """Where the tab's keys go: a why?'s memories (Enter opens one), else the block."""
        items = self.query_one("#inject-cuts", MemoryList)
        if self.turn is not None and items.highlighted is not None:
            return items
        return self.query_one("#inject-block-scroll", VerticalScroll)

    @property
    def items_text(self) -> str:
        """The list under the block as plain text (each memory, cut and note)."""
        return self.query_one("#inject-cuts", MemoryList).plain

    def show_live(self) -> None:
        """Leave a past turn's why? for the live preview of the draft (typing, another session)."""
        if self.turn is not None:
            self.turn = None
            if self.injection is not None:
                self._render_injection(self.injection)

    def show_turn(self, turn: TurnInjection) -> None:
        """Show what a past turn injected, as recorded in its transcript, with each memory's
        score breakdown (until the draft changes)."""
        self.turn = turn
        report = InjectionReport.from_json(turn.report)
        title = Text()
        title.append("why? ", style="bold")
        asked = " ".join(turn.user_text.split())
        title.append(f"“{asked[:40]}{'…' if len(asked) > 40 else ''}” injected ")
        title.append_text(describe_budget(report))
        self._show("inject-budget", title)
        block = turn.text or "(this turn injected nothing)"
        self._show("inject-block", render_block(block))
        self._show_items(self._turn_rows(turn))
        self.find_origins(result.location for result in turn.results)
        if turn.results:  # the cursor on the first memory: Enter opens it
            self.query_one("#inject-cuts", MemoryList).highlighted = 0
        self.query_one("#inject-block-scroll", VerticalScroll).scroll_home(animate=False)

    def _turn_rows(self, turn: TurnInjection) -> list[Row]:
        """A past turn's memories with their score breakdowns and origins, then its cuts."""
        rows: list[Row] = []
        for result in turn.results:
            text = describe_breakdown(result)
            origin = self.origins.get(result.location)
            if origin is not None:
                text.append("\n  ")
                text.append_text(describe_origin(origin, link=False))
            rows.append((text, result.location))
        if not turn.results:
            rows.append((Text("no relevant memory was injected", style="italic"), None))
        return rows + cut_rows(InjectionReport.from_json(turn.report))

    def show_error(self, message: str) -> None:
        self._show("inject-budget", Text(message, style="bold red"))

    def _show(self, static_id: str, text: Text) -> None:
        """Show ``text`` in a Static of the panel, unless it shows it already: an index change
        rebuilds the preview, mostly to the same block, and a long block costs a frame's
        worth of wrapping and drawing."""
        if self._shown.get(static_id) != text:
            self._shown[static_id] = text
            self.query_one(f"#{static_id}", Static).update(text)


def origin_sessions(origins: Origins) -> dict[str, str]:
    """The session that wrote each memory of ``origins``, where a chat or a flush did."""
    return {
        location: session
        for location, origin in origins.items()
        if origin is not None and (session := session_of(origin.source, origin.session))
    }
