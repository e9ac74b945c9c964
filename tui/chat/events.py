"""What a chat turn, the memory triggers and the workbench report, as small frozen dataclasses.

:meth:`tui.chat.chat.ChatEngine.run_turn` yields the :data:`ChatEvent` of one turn; trigger
listeners (:class:`tui.chat.triggers.TriggerManager`) receive :class:`FlushStarted` and
:class:`TriggerEvent`. The workbench (:class:`tui.chat.workbench.Workbench`) puts all of them,
with the sessions it opens, the turns it runs, the index outcomes and the memory changes, on
its one stream of :data:`WorkbenchEvent`. Nothing here holds secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from ..engine.inject import InjectionReport

if TYPE_CHECKING:  # the index and the engine load after the app's first frame
    from ..engine.engine import MemoryChange
    from ..engine.index import SyncReport

#: Why a turn ended early. ``config``: no LLM configured; ``connection``: the server could not
#: be reached; ``auth``: 401/403; ``rate_limit``: 429; ``server``: 5xx; ``timeout``: no answer in
#: time; ``malformed``: a broken stream; ``bad_request``: another 4xx; ``tool_loop``: the model
#: kept calling tools past the limit; ``internal``: a bug in memdeck (the message says what);
#: ``too_large``: the message does not fit the model's context (nothing was stored or sent);
#: ``session``: the session's transcript could not be used (gone, unreadable).
ErrorKind = Literal[
    "config",
    "connection",
    "auth",
    "rate_limit",
    "server",
    "timeout",
    "malformed",
    "bad_request",
    "tool_loop",
    "internal",
    "too_large",
    "session",
]

#: What an error line says for each :data:`ErrorKind`.
ERROR_LABELS = {
    "config": "no model configured",
    "connection": "cannot connect",
    "auth": "refused",
    "rate_limit": "rate limited",
    "server": "server error",
    "timeout": "timed out",
    "malformed": "answer cut off or unreadable",
    "bad_request": "request rejected",
    "tool_loop": "too many tool calls",
    "internal": "memdeck bug",
    "too_large": "message too long",
}

#: What a flush did: ``flushed`` N messages; ``nothing_new`` to log; ``skipped`` (no model,
#: endpoint down: retried at the next trigger); ``failed`` (an unexpected error; also retried).
FlushStatus = Literal["flushed", "nothing_new", "skipped", "failed"]

#: Every trigger that can start a daily-log flush.
TriggerName = Literal[
    "session_switch",
    "session_end",
    "session_delete",
    "app_quit",
    "background",
    "day_change",
    "idle",
    "pre_compaction",
    "manual",
]


# -- a turn --


@dataclass(frozen=True)
class TurnStarted:
    """The user's message is in the transcript (it stays there whatever happens next).
    ``replaces``: the user message whose turn, and everything after it, this one replaced
    (a retry or an edit; the replaced lines are kept in the file as superseded)."""

    session_id: str
    message_id: str
    text: str
    replaces: str | None = None


@dataclass(frozen=True)
class InjectionBuilt:
    """The memory block put into this turn's system prompt, and the builder's report."""

    session_id: str
    text: str
    report: InjectionReport


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's streamed answer."""

    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """The model called a tool; it is about to run locally.

    ``arguments`` is the parsed JSON object (``{}`` when the model sent invalid JSON; the raw
    text is in ``raw_arguments``). ``silent`` marks calls made during the pre-compaction
    memory-flush turn, which the user did not ask for.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""
    silent: bool = False


@dataclass(frozen=True)
class ToolCallFinished:
    """A tool ran. ``result`` is what the model receives (a JSON-able dict); ``ok`` is False
    for validation errors, refused paths and failures (``result["error"]`` says why).
    ``changed_paths``: the memory files it wrote (workspace-relative; the index follows them)."""

    call_id: str
    name: str
    result: dict[str, Any]
    ok: bool
    silent: bool = False
    changed_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Usage:
    """Token usage the server reported for one request (a turn may make several)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class TurnError:
    """The turn ended early. The user's message and everything before the error are kept
    (``too_large``: the message was refused, nothing is stored)."""

    kind: ErrorKind
    message: str
    retry_after: float | None = None


@dataclass(frozen=True)
class CompactionStarted:
    """The session reached ``context_window - compaction_reserve`` estimated tokens."""

    session_id: str
    estimated_tokens: int
    limit: int


@dataclass(frozen=True)
class Compacted:
    """Older turns were summarised into a ``compaction`` line; later requests carry the summary."""

    session_id: str
    summary: str
    dropped_before: str
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True)
class CompactionFailed:
    """Compaction could not summarise (the model failed); the turn goes on uncompacted."""

    session_id: str
    kind: ErrorKind
    message: str


@dataclass(frozen=True)
class TurnDone:
    """The assistant's final answer is in the transcript. ``truncated``: it reached
    ``max_answer_chars`` and was cut; ``text`` (and the transcript) end with a notice saying so,
    which also arrived as the last :class:`TextDelta`."""

    session_id: str
    message_id: str
    text: str
    finish_reason: str | None
    truncated: bool = False


