"""MEMORY.md editor: save writes atomically and re-indexes; outside edits never clobber, nor get clobbered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static, TextArea

from tui.app.latest import Answer, Requests
from tui.app.messages import while_attached
from tui.app.metadata_text import dim_metadata
from tui.app.panels.base import EnginePanel
from tui.app.screens.memory_conflict_screen import (
    ConflictChoice,
    ConflictWording,
    MemoryConflictScreen,
)
from tui.engine.engine import EDITOR, MemoryEngine
from tui.engine.fileio import ConcurrentEditError
from tui.engine.history_records import Attribution
from tui.engine.merge import merge3
from tui.engine.store import MemoryFileState
from tui.engine.visible import control_pictures
from tui.engine.workspace import MEMORY_FILE, PathRefusedError


def markdown_highlighting_available() -> bool:
    """True when tree-sitter and its Markdown grammar are installed (``textual[syntax]``)."""
    return find_spec("tree_sitter") is not None and find_spec("tree_sitter_markdown") is not None


class MemoryTextArea(TextArea):
    """The editor's TextArea with the editor keys it lacks: ctrl+home / ctrl+end go to the start
    / end of the file (with shift: select to there); Escape leaves the editor for the message
    box (the screen's key) instead of moving focus to the next widget."""

    BINDINGS = [
        Binding(
            "ctrl+home",
            "document_start",
            "Start of file",
            id="memory_editor.document_start",
            tooltip="Go to the start of MEMORY.md",
            show=False,
        ),
        Binding(
            "ctrl+end",
            "document_end",
            "End of file",
            id="memory_editor.document_end",
            tooltip="Go to the end of MEMORY.md",
            show=False,
        ),
        Binding(
            "ctrl+shift+home",
            "document_start(True)",
            "Select to start",
            id="memory_editor.select_to_start",
            tooltip="Select to the start of MEMORY.md",
            show=False,
        ),
        Binding(
            "ctrl+shift+end",
            "document_end(True)",
            "Select to end",
            id="memory_editor.select_to_end",
            tooltip="Select to the end of MEMORY.md",
            show=False,
        ),
    ]

    def action_document_start(self, select: bool = False) -> None:
        """Move the cursor to the start of the file."""
        self.move_cursor((0, 0), select=select)

    def action_document_end(self, select: bool = False) -> None:
        """Move the cursor to the end of the file."""
        self.move_cursor(self.document.end, select=select)

    def get_line(self, line_index: int) -> Text:
        """A line as shown: a control character in it (``ESC``, ``BEL``) as its picture
        (``␛``, ``␇``), one character for one so that the cursor and the selection stay on
        their characters, and an entry's metadata comment dimmed. The document, and what is
        saved, keeps the file's bytes."""
        line = Text(control_pictures(self.document.get_line(line_index)), end="", no_wrap=True)
        return dim_metadata(line)  # an entry's <!-- mem … --> comment, dimmed

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "escape":
            event.prevent_default()  # not TextArea's "focus next": the screen's Escape runs


class MemoryEditor(EnginePanel):
    """Edits MEMORY.md in a TextArea.

    - ``ctrl+s`` saves through the store (atomic, refused if the file changed since it was
      read), then re-indexes it through the engine, which publishes the change (origin
      ``editor``) to every panel.
    - :meth:`file_changed_on_disk` (the watcher, a flush, a tool call) re-reads the file: a clean
      buffer follows it; a dirty one asks the user (:class:`MemoryConflictScreen`). A refused save
      asks the same question.
    - A save the engine refuses (the path guard: MEMORY.md a symlink leading out of the
      workspace; a write error) keeps the buffer and says why in the status line and a
      notification.
    """

    @dataclass
    class FileRead(Answer):
        """MEMORY.md as read from disk; ``reason`` is why it was read (load, disk-change, ...)."""

        state: MemoryFileState
        reason: str

    @dataclass
    class SaveFinished(Message, bubble=False):
        """The save worker is done: saved (``conflict`` is None) or refused."""

        saved_text: str
        new_hash: str | None
        conflict: MemoryFileState | None = None

    @dataclass
    class DirtyChanged(Message):
        """The buffer went from saved to unsaved edits or back (the tab and header show ●)."""

        dirty: bool

    HELP = """\
## MEMORY.md

Long-term memory, edited in place. **ctrl+s** saves (atomically) and the search index follows.

If the file changes outside the app (your own editor, or the assistant saving a memory):
- with no unsaved edits here, the buffer reloads;
- with unsaved edits, you are asked: keep mine, load theirs, or look at the diff.
Nothing is ever overwritten without asking.

Unsaved edits of a run that was ended (a closed terminal) are kept in `.memdeck/recovery/`;
at the next start they are offered back here, compared with MEMORY.md first if you like.

Metadata comments (`<!-- mem id=… conf=… -->`) are part of the file: keep them to keep an
entry's confidence and history.
"""

    BINDINGS = [
        Binding("ctrl+s", "save", "save", id="memory_editor.save", tooltip="Save MEMORY.md"),
    ]

    DEFAULT_CSS = """
    MemoryEditor {
        layout: vertical;
        height: 1fr;
    }
    MemoryEditor #memory-status {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    MemoryEditor #memory-text {
        height: 1fr;
        border: none;
        padding: 0;
    }
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(engine, name=name, id=id, classes=classes)
        #: The file as it was when the buffer was last loaded from or saved to disk.
        self.base: MemoryFileState | None = None
        #: A line asked for (:meth:`go_to_line`) before the file was loaded.
        self._line_after_load: int | None = None
        self._pending_disk: MemoryFileState | None = None
        #: The conflict question on screen, and the disk version (with the merge of both
        #: sides, if they merge) it shows.
        self._question: MemoryConflictScreen | None = None
        self._question_shows: tuple[MemoryFileState, str | None] | None = None
        #: A recovery copy to offer once the file is loaded and no question is open.
        self._recovery_waiting: tuple[str, str, Callable[[bool], None]] | None = None
        self._saving = False
        self._recheck_after_save = False
        self._reads = Requests()  # of MEMORY.md from disk
        self._status = ("loading…", False)
        self._was_dirty = False
        self._after_save: list[Callable[[bool], None]] = []

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="memory-status")
        yield MemoryTextArea(
            "",
            id="memory-text",
            language="markdown" if markdown_highlighting_available() else None,
            soft_wrap=True,
            show_line_numbers=True,
            tab_behavior="indent",
        )

    def on_mount(self) -> None:
        self._read_file(self._reads.new(), "load")

    @property
    def text_area(self) -> TextArea:
        return self.query_one("#memory-text", TextArea)

    @property
    def is_dirty(self) -> bool:
        """True when the buffer has edits that are not on disk."""
        return self.base is not None and self.text_area.text != self.base.text

    def go_to_line(self, line: int) -> None:
        """Put the cursor at the start of ``line`` (1-based) in the middle of the view (once
        the file is loaded)."""
        if self.base is None:
            self._line_after_load = line
            return
        area = self.text_area
        row = min(max(0, line - 1), max(0, area.document.line_count - 1))
        area.move_cursor((row, 0), center=True)

    def file_changed_on_disk(self) -> None:
        """MEMORY.md may have changed outside the editor: re-read it and follow or ask."""
        self._read_file(self._reads.new(), "disk-change")

    def index_changed(self, paths: list[str]) -> None:
        """Check the file again when MEMORY.md is among the changed paths (or anything may be)."""
        if not paths or MEMORY_FILE in paths:
            self.file_changed_on_disk()

    def save_then(self, done: Callable[[bool], None]) -> None:
        """Save, then call ``done(True)`` once written, ``done(False)`` if the save was refused
        or turned into a question (the file changed on disk). Nothing to save: ``done(True)``."""
        if not self.is_dirty:
            done(True)
            return
        self._after_save.append(done)
        self.action_save()

    def _report_saved(self, saved: bool) -> None:
        waiting, self._after_save = self._after_save, []
        for done in waiting:
            done(saved)

    def action_save(self) -> None:
        """Save the buffer (atomically; refused and asked about if the file changed on disk)."""
        if self.base is None or self._saving:
            return
        area = self.text_area
        if area.text and not area.text.endswith("\n"):
            # A file ends with a newline, or the next append (a flush, another editor) would
            # join its first line to our last one. It goes into the buffer too (what is saved is
            # what the buffer holds, byte for byte), behind the cursor: the cursor and the
            # selection stay where the user left them, not on the new empty line.
            selection = area.selection
            area.insert("\n", area.document.end)
            area.selection = selection
        self._saving = True
        self._set_status("saving…")
        self._save(area.text, self.base.content_hash)

    # -- workers --

    @work(thread=True, exclusive=True, group="memory-read", exit_on_error=False)
    def _read_file(self, number: int, reason: str) -> None:
        self.post_message(self.FileRead(number, self.engine.store.read_memory(), reason))

    @work(thread=True, exclusive=True, group="memory-save", exit_on_error=False)
    def _save(self, text: str, expected_hash: str) -> None:
        try:
            with self.engine.attributed(Attribution("editor", summary="edit MEMORY.md")):
                new_hash = self.engine.store.save_memory_text(text, expected_hash)
        except ConcurrentEditError:
            self.post_message(
                self.SaveFinished(text, None, conflict=self.engine.store.read_memory())
            )
            return
        except (PathRefusedError, OSError) as exc:
            self.app.call_from_thread(self._save_refused, _one_line(exc))
            return
        try:
            self.engine.sync_changed([MEMORY_FILE], origin=EDITOR)
        except Exception as exc:  # saved; the index follows at the next sync
            self.app.call_from_thread(
                self.notify,
                f"MEMORY.md saved, but the index was not updated: {_one_line(exc)}",
                title="memory",
                severity="warning",
            )
        self.post_message(self.SaveFinished(text, new_hash))

    # -- results --

    @on(FileRead)
    @while_attached
    def _file_read(self, message: FileRead) -> None:
        if not self._reads.is_latest(message):
            return  # a newer read of the file is on its way
        disk = message.state
        if self._saving:
            # Our own write may be what changed the file: decide once the save has finished.
            self._recheck_after_save = True
            return
        if self.base is None:
            self._load_buffer(disk, "loaded")
            return
        if self._question is not None and self._question_shows is not None:
            if disk.content_hash != self._question_shows[0].content_hash:
                self._pending_disk = disk  # the question shows it at once
                self._ask(while_saving=False)
            return
        if disk.content_hash == self.base.content_hash:
            return  # our own save coming back through the watcher, or nothing changed
        if not self.is_dirty:
            self._load_buffer(disk, "reloaded: changed on disk")
            return
        self._pending_disk = disk
        self._set_status("changed on disk — unsaved edits here", warning=True)
        self._ask(while_saving=False)

    @on(SaveFinished)
    @while_attached
    def _save_finished(self, message: SaveFinished) -> None:
        self._saving = False
        if self._recheck_after_save:
            self._recheck_after_save = False
            self.file_changed_on_disk()
        if message.conflict is not None:
            self._pending_disk = message.conflict
            self._set_status("not saved: changed on disk", warning=True)
            self._report_saved(False)
            self._ask(while_saving=True)
            return
        assert message.new_hash is not None
        self.base = MemoryFileState(message.saved_text, message.new_hash)
        self._set_status("saved")
        self._report_saved(True)

    def _save_refused(self, reason: str) -> None:
        """The engine refused the write: nothing changed on disk, the buffer keeps the edits."""
        self._saving = False
        self._set_status(f"not saved: {reason}", warning=True)
        self.notify(f"MEMORY.md not saved: {reason}", title="memory", severity="error")
        self._report_saved(False)
        if self._recheck_after_save:
            self._recheck_after_save = False
            self.file_changed_on_disk()

    @on(TextArea.Changed, "#memory-text")
    def _buffer_changed(self) -> None:
        status, warning = self._status
        self._set_status(status, warning=warning)

    # -- helpers --

    def _load_buffer(self, state: MemoryFileState, status: str) -> None:
        area = self.text_area
        cursor = area.cursor_location
        area.load_text(state.text)
        last_row = max(0, area.document.line_count - 1)
        area.move_cursor((min(cursor[0], last_row), cursor[1]))
        self.base = state
        self._pending_disk = None
        if self._line_after_load is not None:
            line, self._line_after_load = self._line_after_load, None
            self.go_to_line(line)
        if state.notice:  # not read (the path guard refused it): say why at once
            self._set_status(state.notice, warning=True)
        else:
            self._set_status(status)
        self._offer_waiting_recovery()

    def _ask(self, *, while_saving: bool) -> None:
        """Ask about :attr:`_pending_disk`, or, with the question open, show it the newest
        version there: one question at a time, never one queued behind another over a stale
        diff."""
        disk = self._pending_disk
        if disk is None:
            return
        mine = self.text_area.text
        base = self.base.text if self.base is not None else None
        merged = merge3(base, mine, disk.text) if base is not None else None
        self._question_shows = (disk, merged)
        if self._question is not None:
            self._question.show_versions(
                disk.text, mine, can_keep_both=merged is not None, base_text=base
            )
            return
        self._question = MemoryConflictScreen(
            disk.text,
            mine,
            while_saving=while_saving,
            can_keep_both=merged is not None,
            base_text=base,
        )
        self.app.push_screen(self._question, lambda choice: self._resolve(choice, while_saving))

    def _resolve(self, choice: ConflictChoice | None, while_saving: bool) -> None:
        """Apply the answer to the question, about the disk version it showed last."""
        self._question = None
        assert self._question_shows is not None  # set with the question
        shown, merged = self._question_shows
        newest = self._pending_disk or shown
        if choice == "theirs":
            # An edit, not a reload: ctrl+z brings the user's text back.
            self._replace_buffer(newest.text)
            self.base = newest
            self._pending_disk = None
            self._set_status("loaded theirs (ctrl+z: yours)")
        elif choice == "both" and merged is not None:
            self._replace_buffer(merged)
            self._adopt(shown, newest, while_saving, "kept both: yours and the change on disk")
        elif choice == "mine":
            self._adopt(shown, newest, while_saving, "kept your edits")
        else:
            self._set_status("changed on disk — unsaved edits here (save to decide)", warning=True)
        self._offer_waiting_recovery()

    def _adopt(
        self, shown: MemoryFileState, newest: MemoryFileState, while_saving: bool, status: str
    ) -> None:
        """The buffer now answers the disk version ``shown``: adopt its hash so a save goes
        through (right away if they were saving). If the file changed again while they were
        deciding, that newer version has not been seen: ask about it instead."""
        self.base = shown
        if newest.content_hash != shown.content_hash:
            self._pending_disk = newest
            self._ask(while_saving=while_saving)
            return
        self._pending_disk = None
        self._set_status(status)
        if while_saving:
            self.action_save()

    def offer_recovered(self, text: str, source: str, answered: Callable[[bool], None]) -> None:
        """Offer ``text``, the unsaved edits a run that was ended kept in ``source``, to the
        buffer: the conflict question, worded for it, compares them with the buffer. Loading
        them is one undoable edit, saved by ctrl+s like any other. ``answered(True)`` once the
        user decided (loaded them, or kept MEMORY.md as it is); ``answered(False)`` when they
        put it off (Escape). Waits for the file to be loaded and for an open question."""
        if self.base is None or self._question is not None:
            self._recovery_waiting = (text, source, answered)
            return
        current = self.text_area.text
        if text == current:
            self.notify(f"{source} holds what MEMORY.md holds: nothing to recover", title="recovered")
            answered(True)
            return
        wording = ConflictWording(
            changed=f"Unsaved MEMORY.md edits from a run that was ended were kept in {source}.",
            which="Load them into the editor (unsaved until you save them), or keep MEMORY.md "
            "as it is?",
            mine="Load recovered",
            theirs="Keep MEMORY.md",
            disk_label="MEMORY.md now",
            buffer_label="the recovered edits",
        )

        def decided(choice: ConflictChoice | None) -> None:
            if choice == "mine":
                self._replace_buffer(text)  # ctrl+z brings MEMORY.md back
                self._set_status("recovered edits loaded")
                self.text_area.focus()  # in view, ready for ctrl+s
            elif choice == "theirs":
                self.notify(f"MEMORY.md kept as it is; the edits stay in {source}", title="recovered")
            answered(choice in ("mine", "theirs"))

        self.app.push_screen(MemoryConflictScreen(current, text, wording=wording), decided)

    def _offer_waiting_recovery(self) -> None:
        if self._recovery_waiting is not None and self._question is None:
            waiting, self._recovery_waiting = self._recovery_waiting, None
            self.offer_recovered(*waiting)

    def _replace_buffer(self, text: str) -> None:
        """Put ``text`` in the buffer as one undoable edit (the cursor stays where it can)."""
        area = self.text_area
        cursor = area.cursor_location
        area.replace(text, (0, 0), area.document.end)
        last_row = max(0, area.document.line_count - 1)
        area.move_cursor((min(cursor[0], last_row), cursor[1]))

    def _set_status(self, status: str, *, warning: bool = False) -> None:
        dirty = self.is_dirty
        if dirty != self._was_dirty:
            self._was_dirty = dirty
            self.post_message(self.DirtyChanged(dirty))
        self._status = (status, warning)
        line = Text(MEMORY_FILE, style="bold")
        if self.is_dirty and not warning:
            # One state at a time: edits made after a save are not "saved".
            line.append(" ● modified", style="bold yellow")
            line.append(" · ctrl+s saves", style="dim")
        else:
            if self.is_dirty:
                line.append(" ● modified", style="bold yellow")
            line.append(f" · {status}", style="bold red" if warning else "dim")
        self.query_one("#memory-status", Static).update(line)

    def show_error(self, message: str) -> None:
        self._saving = False
        self._set_status(message, warning=True)


def _one_line(exc: BaseException) -> str:
    """An error as one line for the status bar and a notification."""
    text = (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or str(exc)
    return " ".join(text.split()) or type(exc).__name__
