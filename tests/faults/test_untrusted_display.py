"""Issue 29 A.1 and A.2: text from memory, a file name, a model or an MCP client is shown as
text in every view: never parsed as markup, never sent to the terminal as a control sequence.

The whole app under Pilot (a real workspace, index and activity log), a real ``memdeck``
process in a pseudo-terminal for what reaches the terminal, and the real CLI.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from rich.segment import Segment
from support.chat_support import memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI
from support.pilot import app_ready, send, small_app, text_of, wait_until
from support.pty_app import PtyApp, strip_escapes
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.widgets._toast import Toast

from tui.app.app import MemdeckApp
from tui.app.panels.activity_panel import ActivityPanel
from tui.app.visible_controls import VisibleControls
from tui.chat.chat import ChatEngine
from tui.engine.visible import control_pictures, visible_text
from tui.engine.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
SIZE = (140, 40)
#: Client names that are markup: one breaks the parser, one is a live "quit" link.
MARKUP_CLIENTS = ("[/]", "[@click=app.quit] evil")
#: An OSC "set window title", a blink SGR and an OSC 52 clipboard write.
TITLE = "\x1b]2;PWNED\x07"
HOSTILE_MEMORY = (
    "# Long-term Memory\n\n"
    f"- Likes tea {TITLE} and \x1b[5mblinking\x1b[0m\n"
    "- Clipboard \x1b]52;c;cHduZWQ=\x07 and a lone \x9b CSI\n"
)
SHOWN_TITLE = "␛]2;PWNED␇"
#: What a view built on Rich/Textual text shows: they drop BEL, BS, VT, FF and CR themselves.
SHOWN_OSC = "␛]2;PWNED"


def activity_line(client: str, query: str = "tea") -> str:
    """One record of ``.memdeck/activity.jsonl`` as ``memdeck mcp`` writes it."""
    record = {
        "at": "2026-11-22T09:00:00+00:00",
        "client": client,
        "kind": "tool",
        "name": "memory_search",
        "arguments": f"query={json.dumps(query)}",
        "ok": True,
        "summary": "no results",
        "query": query,
    }
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_activity(root: Path, clients: tuple[str, ...]) -> None:
    state = root / ".memdeck"
    state.mkdir(exist_ok=True)
    (state / "activity.jsonl").write_text(
        "".join(activity_line(c) for c in clients), encoding="utf-8"
    )


def drawn(widget: Widget) -> list[tuple[Widget, list[list[Segment]]]]:
    """The lines ``widget`` and each widget inside it draw now, through the app's line
    filters (what the compositor sends to the terminal)."""
    return [
        (part, [list(strip) for strip in part.render_lines(Region(0, 0, *part.outer_size))])
        for part in widget.walk_children(with_self=True)
        if isinstance(part, Widget) and part.outer_size.area
    ]


def shown_text(widget: Widget) -> str:
    return "\n".join("".join(s.text for s in line) for _, lines in drawn(widget) for line in lines)


def assert_shown_as_text(widget: Widget, expected: str) -> None:
    """``widget`` shows ``expected``, emits no control character, keeps every line's width,
    and has no clickable action anywhere."""
    text = shown_text(widget)
    assert expected in " ".join(text.split()), text
    for part, lines in drawn(widget):
        shown = "".join(s.text for line in lines for s in line)
        assert not re.search("[\x00-\x1f\x7f-\x9f]", shown), (part, shown)
        assert all(Segment.get_line_length(line) == part.outer_size.width for line in lines)
        assert not [s for line in lines for s in line if s.style and s.style.meta.get("@click")]


# -- A.1: markup --------------------------------------------------------------------------


async def show_tab(pilot: Pilot[Any], key: str, widget_id: str) -> Widget:
    app = pilot.app
    await pilot.press(key)
    widget = app.screen.query_one(f"#{widget_id}")
    await wait_until(pilot, lambda: widget.size.width > 0, f"{widget_id} on screen")
    return widget


async def test_client_names_that_are_markup_are_shown_as_text(
    engine: ChatEngine, tmp_path: Path
) -> None:
    """A client named ``[/]`` stopped the app at every start (MarkupError); one named
    ``[@click=app.quit] evil`` was a link that quit the app."""
    write_activity(engine.memory.workspace.root, MARKUP_CLIENTS)
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        panel = app.main_screen.query_one(ActivityPanel)
        summary = await show_tab(pilot, "f7", "activity-summary")
        await wait_until(pilot, lambda: len(panel.records) == 2, "the activity log")
        assert isinstance(summary, Static)
        assert text_of(summary).strip() == "2 calls by [/], [@click=app.quit] evil"
        assert_shown_as_text(summary, "2 calls by [/], [@click=app.quit] evil")
        calls = app.screen.query_one("#activity-calls", DataTable)
        assert_shown_as_text(calls, "[@click=app.quit] evil")
        await pilot.click(summary, offset=(20, 0))  # on the would-be link
        await pilot.pause(0.2)
        assert app.is_running and app.return_code is None


async def test_a_toast_from_a_file_name_with_markup_shows_it_as_text(
    engine: ChatEngine, tmp_path: Path
) -> None:
    """ctrl+r's toast names the file it skipped: ``[x="]`` in that name crashed the app."""
    root = engine.memory.workspace.root
    name = 'memory/2026-11-01 [x="].md'
    (root / "memory").mkdir(exist_ok=True)
    (root / name).write_bytes(b"# 2026-11-01\n\n- one bad byte: \xff\n")
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        app.clear_notifications()
        await pilot.press("ctrl+r")
        toast = await toast_saying(pilot, "undecodable")
        assert '2026-11-01 [x="].md' in toast_text(toast)
        assert_shown_as_text(toast, "[x=")
        assert app.is_running