ChatEvent = (
    TurnStarted
    | InjectionBuilt
    | TextDelta
    | ToolCallStarted
    | ToolCallFinished
    | Usage
    | TurnError
    | CompactionStarted
    | Compacted
    | CompactionFailed
    | TurnDone
)


# -- flushes and triggers --


@dataclass(frozen=True)
class FlushOutcome:
    """What one flush of one session did.

    ``messages`` counts the user/assistant messages summarised; ``first``/``last`` are their
    1-based positions in the session; ``facts`` the long-term facts added to MEMORY.md;
    ``detail`` a one-line human explanation (the reason for a skip or a failure).
    """

    status: FlushStatus
    session_id: str | None = None
    messages: int = 0
    first: int | None = None
    last: int | None = None
    facts: int = 0
    flush_id: str | None = None
    daily_log: str | None = None
    detail: str = ""
    recovered: bool = False
    #: MEMORY.md entries the logged conversation told a change of, one line each (see
    #: :meth:`~tui.engine.engine.MemoryEngine.facts_changed_in`): consolidation proposes the
    #: update for review.
    changed: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """One line for a status bar."""
        if self.status == "flushed":
            facts = f", {self.facts} fact{'s' if self.facts != 1 else ''}" if self.facts else ""
            return f"logged {self.messages} message{'s' if self.messages != 1 else ''}{facts}"
        if self.status == "nothing_new":
            return "nothing new to log"
        return f"{self.status}: {self.detail}"

    @property
    def described(self) -> str:
        """``logged 4 messages, 1 fact → memory/2026-11-22.md`` (and :attr:`out_of_date`), for
        the app's notice and Stats."""
        where = f" → {self.daily_log}" if self.daily_log else ""
        stale = f"; {self.out_of_date}" if self.out_of_date else ""
        return f"{self.summary}{where}{stale}"

    @property
    def out_of_date(self) -> str:
        """``MEMORY.md may be out of date (1 entry changed: consolidate to update)``, or ""."""
        if not self.changed:
            return ""
        entries = f"{len(self.changed)} entr{'y' if len(self.changed) == 1 else 'ies'}"
        return f"MEMORY.md may be out of date ({entries} changed: consolidate to update)"


@dataclass(frozen=True)
class FlushStarted:
    """A trigger fired and its flush is starting (a UI can show a spinner)."""

    trigger: TriggerName
    reason: str
    session_id: str | None


@dataclass(frozen=True)
class TriggerEvent:
    """A trigger fired and its flush finished, with the outcome. One per session flushed."""

    trigger: TriggerName
    reason: str
    session_id: str | None
    outcome: FlushOutcome
    at: datetime = field(default_factory=lambda: datetime.now().astimezone())


TriggerListenerEvent = FlushStarted | TriggerEvent


# -- the workbench --

#: How a turn the workbench ran ended: ``completed`` (answered, or a :class:`TurnError` said
#: why not), ``stopped`` (cancelled: what streamed is kept) or ``failed`` (an exception, shown
#: as a :class:`TurnError` of kind ``session`` or ``internal`` just before).
TurnEnding = Literal["completed", "stopped", "failed"]

#: Why the index was synced: ``start`` (the BM25 sync at start-up), ``embedding`` (what was
#: new, once the model is loaded), ``reindex`` or ``config reload``.
IndexReason = Literal["start", "embedding", "reindex", "config reload"]


@dataclass(frozen=True)
class SessionOpened:
    """The open session changed to ``session_id`` (None: none is open); ``left`` was open."""

    session_id: str | None
    left: str | None = None


@dataclass(frozen=True)
class TurnOpened:
    """The workbench starts a turn of ``session_id`` with the user's ``text`` (its engine
    events follow, then :class:`TurnEnded`); ``replaces``: the user message it is to replace
    with what follows (see :class:`TurnStarted`)."""

    session_id: str
    text: str
    replaces: str | None = None


@dataclass(frozen=True)
class TurnEnded:
    """The turn opened by :class:`TurnOpened` ended (see :data:`TurnEnding`)."""

    session_id: str
    text: str
    ending: TurnEnding


@dataclass(frozen=True)
class IndexOutcome:
    """A sync, reindex or config reload ended: its ``report``, or the ``error`` that ended it."""

    reason: IndexReason
    report: SyncReport | None = None
    error: str | None = None


#: Everything the workbench publishes, in the order it happened (see
#: :meth:`tui.chat.workbench.Workbench.subscribe`); a :class:`MemoryChange` carries its
#: ``origin``. (A ``Union`` for the engine's class named lazily: it loads after the app's first
#: frame.)
WorkbenchEvent: TypeAlias = Union[  # noqa: UP007
    ChatEvent,
    TriggerListenerEvent,
    SessionOpened,
    TurnOpened,
    TurnEnded,
    IndexOutcome,
    "MemoryChange",
]
