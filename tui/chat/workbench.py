"""Workbench: the application core — what the app does with memory, sessions and turns,
without a UI.

It owns the open session (:attr:`Workbench.active_session`, stored here only; the flush
triggers follow it), the running turn (:meth:`Workbench.run_turn`), the lifecycle lock
(flushes fired by switches, deletions, the manual trigger and quitting run one at a time, in
order), the start-up sync and model load, the focus triggers, and the actions: switch / new /
rename / delete a session, retry an answer or resend an edited message (the later messages are
replaced, kept in the transcript as superseded), switch the chat model, keep the unsent draft,
export a session as Markdown, flush, reindex, reload the config, consolidate. Each action is an
async method whose blocking part runs in a thread (``asyncio.to_thread``), so the app awaits
it from its event loop and the command line (``memdeck ask``, ``flush``, ``sessions
--delete``, ``consolidate``) drives it with ``asyncio.run``.

What happens comes out as ONE typed stream (:meth:`Workbench.subscribe`, see
:data:`~tui.chat.events.WorkbenchEvent`): the sessions opened, each turn's events between
:class:`~tui.chat.events.TurnOpened` and :class:`~tui.chat.events.TurnEnded`, trigger events,
index outcomes and memory changes with their origin. Actions whose caller wants the result
(a CLI command, a dialog) also return it; failures come back as values
(:class:`~tui.chat.events.IndexOutcome`, :class:`ConsolidationOutcome`) or as the documented
exceptions.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from tui.chat.chat import ChatEngine
from tui.chat.client import LLMError
from tui.chat.config import Config, load_config
from tui.chat.consolidation import ConsolidationError, Proposal
from tui.chat.context_window import MessageSize
from tui.chat.drafts import DraftStore
from tui.chat.events import (
    IndexOutcome,
    IndexReason,
    SessionOpened,
    TriggerEvent,
    TurnEnded,
    TurnEnding,
    TurnError,
    TurnOpened,
    WorkbenchEvent,
)
from tui.chat.export import EXPORTS_DIR, export_file_name, session_markdown
from tui.chat.sessions import SessionError, SessionInfo, Transcript, TurnInjection
from tui.engine.fileio import make_private_dir, replace_own_file
from tui.engine.index import SyncReport

T = TypeVar("T")

#: A sync's progress: (stage, done, total).
Progress = Callable[[str, int, int], None]
#: Hears every :data:`~tui.chat.events.WorkbenchEvent`, on the thread where it happened (the
#: event loop's for turns and sessions; a flushing or writing thread's for triggers and memory
#: changes): it must not block.
Listener = Callable[[WorkbenchEvent], None]
#: How a consolidation step ended.
ConsolidationStep = Literal["proposed", "unchanged", "accepted", "rejected", "failed"]

__all__ = [
    "ConfigOutcome",
    "ConsolidationOutcome",
    "ConsolidationStep",
    "IndexOutcome",
    "Listener",
    "ModelChoices",
    "Progress",
    "TurnAlreadyRunning",
    "Workbench",
]


class TurnAlreadyRunning(RuntimeError):
    """A turn was started while another one runs (one turn at a time)."""


@dataclass(frozen=True)
class ConfigOutcome:
    """config.toml was read again and applied; ``report`` is the index rebuild a changed
    ``[embeddings]`` needed (None when it did not change)."""

    config: Config
    report: SyncReport | None = None


@dataclass(frozen=True)
class ModelChoices:
    """The chat model in use, the configured models and the server's (``GET /models``);
    ``problem`` says why the server's list is missing."""

    current: str
    configured: tuple[str, ...]
    served: tuple[str, ...]
    problem: str | None = None


@dataclass(frozen=True)
class ConsolidationOutcome:
    """A consolidation step ended (``what``); ``proposal`` is set when proposed or unchanged,
    ``detail`` says more; ``written`` is whether an accepted proposal changed MEMORY.md."""

    what: ConsolidationStep
    detail: str = ""
    proposal: Proposal | None = None
    written: bool = False


