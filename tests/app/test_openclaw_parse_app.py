"""A session file's header is shown as its entry's context in the Search detail, never as a
result (issue 34, item 2). Pilot over the real index and model; the OpenClaw fixture's file."""

from __future__ import annotations

import shutil

from support.openclaw_fixture import OPENCLAW_WORKSPACE
from support.pilot import SIZE, build_app, ready, searched, text_of, wait_until
from textual.widgets import Static

from tui.chat.chat import ChatEngine

SESSION = "memory/2026-03-05-orders-api-pagination.md"


async def test_the_search_detail_shows_the_session_header_above_the_match(
    engine: ChatEngine,
) -> None:
    shutil.copyfile(OPENCLAW_WORKSPACE / SESSION, engine.memory.workspace.root / SESSION)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = await searched(pilot, "orders API pagination")
        assert panel.response is not None
        first = panel.response.results[0]
        assert first.location == f"{SESSION}#L9-12"
        assert all("**Source**" not in r.text for r in panel.response.results)
        context = panel.query_one("#search-context", Static)
        await wait_until(pilot, lambda: "orders API paginates" in text_of(context), "the lines")
        shown = text_of(context)
        assert "Source: telegram" in shown and "Session: 2026-03-05 14:22:09 UTC" in shown
        assert "**Source**" not in shown  # the header as context, not as the file's bullet
        assert shown.index("Source: telegram") < shown.index("orders API paginates")


async def test_an_openclaw_workspace_suggests_user_md_once_as_plain_text(
    engine: ChatEngine,
) -> None:
    root = engine.memory.workspace.root
    for name in ("AGENTS.md", "USER.md"):
        shutil.copyfile(OPENCLAW_WORKSPACE / name, root / name)
    app = build_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        notes = [n for n in app._notifications if "USER.md" in str(n.message)]
        assert len(notes) == 1
        assert 'extra_files = ["USER.md"]' in str(notes[0].message)
        assert notes[0].markup is False  # a file name is shown as text
