"""The OpenAI-compatible embedding provider against the fake server."""

from __future__ import annotations

import json
import socket
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.fakeopenai import FakeOpenAI, RecordedRequest

from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.remote_embeddings import RemoteEmbedder, RemoteEmbeddingError
from tui.engine.usage import ledger_path

NOW = date(2026, 11, 22)
FILES = {
    "MEMORY.md": "# Memory\n\n- The user's cat is called Miso.\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Deployed the billing service to production.\n",
    "memory/2026-11-21.md": "# 2026-11-21\n\n- Planned a trip to Lisbon in March.\n",
}


def make_workspace(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def remote(server: FakeOpenAI, **kwargs: Any) -> RemoteEmbedder:
    kwargs.setdefault("dimensions", 32)
    kwargs.setdefault("backoff", 0.01)
    return RemoteEmbedder(server.base_url, kwargs.pop("model", "fake-embed"), **kwargs)


def embedding_requests(server: FakeOpenAI) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path.endswith("/embeddings")]


def test_search_is_hybrid_with_the_remote_provider(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    embedder = remote(fake_openai, batch_size=2)
    engine = MemoryEngine(make_workspace(tmp_path), embedder=embedder)
    try:
        engine.load_model()
        report = engine.sync()
        assert report.embedded >= 3
        response = engine.search("trip to Lisbon", now=NOW)
        assert response.mode == "hybrid"
        assert "Lisbon" in response.results[0].text
        assert response.results[0].breakdown.vector is not None
        # batching: no request carried more than batch_size texts
        sizes = [len(r.json["input"]) for r in embedding_requests(fake_openai)]
        assert max(sizes) <= 2
        assert all(r.json.get("dimensions") == 32 for r in embedding_requests(fake_openai))
        assert str(engine.stats()["model"]).startswith("fake-embed")
        # usage of the embedding calls is in the ledger
        lines = ledger_path(tmp_path).read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert records and all(r["purpose"] == "embedding" for r in records)
        assert all(r["prompt_tokens"] is not None for r in records)
    finally:
        engine.close()


def test_the_live_preview_is_hybrid_with_the_remote_provider(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    engine = MemoryEngine(make_workspace(tmp_path), embedder=remote(fake_openai))
    try:
        engine.load_model()
        engine.sync()
        assert engine.model_ready_now  # nothing to start: the endpoint answered
        preview = engine.inject("trip to Lisbon", now=NOW, wait_for_model=False)
        assert "Lisbon" in preview.text and not preview.report.notes
        response = engine.search("trip to Lisbon", now=NOW, wait_for_model=False)
        assert response.mode == "hybrid"
    finally:
        engine.close()


def test_switching_provider_rebuilds_the_index(
    tmp_path: Path, fake_openai: FakeOpenAI, embedder: Embedder
) -> None:
    root = make_workspace(tmp_path)
    engine = MemoryEngine(root, embedder=embedder)
    engine.sync()
    local_fp = engine.index.stored_fingerprint()
    generation = engine.index.generation
    engine.close()

    engine = MemoryEngine(root, embedder=remote(fake_openai))
    try:
        engine.load_model()
        engine.sync()
        assert engine.index.stored_fingerprint() != local_fp
        assert "fake-embed" in (engine.index.stored_fingerprint() or "")
        assert engine.index.generation > generation
        assert engine.search("billing deploy", now=NOW).mode == "hybrid"
    finally:
        engine.close()
    # another model on the same server is another fingerprint too
    assert remote(fake_openai).fingerprint != remote(fake_openai, model="other").fingerprint


def test_429_then_success_is_retried_after_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedding_queue.extend(
        [FakeOpenAI.error(429, retry_after=0.2), FakeOpenAI.error(500)]
    )
    embedder = remote(fake_openai)
    slept: list[float] = []
    embedder.sleep = slept.append
    vectors = embedder.embed(["hello world", "goodbye"])
    assert vectors.shape == (2, 32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len(embedding_requests(fake_openai)) == 3
    assert slept[0] >= 0.2  # Retry-After honoured
    assert len(slept) == 2


def test_retries_are_bounded(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedding_queue.extend([FakeOpenAI.error(503)] * 5)
    embedder = remote(fake_openai, max_retries=2)
    embedder.sleep = lambda _s: None
    with pytest.raises(RemoteEmbeddingError, match="HTTP 503"):
        embedder.embed(["x"])
    assert len(embedding_requests(fake_openai)) == 3


def test_hanging_endpoint_times_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedding_queue.append(FakeOpenAI.hang(5))
    embedder = remote(fake_openai, timeout=0.3, max_retries=0)
    with pytest.raises(RemoteEmbeddingError):
        embedder.embed(["x"])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_endpoint_down_falls_back_to_bm25_with_a_note(tmp_path: Path) -> None:
    embedder = RemoteEmbedder(
        f"http://127.0.0.1:{_closed_port()}/v1", "nomic-embed-text", max_retries=1, backoff=0.01
    )
    engine = MemoryEngine(make_workspace(tmp_path), embedder=embedder)
    try:
        with pytest.raises(RemoteEmbeddingError, match="embedding endpoint 127.0.0.1"):
            engine.load_model()
        engine.sync()
        response = engine.search("trip to Lisbon", now=NOW)
        assert response.mode == "bm25"
        assert "Lisbon" in response.results[0].text
        assert any("embedding endpoint" in n and "BM25 only" in n for n in response.notes)
    finally:
        engine.close()


def test_endpoint_failing_mid_sync_keeps_the_text_index(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    embedder = remote(fake_openai, max_retries=0)
    engine = MemoryEngine(make_workspace(tmp_path), embedder=embedder)
    try:
        engine.load_model()
        fake_openai.embedding_queue.append(FakeOpenAI.error(500))
        report = engine.sync()
        assert any("BM25 only" in w for w in report.warnings)
        assert not engine.model_loaded
        response = engine.search("billing", now=NOW)
        assert response.mode == "bm25" and response.results
    finally:
        engine.close()


def test_cli_search_with_endpoint_down_has_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui.cli import main

    config = tmp_path / "config.toml"
    config.write_text(
        "[embeddings]\n"
        'provider = "openai"\n'
        f'base_url = "http://127.0.0.1:{_closed_port()}/v1"\n'
        'model = "nomic-embed-text"\n'
    )
    monkeypatch.setenv("MEMDECK_CONFIG", str(config))
    root = make_workspace(tmp_path / "ws")
    status = main(["--workspace", str(root), "search", "Lisbon", "--now", "2026-11-22"])
    out, err = capsys.readouterr()
    assert status == 0
    assert "Traceback" not in err
    assert "BM25 only" in out + err
    assert "Lisbon" in out


def test_unknown_model_needs_dimensions() -> None:
    with pytest.raises(RemoteEmbeddingError, match="dimensions"):
        RemoteEmbedder("http://127.0.0.1:9/v1", "mystery-model")
