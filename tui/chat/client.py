"""The OpenAI-compatible client: one place that decides which key goes where, streams, and
turns every failure into an :class:`LLMError` with a clear kind and message.

The ``openai`` SDK reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID`` and
``OPENAI_CUSTOM_HEADERS`` from the environment on its own; every one of them is passed
explicitly here so the SDK never adds a credential :mod:`tui.chat.config` did not choose.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import weakref
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import usage as ledger
from ..engine.redaction import display_url
from ..engine.redaction import redact as redact_secrets
from .config_sections import NO_KEY_PLACEHOLDER, LLMSettings
from .events import ErrorKind

if TYPE_CHECKING:  # the SDK takes over a second to import: only when a request is made
    import openai


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with API keys removed (see :func:`tui.engine.redaction.redact`); the
    placeholder key that stands for "no key" is not a secret."""
    return redact_secrets(text, (s for s in secrets if s != NO_KEY_PLACEHOLDER))


class LLMError(Exception):
    """A request failed. ``kind`` is an :data:`~tui.chat.events.ErrorKind`; the message is
    for the user and never contains a key."""

    def __init__(self, kind: ErrorKind, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.retry_after = retry_after


#: Characters of a tool name kept (a name is an identifier; anything longer is noise).
MAX_TOOL_NAME_CHARS = 256


@dataclass(frozen=True)
class AssembledToolCall:
    """A tool call put together from streamed fragments.

    ``arguments_chars`` counts every character the server sent; when it exceeds the client's
    ``max_tool_argument_chars`` the call is ``oversized`` and ``arguments`` is ``"{}"`` (the
    fragments past the cap were never kept).
    """

    id: str
    name: str
    arguments: str
    arguments_chars: int = 0
    oversized: bool = False


@dataclass(frozen=True)
class StreamText:
    """A text fragment of the answer."""

    text: str


@dataclass(frozen=True)
class StreamUsage:
    """Usage reported at the end of a stream."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class StreamEnd:
    """The answer is complete: its full text, its tool calls and why it stopped.

    ``truncated``: the text reached ``max_answer_chars``; the rest of the stream was not read
    (and tool calls of a cut answer are dropped).
    """

    text: str
    tool_calls: tuple[AssembledToolCall, ...]
    finish_reason: str | None
    truncated: bool = False


StreamPiece = StreamText | StreamUsage | StreamEnd


class LLMClient:
    """Async streaming for chat turns, sync completions for summaries, for one server
    (:class:`LLMSettings`; ``config_file`` is where a problem tells the user to fix it)."""

    def __init__(self, settings: LLMSettings, *, config_file: Path | None = None) -> None:
        self.settings = settings
        self.config_file = config_file
        self._sync: openai.OpenAI | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        #: The workspace whose usage ledger (``.memdeck/usage.jsonl``) records every call
        #: (None: calls are not recorded).
        self.usage_root: Path | None = None

    def record_usage(
        self, purpose: str, model: str | None, usage: Any, session: str | None = None
    ) -> None:
        """Append one call to the usage ledger; ``usage`` None (the server said nothing) is
        recorded as unknown, not zero."""
        if self.usage_root is None:
            return
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        completion = getattr(usage, "completion_tokens", None) if usage is not None else None
        ledger.record(
            self.usage_root,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            session=session,
        )

    @property
    def problem(self) -> str | None:
        """Why chat cannot work (one line telling how to configure it), or None."""
        return self.settings.problem(self.config_file)

    @property
    def model(self) -> str | None:
        return self.settings.effective_model

    @property
    def summary_model(self) -> str | None:
        return self.settings.effective_summary_model

    def _require(self) -> None:
        problem = self.problem
        if problem:
            raise LLMError("config", problem)

    def _client_options(self) -> dict[str, Any]:
        config = self.settings
        key = config.api_key or NO_KEY_PLACEHOLDER
        options: dict[str, Any] = {
            "base_url": config.effective_base_url,
            "api_key": key,
            # An explicit Authorization header also drops one from OPENAI_CUSTOM_HEADERS.
            "default_headers": {"Authorization": f"Bearer {key}"},
            "timeout": config.request_timeout,
            "max_retries": config.max_retries,
        }
        if not config.is_openai:
            options["organization"] = ""
            options["project"] = ""
        return options

    def sync_client(self) -> openai.OpenAI:
        """The blocking client (shared; thread-safe)."""
        with self._lock:
            if self._sync is None:
                import openai

                self._sync = openai.OpenAI(**self._client_options())
            return self._sync

    def async_client(self, loop: asyncio.AbstractEventLoop | None = None) -> openai.AsyncOpenAI:
        """The async client for ``loop`` (default: the running event loop).

        Making one takes a while (an SSL context, an HTTP client): a UI makes it ahead from a
        thread with its loop (see :meth:`open_async_client` for doing it from the loop)."""
        loop = loop or asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
        if client is None:  # made outside the lock: the loop may look for it meanwhile
            import openai

            made = openai.AsyncOpenAI(**self._client_options())
            with self._lock:
                client = self._async.setdefault(loop, made)
        return client

    async def open_async_client(self) -> openai.AsyncOpenAI:
        """The async client for the running loop, made in a thread the first time with its
        chat resources imported (so the loop, a UI's, is not held up while the SSL context and
        HTTP client are built, nor for the SDK's ~60 ms of chat modules at the first request)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
        if client is not None:
            return client
        return await asyncio.to_thread(self._chat_ready_client, loop)

    async def warm_up(self) -> None:
        """Make the first request as quick as the next ones, without holding up the running
        loop (a UI's): in a thread, the SDK imported, the loop's client made and its chat
        resources imported; then a connection opened to the configured server by listing its
        models. Whatever the server answers, or its failure, is ignored: the real request
        reports a dead server."""
        client = await self.open_async_client()
        with contextlib.suppress(Exception):
            await client.with_options(max_retries=0).models.list()

    def _chat_ready_client(self, loop: asyncio.AbstractEventLoop) -> openai.AsyncOpenAI:
        client = self.async_client(loop)
        _ = client.chat.completions  # the SDK imports its chat resources at the first use
        return client

    def close(self) -> None:
        """Close the blocking client's connections (async clients close with their loop)."""
        with self._lock:
            if self._sync is not None:
                self._sync.close()
                self._sync = None

    def secrets(self) -> list[str | None]:
        """Every key this process knows of, for :func:`redact`."""
        return [
            self.settings.api_key,
            os.environ.get("OPENAI_API_KEY"),
            os.environ.get("MEMDECK_API_KEY"),
        ]

    def redact(self, text: str) -> str:
        """``text`` without any key."""
        return redact(text, self.secrets())

    def _request(
        self, messages: list[dict[str, Any]], model: str | None, tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"model": model or self.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        return request

    async def stream_chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        purpose: str = "chat",
        session: str | None = None,
    ) -> AsyncIterator[StreamPiece]:
        """Stream one answer: :class:`StreamText` pieces, maybe :class:`StreamUsage`, then one
        :class:`StreamEnd`. Raises :class:`LLMError` on any failure (after text may have come)."""
        self._require()
        request = self._request(messages, model, tools)
        request["stream"] = True
        if self.settings.stream_usage:
            request["stream_options"] = {"include_usage": True}
        started = False
        text_parts: list[str] = []
        text_room = self.settings.max_answer_chars
        truncated = False
        calls: dict[int, _CallBuffer] = {}
        finish_reason: str | None = None
        reported: Any = None
        try:
            client = await self.open_async_client()
            stream = await client.chat.completions.create(**request)
            try:
                async for chunk in stream:
                    started = True
                    usage = getattr(chunk, "usage", None)
                    if usage is not None:
                        reported = usage
                        yield StreamUsage(
                            usage.prompt_tokens or 0,
                            usage.completion_tokens or 0,
                            usage.total_tokens or 0,
                        )
                    for choice in chunk.choices or []:
                        delta = choice.delta
                        if delta is not None and delta.content:
                            piece = delta.content[:text_room]
                            text_room -= len(piece)
                            truncated = len(piece) < len(delta.content)
                            if piece:
                                text_parts.append(piece)
                                yield StreamText(piece)
                            if truncated:
                                break
                        for fragment in (delta.tool_calls or []) if delta is not None else []:
                            _add_fragment(calls, fragment, self.settings.max_tool_argument_chars)
                        if choice.finish_reason:
                            finish_reason = choice.finish_reason
                    if truncated:
                        break  # stop reading: the rest of a too long answer is not wanted
            finally:
                await stream.close()
        except LLMError:
            raise
        except Exception as exc:  # every failure becomes one clear error event
            raise self.classify(exc, mid_stream=started) from exc
        self.record_usage(purpose, request["model"], reported, session)
        if truncated:
            yield StreamEnd("".join(text_parts), (), "length", truncated=True)
            return
        if finish_reason is None:
            raise LLMError(
                "malformed",
                "the answer stream ended before the server said it was finished "
                "(the connection may have dropped)",
            )
        yield StreamEnd(
            "".join(text_parts),
            tuple(call.assembled(f"call_{i}") for i, call in sorted(calls.items())),
            finish_reason,
        )

    async def acomplete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        purpose: str = "compaction",
        session: str | None = None,
    ) -> str:
        """One non-streamed answer's text (compaction summaries). Raises :class:`LLMError`."""
        self._require()
        request = self._request(messages, model, None)
        try:
            client = await self.open_async_client()
            response = await client.chat.completions.create(**request)
        except Exception as exc:
            raise self.classify(exc) from exc
        self.record_usage(purpose, request["model"], getattr(response, "usage", None), session)
        return _answer_text(response)

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        purpose: str = "flush",
        session: str | None = None,
    ) -> str:
        """One non-streamed answer's text, blocking (flush summaries). Raises :class:`LLMError`."""
        self._require()
        request = self._request(messages, model, None)
        try:
            response = self.sync_client().chat.completions.create(**request)
        except Exception as exc:
            raise self.classify(exc) from exc
        self.record_usage(purpose, request["model"], getattr(response, "usage", None), session)
        return _answer_text(response)

    def list_models(self) -> list[str]:
        """The ids of the models the server lists (``GET /models``), sorted; blocking (also
        with no model configured yet: one of these may be chosen). Raises :class:`LLMError`."""
        if self.settings.is_openai and not self.settings.api_key:
            raise LLMError("config", self.problem or "no API key for OpenAI")
        try:
            page = self.sync_client().models.list()
            return sorted({str(model.id) for model in page})
        except Exception as exc:
            raise self.classify(exc) from exc

    def use_model(self, model: str) -> None:
        """Send the next chat requests to ``model`` (summaries too, unless ``summary_model``
        names another): the settings, not config.toml, change; a config reload brings the
        configured model back."""
        self.settings = self.settings.model_copy(update={"model": model})

    def classify(self, exc: BaseException, *, mid_stream: bool = False) -> LLMError:
        """Turn any exception from a request into an :class:`LLMError` a user can act on."""
        error = self._classify(exc, mid_stream)
        error.message = self.redact(error.message)  # no key, whatever the server or URL held
        error.args = (error.message,)
        return error

    def _classify(self, exc: BaseException, mid_stream: bool) -> LLMError:
        import openai

        url = display_url(self.settings.effective_base_url)
        detail = self.redact(_server_message(exc))
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(
                "timeout", f"{url} did not answer within {self.settings.request_timeout:g} s"
            )
        if isinstance(exc, openai.APIConnectionError):
            if mid_stream:
                return LLMError("malformed", f"the answer stream from {url} broke off ({detail})")
            return LLMError("connection", f"could not connect to {url} ({detail})")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            hint = self.settings.withheld_key or (
                "no API key is configured for this server"
                if not self.settings.api_key
                else f"check the key from {self.settings.api_key_source}"
            )
            return LLMError(
                "auth", f"{url} refused the request ({exc.status_code}: {detail}); {hint}"
            )
        if isinstance(exc, openai.RateLimitError):
            retry_after = _retry_after(exc)
            wait = f"; retry in {retry_after:g} s" if retry_after is not None else ""
            return LLMError("rate_limit", f"rate limited by {url} ({detail}){wait}", retry_after)
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code >= 500:
                return LLMError("server", f"{url} failed ({exc.status_code}: {detail})")
            return LLMError(
                "bad_request", f"{url} rejected the request ({exc.status_code}: {detail})"
            )
        if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | ValueError):
            return LLMError("malformed", f"{url} sent an answer that could not be read ({detail})")
        if isinstance(exc, openai.OpenAIError):
            return LLMError("bad_request", detail)
        return LLMError("internal", f"{type(exc).__name__}: {detail}")


