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

Each table is a frozen pydantic model (:class:`LLMSettings`, :class:`MemorySettings`,
:class:`TriggerSettings`, :class:`UISettings`, :class:`EmbeddingSettings`, :class:`MCPSettings`
in :mod:`tui.chat.config_sections`, each setting with its range and docstring; ``[keymap]`` and
``[prices]`` are plain tables) and each part of memdeck is handed its own: the LLM client
``config.llm``, the memory engine ``config.memory``, the triggers ``config.triggers``, the UI
``config.ui`` and ``config.keymap``. The file is read with ``tomllib`` and validated by
:class:`ConfigFile`, and written back with ``tomlkit`` (comments preserved).

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

import contextlib
import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import tomlkit
import tomlkit.exceptions
from pydantic import ValidationError

from ..engine.fileio import atomic_write_text, lock_for
from ..engine.redaction import display_url
from .config_sections import (
    OPENAI_BASE_URL,
    PREFIXED,
    SECTION_TYPES,
    SECTIONS,
    Config,
    ConfigError,
    ConfigFile,
    EmbeddingSettings,
    HistorySettings,
    LLMSettings,
    MCPSettings,
    MemorySettings,
    Section,
    TriggerSettings,
    UISettings,
    config_path,
    is_openai_url,
)

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo
    from pydantic_core import ErrorDetails

    from ..engine.embeddings import Embedder
    from ..engine.engine import MemoryEngine
    from ..engine.remote_embeddings import RemoteEmbedder

__all__ = [
    "Config",
    "ConfigError",
    "ConfigFile",
    "EmbeddingSettings",
    "LLMSettings",
    "HistorySettings",
    "MCPSettings",
    "MemorySettings",
    "TriggerSettings",
    "UISettings",
    "check_setting",
    "config_path",
    "embedder_for",
    "load_config",
    "open_memory",
    "save_config",
    "workspace_root",
]

#: Environment variables that are not simply ``MEMDECK_<FIELD>``.
ENV_ALIASES = {"OPENAI_BASE_URL": "base_url"}


@dataclass(frozen=True)
class Setting:
    """One setting as the environment (``MEMDECK_<NAME>``), CLI overrides and
    :func:`save_config` address it: ``key`` in the ``[section]`` of the file."""

    name: str
    section: str
    key: str
    #: The model that validates it.
    owner: type[Section]

    @property
    def info(self) -> FieldInfo:
        """Its pydantic field: type, default, range, docstring."""
        return self.owner.model_fields[self.key]

    @property
    def secret(self) -> bool:
        """A secret's value never appears in a message (nor in a repr)."""
        return not self.info.repr


def _settings() -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for section, kind in SECTION_TYPES.items():
        for key, info in kind.model_fields.items():
            if not info.exclude:  # a value load_config works out
                name = f"{section}_{key}" if section in PREFIXED else key
                found[name] = Setting(name, section, key, kind)
    for table in ("keymap", "prices"):
        found[table] = Setting(table, table, table, ConfigFile)
    return found


#: Every setting of the file by name (names are unique: :data:`PREFIXED` sections' are
#: ``<section>_<key>``).
_FILE_FIELDS = _settings()
#: ``(section, key as written) -> setting``.
_BY_KEY = {(s.section, s.key): s for s in _FILE_FIELDS.values()}


def _normal_url(url: str | None) -> str:
    parts = urlsplit((url or OPENAI_BASE_URL).strip())
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path.rstrip('/')}"


# -- checking --

_TYPE_WORDS: dict[object, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
}


_TABLE_WORDS = {
    "keymap": "a table of strings",
    "prices": "a table of {input = number, output = number} tables",
}


