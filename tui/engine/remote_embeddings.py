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
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .embeddings import EmbeddingError

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
        self._opener = urllib.request.build_opener()
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
        return self.embed([text])[0]

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
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with self._opener.open(request, timeout=self.timeout) as response:
                    payload = json.loads(response.read())
                vectors = self._parse(payload, len(texts), where)
                self.problem = None
                self._record_usage(payload)
                return vectors
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                retriable = exc.code == 429 or exc.code >= 500
                reason = f"HTTP {exc.code}{': ' + detail if detail else ''}"
                if retriable:
                    wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                exc.close()
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                retriable = True
                reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
            except ValueError as exc:  # not JSON
                retriable = False
                reason = f"not a JSON answer ({exc})"
            if not retriable or attempt >= self.max_retries:
                self._fail(f"{where} failed: {reason}")
            attempt += 1
            delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
            if wait is not None:
                delay = min(MAX_RETRY_AFTER_S, max(delay, wait))
            self.sleep(delay)

    def _fail(self, message: str) -> None:
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
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)

    def _record_usage(self, payload: dict[str, Any]) -> None:
        if self.usage is None:
            return
        usage = payload.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        with contextlib.suppress(Exception):  # accounting never breaks indexing
            self.usage(self.model, tokens if isinstance(tokens, int) else None)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:200]
    return str(error or "")[:200]
