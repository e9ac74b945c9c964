"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, llama.cpp,
LM Studio, vLLM): an optional alternative to the local ONNX model.

:class:`RemoteEmbedder` has the interface the index and :class:`~tui.engine.engine.MemoryEngine`
use (``dims``, ``fingerprint``, ``loaded``, ``load``, ``embed``, ``embed_query``,
``spec.name``). Its fingerprint names the provider, the server's host, the model and the dims,
so switching to another provider or model rebuilds the index (and the embedding cache is keyed
by it). Requests are batched, retried with backoff on connection errors, 429 and 5xx (bounded,
honouring ``Retry-After``); when the endpoint stays down a :class:`RemoteEmbeddingError` says
so and search falls back to BM25 only. Plain ``urllib``: no SDK is imported.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from .embeddings import EmbeddingError
from .redaction import redact

__all__ = ["KNOWN_DIMS", "RemoteEmbedder", "RemoteEmbeddingError", "RemoteSpec"]

#: Output widths of common embedding models (used when ``dimensions`` is not configured).
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
    "snowflake-arctic-embed": 1024,
}
MAX_RETRY_AFTER_S = 30.0

UsageSink = Callable[[str, int | None], None]


class RemoteEmbeddingError(EmbeddingError):
    """The embedding endpoint failed (down, refused, or answered nonsense); worded for the user."""


