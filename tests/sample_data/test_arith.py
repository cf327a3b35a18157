"""The arithmetic task generator: knobs, determinism, correct answers, the bundled files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from rldata.sample_data import arith


def _value(prompt: str) -> int:
    assert re.fullmatch(r"[0-9+\-*()]+=", prompt), prompt  # nothing but digits, operators, parens
    return eval(prompt[:-1])


def _numbers(prompt: str) -> list[str]:
    return re.findall(r"\d+", prompt)


def test_answers_match_python_eval_at_every_level():
    for level in arith.LEVELS:
        rows = arith.generate(200, seed=3, level=level)  # level 1 has 255 distinct prompts
        assert len(rows) == 200
        for r in rows:
            assert r["prompt"].endswith("=") and " " not in r["prompt"]
            assert r["answer"] == str(_value(r["prompt"]))
            assert r["metadata"]["level"] == level


def test_knobs_shape_the_expressions():
    rows = arith.generate(200, seed=0, digits=2, n_operands=4, operators="+-", allow_negative=True)
    assert all(len(_numbers(r["prompt"])) == 4 for r in rows)
    assert all(len(n) <= 2 for r in rows for n in _numbers(r["prompt"]))
    assert any(len(n) == 2 for r in rows for n in _numbers(r["prompt"]))
    assert not any("*" in r["prompt"] or "(" in r["prompt"] for r in rows)
    assert any(int(r["answer"]) < 0 for r in rows)  # allow_negative lets results go below zero

    mul = arith.generate(200, seed=0, digits=3, operators="*", mul_digits=1)
    assert all(len(_numbers(r["prompt"])[1]) == 1 for r in mul)  # the right operand of * is capped
    assert any(len(_numbers(r["prompt"])[0]) == 3 for r in mul)

    par = arith.generate(200, seed=0, n_operands=3, operators="+-*", parens=True)
    assert all(r["prompt"].count("(") == 1 and r["prompt"].count(")") == 1 for r in par)
    assert all(r["category"].endswith("/p") and r["metadata"]["parens"] for r in par)


def test_non_negative_by_default_and_precedence():
    rows = arith.generate(500, seed=1, n_operands=3, operators="+-*")
    assert all(int(r["answer"]) >= 0 for r in rows)
    assert arith.evaluate([2, "+", 3, "*", 4]) == 14
    assert arith.evaluate([8, "-", 3, "-", 2]) == 3  # left-associative
    assert arith.evaluate(["(", 2, "+", 3, ")", "*", 4]) == 20
    assert arith.evaluate([8, "-", "(", 3, "-", 2, ")"]) == 7


def test_rows_carry_category_and_metadata():
    rows = arith.generate(50, seed=0, digits=2, n_operands=2, operators="+")
    r = rows[0]
    assert (r["domain"], r["source"], r["category"]) == ("math", "arith", "add/d2/o2")
    assert r["metadata"] == {
        "level": None,
        "digits": 2,
        "operands": 2,
        "ops": "+",
        "parens": False,
        "split": "train",
    }
    mixed = arith.generate(100, seed=0, n_operands=3, operators="+*")
    assert {m["category"] for m in mixed} <= {"add/d1/o3", "mul/d1/o3", "mix/d1/o3"}
    assert any(m["category"] == "mix/d1/o3" and m["metadata"]["ops"] == "+*" for m in mixed)


def test_deterministic_for_a_seed_and_distinct_prompts():
    a = arith.generate(200, seed=7, level=4)
    assert a == arith.generate(200, seed=7, level=4)
    assert a != arith.generate(200, seed=8, level=4)
    assert len({r["prompt"] for r in a}) == 200
    # the same call in a fresh interpreter with another hash seed (str seeds must not depend on it);
    # the module is loaded from its file so the child skips importing the whole package
    code = (
        "import importlib.util, json, sys; s = importlib.util.spec_from_file_location('a', sys.argv[1]); "
        "m = importlib.util.module_from_spec(s); sys.modules['a'] = m; "
        "s.loader.exec_module(m); "
        "print(json.dumps(m.generate(20, seed=7, level=4)))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, arith.__file__], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert json.loads(out) == arith.generate(20, seed=7, level=4)


def test_exclude_and_exhausted_knob_setting():
    held = {r["prompt"] for r in arith.generate(50, seed=0, level=1)}
    rows = arith.generate(100, seed=0, level=1, exclude=held)
    assert not held & {r["prompt"] for r in rows}
    with pytest.raises(ValueError, match="distinct prompts"):
        arith.generate(101, seed=0, digits=1, operators="+")  # only 100 one-digit sums exist


def test_spec_checks():
    with pytest.raises(ValueError, match="operators"):
        arith.ArithSpec(operators="/")
    with pytest.raises(ValueError, match="parens"):
        arith.ArithSpec(n_operands=2, parens=True)
    with pytest.raises(ValueError, match="digits"):
        arith.ArithSpec(digits=0)
    with pytest.raises(ValueError, match="level"):
        arith.generate(5, seed=0, level=9)


def test_bundled_files_match_the_generator_and_are_disjoint():
    train, heldout = arith.load_bundled("train"), arith.load_bundled("heldout")
    assert len(train) == sum(arith.BUNDLE_TRAIN.values())
    assert len(heldout) == sum(arith.BUNDLE_HELDOUT.values())
    assert {r["metadata"]["split"] for r in train} == {"train"}
    assert {r["metadata"]["split"] for r in heldout} == {"heldout"}
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in heldout}
    assert {r["metadata"]["level"] for r in train} == set(arith.LEVELS)
    assert all(r["answer"] == str(_value(r["prompt"])) for r in train + heldout)
    assert (train, heldout) == arith.make_bundle(seed=0)  # the documented command regenerates them


def test_cli_writes_jsonl(tmp_path):
    out = tmp_path / "t.jsonl"
    arith._main(["--out", str(out), "-n", "30", "--digits", "2", "--operands", "3", "--operators", "+-"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 30 and all(len(_numbers(r["prompt"])) == 3 for r in rows)
