"""The memory tools the model may call, executed locally: save, search, get, forget.

Each returns a :class:`ToolResult` whose ``content`` is the JSON object the model receives.
Invalid input never raises: it comes back as ``ok=False`` with an ``error`` the model can read
(RFC-023: ``validation_error`` for an empty or too long ``save_memory``).

Contradictions, newer wins (DESIGN §7). ``save_memory`` retires an older MEMORY.md entry when

1. the model names it in ``supersedes`` (its id, or words that pick out exactly one entry), or
2. both are simple statements about the same subject with a different value: each is split
   at its first ``is / are / was / were / :`` into subject and value, possessives such as
   "my", "the user's" are dropped from the subject ("My dog is Max" and "The user's dog is
   Luna" share the subject "dog"). Same subject and same value is a duplicate and is not
   saved twice.

The retired entry leaves MEMORY.md for ``.memdeck/history.jsonl`` (state ``superseded``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from ..engine.engine import MemoryEngine
from ..engine.fileio import ConcurrentEditError
from ..engine.metadata import split_meta
from ..engine.store import MemoryEntry, normalize_entry_text
from ..engine.textsearch import contains_all_terms
from ..engine.workspace import MEMORY_FILE, PathRefusedError

MAX_SAVE_CHARS = 5_000
MAX_SNIPPET_CHARS = 700
MAX_GET_LINES = 400
MAX_GET_CHARS = 20_000
#: forget_memory refuses to retire more entries than this at once (the query is too broad).
MAX_FORGET = 5

_COPULA = re.compile(r"\s+(?:is|are|was|were|is now|are now)\s+|\s*:\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(
    r"^(?:(?:the\s+)?user'?s?'?\s+|my\s+|our\s+|his\s+|her\s+|their\s+|the\s+|a\s+|an\s+)+",
    re.IGNORECASE,
)

_NAMED = re.compile(r"^\s*(?:called|named)\s+", re.IGNORECASE)


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


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name, description and JSON-schema parameters as offered to the model."""

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
                },
            },
        }


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "save_memory",
        "Save something to long-term memory (MEMORY.md) so it is known in future conversations. "
        "Use it when the user asks you to remember something, or states a lasting preference, "
        "fact or decision. Write one short, self-contained statement (e.g. 'The user's dog is "
        "called Luna'). If it replaces something already remembered, pass the old entry's id "
        f"or words in 'supersedes'. At most {MAX_SAVE_CHARS:,} characters.",
        {
            "content": {"type": "string", "description": "The statement to remember."},
            "supersedes": {
                "type": "string",
                "description": "Optional: id or words of an existing memory this replaces.",
            },
        },
        ("content",),
    ),
    ToolSpec(
        "memory_search",
        "Search long-term memory and the daily logs. Returns snippets with path, line range "
        "and score; use memory_get to read more around a hit.",
        {
            "query": {"type": "string", "description": "Keywords or a description."},
            "maxResults": {"type": "integer", "description": "Most results (default 6)."},
            "minScore": {"type": "number", "description": "Minimum score 0..1 (default 0.35)."},
        },
        ("query",),
    ),
    ToolSpec(
        "memory_get",
        "Read lines of a memory file: MEMORY.md or a file under memory/ (e.g. "
        "memory/2026-11-20.md). No other files can be read.",
        {
            "path": {"type": "string", "description": "MEMORY.md or memory/<file>.md"},
            "from": {"type": "integer", "description": "First line, 1-based (default 1)."},
            "lines": {"type": "integer", "description": f"How many lines (max {MAX_GET_LINES})."},
        },
        ("path",),
    ),
    ToolSpec(
        "forget_memory",
        "Forget memories the user no longer wants kept. Pass words that pick out the entry "
        "(or its exact text). The entries stop surfacing; an audit copy is kept.",
        {"query": {"type": "string", "description": "What to forget."}},
        ("query",),
    ),
)

