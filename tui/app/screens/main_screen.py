"""MainScreen: header, mode bar, the desk (sessions | chat | memory panels), footer, over the
headless workbench.

The application core (the open session, the running turn, the lifecycle lock, start-up sync
and model load, the triggers, the session and memory actions) is
:class:`tui.chat.workbench.Workbench`; the flows between the sessions, the chat and the memory
panels, and the memory actions, are the :class:`~tui.app.widgets.desk.Desk`'s. Everything the
workbench publishes goes through ONE listener that posts a
:class:`~tui.app.messages.WorkbenchMessage` to the desk (from whatever thread it happened on);
the header shows the desk's state (its reactives, watched here). Widgets get their state as
attributes and tell what the user wants by messages. The screen starts the background (the
start-up sync, the model, the workspace watcher, the triggers) and owns the keys, the focus
and the narrow layout's view; once it is gone (the app quitting) nothing more is delivered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static, TextArea
from textual.worker import Worker

from tui.app.messages import WorkbenchMessage, report_worker_error
from tui.app.quit_report import say_last_quit
from tui.app.recovery_offer import offer_recovery_copies
from tui.app.screens.main_keys import BREAKPOINTS, MAIN_BINDINGS, MAIN_HELP, fit_footer
from tui.app.widgets.app_header import AppHeader
from tui.app.widgets.desk import HEADER_STATE, Desk
from tui.app.widgets.mode_bar import ModeBar
from tui.app.widgets.steady_footer import SteadyFooter

# The heavy half (chat engine, memory panels, watcher) is imported once the engine is open; see
# MemdeckApp._load_engine. These names are for type hints only.
if TYPE_CHECKING:
    from tui.app.panels.injection_panel import InjectionPanel
    from tui.app.panels.memory_editor import MemoryEditor
    from tui.app.panels.memory_panels import MemoryPanels
    from tui.app.widgets.chat_pane import ChatPane
    from tui.app.widgets.session_list import SessionList
    from tui.app.workspace_watcher import WorkspaceWatcher
    from tui.chat.chat import ChatEngine
    from tui.chat.config import Config
    from tui.chat.events import WorkbenchEvent
    from tui.chat.workbench import Workbench


class MainScreen(Screen[None]):
    """The one screen of memdeck over one :class:`ChatEngine` (given now, or :meth:`attach`-ed
    once it is open)."""

    # Its stylesheet is main_screen.tcss beside this module, loaded by the app (Textual reads
    # CSS_PATH of pushed screens, not of the default screen).

    HELP = MAIN_HELP

    # The ids keep their ``app.`` prefix: users remap keys by id in config.toml.
    BINDINGS = MAIN_BINDINGS

    HORIZONTAL_BREAKPOINTS = BREAKPOINTS

    #: Which half fills a narrow screen: ``chat`` or ``memory`` (wider screens show both).
    view: reactive[str] = reactive("chat", init=False)

    def __init__(
        self,
        engine: ChatEngine | None,
        *,
        config: Config,
        config_file: Path,
        now: date | None = None,
        clock: Callable[[], datetime] = datetime.now,
        load_model: bool = True,
        watch: bool = True,
    ) -> None:
        """``engine`` None: a placeholder until :meth:`attach`. ``now``/``clock`` pin dates in
        tests; ``load_model=False`` keeps search BM25-only; ``watch=False`` skips the watcher."""
        super().__init__()
        self._engine = engine
        self.config = config
        self.config_file = config_file
        self.now = now
        self.clock = clock
        self.load_model = load_model
        self.watch_files = watch
        self.watcher: WorkspaceWatcher | None = None
        self._workbench: Workbench | None = None
        self._trigger_stop = asyncio.Event()
        #: Set once the main widgets are mounted over the engine (see :attr:`ready`).
        self._started = False
        #: True while :meth:`attach` mounts the main widgets.
        self._attaching = False
        self._after_attach: list[Callable[[], object]] = []
        #: Keys typed in a panel are on their way to the message box (see :meth:`on_key`).
        self._typing_to_chat = False

    @property
    def engine(self) -> ChatEngine:
        """The chat engine (only once it is open)."""
        if self._engine is None:
            raise RuntimeError("the chat engine is still opening")
        return self._engine

    @property
    def workbench(self) -> Workbench:
        """What the screen's actions drive (only once the engine is open)."""
        if self._workbench is None:
            raise RuntimeError("the chat engine is still opening")
        return self._workbench

    @property
    def ready(self) -> bool:
        """True once the sessions, chat and panels are mounted over an open engine (all of
        them and their children, not merely added to the DOM)."""
        return self._started

    @property
    def opened_workbench(self) -> Workbench | None:
        """The workbench if the engine is open yet."""
        return self._workbench

    @property
    def active_session(self) -> str | None:
        """The open session (the workbench's; None while the engine opens)."""
        return self._workbench.active_session if self._workbench is not None else None

    def call_when_attached(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the main widgets are mounted (now, if no mount is under
        way). The app's exit waits on this: removing widgets that are still mounting leaves
        them without children (Textual skips mounting into a widget being removed), and their
        own start-up code then finds nothing (``NoMatches``)."""
        if self._attaching:
            self._after_attach.append(callback)
        else:
            callback()

    # -- layout --

    def compose(self) -> ComposeResult:
        yield AppHeader(id="header")
        yield ModeBar(id="mode-bar")
        with Desk(id="main"):
            if self._engine is not None:
                yield from self._main_widgets(self._engine)
            else:
                yield Static("opening the memory workspace…", id="starting")
        yield SteadyFooter(show_command_palette=False, compact=True)

    def _main_widgets(self, engine: ChatEngine) -> list[Widget]:
        """Sessions, chat and memory panels over ``engine`` (and the workbench over it)."""
        from tui.chat.workbench import Workbench

        self._workbench = workbench = Workbench(engine, config_file=self.config_file)
        return Desk.widgets(
            workbench, config_file=self.config_file, now=self.now, clock=self.clock
        )

    @property
    def desk(self) -> Desk:
        """Sessions | chat | memory panels."""
        return self.query_one(Desk)

    @property
    def header(self) -> AppHeader:
        return self.query_one(AppHeader)

    @property
    def chat_pane(self) -> ChatPane:
        return self.desk.chat_pane

    @property
    def session_list(self) -> SessionList:
        return self.desk.session_list

    @property
    def memory_panels(self) -> MemoryPanels:
        return self.desk.memory_panels

    def on_mount(self) -> None:
        self.query_one(ModeBar).toggle_key = self.config.keymap.get("app.toggle_memory", "ctrl+t")
        desk = self.desk
        for name in HEADER_STATE:  # the header shows the desk's state
            self.watch(desk, name, self._header_shows(name))
        desk.model = self.config.effective_model or ""
        desk.model_state = "loading" if self.load_model else "none"
        if self._engine is not None:
            self._start()

    def _header_shows(self, name: str) -> Callable[[object], None]:
        header = self.header
        return lambda value: setattr(header, name, value)

    async def attach(self, engine: ChatEngine) -> None:
        """The engine is open (after the first frame): mount the main widgets over it."""
        self._engine = engine
        self._attaching = True
        try:
            desk = self.desk
            await desk.remove_children()
            await desk.mount_all(self._main_widgets(engine))
            self._start()
        finally:
            self._attaching = False
            waiting, self._after_attach = self._after_attach, []
            for callback in waiting:
                callback()

    def _start(self) -> None:
        """The engine and the main widgets are there: wire them up and start the background."""
        engine, workbench = self.engine, self.workbench
        desk = self.desk
        desk.attach(workbench)
        self._started = True
        engine.confirm_forget = desk.confirm_forget

        def bridge(event: WorkbenchEvent) -> None:  # the one listener, on any thread
            desk.post_message(WorkbenchMessage(event))

        workbench.subscribe(bridge)
        for notice in engine.memory.notices:
            self.notify(notice, title="memdeck", severity="warning", timeout=8)
        for hint in engine.memory.workspace.suggestions():
            self.notify(hint, title="memdeck", timeout=12, markup=False)
        offer_recovery_copies(self.desk)
        say_last_quit(self)
        self.chat_pane.focus_input()
        self.desk.open_initial_session()
        self.call_after_refresh(self._start_background)
        self.app.refresh_bindings()

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The active keys as the footer shows them (see :func:`fit_footer`)."""
        return fit_footer(
            super().active_bindings, self._declared_order, self.size.width, self.app.get_key_display
        )

    @cached_property
    def _declared_order(self) -> dict[str | None, int]:
        """Each of our binding ids with its place in the screen's and the app's lists."""
        return {
            binding.id: rank
            for rank, binding in enumerate([*MAIN_BINDINGS, *self.app.BINDINGS])
            if isinstance(binding, Binding)
        }

    def on_resize(self) -> None:
        """The footer's keys depend on the width (see :attr:`active_bindings`)."""
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Actions on sessions and memory wait for the engine; "back to the message box" is
        offered where focus is elsewhere."""
        if not self.ready:
            return False
        if action == "focus_chat":
            return not self.chat_pane.input_has_focus or self.view != "chat"
        return True

    def _start_background(self) -> None:
        """After the first frame: index, model, watcher, triggers (not when the app is
        already closing)."""
        if not self.is_running or not self.app.is_running:
            return
        self._prepare_index()
        if self.load_model:
            self.desk.load_model()
        else:
            self.workbench.without_model()
        if self.watch_files:
            from tui.app.workspace_watcher import WorkspaceWatcher

            self.watcher = WorkspaceWatcher(
                self.engine.memory,
                self.memory_panels.post_message,
                progress=self.desk.progress_reporter(),
                on_sessions=self.session_list.reload,  # `memdeck ask`, `sessions --restore`...
            )
            self._watch_workspace()
        self._run_triggers()

    def stop_background(self) -> None:
        """The app is quitting: stop the answer, the trigger loop and the watcher."""
        if self._workbench is not None:
            self._workbench.stop_turn()
        self._trigger_stop.set()
        if self.watcher is not None:
            self.watcher.stop()

    def on_unmount(self) -> None:
        if self._workbench is not None:
            self._workbench.close()
            self._workbench.stop_turn()

    # -- background workers --

    @work(exclusive=True, group="index", exit_on_error=False)
    async def _prepare_index(self) -> None:
        """Sync the index (BM25 at once), then, once the model is loaded, embed what is new."""
        async for _outcome in self.workbench.prepare_index(self.desk.progress_reporter()):
            pass  # each outcome arrives on the workbench's stream

    #: Whether the first keystroke of a draft has started :meth:`_import_llm_sdk`.
    _sdk_import_started = False

    @work(exclusive=True, group="llm-sdk", exit_on_error=False)
    async def _import_llm_sdk(self) -> None:
        """Warm the chat client up while the first message is typed (the SDK's import, the
        client, a connection: :meth:`~tui.chat.client.LLMClient.warm_up`), so the first answer
        comes as quickly as the next ones. Not at start-up: the SDK costs ~20 MB that an app
        used only to browse and search memory never needs."""
        await self.engine.llm.warm_up()

    @work(exclusive=True, group="workspace-watcher", exit_on_error=False)
    async def _watch_workspace(self) -> None:
        assert self.watcher is not None
        await self.watcher.run()

    @work(exclusive=True, group="triggers", exit_on_error=False)
    async def _run_triggers(self) -> None:
        """Day change at start-up, then the idle / day-change / background timer loop."""
        await self.workbench.run_triggers(self._trigger_stop)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    # -- sessions (the desk's flow) --

    def _on_session_list_chosen(self, message: SessionList.Chosen) -> None:
        if message.session_id == self.active_session:  # the desk opened it
            self.remove_class("-show-sessions")

    def action_new_session(self) -> None:
        """Start a new session and switch to it (the message box takes focus at once, so what
        is typed next is not lost while the session is created)."""
        if not self.desk.still_answering():
            self.action_focus_chat()
            self.desk.new_session()

    def _on_session_list_new_requested(self) -> None:
        self.action_new_session()

    def action_rename_session(self, session_id: str | None = None) -> None:
        """Ask for a new title of ``session_id`` (default: the open session)."""
        self.desk.rename_session(session_id)

    def action_delete_session(self, session_id: str | None = None) -> None:
        """Ask, then flush ``session_id`` (default: the open one) and move it to the trash."""
        self.desk.delete_session(session_id)

    # -- the conversation --

    @on(TextArea.Changed, "#chat-input")
    def _draft_changed(self, event: TextArea.Changed) -> None:
        if not self._sdk_import_started and not self.workbench.llm_problem:
            self._sdk_import_started = True  # the first keystroke: the SDK loads while they type
            self._import_llm_sdk()
        panels = self.memory_panels
        draft = event.text_area.text
        panels.preview(draft)
        if draft.strip():
            panels.bring_inject_forward()
        else:
            self.query_one(ModeBar).badge = ""

    def action_why(self) -> None:
        """Why did these memories surface? What the last turn injected, as recorded in its
        transcript, with each memory's score breakdown; with no turn yet, search the draft."""
        self.desk.why()

    def _on_desk_memory_wanted(self) -> None:
        self.view = "memory"

    def _on_desk_config_reloaded(self, message: Desk.ConfigReloaded) -> None:
        self.config = message.config

    def action_focus_chat(self) -> None:
        """Back to the message box (on a narrow screen, the chat comes back)."""
        self.view = "chat"
        self.remove_class("-show-sessions")
        self.memory_panels.cancel_pending_focus()
        self.chat_pane.focus_input()

    def action_focus_sessions(self) -> None:
        """Pick a session (a collapsed session list is shown over the chat meanwhile)."""
        self.view = "chat"
        if not self.has_class("-wide"):
            self.add_class("-show-sessions")
        self.call_after_refresh(self.session_list.focus_list)

    def action_show_tab(self, tab_id: str) -> None:
        """Open a memory tab and focus it (on a narrow screen, the memory comes forward)."""
        # The tab first, then the view: a tab's widget shown by both at once may receive a
        # stale Hide after it got focus, and lose it.
        self.memory_panels.show_tab(tab_id, focus=True)
        self.view = "memory"

    def action_toggle_memory(self) -> None:
        """Flip between the chat and the memory panels."""
        if self.view == "memory" or self._focus_in_memory():
            self.action_focus_chat()
        else:
            self.action_show_tab(self.memory_panels.active_tab)

    def _focus_in_memory(self) -> bool:
        focused = self.focused
        return focused is not None and self.memory_panels in focused.ancestors_with_self

    def watch_view(self, view: str) -> None:
        self.set_class(view == "memory", "-show-memory")
        self.query_one(ModeBar).mode = view
        self.refresh_bindings()
        if view == "memory":
            self.query_one(ModeBar).badge = ""

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Whatever gets focus is on screen: the half it belongs to comes forward."""
        if not self.ready:
            return
        if self.chat_pane.is_input(event.widget):
            self._typing_to_chat = False  # the burst has arrived; panel keys mean theirs again
        if self.memory_panels in event.widget.ancestors_with_self:
            self.view = "memory"
        elif self.chat_pane in event.widget.ancestors_with_self:
            self.view = "chat"
        if self.session_list not in event.widget.ancestors_with_self:
            self.remove_class("-show-sessions")

    def on_key(self, event: events.Key) -> None:
        """Typing where nothing takes text (nothing focused, or a memory panel's tree, table or
        view) goes to the message box: typed text is never lost. Keys bound there (``e``,
        ``?``, the tree's space) keep their meaning, except within a burst already going to the
        message box: a paste or fast typing arrives before focus has moved there."""
        if not (self.ready and event.is_printable and event.character):
            return
        focused = self.focused
        if self.chat_pane.input_has_focus:
            self._typing_to_chat = False
            return
        if focused is not None and (
            isinstance(focused, Input | TextArea)
            or self.memory_panels not in focused.ancestors_with_self
        ):
            return
        if not self._typing_to_chat and event.key in self.active_bindings:
            return
        event.stop()
        event.prevent_default()
        self._typing_to_chat = True
        self.action_focus_chat()
        self.chat_pane.type_into_input(event.character)

    def _on_memory_editor_dirty_changed(self, message: MemoryEditor.DirtyChanged) -> None:
        self.header.unsaved_memory = message.dirty

    def _on_memory_panels_tab_shown(self, message: MemoryPanels.TabShown) -> None:
        self.query_one(ModeBar).tab = message.title

    def _on_injection_panel_updated(self, message: InjectionPanel.Updated) -> None:
        """While the user types in the chat, the Inject tab's news is in view."""
        if self.view == "chat" and self.chat_pane.draft:
            self.query_one(ModeBar).badge = message.summary

    # -- memory actions (the desk's) --

    def action_flush(self) -> None:
        """Summarise the open session into today's daily log now (the manual trigger)."""
        self.desk.flush()

    def action_reindex(self) -> None:
        """Rebuild the index from the Markdown files."""
        self.desk.reindex()

    def action_reload_config(self) -> None:
        """Re-read config.toml and apply it without a restart; a changed ``[embeddings]``
        swaps the embedder (rebuilding the index in the background when the model changed)."""
        self.desk.reload_config()

    def action_consolidate(self) -> None:
        """Ask the model for an updated MEMORY.md from recent daily logs, then review it."""
        self.desk.consolidate()

    def action_show_workspace(self) -> None:
        """Show (and copy) the workspace folder."""
        root = str(self.engine.memory.workspace.root)
        self.app.copy_to_clipboard(root)
        self.notify(root, title="workspace (copied)", timeout=10)
