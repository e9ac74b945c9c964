"""The memory tools' specifications: each tool's name, description and JSON-schema parameters,
the one definition that gives the model's tool list, the MCP ``inputSchema`` and the validation
of every call, whichever transport carries it (the chat's tool calls, ``memdeck mcp``).

Validation is ``jsonschema`` (Draft 2020-12) over that same schema, its errors turned into one
line naming the parameter. Imports nothing heavy: an MCP server lists its tools before it opens
the memory engine, and ``jsonschema`` is imported at the first call.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

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


def _is_finite_number(_checker: object, instance: object) -> bool:
    """JSON's numbers: no bool, and no NaN or infinity (which Python's ``json`` reads)."""
    if isinstance(instance, bool) or not isinstance(instance, int | float):
        return False
    return not isinstance(instance, float) or math.isfinite(instance)


@cache
def _validator_class() -> type[Validator]:
    """Draft 2020-12 with ``number`` meaning a finite one (an integer stays one that is
    integral: ``3.0`` is an integer, ``True`` is not)."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("number", _is_finite_number)
    validator: type[Validator] = validators.extend(Draft202012Validator, type_checker=checker)
    return validator


def _normalised(schema: Mapping[str, Any], value: Any) -> Any:
    """A valid value as the tools use it: an integer as ``int`` (``3.0`` is 3), a number as
    ``float``."""
    if schema["type"] == "integer":
        return int(value)
    if schema["type"] == "number":
        return float(value)
    return value


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

    @cached_property
    def _validator(self) -> Validator:
        return _validator_class()(self.input_schema())

    def validate(
        self, arguments: Mapping[str, Any], *, null_is_absent: bool = True
    ) -> dict[str, Any]:
        """The arguments checked against :meth:`input_schema`, integers as ``int`` and numbers
        as ``float``; raises :class:`ToolArgumentError` naming the first bad parameter (an
        unknown one first, then in the order of :attr:`parameters`).

        With ``null_is_absent`` a known parameter sent as ``null`` counts as not given (many
        models do that); without, null is refused as the wrong type (over MCP the schema is the
        contract).
        """
        given = {
            key: value
            for key, value in arguments.items()
            if not (null_is_absent and value is None and key in self.parameters)
        }
        try:
            problem = self._first_problem(self._validator.iter_errors(given), given)
        except RecursionError:  # jsonschema's error message is the value's repr
            raise ToolArgumentError("arguments are nested too deeply") from None
        if problem is not None:
            raise ToolArgumentError(problem)
        return {
            name: _normalised(schema, given[name])
            for name, schema in self.parameters.items()
            if name in given
        }

    def _first_problem(
        self, errors: Iterable[ValidationError], given: Mapping[str, Any]
    ) -> str | None:
        """The line for the error that comes first (see :meth:`validate`), or None."""
        rank = {name: position for position, name in enumerate(self.parameters)}
        problems = [self._problem(error, given) for error in errors]
        first = min(problems, key=lambda problem: rank.get(problem[0], -1), default=None)
        return None if first is None else first[1]

    def _problem(self, error: ValidationError, given: Mapping[str, Any]) -> tuple[str, str]:
        """``(parameter, one line)`` for a ``jsonschema`` error; the parameter is ``""`` for
        an unknown one (it comes first)."""
        if error.validator == "additionalProperties":
            unknown = next(key for key in given if key not in self.parameters)
            known = ", ".join(self.parameters)
            return "", (
                f"Unknown parameter {str(unknown)[:40]!r} for {self.name} (it takes: {known})."
            )
        if error.validator == "required":
            name = next(n for n in self.parameters if n in self.required and n not in given)
            return name, f"Parameter {name!r} is required."
        name = str(error.relative_path[0])
        schema, value = self.parameters[name], given[name]
        kind = schema["type"]
        article = "an" if kind == "integer" else "a"
        if value is None:
            return name, (
                f"Parameter {name!r} must be {article} {kind}, not null (leave it out to use "
                "the default)."
            )
        if error.validator == "maxLength":
            return name, (
                f"Parameter {name!r} must be {schema['maxLength']:,} characters or less. "
                f"Current length: {len(value):,}."
            )
        if error.validator == "pattern":
            return name, f"Parameter {name!r} is required and must be non-empty."
        if kind == "string":
            return name, f"Parameter {name!r} must be a string."
        return name, (
            f"Parameter {name!r} must be {article} {kind} from {schema['minimum']} to "
            f"{schema['maximum']}."
        )


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