async def toast_saying(pilot: Pilot[Any], words: str) -> Toast:
    """The toast that shows ``words``, once it is drawn."""

    def find() -> Toast | None:
        return next((t for t in pilot.app.screen.query(Toast) if words in toast_text(t)), None)

    await wait_until(pilot, lambda: find() is not None, f"a toast saying {words!r}")
    toast = find()
    assert toast is not None
    return toast


def toast_text(toast: Toast) -> str:
    """A toast's words, without its border."""
    return " ".join(shown_text(toast).replace("▌", " ").split())


async def test_every_notify_is_text_whatever_its_caller_asks(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        app.clear_notifications()
        # A widget's notify defaults to markup=True in Textual: the app's is text anyway.
        app.main_screen.chat_pane.notify("[@click=app.quit]x[/] [b]bold", title="[/]")
        toast = await toast_saying(pilot, "bold")
        assert_shown_as_text(toast, "[@click=app.quit]x[/] [b]bold")
        assert "[/]" in shown_text(toast)


# -- A.2: terminal control, in process ----------------------------------------------------


def test_visible_text_shows_every_control_and_keeps_layout() -> None:
    assert visible_text(TITLE) == SHOWN_TITLE
    assert visible_text("a\x9bb\x7f") == "a\\u009bb\\u007f"
    assert visible_text("one\r\ntwo\tthree\rover") == "one\r\ntwo\tthree␍over"
    assert visible_text("a\nb\tc", keep_line_breaks=False) == "a␊b␉c"
    plain = "nothing to show ✓ ü"
    assert visible_text(plain) is plain
    assert control_pictures("\x1b[5m\tx\x7f\x9b") == "␛[5m\tx␡\x9b"


def test_the_line_filter_keeps_a_line_s_width_and_its_neighbours_in_place() -> None:
    line = [Segment("│"), Segment(f"tea {TITLE}"), Segment("     "), Segment("│")]
    shown = VisibleControls().apply(line, background=None)  # type: ignore[arg-type]
    assert "".join(s.text for s in shown) == f"│tea {SHOWN_TITLE}   │"
    assert Segment.get_line_length(shown) == Segment.get_line_length(line)
    full = [Segment("ab\x1bc"), Segment("│")]  # no blank to give back: the text's end goes
    shown = VisibleControls().apply(full, background=None)  # type: ignore[arg-type]
    assert "".join(s.text for s in shown) == "ab␛│"
    clean = [Segment("plain")]
    assert VisibleControls().apply(clean, background=None) is clean  # type: ignore[arg-type]


async def test_no_view_emits_a_control_character_from_memory(
    server: FakeOpenAI, engine: ChatEngine, tmp_path: Path
) -> None:
    """The editor, the Search preview, the Daily view, the Activity detail, a chat answer and
    a toast show ``␛]2;PWNED␇``; MEMORY.md keeps its bytes."""
    root = engine.memory.workspace.root
    memory_md = root / "MEMORY.md"
    memory_md.write_text(HOSTILE_MEMORY, encoding="utf-8")
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / "2026-11-21.md").write_text(
        f"# 2026-11-21\n\n## Daily Summary\n- Read about tea {TITLE}\n", encoding="utf-8"
    )
    write_activity(root, (f"agent {TITLE}",))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        editor = app.main_screen.memory_panels.memory_editor
        await pilot.press("f5")
        await wait_until(pilot, lambda: editor.base is not None, "MEMORY.md loaded")
        await pilot.pause(0.1)
        assert_shown_as_text(editor.text_area, f"Likes tea {SHOWN_TITLE} and ␛[5mblinking")
        assert_shown_as_text(editor.text_area, "a lone \\u009b CSI")
        assert editor.text_area.text == HOSTILE_MEMORY  # the buffer is the file's bytes

        search = app.main_screen.memory_panels.search_panel
        await pilot.press("f3")
        search.query_one("#search-query").focus()
        await pilot.press(*"tea", "enter")
        context = app.screen.query_one("#search-context", Static)
        await wait_until(pilot, lambda: "PWNED" in shown_text(context), "the preview")
        assert_shown_as_text(context, f"Likes tea {SHOWN_OSC} and ␛[5mblinking")

        daily = app.main_screen.memory_panels.daily_tree
        await pilot.press("f4")
        await wait_until(pilot, lambda: bool(daily.logs), "the daily logs")
        daily.show_entry("memory/2026-11-21.md", 4)
        view = daily.query_one("#daily-view")
        await wait_until(pilot, lambda: "PWNED" in shown_text(view), "the daily view")
        assert_shown_as_text(view, f"Read about tea {SHOWN_OSC}")

        await pilot.press("f7")
        title = app.screen.query_one("#activity-detail-title", Static)
        await wait_until(pilot, lambda: "PWNED" in shown_text(title), "the activity detail")
        assert_shown_as_text(title, f"agent {SHOWN_OSC}")

        app.clear_notifications()
        app.notify(f"saved {TITLE}")
        assert_shown_as_text(await toast_saying(pilot, "saved"), f"saved {SHOWN_OSC}")

        server.enqueue(FakeOpenAI.text(f"Noted: {TITLE} done."))
        await send(pilot, "hello")
        answer = app.main_screen.chat_pane.messages[-1]
        await wait_until(pilot, lambda: "Noted" in shown_text(answer), "the answer")
        assert_shown_as_text(answer, f"Noted: {SHOWN_OSC} done.")
    assert memory_md.read_text(encoding="utf-8") == HOSTILE_MEMORY


