"""memdeck's configuration: ``config.toml``, overridden by the environment and by CLI flags.

```toml
[llm]
base_url = "http://localhost:11434/v1"   # any OpenAI-compatible server; omit for OpenAI
model = "llama3.1"
summary_model = "llama3.2:1b"            # optional, cheaper model for flush summaries
api_key = "..."                          # a key for *this* base_url (file is kept 0600)
context_window = 32768

[memory]
injection_budget = 2000
min_score = 0.3

[triggers]
idle_minutes = 5
flush_on_blur = true
consolidate_every_days = 1               # offer a MEMORY.md consolidation daily; 0 = on demand only

[ui]
theme = "memdeck-dark"

[keymap]
"app.flush" = "ctrl+f"
```

Precedence, lowest first: defaults, the file, the environment (``OPENAI_BASE_URL``,
``MEMDECK_MODEL``, ``MEMDECK_WORKSPACE`` and ``MEMDECK_<FIELD>`` for any field), then
``overrides`` (CLI flags).

Key safety: ``OPENAI_API_KEY`` is sent only to OpenAI's own API. A server elsewhere gets a key
only when the user configured one for it: ``api_key`` in the same file as its ``base_url``,
``MEMDECK_API_KEY``, or an explicit override.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from ..engine.fileio import atomic_write_text, lock_for
from ..engine.inject import InjectionOptions
from ..engine.search import SearchOptions

OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Used when talking to OpenAI with a key but no model configured.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: Sent as the bearer token when no key is configured for a server (Ollama & co. ignore it).
NO_KEY_PLACEHOLDER = "memdeck-no-key"

SECTIONS = ("llm", "memory", "triggers", "ui", "keymap")

#: Environment variables that are not simply ``MEMDECK_<FIELD>``.
ENV_ALIASES = {"OPENAI_BASE_URL": "base_url"}


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


def _field(
    section: str,
    default: Any,
    doc: str,
    *,
    range: tuple[float, float] | None = None,
    secret: bool = False,
    **kwargs: Any,
) -> Any:
    """A setting: its TOML table, its doc, the ``range`` every number must lie in, and whether
    it is ``secret`` (its value never appears in an error message)."""
    metadata: dict[str, Any] = {"section": section, "doc": doc}
    if range is not None:
        metadata["range"] = range
    if secret:
        metadata["secret"] = True
    return field(default=default, metadata=metadata, **kwargs)


@dataclass(frozen=True)
class Config:
    """Every knob of memdeck. Each field says what it does; ``section`` is its TOML table."""

    # -- [llm] --
    base_url: str | None = _field(
        "llm",
        None,
        "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1; unset means OpenAI.",
    )
    api_key: str | None = _field(
        "llm",
        None,
        "The key sent to base_url. Resolved by load_config (see the module docstring); never logged.",
        secret=True,
        repr=False,
    )
    model: str | None = _field(
        "llm", None, f"Chat model; with OpenAI and no model set, {DEFAULT_OPENAI_MODEL}."
    )
    summary_model: str | None = _field(
        "llm", None, "Model for flush and compaction summaries (default: model)."
    )
    context_window: int = _field(
        "llm", 32768, "The chat model's context window in tokens.", range=(256, 100_000_000)
    )
    compaction_reserve: int = _field(
        "llm",
        4096,
        "Compaction starts when a session's estimated tokens reach context_window minus this.",
        range=(0, 100_000_000),
    )
    compaction_keep_messages: int = _field(
        "llm",
        6,
        "Recent messages kept verbatim after a compaction.",
        range=(1, 10_000),
    )
    request_timeout: float = _field(
        "llm",
        60.0,
        "Seconds without an answer before a request fails.",
        range=(0.1, 3600),
    )
    max_retries: int = _field(
        "llm",
        2,
        "Retries of connection errors, 429 and 5xx (with backoff) before a turn fails.",
        range=(0, 20),
    )
    max_tool_rounds: int = _field(
        "llm",
        8,
        "Model requests per turn before a tool-calling loop is stopped.",
        range=(1, 100),
    )
    max_tool_argument_chars: int = _field(
        "llm",
        65_536,
        "Longest arguments of one tool call; longer ones are refused (a tool error the model sees).",
        range=(1_024, 16_777_216),
    )
    max_answer_chars: int = _field(
        "llm",
        200_000,
        "Longest answer stored and sent back; the rest is cut with a visible notice.",
        range=(1_000, 10_000_000),
    )
    temperature: float | None = _field(
        "llm", None, "Sampling temperature (server default).", range=(0, 2)
    )
    stream_usage: bool = _field(
        "llm", True, "Ask the server for token usage at the end of a stream."
    )
    # -- [memory] --
    workspace: str | None = _field(
        "memory", None, "Memory workspace folder (default: the platform data dir)."
    )
    injection_budget: int = _field(
        "memory",
        2000,
        "Tokens of memory injected into the system prompt per turn.",
        range=(0, 1_000_000),
    )
    memory_share: float = _field(
        "memory",
        0.6,
        "Largest share of the budget MEMORY.md takes when search results compete.",
        range=(0, 1),
    )
    max_results: int = _field("memory", 6, "Search results per query.", range=(1, 1000))
    min_score: float = _field(
        "memory", 0.3, "Minimum relevance of a search result (0..1).", range=(0, 1)
    )
    candidate_multiplier: int = _field(
        "memory",
        4,
        "Candidates per method = max_results times this.",
        range=(1, 100),
    )
    vector_weight: float = _field(
        "memory", 0.7, "Weight of vector similarity in the hybrid score.", range=(0, 1000)
    )
    text_weight: float = _field(
        "memory", 0.3, "Weight of BM25 text relevance in the hybrid score.", range=(0, 1000)
    )
    half_life_days: float = _field(
        "memory",
        30.0,
        "Age at which a daily-log entry's recency factor halves.",
        range=(0.01, 36_500),
    )
    decay: bool = _field("memory", True, "Rank recent daily-log entries higher.")
    mmr: bool = _field("memory", False, "Diversify results (maximal marginal relevance).")
    mmr_lambda: float = _field("memory", 0.7, "MMR trade-off: 1 = relevance only.", range=(0, 1))
    threshold: float | None = _field(
        "memory",
        None,
        "Threshold mode: every result above this relevance, no fixed cap.",
        range=(0, 1),
    )
    consolidate_max_days: int = _field(
        "memory",
        7,
        "Consolidation reads the daily logs since the last one, at most this many days back.",
        range=(1, 3650),
    )
    # -- [triggers] --
    idle_minutes: float = _field(
        "triggers",
        5.0,
        "Flush the active session after this many minutes without a message.",
        range=(0.1, 10_080),
    )
    flush_on_blur: bool = _field(
        "triggers", True, "Flush when the terminal loses focus (the app goes to the background)."
    )
    blur_debounce_seconds: float = _field(
        "triggers",
        3.0,
        "Focus must stay lost this long before the background flush runs.",
        range=(0, 3600),
    )
    tick_seconds: float = _field(
        "triggers",
        15.0,
        "How often the trigger timer checks idle time and the date.",
        range=(0.01, 3600),
    )
    consolidate_every_days: int = _field(
        "triggers",
        1,
        "Offer a consolidation of MEMORY.md every this many days (0: only on demand).",
        range=(0, 3650),
    )
    # -- [ui] --
    theme: str = _field("ui", "memdeck-dark", "Theme name (built-in or from themes/).")
    # -- [keymap] --
    keymap: dict[str, str] = field(
        default_factory=dict,
        metadata={"section": "keymap", "doc": "Binding id -> key, e.g. app.flush = ctrl+f."},
    )
    # -- resolved, not read from the file --
    api_key_source: str | None = field(
        default=None,
        compare=False,
        metadata={"doc": "Where api_key came from (never the key itself)."},
    )
    withheld_key: str | None = field(
        default=None,
        compare=False,
        metadata={"doc": "Names a key that exists but was not sent to base_url, and why."},
    )
    source: Path | None = field(
        default=None, compare=False, metadata={"doc": "The config file read, if any."}
    )

    # -- derived views --

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

    def llm_problem(self) -> str | None:
        """None when chat can work; else one line telling the user how to configure it."""
        where = self.source or config_path()
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

    def search_options(self) -> SearchOptions:
        """The engine's search knobs from this config."""
        return SearchOptions(
            max_results=self.max_results,
            min_score=self.min_score,
            candidate_multiplier=self.candidate_multiplier,
            vector_weight=self.vector_weight,
            text_weight=self.text_weight,
            half_life_days=self.half_life_days,
            decay=self.decay,
            mmr=self.mmr,
            mmr_lambda=self.mmr_lambda,
            threshold=self.threshold,
        )

    def injection_options(self) -> InjectionOptions:
        """The engine's injection knobs from this config."""
        return InjectionOptions(budget_tokens=self.injection_budget, memory_share=self.memory_share)

    def field_docs(self) -> dict[str, str]:
        """``name -> doc`` of every field that can be set in the file (for help screens)."""
        return {f.name: f.metadata["doc"] for f in _FILE_FIELDS.values()}


