"""What memdeck remembers about its own use of a workspace (``.memdeck/state.json``), and the
local clock the triggers and consolidation read it with."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..engine.fileio import atomic_write_text, lock_for, read_own_file
from ..engine.workspace import Workspace
from .events import TriggerEvent


def local_now() -> datetime:
    """Now, local time, timezone-aware."""
    return datetime.now().astimezone()


class WorkspaceState:
    """Small persisted facts about the app's use of a workspace: ``.memdeck/state.json``.

    ``last_active_date`` (the day-change check at start-up), ``last_active_session``, the last
    outcome of each trigger (the stats panel) and the reason a session's flush was last skipped.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.path: Path = workspace.state_dir / "state.json"

    def read(self) -> dict[str, Any]:
        """The whole state (empty when missing or unreadable)."""
        try:
            data = json.loads(read_own_file(self.path).decode("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read, change in place, write atomically, under the file's lock."""
        with lock_for(self.path):
            data = self.read()
            change(data)
            atomic_write_text(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n")
            return data

    @property
    def last_active_date(self) -> date | None:
        value = self.read().get("last_active_date")
        try:
            return date.fromisoformat(value) if value else None
        except ValueError:
            return None

    @property
    def last_active_session(self) -> str | None:
        return self.read().get("last_active_session")

    def mark_active(self, day: date, session_id: str | None) -> None:
        """Remember the day (and session) the user was last active."""

        def change(data: dict[str, Any]) -> None:
            data["last_active_date"] = day.isoformat()
            if session_id:
                data["last_active_session"] = session_id

        self.update(change)

    def record(self, event: TriggerEvent) -> None:
        """Keep the last outcome per trigger and per-session skip reasons."""
        outcome = event.outcome

        def change(data: dict[str, Any]) -> None:
            data.setdefault("triggers", {})[event.trigger] = {
                "at": event.at.isoformat(timespec="seconds"),
                "session": event.session_id,
                "reason": event.reason,
                "status": outcome.status,
                "messages": outcome.messages,
                "detail": outcome.detail,
            }
            skipped = data.setdefault("skipped", {})
            if event.session_id and outcome.status in ("skipped", "failed"):
                skipped[event.session_id] = {
                    "at": event.at.isoformat(timespec="seconds"),
                    "trigger": event.trigger,
                    "detail": outcome.detail,
                }
            elif event.session_id and outcome.status == "flushed":
                skipped.pop(event.session_id, None)

        self.update(change)

    def last_triggers(self) -> dict[str, dict[str, Any]]:
        """``trigger -> {at, session, reason, status, messages, detail}`` of the last firing."""
        return dict(self.read().get("triggers", {}))
