"""The memory tools the model may call, executed locally: save, search, get, forget.

Each returns a :class:`ToolResult` whose ``content`` is the JSON object the model receives.
Invalid input never raises: every argument of every tool is checked against its tool's
:class:`ToolSpec` (the same JSON schema the model is shown: type, range, length, required and
unknown parameters; a bool is not an integer, NaN and infinities are refused) and a bad one
comes back as ``ok=False`` with ``error: validation_error`` and one line naming the parameter.

Contradictions: ``save_memory`` retires an older MEMORY.md entry only when

1. the model names it in ``supersedes``, by its id (``memory_search`` and ``save_memory``
   results carry ids) or by its exact text; words that merely match are not enough (the
   result then lists the candidates with their ids so the model can name one), or
2. the new memory is the exact negation of it ("The user is vegetarian" / "The user is not
   vegetarian": same subject in the same words, same value, opposite polarity; see
   :func:`negates`). A negation of another wording ("His birthday is not in May" for "The
   user's birthday is in May": maybe someone else's) retires nothing: the result lists it as a
   candidate, with its id, for the model to name in ``supersedes`` if the user confirms.

Anything less certain keeps both ("My dog is called Max" and "My dog is a golden retriever"
are both true). A retired entry leaves MEMORY.md for ``.memdeck/history.jsonl`` (state
``superseded``) and is listed, with its id and text, in the tool result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar

from ..engine.engine import MemoryEngine
from ..engine.fileio import ConcurrentEditError, FileTooLargeError, read_bounded
from ..engine.history_records import Attribution, Source
from ..engine.managed_regions import ReadOnlyRegionError
from ..engine.metadata import split_meta
from ..engine.store import (
    EntryBatch,
    MemoryEntry,
    clean_written_text,
    normalize_entry_text,
    parse_entries,
)
from ..engine.textsearch import contains_all_terms
from ..engine.workspace import MEMORY_FILE, PathRefusedError
from .tool_specs import (
    DAILY_LOG_SPEC,
    MAX_CANDIDATES,
    MAX_FORGET,
    MAX_GET_CHARS,
    MAX_GET_LINES,
    MAX_SNIPPET_CHARS,
    SPECS,
    TOOL_SPECS,
    ToolArgumentError,
    parse_arguments,
)

_COPULA = re.compile(r"\s+(?:is|are|was|were|is now|are now)\s+|\s*:\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(
    r"^(?:(?:the\s+)?user'?s?'?\s+|my\s+|our\s+|his\s+|her\s+|their\s+|the\s+|a\s+|an\s+)+",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_NAMED = re.compile(r"^\s*(?:called|named)\s+", re.IGNORECASE)
_NEGATION = re.compile(r"^(?:not|no longer)\s+", re.IGNORECASE)
_T = TypeVar("_T")


def tool_attribution(
    source: Source,
    tool: str,
    arguments: Mapping[str, object],
    *,
    session: str | None = None,
    client: str | None = None,
) -> Attribution:
    """Who a tool call's writes are from, its commit subject the tool and its first text
    argument (``save_memory: Likes green tea``)."""
    text = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), "")
    subject = f"{tool}: {' '.join(text.split())[:72]}" if text else tool
    return Attribution(source, session=session, client=client, summary=subject)


@dataclass(frozen=True)
class ForgetPlan:
    """The entries a ``forget_memory`` call picked out, before anything is retired."""

    query: str
    entries: list[MemoryEntry]
    #: Why matches were left out: they are inside a block another tool manages.
    read_only: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """One line per entry: ``path#Lline: text``."""
        return [f"{e.path}#L{e.start}: {_snippet(e.text, 160)}" for e in self.entries]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns to the model (``content``) and whether it succeeded."""

    ok: bool
    content: dict[str, Any]
    changed_paths: tuple[str, ...] = ()

    @staticmethod
    def error(kind: str, message: str, **extra: Any) -> ToolResult:
        """A failed call: ``{"error": kind, "message": ...}``."""
        return ToolResult(False, {"error": kind, "message": message, **extra})


def _statement(text: str) -> tuple[str, str, str] | None:
    """``(subject as written, subject, value)`` of a simple statement, normalised: the subject
    as written keeps its possessives and pronouns ("his birthday"), the subject drops them
    ("birthday"); None when it is not one."""
    visible = " ".join(text.split()).strip(" .!")
    parts = _COPULA.split(visible, maxsplit=1)
    if len(parts) != 2:
        return None
    written = normalize_entry_text(_ARTICLE.sub("", parts[0].strip()))
    subject = normalize_entry_text(_POSSESSIVE.sub("", parts[0].strip()).strip())
    value = normalize_entry_text(_NAMED.sub("", parts[1]))
    if not subject or not value or len(subject.split()) > 6:
        return None
    return written, subject, value


def split_statement(text: str) -> tuple[str, str] | None:
    """``(subject, value)`` of a simple statement, normalised, the subject without possessives
    or pronouns ("The user's dog is Luna": ``("dog", "luna")``); None when it is not one."""
    statement = _statement(text)
    return None if statement is None else statement[1:]


def negates(new: str, old: str, *, same_words: bool = True) -> bool:
    """True when ``new`` is ``old`` negated, or the reverse ("X is not Y" / "X is Y").

    With ``same_words`` the subjects must be written alike ("The user's birthday" /
    "The user's birthday"); without, they need only name the same thing once possessives and
    pronouns are dropped ("His birthday" / "The user's birthday": maybe someone else's)."""
    a, b = _statement(new), _statement(old)
    if a is None or b is None or a[1] != b[1] or (same_words and a[0] != b[0]):
        return False
    core_a, core_b = _NEGATION.sub("", a[2]), _NEGATION.sub("", b[2])
    return core_a == core_b and (core_a != a[2]) != (core_b != b[2])


def _brief(entry: MemoryEntry) -> dict[str, Any]:
    return {"id": entry.entry_id, "text": _snippet(entry.text, 300)}


class MemoryTools:
    """Runs the memory tools against one :class:`MemoryEngine`. Blocking; thread-safe."""

    def __init__(
        self,
        memory: MemoryEngine,
        *,
        today: Callable[[], date] = date.today,
        explain: bool = False,
    ) -> None:
        """``explain``: search results carry their score breakdown and origin (for clients
        that show why a memory came back; the chat model does without, it costs tokens)."""
        self.memory = memory
        self.today = today
        self.explain = explain
        self._handlers: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
            "save_memory": self.save_memory,
            "memory_search": self.memory_search,
            "memory_get": self.memory_get,
            "forget_memory": self.forget_memory,
            "append_daily_log": self.append_daily_log,
        }

    def definitions(self, *, include_daily_log: bool = False) -> list[dict[str, Any]]:
        """The ``tools`` parameter of a chat request."""
        specs = [*TOOL_SPECS, DAILY_LOG_SPEC] if include_daily_log else list(TOOL_SPECS)
        return [spec.to_openai() for spec in specs]

    def execute(self, name: str, raw_arguments: str | dict[str, Any]) -> ToolResult:
        """Run tool ``name`` with its JSON arguments, validated against its :class:`ToolSpec`.

        Never raises: bad input is a ``validation_error``, any other failure a one-line error.
        """
        handler, spec = self._handlers.get(name), SPECS.get(name)
        if handler is None or spec is None:
            return ToolResult.error("unknown_tool", f"there is no tool named {name[:80]!r}")
        return self._guarded(name, lambda: handler(spec.validate(parse_arguments(raw_arguments))))

    def _guarded(self, name: str, run: Callable[[], _T]) -> _T | ToolResult:
        """``run()``, any failure turned into a one-line :class:`ToolResult` error."""
        try:
            return run()
        except ToolArgumentError as exc:
            return ToolResult.error("validation_error", str(exc))
        except PathRefusedError as exc:
            return ToolResult.error("path_refused", str(exc))
        except ReadOnlyRegionError as exc:
            return ToolResult.error("read_only", str(exc))
        except (OSError, ValueError, ConcurrentEditError) as exc:
            return ToolResult.error("failed", f"{name} failed: {exc}")
        except Exception as exc:  # a bug must reach the model and the user as one line
            return ToolResult.error("internal_error", f"{name} failed: {type(exc).__name__}: {exc}")

    # -- save --

    def save_memory(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a high-confidence entry to MEMORY.md, retiring only what it supersedes
        (see the module docstring). ``arguments`` are validated.

        The text is cleaned first (:func:`~tui.engine.store.clean_written_text`: no control
        characters, no comment markers; the result says what changed). Whether the same fact
        is already there is decided inside the locked edit, so two writers saving it at once
        write it once."""
        cleaned = clean_written_text(arguments["content"])
        content = cleaned.text.strip()
        if not content:
            return ToolResult.error(
                "validation_error",
                "Parameter 'content' has nothing left to save: "
                + "; ".join(cleaned.changes or ("it is blank",)),
            )
        supersedes = arguments.get("supersedes", "").strip()
        normalized = normalize_entry_text(content)
        retire, why, candidates = self._superseded_by(content, supersedes, self._others(content))
        retire, read_only = self._writable(retire)
        remembered: list[MemoryEntry] = []

        def unless_remembered(memory_text: str, contents: Sequence[str]) -> Sequence[str]:
            # Runs under MEMORY.md's lock: a save racing this one is either seen here or waits.
            remembered[:] = [
                e
                for e in parse_entries(memory_text)
                if e.active and normalize_entry_text(e.text) == normalized
            ][:1]
            return () if remembered else contents

        written, saved = self.memory.save_entries(
            EntryBatch([content], "high", "assistant", self.today()),
            keep=unless_remembered,
            origin="assistant: save_memory",
        )
        result: dict[str, Any]
        changed = list(saved.paths)
        if not written:
            entry_id = remembered[0].entry_id if remembered else None
            result = {"saved": False, "id": entry_id, "message": "Already remembered."}
        else:
            entry_id = written[0].id
            result = {
                "saved": True,
                "id": entry_id,
                "message": "Saved to long-term memory; it will be known in future conversations.",
            }
            if cleaned.changes:
                result["cleaned"] = list(cleaned.changes)
                result["message"] += " Before saving: " + "; ".join(cleaned.changes) + "."
        retired: list[MemoryEntry] = []
        if retire:
            retired, superseded = self.memory.supersede(
                retire, reason=why, replaced_by=entry_id, origin="assistant: save_memory"
            )
            changed += superseded.paths
        if retired:
            result["superseded"] = [_brief(e) for e in retired]
            result["message"] += (
                f" Retired {len(retired)} older memor{'y' if len(retired) == 1 else 'ies'} "
                "(kept in the audit trail)."
            )
        elif read_only:
            result["note"] = "nothing was superseded: " + read_only[0]
        elif supersedes:
            result["note"] = (
                f"nothing was superseded: {_snippet(supersedes, 80)!r} is not the id or the exact "
                "text of a memory"
                + ("; candidates are listed with their ids" if candidates else "")
            )
            if candidates:
                result["candidates"] = [_brief(e) for e in candidates]
        elif candidates:
            result["candidates"] = [_brief(e) for e in candidates]
            result["note"] = (
                "nothing was superseded: the new memory may contradict the candidates listed "
                "(the subject is worded differently); if one of them is no longer true, call "
                "save_memory again with supersedes=<its id>"
            )
        return ToolResult(True, result, tuple(dict.fromkeys(changed)))

    def retires(self, arguments: dict[str, Any]) -> list[MemoryEntry]:
        """The entries ``save_memory`` with these (validated) arguments would retire now
        (named in ``supersedes``, or exactly negated); nothing is written."""
        content = clean_written_text(arguments["content"]).text.strip()
        supersedes = arguments.get("supersedes", "").strip()
        return self._writable(self._superseded_by(content, supersedes, self._others(content))[0])[0]

    def _writable(self, entries: list[MemoryEntry]) -> tuple[list[MemoryEntry], list[str]]:
        """``entries`` memdeck may change, and why the others are left (each inside a block
        another tool manages)."""
        reasons = self.memory.store.read_only_reasons(entries) if entries else []
        kept = [entry for entry, reason in zip(entries, reasons, strict=True) if reason is None]
        return kept, [reason for reason in reasons if reason]

    def _others(self, content: str) -> list[MemoryEntry]:
        """The active MEMORY.md entries that are not ``content`` itself."""
        normalized = normalize_entry_text(content)
        return [
            e
            for e in self.memory.store.entries()
            if e.active and normalize_entry_text(e.text) != normalized
        ]

    @staticmethod
    def _superseded_by(
        content: str, supersedes: str, active: list[MemoryEntry]
    ) -> tuple[list[MemoryEntry], str, list[MemoryEntry]]:
        """``(entries to retire, why, candidates)``: by id or exact text when ``supersedes`` is
        given (else the entries containing its words, as candidates only), or the entries the
        new memory exactly negates (the same subject in the same words; a negation of another
        wording, "His birthday is not in May" for "The user's birthday is in May", is only a
        candidate)."""
        if supersedes:
            by_id = [e for e in active if e.entry_id == supersedes]
            if by_id:
                return by_id, "named by id", []
            wanted = normalize_entry_text(supersedes)
            exact = [e for e in active if normalize_entry_text(e.text) == wanted]
            if exact:
                return exact, "named by text", []
            words = [e for e in active if contains_all_terms(e.text, supersedes)]
            return [], "", words[:MAX_CANDIDATES]
        negated = [e for e in active if negates(content, e.text)]
        maybe = [
            e for e in active if e not in negated and negates(content, e.text, same_words=False)
        ]
        return negated, "exact negation", maybe[:MAX_CANDIDATES]

    # -- search / get --

    def memory_search(self, arguments: dict[str, Any]) -> ToolResult:
        """Hybrid search; snippets of at most 700 characters with path, lines, score and the
        ids of the memory entries inside each snippet (``ids``, when they have one).
        ``arguments`` are validated."""
        overrides: dict[str, Any] = {}
        if "maxResults" in arguments:
            overrides["max_results"] = arguments["maxResults"]
        if "minScore" in arguments:
            overrides["min_score"] = arguments["minScore"]
        response = self.memory.search(arguments["query"], now=self.today(), **overrides)
        entries: dict[str, list[MemoryEntry]] = {}
        results: list[dict[str, Any]] = []
        for r in response.results:
            if r.path not in entries:
                entries[r.path] = self.memory.store.entries(r.path)
            ids = [
                e.entry_id
                for e in entries[r.path]
                if e.entry_id and e.active and r.start_line <= e.start <= r.end_line
            ]
            hit = {
                "path": r.path,
                "startLine": r.start_line,
                "endLine": r.end_line,
                "score": round(r.score, 4),
                "snippet": _snippet(r.text),
                "ids": ids,  # empty for daily-log lines and hand-written lines without an id
            }
            if self.explain:  # and where it came from (the change that last wrote it)
                hit["breakdown"] = r.to_json()["breakdown"]
                origin = self.memory.history.origin(r.path, r.start_line, r.end_line)
                hit["origin"] = origin.to_json() if origin else None
            results.append(hit)
        content: dict[str, Any] = {"results": results, "mode": response.mode}
        if self.explain and response.notes:
            content["notes"] = response.notes
        if not results:
            content["message"] = "No memories matched."
        return ToolResult(True, content)

    def memory_get(self, arguments: dict[str, Any]) -> ToolResult:
        """Lines of MEMORY.md or a file under memory/, through the workspace's one path guard.

        Metadata comments are hidden and forgotten or superseded lines left out.
        ``arguments`` are validated.
        """
        requested = arguments["path"]
        path = self.memory.workspace.resolve_memory_path(requested)
        rel = self.memory.workspace.relative(path)
        if not path.is_file():
            return ToolResult.error("not_found", f"{rel} does not exist")
        start = arguments.get("from", 1)
        count = arguments.get("lines", MAX_GET_LINES)
        try:
            data = read_bounded(path, name=rel)
        except FileTooLargeError as exc:
            return ToolResult.error("too_large", str(exc))
        all_lines = data.decode("utf-8", errors="replace").splitlines()
        window = all_lines[start - 1 : start - 1 + count]
        shown = []
        for raw in window:
            visible, meta = split_meta(raw)
            if meta is not None and not meta.active:
                continue
            shown.append(visible)
        text = "\n".join(shown)
        truncated = len(text) > MAX_GET_CHARS
        content: dict[str, Any] = {
            "path": rel,
            "from": start,
            "to": start + len(window) - 1,
            "totalLines": len(all_lines),
            "text": text[:MAX_GET_CHARS],
        }
        if truncated:
            content["truncated"] = True
        return ToolResult(True, content)

    # -- forget --

    def find_entries(self, query: str) -> list[MemoryEntry]:
        """Active entries ``query`` picks out: by id, by exact text, or containing all its words.

        MEMORY.md is read whole; daily logs are looked at where a search finds the query.
        """
        query = query.strip()
        paths = [MEMORY_FILE]
        response = self.memory.search(query, now=self.today(), max_results=20, min_score=0.0)
        paths.extend(dict.fromkeys(r.path for r in response.results if r.path != MEMORY_FILE))
        wanted = normalize_entry_text(query)
        found: list[MemoryEntry] = []
        for rel in paths:
            for entry in self.memory.store.entries(rel):
                if not entry.active:
                    continue
                if (
                    entry.entry_id == query
                    or normalize_entry_text(entry.text) == wanted
                    or contains_all_terms(entry.text, query)
                ):
                    found.append(entry)
        return found

    def forget_memory(self, arguments: dict[str, Any]) -> ToolResult:
        """Soft-delete the entries ``query`` picks out (at most :data:`MAX_FORGET`)."""
        plan = self._plan_forget(arguments)
        return plan if isinstance(plan, ToolResult) else self._apply_forget(plan)

    def plan_forget(self, raw_arguments: str | dict[str, Any]) -> ForgetPlan | ToolResult:
        """What ``forget_memory`` with these arguments would retire, without retiring anything;
        a :class:`ToolResult` error when it would retire nothing (bad arguments, no match, too broad)."""
        spec = SPECS["forget_memory"]
        return self._guarded(
            "forget_memory",
            lambda: self._plan_forget(spec.validate(parse_arguments(raw_arguments))),
        )

    def apply_forget(self, plan: ForgetPlan) -> ToolResult:
        """Retire what :meth:`plan_forget` found (those entries still unchanged in their file)."""
        return self._guarded("forget_memory", lambda: self._apply_forget(plan))

    def _plan_forget(self, arguments: dict[str, Any]) -> ForgetPlan | ToolResult:
        query = arguments["query"]
        found, read_only = self._writable(self.find_entries(query))
        if not found and read_only:
            more = f" ({len(read_only) - 1} more like it)" if len(read_only) > 1 else ""
            return ToolResult.error("read_only", read_only[0] + more)
        if not found:
            return ToolResult.error(
                "not_found",
                "No memory matched; use memory_search to find the exact wording.",
            )
        if len(found) > MAX_FORGET:
            return ToolResult.error(
                "too_broad",
                f"{len(found)} memories match; be more specific.",
                matches=[f"{e.path}#L{e.start}: {_snippet(e.text, 120)}" for e in found[:10]],
            )
        return ForgetPlan(query, found, tuple(read_only))

    def _apply_forget(self, plan: ForgetPlan) -> ToolResult:
        retired, change = self.memory.forget(
            plan.entries,
            reason=f"forget_memory: {plan.query.strip()}",
            origin="assistant: forget_memory",
        )
        content: dict[str, Any] = {
            "forgotten": [{"path": e.path, "text": _snippet(e.text, 200)} for e in retired],
            "message": f"Forgot {len(retired)} memor{'y' if len(retired) == 1 else 'ies'}.",
        }
        if plan.read_only:
            content["left"] = list(plan.read_only)
            content["message"] += (
                f" Left {len(plan.read_only)} inside blocks another tool manages (read-only)."
            )
        return ToolResult(True, content, change.paths)

    # -- daily log (silent pre-compaction turn only) --

    def append_daily_log(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a note to today's daily log and index it. ``arguments`` are validated; the
        note is cleaned like :meth:`save_memory`'s text."""
        cleaned = clean_written_text(arguments["content"])
        if not cleaned.text.strip():
            return ToolResult.error(
                "validation_error",
                "Parameter 'content' has nothing left to write: " + "; ".join(cleaned.changes),
            )
        change = self.memory.append_daily(
            cleaned.text.strip() + "\n", self.today(), origin="assistant: append_daily_log"
        )
        content: dict[str, Any] = {"appended": change.paths[0]}
        if cleaned.changes:
            content["cleaned"] = list(cleaned.changes)
        return ToolResult(True, content, change.paths)


def _snippet(text: str, limit: int = MAX_SNIPPET_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