_FILE_FIELDS = {f.name: f for f in fields(Config) if "section" in f.metadata}
_TYPES = typing.get_type_hints(Config)
_RESOLVED_FIELDS = ("api_key_source", "withheld_key", "source")


def is_openai_url(url: str | None) -> bool:
    """True for OpenAI's own API (the only place ``OPENAI_API_KEY`` may go)."""
    if not url:
        return True
    parts = urlsplit(url.strip())
    return parts.scheme == "https" and (parts.hostname or "").lower() == "api.openai.com"


_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
_URL_QUERY = re.compile(r"(?P<base>[A-Za-z][A-Za-z0-9+.-]*://[^\s?#]*)\?[^\s#)]*")


def display_url(text: str) -> str:
    """``text`` with every URL's user:password and query string (where keys hide) removed:
    what a message may show of a URL."""
    text = _URL_CREDENTIALS.sub(r"\g<scheme>[redacted]@", text)
    return _URL_QUERY.sub(r"\g<base>?[redacted]", text)


def _normal_url(url: str | None) -> str:
    parts = urlsplit((url or OPENAI_BASE_URL).strip())
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path.rstrip('/')}"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$MEMDECK_CONFIG`` or ``config.toml`` in the platform config dir."""
    env = os.environ if env is None else env
    if env.get("MEMDECK_CONFIG"):
        return Path(env["MEMDECK_CONFIG"]).expanduser()
    return Path(platformdirs.user_config_dir("memdeck")) / "config.toml"


