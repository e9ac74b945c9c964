"""Text a client or the model asks to write, made fit for a memory file.

Files the user writes never go through here: their bytes are theirs. What a client (MCP) or
the model sends is cleaned before it is written: no control character that could reach a
terminal, no line break but the newline, no comment marker that could forge an entry's
metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .metadata import escape_comment_markers

#: Control characters a client or model may not write: C0 but tab and newline, DEL, C1.
_WRITTEN_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CARRIAGE_RETURN = re.compile("\r\n?")


def without_nul(text: str) -> str:
    """``text`` without NUL characters: written into a memory file, one would make tools take
    the whole file for binary."""
    return text.replace("\x00", "") if "\x00" in text else text


def without_controls(text: str) -> tuple[str, str | None]:
    """``text`` without control characters other than newline and tab (C0, DEL, C1), and a
    line saying what was removed (None when nothing was)."""
    controls = _WRITTEN_CONTROL.findall(text)
    if not controls:
        return text, None
    kinds = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(controls))
    plural = "s" if len(controls) != 1 else ""
    note = f"removed {len(controls)} control character{plural} ({kinds})"
    return _WRITTEN_CONTROL.sub("", text), note


@dataclass(frozen=True)
class CleanedText:
    """Text from a client or a model as it may be written, and what was changed (one line each)."""

    text: str
    changes: tuple[str, ...] = ()


def clean_written_text(text: str) -> CleanedText:
    """``text`` a client or the model asked to write, made fit for a memory file.

    Control characters other than newline and tab (C0, DEL, C1: escape sequences, bells, the
    8-bit CSI) are removed, so nothing written can reach a terminal as control; line breaks
    (CR LF, CR) become newlines; ``<!--`` and ``-->`` are escaped, so the text cannot forge
    or swallow an entry's metadata comment. Files the user writes are never passed through
    this: their bytes are theirs.
    """
    text, removed = without_controls(_CARRIAGE_RETURN.sub("\n", text))
    changes = [removed] if removed else []
    text, escaped = escape_comment_markers(text)
    if escaped:
        changes.append(
            f"escaped {escaped} comment marker{'s' if escaped != 1 else ''} "
            "('<!--' or '-->'), which would open or close the entry's metadata comment"
        )
    return CleanedText(text, tuple(changes))
