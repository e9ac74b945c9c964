"""A fake OpenAI-compatible chat server for tests (standard library only).

In-process use::

    with FakeOpenAI(FakeOpenAI.text("hello world")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
        ...
        assert server.chat_requests[-1].system_prompt == "You are ..."

Replies are served from a FIFO queue (``FakeOpenAI(*replies)`` / ``enqueue``).
Each queue item is a ``Reply`` built with the constructors (``text``,
``tool_call``, ``tool_calls``, ``error``, ``hang``, ``malformed_stream``), a
plain string (a text reply) or a one-shot callable ``fn(request_json)``.
A persistent ``responder`` callable is asked first for every chat request and
may return ``None`` to fall through to the queue; when the queue is empty the
``default`` answers (an echo of the last user message unless configured).

As a process (prints its base URL as the first stdout line, stops on
SIGTERM/SIGINT)::

    python tests/support/fakeopenai.py --port 0 --script script.json --record requests.jsonl

The script is a JSON list of replies, or an object with ``replies``,
``default``, ``models`` and ``rules`` keys, for example::

    {"models": ["fake-model"],
     "replies": ["plain text",
                 {"text": ["hel", "lo"], "chunk_delay": 0.05},
                 {"tool_calls": [{"name": "remember", "arguments": {"fact": "x"}}]},
                 {"error": 429, "message": "slow down", "retry_after": 1},
                 {"hang": 30},
                 {"malformed": "truncated"}],
     "default": "echo",
     "rules": [{"system_contains": "Daily Summary", "reply": "fixed summary"}]}

Rules are persistent; each has one of ``system_contains``, ``user_contains``
or ``request_contains`` (a substring) and a ``reply``.  A running server also
accepts ``POST /_fake/replies`` (a JSON list of replies to enqueue) and
``GET /_fake/requests`` (the recorded requests), which are not recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import random
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "ToolCall"]

ReplyKind = Literal["completion", "error", "hang", "malformed"]
MalformedHow = Literal["truncated", "bad_json", "no_done"]

_ARG_FRAGMENT = 8  # characters of tool-call arguments per streamed delta
_STOP_JOIN_SECONDS = 1.0
_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolCall:
    """One function call the fake assistant makes."""

    name: str
    arguments: str
    id: str


@dataclass(frozen=True)
class Reply:
    """A scripted answer to one chat completion request."""

    kind: ReplyKind
    content: str | None = None
    pieces: tuple[str, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    status: int = 200
    message: str = ""
    error_type: str = ""
    error_code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    chunk_delay: float = 0.0
    how: MalformedHow = "truncated"


ReplyLike = Reply | str | Mapping[str, Any]
Responder = Callable[[dict[str, Any]], ReplyLike | None]


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received (header names are lower-case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def json(self) -> Any:
        """The parsed JSON body (``None`` if there was none or it was invalid)."""
        return self.body

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())

    @property
    def authorization(self) -> str | None:
        """The raw Authorization header, if one was sent."""
        return self.header("authorization")

    @property
    def api_key(self) -> str | None:
        """The bearer token from the Authorization header, if any."""
        auth = self.authorization
        if auth is None:
            return None
        scheme, _, token = auth.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None

    @property
    def model(self) -> str | None:
        """The requested model id."""
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed answer."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages sent."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            messages: list[dict[str, Any]] = self.body["messages"]
            return messages
        return []

    @property
    def system_prompt(self) -> str | None:
        """The text of all system/developer messages joined by blank lines, or None."""
        texts = [
            _content_text(m.get("content"))
            for m in self.messages
            if m.get("role") in ("system", "developer")
        ]
        return "\n\n".join(texts) if texts else None

    @property
    def last_user_message(self) -> str | None:
        """The text of the last user message, or None."""
        return _last_user_text(self.messages)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions offered."""
        if isinstance(self.body, dict) and isinstance(self.body.get("tools"), list):
            tools: list[dict[str, Any]] = self.body["tools"]
            return tools
        return []

    @property
    def tool_names(self) -> list[str]:
        """The names of the function tools offered."""
        return [t.get("function", {}).get("name", "") for t in self.tools]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (used for ``--record`` and ``/_fake/requests``)."""
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }


def _content_text(content: Any) -> str:
    """Text of a message ``content`` (a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _last_user_text(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _content_text(m.get("content"))
    return None


def _split_words(text: str) -> tuple[str, ...]:
    """Split text into word-sized stream pieces that join back to the original."""
    return tuple(re.findall(r"\S+\s*|\s+", text))


def _fragments(text: str, size: int = _ARG_FRAGMENT) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _as_tool_call(call: Any) -> list[ToolCall]:
    if isinstance(call, ToolCall):
        return [call]
    if isinstance(call, Reply):
        return list(call.tool_calls)
    if isinstance(call, Mapping):
        return [_make_call(call["name"], call.get("arguments", {}), call.get("id"))]
    if isinstance(call, tuple | list) and 1 <= len(call) <= 3:
        return [_make_call(*call)]
    raise TypeError(f"not a tool call: {call!r}")


def _make_call(
    name: str, arguments: Mapping[str, Any] | str | None = None, call_id: str | None = None
) -> ToolCall:
    if arguments is None:
        arguments = {}
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(name=name, arguments=args, id=call_id or _new_call_id())


_ERROR_DEFAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."),
}


def echo_last_user(body: dict[str, Any]) -> Reply:
    """The default responder: answer with the last user message's text."""
    return FakeOpenAI.text(_last_user_text(body.get("messages")) or "")


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks its connection threads and sockets."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, app: FakeOpenAI, address: tuple[str, int]) -> None:
        self.app = app
        self.conn_threads: set[threading.Thread] = set()
        self.conn_sockets: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without the (possibly slow) reverse DNS lookup of HTTPServer."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._run_conn,
            args=(request, client_address),
            name="fakeopenai-conn",
            daemon=True,
        )
        with self.conn_lock:
            self.conn_threads.add(t)
            self.conn_sockets.add(request)
        t.start()

    def _run_conn(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.conn_lock:
                self.conn_threads.discard(threading.current_thread())
                self.conn_sockets.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return  # the client went away or the server is stopping
        if isinstance(exc, Exception):
            self.app._record_error(exc)

    def close_connections(self) -> None:
        """Unblock every connection thread by shutting its socket down."""
        with self.conn_lock:
            sockets = list(self.conn_sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "fakeopenai/1.0"

    def setup(self) -> None:
        super().setup()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request stderr logging."""

    def do_GET(self) -> None:
        self.server.app._dispatch(self, "GET")

    def do_POST(self) -> None:
        self.server.app._dispatch(self, "POST")

    def do_DELETE(self) -> None:
        self.server.app._dispatch(self, "DELETE")


def _write_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class FakeOpenAI:
    """A scripted OpenAI-compatible server on 127.0.0.1 running in a background thread."""

    # ---- reply constructors -------------------------------------------------

    @staticmethod
    def text(
        content: str | Sequence[str], *, finish_reason: str = "stop", chunk_delay: float = 0.0
    ) -> Reply:
        """A text answer; a list of strings gives the exact streamed pieces."""
        pieces = _split_words(content) if isinstance(content, str) else tuple(content)
        return Reply(
            kind="completion",
            content="".join(pieces),
            pieces=pieces,
            finish_reason=finish_reason,
            chunk_delay=chunk_delay,
        )

    @staticmethod
    def tool_call(
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        call_id: str | None = None,
        *,
        content: str | None = None,
        chunk_delay: float = 0.0,
    ) -> Reply:
        """An answer calling one function (arguments as a dict or a JSON string)."""
        return FakeOpenAI.tool_calls(
            (name, arguments, call_id), content=content, chunk_delay=chunk_delay
        )

    @staticmethod
    def tool_calls(*calls: Any, content: str | None = None, chunk_delay: float = 0.0) -> Reply:
        """An answer with several function calls.

        Each call is a ``tool_call(...)`` reply, a ``ToolCall``, a ``(name, arguments[,
        call_id])`` tuple or a ``{"name", "arguments", "id"}`` mapping.
        """
        flat = tuple(c for call in calls for c in _as_tool_call(call))
        if not flat:
            raise ValueError("tool_calls() needs at least one call")
        pieces = _split_words(content) if content else ()
        return Reply(
            kind="completion",
            content=content,
            pieces=pieces,
            tool_calls=flat,
            finish_reason="tool_calls",
            chunk_delay=chunk_delay,
        )

    @staticmethod
    def error(
        status: int,
        message: str | None = None,
        *,
        retry_after: float | str | None = None,
        headers: Mapping[str, str] | None = None,
        error_type: str | None = None,
        code: str | None = None,
    ) -> Reply:
        """An HTTP error with an OpenAI-style ``{"error": {...}}`` body.

        A 429 gets ``Retry-After: 1`` unless ``retry_after`` is given.
        """
        default_type, default_code, default_message = _ERROR_DEFAULTS.get(
            status,
            ("server_error", None, "The server had an error while processing your request.")
            if status >= 500
            else ("invalid_request_error", None, f"Error {status}."),
        )
        hdrs = dict(headers or {})
        if retry_after is None and status == 429:
            retry_after = 1
        if retry_after is not None:
            value = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
            hdrs.setdefault("Retry-After", value)
        return Reply(
            kind="error",
            status=status,
            message=message or default_message,
            error_type=error_type or default_type,
            error_code=code if code is not None else default_code,
            headers=tuple(hdrs.items()),
        )

    @staticmethod
    def hang(seconds: float = 30.0) -> Reply:
        """Read the request, send nothing for ``seconds``, then drop the connection."""
        return Reply(kind="hang", seconds=seconds)

    @staticmethod
    def malformed_stream(how: MalformedHow = "truncated", *, text: str = "partial ") -> Reply:
        """A broken answer after streaming ``text``.

        ``truncated``: the connection closes mid-JSON without ending the chunked body
        (the client raises ``APIConnectionError``); ``bad_json``: a complete SSE event
        whose JSON is cut off (``json.JSONDecodeError``); ``no_done``: a clean end of
        body without finish_reason or ``[DONE]`` (no exception).  Non-streamed requests
        get a truncated JSON body.
        """
        if how not in ("truncated", "bad_json", "no_done"):
            raise ValueError(f"unknown malformed kind {how!r}")
        return Reply(kind="malformed", content=text, pieces=_split_words(text), how=how)

    @staticmethod
    def parse_reply(data: Any) -> Reply:
        """A reply from its JSON script form (see the module docstring)."""
        if isinstance(data, Reply):
            return data
        if isinstance(data, str):
            return FakeOpenAI.text(data)
        if not isinstance(data, Mapping):
            raise TypeError(f"cannot make a reply from {data!r}")
        if "error" in data:
            return FakeOpenAI.error(
                int(data["error"]),
                data.get("message"),
                retry_after=data.get("retry_after"),
                headers=data.get("headers"),
                error_type=data.get("type"),
                code=data.get("code"),
            )
        if "hang" in data:
            return FakeOpenAI.hang(float(data["hang"]))
        if "malformed" in data:
            how = data["malformed"]
            return FakeOpenAI.malformed_stream(
                "truncated" if how is True else how, text=data.get("text", "partial ")
            )
        delay = float(data.get("chunk_delay", 0.0))
        if "tool_calls" in data:
            return FakeOpenAI.tool_calls(
                *data["tool_calls"], content=data.get("text"), chunk_delay=delay
            )
        if "text" in data:
            return FakeOpenAI.text(
                data["text"], finish_reason=data.get("finish_reason", "stop"), chunk_delay=delay
            )
        raise ValueError(f"cannot make a reply from {data!r}")

    @classmethod
    def from_script(
        cls, script: str | Path | Mapping[str, Any] | Sequence[Any], **kwargs: Any
    ) -> FakeOpenAI:
        """A server configured from a JSON script (a path, a list or an object)."""
        if isinstance(script, str | Path):
            script = json.loads(Path(script).read_text(encoding="utf-8"))
        if not isinstance(script, Mapping):
            script = {"replies": list(cast("Sequence[Any]", script))}  # str and Path were read above
        default = script.get("default", "echo")
        if "models" in script:
            kwargs.setdefault("models", tuple(script["models"]))
        if default != "echo":
            kwargs.setdefault("default", cls.parse_reply(default))
        if script.get("rules"):
            kwargs.setdefault("responder", _rules_responder(script["rules"]))
        return cls(*(cls.parse_reply(r) for r in script.get("replies", [])), **kwargs)

    # ---- server ------------------------------------------------------------

    def __init__(
        self,
        *replies: ReplyLike | Responder,
        default: ReplyLike | Responder | None = None,
        responder: Responder | None = None,
        models: Sequence[str] = ("fake-model",),
        require_api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | Path | None = None,
        embedding_dims: int = 64,
    ) -> None:
        """Queue ``replies``; nothing listens until ``start()`` / ``with``.

        ``POST /v1/embeddings`` answers with deterministic unit vectors (hash-seeded per input
        text, ``embedding_dims`` wide unless the request asks for ``dimensions``); replies put
        in :attr:`embedding_queue` (``error``/``hang`` replies) are served first, one per request.
        """
        self.embedding_dims = embedding_dims
        self.embedding_queue: deque[ReplyLike] = deque()
        self.default: ReplyLike | Responder = default if default is not None else echo_last_user
        self.responder: Responder | None = responder
        self.models: list[str] = list(models)
        self.require_api_key = require_api_key
        self._address = (host, port)
        self._record_path = Path(record_path) if record_path is not None else None
        self._queue: deque[ReplyLike | Responder] = deque(replies)
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeOpenAI:
        """Bind 127.0.0.1 (an ephemeral port by default) and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("FakeOpenAI already started")
        self._httpd = _Server(self, self._address)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fakeopenai-serve",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections and join all threads (about 1 s at most)."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or self._stop.is_set():
            return
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        deadline = time.monotonic() + _STOP_JOIN_SECONDS
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        with httpd.conn_lock:
            threads = list(httpd.conn_threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAI not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server root, like ``http://127.0.0.1:PORT``."""
        return f"http://{self._address[0]}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, like ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    # ---- scripting and inspection ------------------------------------------

    def enqueue(self, *replies: ReplyLike | Responder) -> None:
        """Append replies (or one-shot callables) to the queue."""
        with self._cond:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many queued replies have not been served yet."""
        with self._cond:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, oldest first."""
        with self._cond:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """A snapshot of the chat completion requests only."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by responders or the server (each also answered with 500)."""
        with self._cond:
            return list(self._errors)

    def wait_for_requests(
        self, count: int, timeout: float = 5.0, *, chat_only: bool = True
    ) -> list[RecordedRequest]:
        """Block until ``count`` (chat) requests were received; TimeoutError otherwise."""

        def matching() -> list[RecordedRequest]:
            reqs = self._requests
            return (
                [r for r in reqs if r.path.endswith("/chat/completions")]
                if chat_only
                else list(reqs)
            )

        with self._cond:
            self._cond.wait_for(lambda: len(matching()) >= count or self._stop.is_set(), timeout)
            found = matching()
        if len(found) < count:
            raise TimeoutError(f"expected {count} requests, got {len(found)}")
        return found

    # ---- request handling --------------------------------------------------

    def _record_error(self, exc: BaseException) -> None:
        with self._cond:
            self._errors.append(exc)
        traceback.print_exception(exc, file=sys.stderr)

    def _coerce(self, item: Any) -> Reply:
        return item if isinstance(item, Reply) else self.parse_reply(item)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            answer = self.responder(body)
            if answer is not None:
                return self._coerce(answer)
        with self._cond:
            item = self._queue.popleft() if self._queue else None
        if item is not None:
            if not callable(item):
                return self._coerce(item)
            answer = item(body)
            if answer is not None:
                return self._coerce(answer)
        default = self.default
        answer = default(body) if callable(default) else default
        return self._coerce(answer if answer is not None else echo_last_user(body))

    def _dispatch(self, h: _Handler, method: str) -> None:
        path = h.path.split("?", 1)[0].rstrip("/") or "/"
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length > 0 else b""
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True

        if path.startswith("/_fake/"):
            self._control(h, method, path, body)
            return

        req = RecordedRequest(
            method=method,
            path=path,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            raw=raw,
        )
        self._record(req)

        route = path[3:] if path.startswith("/v1/") else path
        if self.require_api_key is not None and req.api_key != self.require_api_key:
            self._send_error(h, self.error(401))
        elif bad_json:
            self._send_error(
                h, self.error(400, "We could not parse the JSON body of your request.")
            )
        elif method == "GET" and route == "/models":
            self._send_json(
                h, 200, {"object": "list", "data": [self._model(m) for m in self.models]}
            )
        elif method == "GET" and route.startswith("/models/"):
            model = route[len("/models/") :]
            if model in self.models:
                self._send_json(h, 200, self._model(model))
            else:
                self._send_error(h, self.error(404, f"The model `{model}` does not exist."))
        elif method == "POST" and route == "/chat/completions":
            self._chat(h, body)
        elif method == "POST" and route == "/embeddings":
            self._embeddings(h, body)
        else:
            self._send_error(h, self.error(404, f"Unknown request URL: {method} {path}."))

    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            if self._record_path is not None:
                with self._record_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(req.to_dict()) + "\n")
            self._cond.notify_all()

    def _control(self, h: _Handler, method: str, path: str, body: Any) -> None:
        if method == "POST" and path == "/_fake/replies" and isinstance(body, list):
            try:
                replies = [self.parse_reply(r) for r in body]
            except (TypeError, ValueError, KeyError) as exc:
                self._send_error(h, self.error(400, str(exc)))
                return
            self.enqueue(*replies)
            self._send_json(h, 200, {"pending": self.pending})
        elif method == "GET" and path == "/_fake/requests":
            self._send_json(h, 200, [r.to_dict() for r in self.requests])
        else:
            self._send_error(h, self.error(404, f"Unknown control URL: {method} {path}."))

    @staticmethod
    def _model(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "fakeopenai"}

    def _chat(self, h: _Handler, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_error(h, self.error(400, "Missing required parameter: 'messages'."))
            return
        if not isinstance(body.get("model"), str):
            self._send_error(h, self.error(400, "Missing required parameter: 'model'."))
            return
        try:
            reply = self._next_reply(body)
        except Exception as exc:
            self._record_error(exc)
            self._send_error(h, self.error(500, f"fakeopenai responder failed: {exc!r}"))
            return

        stream = bool(body.get("stream"))
        if reply.kind == "error":
            self._send_error(h, reply)
        elif reply.kind == "hang":
            self._stop.wait(reply.seconds)
            h.close_connection = True
        elif reply.kind == "malformed":
            self._send_malformed(h, reply, body, stream)
        elif stream:
            self._send_stream(h, reply, body)
        else:
            self._send_json(h, 200, self._completion(reply, body))

    @staticmethod
    def embedding_vector(text: str, dims: int) -> list[float]:
        """The fake's vector for ``text``: a bag of hash-seeded word vectors, L2-normalised
        (texts sharing words are similar; the same text always gives the same vector)."""
        out = [0.0] * dims
        for word in re.findall(r"\w+", text.lower()) or [""]:
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
            rng = random.Random(seed)
            for i in range(dims):
                out[i] += rng.gauss(0.0, 1.0)
        norm = math.sqrt(sum(v * v for v in out)) or 1.0
        return [v / norm for v in out]

    def _embeddings(self, h: _Handler, body: Any) -> None:
        if not isinstance(body, dict) or "input" not in body:
            self._send_error(h, self.error(400, "Missing required parameter: 'input'."))
            return
        if not isinstance(body.get("model"), str):
            self._send_error(h, self.error(400, "Missing required parameter: 'model'."))
            return
        with self._cond:
            item = self.embedding_queue.popleft() if self.embedding_queue else None
        if item is not None:
            reply = self._coerce(item)
            if reply.kind == "error":
                self._send_error(h, reply)
                return
            if reply.kind == "hang":
                self._stop.wait(reply.seconds)
                h.close_connection = True
                return
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = body.get("dimensions") or self.embedding_dims
        data = [
            {"object": "embedding", "index": i, "embedding": self.embedding_vector(str(t), dims)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(str(t).split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send_json(
            h, 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    def _send_json(
        self, h: _Handler, status: int, obj: Any, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)

    def _send_error(self, h: _Handler, reply: Reply) -> None:
        error = {
            "message": reply.message,
            "type": reply.error_type,
            "param": None,
            "code": reply.error_code,
        }
        self._send_json(h, reply.status, {"error": error}, reply.headers)

    @staticmethod
    def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
        prompt = sum(
            len(_content_text(m.get("content")).split()) + 3
            for m in body.get("messages", [])
            if isinstance(m, dict)
        )
        completion = len(reply.pieces) + sum(
            2 + len(_fragments(c.arguments)) for c in reply.tool_calls
        )
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _head(body: dict[str, Any], obj: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{next(_ids)}",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model"),
            "system_fingerprint": "fp_fakeopenai",
        }

    def _completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        return {
            **self._head(body, "chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": self._usage(reply, body),
        }

    def _chunks(self, reply: Reply, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The chat.completion.chunk objects for a streamed reply, as OpenAI sends them."""
        head = self._head(body, "chat.completion.chunk")
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            out = {**head, "choices": [choice]}
            if include_usage:
                out["usage"] = None
            return out

        yield chunk({"role": "assistant", "content": "" if reply.content is not None else None})
        for piece in reply.pieces:
            yield chunk({"content": piece})
        for index, call in enumerate(reply.tool_calls):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            for fragment in _fragments(call.arguments):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        if reply.kind == "malformed":
            return
        yield chunk({}, reply.finish_reason)
        if include_usage:
            yield {**head, "choices": [], "usage": self._usage(reply, body)}

    def _start_stream(self, h: _Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

    def _send_stream(self, h: _Handler, reply: Reply, body: dict[str, Any]) -> None:
        self._start_stream(h)
        for i, obj in enumerate(self._chunks(reply, body)):
            if i and reply.chunk_delay and self._stop.wait(reply.chunk_delay):
                h.close_connection = True
                return
            _write_chunk(h, _sse(obj))
        _write_chunk(h, b"data: [DONE]\n\n")
        h.wfile.write(b"0\r\n\r\n")

    def _send_malformed(
        self, h: _Handler, reply: Reply, body: dict[str, Any], stream: bool
    ) -> None:
        h.close_connection = True
        if not stream:
            data = json.dumps(self._completion(reply, body)).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[: len(data) // 2])
            return
        self._start_stream(h)
        for obj in self._chunks(reply, body):
            _write_chunk(h, _sse(obj))
        if reply.how == "no_done":
            h.wfile.write(b"0\r\n\r\n")
            return
        broken = _sse(self._head(body, "chat.completion.chunk") | {"choices": [{"index": 0}]})
        broken = broken[: len(broken) // 2]
        if reply.how == "bad_json":
            _write_chunk(h, broken + b"\n\n")
            h.wfile.write(b"0\r\n\r\n")
        else:
            _write_chunk(h, broken)  # ...and close without the terminating chunk


def _rules_responder(rules: Sequence[Mapping[str, Any]]) -> Responder:
    """A persistent responder answering by substring rules (for JSON scripts)."""
    parsed = [(rule, FakeOpenAI.parse_reply(rule["reply"])) for rule in rules]

    def respond(body: dict[str, Any]) -> Reply | None:
        req = RecordedRequest("POST", "/v1/chat/completions", {}, body, b"")
        for rule, reply in parsed:
            if "system_contains" in rule and rule["system_contains"] in (req.system_prompt or ""):
                return reply
            if "user_contains" in rule and rule["user_contains"] in (req.last_user_message or ""):
                return reply
            if "request_contains" in rule and rule["request_contains"] in json.dumps(body):
                return reply
        return None

    return respond


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake server as a process until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible chat server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--script", help="JSON file with replies (see module docstring)")
    parser.add_argument(
        "--model", action="append", dest="models", help="model id to list (repeatable)"
    )
    parser.add_argument("--record", help="append every request as a JSON line to this file")
    parser.add_argument("--require-api-key", help="answer 401 unless this bearer key is sent")
    args = parser.parse_args(argv)

    kwargs: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "record_path": args.record,
        "require_api_key": args.require_api_key,
    }
    if args.models:
        kwargs["models"] = tuple(args.models)
    server = FakeOpenAI.from_script(args.script, **kwargs) if args.script else FakeOpenAI(**kwargs)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with server:
        print(server.base_url, flush=True)
        while not done.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
