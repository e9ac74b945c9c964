"""memdeck mcp beside the running app on one workspace: the real server process (spawned by
the SDK's client) writes, the app's watcher follows, the Activity tab shows the calls, and a
forget made by the other agent is undone from the app."""

from __future__ import annotations

from pathlib import Path

from support.mcp_support import connected
from support.pilot import (
    app_ready,
    small_app,
    small_app_engine,  # noqa: F401 (the engine fixture)
    small_app_server,  # noqa: F401 (the server fixture)
    wait_until,
)

from tui.app.panels.activity_panel import ActivityPanel
from tui.chat.chat import ChatEngine


async def test_an_agents_save_and_forget_show_in_the_app_and_undo_works(
    engine: ChatEngine, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    workspace = engine.memory.workspace.root
    memory_file = workspace / "MEMORY.md"
    async with app.run_test(size=(140, 40)) as pilot:
        await app_ready(pilot)
        watcher = app.main_screen.watcher
        assert watcher is not None
        await wait_until(pilot, watcher.ready.is_set, "the watcher")
        panels = app.main_screen.memory_panels
        editor = panels.memory_editor
        activity = panels.query_one(ActivityPanel)
        async with connected(workspace, tmp_path) as agent:
            saved = await agent.call_tool(
                "save_memory", {"content": "The release train leaves on Thursdays"}
            )
            assert saved.isError is False, saved
            await wait_until(
                pilot,
                lambda: "release train" in editor.text_area.text,
                "the save in the MEMORY.md editor",
            )
            await wait_until(
                pilot,
                lambda: [r.name for r in activity.records] == ["save_memory"],
                "the save in the Activity tab",
            )
            assert activity.records[0].client == "test-agent 9.1"

            forgot = await agent.call_tool("forget_memory", {"query": "release train Thursdays"})
            assert forgot.isError is False
            assert "release train" not in memory_file.read_text()
        await wait_until(
            pilot, lambda: "release train" not in editor.text_area.text, "the forget in the editor"
        )
        await wait_until(
            pilot, lambda: activity.records[0].name == "forget_memory", "the forget in Activity"
        )
        await pilot.press("f7")
        await wait_until(pilot, lambda: panels.active_tab == "activity", "the Activity tab")
        assert activity.selected() is activity.records[0]  # newest first
        await pilot.press("u")
        await wait_until(
            pilot, lambda: "release train" in memory_file.read_text(), "the forget undone"
        )
        await wait_until(
            pilot, lambda: "release train" in editor.text_area.text, "the editor following"
        )
    assert memory_file.read_text().count("The release train leaves on Thursdays") == 1
