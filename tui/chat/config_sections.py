"""config.toml as pydantic models: each section's settings with their default, range and
docstring (``[llm]``, ``[memory]``, ``[triggers]``, ``[ui]``, ``[embeddings]``, ``[mcp]``),
the file as written (:class:`ConfigFile`) and the resolved :class:`Config`;
:mod:`tui.chat.config` reads, validates and writes them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar
from urllib.parse import urlsplit

import platformdirs
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..engine.markdown import parse_heading
from ..engine.options import InjectionOptions, SearchOptions
from ..engine.redaction import display_url
from ..engine.workspace import check_extra_file

if TYPE_CHECKING:
    from ..engine.embeddings import Embedder
    from ..engine.remote_embeddings import RemoteEmbedder

OPENAI_BASE_URL = "https://api.openai.com/v1"


#: Used when talking to OpenAI with a key but no model configured.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


#: The embedding model of provider "openai" when none is configured.
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


#: Sent as the bearer token when no key is configured for a server (Ollama & co. ignore it).
NO_KEY_PLACEHOLDER = "memdeck-no-key"


class ConfigError(Exception):
    """A bad configuration, worded for the user: ``file:line: what is wrong``."""

    def __init__(self, message: str, path: Path | str | None = None, line: int | None = None):
        self.path = Path(path) if path is not None else None
        self.line = line
        self.reason = message
        where = str(path) if path is not None else ""
        if where and line:
            where += f":{line}"
        super().__init__(f"{where}: {message}" if where else message)


class Section(BaseModel):
    """A table of config.toml: unknown keys, wrong types (TOML's, strictly: no ``"5"`` for a
    number, no ``1`` for true), NaN/infinity and values out of range are errors. A field with
    ``repr=False`` is a secret (its value never appears in a message); one with
    ``exclude=True`` is worked out by load_config, never read from the file."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
    )


class LLMSettings(Section):
    """``[llm]``: the OpenAI-compatible server, its models, and the limits of a turn."""

    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://localhost:11434/v1; unset means OpenAI."""
    api_key: str | None = Field(default=None, repr=False)
    """The key sent to base_url. Resolved by load_config (see tui.chat.config); never logged."""
    model: str | None = None
    """Chat model; with OpenAI and no model set, gpt-4o-mini."""
    summary_model: str | None = None
    """Model for flush and compaction summaries (default: model)."""
    context_window: int = Field(default=32768, ge=256, le=100_000_000)
    """The chat model's context window in tokens."""
    compaction_reserve: int = Field(default=4096, ge=0, le=100_000_000)
    """Compaction starts when a session's estimated tokens reach context_window minus this."""
    compaction_keep_messages: int = Field(default=6, ge=1, le=10_000)
    """Recent messages kept verbatim after a compaction."""
    request_timeout: float = Field(default=60.0, ge=0.1, le=3600)
    """Seconds without an answer before a request fails."""
    max_retries: int = Field(default=2, ge=0, le=20)
    """Retries of connection errors, 429 and 5xx (with backoff) before a turn fails."""
    max_tool_rounds: int = Field(default=8, ge=1, le=100)
    """Model requests per turn before a tool-calling loop is stopped."""
    max_forgets_per_turn: int = Field(default=3, ge=0, le=1_000)
    """Memories the model may forget in one turn before the user must confirm more (the app
    asks; `memdeck ask` refuses them unless --allow-forget)."""
    max_tool_argument_chars: int = Field(default=65_536, ge=1_024, le=16_777_216)
    """Longest arguments of one tool call; longer ones are refused (a tool error the model sees)."""
    max_answer_chars: int = Field(default=200_000, ge=1_000, le=10_000_000)
    """Longest answer stored and sent back; the rest is cut with a visible notice."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature (server default)."""
    stream_usage: bool = True
    """Ask the server for token usage at the end of a stream."""
    api_key_source: str | None = Field(default=None, exclude=True)
    """Where api_key came from (never the key itself)."""
    withheld_key: str | None = Field(default=None, exclude=True)
    """Names a key that exists but was not sent to base_url, and why."""

    @property
    def effective_base_url(self) -> str:
        """The URL requests go to."""
        return self.base_url or OPENAI_BASE_URL

    @property
    def is_openai(self) -> bool:
        """True when requests go to OpenAI's own API."""
        return is_openai_url(self.effective_base_url)

    @property
    def effective_model(self) -> str | None:
        """The chat model, with OpenAI's default filled in."""
        if self.model:
            return self.model
        return DEFAULT_OPENAI_MODEL if self.is_openai and self.api_key else None

    @property
    def effective_summary_model(self) -> str | None:
        """The model used for summaries."""
        return self.summary_model or self.effective_model

    def problem(self, config_file: Path | None = None) -> str | None:
        """None when chat can work; else one line telling the user how to configure it (in
        ``config_file``, default :func:`config_path`)."""
        where = config_file or config_path()
        if self.is_openai and not self.api_key:
            return (
                "no LLM configured: set OPENAI_API_KEY (OpenAI), or OPENAI_BASE_URL and "
                "MEMDECK_MODEL (Ollama, llama.cpp, LM Studio, vLLM), or put base_url/model "
                f"in {where}"
            )
        if not self.effective_model:
            return (
                f"no model configured for {display_url(self.effective_base_url)}: "
                f"set MEMDECK_MODEL or model in {where}"
            )
        return None