#: Offered only in the silent pre-compaction turn.
DAILY_LOG_SPEC = ToolSpec(
    "append_daily_log",
    "Append a note to today's daily log (memory/YYYY-MM-DD.md).",
    {"content": {"type": "string", "description": "Markdown to append."}},
    ("content",),
)


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
        """Run tool ``name`` with its JSON arguments; never raises for bad input."""
        handler = self._handlers.get(name)
        if handler is None:
            return ToolResult.error("unknown_tool", f"there is no tool named {name!r}")
        if isinstance(raw_arguments, dict):
            arguments = raw_arguments
        else:
            try:
                arguments = json.loads(raw_arguments or "{}")
            except ValueError as exc:
                return ToolResult.error(
                    "validation_error", f"arguments are not valid JSON ({exc.msg})"
                )
        if not isinstance(arguments, dict):
            return ToolResult.error("validation_error", "arguments must be a JSON object")
        try:
            return handler(arguments)
        except PathRefusedError as exc:
            return ToolResult.error("path_refused", str(exc))
        except (OSError, ValueError, ConcurrentEditError) as exc:
            return ToolResult.error("failed", f"{name} failed: {exc}")

    # -- save --

    def save_memory(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a high-confidence entry to MEMORY.md (validated), retiring what it supersedes."""
        content = arguments.get("content")
        if not isinstance(content, str) or not content.strip():
            return ToolResult.error(
                "validation_error", "Parameter 'content' is required and must be non-empty."
            )
        content = content.strip()
        if len(content) > MAX_SAVE_CHARS:
            return ToolResult.error(
                "validation_error",
                f"Parameter 'content' must be {MAX_SAVE_CHARS:,} characters or less. "
                f"Current length: {len(content):,}.",
            )
        supersedes = arguments.get("supersedes")
        active = [e for e in self.memory.store.entries() if e.active]
        normalized = normalize_entry_text(content)
        duplicate = next((e for e in active if normalize_entry_text(e.text) == normalized), None)
        if duplicate is not None:
            return ToolResult(
                True,
                {"saved": False, "message": "Already remembered.", "id": duplicate.entry_id},
            )
        retire, why = self._superseded_by(content, supersedes, active)
        meta = self.memory.store.add_entry(
            content, confidence="high", source="assistant", day=self.today()
        )
        retired = []
        if retire:
            retired = self.memory.store.retire_entries(
                retire, state="superseded", reason=why, replaced_by=meta.id
            )
        self.memory.index.sync_file(MEMORY_FILE, embed=self.memory.model_loaded)
        result: dict[str, Any] = {
            "saved": True,
            "id": meta.id,
            "message": "Saved to long-term memory; it will be known in future conversations.",
        }
        if retired:
            result["superseded"] = [e.text for e in retired]
        elif isinstance(supersedes, str) and supersedes.strip():
            result["note"] = f"nothing matching {supersedes!r} was found to supersede"
        return ToolResult(True, result, (MEMORY_FILE,))

    def _superseded_by(
        self, content: str, supersedes: object, active: list[MemoryEntry]
    ) -> tuple[list[MemoryEntry], str]:
        if isinstance(supersedes, str) and supersedes.strip():
            wanted = supersedes.strip()
            by_id = [e for e in active if e.entry_id == wanted]
            if by_id:
                return by_id, "named by id"
            exact = [
                e for e in active if normalize_entry_text(e.text) == normalize_entry_text(wanted)
            ]
            if exact:
                return exact, "named by text"
            matches = [e for e in active if contains_all_terms(e.text, wanted)]
            if len(matches) == 1:
                return matches, "named by words"
        statement = split_statement(content)
        if statement is None:
            return [], ""
        subject, value = statement
        same_subject = []
        for entry in active:
            other = split_statement(entry.text)
            if other and other[0] == subject and other[1] != value:
                same_subject.append(entry)
        return same_subject, f"same subject {subject!r}, newer value"

    # -- search / get --

    def memory_search(self, arguments: dict[str, Any]) -> ToolResult:
        """Hybrid search; snippets of at most 700 characters with path, lines and score."""
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolResult.error("validation_error", "Parameter 'query' must be non-empty.")
        overrides: dict[str, Any] = {}
        max_results = arguments.get("maxResults")
        if max_results is not None:
            if not isinstance(max_results, int | float) or max_results < 1:
                return ToolResult.error("validation_error", "maxResults must be a positive number")
            overrides["max_results"] = min(int(max_results), 50)
        min_score = arguments.get("minScore")
        if min_score is not None:
            if not isinstance(min_score, int | float) or not 0 <= min_score <= 1:
                return ToolResult.error("validation_error", "minScore must be between 0 and 1")
            overrides["min_score"] = float(min_score)
        response = self.memory.search(query, now=self.today(), **overrides)
        results = [
            {
                "path": r.path,
                "startLine": r.start_line,
                "endLine": r.end_line,
                "score": round(r.score, 4),
                "snippet": _snippet(r.text),
            }
            for r in response.results
        ]
        content: dict[str, Any] = {"results": results, "mode": response.mode}
        if not results:
            content["message"] = "No memories matched."
        return ToolResult(True, content)

    def memory_get(self, arguments: dict[str, Any]) -> ToolResult:
        """Lines of MEMORY.md or a file under memory/, through the workspace's one path guard.

        Metadata comments are hidden and forgotten or superseded lines left out.
        """
        requested = arguments.get("path")
        if not isinstance(requested, str):
            return ToolResult.error("validation_error", "Parameter 'path' must be a string.")
        path = self.memory.workspace.resolve_memory_path(requested)
        rel = self.memory.workspace.relative(path)
        if not path.is_file():
            return ToolResult.error("not_found", f"{rel} does not exist")
        start = arguments.get("from", 1)
        count = arguments.get("lines", MAX_GET_LINES)
        if not isinstance(start, int) or start < 1:
            return ToolResult.error("validation_error", "'from' must be a line number >= 1")
        if not isinstance(count, int) or count < 1:
            return ToolResult.error("validation_error", "'lines' must be >= 1")
        count = min(count, MAX_GET_LINES)
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
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolResult.error("validation_error", "Parameter 'query' must be non-empty.")
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
        retired = self.memory.store.retire_entries(
            found, state="forgotten", reason=f"forget_memory: {query.strip()}"
        )
        paths = tuple(dict.fromkeys(e.path for e in retired))
        for rel in paths:
            self.memory.index.sync_file(rel, embed=self.memory.model_loaded)
        return ToolResult(
            True,
            {
                "forgotten": [{"path": e.path, "text": _snippet(e.text, 200)} for e in retired],
                "message": f"Forgot {len(retired)} memor{'y' if len(retired) == 1 else 'ies'}.",
            },
            paths,
        )

    # -- daily log (silent pre-compaction turn only) --

    def append_daily_log(self, arguments: dict[str, Any]) -> ToolResult:
        """Append a note to today's daily log and index it."""
        content = arguments.get("content")
        if not isinstance(content, str) or not content.strip():
            return ToolResult.error("validation_error", "Parameter 'content' must be non-empty.")
        if len(content) > MAX_SAVE_CHARS:
            return ToolResult.error(
                "validation_error",
                f"Parameter 'content' must be {MAX_SAVE_CHARS:,} characters or less.",
            )
        path = self.memory.store.append_daily(content.strip() + "\n", self.today())
        rel = self.memory.workspace.relative(path)
        self.memory.index.sync_file(rel, embed=self.memory.model_loaded)
        return ToolResult(True, {"appended": rel}, (rel,))


def _snippet(text: str, limit: int = MAX_SNIPPET_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