class _CallBuffer:
    """One tool call being streamed: its argument fragments in a list (joined once, so the
    assembly is linear in the size), kept only up to the cap (so memory stays bounded)."""

    __slots__ = ("id", "name", "parts", "kept", "received")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.kept = 0
        self.received = 0

    def add_arguments(self, text: str, limit: int) -> None:
        self.received += len(text)
        if self.received <= limit:
            self.parts.append(text)
            self.kept = self.received
        elif self.parts:
            self.parts.clear()  # past the cap: what was kept is useless, let it go

    def assembled(self, fallback_id: str) -> AssembledToolCall:
        oversized = self.received > self.kept
        return AssembledToolCall(
            self.id or fallback_id,
            self.name,
            "{}" if oversized else "".join(self.parts),
            self.received,
            oversized,
        )


def _add_fragment(calls: dict[int, _CallBuffer], fragment: Any, limit: int) -> None:
    """Merge one streamed tool-call fragment (arguments beyond ``limit`` characters are counted,
    not kept).

    OpenAI sends the id and name once and the arguments in pieces, keyed by ``index``. Some
    compatible servers omit ``index`` or repeat the id and name in every fragment: a new id
    without an index starts a new call, and a repeated id or name is not appended twice.
    """
    index = fragment.index
    if index is None:
        last = max(calls) if calls else -1
        starts_new = last < 0 or (fragment.id and fragment.id != calls[last].id)
        index = last + 1 if starts_new else last
    call = calls.get(index)
    if call is None:
        call = calls[index] = _CallBuffer()
    if fragment.id and not call.id:
        call.id = str(fragment.id)[:MAX_TOOL_NAME_CHARS]
    function = fragment.function
    if function is not None:
        if function.name and function.name != call.name:
            call.name = (call.name + function.name)[:MAX_TOOL_NAME_CHARS]
        if function.arguments:
            call.add_arguments(function.arguments, limit)


def _server_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    message = str(exc) or type(exc).__name__
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and message.startswith(f"Error code: {status}"):
        # the SDK's placeholder when the body says nothing: the status's name says more
        try:
            return HTTPStatus(status).phrase
        except ValueError:
            return f"HTTP {status}"
    cause = exc.__cause__ or exc.__context__
    if message in ("Connection error.", "Request timed out.") and cause is not None:
        message = f"{message.rstrip('.')}: {cause}" if str(cause) else message
    return message


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _answer_text(response: Any) -> str:
    if not getattr(response, "choices", None):
        raise LLMError("malformed", "the server's answer had no choices")
    return response.choices[0].message.content or ""
