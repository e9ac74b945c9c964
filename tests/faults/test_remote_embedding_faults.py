"""Issue 16 B.6 and C.11: the remote embeddings client against hostile or broken servers.

Real loopback servers (raw sockets on 127.0.0.1, in threads), the real client and a real index.
No wall-clock thresholds beyond loose bounds that a hang would blow by minutes.
"""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tui.engine.engine import MemoryEngine
from tui.engine.remote_embeddings import RemoteEmbedder, RemoteEmbeddingError
from tui.engine.workspace import Workspace

DIMS = 8
KEY = "sk-test-0123456789abcdef"

Handler = Callable[[socket.socket, bytes, bytes], None]


def vector_for(text: str) -> list[float]:
    """A deterministic unit-ish vector per text (the 'model' of these servers)."""
    rng = np.random.default_rng(abs(hash(text)) % (2**32))
    return [float(x) for x in rng.normal(size=DIMS)]


def embeddings_body(texts: list[str], values: Callable[[str], list[float]] = vector_for) -> bytes:
    data = [{"index": i, "embedding": values(t)} for i, t in enumerate(texts)]
    return json.dumps({"data": data, "model": "fake-embed"}, allow_nan=True).encode()


def respond(conn: socket.socket, status: str, body: bytes, headers: str = "") -> None:
    conn.sendall(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{headers}\r\n".encode()
        + body
    )


def read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head, body


