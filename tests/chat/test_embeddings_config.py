"""``[embeddings]`` and ``[prices]`` in config.toml, and which key goes where."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakeopenai import FakeOpenAI

from tui.chat.chat import ChatEngine
from tui.chat.config import ConfigError, load_config, save_config
from tui.engine.embeddings import Embedder
from tui.engine.remote_embeddings import RemoteEmbedder


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_local_is_the_default(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml", env={})
    assert config.embeddings.provider == "local"
    assert isinstance(config.embeddings.embedder(), Embedder)


def test_embeddings_section_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[llm]\nmodel = "chat"\n[embeddings]\nprovider = "openai"\n'
        'base_url = "http://localhost:11434/v1"\nmodel = "nomic-embed-text"\nbatch_size = 8\n'
        '[prices]\n"gpt-4o-mini" = {input = 0.15, output = 0.6}\n',
    )
    config = load_config(path, env={})
    settings = config.embeddings
    assert (settings.provider, settings.model, settings.batch_size) == (
        "openai",
        "nomic-embed-text",
        8,
    )
    assert config.model == "chat"  # [llm] model is not [embeddings] model
    embedder = settings.embedder()
    assert isinstance(embedder, RemoteEmbedder) and embedder.dims == 768
    assert config.prices == {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}


def test_bad_values_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[embeddings]\n\ndimensions = 0\n")
    with pytest.raises(ConfigError, match=r":3: dimensions must be"):
        load_config(path, env={})
    path = write(tmp_path, '[prices]\n"m" = {input = -1}\n')
    with pytest.raises(ConfigError, match="prices must be"):
        load_config(path, env={})


def test_environment_and_save(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    save_config({"embeddings_model": "all-minilm", "embeddings_provider": "openai"}, path)
    assert "[embeddings]" in path.read_text() and 'model = "all-minilm"' in path.read_text()
    config = load_config(path, env={"MEMDECK_EMBEDDINGS_BATCH_SIZE": "3"})
    assert config.embeddings.model == "all-minilm" and config.embeddings.batch_size == 3


def test_openai_key_only_goes_to_openai(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-secret"}
    openai = load_config(write(tmp_path, '[embeddings]\nprovider = "openai"\n'), env=env)
    assert openai.embeddings.api_key == "sk-secret"
    local = load_config(
        write(tmp_path, '[embeddings]\nprovider = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'),
        env=env,
    )
    assert local.embeddings.api_key is None
    own = load_config(
        write(
            tmp_path,
            '[embeddings]\nprovider = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
            'api_key = "mine"\n',
        ),
        env=env,
    )
    assert own.embeddings.api_key == "mine"
    assert "mine" not in repr(own.embeddings)


def test_api_key_is_not_sent_to_a_foreign_host(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config_path = write(
        tmp_path,
        f'[embeddings]\nprovider = "openai"\nbase_url = "{fake_openai.base_url}"\n'
        'model = "fake-embed"\ndimensions = 16\n',
    )
    config = load_config(config_path, env={"OPENAI_API_KEY": "sk-secret"})
    engine = ChatEngine.open(config, workspace=tmp_path / "ws")
    try:
        (tmp_path / "ws" / "MEMORY.md").write_text("# Memory\n\n- likes tea\n")
        engine.memory.load_model()
        engine.memory.sync()
        assert engine.memory.search("tea").mode == "hybrid"
    finally:
        engine.close()
    requests = [r for r in fake_openai.requests if r.path.endswith("/embeddings")]
    assert requests
    assert all("sk-secret" not in (r.authorization or "") for r in requests)
    assert all(b"sk-secret" not in r.raw for r in requests)


def test_unknown_model_without_dimensions_is_a_config_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[embeddings]\nprovider = "openai"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "mystery"\n',
    )
    with pytest.raises(ConfigError, match="dimensions"):
        ChatEngine.open(load_config(path, env={}), workspace=tmp_path / "ws")


def test_where_the_local_model_runs(tmp_path: Path) -> None:
    from tui.engine.embed_helper import HelperEmbedder

    config = load_config(tmp_path / "none.toml", env={})
    assert config.embeddings.process == "auto"
    assert type(config.embeddings.embedder()) is Embedder  # commands: in their own process
    app = config.embeddings.embedder(resident=True)  # the app: in a helper that exits idle
    assert isinstance(app, HelperEmbedder) and app.idle_exit == 60.0
    path = write(tmp_path, '[embeddings]\nprocess = "inline"\nidle_exit = 5\n')
    assert type(load_config(path, env={}).embeddings.embedder(resident=True)) is Embedder
    path = write(tmp_path, '[embeddings]\nprocess = "helper"\nidle_exit = 5\n')
    helper = load_config(path, env={}).embeddings.embedder()
    assert isinstance(helper, HelperEmbedder) and helper.idle_exit == 5.0
    path = write(tmp_path, '[embeddings]\nprocess = "elsewhere"\n')
    with pytest.raises(ConfigError, match="process must be"):
        ChatEngine.open(load_config(path, env={}), workspace=tmp_path / "ws")


def test_reconfigure_swaps_the_embedder_without_a_restart(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    (tmp_path / "ws" / "memory").mkdir(parents=True)
    (tmp_path / "ws" / "MEMORY.md").write_text("# Memory\n\n- The cat is Miso.\n", "utf-8")
    local = load_config(tmp_path / "none.toml", env={})
    engine = ChatEngine.open(local, workspace=tmp_path / "ws")
    try:
        engine.memory.sync()
        assert type(engine.memory.embedder) is Embedder
        engine.reconfigure(local)  # nothing changed: the same embedder
        assert type(engine.memory.embedder) is Embedder
        path = write(
            tmp_path,
            f'[embeddings]\nprovider = "openai"\nbase_url = "{fake_openai.base_url}"\n'
            'model = "fake-embed"\ndimensions = 16\napi_key = "k"\n',
        )
        engine.reconfigure(load_config(path, env={}))
        memory = engine.memory
        assert isinstance(memory.embedder, RemoteEmbedder)
        assert memory.index.stored_fingerprint() == memory.index.fingerprint
        assert memory.index.mirror.dims == 16
        assert memory.search("cat").results
    finally:
        engine.close()
