"""The memory tools' specifications: each tool's name, description and JSON-schema parameters,
and the one validator every call goes through, whichever transport carries it (the chat's tool
calls, ``memdeck mcp``). Imports nothing heavy: an MCP server lists its tools before it opens
the memory engine.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

#: Must contain something other than white space (the JSON-schema ``pattern`` of required text).
NON_BLANK = r"\S"


class ToolArgumentError(ValueError):
    """A tool argument that does not fit its schema; the message names the parameter."""


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

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (an object of :attr:`parameters`)."""
        return {
            "type": "object",
            "properties": self.parameters,
            "required": list(self.required),
            "additionalProperties": False,
        }

    def to_openai(self) -> dict[str, Any]:
        """The ``tools=[...]`` element of a chat completion request."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema(),
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

#: Every tool by name.
SPECS = {spec.name: spec for spec in (*TOOL_SPECS, DAILY_LOG_SPEC)}


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
