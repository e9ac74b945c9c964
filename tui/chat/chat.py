"""ChatEngine: a chat turn and its parts (:mod:`tui.chat.workbench` runs it for a UI).

A turn (:meth:`ChatEngine.run_turn`) appends the user's message to the session transcript,
builds the memory injection for it (the user's notes, as data) into the system prompt,
compacts the session first if it nears the context window, streams the answer, runs the
memory tools the model calls and feeds their results back until it answers. Everything arrives as
:mod:`tui.chat.events`; a failure is a :class:`~tui.chat.events.TurnError` event, never an
exception, and the transcript keeps the user's message and whatever came before the error.

Compaction: a silent memory-flush turn (the model is told the context is about
to be compacted and may call ``save_memory`` / ``append_daily_log``), the pre-compaction
daily-log flush, then the older turns are summarised into a ``compaction`` line. Later
requests carry that summary and the recent turns; the JSONL keeps everything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..engine.embeddings import count_tokens
from ..engine.engine import MemoryEngine
from ..engine.history_records import Attribution
from ..engine.index import SyncReport
from ..engine.inject import Injection
from .client import AssembledToolCall, LLMClient, LLMError, StreamEnd, StreamText, StreamUsage
from .compaction import (
    SILENT_FLUSH_PROMPT,
    SILENT_TURN_ROUNDS,
    split_for_compaction,
    summary_request,
)
from .config import Config, embedder_for, load_config, open_memory
from .consolidation import Consolidator
from .context_window import (
    MESSAGE_OVERHEAD_TOKENS,
    MessageSize,
    estimate_tokens,
    fold_to_fit,
    replayed_messages,
    system_prompt,
)
from .events import (
    ChatEvent,
    Compacted,
    CompactionFailed,
    CompactionStarted,
    InjectionBuilt,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnDone,
    TurnError,
    TurnStarted,
    Usage,
)
from .flush import DailyLogFlusher
from .sessions import (
    Compaction,
    ErrorRecord,
    ModelChange,
    SessionError,
    SessionStore,
    ToolCall,
    Transcript,
    TurnInjection,
    new_id,
)
from .sessions import ToolResult as ToolResultLine
from .state import WorkspaceState, local_now
from .tool_specs import ToolArgumentError, parse_arguments
from .tools import MemoryTools, ToolResult, tool_attribution
from .triggers import TriggerManager

#: Ends an answer cut at ``max_answer_chars`` (shown, stored, and sent back to the model).
TRUNCATED_NOTICE = (
    "\n\n[memdeck: answer truncated at {limit:,} characters (max_answer_chars in config.toml)]"
)
#: What a refused message's line suggests when the UI has no better way to offer.
SHORTEN_SUGGESTION = "shorten it, or send its head and tail"


#: Asks the user whether the model may forget more memories this turn: called with one line
#: per memory (``path#Lline: text``) and how many were forgotten already; True to go ahead.
ForgetConfirmation = Callable[[list[str], int], Awaitable[bool]]


@dataclass
class _TurnTally:
    """What one turn's tool calls have done so far."""

    forgotten: int = 0


