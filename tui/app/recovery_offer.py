"""Unsaved MEMORY.md edits a run that was ended kept (a recovery copy, see
:meth:`~tui.engine.store.MemoryStore.save_recovery_copy`), offered to the editor at start-up.

Each copy the user was not told about yet is offered in turn, oldest first: the MEMORY.md tab
comes forward and the editor asks, through its conflict question worded for it, whether to load
the copy into the buffer (compared with MEMORY.md first, if they like). Once the user decided
(loaded it, or kept MEMORY.md) the copy is marked announced and the next one is offered; put
off (Escape), it is offered again at the next start. The copy itself is never deleted.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tui.engine.fileio import decode_exact, read_own_file

if TYPE_CHECKING:
    from tui.app.widgets.desk import Desk


def offer_recovery_copies(desk: Desk) -> None:
    """Offer the first recovery copy not announced yet (its reading in a thread worker)."""
    desk.run_worker(
        partial(_read_next, desk), thread=True, group="recovery", exit_on_error=False
    )


def _shown_path(copy: Path, root: Path) -> str:
    """``copy`` relative to the workspace when it is in it (the state folder's otherwise)."""
    try:
        return copy.relative_to(root).as_posix()
    except ValueError:
        return str(copy)


def _read_next(desk: Desk) -> None:
    memory = desk.workbench.engine.memory
    copies = memory.store.unannounced_recovery_copies()
    if not copies:
        return
    copy = copies[0]
    shown = _shown_path(copy, memory.workspace.root)
    try:
        text = decode_exact(read_own_file(copy))
    except OSError as exc:
        desk.app.call_from_thread(
            desk.notify,
            f"unsaved MEMORY.md edits of a run that was ended are in {shown}, but could not "
            f"be read: {exc.strerror or exc}",
            title="recovered",
            severity="warning",
            timeout=20,
        )
        return
    desk.app.call_from_thread(_offer, desk, copy, shown, text)


def _offer(desk: Desk, copy: Path, shown: str, text: str) -> None:
    """On the UI thread: the MEMORY.md tab in view, the editor asks."""

    def answered(decided: bool) -> None:
        if decided:
            desk.run_worker(
                partial(_mark_then_next, desk, copy),
                thread=True,
                group="recovery",
                exit_on_error=False,
            )

    desk.post_message(desk.MemoryWanted())
    panels = desk.memory_panels
    panels.show_tab("memory")
    panels.memory_editor.offer_recovered(text, shown, answered)


def _mark_then_next(desk: Desk, copy: Path) -> None:
    desk.workbench.engine.memory.store.mark_recovery_announced(copy)
    _read_next(desk)
