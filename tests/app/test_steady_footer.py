"""The footer is rebuilt when the keys it shows change, and only then (a rebuild at each
turn's start and end repainted the bottom line in the frames the answer streams in)."""

from __future__ import annotations

from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, build_app, ready, send, wait_until
from textual.widgets._footer import FooterKey

from tui.app.widgets.chat_message import ChatMessage
from tui.chat.chat import ChatEngine


async def test_the_footer_keeps_its_keys_through_a_turn_and_follows_the_focus(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    server.enqueue(FakeOpenAI.text(["Lisbon, ", "in March."]))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.main_screen.chat_pane
        pane.focus_input()
        await pilot.pause()
        keys = list(app.screen.query(FooterKey))
        assert keys
        await send(pilot, "where am I going?")
        await pilot.pause()
        assert list(app.screen.query(FooterKey)) == keys, "the same key widgets, not rebuilt"

        pane.messages[-1].focus()  # a message's keys: copy, retry
        await wait_until(
            pilot,
            lambda: "copy" in {key.description for key in app.screen.query(FooterKey)},
            "the focused message's keys in the footer",
        )
        assert isinstance(app.screen.focused, ChatMessage)
        pane.focus_input()
        await wait_until(
            pilot,
            lambda: "copy" not in {key.description for key in app.screen.query(FooterKey)},
            "the message box's keys back",
        )
