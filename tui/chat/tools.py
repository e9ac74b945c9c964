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
   vegetarian": same subject, same value, opposite polarity; see :func:`split_statement`).

Anything less certain keeps both ("My dog is called Max" and "My dog is a golden retriever"
are both true). A retired entry leaves MEMORY.md for ``.memdeck/history.jsonl`` (state
``superseded``) and is listed, with its id and text, in the tool result.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar

from ..engine.engine import MemoryEngine
from ..engine.fileio import ConcurrentEditError
from ..engine.metadata import split_meta
from ..engine.store import MemoryEntry, normalize_entry_text
from ..engine.textsearch import contains_all_terms
from ..engine.workspace import MEMORY_FILE, PathRefusedError

MAX_SAVE_CHARS = 5_000
MAX_QUERY_CHARS = 2_000
MAX_PATH_CHARS = 1_000
MAX_SNIPPET_CHARS = 700
MAX_SEARCH_RESULTS = 50
MAX_GET_LINES = 400
MAX_GET_CHARS = 20_000
MAX_LINE_NUMBER = 10_000_000
#: forget_memory refuses to retire more entries than this at once (the query is too broad).
MAX_FORGET = 5
#: Candidates listed when ``supersedes`` names no entry exactly.
MAX_CANDIDATES = 5

_COPULA = re.compile(r"\s+(?:is|are|was|were|is now|are now)\s+|\s*:\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(
    r"^(?:(?:the\s+)?user'?s?'?\s+|my\s+|our\s+|his\s+|her\s+|their\s+|the\s+|a\s+|an\s+)+",
    re.IGNORECASE,
)
_NAMED = re.compile(r"^\s*(?:called|named)\s+", re.IGNORECASE)
_NEGATION = re.compile(r"^(?:not|no longer)\s+", re.IGNORECASE)
#: Must contain something other than white space (the JSON-schema ``pattern`` of required text).
NON_BLANK = r"\S"


class ToolArgumentError(ValueError):
    """A tool argument that does not fit its schema; the message names the parameter."""


_T = TypeVar("_T")


@dataclass(frozen=True)
class ForgetPlan:
    """The entries a ``forget_memory`` call picked out, before anything is retired."""

    query: str
    entries: list[MemoryEntry]

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


def _text(description: str, max_length: int, *, required: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description, "maxLength": max_length}
    if required:
        schema["pattern"] = NON_BLANK
    return schema


def _integer(description: str, minimum: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "description": description, "minimum": minimum, "maximum": maximum}


def _number(description: str, minimum: float, maximum: float) -> dict[str, Any]:
    return {"type": "number", "description": description, "minimum": minimum, "maximum": maximum}


