"""What the Daily view marks in the log it shows: forgotten (or superseded) entries, struck
through, dimmed and labelled with their state, and the line a search result opened.

The text is marked line for line (a line stays one line), so a line of the file is still the
same line of what the view renders; the view's Markdown blocks know the source lines they
came from (``MarkdownBlock.source_range``), which is how a line's block is found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from textual.widgets.markdown import MarkdownBlock

from tui.engine.metadata import split_meta

#: What opens a line and must stay in front of the strike: a heading's ``#``s, a bullet, a
#: number, a quote's ``>``, and the indentation before them.
_LEAD = re.compile(r"^(\s*(?:#{1,6}|[-*+>]|\d{1,9}[.)])\s+|\s*)")
#: Markdown's own marks inside a struck text, escaped so that they stay characters.
_ESCAPED = re.compile(r"([\\`*_~\[\]<>#|])")


def retired_state(line: str) -> str | None:
    """``forgotten`` or ``superseded`` when ``line`` belongs to an entry no longer active (its
    metadata says so), else None."""
    _visible, meta = split_meta(line)
    return None if meta is None or meta.active else meta.state


def retired_lines(text: str) -> set[int]:
    """The lines of ``text`` (0-based) of entries no longer active."""
    return {number for number, line in enumerate(text.split("\n")) if retired_state(line)}


def mark_retired(text: str) -> str:
    """``text`` with each line of a forgotten or superseded entry shown struck through and
    labelled: ``- ~~Has a cat~~ *(forgotten)*``; every other line as it is."""
    marked = []
    for line in text.split("\n"):
        state = retired_state(line)
        visible = split_meta(line)[0].rstrip() if state else ""
        lead = _LEAD.match(visible)
        start = lead.end() if lead else 0
        body = visible[start:]
        if not state or not body.strip():
            marked.append(line)
            continue
        escaped = _ESCAPED.sub(r"\\\1", body)
        marked.append(f"{visible[:start]}~~{escaped}~~ *({state})*")
    return "\n".join(marked)


def block_at(blocks: Iterable[MarkdownBlock], line: int) -> MarkdownBlock | None:
    """The innermost block rendered from source ``line`` (0-based), if any (of blocks of the
    same lines, the outer one: a list item rather than the paragraph in it)."""
    found: MarkdownBlock | None = None
    for block in blocks:
        start, end = block.source_range
        if start <= line < end and (
            found is None or end - start < found.source_range[1] - found.source_range[0]
        ):
            found = block
    return found


def is_retired_block(block: MarkdownBlock, retired: set[int], source: list[str]) -> bool:
    """True when every non-blank source line of ``block`` is in ``retired``."""
    start, end = block.source_range
    lines = [n for n in range(start, min(end, len(source))) if source[n].strip()]
    return bool(lines) and all(n in retired for n in lines)
