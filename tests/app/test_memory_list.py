"""MemoryList: the rows of an injection's memories, rebuilt only when they change."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult

from tui.app.widgets.memory_list import MemoryList
from tui.engine.workspace import Workspace


def rows(*texts: str) -> list[tuple[Text, str | None]]:
    return [(Text(text, style="bold"), f"MEMORY.md#L{n}-{n}") for n, text in enumerate(texts, 3)]


async def test_the_same_rows_again_are_not_rebuilt(tmp_path: Path) -> None:
    """An option list measures and draws all its rows again when they are replaced (23 ms for
    an injection's cuts, each time the index changed): the same rows keep their options."""
    (tmp_path / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    workspace = Workspace.open(tmp_path)

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield MemoryList(workspace)

    async with Host().run_test(size=(60, 20)) as pilot:
        memories = pilot.app.query_one(MemoryList)
        memories.show(rows("Likes tea", "Has a dog"), {"MEMORY.md#L3-3": "s1"})
        memories.highlighted = 1
        before = list(memories.options)
        memories.show(rows("Likes tea", "Has a dog"), {"MEMORY.md#L3-3": "s1"})
        assert list(memories.options) == before
        assert all(a is b for a, b in zip(memories.options, before, strict=True))
        assert memories.highlighted == 1
        memories.show(rows("Likes tea", "Has a cat"), {"MEMORY.md#L3-3": "s1"})
        assert memories.plain == "Likes tea\nHas a cat"
        assert memories.highlighted == 1, "the same locations keep the highlighted row"
        memories.show(rows("Likes tea", "Has a cat"), {})
        assert memories.options[0] is not before[0], "the origins changed: rebuilt"
