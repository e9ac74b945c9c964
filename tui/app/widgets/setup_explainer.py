"""What the chat pane shows when no language model is configured: how to point memdeck at one."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown

from tui.chat.config import Config


def setup_markdown(config: Config, config_file: Path) -> str:
    """The explainer as Markdown: the problem, three ways to fix it, and the config file."""
    problem = config.llm_problem() or "no model configured"
    withheld = f"\n> **Note:** {config.withheld_key}.\n" if config.withheld_key else ""
    return f"""\
## No language model configured

Memory works without one: search, the injection preview, the daily logs and the MEMORY.md
editor are all live. To **chat**, point memdeck at an OpenAI-compatible server, then restart:

- **OpenAI**: `export OPENAI_API_KEY=sk-...` (model: gpt-4o-mini, or set `MEMDECK_MODEL`)
- **Ollama**: `export OPENAI_BASE_URL=http://localhost:11434/v1` and
  `export MEMDECK_MODEL=llama3.1` (after `ollama pull llama3.1`)
- **Any OpenAI-compatible server** (llama.cpp, LM Studio, vLLM, ...):
  `OPENAI_BASE_URL=http://HOST:PORT/v1`, `MEMDECK_MODEL=NAME`, and `MEMDECK_API_KEY=...`
  if it wants a key

Or write it in the config file `{config_file}`:

```toml
[llm]
base_url = "http://localhost:11434/v1"
model = "llama3.1"
```

`OPENAI_API_KEY` only ever goes to api.openai.com; another server gets `MEMDECK_API_KEY` or
the `api_key` written next to its `base_url`.
{withheld}
*Why this shows:* {problem}
"""


class SetupExplainer(Vertical):
    """The no-LLM explainer, shown at the top of the chat pane."""

    HELP = """\
## No model configured

memdeck needs an OpenAI-compatible chat server to answer. This panel lists the environment
variables and the config file that set one up. Everything memory-related keeps working
meanwhile: type in the message box to see what would be injected.
"""

    DEFAULT_CSS = """
    SetupExplainer {
        height: auto;
        padding: 0 1;
        margin: 0 0 1 0;
        border: round $warning;
    }
    SetupExplainer > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    SetupExplainer > Markdown > *:first-child {
        margin-top: 0;
    }
    SetupExplainer > Markdown > *:last-child {
        margin-bottom: 0;
    }
    """

    def __init__(self, config: Config, config_file: Path, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.config = config
        self.config_file = config_file

    def compose(self) -> ComposeResult:
        yield Markdown(setup_markdown(self.config, self.config_file))
