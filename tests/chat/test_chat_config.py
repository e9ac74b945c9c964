"""Configuration: file, environment, overrides, clear errors, key safety, 0600 writes."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tui.chat.config import ConfigError, config_path, load_config, save_config
from tui.engine.options import InjectionOptions, SearchOptions

GOOD = """\
# my settings
[llm]
base_url = "http://localhost:11434/v1"
model = "llama3.1"
summary_model = "llama3.2:1b"
context_window = 8192

[memory]
injection_budget = 1500
min_score = 0.4
max_results = 4

[triggers]
idle_minutes = 2
flush_on_blur = false

[ui]
theme = "nord"

[keymap]
"app.flush" = "ctrl+f"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.toml", env={})
    assert config.base_url is None and config.model is None
    assert config.injection_budget == 2000 and config.idle_minutes == 5.0
    assert config.flush_on_blur is True and config.keymap == {}
    assert config.search_options() == SearchOptions()
    assert config.injection_options() == InjectionOptions()
    problem = config.llm_problem()
    assert problem and "OPENAI_API_KEY" in problem and "OPENAI_BASE_URL" in problem
    assert "MEMDECK_MODEL" in problem and "\n" not in problem


def test_file_values_and_engine_options(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD), env={})
    assert config.base_url == "http://localhost:11434/v1"
    assert config.effective_model == "llama3.1"
    assert config.effective_summary_model == "llama3.2:1b"
    assert config.context_window == 8192
    assert config.theme == "nord" and config.keymap == {"app.flush": "ctrl+f"}
    assert config.idle_minutes == 2.0 and config.flush_on_blur is False
    assert config.search_options().max_results == 4
    assert config.search_options().min_score == 0.4
    assert config.injection_options().budget_tokens == 1500
    assert config.llm_problem() is None
    assert config.source == tmp_path / "config.toml"


def test_environment_then_overrides_win(tmp_path: Path) -> None:
    env = {
        "OPENAI_BASE_URL": "http://gpu-box:8000/v1",
        "MEMDECK_MODEL": "qwen",
        "MEMDECK_IDLE_MINUTES": "7.5",
        "MEMDECK_FLUSH_ON_BLUR": "yes",
        "MEMDECK_WORKSPACE": "/tmp/somewhere",
    }
    config = load_config(write(tmp_path, GOOD), env=env, overrides={"model": "mistral"})
    assert config.base_url == "http://gpu-box:8000/v1"
    assert config.model == "mistral"
    assert config.idle_minutes == 7.5 and config.flush_on_blur is True
    assert config.workspace == "/tmp/somewhere"
    assert config.summary_model == "llama3.2:1b"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[llm]\nmodel = "x"\ncolour = "red"\n', 3, "unknown key 'colour' in [llm]"),
        ('[llm]\nmodel = "x"\n\n[memory]\nidle_minutes = 3\n', 5, "belongs in [triggers]"),
        ('[memory]\n\ninjection_budget = "lots"\n', 3, "injection_budget must be an integer"),
        ("[triggers]\nflush_on_blur = 1\n", 2, "must be true or false"),
        ("[colours]\nred = 1\n", 1, "unknown section [colours]"),
        ('# top\nmodel = "x"\n', 2, "'model' must be inside [llm]"),
        ('[llm]\nmodel = "x\n', 2, "not valid TOML"),
        ('[keymap]\n"app.quit" = 3\n', 2, "keymap must be a table of strings"),
        ('[llm]\nmodel = "x"\napi_key_source = "me"\n', 3, "unknown key 'api_key_source'"),
        ('[memory]\nmin_score = 0.5\nmin_score = 0.6\n', 3, "not valid TOML"),
        ('[ui]\ntheme = 3\n[llm]\ncontext_window = 1\n', 2, "theme must be a string, not 3"),
    ],
)
def test_bad_config_names_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_a_bad_secret_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = write(tmp_path, "[embeddings]\napi_key = 424242424242\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value) == f"{path}:2: api_key must be a string, not a number"
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "none.toml", env={}, overrides={"api_key": ["sk-in-a-list"]})
    assert "sk-in-a-list" not in str(caught.value) and "not an array" in str(caught.value)


def test_every_setting_has_a_docstring() -> None:
    from tui.chat.config import _FILE_FIELDS

    assert {"idle_minutes", "embeddings_model", "keymap", "prices"} <= set(_FILE_FIELDS)
    assert [name for name, s in _FILE_FIELDS.items() if not s.info.description] == []


