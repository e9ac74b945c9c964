"""Open a memory file in the user's own editor ($VISUAL / $EDITOR) at a line, the app suspended
meanwhile. The file watcher follows what the editor saves."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping

from textual.app import App, SuspendNotSupported
from textual.widget import Widget

from tui.engine.workspace import Workspace, WorkspaceError


def editor_command(env: Mapping[str, str] | None = None) -> list[str] | None:
    """``$VISUAL`` or ``$EDITOR`` split as a shell would (``code -w``), or None when unset."""
    env = os.environ if env is None else env
    value = (env.get("VISUAL") or env.get("EDITOR") or "").strip()
    return shlex.split(value) if value else None


def open_in_editor(app: App[object], workspace: Workspace, path: str, line: int) -> str | None:
    """Run the editor on ``path`` (workspace-relative, through the path guard) at ``line`` and
    wait for it; None when it ran, else one line saying why it did not."""
    command = editor_command()
    if command is None:
        return "set $EDITOR (or $VISUAL) to open memories in your editor"
    try:
        file = workspace.resolve_memory_path(path)
    except WorkspaceError as exc:
        return str(exc)
    try:
        with app.suspend():
            subprocess.run([*command, f"+{max(1, line)}", str(file)], check=False)
    except SuspendNotSupported:
        return "this terminal cannot hand over to an editor"
    except OSError as exc:
        return f"could not start {command[0]}: {exc.strerror or exc}"
    return None


def open_entry_in_editor(widget: Widget, workspace: Workspace, path: str, line: int) -> None:
    """:func:`open_in_editor` for a key in ``widget``, which says why when it could not."""
    problem = open_in_editor(widget.app, workspace, path, line)
    if problem:
        widget.notify(problem, title="editor", severity="warning")
