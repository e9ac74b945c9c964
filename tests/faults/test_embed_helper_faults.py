"""Issue 16 C.9 and C.10: the embedding helper process stopped or talking out of turn.

Real helper processes running the real model; the faults are real too: SIGSTOP, and bytes
written into the helper's reply pipe from outside (through ``/proc/<pid>/fd``), as a library
printing to it would. Bounds are loose (a hang would blow them by minutes), never speed tests.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tui.engine.embed_helper import HelperEmbedder
from tui.engine.embeddings import Embedder, EmbeddingError

QUERIES = [
    "where did we go hiking last spring",
    "my sister's birthday present",
    "which editor do I use for Rust",
    "the dentist appointment on Friday",
    "bees on the allotment",
]


@pytest.fixture
def helper() -> Iterator[HelperEmbedder]:
    model = HelperEmbedder(idle_exit=None, request_timeout=3.0)
    model.load()
    yield model
    model.close()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def reply_pipe_of(helper: HelperEmbedder) -> Path:
    """The helper's own end of the pipe it answers on, as ``/proc`` shows it."""
    proc = helper._proc
    assert proc is not None and proc.stdout is not None
    inode = os.fstat(proc.stdout.fileno()).st_ino
    for entry in Path(f"/proc/{proc.pid}/fd").iterdir():
        with_target = os.readlink(entry)
        if with_target == f"pipe:[{inode}]":
            return entry
    raise AssertionError("the helper's reply pipe was not found")


def test_a_stopped_helper_is_killed_and_replaced_and_close_returns(
    helper: HelperEmbedder, embedder: Embedder
) -> None:
    first = helper.helper_pid
    assert first is not None
    os.kill(first, signal.SIGSTOP)
    began = time.monotonic()
    # A query is not retried in line (its search goes on with BM25, issue 29 item 19)...
    with pytest.raises(EmbeddingError, match="did not answer within 3 s"):
        helper.embed_query(QUERIES[0])
    assert time.monotonic() - began < 60  # a stopped helper once blocked this forever
    # ...a new helper starts meanwhile, and answers the next query.
    vector = helper.embed_query(QUERIES[0])
    assert helper.helper_pid not in (None, first) and helper.problem is None
    assert cosine(vector, embedder.embed_query(QUERIES[0])) > 0.999
    # A batch (indexing) is retried in line on a new helper.
    stopped = helper.helper_pid
    assert stopped is not None
    os.kill(stopped, signal.SIGSTOP)
    [batch_vector] = helper.embed([QUERIES[2]])
    assert helper.helper_pid not in (None, first, stopped)
    assert cosine(batch_vector, embedder.embed_query(QUERIES[2])) > 0.999
    # close() with the new helper stopped too, and a request waiting on it in another thread.
    second = helper.helper_pid
    assert second is not None
    os.kill(second, signal.SIGSTOP)
    outcome: list[object] = []

    def embed_meanwhile() -> None:
        try:
            outcome.append(helper.embed_query(QUERIES[1]))
        except EmbeddingError as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=embed_meanwhile, daemon=True)
    waiting.start()
    time.sleep(0.3)
    began = time.monotonic()
    helper.close()
    assert time.monotonic() - began < 30
    waiting.join(60)
    assert not waiting.is_alive() and len(outcome) == 1
    if isinstance(outcome[0], np.ndarray):  # served by a fresh helper: its own vector
        assert cosine(outcome[0], embedder.embed_query(QUERIES[1])) > 0.999
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(first, 0)
            time.sleep(0.05)


@pytest.mark.parametrize("noise", [b"x", b"hello from a library\n", b"V" + b"\x01" * 40])
def test_stray_bytes_on_the_pipe_never_give_a_wrong_vector(
    helper: HelperEmbedder, embedder: Embedder, noise: bytes
) -> None:
    expected = [embedder.embed_query(q) for q in QUERIES]
    helper.embed_query(QUERIES[0])
    with reply_pipe_of(helper).open("wb", buffering=0) as pipe:
        pipe.write(noise)
    for query, want in zip(QUERIES, expected, strict=True):
        try:
            got = helper.embed_query(query)
        except EmbeddingError:
            continue  # an error is allowed; a vector that is not this query's is not
        assert cosine(got, want) > 0.999, query
    # The helper was replaced and works: every query gets its own vector again.
    for query, want in zip(QUERIES, expected, strict=True):
        assert cosine(helper.embed_query(query), want) > 0.999
