"""Only the answer to a widget's newest background read is used.

Textual cancels an ``exclusive`` thread worker without stopping its thread, so a read that was
started first can post its answer after a read started later (a reload while the first listing
is still running, on a busy machine). Each read is numbered; its answer carries the number, and
the widget drops an answer that is not the newest one's.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class Answer(Message, bubble=False):
    """What a worker read for request ``number`` (see :class:`Requests`)."""

    number: int

    def can_replace(self, message: Message) -> bool:
        """A pending answer of the same kind to a request at least as new makes this one
        pointless (Textual then skips this one for it); an older one never does."""
        return isinstance(message, type(self)) and message.number >= self.number


class Requests:
    """Numbers one kind of background read of a widget."""

    def __init__(self) -> None:
        self.latest = 0

    def new(self) -> int:
        """The number of a read about to start (newer than every earlier one)."""
        self.latest += 1
        return self.latest

    def is_latest(self, answer: Answer) -> bool:
        """True when ``answer`` is to the newest read (an older one is stale)."""
        return answer.number == self.latest