@dataclass(frozen=True)
class RemoteSpec:
    """What :class:`MemoryEngine` shows of the model (``spec.name``)."""

    name: str
    dims: int


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class RemoteEmbedder:
    """Embeds texts through ``POST {base_url}/embeddings``; thread-safe.

    ``dimensions``: the vector width; required for models not in :data:`KNOWN_DIMS`, and sent
    to the server (models such as ``text-embedding-3-*`` shorten their vectors) only when given.
    ``api_key`` goes to ``base_url`` only: callers decide which key belongs to which server.
    """

    remote = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        usage: UsageSink | None = None,
        provider: str = "openai",
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        dims = dimensions or KNOWN_DIMS.get(model) or KNOWN_DIMS.get(model.split(":")[0])
        if not dims:
            raise RemoteEmbeddingError(
                f"the width of embedding model {model!r} is not known: set dimensions in "
                "[embeddings] of config.toml"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.dimensions = dimensions
        self.dims = int(dims)
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.usage = usage
        self.provider = provider
        self.spec = RemoteSpec(f"{model} ({provider} @ {_host(self.base_url)})", self.dims)
        #: The last failure, worded for the user (None while the endpoint works).
        self.problem: str | None = None
        self._loaded = False
        self._lock = threading.Lock()
        self.sleep: Callable[[float], None] = time.sleep

    @property
    def fingerprint(self) -> str:
        """Provider, host, model and dims: another of any of them rebuilds the index."""
        return f"{self.provider}@{_host(self.base_url)}:{self.model}:d{self.dims}:remote"

    @property
    def loaded(self) -> bool:
        """Whether the endpoint answered (and has not failed since)."""
        return self._loaded

    @property
    def ready_now(self) -> bool:
        """Whether an embedding now would not wait for a model to start: the server has it."""
        return self._loaded

    def close(self) -> None:
        """Nothing to release: each request opens its own connection."""

    def warm(self) -> None:
        """Nothing to start here (see :meth:`Embedder.warm`)."""

    def load(self) -> None:
        """Check the endpoint with one tiny request; raises :class:`RemoteEmbeddingError`."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._request(["ping"])
            self._loaded = True

    def embed(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """``(n, dims)`` float32 unit vectors in input order, ``batch_size`` texts per request."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_query() for one")
        texts = list(texts)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            out[start : start + len(batch)] = self._request(batch)
            if progress is not None:
                progress(start + len(batch), len(texts))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """One ``(dims,)`` unit vector."""
        vector: np.ndarray = self.embed([text])[0]
        return vector

    # -- HTTP --

    def _request(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/embeddings"
        where = f"embedding endpoint {_host(self.base_url)} ({self.model})"
        attempt = 0
        while True:
            wait: float | None = None
            limit = max_body_bytes(len(texts), self.dims)
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                raw = _post(request, self.timeout, limit)
                payload = json.loads(raw, parse_constant=_no_constant)
                del raw
                vectors = self._parse(payload, len(texts), where)
                self.problem = None
                self._record_usage(payload)
                return vectors
            except _Redirected as exc:
                retriable = False
                reason = (
                    f"HTTP {exc.code}: redirected to {exc.origin}, not followed (the key is "
                    "only sent to the configured base_url; set base_url to the final address)"
                )
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                retriable = exc.code == 429 or exc.code >= 500
                reason = f"HTTP {exc.code}{': ' + detail if detail else ''}"
                if retriable:
                    wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                exc.close()
            except _TooLarge:
                retriable = False
                reason = f"the answer is larger than {limit // 1_000_000 or 1} MB; not read"
            except _DeadlinePassed:
                retriable = True
                reason = f"no complete answer within {self.timeout:g}s (request_timeout)"
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                retriable = True
                reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
            except ValueError as exc:  # not JSON
                retriable = False
                reason = f"not a JSON answer ({exc})"
            if not retriable or attempt >= self.max_retries:
                self._fail(redact(f"{where} failed: {reason}", [self.api_key]))
            attempt += 1
            delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
            if wait is not None:
                delay = min(MAX_RETRY_AFTER_S, max(delay, wait))
            self.sleep(delay)

    def _fail(self, message: str) -> NoReturn:
        self.problem = message
        self._loaded = False
        raise RemoteEmbeddingError(message)

    def _parse(self, payload: Any, count: int, where: str) -> np.ndarray:
        items = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(items, list) or len(items) != count:
            self._fail(f"{where} answered without {count} embeddings")
        ordered = sorted(items, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
        try:
            matrix = np.array([d["embedding"] for d in ordered], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            self._fail(f"{where} answered embeddings that are not lists of numbers")
        if matrix.ndim != 2 or matrix.shape[1] != self.dims:
            width = matrix.shape[-1] if matrix.ndim else 0
            self._fail(
                f"{where} returned {width}-dim vectors, expected {self.dims}: set dimensions "
                "in [embeddings] to the model's width"
            )
        if not np.isfinite(matrix).all():
            self._fail(f"{where} answered vectors with NaN or infinite numbers; none were used")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.isfinite(norms).all() or (norms == 0).any():
            self._fail(f"{where} answered vectors of length zero or overflowing; none were used")
        unit: np.ndarray = (matrix / norms).astype(np.float32)
        return unit

    def _record_usage(self, payload: dict[str, Any]) -> None:
        if self.usage is None:
            return
        usage = payload.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        with contextlib.suppress(Exception):  # accounting never breaks indexing
            self.usage(self.model, tokens if isinstance(tokens, int) else None)


#: Bytes of JSON allowed per number of an answer (``-0.012345678901234567,`` and slack), and
#: for everything else in it.
BYTES_PER_NUMBER = 48
BODY_SLACK_BYTES = 1_000_000
#: Bytes of an error answer read for its message.
MAX_ERROR_BYTES = 64_000


def max_body_bytes(texts: int, dims: int) -> int:
    """The largest answer read for ``texts`` embeddings of ``dims`` numbers (more is refused)."""
    return texts * dims * BYTES_PER_NUMBER + BODY_SLACK_BYTES


class _Redirected(Exception):
    def __init__(self, code: int, location: str) -> None:
        super().__init__(code, location)
        self.code = code
        parts = urllib.parse.urlsplit(location)
        self.origin = (
            f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
            if parts.hostname
            else "another path"
        )


class _TooLarge(Exception):
    pass


class _DeadlinePassed(Exception):
    pass


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: following it would send the key to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        raise _Redirected(code, str(newurl))


def _tracking_handlers(sockets: list[Any]) -> list[urllib.request.BaseHandler]:
    """HTTP(S) handlers whose connections put their socket in ``sockets`` (for the deadline)."""

    class Connection(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.append(self.sock)

    class SecureConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            sockets.append(self.sock)

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req):  # type: ignore[no-untyped-def]
            return self.do_open(Connection, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):  # type: ignore[no-untyped-def]
            # HTTPSHandler() holds no context: the connection makes the default one
            return self.do_open(SecureConnection, req, context=None)

    return [Handler(), SecureHandler()]


def _post(request: urllib.request.Request, timeout: float, limit: int) -> bytes:
    """The body of the answer to ``request``: no redirect followed, at most ``limit`` bytes,
    and the whole exchange (connect, headers, body) within ``timeout`` seconds, however slowly
    the server trickles. Raises ``HTTPError`` for an error status."""
    sockets: list[Any] = []
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    opener = urllib.request.build_opener(_RefuseRedirects, *_tracking_handlers(sockets))
    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        with opener.open(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > limit:
                raise _TooLarge
            chunks: list[bytes] = []
            size = 0
            while chunk := response.read(min(1 << 16, limit + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise _TooLarge
            if expired.is_set():
                raise _DeadlinePassed
            return b"".join(chunks)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() and not isinstance(exc, urllib.error.HTTPError):
            raise _DeadlinePassed from exc
        raise
    finally:
        watchdog.cancel()


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read(MAX_ERROR_BYTES) or b"{}")
    except (ValueError, OSError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:200]
    return str(error or "")[:200]
