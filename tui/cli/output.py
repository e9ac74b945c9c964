"""What ``memdeck`` prints is text: a control character from memory, a file name, a model's
answer or a client's name is printed in its visible form (``␛]2;…``), never sent to the
terminal as a command.

Every command prints through ``sys.stdout`` / ``sys.stderr``; :func:`visible_output` puts a
:class:`VisibleTextStream` in front of them for the whole command, so no ``print`` can leak.
JSON output stays exact: JSON escapes C0 controls itself, and the visible form of DEL and C1
(``\\u009b``) is their JSON escape.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..engine.visible import visible_text


class VisibleTextStream:
    """A text stream that writes every control character but newline and tab in its visible
    form to :attr:`terminal`; anything else (``isatty``, ``flush``, ``buffer``) is the
    terminal's."""

    def __init__(self, terminal: TextIO) -> None:
        #: The stream written to; a command's own cursor moves (a progress bar's ``\r``) go here.
        self.terminal = terminal

    def write(self, text: str) -> int:
        self.terminal.write(visible_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.terminal, name)


def terminal_of(stream: TextIO | VisibleTextStream) -> TextIO:
    """The stream under ``stream``: where a command writes its own control characters."""
    return stream.terminal if isinstance(stream, VisibleTextStream) else stream


@contextmanager
def visible_output(*, stdout: bool = True) -> Iterator[None]:
    """While the block runs, ``sys.stderr`` (and ``sys.stdout`` unless ``stdout=False``: the
    MCP server's protocol stream) show control characters instead of emitting them."""
    saved = sys.stdout, sys.stderr
    if stdout:
        sys.stdout = VisibleTextStream(sys.stdout)
    sys.stderr = VisibleTextStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