class Workbench:
    """The application core over one :class:`ChatEngine`, for a UI (or a script)."""

    def __init__(self, engine: ChatEngine, *, config_file: Path) -> None:
        self.engine = engine
        self.config_file = config_file
        #: The open session: the one the flush triggers follow (changed by :meth:`open`,
        #: :meth:`end_session` and :meth:`delete` only, each publishing :class:`SessionOpened`).
        self.active_session: str | None = None
        #: Held while a trigger-manager call fires flushes (see :meth:`run_locked`).
        self.lifecycle_lock = threading.Lock()
        # An asyncio event, not a thread's: a thread left waiting for a model load that never
        # started (the app quit first) would keep the loop's executor, and so the exit, waiting.
        self._model_ready = asyncio.Event()
        self._listeners: list[Listener] = []
        self._listeners_lock = threading.Lock()
        self._turn: asyncio.Task[object] | None = None
        #: Unsent drafts of the message box, per session (``.memdeck/drafts.json``).
        self.drafts = DraftStore(engine.memory.workspace)
        engine.triggers.follow_active_session(lambda: self.active_session)
        self._stop_streams = [
            engine.triggers.add_listener(self._publish),
            engine.memory.on_change(self._publish),
        ]

    # -- the stream --

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Hear every event from now on (see :data:`Listener`); returns a remover."""
        with self._listeners_lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._listeners_lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _publish(self, event: WorkbenchEvent) -> None:
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)

    def close(self) -> None:
        """Stop hearing the engine (its triggers and memory changes)."""
        for stop in self._stop_streams:
            stop()
        self._stop_streams = []

    @property
    def config(self) -> Config:
        """The configuration in force (replaced by :meth:`reload_config`)."""
        return self.engine.config

    # -- locking --

    def run_locked(self, call: Callable[[], T]) -> T:
        """Run a trigger-manager call that fires flushes, one at a time (two switches racing
        would flush in the wrong order). Blocking: for a thread."""
        with self.lifecycle_lock:
            return call()

    async def fire(self, call: Callable[[], T]) -> T:
        """:meth:`run_locked` in a thread; the trigger listeners hear its events."""
        return await asyncio.to_thread(self.run_locked, call)

    # -- the model, the message box and the window's focus --

    @property
    def llm_problem(self) -> str | None:
        """None when chat works; else one line telling the user how to configure an LLM."""
        return self.engine.llm_problem

    @property
    def model(self) -> str:
        """The chat model's name ("" when none is configured)."""
        return self.engine.llm.model or ""

    def measure_message(self, text: str) -> MessageSize:
        """``text`` as the next message, against the room the model's context leaves it
        (blocking: for a thread)."""
        return self.engine.measure_message(text)

    def fit_message(self, text: str) -> str:
        """``text``, or its head and tail when the model's context cannot hold it (blocking)."""
        return self.engine.fit_message(text)

    def message_room(self) -> int:
        """Estimated tokens one message may take."""
        return self.engine.message_room()

    def focus_lost(self) -> None:
        """The terminal lost focus: the background flush runs if it stays lost."""
        self.engine.triggers.focus_lost()

    def focus_gained(self) -> None:
        """The terminal has focus again (no background flush)."""
        self.engine.triggers.focus_gained()

    # -- start-up --

    async def load_model(self) -> str | None:
        """Load the embedding model; the error that stopped it, or None."""
        try:
            await asyncio.to_thread(self.engine.memory.load_model)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            self._model_ready.set()
        return None

    def without_model(self) -> None:
        """No model will be loaded: the start-up sync need not wait for one."""
        self._model_ready.set()

    async def prepare_index(self, progress: Progress | None = None) -> AsyncIterator[IndexOutcome]:
        """Sync the index (BM25 at once: ``start``), then, once :meth:`load_model` is done,
        embed what is new (``embedding``, only when there is something to embed)."""
        memory = self.engine.memory
        outcome = await self._sync("start", partial(memory.sync, progress=progress))
        yield outcome
        if outcome.error:
            return
        await self._model_ready.wait()
        if memory.model_loaded and memory.index.pending_embeddings():
            yield await self._sync("embedding", partial(memory.sync, progress=progress))

    async def last_session(self) -> str | None:
        """The most recently updated session, to resume at start-up."""
        infos = await asyncio.to_thread(self.engine.sessions.list)
        return infos[0].id if infos else None

    async def consolidation_due(self) -> bool:
        """True when recent daily logs wait to be folded into MEMORY.md (and a model can), once
        per reason (see :meth:`~tui.chat.consolidation.consolidator.Consolidator.offer`)."""
        if self.engine.llm_problem:
            return False
        return await asyncio.to_thread(self.engine.consolidator.offer)

    async def run_triggers(self, stop: asyncio.Event) -> None:
        """The day-change check at start-up, then the idle / day-change / background timer
        loop until ``stop`` is set."""
        triggers = self.engine.triggers
        await self.fire(triggers.startup)
        await triggers.run(stop)

    # -- sessions --

    def open(self, session_id: str | None) -> str | None:
        """Make ``session_id`` the open session; returns the one left (to :meth:`flush_left`)."""
        left, self.active_session = self.active_session, session_id
        self._publish(SessionOpened(session_id, left))
        return left

    async def flush_left(self, session_id: str | None, left: str | None) -> None:
        """The session-switch trigger: flush ``left`` now that ``session_id`` is open."""
        await self.fire(partial(self.engine.triggers.switch_session, session_id, left=left))

    async def end_session(self) -> list[TriggerEvent]:
        """The user closed the open session: flush it (the session-end trigger) and open none."""
        session_id, self.active_session = self.active_session, None
        if session_id is not None:
            self._publish(SessionOpened(None, session_id))
        return await self.fire(partial(self.engine.triggers.end_session, session_id))

    async def transcript(self, session_id: str) -> Transcript:
        """The transcript of ``session_id`` as stored."""
        return await asyncio.to_thread(self.engine.sessions.load, session_id)

    async def new_session(self) -> SessionInfo:
        """Create an empty session (not opened: :meth:`open` it)."""
        return await asyncio.to_thread(self.engine.sessions.create)

    async def rename(self, session_id: str, title: str) -> SessionInfo:
        """Give ``session_id`` a new title."""
        return await asyncio.to_thread(self.engine.sessions.rename, session_id, title)

    async def delete(self, session_id: str, *, force: bool = False) -> tuple[Path, TriggerEvent]:
        """Flush ``session_id`` and move it to the trash; returns where it went and the flush's
        event. Messages the flush could not log keep the session
        (:class:`~tui.chat.sessions.UnloggedMessagesError`) unless ``force``. The open session
        closes if it was this one (its flush already ran: no switch trigger)."""
        deleted = await self.fire(
            partial(self.engine.triggers.delete_session, session_id, force=force)
        )
        if self.active_session == session_id:
            self.active_session = None
            self._publish(SessionOpened(None, session_id))
        return deleted

    async def last_injection(self, session_id: str) -> TurnInjection | None:
        """What the last turn of ``session_id`` injected, as recorded ("why?")."""
        injections = (await self.transcript(session_id)).injections
        return injections[-1] if injections else None

    # -- the turn --

    @property
    def turn_running(self) -> bool:
        """True while :meth:`run_turn` runs."""
        return self._turn is not None

    async def run_turn(self, text: str, *, replaces: str | None = None) -> TurnEnding:
        """Send ``text`` as the user's next message in the open session and run the turn to its
        end, publishing :class:`TurnOpened`, the engine's events, then :class:`TurnEnded`.
        ``replaces``: a user message of the session whose turn, and everything after it,
        this one replaces (a retry or an edit: the replaced lines stay in the transcript file
        as superseded, and memory they wrote stays). Cancelling it (:meth:`stop_turn`) stops
        the answer; what streamed is kept. Raises :class:`TurnAlreadyRunning` while another
        turn runs, and ``ValueError`` with no session open."""
        session_id = self.active_session
        if session_id is None:
            raise ValueError("no session is open")
        if self._turn is not None:
            raise TurnAlreadyRunning("a turn is running")
        self._turn = asyncio.current_task()
        ending: TurnEnding = "completed"
        self._publish(TurnOpened(session_id, text, replaces))
        try:
            async for event in self.engine.run_turn(session_id, text, replaces=replaces):
                self._publish(event)
        except asyncio.CancelledError:
            ending = "stopped"
            raise
        except SessionError as exc:
            ending = "failed"
            self._publish(TurnError("session", str(exc)))
        except Exception as exc:  # a bug: said where the answer would be, the app stays alive
            ending = "failed"
            self._publish(TurnError("internal", f"{type(exc).__name__}: {exc}"))
        finally:
            self._turn = None
            self._publish(TurnEnded(session_id, text, ending))
        return ending

    def stop_turn(self) -> None:
        """Stop the running turn, if any (see :meth:`run_turn`)."""
        if self._turn is not None:
            self._turn.cancel()

    async def retry(self, message_id: str | None = None) -> TurnEnding:
        """Ask again: send user message ``message_id`` (default: the open session's last one)
        as it was, replacing its answer and everything after it (see :meth:`run_turn`); also
        after an error. ``ValueError`` when there is no message to send again."""
        session_id = self.active_session
        if session_id is None:
            raise ValueError("no session is open")
        transcript = await self.transcript(session_id)
        prompts = [m for m in transcript.messages if m.role == "user" and m.is_conversation]
        chosen = [m for m in prompts if message_id in (None, m.id)]
        if not chosen:
            raise ValueError("there is no message to send again")
        return await self.run_turn(chosen[-1].content, replaces=chosen[-1].id)

    async def resend(self, message_id: str, text: str) -> TurnEnding:
        """Edit and resend: ``text`` replaces user message ``message_id``, its answer and
        everything after it (see :meth:`run_turn`)."""
        return await self.run_turn(text, replaces=message_id)

    # -- the chat model, drafts and exports --

    async def models(self) -> ModelChoices:
        """The models the chat can switch to: the configured ones and the server's."""
        llm = self.engine.llm
        configured = tuple(
            dict.fromkeys(m for m in (self.config.llm.effective_model, llm.model) if m)
        )
        try:
            served = tuple(await asyncio.to_thread(llm.list_models))
        except LLMError as exc:
            return ModelChoices(self.model, configured, (), exc.message)
        return ModelChoices(self.model, configured, served)

    def use_model(self, model: str) -> None:
        """Send the next turns to ``model`` (the transcript records the change at the next
        turn; a config reload brings the configured model back)."""
        self.engine.llm.use_model(model)

    def kept_draft(self, session_id: str | None) -> str:
        """The unsent draft kept for ``session_id`` ("" for none). Blocking."""
        return self.drafts.get(session_id)

    def keep_draft(self, session_id: str | None, text: str) -> None:
        """Keep the unsent ``text`` of ``session_id`` (blank: drop it). Blocking."""
        self.drafts.keep(session_id, text)

    async def export(self, session_id: str) -> Path:
        """Write ``session_id`` as Markdown to the workspace's ``.memdeck/exports/``; the file."""
        workspace = self.engine.memory.workspace
        folder = workspace.state_dir / EXPORTS_DIR
        path = folder / export_file_name(session_id)

        def write() -> None:
            text = session_markdown(self.engine.sessions.load(session_id))
            make_private_dir(folder)
            replace_own_file(path, text.encode("utf-8"))

        await asyncio.to_thread(write)
        return path

    # -- memory --

    async def flush(
        self, session_ids: Sequence[str] | None = None, *, reason: str = "flush now"
    ) -> list[TriggerEvent]:
        """The manual trigger: ``session_ids`` (default: the open session) to today's daily
        log now; one event per session (one ``nothing_new`` event when there is none)."""
        ids = self.active_session if session_ids is None else list(session_ids)
        return await self.fire(partial(self.engine.triggers.fire, "manual", ids, reason))

    async def sessions_to_flush(self) -> list[str]:
        """The sessions holding messages not yet in a daily log."""
        return await asyncio.to_thread(self.engine.flusher.sessions_with_unlogged)

    def quit_flush(self) -> list[TriggerEvent]:
        """The quit trigger (blocking: the app runs it in a thread it may leave behind)."""
        return self.run_locked(self.engine.triggers.app_quit)

    async def reindex(self, progress: Progress | None = None) -> IndexOutcome:
        """Rebuild the index from the Markdown files (the outcome is published too)."""
        return await self._sync("reindex", partial(self.engine.memory.reindex, progress=progress))

    async def index_stats(self) -> dict[str, object]:
        """Files, chunks, index size (what the stats panel and the header show)."""
        return await asyncio.to_thread(self.engine.memory.stats)

    async def reload_config(self) -> ConfigOutcome | IndexOutcome:
        """Read config.toml again and apply it without a restart; a changed ``[embeddings]``
        swaps the embedder (rebuilding the index when the model changed). An
        :class:`IndexOutcome` with the error when it could not be applied (published too)."""

        def reload() -> ConfigOutcome:
            config = load_config(self.config_file)
            return ConfigOutcome(config, self.engine.reconfigure(config))

        try:
            return await asyncio.to_thread(reload)
        except Exception as exc:
            failed = IndexOutcome("config reload", error=str(exc))
            self._publish(failed)
            return failed

    async def propose_consolidation(self, days: int | None = None) -> ConsolidationOutcome:
        """Ask the summary model for an updated MEMORY.md from recent daily logs (the last
        ``days`` days; default: since the last consolidation)."""
        try:
            proposal = await asyncio.to_thread(self.engine.consolidator.propose, days=days)
        except ConsolidationError as exc:
            return ConsolidationOutcome("failed", exc.message)
        if proposal.unchanged:
            return ConsolidationOutcome(
                "unchanged", "MEMORY.md is already consolidated", proposal=proposal
            )
        return ConsolidationOutcome("proposed", proposal=proposal)

    async def decide_consolidation(
        self, proposal: Proposal, accept: bool, *, reason: str = "rejected in the app"
    ) -> ConsolidationOutcome:
        """Write an accepted proposal to MEMORY.md, or record its rejection (and ``reason``)."""
        consolidator = self.engine.consolidator
        if not accept:
            await asyncio.to_thread(consolidator.reject, proposal, reason)
            return ConsolidationOutcome("rejected")
        try:
            result = await asyncio.to_thread(consolidator.accept, proposal)
        except ConsolidationError as exc:
            return ConsolidationOutcome("failed", exc.message)
        return ConsolidationOutcome("accepted", result.stats.summary, written=result.written)

    async def _sync(self, reason: IndexReason, call: Callable[[], SyncReport]) -> IndexOutcome:
        try:
            outcome = IndexOutcome(reason, await asyncio.to_thread(call))
        except Exception as exc:
            outcome = IndexOutcome(reason, error=str(exc))
        self._publish(outcome)
        return outcome
