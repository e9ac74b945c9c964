"""Issue 29 C.8 and C.11: a restore puts a forgotten entry back where it was, and "Keep both"
never undoes the other side's change when lines repeat.

Real workspaces, real files, the real engine and ``memdeck forgotten`` as a real process; the
three-way merge is checked with properties over small line lists full of repeats.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.chat_support import memdeck_env, run_memdeck
from support.mcp_support import connected
from support.pilot import app_ready, small_app, wait_until

from tui.app.panels.activity_panel import ActivityPanel
from tui.app.screens.memory_conflict_screen import MemoryConflictScreen
from tui.chat.chat import ChatEngine
from tui.engine.merge import merge3
from tui.engine.store import MemoryStore
from tui.engine.workspace import Workspace

# -- C.11: Keep both over repeated lines ------------------------------------------------------

COPY = "- Water the plants\n"
THREE_COPIES = COPY * 3  # a hand-written MEMORY.md: no title


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1]


def test_an_outside_forget_of_one_copy_survives_a_local_insert(tmp_path: Path) -> None:
    """The issue's case: three identical lines, the user types a line, an outside forget
    removes one copy. Keep both gives two copies and the typed line, or is not offered."""
    store = MemoryStore(Workspace.open(tmp_path))
    for forgotten in range(3):
        (tmp_path / "MEMORY.md").write_text(THREE_COPIES, encoding="utf-8")
        store.retire_entries([store.entries()[forgotten]], state="forgotten")
        theirs = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")
        assert theirs == COPY * 2
        for typed_at in range(4):
            mine = COPY * typed_at + "- typed\n" + COPY * (3 - typed_at)
            for one, other in ((mine, theirs), (theirs, mine)):
                merged = merge3(THREE_COPIES, one, other)
                if typed_at in (0, 3):  # before or after all copies: nothing is unclear
                    kept = 2 if typed_at else 0
                    assert merged == COPY * kept + "- typed\n" + COPY * (2 - kept)
                elif merged is not None:  # which copy went is not known
                    assert merged.count(COPY) == 2, merged
                    assert merged.count("- typed\n") == 1


def _run_around(lines: list[str], index: int) -> tuple[int, int]:
    """The run of lines equal to ``lines[index]`` around it: ``(start, end)``."""
    start, end = index, index + 1
    while start > 0 and lines[start - 1] == lines[index]:
        start -= 1
    while end < len(lines) and lines[end] == lines[index]:
        end += 1
    return start, end


REPEATING = st.lists(st.sampled_from(["- a", "- b", ""]), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(base=REPEATING, data=st.data())
def test_a_deletion_and_an_insertion_elsewhere_both_survive(
    base: list[str], data: st.DataObject
) -> None:
    deleted = data.draw(st.integers(0, len(base) - 1), label="deleted")
    inserted_at = data.draw(st.integers(0, len(base)), label="inserted at")
    theirs = base[:deleted] + base[deleted + 1 :]
    mine = [*base[:inserted_at], "- new", *base[inserted_at:]]
    start, end = _run_around(base, deleted)
    for one, other in ((mine, theirs), (theirs, mine)):
        merged = merge3(_text(base), _text(one), _text(other))
        if merged is None:
            # Only when the insertion is among the copies one of which was deleted: then
            # where it goes depends on which copy that was.
            assert start <= inserted_at <= end
            continue
        result = _lines(merged)
        without_new = list(result)
        without_new.remove("- new")
        assert without_new == theirs  # the deletion survived
        assert any(mine[:i] + mine[i + 1 :] == result for i in range(len(mine)))  # the insertion


def _changed(lines: list[str], start: int, end: int, new: list[str]) -> list[str]:
    return [*lines[:start], *new, *lines[end:]]


CHANGE = st.tuples(st.integers(0, 8), st.integers(0, 1), st.lists(st.just("- C"), max_size=1))


@settings(max_examples=400, deadline=None)
@given(base=REPEATING, common=CHANGE, extra=CHANGE)
def test_the_same_change_on_both_sides_is_taken_once(
    base: list[str], common: tuple[int, int, list[str]], extra: tuple[int, int, list[str]]
) -> None:
    """Both sides made one change; mine also another, apart from it: the result is mine (or,
    where repeats make it unclear which lines the changes are, no merge), never a doubled
    change."""
    start, size, new = common
    start = min(start, len(base))
    end = min(start + size, len(base))
    if end == start and not new:
        return
    other_start, other_size, _ = extra
    other_start = min(other_start, len(base))
    other_end = min(other_start + other_size, len(base))
    if not (other_end < start or end < other_start):
        return  # not apart: that is the clash case
    edits = sorted([(start, end, new), (other_start, other_end, ["- M"])], reverse=True)
    mine = base
    for edit_start, edit_end, lines in edits:
        mine = _changed(mine, edit_start, edit_end, lines)
    theirs = _changed(base, start, end, new)
    for one, other in ((mine, theirs), (theirs, mine)):
        merged = merge3(_text(base), _text(one), _text(other))
        assert merged in (None, _text(mine))
        if len(set(base)) == len(base):
            assert merged == _text(mine)  # no repeats: nothing is unclear
    assert merge3(_text(base), _text(theirs), _text(theirs)) == _text(theirs)


@settings(max_examples=300, deadline=None)
@given(base=REPEATING, data=st.data())
def test_overlapping_different_changes_clash(base: list[str], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(base) - 1), label="start")
    mine = _changed(base, start, start + 1, ["- mine"])
    other_start = data.draw(st.integers(max(0, start - 1), start), label="other start")
    theirs = _changed(base, other_start, start + 1, ["- theirs"])
    assert merge3(_text(base), _text(mine), _text(theirs)) is None
    assert merge3(_text(base), _text(theirs), _text(mine)) is None


# -- C.8: a restore puts each entry back where it was ----------------------------------------

SECTIONED = (
    "# Long-term Memory\r\n"
    "\r\n"
    "## Health\r\n"
    "\r\n"
    "- Allergic to penicillin\r\n"
    "- Blood type O, café au lait \u2028 after lunch\r\n"
    "- Sees Dr Okafor\r\n"
    "  every spring\r\n"
    "\r\n"
    "## Home\r\n"
    "- Lives in Lyon\r\n"
    "- Has a garden\r\n"
)


def _forget(root: Path, *needles: str) -> MemoryStore:
    store = MemoryStore(Workspace.open(root))
    chosen = [e for e in store.entries() if any(needle in e.text for needle in needles)]
    assert len(chosen) == len(needles)
    assert len(store.retire_entries(chosen, state="forgotten")) == len(needles)
    return store


def _numbers(root: Path, env: dict[str, str]) -> dict[str, str]:
    listed = run_memdeck(["--workspace", str(root), "forgotten", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    records = [json.loads(line) for line in listed.stdout.split("\n") if line]
    return {record["text"]: str(record["number"]) for record in records}


def test_forgotten_entries_come_back_in_their_section_byte_for_byte(tmp_path: Path) -> None:
    """The issue's case: ``## Health`` entries came back under ``## Home``. Restored in any
    order by ``memdeck forgotten --restore``, each is back where it was and the file is as it
    was, byte for byte (CRLF, U+2028, a continuation line)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_bytes(SECTIONED.encode("utf-8"))
    _forget(root, "penicillin", "Okafor", "Blood type")
    env = memdeck_env(None, tmp_path)
    numbers = _numbers(root, env)
    assert json.loads(
        run_memdeck(["--workspace", str(root), "forgotten", "--json"], env).stdout.split("\n")[0]
    )["section"] == ["# Long-term Memory", "## Health"]

    first = run_memdeck(
        [
            "--workspace",
            str(root),
            "forgotten",
            "--restore",
            numbers["Sees Dr Okafor\nevery spring"],
        ],
        env,
    )
    assert first.returncode == 0, first.stderr
    assert "restored where it was, under ## Health" in first.stdout
    data = (root / "MEMORY.md").read_bytes().decode("utf-8")
    assert data.index("- Sees Dr Okafor") < data.index("## Home")

    rest = [numbers[text] for text in numbers if "Okafor" not in text]
    restored = run_memdeck(
        ["--workspace", str(root), "forgotten", *(f"--restore={n}" for n in reversed(rest))], env
    )
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.count("restored where it was, under ## Health") == 2
    assert (root / "MEMORY.md").read_bytes() == SECTIONED.encode("utf-8")


