"""The local model in a helper process: same vectors, idle exit, restarts, no orphans; and
swapping the embedder of an open engine (the real model, real SQLite + sqlite-vec)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from support.fakeopenai import FakeOpenAI

from tui.engine.embed_helper import HelperEmbedder
from tui.engine.embeddings import Embedder, EmbeddingError
from tui.engine.engine import MODEL_STARTING, MemoryEngine
from tui.engine.remote_embeddings import RemoteEmbedder

ROOT = Path(__file__).resolve().parents[2]
NOW = date(2026, 11, 22)
TEXTS = [
    "what is my dog called?",
    "The user prefers dark mode in every application.",
    "Decided to migrate the analytics warehouse to Postgres with pgvector, because hybrid "
    "search over notes matters more than raw throughput. " * 6,
    "Kubernetes deployment failed: the readiness probe timed out; raised it to thirty seconds.",
    "日本語のテキストも埋め込める。",
    "",
] + [f"note {i}: " + "garden tomatoes basil watering " * (i % 9 + 1) for i in range(40)]


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def helper() -> Iterator[HelperEmbedder]:
    model = HelperEmbedder(idle_exit=None)
    yield model
    model.close()


def test_helper_vectors_are_bit_identical_to_in_process(
    helper: HelperEmbedder, embedder: Embedder
) -> None:
    assert helper.fingerprint == embedder.fingerprint  # switching needs no rebuild
    assert not helper.loaded
    from_helper = helper.embed(TEXTS)
    assert helper.loaded and helper.helper_pid is not None
    assert np.array_equal(from_helper, embedder.embed(TEXTS))
    assert np.array_equal(helper.embed_query(TEXTS[0]), embedder.embed_query(TEXTS[0]))
    assert helper.embed([]).shape == (0, embedder.dims)
    assert helper.helper_rss_mb() is not None


def test_the_helper_yields_the_cpu_to_the_app(helper: HelperEmbedder) -> None:
    # a reindex in the helper must not starve the UI of the cores (tests/bench/ui_speed.py)
    helper.embed_query("warm up")
    assert helper.helper_pid is not None
    app_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, helper.helper_pid) == min(19, app_nice + 10)


def test_helper_exits_when_idle_and_restarts_on_demand(embedder: Embedder) -> None:
    helper = HelperEmbedder(idle_exit=0.3)
    try:
        first = helper.embed_query(TEXTS[1])
        pid = helper.helper_pid
        assert pid is not None
        assert _wait_for(lambda: helper.helper_pid is None)
        assert _wait_for(lambda: not _alive(pid))
        assert helper.loaded  # the model is still available: the next embedding restarts it
        again = helper.embed_query(TEXTS[1])
        assert helper.starts == 2 and helper.helper_pid not in (None, pid)
        assert np.array_equal(first, again)
        assert np.array_equal(again, embedder.embed_query(TEXTS[1]))
    finally:
        helper.close()
    assert helper.helper_pid is None


def test_a_killed_helper_is_restarted_once(helper: HelperEmbedder, embedder: Embedder) -> None:
    helper.load()
    pid = helper.helper_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    vector = helper.embed_query(TEXTS[3])  # transparently on a new helper
    assert helper.starts == 2 and helper.helper_pid != pid
    assert np.array_equal(vector, embedder.embed_query(TEXTS[3]))


class _DyingHelper(HelperEmbedder):
    """Its helper is killed just before every request."""

    def _request(self, payload: Sequence[bytes], rows: int) -> np.ndarray:
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait()
        return super()._request(payload, rows)


def test_a_helper_that_keeps_dying_is_a_clear_error() -> None:
    helper = _DyingHelper(idle_exit=None)
    try:
        with pytest.raises(EmbeddingError, match="exited .*twice"):
            helper.embed_query("hello")
        assert helper.starts == 2  # restarted once, then gave up
        assert helper.helper_pid is None
    finally:
        helper.close()


def test_the_helper_dies_with_its_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from tui.engine.embed_helper import HelperEmbedder
        helper = HelperEmbedder(idle_exit=None)
        helper.load()
        print(helper.helper_pid, flush=True)
        time.sleep(120)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert _alive(pid)
        parent.kill()  # no atexit, no close(): only the pipe tells the helper
        parent.wait()
        assert _wait_for(lambda: not _alive(pid)), "the helper outlived its parent"
    finally:
        parent.kill()
        parent.wait()


# --------------------------------------------------------------------------- swapping


FILES = {
    "MEMORY.md": "# Memory\n\n- The user's cat is called Miso.\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Deployed the billing service to production.\n",
    "memory/2026-11-21.md": "# 2026-11-21\n\n- Planned a trip to Lisbon in March.\n",
}


def _workspace(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_swapping_to_the_helper_keeps_the_index(tmp_path: Path, embedder: Embedder) -> None:
    engine = MemoryEngine(_workspace(tmp_path), embedder=Embedder())
    try:
        engine.load_model()
        engine.sync()
        before = engine.search("trip to Lisbon", now=NOW)
        generation = engine.index.generation
        helper = HelperEmbedder(idle_exit=None)
        report = engine.set_embedder(helper)
        assert engine.embedder is helper and engine.index.embedder is helper
        assert engine.model_loaded and report.embedded == 0
        assert engine.index.generation == generation  # same fingerprint: nothing rebuilt
        after = engine.search("trip to Lisbon", now=NOW)
        assert after.mode == "hybrid"
        assert [(r.chunk_id, r.score) for r in after.results] == [
            (r.chunk_id, r.score) for r in before.results
        ]
    finally:
        engine.close()
    assert helper.helper_pid is None  # closing the engine stops the helper


@pytest.fixture
def idle_engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """An engine whose embedding helper loaded the model, embedded everything and exited idle."""
    helper = HelperEmbedder(idle_exit=0.3)
    engine = MemoryEngine(_workspace(tmp_path), embedder=helper)
    try:
        engine.load_model()
        engine.sync()
        assert engine.search("trip to Lisbon", now=NOW).mode == "hybrid"
        assert _wait_for(lambda: helper.helper_pid is None)  # idle exit
        assert engine.model_loaded and not engine.model_ready_now
        yield engine
    finally:
        engine.close()


def test_a_preview_does_not_wait_for_the_helper_to_restart(idle_engine: MemoryEngine) -> None:
    engine = idle_engine
    preview = engine.inject("trip to Lisbon", now=NOW, wait_for_model=False)
    assert MODEL_STARTING in preview.report.notes
    assert "Lisbon" in preview.text  # BM25 still finds it
    assert _wait_for(lambda: engine.model_ready_now)  # started in the background
    assert isinstance(engine.embedder, HelperEmbedder) and engine.embedder.starts == 2
    again = engine.inject("trip to Lisbon", now=NOW, wait_for_model=False)
    assert MODEL_STARTING not in again.report.notes
    assert engine.search("trip to Lisbon", now=NOW, wait_for_model=False).mode == "hybrid"


def test_a_turn_waits_for_the_helper_to_restart(idle_engine: MemoryEngine) -> None:
    # A question not embedded before (the fixture's is kept, and needs no helper).
    response = idle_engine.search("when was the trip to Lisbon?", now=NOW)  # waits: hybrid
    assert response.mode == "hybrid" and MODEL_STARTING not in response.notes
    assert isinstance(idle_engine.embedder, HelperEmbedder)
    assert idle_engine.embedder.starts == 2


def test_swapping_to_another_model_rebuilds_atomically(tmp_path: Path, embedder: Embedder) -> None:
    with FakeOpenAI() as server:
        engine = MemoryEngine(_workspace(tmp_path), embedder=Embedder())
        try:
            engine.load_model()
            engine.sync()
            old_fingerprint = engine.index.stored_fingerprint()
            generation = engine.index.generation
            remote = RemoteEmbedder(server.base_url, "fake-embed", dimensions=32)
            report = engine.set_embedder(remote)
            assert report.embedded >= 3
            assert engine.embedder is remote and engine.index.mirror.dims == 32
            assert engine.index.generation == generation + 1
            assert engine.index.stored_fingerprint() != old_fingerprint
            assert engine.index.stats()["embedded"] == engine.index.stats()["chunks"]
            response = engine.search("trip to Lisbon", now=NOW)
            assert response.mode == "hybrid"
            assert "Lisbon" in response.results[0].text
            # And back: the local model's vectors come from the cache, none is embedded again.
            report = engine.set_embedder(Embedder())
            assert report.embedded == 0 and report.cache_hits >= 3
            assert engine.index.mirror.dims == embedder.dims
            assert engine.search("trip to Lisbon", now=NOW).mode == "hybrid"
        finally:
            engine.close()