# -- A.2: what reaches a real terminal ----------------------------------------------------


def run_in_a_pty(root: Path, env: dict[str, str], keys: list[tuple[bytes, bytes]]) -> bytes:
    """``memdeck --workspace root`` in a 140x40 pseudo-terminal: once it is up, send each key
    and wait for its marker on screen, then ctrl+q twice; return every byte it wrote."""
    with PtyApp(root, {**env, "TERM": "xterm-256color"}) as app:
        app.expect(b"Inject", 60)
        for key, marker in keys:
            for _ in range(3):  # a key sent while the app was still busy is sent again
                app.send(key)
                if app.read_until(marker, 15):
                    break
            else:
                raise AssertionError(app.text[-3000:])
        app.send(b"\x11")
        app.read_until(b"\x00never", 3)
        if app.process.poll() is None:
            app.send(b"\x11")
        app.process.wait(timeout=30)
    return app.raw


def test_a_real_terminal_gets_no_escape_sequence_from_memory_or_a_client(tmp_path: Path) -> None:
    """In a pseudo-terminal: MEMORY.md with an OSC title, a blink and an OSC 52 clipboard
    write, a client named ``[@click=app.quit] evil`` (and one named ``[/]``): the app starts,
    shows them as text, and no such sequence is written."""
    root = tmp_path / "ws"
    Workspace.open(root)
    (root / "MEMORY.md").write_text(HOSTILE_MEMORY, encoding="utf-8")
    write_activity(root, (*MARKUP_CLIENTS, f"osc {TITLE}"))
    keys = [
        (b"\x1b[15~", "Likes tea ␛]2;PWNED␇".encode()),  # F5: the editor
        (b"\x1b[18~", b"[@click=app.quit] evil"),  # F7: the activity
    ]
    seen = run_in_a_pty(root, memdeck_env(None, tmp_path), keys)
    assert b"\x1b]2;PWNED" not in seen
    assert b"\x1b]52" not in seen
    assert b"\x1b[5m" not in seen
    assert b"\xc2\x9b" not in seen  # the lone C1 CSI, as UTF-8
    assert b"MarkupError" not in seen
    shown = strip_escapes(seen)
    assert "␛]2;PWNED␇".encode() in shown
    assert "␛]52;c;cHduZWQ=␇".encode() in shown
    assert b"[@click=app.quit] evil" in shown and b"[/]" in shown
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == HOSTILE_MEMORY


