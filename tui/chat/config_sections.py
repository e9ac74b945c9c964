"""The sections of config.toml as types: each setting with its default, its doc and its
range (``[llm]``, ``[memory]``, ``[triggers]``, ``[ui]``, ``[embeddings]``, ``[mcp]``);
:mod:`tui.chat.config` reads, validates and writes them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from ..engine.options import InjectionOptions, SearchOptions
from ..engine.redaction import display_url

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


def setting(
    default: Any,
    doc: str,
    *,
    range: tuple[float, float] | None = None,
    secret: bool = False,
    **kwargs: Any,
) -> Any:
    """A setting of a section: its doc, the ``range`` every number must lie in, and whether
    it is ``secret`` (its value never appears in an error message)."""
    metadata: dict[str, Any] = {"doc": doc}
    if range is not None:
        metadata["range"] = range
    if secret:
        metadata["secret"] = True
    return field(default=default, metadata=metadata, **kwargs)


def resolved(doc: str) -> Any:
    """A value :func:`load_config` works out (never read from the file as such)."""
    return field(default=None, compare=False, metadata={"doc": doc, "resolved": True})


@dataclass(frozen=True)
class LLMSettings:
    """``[llm]``: the OpenAI-compatible server, its models, and the limits of a turn."""

    base_url: str | None = setting(
        None, "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1; unset means OpenAI."
    )
    api_key: str | None = setting(
        None,
        "The key sent to base_url. Resolved by load_config (see the module docstring); never logged.",
        secret=True,
        repr=False,
    )
    model: str | None = setting(
        None, f"Chat model; with OpenAI and no model set, {DEFAULT_OPENAI_MODEL}."
    )
    summary_model: str | None = setting(
        None, "Model for flush and compaction summaries (default: model)."
    )
    context_window: int = setting(
        32768, "The chat model's context window in tokens.", range=(256, 100_000_000)
    )
    compaction_reserve: int = setting(
        4096,
        "Compaction starts when a session's estimated tokens reach context_window minus this.",
        range=(0, 100_000_000),
    )
    compaction_keep_messages: int = setting(
        6, "Recent messages kept verbatim after a compaction.", range=(1, 10_000)
    )
    request_timeout: float = setting(
        60.0, "Seconds without an answer before a request fails.", range=(0.1, 3600)
    )
    max_retries: int = setting(
        2,
        "Retries of connection errors, 429 and 5xx (with backoff) before a turn fails.",
        range=(0, 20),
    )
    max_tool_rounds: int = setting(
        8, "Model requests per turn before a tool-calling loop is stopped.", range=(1, 100)
    )
    max_forgets_per_turn: int = setting(
        3,
        "Memories the model may forget in one turn before the user must confirm more "
        "(the app asks; `memdeck ask` refuses them unless --allow-forget).",
        range=(0, 1_000),
    )
    max_tool_argument_chars: int = setting(
        65_536,
        "Longest arguments of one tool call; longer ones are refused (a tool error the model sees).",
        range=(1_024, 16_777_216),
    )
    max_answer_chars: int = setting(
        200_000,
        "Longest answer stored and sent back; the rest is cut with a visible notice.",
        range=(1_000, 10_000_000),
    )
    temperature: float | None = setting(
        None, "Sampling temperature (server default).", range=(0, 2)
    )
    stream_usage: bool = setting(True, "Ask the server for token usage at the end of a stream.")
    api_key_source: str | None = resolved("Where api_key came from (never the key itself).")
    withheld_key: str | None = resolved(
        "Names a key that exists but was not sent to base_url, and why."
    )

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


@dataclass(frozen=True)
class MemorySettings:
    """``[memory]``: the workspace, what is searched and injected, and consolidation's reach.

    The search and injection settings take their defaults from the engine's option types
    (:class:`SearchOptions`, :class:`InjectionOptions`): each knob is defined once."""

    workspace: str | None = setting(
        None, "Memory workspace folder (default: the platform data dir)."
    )
    injection_budget: int = setting(
        _INJECTION.budget_tokens,
        "Tokens of memory injected into the system prompt per turn.",
        range=(0, 1_000_000),
    )
    memory_share: float = setting(
        _INJECTION.memory_share,
        "Largest share of the budget MEMORY.md takes when search results compete.",
        range=(0, 1),
    )
    max_results: int = setting(_SEARCH.max_results, "Search results per query.", range=(1, 1000))
    min_score: float = setting(
        _SEARCH.min_score, "Minimum relevance of a search result (0..1).", range=(0, 1)
    )
    candidate_multiplier: int = setting(
        _SEARCH.candidate_multiplier,
        "Candidates per method = max_results times this.",
        range=(1, 100),
    )
    vector_weight: float = setting(
        _SEARCH.vector_weight, "Weight of vector similarity in the hybrid score.", range=(0, 1000)
    )
    text_weight: float = setting(
        _SEARCH.text_weight, "Weight of BM25 text relevance in the hybrid score.", range=(0, 1000)
    )
    half_life_days: float = setting(
        _SEARCH.half_life_days,
        "Age at which a daily-log entry's recency factor halves.",
        range=(0.01, 36_500),
    )
    decay: bool = setting(_SEARCH.decay, "Rank recent daily-log entries higher.")
    mmr: bool = setting(_SEARCH.mmr, "Diversify results (maximal marginal relevance).")
    mmr_lambda: float = setting(
        _SEARCH.mmr_lambda, "MMR trade-off: 1 = relevance only.", range=(0, 1)
    )
    threshold: float | None = setting(
        _SEARCH.threshold,
        "Threshold mode: every result above this relevance, no fixed cap.",
        range=(0, 1),
    )
    consolidate_max_days: int = setting(
        7,
        "Consolidation reads the daily logs since the last one, at most this many days back.",
        range=(1, 3650),
    )

    def search_options(self) -> SearchOptions:
        """The engine's search knobs: every setting that is a :class:`SearchOptions` field."""
        return replace(_SEARCH, **{name: getattr(self, name) for name in _SEARCH_SETTINGS})

    def injection_options(self) -> InjectionOptions:
        """The engine's injection knobs."""
        return replace(
            _INJECTION, budget_tokens=self.injection_budget, memory_share=self.memory_share
        )


