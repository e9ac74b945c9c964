"""The desk: sessions | chat | memory panels over the workbench, and the flows between them.

It owns the session flow (resume, switch, new, rename, delete: each awaits the workbench in a
worker and shows the result), the questions to the user (may the model forget more?), the
consolidation's review, the conversation's wiring (a message the chat pane sends runs as the
workbench's turn) and the memory actions (flush, reindex, reload the config, why?, loading the
embedding model). Everything the workbench publishes arrives here as a
:class:`~tui.app.messages.WorkbenchMessage` (the screen's one listener posts it): turn and
session events go on to the chat pane, memory changes to the memory panels, index and trigger
outcomes become log lines, toasts and the header's state. That state is the desk's reactives
(:data:`HEADER_STATE`), which the screen shows in its header; the screen gives the desk the
workbench (:meth:`Desk.attach`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.containers import Horizontal
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.worker import Worker

from tui.app.messages import MemoryChanged, OpenSession, WorkbenchMessage, report_worker_error
from tui.app.progress_text import ProgressClock
from tui.app.restore_views import show_forgotten, show_trash
from tui.chat.events import (
    ChatEvent,
    FlushStarted,
    IndexOutcome,
    InjectionBuilt,
    SessionOpened,
    TriggerEvent,
    TurnEnded,
    TurnOpened,
)

if TYPE_CHECKING:
    from tui.app.panels.memory_panels import MemoryPanels
    from tui.app.widgets.chat_pane import ChatPane
    from tui.app.widgets.session_list import SessionList
    from tui.chat.config import Config
    from tui.chat.consolidation import Proposal
    from tui.chat.workbench import ConsolidationOutcome, Workbench

#: Index progress messages are posted at most this often (seconds).
PROGRESS_INTERVAL = 0.1

#: The desk's reactives the header shows (the :class:`~tui.app.widgets.app_header.AppHeader`
#: attributes of the same names).
HEADER_STATE = ("session_title", "model", "model_state", "chunks", "progress", "flushing")


class Desk(Horizontal):
    """Sessions, chat and memory panels (mounted by :meth:`attach`, once the engine is open)."""

    @dataclass
    class IndexProgress(Message):
        """The index is syncing: ``done`` of ``total`` in ``stage``."""

        stage: str
        done: int
        total: int

    @dataclass
    class ConfigReloaded(Message):
        """config.toml was read again and applied."""

        config: Config

    class MemoryWanted(Message):
        """What the desk just showed is in the memory panels: they should be in view."""

    # State, not looks: the desk draws none of it (the header does, see HEADER_STATE). A change
    # that repainted the desk redrew every panel: 12 ms at each indexing progress line.
    #: The open session's title ("…" while its transcript loads; "" with none open).
    session_title: reactive[str] = reactive("", init=False, repaint=False)
    #: The chat model's name ("" when none is configured).
    model: reactive[str] = reactive("", init=False, repaint=False)
    #: The embedding model: ``loading``, ``loaded``, ``failed`` or ``none``.
    model_state: reactive[str] = reactive("loading", init=False, repaint=False)
    #: Chunks in the index (None until counted).
    chunks: reactive[int | None] = reactive(None, init=False, repaint=False)
    #: ``embedding 120/400 units`` (or ``reindexing…``) while the index changes, else empty.
    progress: reactive[str] = reactive("", init=False, repaint=False)
    #: Flushes running now.
    flushing: reactive[int] = reactive(0, init=False, repaint=False)

    def __init__(self, *children: Widget, id: str | None = None) -> None:
        super().__init__(*children, id=id)
        self._workbench: Workbench | None = None
        self._progress_clock = ProgressClock()
        self._list_when_turn_runs = False

    @property
    def workbench(self) -> Workbench:
        """The application core (once :meth:`attach` ran)."""
        if self._workbench is None:
            raise RuntimeError("the chat engine is still opening")
        return self._workbench

    @property
    def active_session(self) -> str | None:
        """The open session (the workbench's)."""
        return self._workbench.active_session if self._workbench is not None else None

    @staticmethod
    def widgets(
        workbench: Workbench, *, config_file: Path, now: date | None, clock: Callable[[], datetime]
    ) -> list[Widget]:
        """The desk's sessions, chat and memory panels over ``workbench``."""
        from tui.app.panels.memory_panels import MemoryPanels
        from tui.app.widgets.chat_pane import ChatPane
        from tui.app.widgets.session_list import SessionList

        engine = workbench.engine
        return [
            SessionList(engine.sessions, id="session-list"),
            ChatPane(
                workbench,
                llm_problem=engine.llm_problem,
                model=engine.llm.model or "",
                config=engine.config,
                config_file=config_file,
                id="chat-pane",
            ),
            MemoryPanels(
                engine.memory,
                now=now,
                clock=clock,
                follow_changes=False,  # they come on the workbench's stream
                id="memory-panels",
            ),
        ]

    def attach(self, workbench: Workbench) -> None:
        """Work over ``workbench`` (its widgets are mounted)."""
        self._workbench = workbench
        # Every memory change ends in the panels' index signal: the header count follows it.
        self.memory_panels.index_signal.subscribe(self, lambda _paths: self._read_index_stats())

    @property
    def chat_pane(self) -> ChatPane:
        return self.query_one("#chat-pane", Widget)  # type: ignore[return-value]

    @property
    def session_list(self) -> SessionList:
        return self.query_one("#session-list", Widget)  # type: ignore[return-value]

    @property
    def memory_panels(self) -> MemoryPanels:
        return self.query_one("#memory-panels", Widget)  # type: ignore[return-value]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    def still_answering(self, advice: str = "still answering — Escape stops it first") -> bool:
        """True (and said, with ``advice``) while a turn runs: it must end before the open
        session, or what it stands on, may change."""
        return self.chat_pane.still_answering(advice)

    @on(WorkbenchMessage)
    def _workbench_event(self, message: WorkbenchMessage) -> None:
        """What the workbench published (the screen's one listener posted it here)."""
        event = message.event
        if isinstance(event, SessionOpened):
            self._session_opened(event.session_id)
        elif isinstance(event, ChatEvent | TurnOpened | TurnEnded):
            self.chat_pane.post_message(message)
            if isinstance(event, InjectionBuilt):  # the turn's messages are on screen
                self._list_new_session()
        elif isinstance(event, IndexOutcome):
            self._index_synced(event)
        elif isinstance(event, FlushStarted | TriggerEvent):
            self._trigger_notice(event)
        else:  # a memory change, with its origin
            self.memory_panels.post_message(MemoryChanged.of(event))

    # -- questions for the user --

    async def confirm_forget(self, memories: list[str], already: int) -> bool:
        """Ask whether the model may forget ``memories`` (past the per-turn limit); Keep is the default."""
        from tui.app.screens.confirm_screen import ConfirmScreen

        count = len(memories)
        listed = "\n".join(f"• {line}" for line in memories)
        question = (
            f"The assistant wants to forget {count} more memor{'y' if count == 1 else 'ies'} "
            f"({already} forgotten already this turn):\n\n{listed}\n\n"
            "Every forget can be undone with `memdeck forgotten --restore`."
        )
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def answered(yes: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(yes))

        self.app.push_screen(ConfirmScreen(question, confirm="Forget", cancel="Keep"), answered)
        return await answer

    # -- consolidation --

    def consolidate(self) -> None:
        """Ask the model for an updated MEMORY.md from recent daily logs, then review it."""
        self.notify("asking the model for a consolidated MEMORY.md…", title="consolidate")
        self._propose_consolidation()

    @work(exclusive=True, group="consolidate", exit_on_error=False)
    async def _propose_consolidation(self) -> None:
        from tui.app.screens.consolidation_screen import ConsolidationScreen

        outcome = await self.workbench.propose_consolidation()
        proposal = outcome.proposal
        if proposal is None:
            self._consolidation_finished(outcome)
            return

        def decided(choice: str | None) -> None:
            if choice is not None:
                self._decide_consolidation(proposal, choice == "accept")

        self.app.push_screen(ConsolidationScreen(proposal), decided)

    @work(exclusive=True, group="consolidate", exit_on_error=False)
    async def _decide_consolidation(self, proposal: Proposal, accept: bool) -> None:
        self._consolidation_finished(await self.workbench.decide_consolidation(proposal, accept))

    def _consolidation_finished(self, outcome: ConsolidationOutcome) -> None:
        panels = self.memory_panels
        if outcome.what == "unchanged":
            self.notify("MEMORY.md is already consolidated: no changes", title="consolidate")
        elif outcome.what == "accepted":
            panels.log_event(f"consolidation accepted: {outcome.detail}")
            self.notify(f"MEMORY.md updated: {outcome.detail}", title="consolidate")
        elif outcome.what == "rejected":
            panels.log_event("consolidation rejected")
            self.notify("nothing changed", title="consolidation rejected")
        else:
            panels.log_event(f"consolidation failed: {outcome.detail}")
            self.notify(outcome.detail, title="consolidation", severity="warning", timeout=10)

    # -- sessions --

    @work(exclusive=True, group="initial-session", exit_on_error=False)
    async def open_initial_session(self) -> None:
        """Resume the most recently updated session, if any; say if a consolidation is due."""
        last = await self.workbench.last_session()
        if last is not None:
            self.switch_to(last)
        if await self.workbench.consolidation_due():
            self.notify(
                "recent daily logs can be folded into MEMORY.md: ctrl+p → Consolidate memory",
                title="consolidation due",
                timeout=10,
            )

    def _on_session_list_chosen(self, message: SessionList.Chosen) -> None:
        self.switch_to(message.session_id)  # (the screen hears it next, to close an overlay)

    def _on_open_session(self, message: OpenSession) -> None:
        """A memory's origin was chosen: open the session that wrote it, if it is here."""
        if any(info.id == message.session_id for info in self.session_list.infos):
            self.switch_to(message.session_id)
        else:
            self.notify(f"session {message.session_id} is not in this workspace", markup=False)

    def switch_to(self, session_id: str | None) -> None:
        """Open ``session_id``: show its transcript and flush the session left (switch trigger)."""
        if self.still_answering("still answering — Escape stops it, then switch"):
            return
        if session_id == self.active_session:
            self.chat_pane.focus_input()
            return
        self._open(session_id)
        if session_id is None:
            self.call_next(self.chat_pane.show_transcript, None)
        else:
            self._load_transcript(session_id)

    def _open(self, session_id: str | None) -> None:
        """Make ``session_id`` the open session and flush the one left (session switch)."""
        self.session_title = "…" if session_id else ""
        self._flush_left(session_id, self.workbench.open(session_id))

    @work(group="lifecycle", exit_on_error=False)
    async def _flush_left(self, session_id: str | None, left: str | None) -> None:
        await self.workbench.flush_left(session_id, left)

    def _session_opened(self, session_id: str | None) -> None:
        """The widgets follow the open session; the Inject tab comes forward again while
        typing (a tab chosen in the last session no longer holds) and shows this session's
        draft, not the why? of the last one."""
        self.chat_pane.session_id = session_id
        self.session_list.active_id = session_id
        self.memory_panels.forget_chosen_tab()
        self.memory_panels.show_injection(None)  # a why? belongs to its session

    @work(exclusive=True, group="transcript", exit_on_error=False)
    async def _load_transcript(self, session_id: str) -> None:
        transcript = await self.workbench.transcript(session_id)
        if session_id != self.active_session:
            return  # the user switched again meanwhile
        self.session_title = transcript.display_title
        await self.chat_pane.show_transcript(transcript)

    def _on_session_list_loaded(self, message: SessionList.Loaded) -> None:
        for info in message.sessions:
            if info.id == self.active_session:
                self.session_title = info.title

    @work(group="sessions", exit_on_error=False)
    async def new_session(self, first_message: str | None = None) -> None:
        """Create a session and open it; ``first_message`` is then sent there."""
        try:
            info = await self.workbench.new_session()
        except BaseException:
            if first_message is not None:
                self.chat_pane.busy = False  # the message waiting for it is not sent
            raise
        if first_message is None:
            self.session_list.reload()
            # an answer started meanwhile: the new session waits
            if self.still_answering("still answering — Escape stops it, then switch"):
                return
            await self.chat_pane.show_transcript(None)  # a new session is empty
        self._open(info.id)
        self.session_title = info.title
        if first_message is not None:
            self._list_when_turn_runs = True  # (its redraw in their frame made it stall)
            self._run_turn(first_message)

    def _list_new_session(self) -> None:  # once its turn's messages are shown, or it is over
        if self._list_when_turn_runs:
            self._list_when_turn_runs = False
            self.session_list.reload()

    def _title_of(self, session_id: str) -> str:
        for info in self.session_list.infos:
            if info.id == session_id:
                return info.title
        return session_id

    def rename_session(self, session_id: str | None = None) -> None:
        """Ask for a new title of ``session_id`` (default: the open session)."""
        from tui.app.screens.rename_screen import RenameScreen

        target = session_id or self.active_session
        if target is None:
            self.notify("no session is open", severity="warning")
            return

        def renamed(title: str | None) -> None:
            if title:
                self._rename(target, title)

        self.app.push_screen(RenameScreen(self._title_of(target)), renamed)

    def _on_session_list_rename_requested(self, message: SessionList.RenameRequested) -> None:
        self.rename_session(message.session_id)

    @work(group="sessions", exit_on_error=False)
    async def _rename(self, session_id: str, title: str) -> None:
        info = await self.workbench.rename(session_id, title)
        if info.id == self.active_session:
            self.session_title = info.title
        self.session_list.reload()

    def delete_session(self, session_id: str | None = None) -> None:
        """Ask, then flush ``session_id`` (default: the open one) and move it to the trash."""
        from tui.app.screens.confirm_screen import ConfirmScreen

        target = session_id or self.active_session
        if target is None:
            self.notify("no session is open", severity="warning")
            return
        if target == self.active_session and self.still_answering():
            return
        question = (
            f"Delete “{self._title_of(target)}”?\n\n"
            "Its new messages are summarised into memory first; the transcript moves to "
            "sessions/.trash/ (nothing is destroyed)."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(target)

        self.app.push_screen(ConfirmScreen(question, confirm="Delete"), answered)

    def _on_session_list_delete_requested(self, message: SessionList.DeleteRequested) -> None:
        self.delete_session(message.session_id)

    def _on_session_list_trash_requested(self) -> None:
        show_trash(self)  # (the palette opens it too)

    def _on_daily_tree_forgotten_wanted(self) -> None:
        show_forgotten(self)

    @work(group="lifecycle", exit_on_error=False)
    async def _delete(self, session_id: str) -> None:
        was_open = session_id == self.active_session
        trash, _event = await self.workbench.delete(session_id)
        self.notify(f"moved to {trash.name} in sessions/.trash", title="deleted")
        if was_open and self.active_session is None:  # closed: its flush already ran
            self.session_title = ""
            await self.chat_pane.show_transcript(None)
        self.session_list.reload()

    # -- the conversation --

    def _on_chat_pane_send_requested(self, message: ChatPane.SendRequested) -> None:
        """The user sent a message: in the open session, or in a new one (opened first)."""
        if self.active_session is None:
            self.new_session(message.text)
        else:
            self._run_turn(message.text, message.replaces)

    @work(group="turn", exclusive=True, exit_on_error=False)
    async def _run_turn(self, text: str, replaces: str | None = None) -> None:
        """The workbench runs the turn; its events reach the chat pane by the stream."""
        try:
            await self.workbench.run_turn(text, replaces=replaces)
        except Exception:  # before the turn opened (none open, one running): nothing to wait for
            self.chat_pane.busy = False
            raise
        finally:
            self._list_new_session()

    def _on_chat_pane_stop_requested(self) -> None:
        self.workbench.stop_turn()

    def _on_chat_pane_turn_finished(self, message: ChatPane.TurnFinished) -> None:
        self.session_list.reload()
        self.memory_panels.follow_conversation(message.user_text)

    # -- the index, the embedding model and the triggers --

    def progress_reporter(self) -> Callable[[str, int, int], None]:
        """A progress callback for a sync on any thread (posts :class:`IndexProgress`, at most
        every :data:`PROGRESS_INTERVAL` seconds, and always the last step)."""
        last = 0.0

        def report(stage: str, done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if done >= total or now - last >= PROGRESS_INTERVAL:
                last = now
                self.post_message(self.IndexProgress(stage, done, total))

        return report

    @on(IndexProgress)
    def _index_progress(self, message: IndexProgress) -> None:
        self.progress = self._progress_clock.describe(message.stage, message.done, message.total)
        self.memory_panels.set_progress(self.progress)

    def _index_synced(self, message: IndexOutcome) -> None:
        """A sync, reindex or config reload ended: say so, and refresh what shows the index."""
        from tui.app.panels.memory_panels import describe_sync

        self.progress = ""
        panels = self.memory_panels
        panels.set_progress("")
        if message.error:
            panels.log_event(f"index {message.reason} failed: {message.error}")
            self.notify(message.error, title="index", severity="error")
            self._read_index_stats()
            return
        panels.log_event(f"index {message.reason}: {describe_sync(message.report)}")
        if message.reason == "reindex":
            self.notify(f"reindexed: {describe_sync(message.report)}", title="index")
        panels.index_changed([])

    @work(exclusive=True, group="index-stats", exit_on_error=False)
    async def _read_index_stats(self) -> None:
        chunks = (await self.workbench.index_stats()).get("chunks")
        self.chunks = int(chunks) if isinstance(chunks, int | float) else None

    def _show_model_state(self, state: str) -> None:
        self.model_state = state
        self.memory_panels.set_model_state(state)

    def load_model(self) -> None:
        """Load the embedding model in the background (search is BM25-only meanwhile)."""
        self._show_model_state("loading")
        self._load_model()

    @work(exclusive=True, group="model", exit_on_error=False)
    async def _load_model(self) -> None:
        error = await self.workbench.load_model()
        self._show_model_state("failed" if error else "loaded")
        if error:
            self.notify(
                f"embedding model failed to load; search stays BM25-only ({error})",
                severity="warning",
            )

    def _trigger_notice(self, event: FlushStarted | TriggerEvent) -> None:
        panels = self.memory_panels
        if isinstance(event, FlushStarted):
            self.flushing += 1
            panels.log_event(f"{event.trigger}: flushing {event.session_id} ({event.reason})")
            return
        if event.session_id is not None:
            self.flushing = max(0, self.flushing - 1)
        outcome = event.outcome
        panels.record_flush(event.trigger, outcome.described)
        for line in outcome.changed:
            panels.log_event(f"changed? {line}")
        if outcome.status == "flushed":  # the engine published what it wrote
            self.session_list.reload()
            self.notify(outcome.described, title=f"memory ({event.trigger})")
        elif outcome.status in ("skipped", "failed"):
            self.notify(
                outcome.summary, title=f"memory not written ({event.trigger})", severity="warning"
            )

    # -- memory actions --

    @work(group="lifecycle", exit_on_error=False)
    async def flush(self) -> None:
        """Summarise the open session into today's daily log now (the manual trigger)."""
        await self.workbench.flush()

    def reindex(self) -> None:
        """Rebuild the index from the Markdown files."""
        self.progress = "reindexing…"
        self._reindex()

    @work(exclusive=True, group="reindex", exit_on_error=False)
    async def _reindex(self) -> None:
        await self.workbench.reindex(self.progress_reporter())  # the outcome comes on the stream

    def reload_config(self) -> None:
        """Re-read config.toml and apply it (not while a turn runs)."""
        if self.still_answering("reload the config once the answer is done"):
            return
        self.progress = "reloading config…"
        self._reload_config()

    @work(exclusive=True, group="reindex", exit_on_error=False)
    async def _reload_config(self) -> None:
        from tui.app.panels.memory_panels import describe_sync

        outcome = await self.workbench.reload_config()
        if isinstance(outcome, IndexOutcome):
            return  # it failed: the outcome arrives on the stream
        config = outcome.config
        self.post_message(self.ConfigReloaded(config))
        self.model = config.effective_model or ""
        self.chat_pane.llm_problem = self.workbench.llm_problem
        self.chat_pane.model = self.workbench.model
        self.progress = ""
        note = "config reloaded (keys and theme apply at the next start)"
        if outcome.report is not None:
            memory = self.workbench.engine.memory
            note += f"; embeddings: {memory.embedder.spec.name}, {describe_sync(outcome.report)}"
            for warning in outcome.report.warnings:
                self.notify(warning, title="embeddings", severity="warning")
            self._show_model_state("loaded" if memory.model_loaded else "none")
        self.memory_panels.log_event(note)
        self.notify(note, title="config")
        self.memory_panels.index_changed([])

    def why(self) -> None:
        """What the last turn injected, as recorded in its transcript, with each memory's
        score breakdown; with no turn yet, search the draft."""
        if self.active_session is not None and self.chat_pane.last_user_text:
            self._find_last_injection(self.active_session)
            return
        self._why_by_search()

    def _why_by_search(self) -> None:
        text = self.chat_pane.last_user_text or self.chat_pane.draft
        if not text:
            self.notify("send a message first", severity="warning")
            return
        self.post_message(self.MemoryWanted())
        self.memory_panels.explain(text)

    @work(exclusive=True, group="why", exit_on_error=False)
    async def _find_last_injection(self, session_id: str) -> None:
        turn = await self.workbench.last_injection(session_id)
        if turn is None:  # a turn from before injections were recorded
            self._why_by_search()
            return
        self.post_message(self.MemoryWanted())
        panels = self.memory_panels
        panels.show_injection(turn)
        panels.show_tab("inject", focus=True)