# -- A.2: the command line -----------------------------------------------------------------


def test_cli_output_shows_controls_and_its_json_stays_exact(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    (root / "MEMORY.md").write_text(HOSTILE_MEMORY, encoding="utf-8")
    env = memdeck_env(None, tmp_path)
    for command, shown in (
        (["search", "tea"], [SHOWN_TITLE, "␛[5mblinking"]),
        (["search", "Clipboard"], ["␛]52;c;cHduZWQ=␇", "lone \\u009b CSI"]),
        (["inject", "tea"], [SHOWN_TITLE, "lone \\u009b CSI"]),
    ):
        done = run_memdeck(["--workspace", str(root), *command], env)
        assert done.returncode == 0, done.stderr
        assert all(words in done.stdout for words in shown), done.stdout
        for stream in (done.stdout, done.stderr):
            assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", stream), stream
    for query, raw in (("tea", TITLE), ("Clipboard", "\x9b")):
        done = run_memdeck(["--workspace", str(root), "search", query, "--json"], env)
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", done.stdout)
        texts = [r["text"] for r in json.loads(done.stdout)["results"]]
        assert any(raw in text for text in texts)  # JSON carries the bytes, escaped


def test_cli_errors_naming_a_file_show_its_controls(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace.open(root)
    (root / "MEMORY.md").write_text("# Long-term Memory\n", encoding="utf-8")
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / f"2026-11-01 {TITLE}.md").write_bytes(b"# x\n\n- bad \xff byte\n")
    done = run_memdeck(["--workspace", str(root), "reindex"], memdeck_env(None, tmp_path))
    assert "\x1b" not in done.stdout + done.stderr
    assert SHOWN_TITLE in done.stdout + done.stderr


async def test_a_client_name_with_controls_in_the_summary(
    engine: ChatEngine, tmp_path: Path
) -> None:
    write_activity(engine.memory.workspace.root, (f"osc {TITLE}",))
    app: MemdeckApp = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        summary = await show_tab(pilot, "f7", "activity-summary")
        await wait_until(pilot, lambda: "osc" in shown_text(summary), "the summary")
        assert_shown_as_text(summary, f"1 calls by osc {SHOWN_OSC}")


async def test_a_flush_outcome_with_markup_is_shown_as_text(
    engine: ChatEngine, tmp_path: Path
) -> None:
    """The Stats tab's flush table is a Rich table: a str cell there was markup."""
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await app_ready(pilot)
        app.main_screen.memory_panels.record_flush("idle", "failed: [/] [@click=app.quit]x")
        flushes = await show_tab(pilot, "f6", "stats-flushes")
        await wait_until(pilot, lambda: "failed" in shown_text(flushes), "the flush row")
        assert_shown_as_text(flushes, "failed: [/] [@click=app.quit]x")


#: Calls that parse a str argument as markup (Textual's Static/Label/Button/Option and
#: ``update``, DataTable and Rich table ``add_row``).
MARKUP_SINKS = {"Static", "Label", "Button", "Option", "update", "add_row"}


def built_string(node: ast.expr) -> bool:
    """An expression that builds a str from parts (an f-string, ``+``/``%``, ``.format``,
    ``.join``), possibly in one branch of a conditional."""
    if isinstance(node, ast.IfExp):
        return built_string(node.body) or built_string(node.orelse)
    if isinstance(node, ast.JoinedStr | ast.BinOp):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("format", "join")
    )


def test_no_view_hands_a_built_string_to_a_markup_parser() -> None:
    """Text built from data (an f-string with a client's name, a file name, an outcome) is
    given to a widget as a ``Text``, never as a str that Textual or Rich read as markup."""
    found = []
    for path in sorted((ROOT / "tui" / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            markup_off = any(
                k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in node.keywords
            )
            if name in MARKUP_SINKS and not markup_off:
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(arg)[:60]}"
                    for arg in node.args
                    if built_string(arg)
                ]
    assert not found, "\n".join(found)
