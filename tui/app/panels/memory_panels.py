"""The tabbed memory side of the main screen: Inject, Search, Daily, MEMORY.md, Stats, Activity
and History."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime

from textual import on
from textual.app import ComposeResult
from textual.message import Message
from textual.signal import Signal
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from tui.app.messages import MemoryChanged, OpenEntry
from tui.app.panels.activity_panel import ActivityPanel
from tui.app.panels.base import EnginePanel
from tui.app.panels.daily_tree import DailyTree
from tui.app.panels.history_panel import HistoryPanel
from tui.app.panels.injection_panel import InjectionPanel
from tui.app.panels.memory_editor import MemoryEditor
from tui.app.panels.search_panel import SearchPanel
from tui.app.panels.stats_panel import StatsPanel
from tui.app.textual_compat import ContentTabs
from tui.chat.sessions import TurnInjection
from tui.engine.engine import MemoryChange, MemoryEngine
from tui.engine.index import SyncReport
from tui.engine.workspace import MEMORY_FILE

#: Tab pane ids, in display order, with their titles.
TABS = {
    "inject": "Inject",
    "search": "Search",
    "daily": "Daily",
    "memory": "MEMORY.md",
    "stats": "Stats",
    "activity": "Activity",
    "history": "History",
}

#: Shorter titles for a tab bar too narrow for the whole ones (the memory panels beside the
#: chat at 88 to 143 columns), taken in this order until every label fits: the tab row never
#: scrolls a label out of view.
SHORT_TITLES = {
    "memory": "MEM",
    "activity": "Act",
    "history": "Hist",
    "inject": "Inj",
    "search": "Srch",
}
#: Cells a tab takes besides its label (its padding).
TAB_PADDING = 2
#: What the MEMORY.md tab's label gets while the editor holds unsaved edits.
DIRTY_MARK = " ●"


def fitted_titles(width: int, *, dirty: bool = False) -> dict[str, str]:
    """The tab labels for a tab row ``width`` cells wide: the titles of :data:`TABS`, each of
    :data:`SHORT_TITLES` in turn shortened while they would not fit (all of them at worst)."""
    titles = dict(TABS)

    def label(tab_id: str) -> str:
        return titles[tab_id] + (DIRTY_MARK if dirty and tab_id == "memory" else "")

    for tab_id, short in SHORT_TITLES.items():
        if sum(len(label(t)) + TAB_PADDING for t in titles) <= width:
            break
        titles[tab_id] = short
    return {tab_id: label(tab_id) for tab_id in titles}


#: What takes focus when a tab is opened by its key: the widget the user works in there
#: (Inject's depends on what it shows: :attr:`InjectionPanel.focus_target`).
#: Refreshes after focusing a tab's widget during which focus lost to nothing is given back.
FOCUS_CHECKS = 4

TAB_FOCUS = {
    "search": "#search-query",
    "daily": "#daily-tree",
    "memory": "#memory-text",
    "stats": "#stats-log",
    "activity": "#activity-calls",
    "history": "#history-changes",
}


def describe_sync(report: SyncReport | None) -> str:
    """``2 files re-indexed, +5/-3 chunks, 5 embedded`` (what a sync did, for the activity log)."""
    if report is None:
        return "no report"
    parts = [f"{report.files_changed} file(s) re-indexed"]
    if report.files_removed:
        parts.append(f"{report.files_removed} removed")
    parts.append(f"+{report.chunks_added}/-{report.chunks_removed} chunks")
    if report.embedded or report.cache_hits:
        parts.append(f"{report.embedded} embedded, {report.cache_hits} from cache")
    parts.extend(f"warning: {warning}" for warning in report.warnings)
    return ", ".join(parts)


class MemoryPanels(Widget):
    """The seven memory panels in a TabbedContent, refreshed together when memory changes.

    Every change of memory arrives as one :class:`~tui.app.messages.MemoryChanged`: this widget
    subscribes to the engine's change stream and posts one for each change it publishes (the
    editor's saves, tool calls, flushes, consolidations, outside edits the watcher found); a
    failed watcher sync is posted here too. It ends in
    :meth:`index_changed`, which publishes :attr:`index_signal` (paths); each panel is
    subscribed and refreshes itself through its own worker, and the screen may subscribe more
    widgets (the header's chunk count). Index events that change no file (a reindex, the model
    loaded) call :meth:`index_changed` directly.
    """

    @dataclass
    class TabShown(Message):
        """The tab ``tab_id`` (titled ``title``) is the one shown now."""

        tab_id: str
        title: str

    HELP = """\
