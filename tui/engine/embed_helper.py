"""The local embedding model in a helper process that starts on demand and exits when idle.

The ONNX session (onnxruntime, the model's weights, the activations of a batch) costs the app
~100 MB resident for as long as it runs, though a chat app embeds in short bursts: a query
per search, a few chunks per edit. :class:`HelperEmbedder` keeps the tokenizer in the app
(it counts tokens for the chunker anyway) and runs the model in a child process
(``python -m tui.engine.embed_helper``) started at the first embedding and stopped after
``idle_exit`` seconds without work; the next embedding starts it again (about a second).

The parent tokenises and batches exactly as :class:`~tui.engine.embeddings.Embedder` does
and sends each batch's token ids; the child runs :meth:`Embedder._run` on them, so vectors are
bit-identical to the in-process path and the fingerprint is the same (no rebuild when
switching). The pipe protocol is binary frames on the child's stdin/stdout:

- parent -> child: ``b"B" <u32 id> <u32 rows> <u32 width>`` then ids, attention mask and type
  ids, each ``rows x width`` int32;
- child -> parent: ``b"R" <u32 dims>`` once the model is loaded, ``b"V" <u32 id> <u32 rows>
  <u32 dims>`` then float32 vectors, or ``b"E" <u32 id> <u32 length>`` then a UTF-8 error
  message. ``id`` is the request's, echoed: a reply is only ever taken for its own request.

The child exits when its stdin closes: when the parent stops it, and when the parent dies
(even killed), so nothing outlives the app. Every read has a deadline (``request_timeout``,
longer for a start, which loads the model). A child that dies, stops answering (a deadline
passes) or breaks the protocol (an unknown frame, a reply to another request, stray bytes on
the pipe) is killed and restarted once; if the restart fails too, :class:`EmbeddingError`
says so with the tail of its stderr. :meth:`HelperEmbedder.close` always returns.

A request's deadline follows its work (:meth:`HelperEmbedder.request_deadline`): a search's
query gets a few seconds, not the minute a large batch may take. A query that misses it is
not retried in line (the search goes on with BM25 and says why, through ``problem``): the
stuck helper is killed and a new one starts in the background for the next search.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .embeddings import DEFAULT_MODEL, Embedder, EmbeddingError, ModelSpec
from .heap import release_free_memory, resident_mb

if TYPE_CHECKING:  # numpy loads at the first embedding, not with the app
    import numpy as np

__all__ = ["DEFAULT_IDLE_EXIT", "HelperEmbedder"]

#: Seconds without an embedding after which the helper process exits.
DEFAULT_IDLE_EXIT = 60.0
#: After a batch of at least this many padded tokens, the helper calls ``malloc_trim`` once no
#: request has come for ``TRIM_PAUSE`` seconds (the end of a burst, not between its batches).
TRIM_AFTER_TOKENS = 256
TRIM_PAUSE = 0.2
#: How long a stopping helper gets to exit before it is killed.
STOP_TIMEOUT = 2.0
#: Default deadline of one request (seconds); a start, which loads the model, gets
#: ``START_TIMEOUT_FACTOR`` times as long.
DEFAULT_REQUEST_TIMEOUT = 60.0
START_TIMEOUT_FACTOR = 3.0
#: The deadline of the smallest request (a search's query), in seconds, and what each padded
#: token of a batch adds to it (a 512-token batch: ~15 s; a query runs in milliseconds).
DEFAULT_QUERY_TIMEOUT = 5.0
SECONDS_PER_TOKEN = 0.02
_U32x3 = struct.Struct("<III")
_U32 = struct.Struct("<I")
_U32x2 = struct.Struct("<II")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding ``tui/``


class _HelperGone(Exception):
    """The helper closed its pipe (exited or was killed)."""


class _HelperBroken(_HelperGone):
    """The helper stopped answering (a deadline passed) or broke the protocol: it is killed."""


class _HelperLate(_HelperBroken):
    """A request's deadline passed without its answer (a stopped or starved helper)."""


def _read_by(fd: int, size: int, deadline: float) -> bytes:
    """Exactly ``size`` bytes from pipe ``fd`` before ``deadline`` (``time.monotonic``)."""
    parts: list[bytes] = []
    while size:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _HelperLate("it did not answer in time")
        data = os.read(fd, min(size, 1 << 20))
        if not data:
            raise _HelperGone("the pipe closed")
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        data = stream.read(size)
        if not data:
            raise _HelperGone("the pipe closed")
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _write_frame(stream: IO[bytes], kind: bytes, *parts: bytes) -> None:
    stream.write(kind + b"".join(parts))
    stream.flush()


