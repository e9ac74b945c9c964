"""The top line: session title, model, and the state of the memory index."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

#: The fewest characters of a session title the header keeps when the line is full.
TITLE_MIN = 12


def fit_title(title: str, room: int) -> str:
    """``title`` cut with … to ``room`` cells (never under :data:`TITLE_MIN`)."""
    room = max(room, TITLE_MIN)
    return title if cell_len(title) <= room else set_cell_size(title, room - 1) + "…"


class AppHeader(Static):
    """``memdeck · "trip planning" · gpt-4o-mini · index 1,204 chunks ✓ hybrid``.

    The screen mirrors the desk's state into the reactives (and the app sets ``notice``); the
    line re-renders itself.
    """

    HELP = """\
## Header

The open session, the chat model, and the memory index: how many chunks are indexed, whether
search is **hybrid** (the embedding model is loaded) or **BM25 only** (full-text, while the
model loads or if it failed), and indexing progress. "flushing…" shows while memory is being
written from a conversation; "● MEMORY.md unsaved" while the editor has unsaved edits.
"""

    DEFAULT_CSS = """
    AppHeader {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    """

    #: The open session's title; empty when none is open.
    session_title: reactive[str] = reactive("")
    model: reactive[str] = reactive("")
    chunks: reactive[int | None] = reactive(None)
    #: ``loading``, ``loaded``, ``failed`` or ``none``.
    model_state: reactive[str] = reactive("loading")
    #: ``embedding 120/400 units`` while a sync runs, else empty.
    progress: reactive[str] = reactive("")
    #: Flushes running now.
    flushing: reactive[int] = reactive(0)
    #: A short notice that wins over everything else on the right (e.g. quitting).
    notice: reactive[str] = reactive("")
    #: MEMORY.md has unsaved edits in the editor.
    unsaved_memory: reactive[bool] = reactive(False)

    def render(self) -> Text:
        """``memdeck · “title” · model · index …``: a long title is cut (with …) before the
        model and index state are."""
        tail = Text()
        tail.append(" · ", style="dim")
        tail.append(self.model or "no model", style="" if self.model else "italic")
        tail.append(" · ", style="dim")
        tail.append_text(self.index_status())
        if self.unsaved_memory:
            tail.append(" · ", style="dim")
            tail.append("● MEMORY.md unsaved", style="bold yellow")
        if self.flushing and not self.notice:
            tail.append(" · flushing memory…", style="italic")
        if self.notice:
            tail.append(" · ", style="dim")
            tail.append(self.notice, style="bold")
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("memdeck", style="bold")
        line.append(" · ", style="dim")
        if self.session_title:
            room = self.content_size.width - line.cell_len - tail.cell_len - 2
            line.append(f"“{fit_title(self.session_title, room)}”")
        else:
            line.append("no session", style="italic")
        line.append_text(tail)
        return line

    def index_status(self) -> Text:
        """``index 1,204 chunks ✓ hybrid`` / ``BM25 only (model loading…)`` / progress."""
        status = Text()
        if self.chunks is None:
            status.append("index …")
        else:
            status.append(f"index {self.chunks:,} chunk{'s' if self.chunks != 1 else ''}")
        if self.progress.startswith("embedding"):
            # New units are full-text searchable at once; vector search follows them.
            status.append(f" · BM25 only · {self.progress}", style="italic")
        elif self.progress:
            status.append(f" · {self.progress}", style="italic")
        elif self.model_state == "loaded":
            status.append(" ✓ hybrid")
        elif self.model_state == "loading":
            status.append(" · BM25 only (model loading…)", style="italic")
        elif self.model_state == "failed":
            status.append(" · BM25 only (model failed)", style="bold")
        else:
            status.append(" · BM25 only")
        return status
