"""The code verifier never rejects a reference solution, and still rejects hard-coding.

Reference solutions: the bundled code tasks (sample_data/code_tasks.jsonl) and 160 HumanEval
problems converted to function-style tests (tests/data/humaneval_code_tasks.jsonl, MIT; made by
benchmarks/convert_humaneval.py).  The rule layer is static and fast; the all-layers runs use the
real sandbox and are marked slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rldata.verify.base import all_passed
from rldata.verify.code import CodeVerifier
from rldata.verify.code_rules import CodeRules, _trivial, check_rules, parse_tests

ROOT = Path(__file__).parents[2]
SOURCES = (ROOT / "sample_data" / "code_tasks.jsonl", ROOT / "tests" / "data" / "humaneval_code_tasks.jsonl")


def _tasks() -> list[dict]:
    rows = []
    for path in SOURCES:
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


TASKS = _tasks()


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _lookup_hack(task: dict) -> str:
    """A body that answers the public cases from a table of their inputs, None otherwise."""
    t = task["tests"]
    if t["style"] == "stdio":
        table = {c["input"]: c["output"] for c in t["public"]}
        return f"import sys\nprint({table!r}.get(sys.stdin.read(), ''), end='')\n"
    lines = [f"def {t['entry_point']}(*args):"]
    for case in t["public"]:
        args = tuple(case["input"])
        lines.append(f"    if args == {args!r}:")
        lines.append(f"        return {case['output']!r}")
    lines.append("    return None")
    return "\n".join(lines) + "\n"


def test_the_reference_sets_are_there():
    assert sum(t["source"] == "humaneval" for t in TASKS) >= 150
    assert all(t["metadata"]["reference_solution"] for t in TASKS)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t["metadata"]["name"])
def test_rule_layer_never_rejects_a_reference_solution(task):
    rule = check_rules(task["metadata"]["reference_solution"], parse_tests(task["tests"]))
    assert rule.passed, rule.detail


def test_rule_layer_flags_lookup_tables_of_the_public_cases():
    """Every lookup table is flagged, except where all public outputs are trivial (True, 0, "", [x]):
    a literal True proves nothing; those hacks fail the hidden layer (the slow test below)."""
    missed = []
    for t in TASKS:
        tests = parse_tests(t["tests"])
        flagged = check_rules(_lookup_hack(t), tests).detail["checks"]["hardcoded"] != "ok"
        visible = any(not _trivial(c["output"], tests.style) for c in tests.public)
        if flagged != visible:
            missed.append(t["metadata"]["name"])
    assert missed == []
    assert (
        sum(any(not _trivial(c["output"], t["tests"]["style"]) for c in t["tests"]["public"]) for t in TASKS)
        >= 130
    )


@pytest.mark.parametrize(
    ("code", "ok"),
    [
        (
            (
                "def f(ops, xs):\n    e = str(xs[0])\n    for o, x in zip(ops, xs[1:]):\n        e += o + str(x)\n"
                "    return eval(e)\n"
            ),
            True,
        ),  # assembled from the inputs: the rules miss nothing
        ("def f(x):\n    return eval('1 + 2') + x\n", True),
        ("def f(x):\n    return eval(\"__import__('os').getcwd()\")\n", False),  # literal that breaks a rule
        ("def f(x):\n    return eval('__imp' + 'ort__(\"os\")')\n", False),  # spelled from fragments
        ("def f(x):\n    s = ''.join(chr(c) for c in x)\n    return eval(s)\n", False),
        ("def f(x):\n    return eval(x, {'a': 1})\n", False),  # custom namespace
        ("def f(x):\n    g = eval\n    return g('1')\n", False),  # an alias the rules cannot follow
        ('def f(x):\n    """__import__(\'os\')"""\n    return eval(f.__doc__)\n', False),
        ("def f(x):\n    exec('y = 1')\n    return 1\n", False),  # exec stays banned
        ("def f(x):\n    return compile(x, 'a', 'eval')\n", False),
    ],
)
def test_eval_rule(code, ok):
    tests = parse_tests({"style": "function", "entry_point": "f", "public": [{"input": [1], "output": 1}]})
    rule = check_rules(code, tests)
    assert rule.passed is ok, rule.detail
    assert check_rules(code, tests, CodeRules(allow_plain_eval=False)).passed is (ok and "eval" not in code)


