"""MemdeckApp: the one screen — sessions, chat, memory panels — and the background work behind it.

The first frame is cheap: only Textual, the config and the header are needed for it. When
``run_app`` starts the app it passes ``open_engine`` instead of an engine: the chat engine, the
memory panels and everything they import are loaded in a thread after that first frame, then
mounted. (Tests pass a ready engine and get the whole screen at once.)

Background work starts after the first frame: the index sync and the embedding model load
(thread workers), the workspace watcher and the trigger timer loop (one exclusive async worker
each). Everything blocking runs in a worker; results come back as the dataclass messages of
:mod:`tui.app.app_messages`. Trigger listener events arrive from the flushing threads as
:class:`~tui.app.app_messages.TriggerNotice`.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Iterable
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.theme import Theme
from textual.widget import Widget
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from tui.app.app_header import AppHeader
from tui.app.app_messages import (
    ConsolidationFinished,
    ConsolidationProposed,
    EngineOpened,
    IndexProgress,
    IndexStatsRead,
    IndexSynced,
    MemoryToolRan,
    ModelLoadFinished,
    NewSessionRequested,
    QuitFlushFinished,
    SessionChosen,
    SessionDeleted,
    SessionDeleteRequested,
    SessionRenamed,
    SessionRenameRequested,
    SessionsLoaded,
    SessionStarted,
    TranscriptLoaded,
    TriggerNotice,
    TurnFinished,
)
from tui.app.themes import DEFAULT_THEME, load_themes, theme_dirs
from tui.chat.config import Config, ConfigError, save_config
from tui.chat.events import FlushOutcome, FlushStarted, TriggerEvent

# The heavy half (chat engine, memory panels, watcher) is imported after the first frame; see
# MemdeckApp._load_engine. These names are for type hints only.
if TYPE_CHECKING:
    from tui.app.chat_pane import ChatPane
    from tui.app.messages import WorkspaceChanged
    from tui.app.panels.memory_panels import MemoryPanels
    from tui.app.session_list import SessionList
    from tui.app.workspace_watcher import WorkspaceWatcher
    from tui.chat.chat import ChatEngine
    from tui.chat.consolidation import Proposal
    from tui.engine.index import SyncReport

#: Actions that need the engine (disabled until it is open).
ENGINE_ACTIONS = frozenset(
    {
        "new_session",
        "flush",
        "reindex",
        "why",
        "rename_session",
        "delete_session",
        "consolidate",
        "show_workspace",
        "focus_chat",
        "focus_sessions",
    }
)
#: Longest wait for the quit flush before the app closes anyway.
QUIT_FLUSH_TIMEOUT = 15.0
#: Index progress messages are posted at most this often (seconds).
PROGRESS_INTERVAL = 0.1


Handler = TypeVar("Handler", bound=Callable[..., Any])


def needs_ui(handler: Handler) -> Handler:
    """Skip a message handler once the screen is torn down: results of background threads
    (flushes, syncs) can arrive while the app is exiting."""

    @functools.wraps(handler)
    def guarded(self: MemdeckApp, *args: Any) -> Any:
        if not self.query(AppHeader):
            return None
        return handler(self, *args)

    return guarded  # type: ignore[return-value]


def describe_outcome(outcome: FlushOutcome) -> str:
    """``logged 4 messages, 1 fact → memory/2026-11-22.md`` (a flush for the stats panel)."""
    where = f" → {outcome.daily_log}" if outcome.daily_log else ""
    return f"{outcome.summary}{where}"


class MemdeckApp(App[int]):
    """The memdeck terminal UI over one :class:`ChatEngine`."""

    CSS_PATH = "app.tcss"
    TITLE = "memdeck"

    HELP = """\
## memdeck

A chat whose assistant remembers. Left: your sessions. Centre: the conversation. Right: the
memory behind it — what the next message injects, search with the score breakdown, the daily
logs, MEMORY.md (editable) and stats.

