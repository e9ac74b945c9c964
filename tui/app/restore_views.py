"""The lists that bring things back, opened over the desk: the session trash (the session list's
last row, or the palette) and the forgotten memories (``f`` in Daily, or the palette)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.app.widgets.desk import Desk


def show_trash(desk: Desk) -> None:
    """The deleted sessions; Enter restores one (the session list reads the folder again)."""
    from tui.app.screens.trash_screen import TrashScreen

    sessions = desk.workbench.engine.sessions
    desk.app.push_screen(TrashScreen(sessions), lambda _restored: desk.session_list.reload())


def show_forgotten(desk: Desk) -> None:
    """The forgotten and superseded memories; Enter restores one where it was (a memory change
    like any other: the panels follow it)."""
    from tui.app.screens.forgotten_screen import ForgottenScreen

    desk.app.push_screen(ForgottenScreen(desk.workbench.engine.memory))
