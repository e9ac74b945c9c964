"""Choose the chat model: the configured ones and the server's (``GET /models``)."""

from __future__ import annotations

from typing import Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.chat.workbench import ModelChoices


class ModelSource(Protocol):
    """Where the models come from (the workbench)."""

    async def models(self) -> ModelChoices:
        """The model in use, the configured ones and the server's."""


def model_options(choices: ModelChoices) -> list[Option]:
    """One option per model, the configured ones first; the one in use is marked."""
    options = []
    for name in dict.fromkeys([*choices.configured, *choices.served]):
        where = "config" if name in choices.configured else "server"
        mark = "● " if name == choices.current else "  "
        label = Text.assemble(mark, name, (f"  {where}", "dim"))  # names are text, not markup
        options.append(Option(label, id=name))
    return options


class ModelScreen(ModalScreen[str | None]):
    """The models to switch to: Enter returns the one chosen, Escape returns None."""

    HELP = """\
## Switch model

The models in `config.toml` and the ones the server lists. **Enter** sends the next turns to
the one highlighted (the transcript records the change); **Escape** keeps the current one.
Reloading the config brings the configured model back.
"""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="model.cancel", tooltip="Keep the current model"),
    ]

    DEFAULT_CSS = """
    ModelScreen {
        align: center middle;
    }
    ModelScreen > Vertical {
        width: 64;
        max-width: 100%;
        height: auto;
        max-height: 80%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ModelScreen #model-note {
        height: auto;
        color: $text-muted;
        margin-bottom: 1;
    }
    ModelScreen OptionList {
        height: auto;
        max-height: 20;
    }
    """

    def __init__(self, source: ModelSource) -> None:
        super().__init__()
        self.source = source
        #: What the source answered (None while asking).
        self.choices: ModelChoices | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Switch model: asking the server for its models…", id="model-note")
            yield OptionList(id="model-list")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self._load()

    @work(exclusive=True, exit_on_error=False)
    async def _load(self) -> None:
        choices = await self.source.models()
        self.choices = choices
        listing = self.query_one(OptionList)
        listing.add_options(model_options(choices))
        names = [option.id for option in listing.options]
        if choices.current in names:
            listing.highlighted = names.index(choices.current)
        note = f"Switch model (now {choices.current or 'none'}) · Enter chooses · Esc keeps it"
        if choices.problem:
            note += f"\nthe server's models could not be listed: {choices.problem}"
        self.query_one("#model-note", Static).update(Text(note))

    @on(OptionList.OptionSelected, "#model-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