#: The ``[memory]`` settings that are search knobs (a field of both types).
_SEARCH_SETTINGS = tuple(
    f.name for f in fields(MemorySettings) if f.name in {s.name for s in fields(SearchOptions)}
)


@dataclass(frozen=True)
class TriggerSettings:
    """``[triggers]``: when sessions are flushed to the daily log and consolidation offered."""

    idle_minutes: float = setting(
        5.0,
        "Flush the active session after this many minutes without a message.",
        range=(0.1, 10_080),
    )
    flush_on_blur: bool = setting(
        True, "Flush when the terminal loses focus (the app goes to the background)."
    )
    blur_debounce_seconds: float = setting(
        3.0, "Focus must stay lost this long before the background flush runs.", range=(0, 3600)
    )
    tick_seconds: float = setting(
        15.0, "How often the trigger timer checks idle time and the date.", range=(0.01, 3600)
    )
    consolidate_every_days: int = setting(
        1,
        "Offer a consolidation of MEMORY.md every this many days (0: only on demand).",
        range=(0, 3650),
    )


@dataclass(frozen=True)
class MCPSettings:
    """``[mcp]``: what agents connected over ``memdeck mcp`` may do without the user."""

    max_forgets: int = setting(
        5,
        "Memories MCP clients together may forget (or retire with supersedes) within "
        "forget_window_minutes; more are refused with the reason (the user forgets in memdeck).",
        range=(0, 100_000),
    )
    forget_window_minutes: float = setting(
        10.0, "The window max_forgets counts over, in minutes.", range=(0.01, 525_600)
    )


@dataclass(frozen=True)
class UISettings:
    """``[ui]``: how the terminal UI looks."""

    theme: str = setting("memdeck-dark", "Theme name (built-in or from themes/).")


@dataclass(frozen=True)
class EmbeddingSettings:
    """``[embeddings]``: the local ONNX model (default) or an OpenAI-compatible endpoint."""

    provider: str = setting("local", 'Where embeddings come from: "local" (ONNX) or "openai".')
    base_url: str | None = setting(
        None, "OpenAI-compatible endpoint for provider openai; unset means OpenAI."
    )
    model: str | None = setting(
        None, "Embedding model for provider openai (default text-embedding-3-small)."
    )
    api_key: str | None = setting(
        None, "The key sent to the embeddings base_url; never logged.", secret=True, repr=False
    )
    dimensions: int | None = setting(
        None, "Vector width (needed for models memdeck does not know).", range=(1, 65_536)
    )
    batch_size: int = setting(64, "Texts per embeddings request.", range=(1, 2048))
    process: str = setting(
        "auto",
        'Where the local model runs: "helper" (a process that exits when idle), "inline" '
        '(in memdeck\'s own process) or "auto" (helper in the app, inline in commands).',
    )
    idle_exit: float = setting(
        60.0, "Seconds without embeddings before the helper process exits.", range=(1, 86_400)
    )
    api_key_source: str | None = resolved("Where the embeddings api_key came from.")

    @property
    def effective_base_url(self) -> str:
        return self.base_url or OPENAI_BASE_URL

    @property
    def effective_model(self) -> str:
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
    ) -> Any:
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
SECTION_TYPES: dict[str, type] = {
    "llm": LLMSettings,
    "memory": MemorySettings,
    "triggers": TriggerSettings,
    "ui": UISettings,
    "embeddings": EmbeddingSettings,
    "mcp": MCPSettings,
}


#: Sections whose keys repeat another section's: their settings are ``<section>_<key>`` by name.
PREFIXED = ("embeddings",)


SECTIONS = (*SECTION_TYPES, "keymap", "prices")


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