def _expected(setting: Setting) -> str:
    """What a setting must be, in words: its type and range."""
    if setting.name in _TABLE_WORDS:
        return _TABLE_WORDS[setting.name]
    annotation = setting.info.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    expected = _TYPE_WORDS.get(annotation, str(annotation))
    if typing.get_origin(annotation) is list:
        expected = "an array of strings"
    bounds = {
        bound: getattr(rule, bound)
        for rule in setting.info.metadata
        for bound in ("ge", "le")
        if hasattr(rule, bound)
    }
    if bounds:
        low, high = (
            f"{b:,}" if float(b).is_integer() else f"{b:g}" for b in (bounds["ge"], bounds["le"])
        )
        expected += f" from {low} to {high}"
    return expected


def _toml_type(value: object) -> str:
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


def _shown(value: object) -> str:
    """``value`` as an error message shows it: short, on one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(setting: Setting, value: object, label: str) -> str:
    shown = _toml_type(value) if setting.secret else _shown(value)
    return f"{label} must be {_expected(setting)}, not {shown}"


def check_setting(name: str, value: object, label: str | None = None, *, strict: bool = True) -> Any:
    """``value`` checked against the setting's type and range (converted: an int for a float
    setting becomes a float; with ``strict=False``, text as the environment gives it is
    parsed); raises ValueError saying what ``label`` (default: the setting's name) must be.
    A secret setting's value never appears in the message."""
    setting = _FILE_FIELDS[name]
    try:
        checked = setting.owner.model_validate({setting.key: value}, strict=strict)
    except ValidationError:
        raise ValueError(_invalid(setting, value, label or name)) from None
    return getattr(checked, setting.key)


def embedder_for(config: Config, *, resident: bool = False) -> Embedder | RemoteEmbedder:
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

    chosen = given if given is not None else config.workspace
    return Path(chosen).expanduser() if chosen else default_workspace()


def open_memory(
    config: Config, root: Path | str | None = None, *, create: bool = True, resident: bool = False
) -> MemoryEngine:
    """The memory engine for ``root`` (else :func:`workspace_root`'s) as every part of
    memdeck opens it: the configured embedder, search options and injection budget, so the
    app, the command line and ``memdeck mcp`` rank and inject alike. A ConfigError when the
    embedder cannot be built."""
    # imported here: the config is read before the engine loads
    from ..engine.engine import MemoryEngine
    from ..engine.workspace import Workspace

    engine = MemoryEngine(
        Workspace.open(
            workspace_root(config, root), create=create, extra_files=tuple(config.extra_files)
        ),
        embedder=embedder_for(config, resident=resident),
        search_options=config.search_options(),
        injection_options=config.injection_options(),
        history=config.history.mode,
    )
    engine.store.save_heading = config.save_heading or None
    return engine


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


def _file_problem(
    error: ErrorDetails, data: Mapping[str, Any], text: str, path: Path
) -> ConfigError:
    """One of pydantic's errors about the file, worded for the user, at its line."""
    section, *inside = (str(part) for part in error["loc"])
    table = data[section]
    if not isinstance(table, dict):
        setting = _FILE_FIELDS.get(section)
        home = f"[{setting.section}]" if setting else "a table such as [llm]"
        line = _key_line(text, None, section)
        return ConfigError(f"{section!r} must be inside {home}", path, line)
    if not inside:
        known = ", ".join(SECTIONS)
        line = _key_line(text, section, None)
        return ConfigError(f"unknown section [{section}] (known: {known})", path, line)
    key = inside[0]
    line = _key_line(text, section, key)
    if section in _TABLE_WORDS:
        return ConfigError(_invalid(_FILE_FIELDS[section], table, section), path, line)
    if error["type"] == "extra_forbidden":
        setting = _FILE_FIELDS.get(key)
        hint = f" (it belongs in [{setting.section}])" if setting is not None else ""
        return ConfigError(f"unknown key {key!r} in [{section}]{hint}", path, line)
    if error["type"] == "value_error":  # a setting's own check (extra_files, save_heading)
        return ConfigError(f"{key}: {error['msg'].removeprefix('Value error, ')}", path, line)
    return ConfigError(_invalid(_BY_KEY[section, key], table[key], key), path, line)


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings set in a config file, by name, validated (unknown keys and wrong types
    are errors naming the file and the line)."""
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
    try:
        checked = ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems = (_file_problem(error, data, text, path) for error in exc.errors())
        raise min(problems, key=lambda problem: problem.line or math.inf) from None
    values: dict[str, Any] = {}
    for section, table in data.items():
        if section in _TABLE_WORDS:
            values[section] = getattr(checked, section)
            continue
        for key in table:
            setting = _BY_KEY.get((section, key))
            if setting is None:  # a value load_config works out, such as api_key_source
                line = _key_line(text, section, key)
                raise ConfigError(f"unknown key {key!r} in [{section}]", path, line)
            values[setting.name] = getattr(getattr(checked, section), key)
    return values


def _env_values(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Settings set in the environment: ``name -> (value, variable)``."""
    found: dict[str, tuple[str, str]] = {}
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
        value: object = raw
        if name in _TABLE_WORDS:  # a table is given as JSON; other text is refused below
            with contextlib.suppress(ValueError):
                value = json.loads(raw)
        try:
            parsed[name] = (check_setting(name, value, strict=False), variable)
        except ValueError as exc:
            raise ConfigError(f"{variable}: {exc}") from exc
    return parsed


def load_config(
    path: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read ``path`` (default :func:`config_path`), apply the environment, then ``overrides``.

    ``overrides`` maps setting names to values (CLI flags); ``None`` values are ignored.
    Raises :class:`ConfigError` naming the file and line (or the variable) of the first
    problem.
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
    embeddings = {
        setting.key: values.pop(name)
        for name, setting in _FILE_FIELDS.items()
        if setting.section == "embeddings" and name in values
    }
    config = Config(
        **values,
        embeddings=EmbeddingSettings(**embeddings),
        source=file_path if file_path.exists() else None,
    )
    config = _resolve_key(config, file_values, env, chosen.get("api_key"))
    return _resolve_embeddings_key(config, file_values, env, chosen.get("embeddings_api_key"))


def _resolve_embeddings_key(
    config: Config, file_values: Mapping[str, Any], env: Mapping[str, str], override: str | None
) -> Config:
    """The key for ``[embeddings]``'s server, by the rule of :func:`_resolve_key`: a key the
    user gave for that server (or ``[llm]``'s key when both name the same server), and
    ``OPENAI_API_KEY`` only for OpenAI's own API."""
    target = _normal_url(config.embeddings.base_url)
    key = None
    if override:
        key = override
    elif env.get("MEMDECK_EMBEDDINGS_API_KEY"):
        key = env["MEMDECK_EMBEDDINGS_API_KEY"]
    elif file_values.get("embeddings_api_key"):
        key = file_values["embeddings_api_key"]
    elif config.api_key and _normal_url(config.base_url) == target:
        key = config.api_key
    elif env.get("OPENAI_API_KEY") and is_openai_url(config.embeddings.base_url):
        key = env["OPENAI_API_KEY"]
    embeddings = config.embeddings.model_copy(update={"api_key": key})
    return config.model_copy(update={"embeddings": embeddings})


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
    update = {"api_key": key, "api_key_source": source, "withheld_key": withheld}
    return config.model_copy(update=update)


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
            setting = _FILE_FIELDS.get(name)
            if setting is None:
                raise ConfigError(f"unknown setting {name!r}", file_path)
            if name in _TABLE_WORDS:
                bindings = {k: v for k, v in (value or {}).items()}
                _set_values(document, name, bindings, file_path)
                continue
            if value is not None:
                try:
                    value = check_setting(name, value)
                except ValueError as exc:
                    raise ConfigError(str(exc), file_path) from exc
            _set_values(document, setting.section, {setting.key: value}, file_path)
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
