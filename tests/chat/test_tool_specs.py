"""The tools' one schema definition: what the model and MCP clients are shown is what every call
is validated against (``jsonschema``), with one line naming the bad parameter."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tui.chat.tool_specs import DAILY_LOG_SPEC, SPECS, TOOL_SPECS, ToolArgumentError, ToolSpec
from tui.chat.tools import MemoryTools
from tui.serve.mcp_server import tool_definition

ALL_SPECS = (*TOOL_SPECS, DAILY_LOG_SPEC)


def refusal(spec: ToolSpec, arguments: dict[str, Any], *, null_is_absent: bool = True) -> str:
    """The one line ``spec`` refuses ``arguments`` with."""
    with pytest.raises(ToolArgumentError) as caught:
        spec.validate(arguments, null_is_absent=null_is_absent)
    return str(caught.value)


def test_the_model_and_mcp_clients_are_shown_one_valid_schema_per_tool() -> None:
    for spec in ALL_SPECS:
        schema = spec.input_schema()
        Draft202012Validator.check_schema(schema)
        assert spec.to_openai()["function"]["parameters"] == schema
    for spec in TOOL_SPECS:
        assert tool_definition(spec).inputSchema == spec.input_schema()


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "memory_search",
            {"query": "x", "rm": 1},
            "Unknown parameter 'rm' for memory_search (it takes: query, maxResults, minScore).",
        ),
        (
            "memory_search",
            {"rm": None, "query": "x"},
            "Unknown parameter 'rm' for memory_search (it takes: query, maxResults, minScore).",
        ),
        ("memory_get", {"lines": 0, "from": 0}, "Parameter 'path' is required."),
        ("memory_get", {"path": 5, "lines": 0}, "Parameter 'path' must be a string."),
        (
            "memory_get",
            {"path": "MEMORY.md", "lines": 0, "from": 0},
            "Parameter 'from' must be an integer from 1 to 10000000.",
        ),
        (
            "memory_search",
            {"query": "x", "maxResults": True},
            "Parameter 'maxResults' must be an integer from 1 to 50.",
        ),
        (
            "memory_search",
            {"query": "x", "minScore": math.nan},
            "Parameter 'minScore' must be a number from 0.0 to 1.0.",
        ),
        (
            "save_memory",
            {"content": " \n\t"},
            "Parameter 'content' is required and must be non-empty.",
        ),
        (
            "save_memory",
            {"content": " " * 5001},
            "Parameter 'content' must be 5,000 characters or less. Current length: 5,001.",
        ),
        ("save_memory", {"content": None}, "Parameter 'content' is required."),
    ],
)
def test_a_bad_argument_is_refused_with_one_line_naming_the_first_bad_parameter(
    name: str, arguments: dict[str, Any], message: str
) -> None:
    assert refusal(SPECS[name], arguments) == message


def test_null_is_absent_for_the_model_and_the_wrong_type_for_mcp() -> None:
    search = SPECS["memory_search"]
    assert search.validate({"query": "x", "maxResults": None}) == {"query": "x"}
    assert refusal(search, {"query": "x", "maxResults": None}, null_is_absent=False) == (
        "Parameter 'maxResults' must be an integer, not null (leave it out to use the default)."
    )


def test_valid_numbers_come_back_as_the_tools_use_them() -> None:
    checked = SPECS["memory_search"].validate({"query": "x", "maxResults": 3.0, "minScore": 1})
    assert checked == {"query": "x", "maxResults": 3, "minScore": 1.0}
    assert type(checked["maxResults"]) is int and type(checked["minScore"]) is float


def test_an_integer_too_large_for_a_float_is_a_validation_error(tools: MemoryTools) -> None:
    # 10**400 for a number parameter raised OverflowError (math.isfinite) inside the validator
    for raw in (
        {"query": "x", "minScore": 10**400},
        '{"query": "x", "minScore": 1' + "0" * 400 + "}",
    ):
        result = tools.execute("memory_search", raw)
        assert result.content == {
            "error": "validation_error",
            "message": "Parameter 'minScore' must be a number from 0.0 to 1.0.",
        }


def test_nesting_just_under_what_json_reads_is_a_validation_error(tools: MemoryTools) -> None:
    # jsonschema's error message is the value's repr, which needs more depth than reading it
    limit = sys.getrecursionlimit()
    kinds = set()
    for depth in range(limit - 150, limit + 1):
        nested = "[" * depth + "]" * depth
        result = tools.execute("memory_search", '{"query": ' + nested + "}")
        assert result.content["error"] == "validation_error", (depth, result.content)
        kinds.add(result.content["message"])
    assert "Parameter 'query' must be a string." in kinds  # some depths were read, then refused


_JSON_VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    spec=st.sampled_from(ALL_SPECS),
    arguments=st.dictionaries(
        st.sampled_from(
            [
                "content",
                "supersedes",
                "query",
                "maxResults",
                "minScore",
                "path",
                "from",
                "lines",
                "other",
            ]
        ),
        _JSON_VALUES | st.lists(_JSON_VALUES, max_size=2),
        max_size=4,
    ),
)
def test_a_call_passes_exactly_when_the_schema_shown_accepts_it(
    spec: ToolSpec, arguments: dict[str, Any]
) -> None:
    # the oracle is the plain Draft 2020-12 validator; JSON has no NaN or infinity
    finite = all(not isinstance(v, float) or math.isfinite(v) for v in arguments.values())
    shown = Draft202012Validator(spec.input_schema()).is_valid(arguments) and finite
    try:
        spec.validate(arguments, null_is_absent=False)
    except ToolArgumentError as exc:
        assert not shown, (arguments, exc)
        assert "\n" not in str(exc)
    else:
        assert shown, arguments
