"""The records of the memory's history: who wrote (:class:`Attribution`, the ``Memdeck-*``
trailers), a change as a reader sees it (:class:`Change`) and where a memory came from
(:class:`Origin`). :mod:`tui.engine.git_history` writes and reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

#: Who wrote a change (the ``Memdeck-Source`` trailer).
Source = Literal[
    "editor", "chat", "flush", "consolidation", "mcp", "cli", "restore", "revert", "outside", "sync"
]
SOURCES: tuple[Source, ...] = get_args(Source)

#: Whether a workspace's history is kept: ``auto`` keeps it unless the workspace is inside
#: another git repository (history is not committed into someone else's repository silently).
HistoryMode = Literal["auto", "on", "off"]

TRAILERS = {
    "Memdeck-Source": "source",
    "Memdeck-Session": "session",
    "Memdeck-Trigger": "trigger",
    "Memdeck-Client": "client",
}


class HistoryError(Exception):
    """A history operation that cannot be done, worded for the user in one line."""


@dataclass(frozen=True)
class Attribution:
    """Who is writing: the source, and the session, trigger or client when there is one;
    ``summary`` is the commit's subject (a default is made from the paths when empty)."""

    source: Source
    session: str | None = None
    trigger: str | None = None
    client: str | None = None
    summary: str = ""

    def message(self, paths: Sequence[str]) -> str:
        """The commit message: the subject, a blank line, the trailers."""
        subject = one_line(self.summary) or f"{self.source}: {', '.join(paths)}"
        trailers = [f"Memdeck-Source: {self.source}"]
        for name, attribute in list(TRAILERS.items())[1:]:
            value = getattr(self, attribute)
            if value:
                trailers.append(f"{name}: {one_line(str(value))}")
        return f"{subject[:200]}\n\n" + "\n".join(trailers) + "\n"

    def who(self) -> str:
        """Who did it, for a reader: ``you``, ``the model in session "x"``, ``agent "c 1"``."""
        return describe_who(self.source, self.session, self.trigger, self.client)


def one_line(text: str) -> str:
    """``text`` on one line, control characters dropped (a trailer or a subject)."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(cleaned.split())


def describe_who(source: str, session: str | None, trigger: str | None, client: str | None) -> str:
    """A reader's words for who made a change."""
    where = f' in session "{session}"' if session else ""
    if source == "editor":
        return "you (editor)"
    if source == "cli":
        return "you (command line)"
    if source == "chat":
        return f"the model{where}"
    if source == "flush":
        of = f' of session "{session}"' if session else ""
        return f"the flush ({trigger}){of}" if trigger else f"the flush{of}"
    if source == "mcp":
        return f'agent "{client}"' if client else "an MCP agent"
    if source == "outside":
        return "an outside edit"
    return {"restore": "a restore", "revert": "a revert", "sync": "a sync"}.get(source, source)


@dataclass(frozen=True)
class Change:
    """One commit of the history, as a reader sees it."""

    id: str
    time: datetime
    source: str
    summary: str
    files: tuple[str, ...] = ()
    added: int = 0
    removed: int = 0
    session: str | None = None
    trigger: str | None = None
    client: str | None = None

    @property
    def short_id(self) -> str:
        return self.id[:10]

    def who(self) -> str:
        return describe_who(self.source, self.session, self.trigger, self.client)

    def to_json(self) -> dict[str, object]:
        """``{id, time, source, files, summary, session?, trigger?, client?}`` (and +/-)."""
        data: dict[str, object] = {
            "id": self.id,
            "time": self.time.isoformat(timespec="seconds"),
            "source": self.source,
            "files": list(self.files),
            "summary": self.summary,
            "added": self.added,
            "removed": self.removed,
        }
        for key in ("session", "trigger", "client"):
            value = getattr(self, key)
            if value:
                data[key] = value
        return data


@dataclass(frozen=True)
class Origin:
    """Where a memory's lines came from: the change that last wrote them."""

    source: str
    time: datetime
    commit: str
    session: str | None = None
    client: str | None = None
    trigger: str | None = None

    def to_json(self) -> dict[str, object]:
        """``{source, time, commit, session?, client?}``."""
        data: dict[str, object] = {
            "source": self.source,
            "time": self.time.isoformat(timespec="seconds"),
            "commit": self.commit,
        }
        for key in ("session", "client", "trigger"):
            value = getattr(self, key)
            if value:
                data[key] = value
        return data

    def who(self) -> str:
        return describe_who(self.source, self.session, self.trigger, self.client)


def parse_trailers(message: str) -> dict[str, str]:
    """The ``Memdeck-*`` trailers of a commit message, by attribute (``source``...)."""
    found: dict[str, str] = {}
    for line in message.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in TRAILERS:
            found[TRAILERS[name.strip()]] = value.strip()
    return found


#: Who changed memory, as :attr:`~tui.engine.engine.MemoryChange.origin` says it (free text is allowed too, e.g.
#: ``"assistant: save_memory"``).
EDITOR, FLUSH, CONSOLIDATION, OUTSIDE, RESTORE = (
    "editor",
    "flush",
    "consolidation",
    "changed on disk",
    "restore",
)
#: Who an engine's writes are from when nothing else says (a command-line run).
CLI_WRITES = Attribution("cli")

#: The history's source of a write by its origin (see :meth:`~tui.engine.engine.MemoryEngine.current_attribution`).
ORIGIN_SOURCES: dict[str, Source] = {
    EDITOR: "editor",
    FLUSH: "flush",
    CONSOLIDATION: "consolidation",
    OUTSIDE: "outside",
    RESTORE: "restore",
}
