"""Tool-call parsers: each model family's format, and every malformed call a failure, never a crash."""

from __future__ import annotations

import json

import pytest

from rldata.envs.base import EnvSpec
from rldata.envs.tool_parsers import PARSERS, ParsedCall, default_parser, get_parser
from rldata.errors import RldataError, UnknownNameError

CALC = ParsedCall("calculate", json.dumps({"expression": "2+2"}))


@pytest.mark.parametrize(
    "name, text, content",
    [
        (
            "hermes",
            'Let me see.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n</tool_call>',
            "Let me see.",
        ),
        (
            "qwen",
            '<tool_call>{"name": "calculate", "arguments": "{\\"expression\\": \\"2+2\\"}"}</tool_call>',
            "",
        ),
        ("llama3_json", '{"name": "calculate", "parameters": {"expression": "2+2"}}', ""),
        ("llama3_json", 'ok<|python_tag|>{"name": "calculate", "arguments": {"expression": "2+2"}}', "ok"),
        ("mistral", '[TOOL_CALLS][{"name": "calculate", "arguments": {"expression": "2+2"}}]', ""),
        ("mistral", 'Sure[TOOL_CALLS]calculate[ARGS]{"expression": "2+2"}', "Sure"),
    ],
)
def test_each_format_gives_the_call_and_the_text_before_it(name, text, content):
    p = get_parser(name)(text)
    assert p.calls == [CALC] and p.failures == [] and p.content == content


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_plain_text_is_no_call(name):
    p = PARSERS[name]("The answer is 4.")
    assert (p.content, p.calls, p.failures) == ("The answer is 4.", [], [])


def test_several_calls_in_one_turn_keep_their_order():
    two = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
    assert [c.name for c in PARSERS["hermes"](two).calls] == ["a", "b"]
    llama = '{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}'
    assert [c.name for c in PARSERS["llama3_json"](llama).calls] == ["a", "b"]
    mistral = '[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]'
    assert [c.name for c in PARSERS["mistral"](mistral).calls] == ["a", "b"]


@pytest.mark.parametrize(
    "name, text, reason",
    [
        ("hermes", "<tool_call>{bad json}</tool_call>", "not valid JSON"),
        ("hermes", '<tool_call>{"name": "calculate", "arguments"', "unclosed <tool_call>"),
        ("hermes", '<tool_call>{"arguments": {}}</tool_call>', "no 'name'"),
        ("hermes", '<tool_call>{"name": "calculate", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ("hermes", '<tool_call>{"name": "calculate", "arguments": "{no"}</tool_call>', "are not JSON"),
        ("hermes", "<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
        ("llama3_json", '<|python_tag|>{"name": "calculate", "parameters": {', "not valid JSON"),
        ("mistral", "[TOOL_CALLS][{oops", "not valid JSON"),
        ("mistral", '[TOOL_CALLS]{"name": "calculate"}', "a JSON list of calls"),
        ("mistral", "[TOOL_CALLS]calculate[ARGS]{oops", "not valid JSON"),
        ("hermes", "<tool_call>" + "[" * 100_000 + "</tool_call>", "nested too deeply"),
        ("llama3_json", '{"name": "f", "parameters": ' + "[" * 100_000, "nested too deeply"),
        ("hermes", '<tool_call>{"name": "f", "arguments": {"x": 1e999}}</tool_call>', "not valid JSON"),
    ],
)
def test_a_malformed_call_is_a_failure_with_a_reason(name, text, reason):
    p = PARSERS[name](text)
    assert p.calls == [] and len(p.failures) == 1 and reason in p.failures[0].reason


def test_a_last_call_left_open_counts_only_when_its_json_is_whole():
    # The model ended its turn right after the JSON (vLLM's hermes parser takes that as a call): a
    # right answer's tool call is not turned into a tool error.  Cut off mid-JSON it stays a failure.
    whole = 'I will compute.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n'
    p = PARSERS["hermes"](whole)
    assert (p.content, p.calls, p.failures) == ("I will compute.", [CALC], [])
    two = '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}'
    assert [c.name for c in PARSERS["hermes"](two).calls] == ["a", "b"]
    cut = PARSERS["hermes"]('<tool_call>{"name": "calculate", "arguments": {"expression": "2+')
    assert cut.calls == [] and "unclosed <tool_call>" in cut.failures[0].reason


def test_a_good_call_next_to_a_bad_one_still_counts():
    p = PARSERS["hermes"](
        '<tool_call>{"name": "calculate", "arguments": {"expression": "2+2"}}</tool_call><tool_call>x</tool_call>'
    )
    assert p.calls == [CALC] and len(p.failures) == 1


@pytest.mark.parametrize(
    "template, parser",
    [
        ("{% for t in tools %}...<tool_call>\n{{ t }}\n</tool_call>{% endfor %}", "hermes"),
        ("{{ '[AVAILABLE_TOOLS]' }}{{ '[TOOL_CALLS]' }}", "mistral"),
        ("{% if m.role == 'ipython' %}<|python_tag|>{% endif %}", "llama3_json"),
        ("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", None),
        (None, None),
    ],
)
def test_the_default_parser_comes_from_the_template(template, parser):
    assert default_parser(template) == parser


def test_unknown_parsers_are_refused_by_name():
    with pytest.raises(
        UnknownNameError, match="unknown tool parser 'nope'; known: hermes, llama3_json, mistral, qwen"
    ):
        get_parser("nope")
    with pytest.raises(RldataError, match="tool_parser: unknown tool parser 'nope'"):
        EnvSpec(env="calculator-tools", tool_parser="nope")
    with pytest.raises(
        RldataError, match="spec field 'tool_parser': unknown tool parser 'hermas'; did you mean 'hermes'"
    ):
        EnvSpec.from_dict({"env": "calculator-tools", "tool_parser": "hermas"})


def test_a_spec_without_a_parser_keeps_its_json():
    # specs written before tool_parser existed keep their JSON, so their environment version stays
    assert "tool_parser" not in EnvSpec(env="calculator").to_dict()
    spec = EnvSpec(env="calculator-tools", tool_parser="qwen")
    assert EnvSpec.from_dict(json.loads(spec.to_json())) == spec


def test_no_text_makes_a_parser_raise():
    """Fragments of every format spliced at random (a fixed seed): a parse never raises, and every
    call it returns has a name and a JSON-object argument text."""
    import random

    frags = [
        "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "{", "}", "[", "]", ";",
        '"name"', '"arguments"', '"parameters"', ":", ",", '"calculate"', '"2+2"', "\\", '"', "null", "1e999",
        " ", "\n", "x", "é", "\x00",
    ]  # fmt: skip
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(frags) for _ in range(rng.randint(0, 30)))
        for parse in PARSERS.values():
            p = parse(text)
            assert isinstance(p.content, str)
            for c in p.calls:
                assert c.name and isinstance(json.loads(c.arguments), dict)