def _error_frame(request_id: int, message: str) -> tuple[bytes, bytes, bytes]:
    data = message.encode("utf-8", "replace")
    return b"E", _U32x2.pack(request_id, len(data)), data


# --------------------------------------------------------------------------- parent


_live: weakref.WeakSet[HelperEmbedder] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stop every helper at interpreter exit (a killed parent closes the pipe instead)."""
    for embedder in list(_live):
        embedder.close()


class HelperEmbedder(Embedder):
    """An :class:`Embedder` whose model runs in a helper process (same vectors, same
    fingerprint). Thread-safe: batches of concurrent callers interleave on the one pipe, so a
    search's query waits for at most one batch of an indexing run.

    ``loaded`` becomes true once the helper has loaded the model; it stays true while the
    helper is stopped for idleness (the next embedding restarts it).
    """

    def __init__(
        self,
        spec: ModelSpec = DEFAULT_MODEL,
        cache_dir: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        max_batch_tokens: int | None = 512,
        *,
        idle_exit: float | None = DEFAULT_IDLE_EXIT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        """``idle_exit``: seconds without work before the helper exits (``None``: never);
        ``request_timeout``: the most seconds a batch may take before the helper is killed
        and restarted (a start gets ``START_TIMEOUT_FACTOR`` times as long);
        ``query_timeout``: the deadline of a one-line query (see :meth:`request_deadline`)."""
        super().__init__(spec, cache_dir, batch_size, threads, max_batch_tokens)
        self.idle_exit = idle_exit
        self.request_timeout = request_timeout
        self.query_timeout = query_timeout
        #: Why the last query got no vector (None once one gets it): what a search says.
        self.problem: str | None = None
        self._next_id = 0
        self._ready = False
        self._io_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._last_used = 0.0
        self._reaper: threading.Thread | None = None
        self._warming: threading.Thread | None = None
        self._closing = threading.Event()
        #: How many helper processes have been started (one more after each idle exit).
        self.starts = 0
        _live.add(self)

    @property
    def loaded(self) -> bool:
        """Whether the model has loaded (in a helper that may since have exited idle)."""
        return self._ready

    @property
    def ready_now(self) -> bool:
        """Whether the model is loaded in a running helper (after an idle exit, the next
        embedding waits 0.5-1 s for a new one)."""
        return self._ready and self.helper_pid is not None

    def warm(self) -> None:
        """Start a helper in the background if none runs (after an idle exit), so that the
        next embedding does not wait for it; failures surface at that embedding."""
        if not self._ready or self.ready_now or self._closing.is_set():
            return
        with self._lock:
            if self._warming is not None and self._warming.is_alive():
                return
            self._warming = threading.Thread(
                target=self._warm, name="embed-helper-warm", daemon=True
            )
            self._warming.start()

    def _warm(self) -> None:
        with self._io_lock:
            if self._proc is not None or self._closing.is_set():
                return
            with contextlib.suppress(EmbeddingError):
                self._start()
            self._touch()

    @property
    def helper_pid(self) -> int | None:
        """The running helper's process id, or None when none runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def helper_rss_mb(self) -> float | None:
        """The running helper's resident memory in MB (Linux ``/proc``), or None."""
        pid = self.helper_pid
        return None if pid is None else resident_mb(pid)

    def load(self) -> None:
        """Load the tokenizer here and the model in a (new) helper; idempotent, thread-safe."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if self.spec.tokenizer_resource is None:  # a download fails here, not at a search
                self._word_pieces()  # the bundled one loads at the first text (~13 MB)
            with self._io_lock:
                if self._proc is None:
                    self._start()
                self._touch()
            self._ready = True

    def request_deadline(self, rows: int, width: int) -> float:
        """Seconds a batch of ``rows`` texts padded to ``width`` tokens may take: a few for a
        query, more with the batch's tokens, never more than ``request_timeout``."""
        return min(self.request_timeout, self.query_timeout + rows * width * SECONDS_PER_TOKEN)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one text (a search's query) into a ``(dims,)`` unit vector, as
        :meth:`Embedder.embed_query` does. A helper that misses the query's deadline is
        killed and replaced in the background, not waited for: :class:`EmbeddingError` (and
        ``problem``) say so, and the search goes on without the vector."""
        self.load()
        vector: np.ndarray = self._exchange(*self._encode([text]), query=True)[0]
        return vector

    def _run(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        return self._exchange(ids, mask, types, query=False)

    def _exchange(
        self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray, *, query: bool
    ) -> np.ndarray:
        """The vectors of one encoded batch from the helper, started or restarted as needed
        (once; for a ``query``, not after a missed deadline)."""
        import numpy as np

        rows, width = ids.shape
        payload = [
            _U32x2.pack(rows, width),
            *(np.ascontiguousarray(a, dtype=np.int32).tobytes() for a in (ids, mask, types)),
        ]
        with self._io_lock:
            for attempt in (1, 2):
                if self._proc is None:
                    self._start()
                try:
                    vectors = self._request(payload, rows)
                except _HelperGone as exc:
                    broken = isinstance(exc, _HelperBroken)
                    code = self._kill() if broken else self._reap()
                    if query and isinstance(exc, _HelperLate):
                        self.problem = (
                            "The embedding helper did not answer within "
                            f"{self.request_deadline(rows, width):.0f} s (stopped or "
                            "overloaded; restarting it)"
                        )
                        break
                    if attempt == 2:
                        what = f"failed ({exc})" if broken else f"exited (code {code})"
                        self.problem = f"The embedding helper {what} twice"
                        raise EmbeddingError(
                            f"The embedding helper process of model {self.spec.name!r} {what} "
                            f"while embedding, twice; embeddings are unavailable until it "
                            f"works again.{self._stderr_tail()}"
                        ) from None
                else:
                    self.problem = None
                    return vectors
                finally:
                    self._touch()
        self.warm()  # a fresh helper for the next search, started meanwhile
        raise EmbeddingError(f"{self.problem}.")

    def _request(self, payload: Sequence[bytes], rows: int) -> np.ndarray:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        self._next_id = (self._next_id + 1) % 2**32
        request_id = self._next_id
        try:
            _write_frame(proc.stdin, b"B", _U32.pack(request_id), *payload)
        except (BrokenPipeError, OSError) as exc:
            raise _HelperGone(str(exc)) from exc
        fd = proc.stdout.fileno()
        _, width = _U32x2.unpack(payload[0])
        deadline = time.monotonic() + self.request_deadline(rows, width)
        kind = _read_by(fd, 1, deadline)
        if kind == b"V":
            answer_id, n, dims = _U32x3.unpack(_read_by(fd, _U32x3.size, deadline))
            if answer_id != request_id or n != rows or dims != self.dims:
                raise _HelperBroken(
                    f"it answered request {answer_id} ({n}x{dims}) to request {request_id} "
                    f"({rows}x{self.dims})"
                )
            data = _read_by(fd, n * dims * 4, deadline)
            import numpy as np

            return np.frombuffer(data, dtype=np.float32).reshape(n, dims).copy()
        if kind == b"E":
            answer_id, size = _U32x2.unpack(_read_by(fd, _U32x2.size, deadline))
            if answer_id != request_id or size > 1 << 20:
                raise _HelperBroken(f"it sent a malformed error frame for request {request_id}")
            raise EmbeddingError(_read_by(fd, size, deadline).decode("utf-8", "replace"))
        raise _HelperBroken(f"it sent an unknown frame {kind!r}")

    def _start(self) -> None:
        """Start a helper and wait until its model is loaded (call with ``_io_lock`` held)."""
        config = {
            "spec": dataclasses.asdict(self.spec),
            "cache_dir": None if self.cache_dir is None else str(self.cache_dir),
            "threads": self.threads,
        }
        env = dict(os.environ)
        # The child imports this very ``tui`` (a checkout may shadow an installed copy).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (read on failure, closed later)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tui.engine.embed_helper", json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                close_fds=True,
            )
        except OSError as exc:
            raise EmbeddingError(f"Could not start the embedding helper process: {exc}") from exc
        self._proc = proc
        self.starts += 1
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self.request_timeout * START_TIMEOUT_FACTOR
        try:
            kind = _read_by(fd, 1, deadline)
            (value,) = _U32.unpack(_read_by(fd, _U32.size, deadline))
            if kind == b"E" and value > 1 << 20:
                raise _HelperBroken("it sent a malformed error frame")
            message = _read_by(fd, value, deadline) if kind == b"E" else b""
        except _HelperGone as exc:
            code = self._kill() if isinstance(exc, _HelperBroken) else self._reap()
            what = f"failed ({exc})" if isinstance(exc, _HelperBroken) else f"exited (code {code})"
            raise EmbeddingError(
                f"The embedding helper process {what} before loading model "
                f"{self.spec.name!r}.{self._stderr_tail()}"
            ) from None
        if kind != b"R":
            self._reap()
            raise EmbeddingError(message.decode("utf-8", "replace"))
        if value != self.dims:
            self._reap()
            raise EmbeddingError(
                f"Embedding model {self.spec.name!r} outputs {value} dims, its spec says "
                f"{self.dims}."
            )

    def _touch(self) -> None:
        """Note the helper was just used; make sure something stops it once idle."""
        self._last_used = time.monotonic()
        if self.idle_exit is None or self._proc is None:
            return
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(
                target=self._stop_when_idle, name="embed-helper-idle", daemon=True
            )
            self._reaper.start()

    def _stop_when_idle(self) -> None:
        assert self.idle_exit is not None
        while True:
            with self._io_lock:
                if self._proc is None:
                    return
                wait = self._last_used + self.idle_exit - time.monotonic()
                if wait <= 0:
                    self._stop()
                    return
            if self._closing.wait(wait):
                return

    def _stop(self) -> None:
        """Close the helper's stdin (it exits) and wait for it (``_io_lock`` held)."""
        proc = self._proc
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._proc = None

    def _kill(self) -> int | None:
        """The helper is stuck or broke the protocol: kill it at once (``_io_lock`` held)."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
        return self._reap()

    def _reap(self) -> int | None:
        """The helper died: collect it and return its exit code (``_io_lock`` held)."""
        proc = self._proc
        self._stop()
        return None if proc is None else proc.returncode

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            text = self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f" Its last output:\n{text}" if text else ""

    def close(self) -> None:
        """Stop the helper now (a later embedding starts a new one). Always returns: a helper
        that holds up a request (stopped, stuck) is killed."""
        self._closing.set()
        if not self._io_lock.acquire(timeout=STOP_TIMEOUT):
            proc = self._proc  # a request is waiting on it: unblock it
            if proc is not None:
                with contextlib.suppress(OSError):
                    proc.kill()
            if not self._io_lock.acquire(timeout=STOP_TIMEOUT):
                self._closing.clear()
                return
        try:
            self._stop()
        finally:
            self._io_lock.release()
        self._closing.clear()
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None


# --------------------------------------------------------------------------- child


def _serve(config: dict[str, Any], stdin: IO[bytes], out: IO[bytes]) -> None:
    import numpy as np

    spec = ModelSpec(**config["spec"])
    cache_dir = Path(config["cache_dir"]) if config.get("cache_dir") else None
    embedder = Embedder(spec, cache_dir, threads=config.get("threads"))
    try:
        embedder.load_session()
    except EmbeddingError as exc:
        data = str(exc).encode("utf-8", "replace")
        _write_frame(out, b"E", _U32.pack(len(data)), data)
        return
    _write_frame(out, b"R", _U32.pack(embedder.dims))
    heavy = False  # a batch big enough to leave freed memory behind ran since the last trim
    while True:
        if heavy and not _pending(stdin, TRIM_PAUSE):
            release_free_memory()  # the burst is over: hand its activations back to the OS
            heavy = False
        kind = stdin.read(1)
        if not kind:  # the parent stopped us, or died
            return
        if kind != b"B":
            _write_frame(out, *_error_frame(0, f"unknown request {kind!r}"))
            return
        request_id, rows, width = _U32x3.unpack(_read_exact(stdin, _U32x3.size))
        size = rows * width * 4
        ids, mask, types = (
            np.frombuffer(_read_exact(stdin, size), dtype=np.int32)
            .reshape(rows, width)
            .astype(np.int64)
            for _ in range(3)
        )
        try:
            vectors = embedder._run(ids, mask, types)
        except EmbeddingError as exc:
            _write_frame(out, *_error_frame(request_id, str(exc)))
            continue
        _write_frame(out, b"V", _U32x3.pack(request_id, rows, embedder.dims), vectors.tobytes())
        del vectors, ids, mask, types
        heavy = heavy or rows * width >= TRIM_AFTER_TOKENS


def _pending(stream: IO[bytes], timeout: float) -> bool:
    """Whether a request arrives on ``stream`` (unbuffered) within ``timeout`` seconds."""
    try:
        return bool(select.select([stream], [], [], timeout)[0])
    except (OSError, ValueError):
        return True


#: The helper's CPU priority below the app's (``nice``): when a reindex and the UI want the same
#: cores, the UI gets them (streaming while a 3,000-line log was embedded stalled 167 ms at
#: the same priority). With idle cores it changes nothing, a query's embedding included.
HELPER_NICENESS = 10


def main(argv: Sequence[str] | None = None) -> int:
    """The helper process: load the model, then embed batches until stdin closes."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Ctrl+C in the terminal reaches the whole process group: the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(HELPER_NICENESS)
    # Frames go to a private copy of stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # Unbuffered, so that select() sees whether a request is waiting.
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    with contextlib.suppress(_HelperGone, BrokenPipeError):
        _serve(json.loads(args[0]), stdin, out)
    return 0


if __name__ == "__main__":
    from .heap import tune_process

    tune_process()
    sys.exit(main())
