"""Code blocks of chat text: highlighted without guessing, their lexers loaded off the event loop.

Pygments builds a lexer's regular expressions the first time its class is used: 25-65 ms of
Python for Python, SQL, CSS or Kotlin, done by Textual on the event loop when a streamed code
block is first drawn (a stall of the whole UI). :func:`cold_fence_languages` finds the code
blocks a streamed piece opens whose lexer is not loaded yet, and :func:`warm_lexer` loads it
in a worker thread before the piece is handed to the Markdown widget.
"""

from __future__ import annotations

import re
import threading

from textual.content import Content
from textual.widgets.markdown import MarkdownFence

#: A code fence's opening (or closing) line, after any list or quote markers, and its info
#: string (what Textual hands Pygments as the language). Generous: a lexer loaded for
#: nothing costs a worker thread a few ms, one missed costs the UI a stall.
_FENCE_LINE = re.compile(r"(?m)^[ \t>*+\-0-9.)]*(?:`{3,}|~{3,})([^\n]*)")

#: Languages whose lexer is loaded, as fences name them ("" is a fence with none).
_warm: set[str] = set()
_warm_lock = threading.Lock()


class ChatFence(MarkdownFence):
    """A fenced or indented code block. Without a language it is plain text: Textual would
    guess one with Pygments' ``guess_lexer``, which imports every lexer module the first time
    (~190 ms on the event loop) and tries them all again on every streamed write."""

    @classmethod
    def highlight(cls, code: str, language: str, ansi: bool = False, dark: bool = False) -> Content:
        return super().highlight(code, language or "text", ansi, dark)


def cold_fence_languages(text: str) -> list[str]:
    """Languages of the code fences in ``text`` (lines begun or whole) not loaded yet."""
    if "``" not in text and "~~" not in text:
        return []
    found = dict.fromkeys(m.group(1).strip() for m in _FENCE_LINE.finditer(text))
    with _warm_lock:
        return [language for language in found if language not in _warm]


def warm_lexer(language: str) -> None:
    """Load the Pygments lexer ``language`` names (plain text when none) as Textual would ask
    for it: its class builds its regular expressions once per process. Blocking; run it in a
    worker thread."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    options = {"stripnl": False, "ensurenl": True, "tabsize": 8}
    try:
        get_lexer_by_name(language or "text", **options)
    except ClassNotFound:
        get_lexer_by_name("text", **options)
    with _warm_lock:
        _warm.add(language)