class ChatEngine:
    """Chat over a memory workspace: turns, tools, sessions, flushes, triggers, compaction.

    Attributes a UI uses directly: ``config``, ``memory`` (:class:`MemoryEngine`),
    ``sessions`` (:class:`SessionStore`: list/create/rename/load), ``triggers``
    (:class:`TriggerManager`: switch/end/delete/quit/focus/tick/run, listeners),
    ``flusher`` (:class:`DailyLogFlusher`), ``consolidator`` (:class:`Consolidator`:
    is_due/propose/accept/reject, blocking: call it from a worker) and ``llm`` (:class:`LLMClient`).
    """

    def __init__(
        self,
        config: Config,
        memory: MemoryEngine,
        *,
        sessions: SessionStore | None = None,
        llm: LLMClient | None = None,
        clock: Callable[[], datetime] = local_now,
    ) -> None:
        self.config = config
        self.memory = memory
        self.sessions = sessions or SessionStore(memory.workspace)
        self.llm = llm or LLMClient(config.llm, config_file=config.source)
        self.llm.usage_root = memory.workspace.root
        self.clock = clock
        self.tools = MemoryTools(memory, today=lambda: self.clock().date())
        #: Set by a UI that can ask the user (see :data:`ForgetConfirmation`); None refuses.
        self.confirm_forget: ForgetConfirmation | None = None
        self.flusher = DailyLogFlusher(memory, self.sessions, self.llm, clock=clock)
        self.triggers = TriggerManager(
            self.flusher,
            state=WorkspaceState(memory.workspace),
            settings=config.triggers,
            clock=clock,
        )
        self.consolidator = Consolidator(
            memory,
            self.llm,
            state=self.triggers.state,
            every_days=config.triggers.consolidate_every_days,
            max_days=config.memory.consolidate_max_days,
            clock=clock,
        )

    @classmethod
    def open(
        cls,
        config: Config | None = None,
        *,
        workspace: Path | str | None = None,
        create: bool = True,
        resident: bool = False,
    ) -> ChatEngine:
        """An engine for ``workspace`` (else the config's, else the default), index not synced yet.

        ``resident``: the engine serves a long-running app, where the local embedding model
        runs in a helper process that exits when idle (``[embeddings] process = "auto"``).
        Call ``engine.memory.sync()`` (and ``load_model()``) from a worker before relying on search.
        """
        config = config or load_config()
        engine = cls(config, open_memory(config, workspace, create=create, resident=resident))
        engine.resident = resident
        return engine

    #: Whether this engine serves a long-running app (see :meth:`open`).
    resident = False

    def reconfigure(self, config: Config) -> SyncReport | None:
        """Apply a changed :class:`Config` (settings edited in the UI) to every part.

        The workspace stays the same: a different ``workspace`` needs a new engine. A changed
        ``[embeddings]`` section swaps the embedder (:meth:`MemoryEngine.set_embedder`): when
        the vectors differ the index is rebuilt first (blocking: call this from a worker), and
        searches keep using the old index until the new one replaces it. Returns what that
        rebuild did (None when ``[embeddings]`` did not change).
        """
        swapped = None
        if config.embeddings != self.config.embeddings:
            swapped = self.memory.set_embedder(embedder_for(config, resident=self.resident))
        self.config = config
        self.llm.close()
        self.llm = LLMClient(config.llm, config_file=config.source)
        self.llm.usage_root = self.memory.workspace.root
        self.flusher.llm = self.llm
        self.consolidator.llm = self.llm
        self.consolidator.every_days = config.triggers.consolidate_every_days
        self.consolidator.max_days = config.memory.consolidate_max_days
        self.memory.search_options = config.memory.search_options()
        self.memory.injection_options = config.memory.injection_options()
        self.triggers.configure(config.triggers)
        return swapped

    def close(self) -> None:
        """Release the index connections and the HTTP client."""
        self.llm.close()
        self.memory.close()

    @property
    def llm_problem(self) -> str | None:
        """None when chat works; else one line telling the user how to configure an LLM."""
        return self.llm.problem

    # -- prompt --

    def preview_injection(self, draft: str) -> Injection:
        """The memory block the next turn would inject for ``draft``, with its report. Blocking
        but quick (BM25 + one query embedding when the model is loaded): the live preview."""
        return self.memory.inject(
            draft, budget=self.config.memory.injection_budget, now=self.clock().date()
        )

    def system_prompt(self, injection_text: str, compaction_summary: str | None = None) -> str:
        """The system prompt of a turn: instructions, the injected memory, the compaction summary."""
        return system_prompt(self.clock(), injection_text, compaction_summary)

    def context_messages(self, transcript: Transcript) -> list[dict[str, Any]]:
        """The conversation a request replays: messages since the last compaction, tool calls
        with their results, without silent or incomplete messages."""
        room = self.message_room()
        return replayed_messages(
            transcript,
            user_text=lambda text: self.fit_message(text, room),
            answer_text=self.bounded,
        )

    def bounded(self, text: str) -> str:
        """An answer cut to ``max_answer_chars`` with the truncation notice: what a request may
        carry of one, whatever an older transcript holds. User messages are measured in
        tokens instead (:meth:`measure_message`, :meth:`fit_message`)."""
        limit = self.config.llm.max_answer_chars
        if len(text) <= limit:
            return text
        return text[:limit] + TRUNCATED_NOTICE.format(limit=limit)

    def message_room(self) -> int:
        """Estimated tokens one user message may take: the compaction limit less the system
        prompt and the tool definitions. The memory block and the earlier conversation share
        what is left with it; compaction makes room in the conversation, never in the message."""
        prompt = [{"role": "system", "content": self.system_prompt("")}]
        fixed = self.estimate_tokens(prompt, self.tools.definitions()) + MESSAGE_OVERHEAD_TOKENS
        return max(0, self.compaction_limit - fixed)

    def measure_message(self, text: str) -> MessageSize:
        """``text`` as the user's next message, measured against :meth:`message_room`.
        Blocking: tokenising a long paste takes a fraction of a second."""
        return MessageSize(count_tokens(text), self.message_room(), self.config.llm.context_window)

    def fit_message(self, text: str, room: int | None = None) -> str:
        """``text`` when it fits ``room`` tokens (default :meth:`message_room`), else its head
        and tail around :data:`FOLD_MARKER`, cut at line ends where one is near, within room.
        The tail is kept because a pasted text's question usually comes last."""
        return fold_to_fit(text, self.message_room() if room is None else room)

    def estimate_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Rough token count of a request (the embedding tokenizer's word-pieces)."""
        return estimate_tokens(messages, tools)

    @property
    def compaction_limit(self) -> int:
        """Estimated tokens at which a session is compacted."""
        return max(1, self.config.llm.context_window - self.config.llm.compaction_reserve)

    # -- a turn --

    async def run_turn(
        self, session_id: str, text: str, *, replaces: str | None = None
    ) -> AsyncIterator[ChatEvent]:
        """Run one user turn and yield its events (see the module docstring). ``replaces``:
        a user message of the conversation whose turn, and all that follows it, this one
        replaces (:meth:`SessionStore.supersede`: kept in the file, no longer conversation).

        Raises :class:`SessionError` only for an unknown session or message to replace; every
        other failure is a :class:`TurnError` event, after which the iteration ends. A message
        over :meth:`message_room` is refused first (``too_large``): nothing is stored or sent.
        """
        if not self.sessions.exists(session_id):
            raise SessionError(f"no session {session_id!r}")
        # Refused before anything is stored or sent: a message the context cannot hold would
        # be resent, and compacted around, at every later turn.
        size, message_id = await asyncio.to_thread(self._admit, session_id, text, replaces)
        if message_id is None:
            yield TurnError("too_large", size.refusal(SHORTEN_SUGGESTION))
            return
        self.triggers.note_activity(session_id)
        yield TurnStarted(session_id, message_id, text, replaces)
        problem = self.llm.problem
        if problem:
            await self._record_error(session_id, "config", problem)
            yield TurnError("config", problem)
            return
        tools = self.tools.definitions()
        injection, messages, estimate = await asyncio.to_thread(
            self._prepare_request, session_id, message_id, text, tools
        )
        yield InjectionBuilt(session_id, injection.text, injection.report)
        if estimate >= self.compaction_limit:
            async for event in self._compact(session_id, injection.text, estimate):
                yield event
            messages = await self._request_messages(session_id, injection.text)
        async for event in self._answer(session_id, messages, tools, silent=False):
            yield event

    def _admit(
        self, session_id: str, text: str, replaces: str | None
    ) -> tuple[MessageSize, str | None]:
        """``text`` measured and, when it fits, stored as the user's message (after the line
        that supersedes ``replaces``): its id (None: refused). Blocking: one thread hop."""
        size = self.measure_message(text)
        if not size.fits:
            return size, None
        if replaces is not None:
            self.sessions.supersede(session_id, replaces, text)
        return size, self.sessions.append_message(session_id, "user", text)

    def _prepare_request(
        self, session_id: str, message_id: str, text: str, tools: list[dict[str, Any]]
    ) -> tuple[Injection, list[dict[str, Any]], int]:
        """Record a model change, build and record the turn's injection, and assemble its
        request with the request's estimated tokens. Blocking: one thread hop."""
        transcript = self.sessions.load(session_id)
        if transcript.model != self.llm.model:
            self.sessions.append(session_id, ModelChange(new_id("c"), self.llm.model))
        injection = self.preview_injection(text)
        self.sessions.append(
            session_id,
            TurnInjection(
                message_id, text, injection.text, injection.report.to_json(), injection.results
            ),
        )
        # the records just written do not change the conversation the request replays
        messages = self._messages_of(transcript, injection.text)
        return injection, messages, self.estimate_tokens(messages, tools)

    async def _request_messages(self, session_id: str, injection_text: str) -> list[dict[str, Any]]:
        transcript = await asyncio.to_thread(self.sessions.load, session_id)
        return self._messages_of(transcript, injection_text)

    def _messages_of(self, transcript: Transcript, injection_text: str) -> list[dict[str, Any]]:
        compaction = transcript.last_compaction
        summary = (compaction.summary or None) if compaction else None
        return [
            {"role": "system", "content": self.system_prompt(injection_text, summary)},
            *self.context_messages(transcript),
        ]

    async def _answer(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        silent: bool,
        max_rounds: int | None = None,
    ) -> AsyncIterator[ChatEvent]:
        """Request, stream, run tools, repeat until the model answers without tools."""
        offered = {t["function"]["name"] for t in tools}
        rounds = max_rounds or self.config.llm.max_tool_rounds
        tally = _TurnTally()
        for _ in range(rounds):
            end: StreamEnd | None = None
            streamed: list[str] = []
            try:
                async for piece in self.llm.stream_chat(
                    messages, tools=tools, purpose="flush" if silent else "chat", session=session_id
                ):
                    if isinstance(piece, StreamText):
                        streamed.append(piece.text)
                        if not silent:
                            yield TextDelta(piece.text)
                    elif isinstance(piece, StreamUsage):
                        yield Usage(
                            piece.prompt_tokens, piece.completion_tokens, piece.total_tokens
                        )
                    else:
                        end = piece
            except asyncio.CancelledError:
                # Stopped or quit mid-answer: what streamed stays in the transcript. Written
                # here and now, without awaiting: the loop may be shutting down.
                if streamed:
                    self.sessions.append_message(
                        session_id,
                        "assistant",
                        "".join(streamed),
                        incomplete=True,
                        interrupted=True,
                        **({"silent": True} if silent else {}),
                    )
                raise
            except LLMError as exc:
                if streamed:
                    flags = {"incomplete": True, **({"silent": True} if silent else {})}
                    await asyncio.to_thread(
                        self.sessions.append_message,
                        session_id,
                        "assistant",
                        "".join(streamed),
                        **flags,
                    )
                await self._record_error(session_id, exc.kind, exc.message, silent=silent)
                yield TurnError(exc.kind, exc.message, exc.retry_after)
                return
            assert end is not None
            extra: dict[str, Any] = {"silent": True} if silent else {}
            text = end.text
            if end.truncated:
                notice = TRUNCATED_NOTICE.format(limit=self.config.llm.max_answer_chars)
                text += notice
                extra["truncated"] = True
                if not silent:
                    yield TextDelta(notice)
            message_id = await asyncio.to_thread(
                self.sessions.append_message, session_id, "assistant", text, **extra
            )
            if not end.tool_calls:
                if not silent:
                    self.triggers.note_activity(session_id)
                yield TurnDone(session_id, message_id, text, end.finish_reason, end.truncated)
                return
            messages.append(
                {
                    "role": "assistant",
                    "content": end.text or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                        for call in end.tool_calls
                    ],
                }
            )
            for call in end.tool_calls:
                async for event in self._run_tool(
                    session_id, message_id, call, offered, silent, tally
                ):
                    yield event
                    if isinstance(event, ToolCallFinished):
                        messages.append(
                            {
                                "role": "tool",
                                "tool_call_id": call.id,
                                "content": json.dumps(event.result, ensure_ascii=False),
                            }
                        )
        message = f"stopped after {rounds} requests: the model kept calling tools"
        await self._record_error(session_id, "tool_loop", message, silent=silent)
        yield TurnError("tool_loop", message)

    async def _run_tool(
        self,
        session_id: str,
        message_id: str,
        call: AssembledToolCall,
        offered: set[str],
        silent: bool,
        tally: _TurnTally,
    ) -> AsyncIterator[ChatEvent]:
        try:
            arguments = parse_arguments(call.arguments)
        except ToolArgumentError:
            arguments = {}  # the tool reports why when it runs
        yield ToolCallStarted(call.id, call.name, arguments, call.arguments, silent)
        call_record = ToolCall(
            call.id, message_id, call.name, call.arguments, arguments, call.arguments_chars
        )

        def record_result(result: ToolResult) -> ToolResult:
            line = ToolResultLine(call.id, call.name, result.ok, result.content)
            self.sessions.append(session_id, line)
            return result

        writer = tool_attribution("chat", call.name, arguments, session=session_id)

        def run_here() -> ToolResult:  # the call, its run and its result: one thread hop
            self.sessions.append(session_id, call_record)
            with self.memory.attributed(writer):
                return record_result(self._run_offered(call, offered))

        if call.name == "forget_memory" and call.name in offered and not call.oversized:
            # the user may be asked (on the event loop) between the call and its result
            await asyncio.to_thread(self.sessions.append, session_id, call_record)
            result = await asyncio.to_thread(
                record_result, await self._forget(call.arguments, tally, writer)
            )
        else:
            result = await asyncio.to_thread(run_here)
        yield ToolCallFinished(
            call.id, call.name, result.content, result.ok, silent, result.changed_paths
        )

    def _run_offered(self, call: AssembledToolCall, offered: set[str]) -> ToolResult:
        """Run a call of a tool other than ``forget_memory`` (blocking); refuse an unknown
        tool or oversized arguments."""
        if call.name not in offered:
            return ToolResult.error("unknown_tool", f"there is no tool named {call.name!r}")
        if call.oversized:
            limit = self.config.llm.max_tool_argument_chars
            return ToolResult.error(
                "too_large",
                f"the arguments of {call.name} were {call.arguments_chars:,} characters; at most "
                f"{limit:,} are accepted (max_tool_argument_chars): send a shorter call",
            )
        return self.tools.execute(call.name, call.arguments)

    async def _forget(
        self, raw_arguments: str, tally: _TurnTally, writer: Attribution
    ) -> ToolResult:
        """``forget_memory``, bounded per turn: past ``max_forgets_per_turn`` memories the user
        must confirm (:attr:`confirm_forget`); without a way to ask, the call is refused."""
        plan = await asyncio.to_thread(self.tools.plan_forget, raw_arguments)
        if isinstance(plan, ToolResult):
            return plan
        limit = self.config.llm.max_forgets_per_turn
        if tally.forgotten + len(plan.entries) > limit:
            confirm = self.confirm_forget
            if confirm is None or not await confirm(plan.describe(), tally.forgotten):
                asked = "the user declined" if confirm else "nobody is here to confirm"
                return ToolResult.error(
                    "not_confirmed",
                    f"Not forgotten: {len(plan.entries)} more memor"
                    f"{'y' if len(plan.entries) == 1 else 'ies'} would pass the limit of {limit} "
                    f"forgotten per turn and {asked}. Nothing was changed; ask the user.",
                    matches=plan.describe(),
                )

        def apply() -> ToolResult:
            with self.memory.attributed(writer):
                return self.tools.apply_forget(plan)

        result = await asyncio.to_thread(apply)
        if result.ok:
            tally.forgotten += len(result.content.get("forgotten", []))
        return result

    async def _record_error(
        self, session_id: str, kind: str, message: str, *, silent: bool = False
    ) -> None:
        # silent: the memory-flush turn before a compaction, not the turn the user sees
        record = ErrorRecord(kind, self.llm.redact(message), silent=silent)
        await asyncio.to_thread(self.sessions.append, session_id, record)

    # -- compaction --

    async def _compact(
        self, session_id: str, injection_text: str, estimate: int
    ) -> AsyncIterator[ChatEvent]:
        yield CompactionStarted(session_id, estimate, self.compaction_limit)
        # 1. The silent memory-flush turn.
        await asyncio.to_thread(
            self.sessions.append_message, session_id, "user", SILENT_FLUSH_PROMPT, silent=True
        )
        messages = await self._request_messages(session_id, injection_text)
        messages.append({"role": "user", "content": SILENT_FLUSH_PROMPT})
        async for event in self._answer(
            session_id,
            messages,
            self.tools.definitions(include_daily_log=True),
            silent=True,
            max_rounds=SILENT_TURN_ROUNDS,
        ):
            if isinstance(event, ToolCallStarted | ToolCallFinished):
                yield event
            elif isinstance(event, TurnError):
                yield CompactionFailed(
                    session_id, event.kind, f"memory flush turn: {event.message}"
                )
        # 2. The pre-compaction daily-log flush.
        await self.triggers.afire("pre_compaction", session_id, "context about to be compacted")
        # 3. Summarise the older turns.
        transcript = await asyncio.to_thread(self.sessions.load, session_id)
        older, kept = split_for_compaction(transcript, self.config.llm.compaction_keep_messages)
        if not older:
            yield CompactionFailed(session_id, "internal", "nothing old enough to summarise")
            return
        room = self.message_room()
        try:
            summary = await self.llm.acomplete(
                summary_request(
                    older,
                    transcript.last_compaction,
                    user_text=lambda text: self.fit_message(text, room),
                    assistant_text=self.bounded,
                ),
                model=self.llm.summary_model,
                purpose="compaction",
                session=session_id,
            )
        except LLMError as exc:
            yield CompactionFailed(session_id, exc.kind, exc.message)
            return
        summary = summary.strip() or "(no summary)"
        record = Compaction(summary, kept[0].id, len(older), new_id("k"), estimate)
        await asyncio.to_thread(self.sessions.append, session_id, record)
        after = self.estimate_tokens(
            await self._request_messages(session_id, injection_text), self.tools.definitions()
        )
        yield Compacted(session_id, summary, kept[0].id, estimate, after)
