"""``supersede`` lines of a session transcript: a retry, or an earlier message edited and sent
again, replaces the conversation from that user message on. The replaced lines stay in the
file; a reader (:func:`~.transcript.parse_transcript`) marks them and leaves them out of what
is shown, replayed to the model and summarised."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

#: Why a ``supersede`` line replaced the conversation from a message: its answer was asked
#: for again (``retry``), or the message was edited and sent again (``edit``).
SupersedeReason = Literal["retry", "edit"]


@dataclass(frozen=True)
class Superseded:
    """A ``supersede`` line: the conversation from user message ``from_id`` up to this line is
    replaced by what follows (kept in the file, no longer shown, replayed or summarised).
    ``replaced`` (as read) counts the user and assistant messages it replaced."""

    id: str
    from_id: str
    reason: SupersedeReason
    replaced: int = 0

    def to_record(self) -> dict[str, Any]:
        """The line as written."""
        return {"type": "supersede", "id": self.id, "from_id": self.from_id, "reason": self.reason}


#: Lines a ``supersede`` line replaces: what is said in a conversation, not its bookkeeping.
_REPLACEABLE = frozenset(
    {"message", "tool_call", "injection", "error", "compaction", "supersede"}
)


def superseded_lines(records: list[dict[str, Any]]) -> tuple[set[int], dict[int, int]]:
    """The lines (by ``id()`` of their record) that a later ``supersede`` line replaced, and
    for each ``supersede`` line that replaced something, how many user and assistant messages
    with text it replaced."""
    replaced: set[int] = set()
    counts: dict[int, int] = {}
    started: dict[str, int] = {}  # a user message's id -> the position of its line
    for position, record in enumerate(records):
        kind = record.get("type")
        if kind == "message" and record.get("role") == "user" and record.get("id"):
            started.setdefault(str(record["id"]), position)
        elif kind == "supersede":
            start = started.get(str(record.get("from_id")))
            if start is None:
                continue
            lines = [r for r in records[start:position] if r.get("type") in _REPLACEABLE]
            counts[id(record)] = _shown_messages(r for r in lines if id(r) not in replaced)
            replaced.update(id(r) for r in lines)
    return replaced, counts


def _shown_messages(lines: Iterable[dict[str, Any]]) -> int:
    """The messages with text that the chat shows for ``lines``: each user message, and the
    assistant's messages between two of them as one answer."""
    count, counted, previous = 0, False, ""
    for line in lines:
        if line.get("type") != "message" or line.get("silent"):
            continue
        role = str(line.get("role"))
        if role != previous or role == "user":  # a message of the user's, or a new answer
            counted, previous = False, role
        if not counted and str(line.get("content") or "").strip():
            count += 1
            counted = True
    return count