#: The engine's defaults, which the ``[memory]`` settings of the same names start from.
_SEARCH = SearchOptions()


_INJECTION = InjectionOptions()


def _heading_line(text: str) -> str:
    heading = parse_heading(text) if "\n" not in text else None
    if text and (heading is None or not heading[1]):
        raise ValueError(f'{text[:80]!r} is not a Markdown heading line such as "## Notes"')
    return text.strip()


class MemorySettings(Section):
    """``[memory]``: the workspace, what is searched and injected, and consolidation's reach.

    The search and injection settings take their defaults from the engine's option types
    (:class:`SearchOptions`, :class:`InjectionOptions`): each knob is defined once."""

    workspace: str | None = None
    """Memory workspace folder (default: the platform data dir)."""
    injection_budget: int = Field(default=_INJECTION.budget_tokens, ge=0, le=1_000_000)
    """Tokens of memory injected into the system prompt per turn."""
    memory_share: float = Field(default=_INJECTION.memory_share, ge=0, le=1)
    """Largest share of the budget MEMORY.md takes when search results compete."""
    max_results: int = Field(default=_SEARCH.max_results, ge=1, le=1000)
    """Search results per query."""
    min_score: float = Field(default=_SEARCH.min_score, ge=0, le=1)
    """Minimum relevance of a search result (0..1)."""
    candidate_multiplier: int = Field(default=_SEARCH.candidate_multiplier, ge=1, le=100)
    """Candidates per method = max_results times this."""
    vector_weight: float = Field(default=_SEARCH.vector_weight, ge=0, le=1000)
    """Weight of vector similarity in the hybrid score."""
    text_weight: float = Field(default=_SEARCH.text_weight, ge=0, le=1000)
    """Weight of BM25 text relevance in the hybrid score."""
    half_life_days: float = Field(default=_SEARCH.half_life_days, ge=0.01, le=36_500)
    """Age at which a daily-log entry's recency factor halves."""
    decay: bool = _SEARCH.decay
    """Rank recent daily-log entries higher."""
    mmr: bool = _SEARCH.mmr
    """Diversify results (maximal marginal relevance)."""
    mmr_lambda: float = Field(default=_SEARCH.mmr_lambda, ge=0, le=1)
    """MMR trade-off: 1 = relevance only."""
    threshold: float | None = Field(default=_SEARCH.threshold, ge=0, le=1)
    """Threshold mode: every result above this relevance, no fixed cap."""
    consolidate_max_days: int = Field(default=7, ge=1, le=3650)
    """Consolidation reads the daily logs since the last one, at most this many days back."""
    extra_files: list[Annotated[str, AfterValidator(check_extra_file)]] = []
    """Markdown files besides MEMORY.md and memory/ that are memory too (searched, readable
    by memory_get, watched, in the history), relative to the workspace folder, e.g.
    ["USER.md"] in an OpenClaw workspace."""
    save_heading: Annotated[str, AfterValidator(_heading_line)] = ""
    """The MEMORY.md heading saved memories go under, e.g. "## Notes" (added at the end when
    missing). Empty: the end of the file, or under "## Saved by memdeck" when the file
    ends in a section another tool writes (OpenClaw's promotions, its dreaming blocks)."""

    def search_options(self) -> SearchOptions:
        """The engine's search knobs: every setting that is a :class:`SearchOptions` field."""
        return SearchOptions(**{name: getattr(self, name) for name in _SEARCH_SETTINGS})

    def injection_options(self) -> InjectionOptions:
        """The engine's injection knobs."""
        return InjectionOptions(budget_tokens=self.injection_budget, memory_share=self.memory_share)


#: The ``[memory]`` settings that are search knobs (a field of both types).
_SEARCH_SETTINGS = tuple(
    name for name in MemorySettings.model_fields if name in {f.name for f in fields(SearchOptions)}
)


