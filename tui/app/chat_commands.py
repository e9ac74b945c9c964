"""The chat's commands in the palette: ask again, edit the last message, copy the last
answer, export the session as Markdown, switch the chat model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from tui.chat.sessions import SessionError

if TYPE_CHECKING:
    from tui.app.screens.main_screen import MainScreen


def chat_commands(main: MainScreen) -> Iterator[SystemCommand]:
    """The palette's chat commands over ``main`` (once it is ready)."""
    pane = main.chat_pane
    yield SystemCommand(
        "Retry last answer",
        "Send your last message again: a new answer replaces the last one, which stays in "
        "the transcript file (r on a message)",
        pane.retry_last,
    )
    yield SystemCommand(
        "Edit last message",
        "Put your last message in the message box; Enter resends it, replacing its answer "
        "(e on a message edits that one)",
        pane.edit_last,
    )
    yield SystemCommand(
        "Copy last answer",
        "Copy the last answer's Markdown to the clipboard (c on a message, b a code block)",
        pane.copy_last,
    )
    yield SystemCommand(
        "Export session as Markdown",
        "Write the open session to the workspace's .memdeck/exports/ (the path is copied)",
        lambda: export_session(main),
    )
    yield SystemCommand(
        "Switch model",
        "Send the next turns to another model: the configured ones and the server's",
        lambda: switch_model(main),
    )


def export_session(main: MainScreen) -> None:
    """Write the open session as Markdown; a toast says where (and the path is copied)."""
    session_id = main.desk.active_session
    if session_id is None:
        main.notify("no session is open: nothing to export", severity="warning")
        return

    async def export() -> None:
        try:
            path = await main.workbench.export(session_id)
        except (OSError, SessionError) as exc:  # a full disk, the session deleted meanwhile
            main.notify(f"not exported: {exc}", title="export", severity="error")
            return
        main.app.copy_to_clipboard(str(path))
        main.notify(f"{path} (path copied to the clipboard)", title="session exported")

    main.run_worker(export(), group="export", exit_on_error=False)


def switch_model(main: MainScreen) -> None:
    """Choose the chat model for the next turns."""
    from tui.app.screens.model_screen import ModelScreen

    if main.chat_pane.still_answering("still answering — switch the model once it is done"):
        return
    workbench = main.workbench

    def chosen(model: str | None) -> None:
        if not model or main.chat_pane.still_answering():
            return
        workbench.use_model(model)
        main.desk.model = model
        main.chat_pane.model = model
        main.chat_pane.llm_problem = workbench.llm_problem
        main.notify(
            f"the next turns go to {model} (reloading the config brings back its model)",
            title="model",
        )

    main.app.push_screen(ModelScreen(workbench), chosen)
