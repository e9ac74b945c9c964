"""What the session trash (``sessions/.trash/``) holds: one row per deleted session, its latest
copy there (the one :meth:`~tui.chat.sessions.SessionStore.restore` brings back). The app's
trash view and ``memdeck sessions --restore`` (without an id) list it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .sessions import SessionError, SessionStore


@dataclass(frozen=True)
class TrashedSession:
    """A deleted session as the trash keeps it."""

    id: str
    title: str
    message_count: int
    unlogged_count: int
    #: Its last line's time (ISO, local), None when no line has one.
    updated: str | None
    path: Path

    def describe(self) -> str:
        """``12 msgs · 2 not logged``."""
        count = f"{self.message_count} msg{'s' if self.message_count != 1 else ''}"
        return count + (f" · {self.unlogged_count} not logged" if self.unlogged_count else "")


def _session_id(path: Path) -> str:
    """``abc`` of ``abc.jsonl`` and of ``abc.20261122093000123456.jsonl`` (a second copy)."""
    return path.name.split(".", 1)[0]


def trashed_sessions(store: SessionStore) -> list[TrashedSession]:
    """The deleted sessions, most recently updated first (a copy that cannot be read is left
    out)."""
    latest: dict[str, tuple[int, Path]] = {}
    for path in store.trashed():
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            continue
        known = latest.get(_session_id(path))
        if known is None or stamp > known[0]:
            latest[_session_id(path)] = (stamp, path)
    rows = []
    for session_id, (_stamp, path) in latest.items():
        try:
            transcript = store.load_trashed(path)
        except (OSError, SessionError):
            continue
        updated = next(
            (r["timestamp"] for r in reversed(transcript.records) if r.get("timestamp")), None
        )
        rows.append(
            TrashedSession(
                id=session_id,
                title=transcript.display_title,
                message_count=sum(1 for m in transcript.messages if m.is_loggable),
                unlogged_count=transcript.unlogged_count,
                updated=updated,
                path=path,
            )
        )
    return sorted(rows, key=lambda row: (row.updated or "", row.id), reverse=True)