class TriggerSettings(Section):
    """``[triggers]``: when sessions are flushed to the daily log and consolidation offered."""

    idle_minutes: float = Field(default=5.0, ge=0.1, le=10_080)
    """Flush the active session after this many minutes without a message."""
    flush_on_blur: bool = True
    """Flush when the terminal loses focus (the app goes to the background)."""
    blur_debounce_seconds: float = Field(default=3.0, ge=0, le=3600)
    """Focus must stay lost this long before the background flush runs."""
    tick_seconds: float = Field(default=15.0, ge=0.01, le=3600)
    """How often the trigger timer checks idle time and the date."""
    consolidate_every_days: int = Field(default=1, ge=0, le=3650)
    """Offer a consolidation of MEMORY.md every this many days (0: only on demand)."""


class MCPSettings(Section):
    """``[mcp]``: what agents connected over ``memdeck mcp`` may do without the user."""

    max_forgets: int = Field(default=5, ge=0, le=100_000)
    """Memories MCP clients together may forget (or retire with supersedes) within
    forget_window_minutes; more are refused with the reason (the user forgets in memdeck)."""
    forget_window_minutes: float = Field(default=10.0, ge=0.01, le=525_600)
    """The window max_forgets counts over, in minutes."""


class HistorySettings(Section):
    """``[history]``: the memory's git history in the workspace folder (see docs/history.md)."""

    mode: Literal["auto", "on", "off"] = "auto"
    """Commit every memory write to git in the workspace: "auto" does unless the workspace is
    inside another git repository, "on" does there too, "off" never does."""
    remote: str = ""
    """A git URL (or a path) that memdeck sync pulls from and pushes to; empty: no sync."""
    sync_on_start: bool = False
    """Sync with the remote when the app starts."""
    sync_on_quit: bool = False
    """Sync with the remote when the app quits."""


class UISettings(Section):
    """``[ui]``: how the terminal UI looks."""

    theme: str = "memdeck-dark"
    """Theme name (built-in or from themes/)."""


class EmbeddingSettings(Section):
    """``[embeddings]``: the local ONNX model (default) or an OpenAI-compatible endpoint."""

    provider: str = "local"
    """Where embeddings come from: "local" (ONNX) or "openai"."""
    base_url: str | None = None
    """OpenAI-compatible endpoint for provider openai; unset means OpenAI."""
    model: str | None = None
    """Embedding model for provider openai (default text-embedding-3-small)."""
    api_key: str | None = Field(default=None, repr=False)
    """The key sent to the embeddings base_url; never logged."""
    dimensions: int | None = Field(default=None, ge=1, le=65_536)
    """Vector width (needed for models memdeck does not know)."""
    batch_size: int = Field(default=64, ge=1, le=2048)
    """Texts per embeddings request."""
    process: str = "auto"
    """Where the local model runs: "helper" (a process that exits when idle), "inline" (in
    memdeck's own process) or "auto" (helper in the app, inline in commands)."""
    idle_exit: float = Field(default=60.0, ge=1, le=86_400)
    """Seconds without embeddings before the helper process exits."""

    @property
    def effective_base_url(self) -> str:
        """The URL embedding requests go to."""
        return self.base_url or OPENAI_BASE_URL

    @property
    def effective_model(self) -> str:
        """The embedding model of provider openai, with the default filled in."""
        return self.model or DEFAULT_EMBEDDING_MODEL

    def problem(self) -> str | None:
        """None when the settings can work; else what is wrong, in one line."""
        if self.provider not in ("local", "openai"):
            return f'[embeddings] provider must be "local" or "openai", not {self.provider!r}'
        if self.process not in ("auto", "helper", "inline"):
            return (
                f'[embeddings] process must be "auto", "helper" or "inline", not {self.process!r}'
            )
        if self.provider == "openai" and is_openai_url(self.base_url) and not self.api_key:
            return "[embeddings] uses OpenAI but no key is set (OPENAI_API_KEY or api_key)"
        return None

    def embedder(
        self, *, timeout: float = 30.0, max_retries: int = 3, resident: bool = False
    ) -> Embedder | RemoteEmbedder:
        """The embedder these settings ask for: ``Embedder()``, a ``HelperEmbedder`` (the local
        model in a helper process) or a ``RemoteEmbedder``. ``resident``: for a process that
        stays up (the app), where ``process = "auto"`` means the helper.
        Raises ``EmbeddingError`` (a remote model of unknown width) or ``ValueError``."""
        problem = self.problem()
        if problem:
            raise ValueError(problem)
        if self.provider == "local":
            if self.process == "helper" or (self.process == "auto" and resident):
                from ..engine.embed_helper import HelperEmbedder

                return HelperEmbedder(idle_exit=self.idle_exit)
            from ..engine.embeddings import Embedder

            return Embedder()
        from ..engine.remote_embeddings import RemoteEmbedder

        return RemoteEmbedder(
            self.effective_base_url,
            self.effective_model,
            api_key=self.api_key,
            dimensions=self.dimensions,
            batch_size=self.batch_size,
            timeout=timeout,
            max_retries=max_retries,
        )


