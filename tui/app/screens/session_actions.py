"""The session half of the main screen: open, switch, create, rename and delete sessions.

Each action awaits the workbench in a worker and shows the result; the open session is
:attr:`MainScreen.active_session` (only :meth:`SessionActions._open` and a deletion change it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.reactive import reactive
from textual.screen import Screen

if TYPE_CHECKING:
    from tui.app.panels.memory_panels import MemoryPanels
    from tui.app.widgets.app_header import AppHeader
    from tui.app.widgets.chat_pane import ChatPane
    from tui.app.widgets.session_list import SessionList
    from tui.chat.workbench import Workbench


class SessionActions(Screen[None]):
    """The base of :class:`~tui.app.screens.main_screen.MainScreen`: its session handlers and
    actions, over the widgets and the workbench that the main screen provides."""

    #: The open session: the one value every widget and the triggers follow.
    active_session: reactive[str | None] = reactive(None, init=False)

    if TYPE_CHECKING:  # provided by MainScreen

        @property
        def workbench(self) -> Workbench: ...
        @property
        def ready(self) -> bool: ...
        @property
        def header(self) -> AppHeader: ...
        @property
        def chat_pane(self) -> ChatPane: ...
        @property
        def session_list(self) -> SessionList: ...
        @property
        def memory_panels(self) -> MemoryPanels: ...
        def action_focus_chat(self) -> None: ...

    @work(exclusive=True, group="initial-session", exit_on_error=False)
    async def _open_initial_session(self) -> None:
        """Resume the most recently updated session, if any; say if a consolidation is due."""
        last = await self.workbench.last_session()
        if last is not None:
            self.switch_to(last)
        if await self.workbench.consolidation_due():
            self.notify(
                "recent daily logs can be folded into MEMORY.md: ctrl+p → Consolidate memory",
                title="consolidation due",
                timeout=10,
            )

    def _on_session_list_chosen(self, message: SessionList.Chosen) -> None:
        self.switch_to(message.session_id)

    def switch_to(self, session_id: str | None) -> None:
        """Open ``session_id``: show its transcript and flush the session left (switch trigger)."""
        if self.chat_pane.busy:
            self.notify("still answering — Escape stops it, then switch", severity="warning")
            return
        if session_id == self.active_session:
            self.chat_pane.chat_input.focus()
            return
        self._open(session_id)
        self.remove_class("-show-sessions")
        if session_id is None:
            self.call_next(self.chat_pane.show_transcript, None)
        else:
            self._load_transcript(session_id)

    def _open(self, session_id: str | None) -> None:
        """Make ``session_id`` the open session and flush the one left (session switch)."""
        left = self.workbench.open(session_id)
        self.active_session = session_id
        self._flush_left(session_id, left)

    @work(group="lifecycle", exit_on_error=False)
    async def _flush_left(self, session_id: str | None, left: str | None) -> None:
        await self.workbench.flush_left(session_id, left)

    def watch_active_session(self, session_id: str | None) -> None:
        """The title follows once the transcript or the session list says it; the Inject tab
        comes forward again while typing (a tab chosen in the last session no longer holds) and
        shows this session's draft, not the why? of the last one."""
        self.header.session_title = "…" if session_id else ""
        if self.ready:
            self.memory_panels.forget_chosen_tab()
            # a why? belongs to the session it was asked in
            self.memory_panels.injection_panel.show_live()

    @work(exclusive=True, group="transcript", exit_on_error=False)
    async def _load_transcript(self, session_id: str) -> None:
        transcript = await self.workbench.transcript(session_id)
        if session_id != self.active_session:
            return  # the user switched again meanwhile
        self.header.session_title = transcript.display_title
        await self.chat_pane.show_transcript(transcript)

    def _on_session_list_loaded(self, message: SessionList.Loaded) -> None:
        for info in message.sessions:
            if info.id == self.active_session:
                self.header.session_title = info.title

    def action_new_session(self) -> None:
        """Start a new session and switch to it (the message box takes focus at once, so what
        is typed next is not lost while the session is created)."""
        if self.chat_pane.busy:
            self.notify("still answering — Escape stops it first", severity="warning")
            return
        self.action_focus_chat()
        self._create_session(None)

    def _on_session_list_new_requested(self) -> None:
        self.action_new_session()

    def _on_chat_pane_session_needed(self, message: ChatPane.SessionNeeded) -> None:
        self._create_session(message.text)

    @work(group="sessions", exit_on_error=False)
    async def _create_session(self, first_message: str | None) -> None:
        info = await self.workbench.new_session()
        self.session_list.reload()
        if first_message is None:
            if self.chat_pane.busy:  # an answer started meanwhile: the new session waits
                self.notify("still answering — Escape stops it, then switch", severity="warning")
                return
            await self.chat_pane.show_transcript(None)  # a new session is empty
        self._open(info.id)
        self.header.session_title = info.title
        if first_message is not None:
            self.chat_pane.send(first_message)

    def _session_title(self, session_id: str) -> str:
        for info in self.session_list.infos:
            if info.id == session_id:
                return info.title
        return session_id

    def action_rename_session(self, session_id: str | None = None) -> None:
        """Ask for a new title of ``session_id`` (default: the open session)."""
        from tui.app.screens.rename_screen import RenameScreen

        target = session_id or self.active_session
        if target is None:
            self.notify("no session is open", severity="warning")
            return

        def renamed(title: str | None) -> None:
            if title:
                self._rename(target, title)

        self.app.push_screen(RenameScreen(self._session_title(target)), renamed)

    def _on_session_list_rename_requested(self, message: SessionList.RenameRequested) -> None:
        self.action_rename_session(message.session_id)

    @work(group="sessions", exit_on_error=False)
    async def _rename(self, session_id: str, title: str) -> None:
        info = await self.workbench.rename(session_id, title)
        if info.id == self.active_session:
            self.header.session_title = info.title
        self.session_list.reload()

    def action_delete_session(self, session_id: str | None = None) -> None:
        """Ask, then flush ``session_id`` (default: the open one) and move it to the trash."""
        from tui.app.screens.confirm_screen import ConfirmScreen

        target = session_id or self.active_session
        if target is None:
            self.notify("no session is open", severity="warning")
            return
        if target == self.active_session and self.chat_pane.busy:
            self.notify("still answering — Escape stops it first", severity="warning")
            return
        question = (
            f"Delete “{self._session_title(target)}”?\n\n"
            "Its new messages are summarised into memory first; the transcript moves to "
            "sessions/.trash/ (nothing is destroyed)."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(target)

        self.app.push_screen(ConfirmScreen(question, confirm="Delete"), answered)

    def _on_session_list_delete_requested(self, message: SessionList.DeleteRequested) -> None:
        self.action_delete_session(message.session_id)

    @work(group="lifecycle", exit_on_error=False)
    async def _delete(self, session_id: str) -> None:
        trash, _event = await self.workbench.delete(session_id)
        self.notify(f"moved to {trash.name} in sessions/.trash", title="deleted")
        if session_id == self.active_session:
            self.active_session = None  # its flush already ran: no switch trigger
            await self.chat_pane.show_transcript(None)
        self.session_list.reload()
