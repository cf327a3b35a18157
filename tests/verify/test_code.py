"""The layered code verifier on real completions, run in the real sandbox."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from rldata.verify import for_domain, get_verifier
from rldata.verify.code import (
    CodeRules,
    CodeVerifier,
    all_passed,
    check_rules,
    extract_code,
    parse_tests,
    same_value,
)

ADD = {
    "style": "function",
    "entry_point": "add",
    "public": [{"input": [2, 3], "output": 5}, {"input": [10, 20], "output": 30}],
    "hidden": [{"input": [100, 23], "output": 123}, {"input": [-7, 3], "output": -4}],
}
SUM_STDIO = {
    "style": "stdio",
    "public": [{"input": "2 3\n", "output": "5\n"}, {"input": "10 20\n", "output": "30"}],
    "hidden": [{"input": "100 23\n", "output": "123\n"}],
}


def _task(tests: dict) -> dict:
    return {"tests": json.dumps(tests)}


def _layers(verdicts) -> dict:
    return {v.layer: v for v in verdicts}


def _sample_tasks() -> list[dict]:
    path = files("rldata.sample_data").joinpath("code_tasks.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def verifier() -> CodeVerifier:
    return CodeVerifier()


def test_registered_for_the_code_domain():
    v = for_domain("code")
    assert isinstance(v, CodeVerifier) and v.name == "code" and v.version == "3"
    assert isinstance(get_verifier("code"), CodeVerifier)


def test_correct_function_passes_every_layer(verifier):
    out = verifier.verify("Sure:\n```python\ndef add(a, b):\n    return a + b\n```\n", _task(ADD))
    assert [v.layer for v in out] == ["rule", "public", "hidden"]
    assert all(v.passed is True and v.score == 1.0 and v.error is None for v in out)
    lay = _layers(out)
    assert lay["rule"].extracted == "def add(a, b):\n    return a + b\n"
    assert lay["public"].detail["passed"] == 2 and lay["hidden"].detail["total"] == 2
    assert all_passed(out) is True


def test_correct_stdio_program_passes_every_layer(verifier):
    # open(0) closes fd 0 when garbage-collected: the next case must still get its input
    code = "```python\na, b = map(int, open(0).read().split())\nprint(a + b)\n```"
    out = _layers(verifier.verify(code, _task(SUM_STDIO)))
    assert out["public"].passed and out["public"].detail["passed"] == 2
    assert out["hidden"].passed
    assert not out["rule"].passed and "call open()" in out["rule"].detail["checks"]["forbidden"]


def test_hard_coded_public_outputs_pass_public_but_fail_rule_and_hidden(verifier):
    hack = "```python\ndef add(a, b):\n    if (a, b) == (2, 3):\n        return 5\n    return 30\n```"
    out = _layers(verifier.verify(hack, _task(ADD)))
    assert out["public"].passed is True  # the hack got past the public tests...
    assert out["rule"].passed is False  # ...but not past the rule layer...
    assert "appear as literals" in out["rule"].detail["checks"]["hardcoded"]
    assert out["hidden"].passed is False and out["hidden"].score == 0.0  # ...nor the hidden tests
    assert {f["reason"] for f in out["hidden"].detail["failures"]} == {"wrong answer"}
    assert all("expected" not in f for f in out["hidden"].detail["failures"])  # hidden outputs stay hidden
    assert all_passed(list(out.values())) is False


def test_hard_coded_stdio_outputs_are_flagged(verifier):
    hack = "```python\na, b = map(int, input().split())\nprint('5' if a == 2 else '30')\n```"
    out = _layers(verifier.verify(hack, _task(SUM_STDIO)))
    assert out["public"].passed and not out["rule"].passed and not out["hidden"].passed


def test_common_constants_are_not_hard_coding():
    tests = parse_tests(
        {
            "style": "function",
            "entry_point": "f",
            "public": [
                {"input": [3], "output": 1},
                {"input": [4], "output": 0},
                {"input": [10], "output": 55},
            ],
        }
    )
    rule = check_rules(
        "def f(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a % 2\n",
        tests,
    )
    assert rule.passed, rule.detail


def test_syntax_error_fails_rule_and_skips_tests(verifier):
    out = _layers(verifier.verify("```python\ndef add(a, b)\n    return a + b\n```", _task(ADD)))
    assert out["rule"].passed is False
    assert out["rule"].detail["checks"]["syntax"].startswith("syntax error: line 1")
    for layer in ("public", "hidden"):
        assert out[layer].passed is False and out[layer].error is None
        assert out[layer].detail["skipped"].startswith("no runnable code")


def test_no_code_fails_the_format_check(verifier):
    out = _layers(verifier.verify("I think the answer is to add the numbers.", _task(ADD)))
    assert out["rule"].passed is False and "not Python" in out["rule"].detail["checks"]["format"]
    assert out["public"].passed is False


def test_timeout_is_a_failure_not_an_error(verifier):
    tests = {**ADD, "time_limit_s": 0.3}
    loop = "```python\ndef add(a, b):\n    while True:\n        try:\n            pass\n        except BaseException:\n            pass\n```"
    out = _layers(verifier.verify(loop, _task(tests)))
    assert out["rule"].passed is True
    for layer in ("public", "hidden"):
        assert out[layer].passed is False and out[layer].error is None
        assert {f["reason"] for f in out[layer].detail["failures"]} == {"timeout"}


def test_forbidden_import_fails_rule_but_tests_still_run(verifier):
    code = "```python\nimport os\ndef add(a, b):\n    return a + b\n```"
    out = _layers(verifier.verify(code, _task(ADD)))
    assert out["rule"].passed is False and "import os" in out["rule"].detail["checks"]["forbidden"]
    assert out["public"].passed and out["hidden"].passed
    allowed = _layers(verifier.verify(code, _task({**ADD, "allow_modules": ["os"]})))
    assert allowed["rule"].passed


def test_crash_mid_run_fails_the_remaining_cases(verifier):
    code = "```python\nimport os\ndef add(a, b):\n    if a == 10:\n        os._exit(0)\n    return a + b\n```"
    out = _layers(verifier.verify(code, _task(ADD)))
    assert out["public"].detail["passed"] == 1 and out["public"].score == 0.5
    reasons = [f["reason"] for f in out["public"].detail["failures"] + out["hidden"].detail["failures"]]
    assert len(reasons) == 3 and all(r.startswith("not run") for r in reasons)


def test_exceptions_and_wrong_answers_are_reported_per_case(verifier):
    code = "```python\ndef add(a, b):\n    if a < 0:\n        raise ValueError('negative')\n    return a * b if a == 2 else a + b\n```"
    out = _layers(verifier.verify(code, _task(ADD)))
    pub = out["public"].detail["failures"]
    assert pub == [{"index": 0, "reason": "wrong answer", "got": "6", "expected": "5"}]
    assert out["hidden"].detail["failures"] == [{"index": 1, "reason": "ValueError: negative"}]


def test_missing_entry_point(verifier):
    out = _layers(verifier.verify("```python\ndef plus(a, b):\n    return a + b\n```", _task(ADD)))
    assert out["rule"].detail["checks"]["entry_point"] == "no top-level 'add'"
    assert out["public"].detail["failures"][0]["reason"] == "load error: no function named 'add'"


def test_bad_tests_spec_is_a_verifier_error(verifier):
    out = verifier.verify(
        "def add(a, b): return a + b", {"tests": json.dumps({"style": "stdio", "public": []})}
    )
    assert [v.passed for v in out] == [None, None, None]
    assert out[0].error == "bad tests spec: tests has no public and no hidden cases"
    assert all_passed(out) is None


@pytest.mark.parametrize(
    "bad, msg",
    [
        ({"public": [{"input": [1], "output": 1}]}, "style is required"),
        ({"style": "function", "entry_point": "f", "public": [{"input": 1, "output": 1}]}, "list of args"),
        ({"style": "stdio", "public": [{"input": "1"}]}, "'input' and 'output'"),
        ({"style": "stdio", "public": [{"input": "1", "output": "1"}], "language": "rust"}, "not supported"),
        ({"style": "stdio", "public": [{"input": "1", "output": "1"}], "extra": 1}, "unknown tests field"),
    ],
)
def test_parse_tests_rejects_bad_specs(bad, msg):
    with pytest.raises(ValueError, match=msg):
        parse_tests(json.dumps(bad))


def test_extract_code_takes_the_last_python_block():
    text = "```text\nnot code\n```\n```python\nx = 1\n```\nthen\n```py\nx = 2\n```"
    assert extract_code(text) == "x = 2\n"
    assert extract_code("x = 3") == "x = 3"
    assert extract_code("x = 3", require_fence=True) is None
    assert extract_code("just words, no code!") is None
    rule = check_rules(
        extract_code("x = 3", require_fence=True), parse_tests(SUM_STDIO), CodeRules(require_fence=True)
    )
    assert rule.passed is False and rule.detail["checks"]["format"] == "no ``` code block"


def test_same_value_tolerates_floats_but_not_types():
    assert same_value(0.1 + 0.2, 0.3)
    assert same_value([1, [2.0000000001]], [1, [2.0]])
    assert not same_value(True, 1) and not same_value(1, True)
    assert not same_value("1", 1) and not same_value([1, 2], [1, 2, 3])
    assert same_value({"a": [1]}, {"a": [1]}) and not same_value({"a": 1}, {"b": 1})


def test_sample_code_tasks_are_valid_and_a_wrong_solution_fails_them(verifier):
    tasks = _sample_tasks()
    assert 10 <= len(tasks) <= 20
    assert {t["tests"]["style"] for t in tasks} == {"function", "stdio"}
    for t in tasks:
        spec = parse_tests(json.dumps(t["tests"]))
        assert spec.public and spec.hidden and t["domain"] == "code"
    first = tasks[0]
    out = _layers(verifier.verify("```python\ndef sum_digits(n):\n    return 0\n```", _task(first["tests"])))
    assert out["rule"].passed and not out["public"].passed


@pytest.mark.slow
def test_every_sample_reference_solution_passes_every_layer(verifier):
    for t in _sample_tasks():
        out = verifier.verify(f"```python\n{t['metadata']['reference_solution']}```", _task(t["tests"]))
        assert all_passed(out) is True, (t["metadata"]["name"], [(v.layer, v.detail) for v in out])
