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

[embeddings]                             # optional: local ONNX (the default) or a server
provider = "openai"                      # "local" | "openai" (any OpenAI-compatible /v1/embeddings)
base_url = "http://localhost:11434/v1"   # omit for OpenAI
model = "nomic-embed-text"
dimensions = 768                         # needed for models memdeck does not know
# process = "auto"                       # local model: "helper" | "inline" | "auto" (helper in the app)
# idle_exit = 60                         # seconds before an idle helper process exits

[ui]
theme = "memdeck-dark"

[prices]                                 # per million tokens, for `memdeck usage`
"gpt-4o-mini" = {input = 0.15, output = 0.6}

[keymap]
"app.flush" = "ctrl+f"
```

Each table is a frozen dataclass (:class:`LLMSettings`, :class:`MemorySettings`,
:class:`TriggerSettings`, :class:`UISettings`; ``[keymap]`` is a plain table) and each part of
memdeck is handed its own: the LLM client ``config.llm``, the memory engine
``config.memory``, the triggers ``config.triggers``, the UI ``config.ui`` and ``config.keymap``.
The file is read with ``tomllib`` and written back with ``tomlkit`` (comments preserved).

Precedence, lowest first: defaults, the file, the environment (``OPENAI_BASE_URL``,
``MEMDECK_MODEL``, ``MEMDECK_WORKSPACE`` and ``MEMDECK_<FIELD>`` for any field), then
``overrides`` (CLI flags).

Key safety: ``OPENAI_API_KEY`` is sent only to OpenAI's own API. A server elsewhere gets a key
only when the user configured one for it: ``api_key`` in the same file as its ``base_url``,
``MEMDECK_API_KEY``, or an explicit override. ``[embeddings]`` follows the same rule with its
own ``api_key`` / ``MEMDECK_EMBEDDINGS_API_KEY`` (or the ``[llm]`` key when both sections name
the same server). Its settings are ``embeddings_<key>`` by name (``MEMDECK_EMBEDDINGS_MODEL``).
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, fields, make_dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomlkit
import tomlkit.exceptions

from ..engine.fileio import atomic_write_text, lock_for
from ..engine.options import InjectionOptions, SearchOptions
from ..engine.redaction import display_url
from .config_sections import (
    OPENAI_BASE_URL,
    PREFIXED,
    SECTION_TYPES,
    SECTIONS,
    ConfigError,
    EmbeddingSettings,
    LLMSettings,
    MCPSettings,
    MemorySettings,
    TriggerSettings,
    UISettings,
    config_path,
    is_openai_url,
)

#: Environment variables that are not simply ``MEMDECK_<FIELD>``.
ENV_ALIASES = {"OPENAI_BASE_URL": "base_url"}


def _record_name(section: str, key: str) -> str:
    return f"{section}_{key}" if section in PREFIXED else key


_SECTION_NAMES = {
    section: [(_record_name(section, f.name), f.name) for f in fields(kind)]
    for section, kind in SECTION_TYPES.items()
}


def _record_fields() -> list[tuple[str, Any, Any]]:
    """Every section's fields side by side, each tagged with its ``section`` (resolved values
    are not), then ``keymap`` and ``source``."""
    found: list[tuple[str, Any, Any]] = []
    for section, kind in SECTION_TYPES.items():
        hints = typing.get_type_hints(kind)
        for spec in fields(kind):
            metadata = dict(spec.metadata)
            if not metadata.get("resolved"):
                metadata["section"] = section
                metadata["key"] = spec.name
            copy = field(
                default=spec.default, repr=spec.repr, compare=spec.compare, metadata=metadata
            )
            found.append((_record_name(section, spec.name), hints[spec.name], copy))
    found.append(
        (
            "keymap",
            dict[str, str],
            field(
                default_factory=dict,
                metadata={
                    "section": "keymap",
                    "doc": "Binding id -> key, e.g. app.flush = ctrl+f.",
                },
            ),
        )
    )
    found.append(
        (
            "prices",
            dict[str, dict[str, float]],
            field(
                default_factory=dict,
                metadata={
                    "section": "prices",
                    "doc": "Model -> {input = USD, output = USD} per million tokens.",
                },
            ),
        )
    )
    source_doc = {"doc": "The config file read, if any."}
    found.append(("source", Path | None, field(default=None, compare=False, metadata=source_doc)))
    return found


#: The whole file as one record, by setting name: what the environment (``MEMDECK_<NAME>``),
#: CLI overrides and :func:`save_config` address. Setting names are unique across sections.
_ConfigRecord = make_dataclass(
    "_ConfigRecord", _record_fields(), frozen=True, namespace={"__module__": __name__}
)


@dataclass(frozen=True)
class Config(_ConfigRecord):  # type: ignore[misc, valid-type]
    """Every knob of memdeck. Each part of the app is handed its section (:attr:`llm`,
    :attr:`memory`, :attr:`triggers`, :attr:`ui`, :attr:`keymap`); every setting can also be
    read by its name (``config.idle_minutes``), and ``fields(Config)`` says its ``section``.
    """

    @cached_property
    def llm(self) -> LLMSettings:
        """``[llm]``, with the key load_config chose for base_url."""
        return LLMSettings(**self._section("llm"))

    @cached_property
    def memory(self) -> MemorySettings:
        """``[memory]``."""
        return MemorySettings(**self._section("memory"))

    @cached_property
    def triggers(self) -> TriggerSettings:
        """``[triggers]``."""
        return TriggerSettings(**self._section("triggers"))

    @cached_property
    def ui(self) -> UISettings:
        """``[ui]``."""
        return UISettings(**self._section("ui"))

    @cached_property
    def embeddings(self) -> EmbeddingSettings:
        """``[embeddings]``, with the key load_config chose for its base_url."""
        return EmbeddingSettings(**self._section("embeddings"))

    @cached_property
    def mcp(self) -> MCPSettings:
        """``[mcp]``."""
        return MCPSettings(**self._section("mcp"))

    def _section(self, section: str) -> dict[str, Any]:
        return {key: getattr(self, name) for name, key in _SECTION_NAMES[section]}

    # -- shortcuts to the sections' derived views --

    @property
    def effective_base_url(self) -> str:
        """The URL requests go to."""
        return self.llm.effective_base_url

    @property
    def is_openai(self) -> bool:
        """True when requests go to OpenAI's own API."""
        return self.llm.is_openai

    @property
    def effective_model(self) -> str | None:
        """The chat model, with OpenAI's default filled in."""
        return self.llm.effective_model

    @property
    def effective_summary_model(self) -> str | None:
        """The model used for summaries."""
        return self.llm.effective_summary_model

    def llm_problem(self) -> str | None:
        """None when chat can work; else one line telling the user how to configure it."""
        return self.llm.problem(self.source)

    def search_options(self) -> SearchOptions:
        """The engine's search knobs from this config."""
        return self.memory.search_options()

    def injection_options(self) -> InjectionOptions:
        """The engine's injection knobs from this config."""
        return self.memory.injection_options()


_FILE_FIELDS = {f.name: f for f in fields(Config) if "section" in f.metadata}
#: ``(section, key as written) -> setting name`` (a prefixed setting's full name works too).
_BY_KEY = {
    (f.metadata["section"], k): f.name
    for f in _FILE_FIELDS.values()
    for k in {f.metadata.get("key", f.name), f.name}
}
_TYPES = typing.get_type_hints(Config)


def _normal_url(url: str | None) -> str:
    parts = urlsplit((url or OPENAI_BASE_URL).strip())
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path.rstrip('/')}"


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
    if tp == dict[str, dict[str, float]]:
        return "a table of {input = number, output = number} tables"
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
    if base == dict[str, dict[str, float]]:
        checked = _checked_prices(value)
    elif typing.get_origin(base) is dict:
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


def embedder_for(config: Config, *, resident: bool = False) -> Any:
    """The embedder ``config`` asks for (``[embeddings]``; ``resident`` for the app, see
    :meth:`EmbeddingSettings.embedder`); a ConfigError when it cannot be built."""
    try:
        return config.embeddings.embedder(
            timeout=min(config.request_timeout, 60.0), resident=resident
        )
    except ValueError as exc:  # EmbeddingError is not one: imported lazily below
        raise ConfigError(str(exc), config.source) from exc
    except Exception as exc:
        from ..engine.embeddings import EmbeddingError

        if isinstance(exc, EmbeddingError):
            raise ConfigError(str(exc), config.source) from exc
        raise


def workspace_root(config: Config, given: Path | str | None = None) -> Path:
    """The workspace folder the app and every command open, chosen once for all of them:
    ``given`` (``--workspace``), else ``MEMDECK_WORKSPACE``, else ``[memory] workspace`` of
    the config file (:func:`load_config` puts the variable over the file), else the platform
    data dir."""
    from ..engine.workspace import default_workspace

    chosen = given if given is not None else config.memory.workspace
    return Path(chosen).expanduser() if chosen else default_workspace()


def open_memory(
    config: Config, root: Path | str | None = None, *, create: bool = True, resident: bool = False
) -> Any:  # MemoryEngine (imported here: the config is read before the engine loads)
    """The memory engine for ``root`` (else :func:`workspace_root`'s) as every part of
    memdeck opens it: the configured embedder, search options and injection budget, so the
    app, the command line and ``memdeck mcp`` rank and inject alike. A ConfigError when the
    embedder cannot be built."""
    from ..engine.engine import MemoryEngine
    from ..engine.workspace import Workspace

    return MemoryEngine(
        Workspace.open(workspace_root(config, root), create=create),
        embedder=embedder_for(config, resident=resident),
        search_options=config.memory.search_options(),
        injection_options=config.memory.injection_options(),
    )


def _checked_prices(value: Any) -> Any:
    """``{model: {"input": x, "output": y}}`` with non-negative finite numbers, else _INVALID."""
    if not isinstance(value, dict):
        return _INVALID
    out: dict[str, dict[str, float]] = {}
    for model, price in value.items():
        if not isinstance(price, dict) or not set(price) <= {"input", "output"}:
            return _INVALID
        row: dict[str, float] = {}
        for kind, number in price.items():
            if isinstance(number, bool) or not isinstance(number, int | float):
                return _INVALID
            if not (math.isfinite(number) and 0 <= number <= 1_000_000):
                return _INVALID
            row[kind] = float(number)
        out[str(model)] = row
    return out


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
    except RecursionError:  # tomllib recurses once per nested table or array
        raise ConfigError("not valid TOML: nested too deeply to read", path) from None
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
        if section in ("keymap", "prices"):
            items: dict[str, Any] = {section: table}
        else:
            items = table
        for key, value in items.items():
            name = _BY_KEY.get((section, key))
            if name is None:
                spec = _FILE_FIELDS.get(key)
                hint = f" (it belongs in [{spec.metadata['section']}])" if spec is not None else ""
                raise ConfigError(
                    f"unknown key {key!r} in [{section}]{hint}",
                    path,
                    _key_line(text, section, key),
                )
            try:
                values[name] = check_setting(name, value, key)
            except ValueError as exc:
                bad_key: str | None = key
                if key == "keymap":
                    bad_key = next((k for k, v in table.items() if not isinstance(v, str)), None)
                raise ConfigError(str(exc), path, _key_line(text, section, bad_key)) from exc
    return values


def _env_values(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Fields set in the environment: ``name -> (value, variable)``."""
    found: dict[str, tuple[Any, str]] = {}
    for name in _FILE_FIELDS:
        if name in ("api_key", "embeddings_api_key"):
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
    values.pop("embeddings_api_key", None)
    config = Config(**values, source=file_path if file_path.exists() else None)
    config = _resolve_key(config, file_values, env, chosen.get("api_key"))
    return _resolve_embeddings_key(config, file_values, env, chosen.get("embeddings_api_key"))


def _resolve_embeddings_key(
    config: Config, file_values: Mapping[str, Any], env: Mapping[str, str], override: str | None
) -> Config:
    """The key for ``[embeddings]``'s server, by the rule of :func:`_resolve_key`: a key the
    user gave for that server (or ``[llm]``'s key when both name the same server), and
    ``OPENAI_API_KEY`` only for OpenAI's own API."""
    target = _normal_url(config.embeddings_base_url)
    key, source = None, None
    if override:
        key, source = override, "command line"
    elif env.get("MEMDECK_EMBEDDINGS_API_KEY"):
        key, source = env["MEMDECK_EMBEDDINGS_API_KEY"], "MEMDECK_EMBEDDINGS_API_KEY"
    elif file_values.get("embeddings_api_key"):
        key, source = file_values["embeddings_api_key"], "config file"
    elif config.api_key and _normal_url(config.base_url) == target:
        key, source = config.api_key, f"[llm] ({config.api_key_source})"
    elif env.get("OPENAI_API_KEY") and is_openai_url(config.embeddings_base_url):
        key, source = env["OPENAI_API_KEY"], "OPENAI_API_KEY"
    # (the record's fields are made at import time: mypy cannot see them as keywords)
    return replace(config, **{"embeddings_api_key": key, "embeddings_api_key_source": source})


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
    return replace(config, **{"api_key": key, "api_key_source": source, "withheld_key": withheld})


# -- writing --


def save_config(changes: Mapping[str, Any], path: Path | str | None = None) -> Path:
    """Write ``changes`` (setting name -> value, ``None`` removes the setting) into the config
    file.

    Only the named settings change; other lines and comments stay as they are (``tomlkit``
    edits the document in place). For ``keymap`` the given bindings are merged into the
    ``[keymap]`` table. The file is validated before it is replaced atomically, and it is
    created (and kept) readable by its owner only (0600), since it may hold an API key.
    Returns the path written.
    """
    file_path = Path(path).expanduser() if path is not None else config_path()
    file_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(file_path):
        text = file_path.read_text(encoding="utf-8") if file_path.exists() else ""
        try:
            document = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise ConfigError(f"not valid TOML: {exc}", file_path) from exc
        for name, value in changes.items():
            spec = _FILE_FIELDS.get(name)
            if spec is None:
                raise ConfigError(f"unknown setting {name!r}", file_path)
            if name in ("keymap", "prices"):
                bindings = {k: v for k, v in (value or {}).items()}
                _set_values(document, name, bindings, file_path)
                continue
            if value is not None:
                try:
                    value = check_setting(name, value)
                except ValueError as exc:
                    raise ConfigError(str(exc), file_path) from exc
            key = spec.metadata.get("key", name)
            _set_values(document, spec.metadata["section"], {key: value}, file_path)
        new_text = tomlkit.dumps(document).strip("\n") + "\n"
        try:
            tomllib.loads(new_text)
        except tomllib.TOMLDecodeError as exc:  # pragma: no cover - the writer is the bug
            raise ConfigError(f"refusing to write invalid TOML ({exc})", file_path) from exc
        if not file_path.exists():
            os.close(os.open(file_path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(file_path, 0o600)
        atomic_write_text(file_path, new_text)
    read_config_file(file_path)
    return file_path


def _set_values(
    document: tomlkit.TOMLDocument, section: str, values: Mapping[str, Any], path: Path
) -> None:
    """Set (or, for ``None``, remove) ``values`` in the ``[section]`` table of ``document``."""
    table = document.get(section)
    if table is None:
        if all(value is None for value in values.values()):
            return
        table = document[section] = tomlkit.table()
    if not isinstance(table, MutableMapping):
        raise ConfigError(f"{section!r} must be a table such as [{section}]", path)
    for key, value in values.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
