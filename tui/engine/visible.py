"""Text from memory, a file name, a model or a client, made safe to put on a terminal.

Such text is data: a control character in it (``ESC ]2;…BEL`` sets the window title,
``ESC ]52;…`` writes the clipboard, a lone ``\\x9b`` starts a CSI sequence) is shown, never
sent to the terminal as a command. :func:`visible_text` maps each one to a visible form:

- a C0 control to its Unicode Control Picture (``\\x1b`` -> ``␛``, ``\\x07`` -> ``␇``);
- DEL and the C1 controls (``\\x7f``-``\\x9f``) to the six characters of their JSON escape
  (``\\u009b``): one form a reader understands and that JSON output keeps exact, since JSON
  itself escapes C0 but not these.

Newline and tab lay text out, so they are kept (as is ``\\r`` before ``\\n``); a lone ``\\r``
(which can overwrite what a line showed) is made visible. The files keep the user's bytes: this
is for display only.
"""

from __future__ import annotations

import re

#: Every C0 control, DEL and every C1 control.
CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")
#: The controls :func:`visible_text` shows when line breaks are kept: all but ``\n``, ``\t``
#: and a ``\r`` that ends a line.
_SHOWN_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")

_CONTROL_PICTURES = 0x2400


def visible_form(character: str) -> str:
    """The visible form of one control character (any other character is returned as is)."""
    code = ord(character)
    if code < 0x20:
        return chr(_CONTROL_PICTURES + code)
    if 0x7F <= code <= 0x9F:
        return f"\\u{code:04x}"
    return character


#: Each C0 control but tab, and DEL, to its one-character Control Picture.
_PICTURES = {code: _CONTROL_PICTURES + code for code in range(0x20) if code != 0x09} | {
    0x7F: 0x2421  # ␡
}


def control_pictures(text: str) -> str:
    """``text`` with each C0 control but tab, and DEL, as its Control Picture: one character
    for one, for a view that counts characters (an editor's cursor and selection). C1 controls
    are left to :func:`visible_text`."""
    return text.translate(_PICTURES)


def _shown(match: re.Match[str]) -> str:
    return visible_form(match.group())


def visible_text(text: str, *, keep_line_breaks: bool = True) -> str:
    """``text`` with every control character in its visible form (see the module's doc).

    ``keep_line_breaks=False`` also shows ``\\n``, ``\\t`` and ``\\r`` (for a single line of a
    terminal screen, where they would move the cursor)."""
    pattern = _SHOWN_CONTROL if keep_line_breaks else CONTROL_CHARACTER
    if pattern.search(text) is None:
        return text
    return pattern.sub(_shown, text)
