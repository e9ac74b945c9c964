"""The stdio transport of ``memdeck mcp``: JSON-RPC lines in and out, with the edges of the
protocol answered as JSON-RPC 2.0 and MCP say, before the SDK's session sees a message.

The SDK's own stdio reader turns a line it cannot read into an exception that no client ever
hears about (and a method it does not know into ``-32602``). Here every line gets its answer:

- not JSON, a lone surrogate escape, nesting too deep: ``-32700`` parse error;
- JSON that is no JSON-RPC message: ``-32600`` invalid request;
- a method MCP does not define: ``-32601`` method not found (a notification MCP does not
  define, such as a newer protocol's, is ignored, as JSON-RPC says, without the SDK's warnings);
- a request other than ``initialize`` or ``ping`` before a valid ``initialize``: ``-32600``.

A reply carries the request's id when one can be read from the line, ``null`` otherwise.
Requests in flight are tracked (:class:`InFlight`) so a cancelled write is never half done.
"""

from __future__ import annotations

import json
import sys
import typing
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from io import TextIOWrapper

import anyio
import mcp.types as types
import pydantic
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

RequestId = str | int


def _methods(union: type[pydantic.RootModel[typing.Any]]) -> frozenset[str]:
    """The method names of an SDK union of client messages (each kind's ``method`` Literal)."""
    return frozenset(
        method
        for kind in typing.get_args(union.model_fields["root"].annotation)
        for method in typing.get_args(kind.model_fields["method"].annotation)
    )


#: Every request method MCP defines (the SDK answers -32601 itself for those memdeck does not
#: serve); anything else is answered -32601 here.
KNOWN_METHODS = _methods(types.ClientRequest)
#: Every notification method a client may send under MCP.
KNOWN_NOTIFICATIONS = _methods(types.ClientNotification)
#: Requests a client may send before ``initialize`` has been answered.
BEFORE_INITIALIZE = frozenset({"initialize", "ping"})
#: Requests remembered as in flight at most (older ones are forgotten: a client that never
#: waits for its answers cannot grow the server's memory).
MAX_IN_FLIGHT = 256
#: Characters of a method name quoted back in an error.
MAX_QUOTED = 80
#: Longest wait, at the end, for the answers still being written.
DRAIN_SECONDS = 5.0


class InFlight:
    """The requests a client sent that the server has not finished, as the reader saw them.

    A write runs whole once it has started (a file write cannot be stopped half way): the
    handler calls :meth:`start` before writing, which says no when the client has already
    cancelled; a cancel that comes after the start is kept from the SDK (:meth:`cancel`), so
    the write's result is still sent, and :meth:`finish` tells the handler to note it.
    """

    def __init__(self) -> None:
        # id -> "waiting" | "started" | "cancelled" | "started, cancelled"
        self._state: OrderedDict[RequestId, str] = OrderedDict()

    def received(self, request_id: RequestId) -> None:
        """A request came in."""
        self._state[request_id] = "waiting"
        self._state.move_to_end(request_id)
        while len(self._state) > MAX_IN_FLIGHT:
            self._state.popitem(last=False)

    def start(self, request_id: RequestId) -> bool:
        """Mark a write begun; False when the client cancelled it first (do nothing then)."""
        if self._state.get(request_id) == "cancelled":
            return False
        self._state[request_id] = "started"
        return True

    def cancel(self, request_id: RequestId) -> bool:
        """The client cancelled ``request_id``: True when the SDK should stop it (it has not
        started a write), False when a write is under way and will be carried out."""
        state = self._state.get(request_id)
        if state is None:
            return True
        if state.startswith("started"):
            self._state[request_id] = "started, cancelled"
            return False
        self._state[request_id] = "cancelled"
        return True

    def finish(self, request_id: RequestId) -> bool:
        """Forget ``request_id``; True when the client cancelled it while its write ran."""
        return self._state.pop(request_id, None) == "started, cancelled"


def error_reply(request_id: RequestId | None, code: int, message: str) -> str:
    """A JSON-RPC error line (``id`` null when the request's id could not be read)."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
        ensure_ascii=False,
    )


def _readable_id(line: str) -> RequestId | None:
    """The id of the request on ``line`` if the line is a JSON object with a method and an id."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "method" not in data:
        return None
    request_id = data.get("id")
    if isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return request_id
    return None


