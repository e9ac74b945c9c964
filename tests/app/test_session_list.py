"""SessionList: a session's new message changes its row, not the whole list."""

from __future__ import annotations

from pathlib import Path

from support.pilot import wait_until
from textual.app import App, ComposeResult

from tui.app.widgets.session_list import SessionList
from tui.chat.sessions import SessionStore
from tui.engine.workspace import Workspace


async def test_a_new_message_changes_its_row_in_place(tmp_path: Path) -> None:
    """Each turn appends to the open session's file and the list re-reads the sessions: it
    rebuilt every row (drawn again whole at the start and the end of each answer) and went
    back to its top. The same sessions in the same order keep their rows and the scroll."""
    (tmp_path / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    store = SessionStore(Workspace.open(tmp_path))
    ids = [
        store.create(f"session {n}", session_id=f"20261126-0000{n:02d}-abcd").id for n in range(30)
    ]
    for session_id in ids:
        store.append_message(session_id, "user", "hello")
    newest = ids[-1]
    store.append_message(newest, "assistant", "hi")  # the most recent: listed first

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield SessionList(store)

    async with Host().run_test(size=(60, 20)) as pilot:
        sessions = pilot.app.query_one(SessionList)
        options = sessions.option_list
        await wait_until(pilot, lambda: options.option_count == 30, "the sessions listed")
        assert options.get_option_at_index(0).id == newest
        sessions.focus_list()  # the user moves through the list: the highlight stays
        options.highlighted = 12
        await pilot.pause()
        assert options.scroll_y > 0
        before, scrolled = list(options.options), options.scroll_y

        store.append_message(newest, "user", "and again")
        sessions.reload()
        await wait_until(
            pilot, lambda: "3 msgs" in str(options.get_option_at_index(0).prompt), "the new count"
        )
        assert all(a is b for a, b in zip(options.options, before, strict=True))
        assert options.scroll_y == scrolled
        assert options.highlighted == 12

        added = store.create("a new one", session_id="20261126-000099-abcd").id
        store.append_message(added, "user", "first")
        sessions.reload()
        await wait_until(pilot, lambda: options.option_count == 31, "the new session listed")
        assert [option.id for option in options.options][:2] == [added, newest]
