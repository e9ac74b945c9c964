"""The left column: chat sessions, most recent first; pick one to switch to it."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.chat.sessions import SessionInfo, SessionStore

#: Characters of a title shown before it is cut.
TITLE_WIDTH = 40
#: The id of the list's last row, which opens the deleted sessions (no session id starts with _).
TRASH_ROW = "_trash"


def session_prompt(info: SessionInfo, active: bool) -> Text:
    """Two lines: the title (marked when active), then message counts."""
    title = info.title if len(info.title) <= TITLE_WIDTH else info.title[: TITLE_WIDTH - 1] + "…"
    prompt = Text()
    prompt.append("● " if active else "  ", style="bold")
    prompt.append(title, style="bold" if active else "")
    count = f"{info.message_count} msg{'s' if info.message_count != 1 else ''}"
    pending = f" · {info.unlogged_count} not logged" if info.unlogged_count else ""
    prompt.append(f"\n  {count}{pending}", style="dim")
    return prompt


def matches(info: SessionInfo, words: list[str]) -> bool:
    """True when every one of ``words`` (lower case) is in the session's title or id."""
    haystack = f"{info.title} {info.id}".lower()
    return all(word in haystack for word in words)


class SessionList(Vertical):
    """Sessions of the workspace. Enter switches; ``n`` new, ``r`` rename, ``delete`` deletes;
    typing (or ``/``) filters the list by title; its last row opens the deleted sessions.

    The list reads the ``sessions/`` folder in a thread worker (:meth:`reload`: the screen calls
    it when the folder changes, whoever changed it); choices are posted as messages to the
    screen, which does the switching and the flushes. The ● follows :attr:`active_id` (bound to
    the screen's open session).
    """

    @dataclass
    class Loaded(Answer, bubble=True):
        """The sessions as read by the list's worker, most recent first (bubbles: the screen
        takes the open session's title from it)."""

        sessions: list[SessionInfo]
        #: Sessions in the trash.
        trashed: int = 0

    @dataclass
    class Chosen(Message):
        """The user picked a session (Enter or click)."""

        session_id: str

    @dataclass
    class NewRequested(Message):
        """The user asked for a new session (``n``)."""

    @dataclass
    class RenameRequested(Message):
        """The user asked to rename a session (``r``)."""

        session_id: str

    @dataclass
    class DeleteRequested(Message):
        """The user asked to delete a session (``delete``)."""

        session_id: str

    @dataclass
    class TrashRequested(Message):
        """The user asked for the deleted sessions (the list's last row)."""

    HELP = """\
## Sessions

Your conversations, most recent first. The one marked ● is open.

- **Enter** (or a click): switch to it. The session you leave is summarised into today's
  daily log in the background (the session-switch flush).
- **n**: a new session · **r**: rename · **Delete** (or **d**): delete (asks first; the
  session is flushed to memory, then moved to `sessions/.trash/`). The last row, *deleted
  sessions*, lists them: Enter there restores one.
- **Typing** a letter (**/** first for n, r or d) filters the list by title: **Enter** there
  opens the first match, **↓** goes to the list, **Escape** clears the filter.
"""

    BINDINGS = [
        Binding(
            "n", "new", "New", id="session_list.new", tooltip="Start a new session", show=False
        ),
        Binding(
            "r",
            "rename",
            "Rename",
            id="session_list.rename",
            tooltip="Rename the highlighted session",
        ),
        Binding(
            "delete,d",
            "delete",
            "Delete",
            id="session_list.delete",
            tooltip="Delete the highlighted session (flushes it to memory first)",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            id="session_list.filter",
            tooltip="Filter the sessions by title (typing a letter does too)",
            show=False,
        ),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            id="session_list.clear_filter",
            tooltip="Clear the filter and show every session",
            show=False,
        ),
        Binding("down", "to_list", "To the list", id="session_list.to_list", show=False),
    ]

    DEFAULT_CSS = """
    SessionList {
        height: 1fr;
    }
    SessionList > #sessions-title {
        height: 1;
        padding: 0 1;
        text-style: bold;
        background: $boost;
    }
    SessionList > #sessions-filter {
        display: none;
        height: 1;
        border: none;
        padding: 0 1;
    }
    SessionList.-filtering > #sessions-filter {
        display: block;
    }
    SessionList > #sessions {
        height: 1fr;
        border: none;
        padding: 0;
        background: transparent;
    }
    """

    #: The open session (marked ●); None when none is open.
    active_id: reactive[str | None] = reactive(None, init=False)

    def __init__(self, sessions: SessionStore, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sessions = sessions
        self.infos: list[SessionInfo] = []
        #: Sessions in the trash (the last row opens them).
        self.trashed = 0
        #: The filter was started and the focus has not reached its box yet.
        self._typing_filter = False
        self._loads = Requests()

    def compose(self) -> ComposeResult:
        yield Static("Sessions", id="sessions-title")
        yield Input(placeholder="filter by title…", id="sessions-filter", select_on_focus=False)
        yield OptionList(id="sessions")

    @property
    def option_list(self) -> OptionList:
        return self.query_one("#sessions", OptionList)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#sessions-filter", Input)

    @property
    def shown(self) -> list[SessionInfo]:
        """The sessions listed now: those the filter lets through."""
        words = self.filter_input.value.lower().split() if self.has_class("-filtering") else []
        return [info for info in self.infos if matches(info, words)]

    def focus_list(self) -> None:
        """Put the focus in the list of sessions."""
        self.option_list.focus()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Re-read the sessions (in a worker)."""
        self._load(self._loads.new())

    def watch_active_id(self) -> None:
        if self.is_mounted:
            self._render_options()

    @work(thread=True, exclusive=True, group="session-list", exit_on_error=False)
    def _load(self, number: int) -> None:
        trashed = {path.name.split(".", 1)[0] for path in self.sessions.trashed()}
        self.post_message(self.Loaded(number, self.sessions.list(), len(trashed)))

    @on(Loaded)
    @while_attached
    def _loaded(self, message: Loaded) -> None:
        if not self._loads.is_latest(message):
            message.stop()  # the screen must not take a title from a stale listing
            return
        self.infos = message.sessions
        self.trashed = message.trashed
        self._render_options()

    def _render_options(self) -> None:
        options = self.option_list
        highlighted = options.highlighted_option.id if options.highlighted_option else None
        # The highlight follows the open session unless the user is moving through the list.
        target = highlighted if options.has_focus and highlighted else self.active_id
        shown = self.shown
        rows = self._rows(shown)
        if not self._update_in_place(options, rows):
            options.clear_options()
            options.add_options(rows)
        index = next((i for i, info in enumerate(shown) if info.id == target), 0)
        if shown and options.highlighted != index:
            options.highlighted = index

    def _rows(self, shown: list[SessionInfo]) -> list[Option]:
        """The list's rows for the sessions ``shown``: a note when there are none, the trash."""
        rows: list[Option] = []
        if not self.infos:
            rows.append(Option(Text("no sessions yet", style="dim italic"), disabled=True))
        elif not shown:
            wanted = self.filter_input.value.strip()
            rows.append(
                Option(Text(f"no session matches “{wanted}”", style="dim italic"), disabled=True)
            )
        rows.extend(
            Option(session_prompt(info, info.id == self.active_id), id=info.id) for info in shown
        )
        if self.trashed:
            row = Text(f"  deleted sessions ({self.trashed})…", style="dim italic")
            rows.append(Option(row, id=TRASH_ROW))
        return rows

    @staticmethod
    def _update_in_place(options: OptionList, rows: list[Option]) -> bool:
        """Give the listed rows their new prompts when ``rows`` are the same rows (ids, order);
        False when they are not. A session's own answer changes its count at each turn:
        rebuilding the list then redrew it whole and sent it back to its top."""
        listed = options.options
        same = len(listed) == len(rows) and all(
            a.id == b.id and a.disabled == b.disabled for a, b in zip(listed, rows, strict=True)
        )
        if not same:
            return False
        for index, (old, new) in enumerate(zip(listed, rows, strict=True)):
            if old.prompt != new.prompt:
                options.replace_option_prompt_at_index(index, new.prompt)
        return True

    def _highlighted_id(self) -> str | None:
        """The highlighted session's id (None on the trash row)."""
        option = self.option_list.highlighted_option
        return option.id if option is not None and option.id != TRASH_ROW else None

    @on(OptionList.OptionSelected, "#sessions")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id == TRASH_ROW:
            self.post_message(self.TrashRequested())
        elif event.option.id:
            self.post_message(self.Chosen(event.option.id))

    # -- the filter --

    def on_key(self, event: events.Key) -> None:
        """A letter typed in the list, unless it is a key of its own (``n``, ``r``, ``d``,
        ``?``...), starts the filter with it."""
        if not (self.option_list.has_focus and event.is_printable and event.character):
            return
        if not self._typing_filter and (
            event.key in self.screen.active_bindings or not event.character.strip()
        ):
            return
        # While the focus is on its way to the filter box, every letter typed goes there (a
        # fast "tri" must not rename the session with its "r").
        event.stop()
        event.prevent_default()
        if not self._typing_filter:
            self.action_filter()
        self.filter_input.insert_text_at_cursor(event.character)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if event.widget is self.filter_input:
            self._typing_filter = False  # the keys reach it themselves now

    def action_filter(self) -> None:
        """Show the filter box and put the focus in it."""
        self.add_class("-filtering")
        self._typing_filter = True
        self.filter_input.focus()

    def action_clear_filter(self) -> None:
        """Clear the filter: every session again, the focus on the list."""
        self.filter_input.value = ""
        self._typing_filter = False
        self.remove_class("-filtering")
        self._render_options()
        self.option_list.focus()

    def action_to_list(self) -> None:
        """From the filter box down to the (filtered) list."""
        self.option_list.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape clears a filter (with none, it is the screen's: back to the message box);
        ↓ moves from the filter box to the list."""
        if action == "clear_filter":
            return self.has_class("-filtering")
        if action == "to_list":
            return self.filter_input.has_focus
        return True

    @on(Input.Changed, "#sessions-filter")
    def _filter_changed(self) -> None:
        self._render_options()

    @on(Input.Submitted, "#sessions-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter box opens the highlighted match (and the filter is done)."""
        event.stop()
        session_id = self._highlighted_id()
        if session_id:
            self.action_clear_filter()
            self.post_message(self.Chosen(session_id))

    # -- the keys --

    def action_new(self) -> None:
        self.post_message(self.NewRequested())

    def action_rename(self) -> None:
        session_id = self._highlighted_id()
        if session_id:
            self.post_message(self.RenameRequested(session_id))

    def action_delete(self) -> None:
        session_id = self._highlighted_id()
        if session_id:
            self.post_message(self.DeleteRequested(session_id))
