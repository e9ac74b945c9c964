"""An entry's metadata comment (``<!-- mem id=… conf=… -->``) shown dimmed wherever a memory
file's lines are shown as they are written (the MEMORY.md editor, a search result in its file):
it belongs to the file, but it is not what the entry says."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from tui.engine.metadata import split_meta

#: How a metadata comment is drawn.
METADATA_STYLE = Style(dim=True)


def metadata_span(line: str) -> tuple[int, int] | None:
    """Where the trailing metadata comment of ``line`` is (start, end); None without one."""
    visible, meta = split_meta(line)
    if meta is None:
        return None
    start = line.find("<!--", len(visible))
    return (start, len(line.rstrip())) if start >= 0 else None


def dim_metadata(text: Text) -> Text:
    """``text``, one line, with its metadata comment dimmed (in place; returned for chaining)."""
    span = metadata_span(text.plain)
    if span is not None:
        text.stylize(METADATA_STYLE, *span)
    return text
