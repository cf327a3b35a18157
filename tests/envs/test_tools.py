"""Tools declared as typed Python functions or OpenAI schemas, and ToolEnv running the model's calls."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from rldata.envs.base import EnvSpec, make_env
from rldata.envs.calculator import calculate
from rldata.envs.tools import ToolEnv, call_id, schema_of, tool
from rldata.errors import RldataError


def lookup(city: str, units: Literal["c", "f"] = "c", days: list[int] | None = None) -> dict:
    """Look up the weather of a city.

    Some more text the model does not need.

    Args:
        city: the city's name
        units (str): degrees Celsius or Fahrenheit
        days: which days ahead
    """
    return {"city": city, "units": units, "days": days or []}


def test_a_schema_is_derived_from_type_hints_and_docstring():
    s = schema_of(lookup)
    assert s == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up the weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "the city's name"},
                    "units": {
                        "type": "string",
                        "enum": ["c", "f"],
                        "description": "degrees Celsius or Fahrenheit",
                    },
                    "days": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "nullable": True,
                        "description": "which days ahead",
                    },
                },
                "required": ["city"],
            },
        },
    }


def test_a_derived_schema_is_a_fresh_copy_each_time():
    """Schemas are derived once per function (every episode builds its tools); each caller gets its own copy."""
    a = schema_of(calculate)
    a["function"]["name"] = "changed"
    a["function"]["parameters"]["properties"].clear()
    b = schema_of(calculate)
    assert b["function"]["name"] == "calculate" and b["function"]["parameters"]["properties"]


def test_the_calculator_is_a_standard_tool():
    s = tool(calculate).schema["function"]
    assert s["name"] == "calculate" and s["parameters"]["required"] == ["expression"]
    assert s["parameters"]["properties"]["expression"]["type"] == "string"
    assert calculate("(12 + 7) * 3") == "57" and calculate("1/0") == "error: division by zero"


def test_an_openai_schema_with_its_callable_is_a_tool():
    schema = {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Echo.",
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        },
    }
    t = tool(schema, lambda x: x)
    assert t.name == "echo" and t.schema == schema
    assert tool(schema["function"], lambda x: x).schema == schema  # the inner object works too


def _untyped(x):
    """Doc."""


def _undocumented(x: int):
    pass


def _star(*args: int):
    """Doc."""


def _weird(x: set[int]):
    """Doc."""


@pytest.mark.parametrize(
    "obj, message",
    [
        (_untyped, "parameter 'x' has no type hint"),
        (_undocumented, "needs a docstring"),
        (_star, r"\*args and \*\*kwargs have no schema"),
        (_weird, "has no JSON schema"),
        ({"type": "function", "function": {"name": "f"}}, "needs the callable"),
        ({"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}, "type object"),
        ({"function": {}}, "expected"),
        (42, "a tool is a typed function"),
    ],
)
def test_bad_tool_declarations_are_refused(obj, message):
    with pytest.raises(RldataError, match=message):
        tool(obj)


class Weather(ToolEnv):
    name = "weather"
    tools = (lookup, calculate)


def _msg(*calls):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id(1, i), "name": n, "arguments": a} for i, (n, a) in enumerate(calls)],
    }


def test_tool_env_answers_each_call_by_id_and_a_turn_without_calls_ends():
    env = Weather(max_calls=3)
    assert [s["function"]["name"] for s in env.tool_schemas] == ["lookup", "calculate"]
    env.reset({"prompt": "hi"}, 0)
    r = env.step(_msg(("lookup", '{"city": "Oslo"}'), ("calculate", '{"expression": "2*3"}')))
    assert not r.done and r.info == {"tool_calls": 2}
    assert r.observations == [
        {
            "role": "tool",
            "content": json.dumps({"city": "Oslo", "units": "c", "days": []}),
            "tool_call_id": "c00010000",
        },
        {"role": "tool", "content": "6", "tool_call_id": "c00010001"},
    ]
    assert env.step({"role": "assistant", "content": "6"}).done


@pytest.mark.parametrize(
    "call, content",
    [
        (("lookup", "{}"), "error: bad arguments for lookup"),
        (("lookup", "[1]"), "error: arguments are not a JSON object"),
        (("nope", "{}"), "error: unknown tool 'nope'; tools: calculate, lookup"),
    ],
)
def test_bad_calls_get_error_observations_and_the_episode_goes_on(call, content):
    r = Weather().step(_msg(call))
    assert not r.done and r.observations[0]["content"].startswith(content)


def test_calls_past_max_calls_are_answered_with_an_error():
    r = Weather(max_calls=1).step(
        _msg(("calculate", '{"expression": "1"}'), ("calculate", '{"expression": "2"}'))
    )
    assert [o["content"] for o in r.observations] == ["1", "error: at most 1 calls per turn"]
    assert r.info == {"tool_calls": 1}


def test_call_ids_are_nine_letters_and_digits():
    assert call_id(3, 12) == "c00030012" and len(call_id(12345, 123456)) == 9


def test_the_calculator_tools_env_is_bundled():
    env = make_env(EnvSpec(env="calculator-tools", config={"max_calls": 2}))
    assert env.tool_schemas == [tool(calculate).schema]
