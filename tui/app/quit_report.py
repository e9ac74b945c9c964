"""A quit whose memory flush wrote nothing (the model down, a refused request...) is said: on
stderr once the app has exited (:func:`quit_flush_problems`, printed by ``run_app``), and in a
toast at the next start while those messages still wait to be logged
(:func:`last_quit_problem`, from what ``.memdeck/state.json`` kept)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tui.chat.sessions import SessionError

if TYPE_CHECKING:
    from tui.app.screens.main_screen import MainScreen
    from tui.chat.chat import ChatEngine
    from tui.chat.events import TriggerEvent

#: What logs the waiting messages, said with each problem.
NEXT_FLUSH = "they are logged by the next flush (`memdeck flush` runs it now)"


def _messages(count: int) -> str:
    return f"{count} message{'s' if count != 1 else ''}"


def quit_flush_problems(events: Sequence[TriggerEvent]) -> list[str]:
    """One line per session the quit flush could not log (skipped or failed)."""
    return [
        f"memdeck: memory not written at quit: session {event.session_id}: "
        f"{event.outcome.summary}; {NEXT_FLUSH}"
        for event in events
        if event.outcome.status in ("skipped", "failed")
    ]


def last_quit_problem(engine: ChatEngine) -> str | None:
    """What the last quit's flush left unlogged, if its sessions still hold those messages
    (None when it wrote, or when a flush since has logged them). Blocking: reads files."""
    skipped = engine.triggers.state.read().get("skipped", {})
    waiting = []
    for session_id, record in (skipped.items() if isinstance(skipped, dict) else ()):
        if not isinstance(record, dict) or record.get("trigger") != "app_quit":
            continue
        try:
            info = engine.sessions.info(session_id)
        except (SessionError, OSError):
            continue  # deleted since
        if info.unlogged_count:
            waiting.append((info, record))
    if not waiting:
        return None
    info, record = waiting[0]
    when = str(record.get("at", ""))[:16].replace("T", " ")
    more = f" and {len(waiting) - 1} more session(s)" if len(waiting) > 1 else ""
    detail = " ".join(str(record.get("detail", "")).split()) or "no reason given"
    return (
        f"memory was not written when memdeck last quit ({when}): {detail}. "
        f"{_messages(info.unlogged_count)} of “{info.title}”{more} wait: ctrl+f logs the "
        "open session now, or the next flush does."
    )


def say_last_quit(screen: MainScreen) -> None:
    """At start-up: if the last quit's flush wrote nothing and its messages still wait, say so
    in a toast (the files are read in a thread worker)."""

    def look() -> None:
        problem = last_quit_problem(screen.engine)
        if problem is not None:
            screen.app.call_from_thread(
                screen.notify,
                problem,
                title="memory not written at the last quit",
                severity="warning",
                timeout=30,
            )

    screen.run_worker(look, thread=True, group="last-quit", exit_on_error=False)
