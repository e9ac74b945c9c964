"""MemdeckApp: start-up, themes, the command palette, help and quitting.

Sessions, chat, memory panels and the background work behind them belong to the one screen,
:class:`~tui.app.screens.main_screen.MainScreen` (the owner of the open session).

The first frame is cheap: only Textual, the config and the header are needed for it. When
``run_app`` starts the app it passes ``open_engine`` instead of an engine: the chat engine, the
memory panels and everything they import are loaded in a thread after that first frame, then
handed to the main screen. (Tests pass a ready engine and get the whole screen at once.)
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text
from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme
from textual.widgets import Input
from textual.worker import Worker, WorkerCancelled

from tui.app.gc_pacer import GcPacer
from tui.app.messages import report_worker_error
from tui.app.screens.main_keys import WHY_HELP
from tui.app.screens.main_screen import MainScreen
from tui.app.screens.unsaved_quit_screen import QuitChoice, UnsavedQuitScreen
from tui.app.textual_compat import palette_search_group, palette_select, repaint_apart
from tui.app.themes import DEFAULT_THEME, load_themes, theme_dirs
from tui.app.visible_controls import VisibleControls
from tui.chat.config import Config, ConfigError, save_config
from tui.engine.visible import visible_text

if TYPE_CHECKING:
    from tui.app.panels.memory_editor import MemoryEditor
    from tui.chat.chat import ChatEngine
    from tui.chat.events import TriggerEvent
    from tui.engine.engine import MemoryEngine

#: Longest wait for the quit flush before the app closes anyway.
QUIT_FLUSH_TIMEOUT = 15.0
#: The GIL switch interval while the app runs (seconds; Python's default is 0.005). Indexing,
#: chunking and search run in worker threads, and long pure-Python stretches there hold the
#: GIL: each time the UI thread comes back from waiting (every turn of the event loop) it
#: waits up to this long for it, which adds up to visible stalls over a frame's many turns.
GIL_SWITCH_INTERVAL = 0.001


def sync_with_remote(memory: MemoryEngine, remote: str) -> tuple[str, bool]:
    """Sync ``memory`` with ``remote``: one line saying what happened, and whether a file was
    left with conflict marks (or the sync failed)."""
    from tui.engine.git_sync import sync
    from tui.engine.history_records import HistoryError

    try:
        outcome = sync(memory, remote)
    except HistoryError as exc:
        return str(exc), True
    advice = outcome.advice()
    return (advice, True) if advice else (outcome.describe(), False)


class MemdeckCommandPalette(CommandPalette):
    """Textual's palette, except that Enter pressed while the typed text is still being
    searched waits for the search, then acts on it as Textual does (the top hit is highlighted,
    Enter runs it). Textual's own palette drops such an Enter: a fast typist's command ran
    nothing until ↓ was pressed."""

    @on(Input.Submitted)
    def _submitted_after_search(self, event: Input.Submitted) -> None:
        event.stop()
        event.prevent_default()  # instead of Textual's own handler: palette_select, below
        self._submit_when_searched()

    @work(group="memdeck-submit", exclusive=True)
    async def _submit_when_searched(self) -> None:
        for worker in list(self.workers):
            if worker.group == palette_search_group() and worker.is_running:
                try:
                    await worker.wait()
                except WorkerCancelled:
                    return  # the text changed again: a newer search (and Enter) follows
        palette_select(self)


class MemdeckApp(App[int]):
    """The memdeck terminal UI over one :class:`ChatEngine`."""

    TITLE = "memdeck"
    #: The main screen's stylesheet (Textual reads no CSS_PATH of a default screen).
    CSS_PATH = "screens/main_screen.tcss"

    BINDINGS = [
        Binding(
            "ctrl+p",
            "command_palette",
            "palette",
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
            "question_mark",
            "show_help",
            "help",
            id="app.help_question_mark",
            tooltip="Help, outside text fields (F1 is taken by some terminals)",
            show=False,
        ),
        Binding(
            "ctrl+q",
            "quit",
            "quit",
            id="app.quit",
            tooltip="Quit (memory is flushed first; press again to quit without waiting)",
            priority=True,
        ),
    ]

    @dataclass
    class EngineOpened(Message):
        """The chat engine is open (after the first frame): the main screen can use it."""

        engine: ChatEngine

    class QuitFlushFinished(Message):
        """The quit flush finished; the app may exit."""

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
        self._visible_controls = VisibleControls()
        if engine is None and (config is None or open_engine is None):
            raise ValueError("give an engine, or a config and open_engine")
        self._engine = engine
        self.config: Config = engine.config if engine is not None else config  # type: ignore[assignment]
        self._open_engine = open_engine
        self.config_file = config_file
        self.main_screen = MainScreen(
            engine,
            config=self.config,
            config_file=config_file,
            now=now,
            clock=clock,
            load_model=load_model,
            watch=watch,
        )
        #: Set once the quit flush finished (or there was none to wait for).
        self.quit_flush_done = False
        #: What the quit flush did, per session (said on stderr if it wrote nothing).
        self.quit_flush_events: list[TriggerEvent] = []
        self._quitting = False
        self._signals_handled: list[int] = []
        self._switch_interval = sys.getswitchinterval()
        self.gc_pacer = GcPacer(busy=self._busy_for_gc)
        self._released_after: float | None = None
        #: How many quiet spells gave the index's caches back (tests, the memory bench).
        self.memory_releases = 0
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
        return self._engine is not None and self.main_screen.ready

    def get_default_screen(self) -> MainScreen:
        return self.main_screen

    def exit(
        self,
        result: int | None = None,
        return_code: int = 0,
        message: RenderableType | None = None,
    ) -> None:
        """Exit the app, once the main widgets have finished mounting if they are mounting
        now (quitting in that instant would tear down widgets without their children). A
        ``message`` string is printed as text (it may hold a path or an error's words)."""
        if isinstance(message, str):
            message = Text(visible_text(message))
        self.main_screen.call_when_attached(partial(super().exit, result, return_code, message))

    # -- what reaches the terminal --

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then :class:`VisibleControls`: no view emits a control
        character (memory, file names, answers and clients' names are shown as text)."""
        return [*super().get_line_filters(), self._visible_controls]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast, its message and title shown as text and never parsed as markup, whatever
        ``markup`` says: toasts carry file names, clients' names and errors' words."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- start-up --

    def on_mount(self) -> None:
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, GIL_SWITCH_INTERVAL))
        self.set_keymap(dict(self.config.keymap))
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        for warning in self.startup_warnings:
            self.notify(warning, title="memdeck", severity="warning", timeout=8)
        if self._engine is None:
            self.call_after_refresh(self._load_engine)
        else:
            self._sync_at_start()
        self.set_interval(1.0, self._pace_gc)
        self._handle_termination()
        repaint_apart(self.main_screen)

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)
        self.gc_pacer.stop()
        loop = asyncio.get_running_loop()
        for number in self._signals_handled:
            loop.remove_signal_handler(number)

    def _handle_termination(self) -> None:
        """SIGTERM and SIGHUP end the app at once, but unsaved MEMORY.md edits are kept."""
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(number, self._terminated, number)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or no such signal here
            self._signals_handled.append(number)

    def _terminated(self, number: int) -> None:
        message = f"memdeck: {signal.Signals(number).name}: quit"
        editor = self._dirty_editor()
        if editor is not None and self._engine is not None:
            text = editor.text_area.text
            try:  # in the workspace, else the platform's state folder: the path says which
                copy = self._engine.memory.store.save_recovery_copy(text)
            except OSError as exc:  # nowhere to keep them: the edits themselves are printed
                message += (
                    f"; unsaved MEMORY.md edits could not be kept ({exc}); here they are:\n{text}"
                )
            else:
                message += f"; unsaved MEMORY.md edits kept in {copy}"
        self.exit(0, message=message)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseEvent)):
            self.gc_pacer.note_activity()
        await super().on_event(event)

    def _pace_gc(self) -> None:
        """Full garbage collections, and the index's caches given back, wait for a quiet
        moment (see :mod:`tui.app.gc_pacer`)."""
        if self.gc_pacer.active:
            self.gc_pacer.check()
            self._release_when_quiet()
        elif self.ready:
            self.gc_pacer.start()

    def _release_when_quiet(self) -> None:
        """Once a quiet spell: the index's page caches given back, ~7 MB of the idle app's
        memory (each worker thread's reader kept the pages it read once, at start-up most)."""
        pacer = self.gc_pacer
        if pacer.last_activity != self._released_after and pacer.quiet():
            self._released_after = pacer.last_activity
            self._release_memory()

    @work(thread=True, exclusive=True, group="release-memory", exit_on_error=False)
    def _release_memory(self) -> None:
        self.engine.memory.release_memory()
        self.memory_releases += 1

    def _busy_for_gc(self) -> bool:
        screen = self.main_screen
        watcher = screen.watcher
        try:
            return (
                screen.chat_pane.busy
                or bool(screen.header.progress)
                or (watcher is not None and watcher.syncing)
            )
        except NoMatches:  # the screen is being taken down (quitting): not a quiet moment
            return True

    @work(thread=True, exclusive=True, group="engine", exit_on_error=False)
    def _load_engine(self) -> None:
        """After the first frame: import the heavy half and open the engine (in a thread, so
        the screen stays live while numpy, the tokenizer and the panels load)."""
        import tui.app.panels  # noqa: F401
        import tui.app.widgets.chat_pane  # noqa: F401
        import tui.app.widgets.session_list  # noqa: F401
        import tui.app.workspace_watcher  # noqa: F401

        assert self._open_engine is not None
        try:
            engine = self._open_engine()
        except Exception as exc:  # a workspace or index that cannot be opened: say so and exit
            self.call_from_thread(
                self.exit, None, 2, f"memdeck: error: {type(exc).__name__}: {exc}"
            )
            return
        self.post_message(self.EngineOpened(engine))

    @on(EngineOpened)
    def _engine_opened(self, message: EngineOpened) -> None:
        self._engine = message.engine
        # On the screen's own loop: its widgets bind to its reactive there.
        self.main_screen.call_next(self.main_screen.attach, message.engine)
        self._sync_at_start()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    def _sync_at_start(self) -> None:
        if self.config.history.sync_on_start and self.config.history.remote.strip():
            self._sync_with_remote()

    @work(thread=True, exclusive=True, group="sync", exit_on_error=False)
    def _sync_with_remote(self) -> None:
        """``[history] sync_on_start``: pull and push; what happened in a toast (a conflict
        left in a file, or a failure, as a warning that stays a minute)."""
        line, conflict = sync_with_remote(self.engine.memory, self.config.history.remote)
        severity: SeverityLevel = "warning" if conflict else "information"
        self.call_from_thread(
            self.notify, line, title="sync", severity=severity, timeout=60 if conflict else 5
        )

    def on_app_blur(self, event: events.AppBlur) -> None:
        """The terminal lost focus: the background flush runs if it stays lost."""
        workbench = self.main_screen.opened_workbench
        if workbench is not None:
            workbench.focus_lost()

    def on_app_focus(self, event: events.AppFocus) -> None:
        workbench = self.main_screen.opened_workbench
        if workbench is not None:
            workbench.focus_gained()

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

    def action_command_palette(self) -> None:
        """ctrl+p: the command palette (one whose Enter waits for a search in progress)."""
        if self.use_command_palette and not isinstance(self.screen, CommandPalette):
            self.push_screen(MemdeckCommandPalette(id="--command-palette"))

    def action_show_help(self) -> None:
        """F1: help for the focused widget, with its keys."""
        from tui.app.screens.help_screen import HelpScreen
        from tui.engine.score_formula import score_formula

        bindings = [(key, active.binding) for key, active in self.screen.active_bindings.items()]
        engine = self.opened_engine
        formula = score_formula(engine.memory.search_options) if engine is not None else ""
        self.push_screen(HelpScreen(self.focused, bindings, formula))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every action, for the command palette."""
        for command in super().get_system_commands(screen):
            if command.title == "Keys":  # Textual's keys panel: "Help" (F1) lists them too
                continue
            if command.title == "Quit":  # Textual's says "as soon as possible"; ours flushes
                command = SystemCommand(
                    "Quit",
                    "Flush memory (asking about unsaved MEMORY.md edits), then exit (ctrl+q)",
                    self.action_quit,
                )
            yield command
        if not self.ready:
            return
        from tui.app.chat_commands import chat_commands
        from tui.app.panels.memory_panels import TABS
        from tui.app.restore_views import show_forgotten, show_trash

        main = self.main_screen
        yield SystemCommand(
            "New session", "Start a new chat session (ctrl+n)", main.action_new_session
        )
        yield SystemCommand(
            "Rename session", "Give the open session a title", main.action_rename_session
        )
        yield SystemCommand(
            "Delete session",
            "Flush the open session to memory, then move it to the trash",
            main.action_delete_session,
        )
        yield SystemCommand(
            "Deleted sessions",
            "The session trash: restore a deleted session (the session list's last row)",
            partial(show_trash, main.desk),
        )
        yield SystemCommand(
            "Flush memory now",
            "Summarise the open session into today's daily log (ctrl+f)",
            main.action_flush,
        )
        yield SystemCommand(
            "Reindex memory",
            "Rebuild the search index from the Markdown files (ctrl+r)",
            main.action_reindex,
        )
        yield SystemCommand(
            "Reload config",
            "Apply config.toml again without a restart (\\[embeddings] swaps the model)",
            main.action_reload_config,
        )
        yield SystemCommand(
            "Consolidate memory",
            "Fold recent daily logs into MEMORY.md: the model proposes, you review the diff",
            main.action_consolidate,
        )
        yield SystemCommand(
            "Forgotten memories",
            "Forgotten and superseded memories: restore one where it was (f in Daily)",
            partial(show_forgotten, main.desk),
        )
        yield SystemCommand(
            "Why did this surface?",
            f"{WHY_HELP} (ctrl+o)",
            main.action_why,
        )
        yield from chat_commands(main)
        yield SystemCommand(
            "Show workspace path", "Where memory lives on disk (copied)", main.action_show_workspace
        )
        for tab_id, title in TABS.items():
            yield SystemCommand(
                f"Show {title}", f"Open the {title} tab", partial(main.action_show_tab, tab_id)
            )
        yield SystemCommand(
            "Switch chat / memory",
            "Flip between the chat and the memory panels (ctrl+t)",
            main.action_toggle_memory,
        )
        yield SystemCommand("Focus message box", "Type a message", main.action_focus_chat)
        yield SystemCommand(
            "Focus sessions",
            "Pick a session (shown over the chat when the screen is narrow)",
            main.action_focus_sessions,
        )
        yield SystemCommand(
            "Help", "Explain the focused widget and list its keys (F1)", self.action_show_help
        )
        if main.chat_pane.busy:
            yield SystemCommand(
                "Stop answering", "Stop the streaming answer", main.chat_pane.action_stop
            )

    # -- quitting --

    async def action_quit(self) -> None:
        """Ask about unsaved MEMORY.md edits, flush memory (bounded wait, with a notice), then
        exit. A second press during the flush exits now."""
        if self._quitting or not self.ready:
            self.exit(0)
            return
        editor = self._dirty_editor()
        if editor is not None:
            self.push_screen(UnsavedQuitScreen(), partial(self._unsaved_answered, editor))
            return
        self._start_quit()

    def _dirty_editor(self) -> MemoryEditor | None:
        """The MEMORY.md editor when it holds unsaved edits."""
        try:
            editor = self.main_screen.memory_panels.memory_editor
        except NoMatches:
            return None
        return editor if editor.is_dirty else None

    def _unsaved_answered(self, editor: MemoryEditor, choice: QuitChoice | None) -> None:
        if choice == "discard":
            self._start_quit()
        elif choice == "save":
            editor.save_then(lambda saved: self._start_quit() if saved else None)

    def _start_quit(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        self.main_screen.stop_background()
        self.main_screen.header.notice = "flushing memory before quitting… (ctrl+q again: quit now)"
        self.notify("flushing memory before quitting…", title="memdeck", timeout=QUIT_FLUSH_TIMEOUT)
        self._quit_flush()
        self.set_timer(QUIT_FLUSH_TIMEOUT, self._quit_without_waiting)

    @work(thread=True, exclusive=True, group="quit", exit_on_error=False)
    def _quit_flush(self) -> None:
        self.quit_flush_events = self.main_screen.workbench.quit_flush()
        if self.config.history.sync_on_quit and self.config.history.remote.strip():
            sync_with_remote(self.engine.memory, self.config.history.remote)  # within the wait
        self.post_message(self.QuitFlushFinished())

    @on(QuitFlushFinished)
    def _quit_flush_finished(self) -> None:
        self.quit_flush_done = True
        self.exit(0)

    @property
    def quit_flush_pending(self) -> bool:
        """True when the app quit before its quit flush finished (it goes on in its thread)."""
        return self._quitting and not self.quit_flush_done

    def _quit_without_waiting(self) -> None:
        self.exit(0)