def _check_value(name: str, schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` checked against one parameter's schema (integers normalised to ``int``)."""
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise ToolArgumentError(f"Parameter {name!r} must be a string.")
        if len(value) > schema["maxLength"]:
            raise ToolArgumentError(
                f"Parameter {name!r} must be {schema['maxLength']:,} characters or less. "
                f"Current length: {len(value):,}."
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise ToolArgumentError(f"Parameter {name!r} is required and must be non-empty.")
        return value
    low, high = schema["minimum"], schema["maximum"]
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        if is_number and isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
            raise ToolArgumentError(f"Parameter {name!r} must be an integer from {low} to {high}.")
        return value
    if not (is_number and math.isfinite(value) and low <= value <= high):
        raise ToolArgumentError(f"Parameter {name!r} must be a number from {low} to {high}.")
    return float(value)


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name, description and JSON-schema parameters as offered to the model.

    The same schema validates every call (:meth:`validate`): each string has a ``maxLength``
    (and required text a non-blank ``pattern``), each number a ``minimum`` and ``maximum``.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    required: tuple[str, ...] = ()

    def to_openai(self) -> dict[str, Any]:
        """The ``tools=[...]`` element of a chat completion request."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": self.parameters,
                    "required": list(self.required),
                    "additionalProperties": False,
                },
            },
        }

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments checked against the schema; raises :class:`ToolArgumentError`.

        An optional parameter sent as ``null`` counts as not given (many models do that).
        """
        unknown = [key for key in arguments if key not in self.parameters]
        if unknown:
            known = ", ".join(self.parameters)
            raise ToolArgumentError(
                f"Unknown parameter {str(unknown[0])[:40]!r} for {self.name} (it takes: {known})."
            )
        checked: dict[str, Any] = {}
        for name, schema in self.parameters.items():
            value = arguments.get(name)
            if value is None:
                if name in self.required:
                    raise ToolArgumentError(f"Parameter {name!r} is required.")
                continue
            checked[name] = _check_value(name, schema, value)
        return checked


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "save_memory",
        "Save something to long-term memory (MEMORY.md) so it is known in future conversations. "
        "Use it when the user asks you to remember something, or states a lasting preference, "
        "fact or decision. Write one short, self-contained statement (e.g. 'The user's dog is "
        "called Luna'). Saving never removes other memories by itself: if the new memory makes "
        "an existing one wrong, pass that memory's id (from memory_search or an earlier "
        "save_memory result) or its exact text in 'supersedes'; otherwise both are kept. "
        f"At most {MAX_SAVE_CHARS:,} characters. The result lists any memory it retired.",
        {
            "content": _text("The statement to remember.", MAX_SAVE_CHARS),
            "supersedes": _text(
                "Optional: the id, or the exact text, of one existing memory this one replaces "
                "because it is no longer true.",
                MAX_SAVE_CHARS,
                required=False,
            ),
        },
        ("content",),
    ),
    ToolSpec(
        "memory_search",
        "Search long-term memory and the daily logs. Returns snippets with path, line range, "
        "score and the ids of the memory entries in them; use memory_get to read more around "
        "a hit.",
        {
            "query": _text("Keywords or a description.", MAX_QUERY_CHARS),
            "maxResults": _integer(
                f"Most results, 1 to {MAX_SEARCH_RESULTS} (default 6).", 1, MAX_SEARCH_RESULTS
            ),
            "minScore": _number("Minimum score 0..1 (default 0.3).", 0.0, 1.0),
        },
        ("query",),
    ),
    ToolSpec(
        "memory_get",
        "Read lines of a memory file: MEMORY.md or a file under memory/ (e.g. "
        "memory/2026-11-20.md). No other files can be read.",
        {
            "path": _text("MEMORY.md or memory/<file>.md", MAX_PATH_CHARS),
            "from": _integer("First line, 1-based (default 1).", 1, MAX_LINE_NUMBER),
            "lines": _integer(f"How many lines (max {MAX_GET_LINES}).", 1, MAX_GET_LINES),
        },
        ("path",),
    ),
    ToolSpec(
        "forget_memory",
        "Forget memories the user no longer wants kept. Pass words that pick out the entry "
        "(or its exact text). The entries stop surfacing; an audit copy is kept.",
        {"query": _text("What to forget.", MAX_SAVE_CHARS)},
        ("query",),
    ),
)

#: Offered only in the silent pre-compaction turn.
DAILY_LOG_SPEC = ToolSpec(
    "append_daily_log",
    "Append a note to today's daily log (memory/YYYY-MM-DD.md).",
    {"content": _text("Markdown to append.", MAX_SAVE_CHARS)},
    ("content",),
)

_SPECS = {spec.name: spec for spec in (*TOOL_SPECS, DAILY_LOG_SPEC)}


def split_statement(text: str) -> tuple[str, str] | None:
    """``(subject, value)`` of a simple statement, normalised; None when it is not one."""
    visible = " ".join(text.split()).strip(" .!")
    parts = _COPULA.split(visible, maxsplit=1)
    if len(parts) != 2:
        return None
    subject = _POSSESSIVE.sub("", parts[0].strip()).strip()
    subject = normalize_entry_text(subject)
    value = normalize_entry_text(_NAMED.sub("", parts[1]))
    if not subject or not value or len(subject.split()) > 6:
        return None
    return subject, value


def negates(new: str, old: str) -> bool:
    """True when ``new`` is exactly ``old`` negated, or the reverse ("X is not Y" / "X is Y")."""
    a, b = split_statement(new), split_statement(old)
    if a is None or b is None or a[0] != b[0]:
        return False
    core_a, core_b = _NEGATION.sub("", a[1]), _NEGATION.sub("", b[1])
    return core_a == core_b and (core_a != a[1]) != (core_b != b[1])


def parse_arguments(raw: str | Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a dict: the JSON object the model sent (empty text is ``{}``).

    Raises :class:`ToolArgumentError` for anything else (invalid or too deeply nested JSON,
    not an object).
    """
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        arguments = json.loads(raw or "{}")
    except ValueError as exc:
        raise ToolArgumentError(
            f"arguments are not valid JSON ({getattr(exc, 'msg', exc)})"
        ) from None
    except RecursionError:
        raise ToolArgumentError("arguments are nested too deeply") from None
    if not isinstance(arguments, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    return arguments


def _brief(entry: MemoryEntry) -> dict[str, Any]:
    return {"id": entry.entry_id, "text": _snippet(entry.text, 300)}


class MemoryTools:
    """Runs the memory tools against one :class:`MemoryEngine`. Blocking; thread-safe."""

    def __init__(self, memory: MemoryEngine, *, today: Callable[[], date] = date.today) -> None:
        self.memory = memory
        self.today = today
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
        handler, spec = self._handlers.get(name), _SPECS.get(name)
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
        except (OSError, ValueError, ConcurrentEditError) as exc:
            return ToolResult.error("failed", f"{name} failed: {exc}")
        except Exception as exc:  # a bug must reach the model and the user as one line
            return ToolResult.error("internal_error", f"{name} failed: {type(exc).__name__}: {exc}")

    # -- save --

    def save_memory(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a high-confidence entry to MEMORY.md, retiring only what it supersedes
        (see the module docstring). ``arguments`` are validated."""
        content = arguments["content"].strip()
        supersedes = arguments.get("supersedes", "").strip()
        active = [e for e in self.memory.store.entries() if e.active]
        normalized = normalize_entry_text(content)
        duplicate = next((e for e in active if normalize_entry_text(e.text) == normalized), None)
        others = [e for e in active if e is not duplicate]
        retire, why, candidates = self._superseded_by(content, supersedes, others)
        result: dict[str, Any]
        if duplicate is not None:
            entry_id = duplicate.entry_id
            result = {"saved": False, "id": entry_id, "message": "Already remembered."}
            changed: list[str] = []
        else:
            meta, saved = self.memory.save_entry(
                content,
                confidence="high",
                source="assistant",
                day=self.today(),
                origin="assistant: save_memory",
            )
            entry_id = meta.id
            result = {
                "saved": True,
                "id": entry_id,
                "message": "Saved to long-term memory; it will be known in future conversations.",
            }
            changed = list(saved.paths)
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
        elif supersedes:
            result["note"] = (
                f"nothing was superseded: {_snippet(supersedes, 80)!r} is not the id or the exact "
                "text of a memory"
                + ("; candidates are listed with their ids" if candidates else "")
            )
            if candidates:
                result["candidates"] = [_brief(e) for e in candidates]
        return ToolResult(True, result, tuple(dict.fromkeys(changed)))

    @staticmethod
    def _superseded_by(
        content: str, supersedes: str, active: list[MemoryEntry]
    ) -> tuple[list[MemoryEntry], str, list[MemoryEntry]]:
        """``(entries to retire, why, candidates)``: by id or exact text when ``supersedes`` is
        given (else the entries containing its words, as candidates only), or the entries the
        new memory exactly negates."""
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
        return negated, "exact negation", []

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
            }
            if ids:  # hand-written lines and daily logs have none
                hit["ids"] = ids
            results.append(hit)
        content: dict[str, Any] = {"results": results, "mode": response.mode}
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
        all_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
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
        spec = _SPECS["forget_memory"]
        return self._guarded(
            "forget_memory",
            lambda: self._plan_forget(spec.validate(parse_arguments(raw_arguments))),
        )

    def apply_forget(self, plan: ForgetPlan) -> ToolResult:
        """Retire what :meth:`plan_forget` found (those entries still unchanged in their file)."""
        return self._guarded("forget_memory", lambda: self._apply_forget(plan))

    def _plan_forget(self, arguments: dict[str, Any]) -> ForgetPlan | ToolResult:
        query = arguments["query"]
        found = self.find_entries(query)
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
        return ForgetPlan(query, found)

    def _apply_forget(self, plan: ForgetPlan) -> ToolResult:
        retired, change = self.memory.forget(
            plan.entries,
            reason=f"forget_memory: {plan.query.strip()}",
            origin="assistant: forget_memory",
        )
        return ToolResult(
            True,
            {
                "forgotten": [{"path": e.path, "text": _snippet(e.text, 200)} for e in retired],
                "message": f"Forgot {len(retired)} memor{'y' if len(retired) == 1 else 'ies'}.",
            },
            change.paths,
        )

    # -- daily log (silent pre-compaction turn only) --

    def append_daily_log(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a note to today's daily log and index it. ``arguments`` are validated."""
        change = self.memory.append_daily(
            arguments["content"].strip() + "\n", self.today(), origin="assistant: append_daily_log"
        )
        return ToolResult(True, {"appended": change.paths[0]}, change.paths)


def _snippet(text: str, limit: int = MAX_SNIPPET_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
