"""TriggerManager: every daily-log flush trigger.

Triggers: session switch (flushes the previous session), session end, session delete, app
quit, background (terminal focus lost, debounced), day change (a timer while running, and at
start-up against the last active date persisted in ``.memdeck/state.json``), idle (no message
for ``idle_minutes``), pre-compaction and manual. Every firing reaches the listeners as a
:class:`~tui.chat.events.FlushStarted` then a :class:`~tui.chat.events.TriggerEvent` with its
reason and outcome; a trigger with nothing new to log is a ``nothing_new`` no-op.

Methods that flush block (a network request): call them from a thread worker or the CLI, or
``await`` :meth:`TriggerManager.afire` / :meth:`TriggerManager.run` from asyncio. The cheap
notifications (:meth:`~TriggerManager.note_activity`, :meth:`~TriggerManager.focus_lost`,
:meth:`~TriggerManager.focus_gained`) never block. Listeners run on the thread that fired; a
Textual app should ``post_message`` from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta
from pathlib import Path

from .config import TriggerSettings
from .events import FlushOutcome, FlushStarted, TriggerEvent, TriggerListenerEvent, TriggerName
from .flush import DailyLogFlusher
from .state import WorkspaceState, local_now

Listener = Callable[[TriggerListenerEvent], None]


class TriggerManager:
    """Decides when to flush which session, runs the flush, tells the listeners."""

    def __init__(
        self,
        flusher: DailyLogFlusher,
        *,
        state: WorkspaceState | None = None,
        settings: TriggerSettings | None = None,
        clock: Callable[[], datetime] = local_now,
    ) -> None:
        self.flusher = flusher
        self.state = state or WorkspaceState(flusher.memory.workspace)
        self.configure(settings or TriggerSettings())
        self.clock = clock
        self._active_session_id: str | None = None
        self._active_source: Callable[[], str | None] | None = None
        self.last_events: dict[str, TriggerEvent] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._last_activity: datetime | None = None
        self._idle_fired = False
        self._blur_since: datetime | None = None
        self._active_day: date | None = None
        self._touched: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def configure(self, settings: TriggerSettings) -> None:
        """Apply ``[triggers]``: the idle time, the background flush and the timer's tick."""
        self.idle = timedelta(minutes=settings.idle_minutes)
        self.flush_on_blur = settings.flush_on_blur
        self.blur_debounce = timedelta(seconds=settings.blur_debounce_seconds)
        self.tick_seconds = settings.tick_seconds

    # -- the active session --

    def follow_active_session(self, source: Callable[[], str | None]) -> None:
        """Read the active session from ``source`` (the UI that owns it, callable from any
        thread) instead of keeping a copy; the lifecycle hooks then leave it to that owner."""
        self._active_source = source

    @property
    def active_session_id(self) -> str | None:
        """The session flushed by default (the owner's, once :meth:`follow_active_session`)."""
        if self._active_source is not None:
            return self._active_source()
        return self._active_session_id

    @active_session_id.setter
    def active_session_id(self, session_id: str | None) -> None:
        if self._active_source is None:  # else the owner decides
            self._active_session_id = session_id

    # -- listeners --

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every :class:`FlushStarted` and :class:`TriggerEvent`; returns
        a function that removes it."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    def _emit(self, event: TriggerListenerEvent) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            with contextlib.suppress(Exception):  # a broken listener must not stop a flush
                listener(event)

    # -- firing --

    def fire(
        self,
        trigger: TriggerName,
        session_ids: str | Iterable[str] | None = None,
        reason: str = "",
    ) -> list[TriggerEvent]:
        """Flush the given sessions (default: the active one) for ``trigger``. Blocking.

        With no session to flush, one ``nothing_new`` event still reports that it fired.
        """
        if session_ids is None:
            ids = [self.active_session_id] if self.active_session_id else []
        elif isinstance(session_ids, str):
            ids = [session_ids]
        else:
            ids = list(dict.fromkeys(session_ids))
        reason = reason or trigger.replace("_", " ")
        events: list[TriggerEvent] = []
        if not ids:
            event = TriggerEvent(
                trigger,
                reason,
                None,
                FlushOutcome("nothing_new", detail="no session to flush"),
                self.clock(),
            )
            self._finish(event)
            return [event]
        for session_id in ids:
            self._emit(FlushStarted(trigger, reason, session_id))
            outcome = self.flusher.flush_session(session_id, trigger=trigger, reason=reason)
            event = TriggerEvent(trigger, reason, session_id, outcome, self.clock())
            self._finish(event)
            events.append(event)
        return events

    async def afire(
        self,
        trigger: TriggerName,
        session_ids: str | Iterable[str] | None = None,
        reason: str = "",
    ) -> list[TriggerEvent]:
        """:meth:`fire` from asyncio (runs in a worker thread)."""
        if session_ids is not None and not isinstance(session_ids, str):
            session_ids = list(session_ids)
        return await asyncio.to_thread(self.fire, trigger, session_ids, reason)

    def _finish(self, event: TriggerEvent) -> None:
        self.last_events[event.trigger] = event
        with contextlib.suppress(OSError):
            self.state.record(event)
        self._emit(event)

    # -- lifecycle hooks --

    def switch_session(
        self, session_id: str | None, *, left: str | None = None
    ) -> list[TriggerEvent]:
        """Make ``session_id`` the active session; flush the previous one (session switch).

        ``left``: the session left, when the owner of the active session already switched."""
        previous = left or self.active_session_id
        self.active_session_id = session_id
        if session_id:
            self.note_activity(session_id)
        if previous and previous != session_id:
            return self.fire(
                "session_switch", previous, f"switched to {session_id or 'no session'}"
            )
        return []

    def end_session(self, session_id: str | None = None) -> list[TriggerEvent]:
        """The user closed a session (default: the active one): flush it."""
        session_id = session_id or self.active_session_id
        if session_id == self.active_session_id:
            self.active_session_id = None
        return self.fire("session_end", [session_id] if session_id else [], "session closed")

    def delete_session(self, session_id: str, *, force: bool = False) -> tuple[Path, TriggerEvent]:
        """Flush a session, then move its transcript to the trash. Returns the trash path and
        the flush's event. When the flush leaves messages unlogged, raises
        :class:`~tui.chat.sessions.UnloggedMessagesError` and keeps the session, unless
        ``force`` (see :meth:`~tui.chat.sessions.SessionStore.delete`)."""
        events: list[TriggerEvent] = []

        def flush(sid: str) -> FlushOutcome:
            events.extend(self.fire("session_delete", sid, "session deleted"))
            return events[-1].outcome

        trash_path, _ = self.flusher.sessions.delete(session_id, flush=flush, force=force)
        if self.active_session_id == session_id:
            self.active_session_id = None
        self._touched.discard(session_id)
        return trash_path, events[-1]

    def app_quit(self) -> list[TriggerEvent]:
        """The app is quitting: flush the active session and every session used in this run."""
        ids = [self.active_session_id] if self.active_session_id else []
        ids += sorted(s for s in self._touched if self.flusher.sessions.exists(s))
        return self.fire("app_quit", ids, "app quit")

    def manual(self, session_id: str | None = None) -> list[TriggerEvent]:
        """The user asked to flush now (default: the active session)."""
        return self.fire("manual", session_id, "flush now")

    def pre_compaction(self, session_id: str) -> list[TriggerEvent]:
        """A session is about to be compacted: log what it holds first."""
        return self.fire("pre_compaction", session_id, "context about to be compacted")

    # -- notifications (never block on the network) --

    def note_activity(self, session_id: str | None = None, now: datetime | None = None) -> None:
        """A message was sent or received: resets the idle timer, remembers the active day."""
        now = now or self.clock()
        self._last_activity = now
        self._idle_fired = False
        if session_id:
            self._touched.add(session_id)
        if self._active_day != now.date():
            self._active_day = now.date()
            with contextlib.suppress(OSError):
                self.state.mark_active(now.date(), session_id or self.active_session_id)

    def focus_lost(self, now: datetime | None = None) -> None:
        """The terminal lost focus; the background flush runs if it stays lost for the debounce."""
        if self.flush_on_blur and self._blur_since is None:
            self._blur_since = now or self.clock()
            self._wake_up()

    def focus_gained(self) -> None:
        """The terminal has focus again: a pending background flush is cancelled."""
        self._blur_since = None

    # -- timers --

    def startup(self, now: datetime | None = None) -> list[TriggerEvent]:
        """At start-up: if the last active day is before today, flush every session with
        messages not yet logged (day change). Blocking."""
        now = now or self.clock()
        last = self.state.last_active_date
        self._active_day = now.date()
        events: list[TriggerEvent] = []
        if last is not None and last < now.date():
            events = self.fire(
                "day_change",
                self.flusher.sessions_with_unlogged(),
                f"started on {now.date().isoformat()}, last active {last.isoformat()}",
            )
        with contextlib.suppress(OSError):
            self.state.mark_active(now.date(), None)
        return events

    def tick(self, now: datetime | None = None) -> list[TriggerEvent]:
        """Check the timers: day change, idle, debounced background. Blocking when one fires."""
        now = now or self.clock()
        events: list[TriggerEvent] = []
        if self._active_day is not None and now.date() > self._active_day:
            previous = self._active_day
            self._active_day = now.date()
            ids = self.flusher.sessions_with_unlogged()
            if self.active_session_id and self.active_session_id not in ids:
                ids.insert(0, self.active_session_id)
            events += self.fire(
                "day_change",
                ids,
                f"day changed from {previous.isoformat()} to {now.date().isoformat()}",
            )
            with contextlib.suppress(OSError):
                self.state.mark_active(now.date(), self.active_session_id)
        elif self._active_day is None:
            self._active_day = now.date()
        if (
            self._blur_since is not None
            and now - self._blur_since >= self.blur_debounce
            and self.flush_on_blur
        ):
            since = self._blur_since
            self._blur_since = None
            seconds = (now - since).total_seconds()
            events += self.fire("background", None, f"terminal unfocused for {seconds:.0f} s")
        if (
            self.active_session_id
            and self._last_activity is not None
            and not self._idle_fired
            and now - self._last_activity >= self.idle
        ):
            self._idle_fired = True
            minutes = (now - self._last_activity).total_seconds() / 60
            events += self.fire("idle", None, f"no message for {minutes:.0f} min")
        return events

    def _next_wake(self, now: datetime) -> float:
        delay = self.tick_seconds
        if self._blur_since is not None:
            due = (self._blur_since + self.blur_debounce - now).total_seconds()
            delay = min(delay, max(0.0, due))
        return max(0.05, delay)

    def _wake_up(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """The timer loop: call :meth:`tick` (in a thread) until ``stop`` is set or cancelled.

        Wakes early when focus is lost so the background flush keeps its debounce.
        """
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        stop = stop or asyncio.Event()
        try:
            while not stop.is_set():
                self._wake.clear()
                delay = self._next_wake(self.clock())
                waiters = {
                    asyncio.ensure_future(self._wake.wait()),
                    asyncio.ensure_future(stop.wait()),
                }
                _, pending = await asyncio.wait(
                    waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                )
                for task in pending:
                    task.cancel()
                if stop.is_set():
                    break
                await asyncio.to_thread(self.tick)
        finally:
            self._loop = None
            self._wake = None
