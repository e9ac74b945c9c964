"""Review a proposed consolidation of MEMORY.md: what changes, the diff, accept or reject."""

from __future__ import annotations

from typing import Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.app.widgets.diff_view import DiffView
from tui.chat.consolidation import Proposal

Decision = Literal["accept", "reject"]


def describe_proposal(proposal: Proposal) -> Text:
    """``+2 added, ~1 changed, -1 removed · from 5 daily logs (2026-11-01 – 2026-11-22)``."""
    summary = Text(proposal.stats.summary, style="bold")
    logs = len(proposal.sources)
    summary.append(
        f" · from {logs} daily log{'s' if logs != 1 else ''} "
        f"({proposal.window_start.isoformat()} – {proposal.window_end.isoformat()})",
        style="dim",
    )
    for note in proposal.notes:
        summary.append(f"\nℹ {note}", style="italic")
    return summary


class ConsolidationScreen(ModalScreen[Decision | None]):
    """Shows a proposal; **a** accepts (writes MEMORY.md), **r** rejects, Escape decides later."""

    HELP = """\
## Consolidate memory

The model read your recent daily logs and proposes an updated MEMORY.md. Green lines are
added, red lines removed; entries it marks superseded leave the file but stay in
`.memdeck/history.jsonl`.

- **a**: accept — MEMORY.md is written (only if nobody changed it meanwhile) and re-indexed.
- **r**: reject — nothing changes; the rejection is recorded.
- **Escape**: decide later.
"""

    BINDINGS = [
        Binding("a", "decide('accept')", "Accept", id="consolidation.accept", tooltip="Write it"),
        Binding("r", "decide('reject')", "Reject", id="consolidation.reject", tooltip="Discard it"),
        Binding("escape", "later", "Later", id="consolidation.later", tooltip="Decide later"),
    ]

    AUTO_FOCUS = "#consolidation-diff-scroll"

    DEFAULT_CSS = """
    ConsolidationScreen {
        align: center middle;
    }
    ConsolidationScreen > Vertical {
        width: 100;
        max-width: 95%;
        height: 90%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    ConsolidationScreen #consolidation-title {
        height: 1;
        text-style: bold;
    }
    ConsolidationScreen #consolidation-summary {
        height: auto;
        margin-bottom: 1;
    }
    ConsolidationScreen #consolidation-diff-scroll {
        height: 1fr;
        background: $panel;
    }
    ConsolidationScreen Horizontal {
        height: auto;
        align-horizontal: right;
    }
    ConsolidationScreen Button {
        margin-left: 1;
    }
    """

    def __init__(self, proposal: Proposal) -> None:
        super().__init__()
        self.proposal = proposal

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Consolidate MEMORY.md?", id="consolidation-title")
            yield Static(describe_proposal(self.proposal), id="consolidation-summary")
            with VerticalScroll(id="consolidation-diff-scroll"):
                yield DiffView(self.proposal.diff, id="consolidation-diff")
            with Horizontal():
                yield Button("Later", id="consolidation-later")
                yield Button("Reject", id="consolidation-reject", variant="error")
                yield Button("Accept", id="consolidation-accept", variant="success")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        choice = (event.button.id or "").removeprefix("consolidation-")
        if choice in ("accept", "reject"):
            self.dismiss(choice)  # type: ignore[arg-type]
        else:
            self.dismiss(None)

    def action_decide(self, choice: Decision) -> None:
        self.dismiss(choice)

    def action_later(self) -> None:
        self.dismiss(None)
