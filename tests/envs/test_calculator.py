"""The calculator environment and its safe evaluator, including hostile input."""

from __future__ import annotations

import time

import pytest

from rldata.envs import EnvSpec, guarded_reset, guarded_step, make_env
from rldata.envs.calculator import MAX_CHARS, CalcError, evaluate, format_number


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("12*(3+4)", 84),
        ("7/2", 3.5),
        ("7//2", 3),
        ("-7 % 3", 2),
        ("2**10", 1024),
        ("2^10", 1024),
        ("-(3-5)", 2),
        ("+4", 4),
        ("1.5*4", 6.0),
        ("2**-1", 0.5),
        (" 1 + 1 ", 2),
        ("+".join(["1"] * 99), 99),
    ],
)
def test_arithmetic(expr, value):
    assert evaluate(expr) == value


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("9**9**9", "exponent larger than"),
        ("10**99 * 10**99", "result too large"),
        ("999999**300", "result too large"),
        ("2.0**5000", "exponent larger than"),
        ("1e308*10", "result too large"),
        ("1e99*1e99", "result too large"),
        ("(-8)**(1/3)", "not a real number"),
        ("1/0", "division by zero"),
        ("1//0", "division by zero"),
        ("1%0", "division by zero"),
        ("0**-1", "division by zero"),
        ("__import__('os').system('true')", "not allowed: Call"),
        ("x + 1", "not allowed: Name"),
        ("(1).real", "not allowed: Attribute"),
        ("[1, 2]", "not allowed: List"),
        ("'a' * 3", "not allowed: Constant"),
        ("True + 1", "not allowed: Constant"),
        ("1j * 2", "not allowed: Constant"),
        ("lambda: 1", "not allowed: Lambda"),
        ("1 if 1 else 2", "not allowed: IfExp"),
        ("1 < 2", "not allowed: Compare"),
        ("1 << 3", "not allowed: BinOp"),
        ("~1", "not allowed: UnaryOp"),
        ("(" * 50 + "1" + ")" * 50, "nested too deeply"),
        ("-" * 150 + "1", "nested too deeply"),
        ("1" * (MAX_CHARS + 1), "longer than"),
        ("1 +", "cannot parse"),
        ("", "empty expression"),
        ("1; import os", "cannot parse"),
    ],
)
def test_hostile_or_invalid_expressions_are_errors_not_crashes(expr, message):
    t0 = time.monotonic()
    with pytest.raises(CalcError, match=message):
        evaluate(expr)
    assert time.monotonic() - t0 < 1.0  # nothing computes a huge number first


def test_very_long_input_is_refused_before_parsing():
    with pytest.raises(CalcError, match="longer than"):
        evaluate("1+" * 1_000_000 + "1")


def test_format_number():
    assert [format_number(x) for x in (84, 6.0, 3.5, 1 / 3)] == ["84", "6", "3.5", "0.333333333333"]


def _episode(spec: EnvSpec):
    env = make_env(spec)
    opened = guarded_reset(env, {"task_id": "t", "prompt": "What is 12*(3+4)?"}, 0, timeout_s=5)
    return env, opened


def test_a_tool_call_gets_a_tool_message_and_an_answer_ends_the_episode():
    env, opened = _episode(EnvSpec("calculator", system_prompt="Use <calc>EXPR</calc>."))
    assert [m["role"] for m in opened.messages] == ["system", "user"]
    g = guarded_step(
        env, {"role": "assistant", "content": "Let me compute <calc>12*(3+4)</calc>"}, timeout_s=5
    )
    assert (g.messages, g.done, g.info) == ([{"role": "tool", "content": "84"}], False, {"tool_calls": 1})
    g = guarded_step(env, {"role": "assistant", "content": "The answer is 84."}, timeout_s=5)
    assert (g.messages, g.done, g.finish_reason, g.info["tool_calls"]) == ([], True, "env_done", 1)


@pytest.mark.parametrize(
    ("content", "observation"),
    [
        ("<calc>12*(3+4)", "error: malformed call, write <calc>EXPRESSION</calc>"),
        ("<calc>2**99999</calc>", "error: exponent larger than 400"),
        ("<calc>open('/etc/passwd')</calc>", "error: not allowed: Call"),
        ("<calc></calc>", "error: empty expression"),
    ],
)
def test_a_malformed_call_gets_an_error_observation_and_the_episode_goes_on(content, observation):
    env, _ = _episode(EnvSpec("calculator"))
    g = guarded_step(env, {"role": "assistant", "content": content}, timeout_s=5)
    assert (g.messages, g.done, g.finish_reason) == ([{"role": "tool", "content": observation}], False, None)


def test_calls_per_turn_are_capped():
    env, _ = _episode(EnvSpec("calculator", config={"max_calls": 2}))
    g = guarded_step(
        env,
        {"role": "assistant", "content": "<calc>1+1</calc> <calc>2+2</calc> <calc>3+3</calc>"},
        timeout_s=5,
    )
    assert [m["content"] for m in g.messages] == ["2", "4", "error: at most 2 calls per turn"]


def test_single_turn_is_done_after_one_step():
    env, opened = _episode(EnvSpec("single-turn"))
    assert opened.messages == [{"role": "user", "content": "What is 12*(3+4)?"}]
    g = guarded_step(env, {"role": "assistant", "content": "<calc>1+1</calc>"}, timeout_s=5)
    assert (g.messages, g.done, g.finish_reason) == ([], True, "env_done")