#: The tables of config.toml with settings of their own (``[keymap]`` maps binding ids to keys).
SECTION_TYPES: dict[str, type[Section]] = {
    "llm": LLMSettings,
    "memory": MemorySettings,
    "triggers": TriggerSettings,
    "ui": UISettings,
    "embeddings": EmbeddingSettings,
    "mcp": MCPSettings,
    "history": HistorySettings,
}


#: Sections whose keys repeat another section's: their settings are ``<section>_<key>`` by name.
PREFIXED = ("embeddings",)


SECTIONS = (*SECTION_TYPES, "keymap", "prices")


def _input_and_output_only(price: dict[str, float]) -> dict[str, float]:
    if not set(price) <= {"input", "output"}:
        raise ValueError("a price has an input and an output, nothing else")
    return price


#: ``[prices]``: model -> ``{input = USD, output = USD}`` per million tokens.
Prices = dict[
    str,
    Annotated[
        dict[str, Annotated[float, Field(ge=0, le=1_000_000)]],
        AfterValidator(_input_and_output_only),
    ],
]


class _Tables(Section):
    """The tables the file and :class:`Config` both hold as tables."""

    embeddings: EmbeddingSettings = EmbeddingSettings()
    """``[embeddings]`` (in a Config: with the key load_config chose for its base_url)."""
    keymap: dict[str, str] = {}
    """Binding id -> key, e.g. app.flush = ctrl+f."""
    prices: Prices = {}
    """Model -> {input = USD, output = USD} per million tokens."""


class ConfigFile(_Tables):
    """config.toml as written: each table validated by its section's model."""

    llm: LLMSettings = LLMSettings()
    memory: MemorySettings = MemorySettings()
    triggers: TriggerSettings = TriggerSettings()
    ui: UISettings = UISettings()
    mcp: MCPSettings = MCPSettings()
    history: HistorySettings = HistorySettings()


_S = TypeVar("_S", bound=Section)


class Config(
    LLMSettings,
    MemorySettings,
    TriggerSettings,
    UISettings,
    MCPSettings,
    HistorySettings,
    _Tables,
):
    """Every knob of memdeck, resolved. Each part of the app is handed its section
    (:attr:`llm`, :attr:`memory`, :attr:`triggers`, :attr:`ui`, :attr:`embeddings`,
    :attr:`mcp`, :attr:`keymap`); every setting outside ``[embeddings]`` (whose keys repeat
    ``[llm]``'s) can also be read by its name (``config.idle_minutes``)."""

    source: Path | None = Field(default=None, exclude=True)
    """The config file read, if any."""

    @property
    def llm(self) -> LLMSettings:
        """``[llm]``, with the key load_config chose for base_url."""
        return self._section(LLMSettings)

    @property
    def memory(self) -> MemorySettings:
        """``[memory]``."""
        return self._section(MemorySettings)

    @property
    def triggers(self) -> TriggerSettings:
        """``[triggers]``."""
        return self._section(TriggerSettings)

    @property
    def ui(self) -> UISettings:
        """``[ui]``."""
        return self._section(UISettings)

    @property
    def mcp(self) -> MCPSettings:
        """``[mcp]``."""
        return self._section(MCPSettings)

    @property
    def history(self) -> HistorySettings:
        """``[history]``."""
        return self._section(HistorySettings)

    def _section(self, kind: type[_S]) -> _S:
        return kind.model_construct(**{name: getattr(self, name) for name in kind.model_fields})

    def llm_problem(self) -> str | None:
        """None when chat can work; else one line telling the user how to configure it."""
        return self.problem(self.source)


def is_openai_url(url: str | None) -> bool:
    """True for OpenAI's own API (the only place ``OPENAI_API_KEY`` may go)."""
    if not url:
        return True
    parts = urlsplit(url.strip())
    return parts.scheme == "https" and (parts.hostname or "").lower() == "api.openai.com"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$MEMDECK_CONFIG`` or ``config.toml`` in the platform config dir."""
    env = os.environ if env is None else env
    if env.get("MEMDECK_CONFIG"):
        return Path(env["MEMDECK_CONFIG"]).expanduser()
    return Path(platformdirs.user_config_dir("memdeck")) / "config.toml"
