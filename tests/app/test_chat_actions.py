"""What a user of chat TUIs expects of the chat (issue 32): retry and edit-and-resend on a
focused message, copy a message or a code block, export and switch the model from the
palette, a draft that survives quitting, a config reload that makes chat work, and a resumed
session that shows what the turn showed.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

from pathlib import Path

from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, build_app, ready, send, text_of, wait_until
from textual.widgets import Static

from tui.app.screens.confirm_screen import ConfirmScreen
from tui.app.screens.model_screen import ModelScreen
from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.chat_pane import ChatPane
from tui.app.widgets.setup_explainer import SetupExplainer
from tui.chat.chat import ChatEngine
from tui.chat.compaction import SILENT_FLUSH_PROMPT
from tui.chat.drafts import DraftStore
from tui.chat.sessions import ErrorRecord

#: An answer with two code blocks.
CODE_ANSWER = (
    "Two ways:\n\n```sh\nls -la\n```\n\nor, in Python:\n\n```python\nimport os\nos.listdir()\n```\n"
)


def lines_of(message: ChatMessage, kind: str) -> list[str]:
    """The text of a message's error (``.message-error``) or notice lines."""
    return [text_of(part).strip() for part in message.query(kind).results(Static)]


async def focus_message(pane: ChatPane, index: int) -> ChatMessage:
    """Focus the message at ``index`` of those shown (as a click would)."""
    message = pane.messages[index]
    message.focus()
    return message


async def test_r_on_a_failed_answer_asks_again_and_a_restart_shows_the_same(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.error(503, "overloaded"), FakeOpenAI.text("Lisbon, in March."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        await send(pilot, "where am I going?")
        answer = pane.messages[1]
        assert lines_of(answer, ".message-error")  # server error: …
        await pilot.press("shift+tab")  # from the message box to the last message
        assert app.focused is answer
        finished = pane.turns_finished
        await pilot.press("r")  # the last answer: asked again at once
        await wait_until(pilot, lambda: pane.turns_finished > finished, "the retry")
        assert pane.transcript_text() == [
            ("user", "where am I going?"),
            ("assistant", "Lisbon, in March."),
        ]
        shown = lines_of(pane.messages[1], ".message-notice")
        assert shown == ["(asked again: the earlier attempt stays in the transcript file)"]
        assert not pane.messages[1].query(".message-error")
        users = [m for m in server.chat_requests[-1].messages if m["role"] == "user"]
        assert [m["content"] for m in users] == ["where am I going?"]

    restarted = build_app(engine)
    async with restarted.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = restarted.main_screen.chat_pane
        await wait_until(pilot, lambda: len(pane.messages) == 2, "the resumed session")
        assert pane.transcript_text() == [
            ("user", "where am I going?"),
            ("assistant", "Lisbon, in March."),
        ]
        assert lines_of(pane.messages[1], ".message-notice") == shown
        assert not pane.messages[1].query(".message-error")


async def test_e_edits_an_earlier_message_and_says_what_it_replaces(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue("Coffee, noted.", "Lisbon, noted.", "Green tea, noted.")
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        await send(pilot, "I drink coffee")
        await send(pilot, "I am going to Lisbon")
        box = pane.chat_input
        box.text = "half a thought"
        await focus_message(pane, 0)
        await pilot.press("e")
        assert box.text == "I drink coffee" and app.focused is box
        assert "Enter resends" in str(box.border_title)
        assert any("the 2 messages after it" in str(n.message) for n in app._notifications)
        await pilot.press("escape")  # cancel: the draft comes back
        assert box.text == "half a thought" and box.border_title is None

        await focus_message(pane, 2)
        await pilot.press("e")
        box.text = "I drink green tea"
        finished = pane.turns_finished
        await pilot.press("enter")
        await wait_until(pilot, lambda: pane.turns_finished > finished, "the resent message")
        assert pane.transcript_text() == [
            ("user", "I drink coffee"),
            ("assistant", "Coffee, noted."),
            ("user", "I drink green tea"),
            ("assistant", "Green tea, noted."),
        ]
        assert lines_of(pane.messages[3], ".message-notice") == [
            "(edited and sent again: 2 earlier messages replaced, kept in the transcript file)"
        ]
        users = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
        assert users == ["I drink coffee", "I drink green tea"]

        # r on an earlier message asks first: the messages after it would be replaced
        await focus_message(pane, 1)
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert isinstance(app.screen, ConfirmScreen)
        assert "the 2 messages after it" in app.screen.question
        await pilot.press("n")
        assert len(server.chat_requests) == 3  # nothing sent


async def test_c_copies_a_message_and_b_each_code_block(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text(CODE_ANSWER))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        await send(pilot, "how do I list files?")
        await focus_message(pane, 1)
        await pilot.press("c")
        assert app.clipboard == CODE_ANSWER
        await pilot.press("b")
        assert app.clipboard == "ls -la\n"
        await pilot.press("b")
        assert app.clipboard == "import os\nos.listdir()\n"
        await pilot.press("b")
        assert app.clipboard == "ls -la\n"  # round again
        notes = [str(n.message) for n in app._notifications]
        assert "copied the answer (12 lines) to the clipboard" in notes
        assert "copied code block 2 of 2 (2 lines)" in notes
        await focus_message(pane, 0)
        await pilot.press("c")
        assert app.clipboard == "how do I list files?"
        await pilot.press("x")  # a key with no meaning on a message goes to the message box
        assert app.focused is pane.chat_input and pane.chat_input.text == "x"


async def test_the_palette_exports_the_session_and_switches_the_model(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.models.append("other-model")
    server.enqueue("Alfama is lovely.", "Still lovely.")
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "tell me about Alfama")
        session = app.main_screen.active_session
        await pilot.press("ctrl+p", *"Export session as Markdown", "enter")
        exported = engine.memory.workspace.state_dir / "exports" / f"{session}.md"
        await wait_until(pilot, exported.exists, "the export")
        text = exported.read_text(encoding="utf-8")
        assert "tell me about Alfama" in text and "Alfama is lovely." in text
        assert app.clipboard == str(exported)
        await wait_until(
            pilot,
            lambda: any(str(exported) in str(n.message) for n in app._notifications),
            "the toast naming the file",
        )

        await pilot.press("ctrl+p", *"Switch model", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen), "the models")
        screen = app.screen
        assert isinstance(screen, ModelScreen)
        await wait_until(pilot, lambda: screen.choices is not None, "the server's models")
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: app.main_screen.header.model == "other-model", "header")
        await send(pilot, "and in winter?")
        assert server.chat_requests[-1].model == "other-model"


async def test_an_unsent_draft_survives_quitting(engine: ChatEngine, server: FakeOpenAI) -> None:
    server.enqueue("Noted.")
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "plan the garden")
        session = app.main_screen.active_session
        await pilot.press(*"and sow the peas in")
        await app.action_quit()
        await wait_until(pilot, lambda: not app.is_running, "the quit")

    restarted = build_app(engine)
    async with restarted.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = restarted.main_screen.chat_pane
        await wait_until(pilot, lambda: pane.session_id == session, "the resumed session")
        await wait_until(pilot, lambda: pane.chat_input.text == "and sow the peas in", "draft")
        await send(pilot, " March")
        assert pane.messages[-2].text == "and sow the peas in March"
        kept = DraftStore(engine.memory.workspace)
        await wait_until(pilot, lambda: kept.get(session) == "", "the sent draft dropped")


