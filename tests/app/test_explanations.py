"""Explaining every memory: why? covers MEMORY.md, each score component is shown and defined.

Pilot tests against the fake loopback OpenAI server, the real SQLite index and the real model;
fixtures and helpers in ``tests/app/conftest.py`` and ``tests/support/pilot.py``.
"""

from __future__ import annotations

from support.fakeopenai import FakeOpenAI
from support.pilot import SIZE, build_app, ready, send, text_of, wait_until
from textual.widgets import Static

from tui.chat.chat import ChatEngine
from tui.engine.inject import ALWAYS_INJECTED


async def test_why_explains_an_answer_found_in_memory_md(
    engine: ChatEngine, server: FakeOpenAI
) -> None:
    """The answer is a MEMORY.md entry: why? lists it with its breakdown, says it is always
    injected, and the turn counts it as relevant (it was in the prompt)."""
    server.enqueue(FakeOpenAI.text("Green tea."))
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "do I drink green tea or coffee?")
        session = app.main_screen.active_session
        assert session is not None
        (recorded,) = engine.sessions.load(session).injections
        # line 5 of the deck's MEMORY.md: "- Drinks green tea, never coffee"
        assert "MEMORY.md#L5-5" in [r.location for r in recorded.results]
        await pilot.press("ctrl+o")
        panel = app.main_screen.memory_panels.injection_panel
        await wait_until(pilot, lambda: panel.turn == recorded, "the turn's injection")
        items = text_of(panel.query_one("#inject-cuts", Static))
        assert "no relevant memory was injected" not in items
        assert "MEMORY.md#L5-5" in items and ALWAYS_INJECTED in items
        assert "relevance" in items and "decay" in items and "vector" in items
        assert "already in Long-term Memory" not in items
        budget = text_of(panel.query_one("#inject-budget", Static))
        assert "0 relevant" not in budget
        meta = text_of(app.main_screen.chat_pane.messages[-1].query_one(".message-meta", Static))
        assert "0 relevant" not in meta