@contextmanager
def loopback(handler: Handler) -> Iterator[str]:
    """A server on 127.0.0.1 calling ``handler(conn, head, body)`` per request; yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with conn:
            try:
                head, body = read_request(conn)
                if head:
                    handler(conn, head, body)
            except OSError:
                pass

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def texts_of(body: bytes) -> list[str]:
    return list(json.loads(body)["input"])


def embedder(url: str, **kwargs: object) -> RemoteEmbedder:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return RemoteEmbedder(url, "fake-embed", api_key=KEY, dimensions=DIMS, **kwargs)  # type: ignore[arg-type]


# -- 6. the key never leaves its origin -----------------------------------------------------


@pytest.mark.parametrize("status", ["302 Found", "307 Temporary Redirect"])
def test_a_redirect_is_not_followed_and_the_key_stays_home(status: str) -> None:
    seen_elsewhere: list[bytes] = []

    def elsewhere(conn: socket.socket, head: bytes, body: bytes) -> None:
        seen_elsewhere.append(head)
        respond(conn, "200 OK", embeddings_body(texts_of(body)))

    with loopback(elsewhere) as other:

        def redirecting(conn: socket.socket, head: bytes, body: bytes) -> None:
            respond(conn, status, b"", f"Location: {other}/embeddings\r\n")

        with loopback(redirecting) as url:
            client = embedder(url)
            with pytest.raises(RemoteEmbeddingError) as caught:
                client.embed_query("hello")
    assert seen_elsewhere == []
    message = str(caught.value)
    assert "redirected to http://127.0.0.1:" in message and "not followed" in message
    assert KEY not in message


@pytest.mark.parametrize(
    "echo",
    [
        f"bad key Bearer {KEY}",
        "bad key Bearer mysecretvalue42",
        f"invalid api key: {KEY[:-3]}***",
    ],
)
def test_an_error_body_echoing_the_key_is_redacted(echo: str) -> None:
    def unauthorised(conn: socket.socket, head: bytes, body: bytes) -> None:
        respond(conn, "401 Unauthorized", json.dumps({"error": {"message": echo}}).encode())

    with loopback(unauthorised) as url, pytest.raises(RemoteEmbeddingError) as caught:
        embedder(url).embed_query("hello")
    message = str(caught.value)
    assert "HTTP 401" in message and "[redacted]" in message
    assert KEY not in message and "mysecretvalue42" not in message and KEY[:12] not in message


# -- 11. NaN, a trickle, a huge body --------------------------------------------------------


def test_non_finite_vectors_are_refused_and_never_cached(tmp_path: Path) -> None:
    broken = threading.Event()
    broken.set()

    def model(conn: socket.socket, head: bytes, body: bytes) -> None:
        texts = texts_of(body)
        if broken.is_set():
            respond(conn, "200 OK", embeddings_body(texts, lambda t: [math.nan] * DIMS))
        else:
            respond(conn, "200 OK", embeddings_body(texts))

    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    (root / "MEMORY.md").write_text(
        "# Long-term Memory\n\n- Keeps bees on the allotment\n- Drinks oolong tea\n",
        encoding="utf-8",
    )
    with loopback(model) as url:
        client = embedder(url)
        with pytest.raises(RemoteEmbeddingError, match="NaN"):
            client.embed_query("bees")
        engine = MemoryEngine(workspace, embedder=client)
        try:
            engine.sync()  # the vectors fail (BM25 only): nothing is stored or cached
            assert cached_vectors(root) == []
            broken.clear()
            engine.load_model()
            engine.reindex()
            response = engine.search("bees on the allotment", max_results=2, min_score=0.0)
        finally:
            engine.close()
    vectors = cached_vectors(root)
    assert len(vectors) == 2 and all(np.isfinite(v).all() for v in vectors)
    scores = [r.breakdown.vector for r in response.results]
    assert scores and all(s is not None and math.isfinite(s) for s in scores)
    assert not all(s == pytest.approx(1.0) for s in scores)


def test_a_poisoned_cache_from_an_older_version_is_embedded_again(tmp_path: Path) -> None:
    def model(conn: socket.socket, head: bytes, body: bytes) -> None:
        respond(conn, "200 OK", embeddings_body(texts_of(body)))

    root = tmp_path / "ws"
    workspace = Workspace.open(root)
    (root / "MEMORY.md").write_text("# Long-term Memory\n\n- Keeps bees\n", encoding="utf-8")
    with loopback(model) as url:
        engine = MemoryEngine(workspace, embedder=embedder(url))
        try:
            engine.sync()
            db = index_db(root)
            with sqlite3.connect(db) as conn:  # what a version that cached NaN left behind
                nan = np.full(DIMS, np.nan, dtype=np.float32).tobytes()
                conn.execute("UPDATE embedding_cache SET embedding = ?", (nan,))
            engine.reindex()
        finally:
            engine.close()
    vectors = cached_vectors(root)
    assert vectors and all(np.isfinite(v).all() for v in vectors)


def index_db(root: Path) -> Path:
    found = sorted(root.glob(".memdeck/*.db"))
    assert found, list(root.glob(".memdeck/*"))
    return found[0]


def cached_vectors(root: Path) -> list[np.ndarray]:
    db = index_db(root)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT embedding FROM embedding_cache").fetchall()
    return [np.frombuffer(row[0], dtype=np.float32) for row in rows]


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_server_is_bounded_by_the_timeout(where: str) -> None:
    def trickle(conn: socket.socket, head: bytes, body: bytes) -> None:
        answer = embeddings_body(texts_of(body))
        start = (
            b""
            if where == "headers"
            else f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode()
        )
        conn.sendall(start)
        rest = (
            f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode() + answer
            if where == "headers"
            else answer
        )
        for byte in rest:
            conn.sendall(bytes([byte]))
            time.sleep(0.3)

    with loopback(trickle) as url:
        client = embedder(url, timeout=1.0)
        began = time.monotonic()
        with pytest.raises(RemoteEmbeddingError, match="within 1s"):
            client.embed_query("hello")
        took = time.monotonic() - began
    # The trickle would take minutes; a bounded request fails soon after its 1 s deadline.
    assert took < 30, took


@pytest.mark.parametrize("declared", [True, False])
def test_a_huge_answer_is_not_read_whole(declared: bool) -> None:
    sent = [0]
    size = 200_000_000

    def huge(conn: socket.socket, head: bytes, body: bytes) -> None:
        length = f"Content-Length: {size}\r\n" if declared else ""
        conn.sendall(f"HTTP/1.1 200 OK\r\n{length}Connection: close\r\n\r\n".encode())
        block = b" " * 65536
        while sent[0] < size:
            conn.sendall(block)
            sent[0] += len(block)

    with loopback(huge) as url:
        with pytest.raises(RemoteEmbeddingError, match="larger than"):
            embedder(url, timeout=30.0).embed_query("hello")
        time.sleep(0.2)
    assert sent[0] < size // 10
