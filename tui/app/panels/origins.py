"""Where a memory came from, as the panels show it: ``from agent "claude-code 2.1" · 2026-11-21
18:00``, the change that last wrote its lines (the engine's blame, looked up in a worker). The
origin of a chat or a flush names its session: a click on it (or ``o`` where a memory is
selected) opens that session."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from tui.app.messages import OpenSession
from tui.engine.engine import MemoryEngine
from tui.engine.history_records import Origin, one_line

#: ``memory/2026-11-20.md#L3-4`` (the end line optional), as results and reports name a memory.
RANGE = re.compile(r"(?P<path>.+)#L(?P<start>\d+)(?:-(?P<end>\d+))?")

#: Origins by the location (``path#Lx-y``) of the memory they are of; None: not known (history
#: off, the lines not committed yet).
Origins = dict[str, Origin | None]


def format_time(when: datetime) -> str:
    """``2026-11-21 18:00`` in local time."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def session_of(source: str, session: str | None) -> str | None:
    """The session a change of ``source`` can be opened in: a chat's or a flush's."""
    return session if session and source in ("chat", "flush") else None


def who_link(who: str, session: str | None) -> Text:
    """``who``, a link that opens ``session`` when there is one (a click runs the widget's
    ``open_session`` action, see :class:`OriginText`)."""
    who = one_line(who)  # a trailer of a commit made elsewhere may hold anything
    if session is None:
        return Text(who)
    return Text(who, style=Style(underline=True, meta={"@click": f"open_session({session!r})"}))


def describe_origin(origin: Origin, *, link: bool = True) -> Text:
    """``from the model in session "s-1" · 2026-11-21 18:00`` (the session a link unless
    ``link`` is False: in a list, whose rows take the clicks)."""
    text = Text("from ", style="dim")
    session = session_of(origin.source, origin.session) if link else None
    text.append_text(who_link(origin.who(), session))
    text.append(f" · {format_time(origin.time)}", style="dim")
    return text


def look_up_origins(engine: MemoryEngine, locations: Iterable[str]) -> Origins:
    """The origin of each ``path#Lx-y`` (blocking: blame; call it from a worker)."""
    found: Origins = {}
    for location in locations:
        match = RANGE.fullmatch(location)
        if match is None:
            continue
        start = int(match["start"])
        end = int(match["end"]) if match["end"] else start
        try:
            found[location] = engine.history.origin(match["path"], start, end)
        except Exception:  # noqa: BLE001 - an origin is never worth an error (a lock held...)
            found[location] = None
    return found


class OriginText(Static):
    """A Static whose text may hold origin links (:func:`who_link`): a click opens the session."""

    def action_open_session(self, session_id: str) -> None:
        self.post_message(OpenSession(session_id))