def test_a_restore_keeps_to_its_neighbours_after_other_edits(tmp_path: Path) -> None:
    """The user edits the section meanwhile: the entry goes back after the entry that was
    before it, and nothing else in the file changes."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_bytes(SECTIONED.encode("utf-8"))
    store = _forget(root, "Blood type")
    edited = (
        (root / "MEMORY.md")
        .read_bytes()
        .replace(b"## Health\r\n\r\n", b"## Health\r\n\r\n- Takes vitamin D\r\n")
    )
    (root / "MEMORY.md").write_bytes(edited)
    [record] = store.retired_records()
    restored = store.restore_entry(record)
    assert restored is not None and restored.in_place
    assert restored.describe() == "where it was, under ## Health"
    expected = SECTIONED.replace("## Health\r\n\r\n", "## Health\r\n\r\n- Takes vitamin D\r\n")
    assert (root / "MEMORY.md").read_bytes() == expected.encode("utf-8")


def test_when_its_section_is_gone_the_restore_says_where_it_went(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_bytes(SECTIONED.encode("utf-8"))
    _forget(root, "penicillin")
    env = memdeck_env(None, tmp_path)
    [number] = _numbers(root, env).values()
    gone = (root / "MEMORY.md").read_bytes().decode("utf-8")
    gone = gone[: gone.index("## Health")] + gone[gone.index("## Home") :]  # by hand
    (root / "MEMORY.md").write_bytes(gone.encode("utf-8"))
    restored = run_memdeck(["--workspace", str(root), "forgotten", "--restore", number], env)
    assert restored.returncode == 0, restored.stderr
    assert "at the end of MEMORY.md (its section ## Health is gone)" in restored.stdout
    assert (root / "MEMORY.md").read_bytes() == (gone + "- Allergic to penicillin\r\n").encode()


def test_an_old_record_without_a_place_still_restores_at_the_end(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    (root / "MEMORY.md").write_text("# Memory\n\n## Health\n- Sees Dr Okafor\n", encoding="utf-8")
    workspace.history_path.parent.mkdir(parents=True, exist_ok=True)
    old = {"event": "forgotten", "at": "2026-11-01T09:00:00+00:00", "path": "MEMORY.md"}
    old |= {"lines": "4-4", "text": "Plays the cello", "raw": "- Plays the cello", "reason": ""}
    workspace.history_path.write_text(json.dumps(old) + "\n", encoding="utf-8")
    store = MemoryStore(workspace)
    [record] = store.retired_records()
    assert record.place is None
    restored = store.restore_entry(record)
    assert restored is not None and not restored.in_place
    assert restored.describe() == "at the end of MEMORY.md (the record does not say where it was)"
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == (
        "# Memory\n\n## Health\n- Sees Dr Okafor\n- Plays the cello\n"
    )


SECTION_NAMES = st.sampled_from(["## Health", "## Home", "### Garden", "## Health"])


@st.composite
def sectioned_memory(draw: st.DrawFn) -> str:
    """A MEMORY.md of sections (some with the same heading), entries and blank lines."""
    lines = [draw(st.sampled_from(["# Long-term Memory", ""]))]
    number = 0
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()) or number == 0:
            lines.append(draw(SECTION_NAMES))
        for _ in range(draw(st.integers(0, 4))):
            number += 1
            lines.append(
                draw(st.sampled_from([f"- fact {number}", f"- fact {number}\n  more", ""]))
            )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return ("\n".join(lines) + draw(st.sampled_from(["\n", ""]))).replace("\n", newline)


@settings(max_examples=150, deadline=None)
@given(text=sectioned_memory(), data=st.data())
def test_entries_forgotten_together_come_back_where_they_were(
    tmp_path_factory: pytest.TempPathFactory, text: str, data: st.DataObject
) -> None:
    """Restored top down (as the Activity tab's undo and ``forgotten --restore`` do), the file
    is byte for byte as before the forget; in any order, every entry is back in its section
    among the same neighbours."""
    root = tmp_path_factory.mktemp("ws")
    (root / "MEMORY.md").write_bytes(text.encode("utf-8"))
    store = MemoryStore(Workspace.open(root))
    entries = store.entries()
    if not entries:
        return
    chosen = data.draw(
        st.lists(st.sampled_from(entries), min_size=1, unique=True), label="forgotten"
    )
    store.retire_entries(chosen, state="forgotten")
    records = store.retired_records()
    in_order = data.draw(st.booleans(), label="top down")
    order = records if in_order else data.draw(st.permutations(records), label="order")
    for record in order:
        restored = store.restore_entry(record)
        assert restored is not None and restored.in_place
    after = (root / "MEMORY.md").read_bytes().decode("utf-8")
    if in_order:
        assert after == text
    else:
        assert [(e.text, _section_of(after, e.start)) for e in store.entries()] == [
            (e.text, _section_of(text, e.start)) for e in entries
        ]


def _section_of(text: str, line: int) -> str:
    """The last heading above line ``line`` (1-based) of ``text``."""
    headings = [
        body for body in text.replace("\r\n", "\n").split("\n")[: line - 1] if body.startswith("#")
    ]
    return headings[-1] if headings else ""


async def test_the_activity_tabs_undo_puts_an_agents_forget_back_in_place(
    engine: ChatEngine, tmp_path: Path
) -> None:
    """Another agent forgets a ``## Health`` entry over MCP (a real server process); ``u`` in
    the Activity tab brings it back under ``## Health``: the file is as it was, and the
    notification says so (as text)."""
    workspace = engine.memory.workspace.root
    memory_file = workspace / "MEMORY.md"
    # LF and no U+2028: the editor's buffer would differ from such a file as soon as loaded.
    original = SECTIONED.replace("\r\n", "\n").replace(" \u2028", "").encode("utf-8")
    memory_file.write_bytes(original)
    app = small_app(engine, tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await app_ready(pilot)
        panels = app.main_screen.memory_panels
        activity = panels.query_one(ActivityPanel)
        async with connected(workspace, tmp_path) as agent:
            forgot = await agent.call_tool("forget_memory", {"query": "Allergic to penicillin"})
            assert forgot.isError is False, forgot
        assert b"penicillin" not in memory_file.read_bytes()
        await wait_until(
            pilot,
            lambda: bool(activity.records) and activity.records[0].name == "forget_memory",
            "the forget in Activity",
        )
        await pilot.press("f7")
        await wait_until(pilot, lambda: panels.active_tab == "activity", "the Activity tab")
        await pilot.press("u")
        await wait_until(
            pilot, lambda: b"penicillin" in memory_file.read_bytes(), "the forget undone"
        )
        await wait_until(
            pilot,
            lambda: any("each where it was" in n.message for n in app._notifications),
            "the notification",
        )
    assert memory_file.read_bytes() == original


async def test_the_conflict_dialog_never_offers_a_keep_both_that_undoes_a_forget(
    engine: ChatEngine, tmp_path: Path
) -> None:
    """The issue's case in the app: three identical lines in the editor, a line typed after
    the first, an outside forget of one copy. Where the typed line belongs relative to the
    copies is unclear, so Keep both is not offered (it used to give three copies)."""
    memory_file = engine.memory.workspace.root / "MEMORY.md"
    memory_file.write_text(THREE_COPIES, encoding="utf-8")
    app = small_app(engine, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await app_ready(pilot)
        editor = app.main_screen.memory_panels.memory_editor
        await pilot.press("f5")
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md to load")
        editor.text_area.insert("- typed\n", (1, 0))  # in the buffer, after the first copy
        await wait_until(pilot, lambda: editor.is_dirty, "the edit")
        store = MemoryStore(engine.memory.workspace)
        store.retire_entries([store.entries()[2]], state="forgotten")
        editor.file_changed_on_disk()
        await wait_until(pilot, lambda: isinstance(app.screen, MemoryConflictScreen), "dialog")
        assert not app.screen.query("#conflict-both")
