"""The main screen's keys, help text and layout breakpoints (data, kept apart from the code
that acts on them), and how the footer fits them to the width."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual.binding import ActiveBinding, Binding

#: Screen widths (columns) at which the layout changes: below ``-medium`` the chat and the
#: memory panels share the screen (one at a time, ctrl+t flips); below ``-wide`` the session
#: list collapses (the palette's "Show sessions" brings it back over the chat).
BREAKPOINTS = [(0, "-narrow"), (88, "-medium"), (120, "-wide")]

#: What "why?" (ctrl+o) does, in the footer's tooltip and the command palette alike.
WHY_HELP = "What the last turn injected, and why: each memory's score breakdown"

#: Memory tabs with a key of their own: (tab id, key, label; help says "Open the <label> tab").
TAB_KEYS = (
    ("inject", "f2", "inject"),
    ("search", "f3", "search"),
    ("daily", "f4", "daily"),
    ("memory", "f5", "MEMORY.md"),
    ("stats", "f6", "stats"),
    ("activity", "f7", "activity"),
    ("history", "f8", "history"),
)

#: The screen's help (F1).
MAIN_HELP = """\
## memdeck

A chat whose assistant remembers. Left: your sessions. Centre: the conversation. Right: the
memory behind it — what the next message injects, search with the score breakdown, the daily
logs, MEMORY.md (editable), stats, other agents' activity and the history of every change
(F8: who made it; **u** undoes one).

Memory is written when you switch sessions, go idle, leave the terminal, the day changes or
quit (a summary goes to `memory/YYYY-MM-DD.md`); **ctrl+f** does it now.
"""

#: The footer shows the tab keys as one group, so ^p and ^q fit beside them at 80 columns;
#: the tabs are in the keys' order (F2 is the first tab).
MEMORY_TABS = Binding.Group("tabs")

#: Keys the footer leaves out, in this order, while it would not fit the width (they still
#: work, and F1 lists them): at 80 columns with MEMORY.md focused, ^p palette and ^q quit stay.
FOOTER_SPARES = ("app.new_session", "app.flush", "app.focus_chat")

#: The main screen's keys. The ids keep their ``app.`` prefix: users remap keys by id in
#: config.toml's ``[keymap]``.
MAIN_BINDINGS: list[Binding | tuple[str, str] | tuple[str, str, str]] = [
    Binding(
        "ctrl+n",
        "new_session",
        "new",
        id="app.new_session",
        tooltip="Start a new chat session (the open one is flushed to memory)",
        priority=True,
    ),
    Binding(
        "ctrl+f",
        "flush",
        "flush",
        id="app.flush",
        tooltip="Summarise the open session into today's daily log now",
        priority=True,
    ),
    Binding(
        "ctrl+r",
        "reindex",
        "reindex",
        id="app.reindex",
        tooltip="Rebuild the search index from the Markdown files",
        priority=True,
        show=False,
    ),
    Binding(
        "ctrl+o",
        "why",
        "why?",
        id="app.why",
        tooltip=WHY_HELP,
        priority=True,
    ),
    Binding(
        "ctrl+t",
        "toggle_memory",
        "chat/memory",
        id="app.toggle_memory",
        tooltip="Flip between the chat and the memory panels (on a narrow screen, the one "
        "shown fills it)",
        priority=True,
        show=False,  # the footer is full; a narrow screen's mode bar shows this key
    ),
    *(
        Binding(
            key,
            f"show_tab('{tab_id}')",
            label,
            id=f"app.show_{tab_id}",
            tooltip=f"Open the {label} tab of the memory panels",
            priority=True,
            group=MEMORY_TABS,
        )
        for tab_id, key, label in TAB_KEYS
    ),
    Binding(
        "escape",
        "focus_chat",
        "chat",
        id="app.focus_chat",
        tooltip="Back to the message box",
    ),
]


def fit_footer(
    bindings: dict[str, ActiveBinding],
    declared: dict[str | None, int],
    width: int,
    key_display: Callable[[Binding], str],
) -> dict[str, ActiveBinding]:
    """``bindings`` with ours in their ``declared`` order (a focused text field binds F6 too,
    Textual's select line, which put "f6 stats" first in the footer), and the ones
    :data:`FOOTER_SPARES` names hidden while the footer would not fit ``width``."""
    fitted = dict(sorted(bindings.items(), key=lambda item: declared.get(item[1].binding.id, -1)))
    spares = list(FOOTER_SPARES)
    while spares and footer_width(fitted, key_display) > width:
        spare = spares.pop(0)
        for key, active in fitted.items():
            if active.binding.id == spare:
                fitted[key] = active._replace(binding=replace(active.binding, show=False))
    return fitted


def footer_width(bindings: dict[str, ActiveBinding], key_display: Callable[[Binding], str]) -> int:
    """Columns the compact footer takes for ``bindings`` (a group: its keys, then its
    description)."""
    width = 0
    groups: set[str] = set()
    for active in bindings.values():
        binding = active.binding
        if not binding.show:
            continue
        width += len(key_display(binding)) + 1
        if binding.group is None:
            width += len(binding.description) + 1
        elif binding.group.description not in groups:
            groups.add(binding.group.description)
            width += len(binding.group.description) + 1
    return width