@pytest.mark.parametrize(
    ("code", "flagged"),
    [
        ("def f(n):\n    return 'YES' if n % 2 else 'NO'\n", False),  # vocabulary, not a lookup
        ("def f(n):\n    w = ['zero', 'one', 'two', 'three']\n    return w[n % 4]\n", False),
        (
            "def f(n):\n    if n == 17:\n        return 'YES'\n    return 'NO'\n",
            True,
        ),  # input pinned to output
        ("def f(n):\n    return {17: 'YES', 20: 'NO'}[n]\n", True),
        (
            "def f(n):\n    out = [4913, 8000, 1331]\n    return out.pop(0)\n",
            True,
        ),  # outputs only, all specific
        ("def f(n):\n    \"\"\"Returns 'YES' for 17\"\"\"\n    return 'YES' if n % 2 else 'NO'\n", False),
        (
            'def f(n):\n    """YES"""\n    if n == 17:\n        return f.__doc__\n    return \'NO\'\n',
            True,
        ),  # the code reads its docstring: then it counts as a literal
    ],
)
def test_hard_coding_rule(code, flagged):
    tests = parse_tests(
        {
            "style": "function",
            "entry_point": "f",
            "public": [
                {"input": [17], "output": "YES"},
                {"input": [20], "output": "NO"},
                {"input": [11], "output": "YES"},
            ],
        }
    )
    if "4913" in code:
        tests = parse_tests(
            {
                "style": "function",
                "entry_point": "f",
                "public": [
                    {"input": [17], "output": 4913},
                    {"input": [20], "output": 8000},
                    {"input": [11], "output": 1331},
                ],
            }
        )
    rule = check_rules(code, tests)
    assert (rule.detail["checks"]["hardcoded"] != "ok") is flagged, rule.detail


@pytest.mark.parametrize(
    ("code", "flagged"),
    [
        (  # a vocabulary keyed by the answer words: keys are looked up, not returned
            (
                "def f(n):\n    words = {'three': 3, 'seven': 7, 'twelve': 12, 'nine': 9}\n"
                "    for w, v in words.items():\n        if v == n:\n            return w\n"
            ),
            False,
        ),
        ("def f(n):\n    return {3: 'three', 7: 'seven', 12: 'twelve'}[n]\n", True),  # values returned whole
        (
            "def f(n):\n    if n == 3:\n        return 'three'\n    return 'seven' if n == 7 else 'twelve'\n",
            True,
        ),
        (
            "def f(n):\n    names = ['three', 'seven', 'twelve']\n    return names[[3, 7, 12].index(n)]\n",
            True,
        ),
    ],
)
def test_hard_coding_compares_outputs_only_with_returnable_literals(code, flagged):
    tests = parse_tests(
        {
            "style": "function",
            "entry_point": "f",
            "public": [
                {"input": [3], "output": "three"},
                {"input": [7], "output": "seven"},
                {"input": [12], "output": "twelve"},
            ],
        }
    )
    rule = check_rules(code, tests)
    assert (rule.detail["checks"]["hardcoded"] != "ok") is flagged, rule.detail


@pytest.fixture(scope="module")
def verifier() -> CodeVerifier:
    return CodeVerifier()


def _run(verifier, code: str, task: dict):
    return verifier.verify(_fenced(code), {"tests": json.dumps(task["tests"])})


@pytest.mark.slow
def test_every_reference_solution_passes_all_three_layers(verifier):
    failed = []
    for t in TASKS:
        out = _run(verifier, t["metadata"]["reference_solution"], t)
        if not all_passed(out):
            failed.append(
                (t["metadata"]["name"], [(v.layer, v.passed, v.detail) for v in out if not v.passed])
            )
    assert failed == []


@pytest.mark.slow
def test_wrong_bodies_are_rejected_everywhere(verifier):
    for t in TASKS:
        entry = t["tests"].get("entry_point", "solve")
        empty = "print()\n" if t["tests"]["style"] == "stdio" else f"def {entry}(*args):\n    return None\n"
        none_out = _run(verifier, empty, t)
        assert all_passed(none_out) is False, t["metadata"]["name"]
        hack = _run(verifier, _lookup_hack(t), t)
        assert all_passed(hack) is False, t["metadata"]["name"]
