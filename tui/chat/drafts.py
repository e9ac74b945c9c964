"""Unsent drafts: what was typed in the message box and not sent, kept per session in
``.memdeck/drafts.json`` so that it survives quitting (or a crash, or a kill) and comes back
in the box when that session is next opened.

The app keeps the box's text here a moment after each change and when it closes; sending
drops it. The file is the user's words, like a transcript: private (0600), replaced
atomically, never read through a link.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..engine.fileio import lock_for, read_own_file, replace_own_file
from ..engine.workspace import Workspace

#: The key of the draft typed while no session is open (it goes to a new session).
NO_SESSION = ""
#: The longest draft kept, in characters (a bigger paste keeps its first part; the box still
#: holds all of it).
MAX_DRAFT_CHARS = 1_000_000


class DraftStore:
    """``.memdeck/drafts.json``: ``{session id: draft}`` (``""``: no session open)."""

    def __init__(self, workspace: Workspace) -> None:
        self.path: Path = workspace.state_dir / "drafts.json"

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(read_own_file(self.path).decode("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, str)}

    def get(self, session_id: str | None) -> str:
        """The kept draft of ``session_id`` (None: no session open); "" when there is none."""
        return self._read().get(session_id or NO_SESSION, "")

    def keep(self, session_id: str | None, text: str) -> None:
        """Keep ``text`` as the draft of ``session_id``; a blank one drops it. Blocking."""
        key = session_id or NO_SESSION
        with lock_for(self.path):
            drafts = self._read()
            if text.strip():
                if drafts.get(key) == text[:MAX_DRAFT_CHARS]:
                    return
                drafts[key] = text[:MAX_DRAFT_CHARS]
            elif drafts.pop(key, None) is None:
                return
            data = json.dumps(drafts, ensure_ascii=False, indent=1) + "\n"
            replace_own_file(self.path, data.encode("utf-8"))
