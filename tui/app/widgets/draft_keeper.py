"""The message box's unsent text kept in the workspace, so that quitting (or a crash, or a
kill) never loses it: it comes back in the box when its session is next opened (see
:class:`DraftKeeper`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from textual.widget import Widget
from textual.worker import WorkType

from tui.app.widgets.chat_input import ChatInput

#: Seconds the box rests before its text is kept (each keystroke waits again).
KEEP_DELAY = 0.5


class KeptDrafts(Protocol):
    """Where drafts are kept (the workbench; blocking calls, made in a thread)."""

    def kept_draft(self, session_id: str | None) -> str:
        """The draft kept for ``session_id`` ("" for none; None: no session open)."""

    def keep_draft(self, session_id: str | None, text: str) -> None:
        """Keep ``text`` as the draft of ``session_id`` (blank: drop it)."""


class DraftKeeper:
    """Keeps what the message box holds, per session: a moment after each change
    (:meth:`changed`), and once more when the pane closes (:meth:`closing`). Opening a session
    with an empty box brings its kept draft back; text still in the box goes with the user to
    the session opened (:meth:`session_opened`)."""

    def __init__(
        self,
        owner: Widget,
        drafts: KeptDrafts,
        box: ChatInput,
        session: Callable[[], str | None],
    ) -> None:
        self._owner = owner
        self._drafts = drafts
        self._box = box
        self._session = session
        #: (session, text) last written: what the workspace holds.
        self._kept: tuple[str | None, str] | None = None

    def changed(self) -> None:
        """The box's text changed: keep it once it rests."""
        session, text = self._session(), self._box.text

        async def keep_later() -> None:
            await asyncio.sleep(KEEP_DELAY)  # a keystroke meanwhile cancels this one
            await asyncio.to_thread(self._keep, session, text)

        # (a function, not a coroutine: a worker cancelled before it starts leaves none behind)
        work: WorkType[None] = keep_later
        self._owner.run_worker(work, group="keep_draft", exclusive=True, exit_on_error=False)

    def _keep(self, session: str | None, text: str) -> None:
        if self._kept != (session, text):
            self._drafts.keep_draft(session, text)
            self._kept = (session, text)

    def session_opened(self, left: str | None, opened: str | None) -> None:
        """``opened`` is now open: the box's text is kept there (and no longer for ``left``),
        or, with an empty box, ``opened``'s kept draft comes back."""
        text = self._box.text

        async def follow() -> None:
            await self._follow(left, opened, text)

        work: WorkType[None] = follow
        self._owner.run_worker(work, group="keep_draft", exclusive=True, exit_on_error=False)

    async def _follow(self, left: str | None, opened: str | None, text: str) -> None:
        if text.strip():
            await asyncio.to_thread(self._keep, opened, text)
            if left != opened:
                await asyncio.to_thread(self._drafts.keep_draft, left, "")
            return
        kept = await asyncio.to_thread(self._drafts.kept_draft, opened)
        box = self._box
        if kept and not box.text and self._session() == opened:
            self._kept = (opened, kept)
            box.text = kept
            box.move_cursor(box.document.end)

    def closing(self) -> None:
        """The pane closes (the app quits): keep what the box holds now, if not kept yet (a
        small file written at once: the loop is stopping)."""
        with contextlib.suppress(OSError):  # a full disk, a removed workspace: nothing to do
            self._keep(self._session(), self._box.text)