def _parse_problem(error: ValidationError) -> str | None:
    """What made ``error`` a parse error (the text is not JSON the SDK can read); None when
    the JSON was read but is not a JSON-RPC message."""
    for detail in error.errors():
        if detail.get("type") == "json_invalid":
            reason = str(detail.get("ctx", {}).get("error", detail.get("msg", "")))
            if "recursion limit" in reason:
                return "the JSON is nested too deeply"
            if "surrogate" in reason or "hex escape" in reason:
                return f"the JSON holds a lone surrogate escape, which is not text ({reason})"
            return f"not valid JSON ({reason})"
    return None


class Screen:
    """Reads each line as the SDK would and decides: hand it on, or answer it here."""

    def __init__(self, in_flight: InFlight, *, cancel_tracked: frozenset[str]) -> None:
        """``cancel_tracked``: request methods whose ids :attr:`in_flight` follows."""
        self.in_flight = in_flight
        self.cancel_tracked = cancel_tracked
        self.initialized = False

    def __call__(self, line: str) -> SessionMessage | str | None:
        """The message to hand on, an error line to answer with, or None (ignore the line)."""
        if not line.strip():
            return None
        try:
            message = types.JSONRPCMessage.model_validate_json(line)
        except ValidationError as exc:
            problem = _parse_problem(exc)
            if problem is not None:
                return error_reply(_readable_id(line), types.PARSE_ERROR, f"Parse error: {problem}")
            return error_reply(
                _readable_id(line),
                types.INVALID_REQUEST,
                "Invalid request: not a JSON-RPC 2.0 request, notification or response",
            )
        root = message.root
        if isinstance(root, types.JSONRPCRequest):
            if root.method not in KNOWN_METHODS:
                return error_reply(
                    root.id,
                    types.METHOD_NOT_FOUND,
                    f"Method not found: {root.method[:MAX_QUOTED]!r}",
                )
            if not self.initialized and root.method not in BEFORE_INITIALIZE:
                return error_reply(
                    root.id,
                    types.INVALID_REQUEST,
                    f"Not initialized: send initialize before {root.method[:MAX_QUOTED]!r}",
                )
            if root.method == "initialize":
                self.initialized = self.initialized or _valid_request(root)
            if root.method in self.cancel_tracked:
                self.in_flight.received(root.id)
        elif isinstance(root, types.JSONRPCNotification) and root.method not in (
            KNOWN_NOTIFICATIONS
        ):
            return None  # no answer is due, and the SDK would log ~25 lines of warnings
        elif isinstance(root, types.JSONRPCNotification) and root.method == (
            "notifications/cancelled"
        ):
            request_id = (root.params or {}).get("requestId")
            if isinstance(request_id, str | int) and not self.in_flight.cancel(request_id):
                return None  # a write under way: it finishes and its answer is sent
        return SessionMessage(message)


def _valid_request(request: types.JSONRPCRequest) -> bool:
    try:
        types.ClientRequest.model_validate(
            request.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
    except ValidationError:
        return False
    return True


def message_line(message: SessionMessage) -> str:
    """``message`` as one JSON line. Text that is not valid Unicode (a lone surrogate from a
    file's undecodable bytes) is written as U+FFFD rather than failing the whole answer."""
    try:
        return message.message.model_dump_json(by_alias=True, exclude_none=True)
    except ValueError:  # pydantic's serialisation error: surrogates not allowed in UTF-8
        data = message.message.model_dump(by_alias=True, mode="python", exclude_none=True)
        text = json.dumps(data, ensure_ascii=False, default=str)
        return text.encode("utf-8", errors="replace").decode("utf-8")


@asynccontextmanager
async def stdio_transport(
    screen: Callable[[str], SessionMessage | str | None],
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """``(read, write)`` streams for the SDK's session over this process's stdin and stdout,
    each line passed through ``screen`` first (its error lines are written straight back)."""
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace"))
    read_send, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    output = anyio.Lock()

    async def put(line: str) -> None:
        async with output:
            await stdout.write(line + "\n")
            await stdout.flush()

    async def reader() -> None:
        async with read_send:
            async for line in stdin:
                outcome = screen(line)
                if isinstance(outcome, str):
                    await put(outcome)
                elif outcome is not None:
                    await read_send.send(outcome)

    written = anyio.Event()

    async def writer() -> None:
        async with write_receive:
            async for message in write_receive:
                await put(message_line(message))
        written.set()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read, write
        finally:
            await write.aclose()  # the session's end: the answers still queued go out first
            with anyio.move_on_after(DRAIN_SECONDS):
                await written.wait()
            group.cancel_scope.cancel()