## Memory panels

- **Inject**: what the next message will inject, live as you type.
- **Search**: query memory and see why each result surfaced.
- **Daily**: daily logs by month and date.
- **MEMORY.md**: edit long-term memory (ctrl+s saves).
- **Stats**: index, model, flushes and events.
- **Activity**: what other agents did with this memory over `memdeck mcp`.
- **History**: every change of the memory, who made it, its diff; **u** undoes one.

**F2**–**F8** open Inject, Search, Daily, MEMORY.md, Stats, Activity and History; **Escape** goes
back to the message box. While you type a message the Inject tab comes forward, unless you chose
another tab in this session.
"""

    DEFAULT_CSS = """
    MemoryPanels {
        height: 1fr;
    }
    MemoryPanels > TabbedContent {
        height: 1fr;
    }
    MemoryPanels > TabbedContent > ContentSwitcher {
        height: 1fr;
    }
    MemoryPanels TabPane {
        padding: 0;
        height: 1fr;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        now: date | None = None,
        budget: int | None = None,
        clock: Callable[[], datetime] = datetime.now,
        initial: str = "inject",
        follow_changes: bool = True,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """``now`` pins "today" for scoring (tests); ``clock`` stamps log lines; ``initial`` is a tab id.
        ``follow_changes=False``: the owner posts :class:`MemoryChanged` for each change of the
        engine (the main screen does, from the workbench's stream)."""
        super().__init__(name=name, id=id, classes=classes)
        self.engine = engine
        self._follow_changes = follow_changes
        self.index_signal: Signal[list[str]] = Signal(self, "index-changed")
        self._now = now
        self._budget = budget
        self._clock = clock
        self._initial = initial
        #: The tab the user chose in this session (None: none yet; Inject may come forward).
        self.chosen_tab: str | None = None
        #: The tab that takes focus at the next refresh (see :meth:`cancel_pending_focus`).
        self._focus_pending: str | None = None
        #: A tab this widget activated itself (its TabActivated is not the user's choice).
        self._auto_tab: str | None = initial
        #: The MEMORY.md editor holds unsaved edits (its tab shows ●).
        self._memory_dirty = False

    def compose(self) -> ComposeResult:
        with TabbedContent(initial=self._initial):
            with TabPane(TABS["inject"], id="inject"):
                yield InjectionPanel(self.engine, budget=self._budget, now=self._now)
            with TabPane(TABS["search"], id="search"):
                yield SearchPanel(self.engine, now=self._now)
            with TabPane(TABS["daily"], id="daily"):
                yield DailyTree(self.engine)
            with TabPane(TABS["memory"], id="memory"):
                yield MemoryEditor(self.engine)
            with TabPane(TABS["stats"], id="stats"):
                yield StatsPanel(self.engine, clock=self._clock)
            with TabPane(TABS["activity"], id="activity"):
                yield ActivityPanel(self.engine)
            with TabPane(TABS["history"], id="history"):
                yield HistoryPanel(self.engine)

    def on_mount(self) -> None:
        for panel in self.query(EnginePanel):
            self.index_signal.subscribe(panel, panel.index_changed)
        self._stop_changes: Callable[[], None] = lambda: None
        if self._follow_changes:
            self._stop_changes = self.engine.on_change(self._engine_changed)

    def on_unmount(self) -> None:
        self._stop_changes()

    def on_resize(self) -> None:
        self._fit_tab_labels()

    def _fit_tab_labels(self) -> None:
        """Every tab's label in view at this width (see :func:`fitted_titles`); each tab's
        tooltip has its whole title."""
        width = self.size.width
        if not width:  # hidden (the chat fills a narrow screen)
            return
        tabs = self.query_one(TabbedContent)
        for tab_id, label in fitted_titles(width, dirty=self._memory_dirty).items():
            tab = tabs.get_tab(tab_id)
            if tab.label_text != label:
                tab.label = label
                tab.tooltip = TABS[tab_id] if label != TABS[tab_id] else None

    def _engine_changed(self, change: MemoryChange) -> None:
        """The engine's change stream (called on the writing thread): one message each."""
        self.post_message(MemoryChanged.of(change))

    # -- the panels --

    @property
    def injection_panel(self) -> InjectionPanel:
        return self.query_one(InjectionPanel)

    @property
    def search_panel(self) -> SearchPanel:
        return self.query_one(SearchPanel)

    @property
    def daily_tree(self) -> DailyTree:
        return self.query_one(DailyTree)

    @property
    def memory_editor(self) -> MemoryEditor:
        return self.query_one(MemoryEditor)

    @property
    def stats_panel(self) -> StatsPanel:
        return self.query_one(StatsPanel)

    @property
    def history_panel(self) -> HistoryPanel:
        return self.query_one(HistoryPanel)

    # -- what the app calls --

    @property
    def active_tab(self) -> str:
        """The id of the tab shown."""
        return self.query_one(TabbedContent).active or self._initial

    def show_tab(self, tab_id: str, *, focus: bool = False) -> None:
        """Switch to a pane (a :data:`TABS` id: ``inject``, ``search``, ``history``...) as the
        user's choice; ``focus`` also focuses the widget one works in there (after a refresh, so
        it wins over focus given back by a closing palette)."""
        self.chosen_tab = tab_id
        focused = self.screen.focused
        if focused is not None and self in focused.ancestors:
            # Focus left in the pane being hidden would move to a hidden sibling, whose pane
            # then becomes active again: take it along to the new tab instead.
            focus = True
            self.screen.set_focus(None)
        self.query_one(TabbedContent).active = tab_id
        if focus:
            # Two refreshes: the first lays the tab out (and delivers the Hide/Show events of a
            # view change, which would blur a widget focused before them).
            self._focus_pending = tab_id
            self.call_after_refresh(self.call_after_refresh, self._focus_tab, tab_id)

    def cancel_pending_focus(self) -> None:
        """The user moved on (e.g. ctrl+n) before a tab took focus: it must not take it now,
        or the keys typed next would land in the tab instead of where the user went."""
        self._focus_pending = None

    def _focus_tab(self, tab_id: str, checks: int = FOCUS_CHECKS) -> None:
        if self._focus_pending != tab_id:
            return
        tabs = self.query_one(TabbedContent)
        if tabs.active != tab_id:
            self._focus_pending = None
            return
        target = (
            self.injection_panel.focus_target
            if tab_id == "inject"
            else self.query_one(TAB_FOCUS[tab_id])
        )
        if not target.focusable:  # e.g. a log too short to scroll: the tab row takes the keys
            self._focus_pending = None
            tabs.query_one(ContentTabs).focus()
            return
        target.focus()
        if checks:
            self.call_after_refresh(self._keep_focus, tab_id, checks - 1)
        else:
            self._focus_pending = None

    def _keep_focus(self, tab_id: str, checks: int) -> None:
        """A Hide queued before the tab was shown blurs its widget when it arrives (late on a
        loaded machine): focus it again while nothing else has taken the focus."""
        if self._focus_pending != tab_id:
            return
        if self.screen.focused is None:
            self._focus_tab(tab_id, checks)
        elif checks:
            self.call_after_refresh(self._keep_focus, tab_id, checks - 1)
        else:
            self._focus_pending = None

    def bring_inject_forward(self) -> None:
        """The user is typing a message: show the Inject tab, unless they chose another tab in
        this session."""
        tabs = self.query_one(TabbedContent)
        if self.chosen_tab in (None, "inject") and tabs.active != "inject":
            self._auto_tab = "inject"
            tabs.active = "inject"

    def forget_chosen_tab(self) -> None:
        """A new session: the Inject tab may come forward again while typing."""
        self.chosen_tab = None

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane_id = event.pane.id or ""
        if pane_id == self._auto_tab:
            self._auto_tab = None
        else:
            self.chosen_tab = pane_id  # a click on a tab, or a key of the tabs themselves
        for panel in event.pane.query_children(EnginePanel):
            panel.activated()
        self.post_message(self.TabShown(pane_id, TABS.get(pane_id, pane_id)))

    @on(OpenEntry)
    def _open_entry(self, message: OpenEntry) -> None:
        """A result or an injected memory was chosen: show its entry where it can be read
        (a daily log) or edited (MEMORY.md)."""
        message.stop()
        if message.path == MEMORY_FILE:
            self.show_tab("memory", focus=True)
            self.memory_editor.go_to_line(message.line)
        else:
            self.show_tab("daily", focus=True)
            self.daily_tree.show_entry(message.path, message.line)

    def set_progress(self, text: str) -> None:
        """What the index is doing (see :meth:`StatsPanel.set_progress`)."""
        self.stats_panel.set_progress(text)

    def follow_conversation(self, text: str) -> None:
        """A turn ended (see :meth:`SearchPanel.follow_conversation`)."""
        self.search_panel.follow_conversation(text)

    def show_injection(self, turn: TurnInjection | None) -> None:
        """The Inject tab shows what ``turn`` injected (None: the live preview of the draft)."""
        if turn is None:
            self.injection_panel.show_live()
        else:
            self.injection_panel.show_turn(turn)

    def preview(self, draft: str) -> None:
        """The chat draft changed (every keystroke): update the injection preview."""
        self.injection_panel.preview(draft)

    def explain(self, query: str) -> None:
        """Show the Search tab with ``query`` searched."""
        self.show_tab("search")
        self.search_panel.set_query(query)

    def index_changed(self, paths: list[str]) -> None:
        """Memory files changed and the index follows: every panel refreshes itself.

        ``paths`` are workspace-relative; an empty list means any file may have changed.
        """
        self.index_signal.publish(list(paths))

    def memory_changed(self, change: MemoryChanged) -> None:
        """Memory files changed: log who changed what (unless already logged), then refresh."""
        if change.error:
            self.log_event(f"{change.source}: index sync failed: {change.error}")
            return
        if change.source:
            line = f"{change.source}: {', '.join(change.paths) or 'all files'}"
            if change.report is not None:
                line += f" — {describe_sync(change.report)}"
            self.log_event(line)
        self.index_changed(change.paths)

    def set_model_state(self, state: str) -> None:
        """``loading``, ``loaded``, ``failed`` or ``none``; once loaded, search turns hybrid."""
        self.stats_panel.set_model_state(state)
        self.log_event(f"embedding model: {state}")
        if state == "loaded":
            self.index_changed([])

    def record_flush(self, trigger: str, outcome: str) -> None:
        """A flush ran (see :meth:`StatsPanel.record_flush`)."""
        self.stats_panel.record_flush(trigger, outcome)

    def log_event(self, text: str) -> None:
        """A line in the Stats activity log."""
        self.stats_panel.log_event(text)

    # -- messages --

    def _on_memory_editor_dirty_changed(self, message: MemoryEditor.DirtyChanged) -> None:
        """● on the MEMORY.md tab while it has unsaved edits (the message goes on up to the
        screen, whose header shows it too)."""
        self._memory_dirty = message.dirty
        self._fit_tab_labels()

    @on(MemoryChanged)
    def _memory_changed(self, message: MemoryChanged) -> None:
        message.stop()
        self.memory_changed(message)
