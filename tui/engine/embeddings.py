"""Local sentence embeddings on CPU: ONNX Runtime + HF ``tokenizers`` + numpy.

The default model (all-MiniLM-L6-v2, int8 weights, 384 dims) works offline; other models are
downloaded on first use (where the files come from: :mod:`.model_files`, whose names are
exported here too), with a clear :class:`EmbeddingError` when they are neither cached nor
downloadable.

Vectors are mean-pooled over the attention mask, L2-normalised, float32. Inputs are truncated
at ``spec.max_tokens`` word-pieces (including [CLS]/[SEP]). Nothing here imports Textual, and
``onnxruntime`` is only imported when a model is loaded.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .heap import release_free_memory
from .model_files import (
    DEFAULT_MODEL,
    EmbeddingError,
    ModelSpec,
    default_cache_dir,
    onnx_file,
    tokenizer_json,
)

if TYPE_CHECKING:  # numpy loads at the first embedding or search, the tokenizer at the first count
    import numpy as np
    import tokenizers

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

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Most texts of one batch run at once by default (each run holds its own activations).
MAX_PARALLEL_RUNS = 4


def _usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


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
        import tokenizers

        text = tokenizer_json(spec, cache_dir)
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


def _fused_model_sha256() -> str:
    from .onnx_fusions import FUSED_MODEL_SHA256

    return FUSED_MODEL_SHA256


def _lean_model(path: Path, *, fuse: bool = False) -> bytes | str:
    """What to hand ONNX Runtime: the model with its int8 lookup tables kept int8, and with
    ``fuse`` its attention and GELU fused, else the path.

    Constant folding would make a float32 copy of the whole word-embedding table (47 MB for the
    default model, +87 MB peak at load); gathering rows first keeps it at 12 MB with identical
    outputs (see :mod:`tui.engine.onnx_lean`). The fusions (:mod:`tui.engine.onnx_fusions`,
    for the default model's bytes only) make a query ~11% cheaper, vectors equal to ~1e-6.
    """
    from .onnx_fusions import fuse_attention
    from .onnx_lean import gather_dequantized_rows

    try:
        model = path.read_bytes()
    except OSError:
        return str(path)
    rewritten = gather_dequantized_rows(model)
    lean = rewritten[0] if rewritten is not None else None
    fused = fuse_attention(lean or model) if fuse else None
    return fused or lean or str(path)


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
        get full batches. ``threads``: how many runs of the model a batch is split into, each
        on one core (``None``: the usable cores, at most :data:`MAX_PARALLEL_RUNS`); one text
        (a query) always runs on the calling thread alone.
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
        self._side_runs: ThreadPoolExecutor | None = None
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
            self._word_pieces()  # before the session: ``loaded`` means both are there
            self.load_session()

    def _word_pieces(self) -> tokenizers.Tokenizer:
        """The tokenizer that splits texts to embed, loaded at the first use (a model in a
        helper process needs none until a text comes)."""
        counter = self._counter
        if counter is None:
            counter = _tokenizer(self.spec, self.cache_dir, "count")
            self._pad_id = _pad_ids[(self.spec, self.cache_dir)]
            self._counter = counter
        return counter

    def load_session(self) -> None:
        """Load the ONNX session alone (no tokenizer): what the helper process needs."""
        path = onnx_file(self.spec, self.cache_dir)
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
        # One thread per run: a batch is split into concurrent runs instead (see _run). A
        # query on one thread costs ~8 ms of CPU against ~11 on two (the threads' hand-offs),
        # and whole texts per core embed 12-22% faster than each product split across cores.
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        try:
            model = _lean_model(path, fuse=self.spec.onnx_sha256 == _fused_model_sha256())
            session = ort.InferenceSession(
                model, sess_options=so, providers=["CPUExecutionProvider"]
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
        import numpy as np

        texts = list(texts)
        n = len(texts)
        out = np.zeros((n, self.dims), dtype=np.float32)
        if n == 0:
            return out
        self.load()
        done = 0
        # One text (a query) is its own batch: no lengths to sort it by.
        for idx in self._batches(texts) if n > 1 else [[0]]:
            out[idx] = self._embed_batch([texts[i] for i in idx])
            done += len(idx)
            if progress is not None:
                progress(done, n)
        return out

    def _batches(self, texts: list[str]) -> list[list[int]]:
        """Indices of ``texts`` grouped into batches, longest first (least padding)."""
        counter = self._word_pieces()
        cap = self.spec.max_tokens
        lengths: list[int] = []
        for start in range(0, len(texts), 1024):  # bounded memory for large reindexes
            encs = counter.encode_batch(texts[start : start + 1024])
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
        counter = self._word_pieces()
        processor = counter.post_processor
        keep = self.spec.max_tokens - (
            processor.num_special_tokens_to_add(False) if processor is not None else 0
        )
        encs = []
        for enc in counter.encode_batch(texts, add_special_tokens=False):
            if len(enc.ids) > keep:
                enc.truncate(keep)
            encs.append(processor.process(enc) if processor is not None else enc)
        import numpy as np

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

    @property
    def parallel_runs(self) -> int:
        """How many runs of the model a batch is split into at most."""
        return max(1, self.threads or min(_usable_cores(), MAX_PARALLEL_RUNS))

    def _run(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """Unit vectors of one encoded batch (``(n, width)`` int64 arrays): the model, then mean
        pooling over the mask and L2 normalisation. The helper process runs exactly this.

        A batch of several texts is split into :attr:`parallel_runs` groups of rows, each run
        on its own core (the first on the calling thread), each cut to its own longest text.
        """
        import numpy as np

        groups = np.array_split(np.arange(len(ids)), min(self.parallel_runs, len(ids)))
        if len(groups) == 1:
            return self._run_rows(ids, mask, types)
        parts = []
        for rows in groups:
            width = int(mask[rows].sum(axis=1).max())
            parts.append((ids[rows, :width], mask[rows, :width], types[rows, :width]))
        side = self._side_pool()
        later = [side.submit(self._run_rows, *part) for part in parts[1:]]
        first = self._run_rows(*parts[0])
        return np.concatenate([first, *(future.result() for future in later)])

    def _side_pool(self) -> ThreadPoolExecutor:
        """The threads that run a batch's other groups (started at the first split batch)."""
        with self._lock:
            if self._side_runs is None:
                self._side_runs = ThreadPoolExecutor(
                    self.parallel_runs - 1, thread_name_prefix="memdeck-embed"
                )
            return self._side_runs

    def _run_rows(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """:meth:`_run` of one group of rows, on the calling thread."""
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = types
        try:
            (hidden,) = self._session.run([self.spec.output_name], feeds)
        except Exception as exc:  # onnxruntime raises its own non-exported types
            raise EmbeddingError(f"Embedding model {self.spec.name!r} failed: {exc}") from exc
        import numpy as np

        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