async def test_reloading_a_config_with_a_model_makes_chat_work(
    no_llm_engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    """Item 12: the no-model card, the 'memory only' line and the 'no model:' placeholder
    stayed after the reload made chat work."""
    config_file = tmp_path / "config.toml"
    app = build_app(no_llm_engine, tmp_path, config_file=config_file)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        assert pane.query(SetupExplainer) and str(pane.chat_input.placeholder).startswith("no model")
        config_file.write_text(
            f'[llm]\nbase_url = "{server.base_url}"\nmodel = "fake-model"\napi_key = "k"\n',
            encoding="utf-8",
        )
        app.main_screen.action_reload_config()
        await wait_until(pilot, lambda: pane.llm_problem is None, "the reload")
        await wait_until(pilot, lambda: not pane.query(SetupExplainer), "the card gone")
        assert str(pane.chat_input.placeholder).startswith("message…")
        assert text_of(pane.query_one("#chat-status", Static)).strip() == "fake-model"
        server.enqueue("Hello!")
        await send(pilot, "hello")
        assert pane.transcript_text() == [("user", "hello"), ("assistant", "Hello!")]
        assert not pane.query(SetupExplainer)
        assert "memory only" not in text_of(pane.query_one("#chat-status", Static))


async def test_a_resumed_session_shows_a_failed_memory_flush_turn_as_the_turn_did(
    engine: ChatEngine,
) -> None:
    """Item 22: an error of the silent memory-flush turn came back after a restart as an error
    line above the answer, which the turn had shown as '(compaction skipped: …)'."""
    store = engine.sessions
    session = store.create().id
    store.append_message(session, "user", "how are the peas?")
    store.append_message(session, "user", SILENT_FLUSH_PROMPT, silent=True)
    store.append(session, ErrorRecord("connection", "could not connect", silent=True))
    store.append_message(session, "assistant", "Sprouting nicely.")
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.main_screen.chat_pane
        await wait_until(pilot, lambda: len(pane.messages) == 2, "the resumed session")
        answer = pane.messages[1]
        assert answer.text == "Sprouting nicely."
        assert not answer.query(".message-error")
        assert lines_of(answer, ".message-notice") == [
            "(compaction skipped: memory flush turn: could not connect)"
        ]



async def test_a_focused_message_keeps_palette_and_quit_in_the_footer_at_80_columns(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    from textual.widgets._footer import FooterKey

    server.enqueue("Noted.")
    app = build_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        await send(pilot, "plan the garden")
        await pilot.press("shift+tab")
        assert isinstance(app.focused, ChatMessage)

        def visible() -> dict[str, str]:
            return {
                key.key: key.description
                for key in app.screen.query(FooterKey)
                if key.region.right <= 80 and key.region.width
            }

        await wait_until(pilot, lambda: "c" in visible(), "the message's keys in the footer")
        shown = visible()
        assert shown["c"] == "copy" and shown["r"] == "retry"
        assert shown["ctrl+p"] == "palette" and shown["ctrl+q"] == "quit"
        status = text_of(pane.query_one("#chat-status", Static))
        assert "e edit and resend" in status and "b code" in status  # the others, said here