Memory is written when you switch sessions, go idle, leave the terminal, the day changes or
quit (a summary goes to `memory/YYYY-MM-DD.md`); **ctrl+f** does it now.
"""

    BINDINGS = [
        Binding(
            "ctrl+n",
            "new_session",
            "new",
            id="app.new_session",
            tooltip="Start a new chat session (the open one is flushed to memory)",
            priority=True,
        ),
        Binding(
            "ctrl+f",
            "flush",
            "flush",
            id="app.flush",
            tooltip="Summarise the open session into today's daily log now",
            priority=True,
        ),
        Binding(
            "ctrl+r",
            "reindex",
            "reindex",
            id="app.reindex",
            tooltip="Rebuild the search index from the Markdown files",
            priority=True,
        ),
        Binding(
            "ctrl+o",
            "why",
            "why?",
            id="app.why",
            tooltip="Search memory for your last message: why did these memories surface?",
            priority=True,
        ),
        Binding(
            "ctrl+p",
            "command_palette",
            "commands",
            id="app.command_palette",
            tooltip="Every command, searchable",
            priority=True,
        ),
        Binding(
            "f1",
            "show_help",
            "help",
            id="app.help",
            tooltip="Explain the focused widget and its keys",
        ),
        Binding(
            "ctrl+q",
            "quit",
            "quit",
            id="app.quit",
            tooltip="Quit (memory is flushed first; press again to quit without waiting)",
            priority=True,
            show=False,
        ),
    ]

    def __init__(
        self,
        engine: ChatEngine | None = None,
        *,
        config_file: Path,
        config: Config | None = None,
        open_engine: Callable[[], ChatEngine] | None = None,
        now: date | None = None,
        clock: Callable[[], datetime] = datetime.now,
        load_model: bool = True,
        watch: bool = True,
    ) -> None:
        """Either a ready ``engine``, or ``config`` and ``open_engine`` (called in a thread after
        the first frame). ``config_file`` is where the theme is remembered; ``now``/``clock``
        pin dates in tests; ``load_model=False`` keeps search BM25-only; ``watch=False`` skips
        the watcher."""
        super().__init__()
        if engine is None and (config is None or open_engine is None):
            raise ValueError("give an engine, or a config and open_engine")
        self._engine = engine
        self.config: Config = engine.config if engine is not None else config  # type: ignore[assignment]
        self._open_engine = open_engine
        self.config_file = config_file
        self.now = now
        self.clock = clock
        self.load_model = load_model
        self.watch = watch
        self.active_session_id: str | None = None
        #: Set once the quit flush finished (or there was none to wait for).
        self.quit_flush_done = False
        self._quitting = False
        self._model_ready = threading.Event()
        self._lifecycle_lock = threading.Lock()
        self._trigger_stop: asyncio.Event | None = None
        self._remove_listener: Callable[[], None] | None = None
        self.watcher: WorkspaceWatcher | None = None
        self.startup_warnings: list[str] = []
        loaded = load_themes(theme_dirs(config_file))
        self.startup_warnings += loaded.warnings
        for theme in loaded.themes:
            self.register_theme(theme)
        wanted = self.config.theme
        if wanted not in self.available_themes:
            self.startup_warnings.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted
        self._saved_theme = wanted

    @property
    def engine(self) -> ChatEngine:
        """The chat engine (only once :attr:`ready`)."""
        if self._engine is None:
            raise RuntimeError("the chat engine is still opening")
        return self._engine

    @property
    def opened_engine(self) -> ChatEngine | None:
        """The chat engine if it is open yet."""
        return self._engine

    @property
    def ready(self) -> bool:
        """True once the engine is open and the sessions, chat and panels are mounted."""
        return self._engine is not None and bool(self.query("#memory-panels"))

    # -- layout --

    def compose(self) -> ComposeResult:
        yield AppHeader(id="header")
        with Horizontal(id="main"):
            if self._engine is not None:
                yield from self._main_widgets(self._engine)
            else:
                yield Static("opening the memory workspace…", id="starting")
        yield Footer(show_command_palette=False)

    def _main_widgets(self, engine: ChatEngine) -> list[Widget]:
        """Sessions, chat and memory panels over ``engine``."""
        from tui.app.chat_pane import ChatPane
        from tui.app.panels.memory_panels import MemoryPanels
        from tui.app.session_list import SessionList

        return [
            SessionList(engine.sessions, id="session-list"),
            ChatPane(engine, config_file=self.config_file, id="chat-pane"),
            MemoryPanels(engine.memory, now=self.now, clock=self.clock, id="memory-panels"),
        ]

    @property
    def header(self) -> AppHeader:
        return self.query_one(AppHeader)

    @property
    def chat_pane(self) -> ChatPane:
        return self.query_one("#chat-pane", Widget)  # type: ignore[return-value]

    @property
    def session_list(self) -> SessionList:
        return self.query_one("#session-list", Widget)  # type: ignore[return-value]

    @property
    def memory_panels(self) -> MemoryPanels:
        return self.query_one("#memory-panels", Widget)  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.set_keymap(dict(self.config.keymap))
        self.header.model = self.config.effective_model or ""
        self.header.model_state = "loading" if self.load_model else "none"
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._trigger_stop = asyncio.Event()
        for warning in self.startup_warnings:
            self.notify(warning, title="memdeck", severity="warning", timeout=8)
        if self._engine is not None:
            self._attach_engine()
        else:
            self.call_after_refresh(self._load_engine)

    @work(thread=True, exclusive=True, group="engine", exit_on_error=False)
    def _load_engine(self) -> None:
        """After the first frame: import the heavy half and open the engine (in a thread, so
        the screen stays live while numpy, the tokenizer and the panels load)."""
        import tui.app.chat_pane  # noqa: F401
        import tui.app.panels  # noqa: F401
        import tui.app.session_list  # noqa: F401
        import tui.app.workspace_watcher  # noqa: F401

        assert self._open_engine is not None
        try:
            engine = self._open_engine()
        except Exception as exc:  # a workspace or index that cannot be opened: say so and exit
            self.call_from_thread(
                self.exit, None, 2, f"memdeck: error: {type(exc).__name__}: {exc}"
            )
            return
        self.post_message(EngineOpened(engine))

    @on(EngineOpened)
    async def _engine_opened(self, message: EngineOpened) -> None:
        self._engine = message.engine
        main = self.query_one("#main", Horizontal)
        await main.remove_children()
        await main.mount_all(self._main_widgets(message.engine))
        self._attach_engine()

    def _attach_engine(self) -> None:
        """The engine and the main widgets are there: wire them up and start the background."""
        engine = self.engine
        # Every memory change ends in the panels' index signal: the header count follows it.
        self.memory_panels.index_signal.subscribe(self, lambda _paths: self._read_index_stats())
        self._remove_listener = engine.triggers.add_listener(
            lambda event: self.post_message(TriggerNotice(event))
        )
        for notice in engine.memory.notices:
            self.notify(notice, title="memdeck", severity="warning", timeout=8)
        self.chat_pane.chat_input.focus()
        self._open_initial_session()
        self.call_after_refresh(self._start_background)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Actions on sessions and memory wait for the engine (quit, help and the palette don't)."""
        return action not in ENGINE_ACTIONS or self.ready

    def _start_background(self) -> None:
        """After the first frame: index, model, watcher, triggers."""
        self._prepare_index()
        if self.load_model:
            self.memory_panels.set_model_state("loading")
            self._load_model()
        else:
            self._model_ready.set()
        if not self.engine.llm_problem:
            self._import_llm_sdk()
        if self.watch:
            from tui.app.workspace_watcher import WorkspaceWatcher

            self.watcher = WorkspaceWatcher(self.engine.memory, self._workspace_changed)
            self._watch_workspace()
        self._run_triggers()

    # -- background workers --

    def _progress(self) -> Callable[[str, int, int], None]:
        last = 0.0

        def report(stage: str, done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if done >= total or now - last >= PROGRESS_INTERVAL:
                last = now
                self.post_message(IndexProgress(stage, done, total))

        return report

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def _prepare_index(self) -> None:
        """Sync the index (BM25 at once), then, once the model is loaded, embed what is new."""
        memory = self.engine.memory
        try:
            report = memory.sync(progress=self._progress())
        except Exception as exc:
            self.post_message(IndexSynced("start", error=str(exc)))
            return
        self.post_message(IndexSynced("start", report))
        self._model_ready.wait()
        if memory.model_loaded and memory.index.pending_embeddings():
            try:
                report = memory.sync(progress=self._progress())
            except Exception as exc:
                self.post_message(IndexSynced("embedding", error=str(exc)))
                return
            self.post_message(IndexSynced("embedding", report))

    @work(thread=True, exclusive=True, group="model", exit_on_error=False)
    def _load_model(self) -> None:
        try:
            self.engine.memory.load_model()
        except Exception as exc:
            self.post_message(ModelLoadFinished(f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(ModelLoadFinished())
        finally:
            self._model_ready.set()

    @work(thread=True, exclusive=True, group="llm-sdk", exit_on_error=False)
    def _import_llm_sdk(self) -> None:
        """Import the ``openai`` SDK now, in a thread: the chat client imports it on the first
        request, which would otherwise freeze the screen for about a second."""
        import openai  # noqa: F401

    @work(exclusive=True, group="workspace-watcher", exit_on_error=False)
    async def _watch_workspace(self) -> None:
        assert self.watcher is not None
        await self.watcher.run()

    def _workspace_changed(self, message: WorkspaceChanged) -> None:
        self.memory_panels.post_message(message)

    @work(exclusive=True, group="triggers", exit_on_error=False)
    async def _run_triggers(self) -> None:
        """Day change at start-up, then the idle / day-change / background timer loop."""
        triggers = self.engine.triggers
        await asyncio.to_thread(self._locked, triggers.startup)
        await triggers.run(self._trigger_stop)

    @work(thread=True, exclusive=True, group="index-stats", exit_on_error=False)
    def _read_index_stats(self) -> None:
        self.post_message(IndexStatsRead(self.engine.memory.stats()))

    def _locked(self, call: Callable[[], object]) -> object:
        """Run a trigger-manager call that fires flushes, one at a time (it tracks the active
        session; two switches racing would flush the wrong one)."""
        with self._lifecycle_lock:
            return call()

    @work(thread=True, group="lifecycle", exit_on_error=False)
    def _fire(self, name: str, call: Callable[[], object]) -> None:
        """A trigger-manager call that may flush (switch, manual); its events reach the
        listener. Not exclusive: each flush must run to the end."""
        self._locked(call)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.node is self:
            self.notify(f"{event.worker.name}: {event.worker.error}", severity="error")

    # -- index and model --

    @on(IndexProgress)
    @needs_ui
    def _index_progress(self, message: IndexProgress) -> None:
        if message.done >= message.total:
            self.header.progress = ""
        else:
            self.header.progress = f"{message.stage} {message.done:,}/{message.total:,}"

    @on(IndexSynced)
    @needs_ui
    def _index_synced(self, message: IndexSynced) -> None:
        from tui.app.panels.memory_panels import describe_sync

        self.header.progress = ""
        panels = self.memory_panels
        if message.error:
            panels.log_event(f"index {message.reason} failed: {message.error}")
            self.notify(message.error, title="index", severity="error")
        else:
            panels.log_event(f"index {message.reason}: {describe_sync(message.report)}")
            if message.reason == "reindex":
                self.notify(f"reindexed: {describe_sync(message.report)}", title="index")
            panels.index_changed([])
        if message.error:
            self._read_index_stats()

    @on(IndexStatsRead)
    @needs_ui
    def _index_stats(self, message: IndexStatsRead) -> None:
        chunks = message.stats.get("chunks")
        self.header.chunks = int(chunks) if isinstance(chunks, int | float) else None

    @on(ModelLoadFinished)
    @needs_ui
    def _model_loaded(self, message: ModelLoadFinished) -> None:
        state = "failed" if message.error else "loaded"
        self.header.model_state = state
        self.memory_panels.set_model_state(state)
        if message.error:
            self.notify(
                f"embedding model failed to load; search stays BM25-only ({message.error})",
                severity="warning",
            )

    @on(MemoryToolRan)
    @needs_ui
    def _memory_tool_ran(self, message: MemoryToolRan) -> None:
        self.memory_panels.log_event(f"assistant: {message.name}")
        self.memory_panels.index_changed([])

    # -- triggers and flushes --

    @on(TriggerNotice)
    @needs_ui
    def _trigger_notice(self, message: TriggerNotice) -> None:
        event = message.event
        panels = self.memory_panels
        if isinstance(event, FlushStarted):
            self.header.flushing += 1
            panels.log_event(f"{event.trigger}: flushing {event.session_id} ({event.reason})")
            return
        assert isinstance(event, TriggerEvent)
        if event.session_id is not None:
            self.header.flushing = max(0, self.header.flushing - 1)
        outcome = event.outcome
        panels.record_flush(event.trigger, describe_outcome(outcome))
        if outcome.status == "flushed":
            changed = [p for p in (outcome.daily_log, "MEMORY.md" if outcome.facts else None) if p]
            panels.index_changed(changed)
            self.session_list.reload()
            self.notify(describe_outcome(outcome), title=f"memory ({event.trigger})")
        elif outcome.status in ("skipped", "failed"):
            self.notify(
                outcome.summary, title=f"memory not written ({event.trigger})", severity="warning"
            )

    def on_app_blur(self, event: events.AppBlur) -> None:
        """The terminal lost focus: the background flush runs if it stays lost."""
        self.engine.triggers.focus_lost()

    def on_app_focus(self, event: events.AppFocus) -> None:
        self.engine.triggers.focus_gained()

    # -- sessions --

    @work(thread=True, exclusive=True, group="initial-session", exit_on_error=False)
    def _open_initial_session(self) -> None:
        """Resume the most recently updated session, if any; say if a consolidation is due."""
        infos = self.engine.sessions.list()
        if infos:
            self.post_message(SessionChosen(infos[0].id))
        if not self.engine.llm_problem and self.engine.consolidator.is_due():
            self.post_message(ConsolidationFinished("due"))

    @on(SessionChosen)
    @needs_ui
    def _session_chosen(self, message: SessionChosen) -> None:
        self.switch_to(message.session_id)

    def switch_to(self, session_id: str | None) -> None:
        """Open ``session_id``: show its transcript and flush the session left (switch trigger)."""
        if self.chat_pane.busy:
            self.notify("still answering — Escape stops it, then switch", severity="warning")
            return
        if session_id == self.active_session_id:
            self.chat_pane.chat_input.focus()
            return
        self.active_session_id = session_id
        self.session_list.set_active(session_id)
        self.header.session_title = "…" if session_id else ""
        if session_id is None:
            self.call_next(self.chat_pane.show_transcript, None, None)
        else:
            self._load_transcript(session_id)
        triggers = self.engine.triggers
        self._fire("session_switch", partial(triggers.switch_session, session_id))

    @work(thread=True, exclusive=True, group="transcript", exit_on_error=False)
    def _load_transcript(self, session_id: str) -> None:
        self.post_message(TranscriptLoaded(session_id, self.engine.sessions.load(session_id)))

    @on(TranscriptLoaded)
    @needs_ui
    async def _transcript_loaded(self, message: TranscriptLoaded) -> None:
        if message.session_id != self.active_session_id:
            return  # the user switched again meanwhile
        self.header.session_title = message.transcript.display_title
        await self.chat_pane.show_transcript(message.session_id, message.transcript)

    @on(SessionsLoaded)
    @needs_ui
    def _sessions_loaded(self, message: SessionsLoaded) -> None:
        for info in message.sessions:
            if info.id == self.active_session_id:
                self.header.session_title = info.title

    @on(SessionStarted)
    @needs_ui
    def _session_started(self, message: SessionStarted) -> None:
        info = message.info
        self.session_list.reload()
        if info.id == self.active_session_id:
            return
        if self.chat_pane.session_id == info.id:
            # The chat pane made it for a first message: adopt it without touching the chat.
            self.active_session_id = info.id
            self.session_list.set_active(info.id)
            self.header.session_title = info.title
            self._fire("session_switch", partial(self.engine.triggers.switch_session, info.id))
        elif message.activate:
            self.switch_to(info.id)

    def action_new_session(self) -> None:
        """Start a new session and switch to it."""
        if self.chat_pane.busy:
            self.notify("still answering — Escape stops it first", severity="warning")
            return
        self._create_session()

    @on(NewSessionRequested)
    def _new_session_requested(self) -> None:
        self.action_new_session()

    @work(thread=True, group="sessions", exit_on_error=False)
    def _create_session(self) -> None:
        self.post_message(SessionStarted(self.engine.sessions.create()))

    def _session_title(self, session_id: str) -> str:
        for info in self.session_list.infos:
            if info.id == session_id:
                return info.title
        return session_id

    def action_rename_session(self, session_id: str | None = None) -> None:
        """Ask for a new title of ``session_id`` (default: the open session)."""
        from tui.app.rename_screen import RenameScreen

        target = session_id or self.active_session_id
        if target is None:
            self.notify("no session is open", severity="warning")
            return

        def renamed(title: str | None) -> None:
            if title:
                self._rename(target, title)

        self.push_screen(RenameScreen(self._session_title(target)), renamed)

    @on(SessionRenameRequested)
    def _rename_requested(self, message: SessionRenameRequested) -> None:
        self.action_rename_session(message.session_id)

    @work(thread=True, group="sessions", exit_on_error=False)
    def _rename(self, session_id: str, title: str) -> None:
        self.post_message(SessionRenamed(self.engine.sessions.rename(session_id, title)))

    @on(SessionRenamed)
    @needs_ui
    def _renamed(self, message: SessionRenamed) -> None:
        if message.info.id == self.active_session_id:
            self.header.session_title = message.info.title
        self.session_list.reload()

    def action_delete_session(self, session_id: str | None = None) -> None:
        """Ask, then flush ``session_id`` (default: the open one) and move it to the trash."""
        from tui.app.confirm_screen import ConfirmScreen

        target = session_id or self.active_session_id
        if target is None:
            self.notify("no session is open", severity="warning")
            return
        if target == self.active_session_id and self.chat_pane.busy:
            self.notify("still answering — Escape stops it first", severity="warning")
            return
        question = (
            f"Delete “{self._session_title(target)}”?\n\n"
            "Its new messages are summarised into memory first; the transcript moves to "
            "sessions/.trash/ (nothing is destroyed)."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(target)

        self.push_screen(ConfirmScreen(question, confirm="Delete"), answered)

    @on(SessionDeleteRequested)
    def _delete_requested(self, message: SessionDeleteRequested) -> None:
        self.action_delete_session(message.session_id)

    @work(thread=True, group="lifecycle", exit_on_error=False)
    def _delete(self, session_id: str) -> None:
        with self._lifecycle_lock:
            trash, event = self.engine.triggers.delete_session(session_id)
        self.post_message(SessionDeleted(session_id, trash, event.outcome))

    @on(SessionDeleted)
    @needs_ui
    def _deleted(self, message: SessionDeleted) -> None:
        self.notify(f"moved to {message.trash_path.name} in sessions/.trash", title="deleted")
        if message.session_id == self.active_session_id:
            self.active_session_id = None
            self.header.session_title = ""
            self.session_list.set_active(None)
            self.call_next(self.chat_pane.show_transcript, None, None)
        self.session_list.reload()

    # -- the conversation --

    @on(Input.Changed, "#chat-input")
    def _draft_changed(self, event: Input.Changed) -> None:
        self.memory_panels.preview(event.value)

    @on(TurnFinished)
    @needs_ui
    def _turn_finished(self, message: TurnFinished) -> None:
        self.session_list.reload()
        search = self.memory_panels.search_panel
        if not search.has_focus_within:
            search.set_query(message.user_text)

    def action_why(self) -> None:
        """Search memory for the last message sent (or the draft): why did these surface?"""
        text = self.chat_pane.last_user_text or self.chat_pane.chat_input.value.strip()
        if not text:
            self.notify("send a message first", severity="warning")
            return
        self.memory_panels.explain(text)

    # -- memory actions --

    def action_flush(self) -> None:
        """Summarise the open session into today's daily log now (the manual trigger)."""
        self._fire("manual", partial(self.engine.triggers.manual, self.active_session_id))

    def action_reindex(self) -> None:
        """Rebuild the index from the Markdown files."""
        self.header.progress = "reindexing…"
        self._reindex()

    @work(thread=True, exclusive=True, group="reindex", exit_on_error=False)
    def _reindex(self) -> None:
        try:
            report: SyncReport = self.engine.memory.reindex(progress=self._progress())
        except Exception as exc:
            self.post_message(IndexSynced("reindex", error=str(exc)))
            return
        self.post_message(IndexSynced("reindex", report))

    def action_consolidate(self) -> None:
        """Ask the model for an updated MEMORY.md from recent daily logs, then review it."""
        self.notify("asking the model for a consolidated MEMORY.md…", title="consolidate")
        self._propose_consolidation()

    @work(thread=True, exclusive=True, group="consolidate", exit_on_error=False)
    def _propose_consolidation(self) -> None:
        from tui.chat.consolidation import ConsolidationError

        try:
            proposal = self.engine.consolidator.propose()
        except ConsolidationError as exc:
            self.post_message(ConsolidationFinished("failed", exc.message))
            return
        self.post_message(ConsolidationProposed(proposal))

    @on(ConsolidationProposed)
    @needs_ui
    def _consolidation_proposed(self, message: ConsolidationProposed) -> None:
        from tui.app.consolidation_screen import ConsolidationScreen

        proposal = message.proposal
        if proposal.unchanged:
            self.notify("MEMORY.md is already consolidated: no changes", title="consolidate")
            return

        def decided(choice: str | None) -> None:
            if choice is not None:
                self._decide_consolidation(proposal, choice)

        self.push_screen(ConsolidationScreen(proposal), decided)

    @work(thread=True, exclusive=True, group="consolidate", exit_on_error=False)
    def _decide_consolidation(self, proposal: Proposal, choice: str) -> None:
        from tui.chat.consolidation import ConsolidationError

        consolidator = self.engine.consolidator
        if choice == "reject":
            consolidator.reject(proposal, reason="rejected in the app")
            self.post_message(ConsolidationFinished("rejected"))
            return
        try:
            result = consolidator.accept(proposal)
        except ConsolidationError as exc:
            self.post_message(ConsolidationFinished("failed", exc.message))
            return
        self.post_message(ConsolidationFinished("accepted", result.stats.summary))

    @on(ConsolidationFinished)
    @needs_ui
    def _consolidation_finished(self, message: ConsolidationFinished) -> None:
        panels = self.memory_panels
        if message.what == "due":
            self.notify(
                "recent daily logs can be folded into MEMORY.md: ctrl+p → Consolidate memory",
                title="consolidation due",
                timeout=10,
            )
        elif message.what == "accepted":
            panels.log_event(f"consolidation accepted: {message.detail}")
            panels.index_changed(["MEMORY.md"])
            self.notify(f"MEMORY.md updated: {message.detail}", title="consolidate")
        elif message.what == "rejected":
            panels.log_event("consolidation rejected")
            self.notify("nothing changed", title="consolidation rejected")
        else:
            panels.log_event(f"consolidation failed: {message.detail}")
            self.notify(message.detail, title="consolidation", severity="warning", timeout=10)

    def action_show_workspace(self) -> None:
        """Show (and copy) the workspace folder."""
        root = str(self.engine.memory.workspace.root)
        self.copy_to_clipboard(root)
        self.notify(root, title="workspace (copied)", timeout=10)

    # -- themes --

    def _theme_changed(self, theme: Theme) -> None:
        if theme.name != self._saved_theme:
            self._saved_theme = theme.name
            self._save_theme(theme.name)

    @work(thread=True, exclusive=True, group="config", exit_on_error=False)
    def _save_theme(self, name: str) -> None:
        try:
            save_config({"theme": name}, self.config_file)
        except (ConfigError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"theme not saved: {exc}", severity="warning", timeout=8
            )

    # -- help and commands --

    def action_show_help(self) -> None:
        """F1: help for the focused widget, with its keys."""
        from tui.app.help_screen import HelpScreen

        bindings = [(key, active.binding) for key, active in self.screen.active_bindings.items()]
        self.push_screen(HelpScreen(self.focused, bindings))

    def action_focus_chat(self) -> None:
        self.chat_pane.chat_input.focus()

    def action_focus_sessions(self) -> None:
        self.session_list.option_list.focus()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action, for the command palette."""
        yield from super().get_system_commands(screen)
        if not self.ready:
            return
        from tui.app.panels.memory_panels import TABS

        yield SystemCommand(
            "New session", "Start a new chat session (ctrl+n)", self.action_new_session
        )
        yield SystemCommand(
            "Rename session", "Give the open session a title", self.action_rename_session
        )
        yield SystemCommand(
            "Delete session",
            "Flush the open session to memory, then move it to the trash",
            self.action_delete_session,
        )
        yield SystemCommand(
            "Flush memory now",
            "Summarise the open session into today's daily log (ctrl+f)",
            self.action_flush,
        )
        yield SystemCommand(
            "Reindex memory",
            "Rebuild the search index from the Markdown files (ctrl+r)",
            self.action_reindex,
        )
        yield SystemCommand(
            "Consolidate memory",
            "Fold recent daily logs into MEMORY.md: the model proposes, you review the diff",
            self.action_consolidate,
        )
        yield SystemCommand(
            "Why did this surface?",
            "Search memory for your last message, with the score breakdown (ctrl+o)",
            self.action_why,
        )
        yield SystemCommand(
            "Show workspace path", "Where memory lives on disk (copied)", self.action_show_workspace
        )
        for tab_id, title in TABS.items():
            yield SystemCommand(
                f"Show {title}",
                f"Open the {title} tab",
                partial(self.memory_panels.show_tab, tab_id),
            )
        yield SystemCommand("Focus message box", "Type a message", self.action_focus_chat)
        yield SystemCommand("Focus sessions", "Pick a session", self.action_focus_sessions)
        yield SystemCommand(
            "Help", "Explain the focused widget and its keys (F1)", self.action_show_help
        )
        if self.chat_pane.busy:
            yield SystemCommand(
                "Stop answering", "Stop the streaming answer", self.chat_pane.action_stop
            )

    # -- quitting --

    async def action_quit(self) -> None:
        """Flush memory (bounded wait, with a notice), then exit. A second press exits now."""
        if self._quitting or not self.ready:
            self.exit(0)
            return
        self._quitting = True
        self.chat_pane.action_stop()
        if self._trigger_stop is not None:
            self._trigger_stop.set()
        if self.watcher is not None:
            self.watcher.stop()
        self.header.notice = "flushing memory before quitting… (ctrl+q again: quit now)"
        self.notify("flushing memory before quitting…", title="memdeck", timeout=QUIT_FLUSH_TIMEOUT)
        self._quit_flush()
        self.set_timer(QUIT_FLUSH_TIMEOUT, self._quit_without_waiting)

    @work(thread=True, exclusive=True, group="quit", exit_on_error=False)
    def _quit_flush(self) -> None:
        events = self._locked(self.engine.triggers.app_quit)
        summary = "; ".join(describe_outcome(e.outcome) for e in events) if events else ""
        self.post_message(QuitFlushFinished(str(summary)))

    @on(QuitFlushFinished)
    def _quit_flush_finished(self, message: QuitFlushFinished) -> None:
        self.quit_flush_done = True
        self.exit(0)

    @property
    def quit_flush_pending(self) -> bool:
        """True when the app quit before its quit flush finished (it goes on in its thread)."""
        return self._quitting and not self.quit_flush_done

    def _quit_without_waiting(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