# -- reading --


def _key_line(text: str, section: str | None, key: str | None) -> int | None:
    """The line where ``[section]`` (and ``key`` inside it) is written, for error messages."""
    current: str | None = None
    section_line = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = re.match(r"^\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1).strip().strip('"')
            if current == section:
                section_line = number
            continue
        if key is None or current != section:
            continue
        match = re.match(r"""^(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_.-]+))\s*=""", line)
        if match and key in (match.group(1), match.group(2), match.group(3)):
            return number
    return section_line


def _type_name(tp: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return names.get(args[0], str(args[0]))
    if typing.get_origin(tp) is dict:
        return "a table of strings"
    return names.get(tp, str(tp))


def _is_exactly(base: Any, value: Any) -> bool:
    """``value`` is a ``bool``/``str``/``int`` (an int that is not a bool) as ``base`` asks."""
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return base in (bool, str) and isinstance(value, base)


def _toml_type(value: Any) -> str:
    """What kind of TOML value ``value`` is (for errors that must not show the value)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _shown(value: Any) -> str:
    """``value`` as an error message shows it: short, on one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def setting_range(name: str) -> tuple[float, float] | None:
    """The ``(lowest, highest)`` value a numeric setting accepts (None for other settings)."""
    return _FILE_FIELDS[name].metadata.get("range")


def _expected(name: str) -> str:
    expected = _type_name(_TYPES[name])
    bounds = setting_range(name)
    if bounds is not None:
        low, high = (f"{b:,}" if float(b).is_integer() else f"{b:g}" for b in bounds)
        expected += f" from {low} to {high}"
    return expected


def check_setting(name: str, value: Any, label: str | None = None) -> Any:
    """``value`` checked against the setting's type and range (converted: an int for a float
    setting becomes a float); raises ValueError saying what ``label`` (default: the setting's
    name) must be. A secret setting's value never appears in the message."""
    tp = _TYPES[name]
    label = label or name
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    optional = origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)
    base = args[0] if optional else tp
    if value is None and optional:
        return None
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    checked: Any = _INVALID
    if typing.get_origin(base) is dict:
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            checked = dict(value)
    elif _is_exactly(base, value):
        checked = value
    elif base is float and is_number:
        checked = float(value)
    bounds = setting_range(name)
    if checked is not _INVALID and bounds is not None:
        in_range = math.isfinite(checked) and bounds[0] <= checked <= bounds[1]
        checked = checked if in_range else _INVALID
    if checked is not _INVALID:
        return checked
    expected = _expected(name)
    if _FILE_FIELDS.get(name) is not None and _FILE_FIELDS[name].metadata.get("secret"):
        raise ValueError(f"{label} must be {expected}, not {_toml_type(value)}")
    raise ValueError(f"{label} must be {expected}, not {_shown(value)}")


_INVALID = object()


def _parse_env_value(name: str, raw: str) -> Any:
    """The typed value of an environment variable; text that does not parse is returned as is,
    for :func:`check_setting` to refuse with the usual message."""
    tp = _TYPES[name]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = args[0] if args and typing.get_origin(tp) in (typing.Union, types.UnionType) else tp
    lowered = raw.strip().lower()
    try:
        if base is bool and lowered in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return lowered in ("1", "true", "yes", "on")
        if base is int:
            return int(raw)
        if base is float:
            return float(raw)
        if typing.get_origin(base) is dict:
            return json.loads(raw)
    except ValueError:
        pass
    return raw


def read_config_file(path: Path) -> dict[str, Any]:
    """The fields set in a config file, validated (unknown keys and wrong types are errors)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file ({exc})", path) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError(f"not valid TOML: {message}", path, line) from exc
    values: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            spec = _FILE_FIELDS.get(section)
            home = f"[{spec.metadata['section']}]" if spec else "a table such as [llm]"
            raise ConfigError(
                f"{section!r} must be inside {home}", path, _key_line(text, None, section)
            )
        if section not in SECTIONS:
            raise ConfigError(
                f"unknown section [{section}] (known: {', '.join(SECTIONS)})",
                path,
                _key_line(text, section, None),
            )
        if section == "keymap":
            items: dict[str, Any] = {"keymap": table}
        else:
            items = table
        for key, value in items.items():
            spec = _FILE_FIELDS.get(key)
            if spec is None or spec.metadata["section"] != section:
                hint = f" (it belongs in [{spec.metadata['section']}])" if spec is not None else ""
                raise ConfigError(
                    f"unknown key {key!r} in [{section}]{hint}",
                    path,
                    _key_line(text, section, key),
                )
            try:
                values[key] = check_setting(key, value)
            except ValueError as exc:
                bad_key = key
                if key == "keymap":
                    bad_key = next((k for k, v in table.items() if not isinstance(v, str)), None)
                raise ConfigError(str(exc), path, _key_line(text, section, bad_key)) from exc
    return values


def _env_values(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Fields set in the environment: ``name -> (value, variable)``."""
    found: dict[str, tuple[Any, str]] = {}
    for name in _FILE_FIELDS:
        if name == "api_key":
            continue  # MEMDECK_API_KEY is resolved with the other keys
        variable = f"MEMDECK_{name.upper()}"
        if env.get(variable):
            found[name] = (env[variable], variable)
    for variable, name in ENV_ALIASES.items():
        if env.get(variable) and name not in found:
            found[name] = (env[variable], variable)
    parsed: dict[str, tuple[Any, str]] = {}
    for name, (raw, variable) in found.items():
        try:
            parsed[name] = (check_setting(name, _parse_env_value(name, raw)), variable)
        except ValueError as exc:
            raise ConfigError(f"{variable}: {exc}") from exc
    return parsed


def load_config(
    path: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read ``path`` (default :func:`config_path`), apply the environment, then ``overrides``.

    ``overrides`` maps field names to values (CLI flags); ``None`` values are ignored. Raises
    :class:`ConfigError` naming the file and line (or the variable) of the first problem.
    """
    env = os.environ if env is None else env
    file_path = Path(path).expanduser() if path is not None else config_path(env)
    file_values = read_config_file(file_path)
    values: dict[str, Any] = dict(file_values)
    for name, (value, _variable) in _env_values(env).items():
        values[name] = value
    chosen = {k: v for k, v in (overrides or {}).items() if v is not None}
    for name, value in chosen.items():
        if name not in _FILE_FIELDS:
            raise ConfigError(f"unknown setting {name!r}")
        try:
            values[name] = check_setting(name, value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    values.pop("api_key", None)
    config = Config(**values, source=file_path if file_path.exists() else None)
    return _resolve_key(config, file_values, env, chosen.get("api_key"))


def _resolve_key(
    config: Config, file_values: Mapping[str, Any], env: Mapping[str, str], override: str | None
) -> Config:
    """Pick the key for the effective base URL, never handing OPENAI_API_KEY to another server."""
    target = _normal_url(config.base_url)
    withheld = None
    key, source = None, None
    file_key_applies = (
        file_values.get("api_key") and _normal_url(file_values.get("base_url")) == target
    )
    if override:
        key, source = override, "command line"
    elif env.get("MEMDECK_API_KEY"):
        key, source = env["MEMDECK_API_KEY"], "MEMDECK_API_KEY"
    elif file_key_applies:
        key, source = file_values["api_key"], "config file"
    elif env.get("OPENAI_API_KEY") and config.is_openai:
        key, source = env["OPENAI_API_KEY"], "OPENAI_API_KEY"
    if key is None and env.get("OPENAI_API_KEY") and not config.is_openai:
        withheld = (
            f"OPENAI_API_KEY is only sent to {OPENAI_BASE_URL}, "
            f"not to {display_url(config.effective_base_url)}; "
            "set MEMDECK_API_KEY or api_key in config.toml if this server needs a key"
        )
    elif key is None and file_values.get("api_key") and not file_key_applies:
        withheld = (
            "the api_key in the config file belongs to "
            f"{display_url(file_values.get('base_url') or OPENAI_BASE_URL)}, "
            f"not to {display_url(config.effective_base_url)}"
        )
    return replace(config, api_key=key, api_key_source=source, withheld_key=withheld)


# -- writing --


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {value!r} to TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _set_line(lines: list[str], section: str, key: str, rendered: str | None) -> None:
    """Replace, insert or (``rendered`` None) remove ``key = ...`` in ``[section]``."""
    start = end = None
    current = None
    for index, raw in enumerate(lines):
        header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]", raw)
        if header:
            if current == section and end is None:
                end = index
            current = header.group(1).strip().strip('"')
            if current == section:
                start, end = index, None
            continue
        if current == section:
            match = re.match(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_.-]+))\s*=""", raw)
            if match and key in (match.group(1), match.group(2), match.group(3)):
                if rendered is None:
                    del lines[index]
                else:
                    lines[index] = f"{_toml_key(key)} = {rendered}"
                return
    if rendered is None:
        return
    if start is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines.extend([f"[{section}]", f"{_toml_key(key)} = {rendered}"])
        return
    insert_at = len(lines) if end is None else end
    while insert_at > start + 1 and not lines[insert_at - 1].strip():
        insert_at -= 1
    lines.insert(insert_at, f"{_toml_key(key)} = {rendered}")


def save_config(changes: Mapping[str, Any], path: Path | str | None = None) -> Path:
    """Write ``changes`` (field name -> value, ``None`` removes the setting) into the config file.

    Only the named settings change; other lines and comments stay as they are. For ``keymap``
    the given bindings are merged into the ``[keymap]`` table. The file is validated before it
    is replaced atomically, and it is created (and kept) readable by its owner only (0600),
    since it may hold an API key. Returns the path written.
    """
    file_path = Path(path).expanduser() if path is not None else config_path()
    file_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(file_path):
        text = file_path.read_text(encoding="utf-8") if file_path.exists() else ""
        lines = text.splitlines()
        for name, value in changes.items():
            spec = _FILE_FIELDS.get(name)
            if spec is None:
                raise ConfigError(f"unknown setting {name!r}", file_path)
            if name == "keymap":
                for binding, key in (value or {}).items():
                    _set_line(lines, "keymap", binding, None if key is None else _toml_value(key))
                continue
            if value is not None:
                try:
                    value = check_setting(name, value)
                except ValueError as exc:
                    raise ConfigError(str(exc), file_path) from exc
            rendered = None if value is None else _toml_value(value)
            _set_line(lines, spec.metadata["section"], name, rendered)
        new_text = "\n".join(lines).strip("\n") + "\n"
        try:
            tomllib.loads(new_text)
        except tomllib.TOMLDecodeError as exc:  # pragma: no cover - our writer is the bug
            raise ConfigError(f"refusing to write invalid TOML ({exc})", file_path) from exc
        if not file_path.exists():
            os.close(os.open(file_path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(file_path, 0o600)
        atomic_write_text(file_path, new_text)
    read_config_file(file_path)
    return file_path