def test_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MEMDECK_CONTEXT_WINDOW"):
        load_config(tmp_path / "none.toml", env={"MEMDECK_CONTEXT_WINDOW": "big"})


def test_openai_key_only_goes_to_openai(tmp_path: Path) -> None:
    none = tmp_path / "none.toml"
    openai = load_config(none, env={"OPENAI_API_KEY": "sk-real-openai-key"})
    assert openai.api_key == "sk-real-openai-key" and openai.is_openai
    assert openai.effective_model == "gpt-4o-mini"

    local = load_config(
        none,
        env={
            "OPENAI_API_KEY": "sk-real-openai-key",
            "OPENAI_BASE_URL": "http://localhost:11434/v1",
            "MEMDECK_MODEL": "llama3.1",
        },
    )
    assert local.api_key is None
    assert local.withheld_key and "OPENAI_API_KEY" in local.withheld_key
    assert local.llm_problem() is None  # a local server needs no key

    lookalike = load_config(
        none, env={"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://api.openai.com.evil.io/v1"}
    )
    assert lookalike.api_key is None


def test_key_configured_for_that_url_is_used(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[llm]\nbase_url = "https://vllm.lan/v1"\nmodel = "m"\napi_key = "lan-key-1234"\n'
    )
    config = load_config(path, env={"OPENAI_API_KEY": "sk-openai"})
    assert config.api_key == "lan-key-1234" and config.api_key_source == "config file"
    # Pointing the same file at another server by env does not carry the file's key along.
    moved = load_config(path, env={"OPENAI_BASE_URL": "http://elsewhere:1234/v1"})
    assert moved.api_key is None and moved.withheld_key
    assert "belongs to https://vllm.lan/v1" in moved.withheld_key
    explicit = load_config(path, env={"MEMDECK_API_KEY": "chosen-key"})
    assert explicit.api_key == "chosen-key" and explicit.api_key_source == "MEMDECK_API_KEY"


def test_repr_never_shows_the_key(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml", env={"OPENAI_API_KEY": "sk-very-secret-key"})
    assert "sk-very-secret-key" not in repr(config)
    assert "sk-very-secret-key" not in str(config)


def test_save_config_creates_0600_and_keeps_comments(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.toml"
    save_config({"theme": "gruvbox", "model": "llama3.1", "keymap": {"app.flush": "f5"}}, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path, env={})
    assert config.theme == "gruvbox" and config.model == "llama3.1"
    assert config.keymap == {"app.flush": "f5"}

    path.write_text("# keep me\n" + path.read_text(), encoding="utf-8")
    path.chmod(0o644)
    save_config({"theme": "nord", "idle_minutes": 9, "model": None}, path)
    text = path.read_text()
    assert text.startswith("# keep me\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path, env={})
    assert config.theme == "nord" and config.idle_minutes == 9.0 and config.model is None
    assert config.keymap == {"app.flush": "f5"}

    with pytest.raises(ConfigError, match="idle_minutes must be a number"):
        save_config({"idle_minutes": "soon"}, path)
    with pytest.raises(ConfigError, match="unknown setting"):
        save_config({"colour": "red"}, path)


def test_config_path_env_and_platform_default() -> None:
    assert config_path({"MEMDECK_CONFIG": "/x/y.toml"}) == Path("/x/y.toml")
    assert config_path({}).name == "config.toml"


def test_the_openai_sdk_loads_only_for_a_request() -> None:
    # That the headless core never imports Textual is an import-linter contract (pyproject.toml).
    code = (
        "import sys, tui.chat.chat, tui.cli, tui.chat.triggers, tui.chat.flush, "
        "tui.engine.engine; print('openai' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # The slow openai SDK only once a request is made.
    assert result.stdout.split() == ["False"]


def test_each_search_knob_is_defined_once_and_every_setting_reaches_the_engine() -> None:
    from dataclasses import fields

    from tui.chat.config import MemorySettings

    assert MemorySettings().search_options() == SearchOptions()
    assert MemorySettings().injection_options() == InjectionOptions()
    shared = set(MemorySettings.model_fields) & {f.name for f in fields(SearchOptions)}
    assert {"max_results", "min_score", "half_life_days", "threshold"} <= shared
    changed = MemorySettings(min_score=0.5, max_results=9, injection_budget=900)
    options = changed.search_options()
    assert (options.min_score, options.max_results) == (0.5, 9)
    assert changed.injection_options().budget_tokens == 900
