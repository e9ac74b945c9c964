"""What every memory panel shares: the engine, a fixed "now" for tests, error display, formatting."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from rich.text import Text
from textual import on, work
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.app.panels.origins import Origins, look_up_origins
from tui.engine.engine import MemoryEngine
from tui.engine.inject import ALWAYS_INJECTED
from tui.engine.search import SearchResult, describe_change
from tui.engine.search_results import describe_via
from tui.engine.workspace import MEMORY_FILE


def format_score(value: float | None) -> str:
    """A 0..1 score as ``.82`` (``1.00`` at the top, ``—`` when there is none)."""
    if value is None:
        return "—"
    if value >= 0.995:
        return "1.00"
    return f"{value:.2f}".removeprefix("0")


def format_text_score(text: float, bm25: float | None) -> str:
    """``.61 (-4.23)``: the text score and the raw bm25 rank (two decimals, as the command line
    prints it: a weak match's ``-0.04`` must not read ``-0.0``); ``—`` without a text match."""
    if bm25 is None or (text <= 0 and abs(bm25) < 1e-9):
        return "—"
    return f"{format_score(text)} ({bm25:.2f})"


def formula_markdown(formula: str) -> str:
    """The score formula's lines as a Markdown list: each wraps to the width of the help (a
    code block cut them at its edge)."""
    return "\n".join(f"- {line}" for line in formula.splitlines())


def format_source(path: str, start_line: int, end_line: int) -> str:
    """A chunk's source as ``path:Lstart-Lend``."""
    return f"{path}:L{start_line}-{end_line}"


def describe_breakdown(
    result: SearchResult, *, injected: bool = True, location: str | None = None
) -> Text:
    """A memory with its score breakdown (an injected one in why?, the selected search result)::

    ✓ memory/2026-11-20.md#L3-4  .82
      relevance .82 = max(hybrid .82, near —) · recency 1.00 (decay .95) · window 1.00 · conf medium .90
      hybrid: vector .91 · text .61 (-4.23)

    A part that came through another entry names it: ``near .58 via L6`` (the entry that lent
    it), ``text .64 (-2.10) via L6`` (the words are in the entry before this one).
    """
    b = result.breakdown
    line = Text()
    if injected:
        line.append("✓ ", style="bold green")
    line.append(location or result.location, style="" if injected else "bold")
    line.append(f"  {format_score(result.score)}")
    if result.path == MEMORY_FILE:
        line.append(f"  {ALWAYS_INJECTED}", style="italic")
    text_via, near_via = describe_via(b, result.path)
    near = format_score(b.neighbour) if b.neighbour > b.hybrid else "—"
    if near_via and b.neighbour > b.hybrid:
        near += f" {near_via}"
    update = f", linked {format_score(b.linked)}" if b.linked > 0 else ""
    if b.superseded < 1:
        update += f") · superseded {format_score(b.superseded)}"
    else:
        update += ")"
    line.append(
        f"\n  relevance {format_score(b.relevance)} = max(hybrid {format_score(b.hybrid)},"
        f" near {near}{update} · recency {format_score(b.recency)}"
        f" (decay {format_score(b.decay)})"
        f" · window {format_score(b.time_window)}"
        f" · conf {b.confidence} {format_score(b.confidence_weight)}",
        style="dim",
    )
    text = format_text_score(b.text, b.bm25)
    if text_via:
        own = f", own {format_score(b.own_text)}" if text_via.startswith("partly") else ""
        text += f" {text_via}{own}"
    line.append(f"\n  hybrid: vector {format_score(b.vector)} · text {text}", style="dim")
    if b.changed_by:
        line.append(f"\n  {describe_change(b)}", style="yellow")
    return line


class EnginePanel(Widget):
    """A panel that asks the memory engine through thread workers and shows the answers.

    Subclasses set ``HELP`` (shown by F1) and implement :meth:`index_changed`; one that shows
    memories asks :meth:`find_origins` where they came from and shows :attr:`origins` in
    :meth:`origins_found`.
    """

    @dataclass
    class OriginsFound(Answer):
        """Where the memories of origin request ``number`` came from."""

        origins: Origins

    HELP = ""

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        now: date | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """``now`` pins "today" (decay, fixed-date tests); None means the real date at each call."""
        super().__init__(name=name, id=id, classes=classes)
        self.engine = engine
        self.now = now
        #: Where the memories shown came from, by location (see :meth:`find_origins`).
        self.origins: Origins = {}
        self._origin_reads = Requests()
        self._origins_answered = 0

    def index_changed(self, paths: list[str]) -> None:
        """Memory files changed (``paths``, workspace-relative; empty means "anything"): refresh."""

    def on_show(self) -> None:
        self.activated()

    def activated(self) -> None:
        """The panel is shown (its tab was activated; its Show event can come late under
        load): do what waited for it to be seen."""

    def find_origins(self, locations: Iterable[str]) -> None:
        """Look up where the memories at ``locations`` (``path#Lx-y``) came from, in a worker
        (blame can take 100s of ms); :meth:`origins_found` is called with them."""
        wanted = list(dict.fromkeys(locations))
        number = self._origin_reads.new()
        if wanted:
            self._look_up_origins(number, wanted)
        else:
            self.post_message(self.OriginsFound(number, {}))

    @property
    def origins_pending(self) -> bool:
        """An origin lookup is on its way (tests wait for it before a screenshot)."""
        return self._origins_answered != self._origin_reads.latest

    @work(thread=True, exclusive=True, group="origins", exit_on_error=False)
    def _look_up_origins(self, number: int, locations: list[str]) -> None:
        self.post_message(self.OriginsFound(number, look_up_origins(self.engine, locations)))

    @on(OriginsFound)
    @while_attached
    def _origins_arrived(self, message: OriginsFound) -> None:
        if not self._origin_reads.is_latest(message):
            return
        self._origins_answered = message.number
        self.origins = message.origins
        self.origins_found()

    def origins_found(self) -> None:
        """:attr:`origins` changed: show them (panels that show memories override this)."""

    def show_error(self, message: str) -> None:
        """Show a worker failure in the panel (the default notifies)."""
        self.notify(message, title="memory", severity="error")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Engine calls run in workers with ``exit_on_error=False``: surface their errors here."""
        if event.state == WorkerState.ERROR and event.worker.node is self:
            self.show_error(f"{event.worker.name}: {event.worker.error}")
