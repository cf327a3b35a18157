"""The format rules of ``rldata lint``, each on small crafted tasks that should and should not trip it."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata.errors import ConfigError
from rldata.quality.config import LintConfig
from rldata.quality.rules import RULES, guess_chance, select_rules

CFG = LintConfig(max_prompt_chars=200)

# rule -> (tasks that trip it, tasks that do not): (prompt, answer) pairs
CASES = {
    "answer.sentinel": (
        [("Prove it.", "proof"), ("Find x.", "NotFound"), ("Find y.", "  "), ("Find z.", "N/A"), ("Find w.", None)],
        [("Find x.", "0"), ("What is the empty set called?", "the empty set"), ("Find the root.", "none of them is 2")],
    ),
    "answer.guessable": (
        [("Is 7 prime?", "Yes"), ("True or false: 2 > 1.", "true"), ("Pick one. (A) 2 (B) 3 (C) 4 (D) 5", "C"),
         ("Which?\nA. 1\nB. 2", "(B)")],
        [("What is 3+4?", "7"), ("Name a vowel.", "a"), ("Is it? (A) yes", "B"), ("Which letter comes after B?", "C")],
    ),
    "prompt.multi_part": (
        [("(a) Find x. (b) Find y.", "3"), ("Part 1: add. Part 2: multiply.", "6"), ("(i) one (ii) two", "2")],
        [("Find f(a) when a = 3.", "9"), ("A part of the 12 apples, 2, is eaten.", "10")],
    ),
    "prompt.proof": ([("Prove that there are infinitely many primes.", "proof"), ("Show that x = 2.", "2")],
                     [("Proofread this? No: what is 2+2?", "4"), ("How many sides does a square have?", "4")]),
    "prompt.figure": (
        [("[asy]draw((0,0)--(1,1));[/asy] Find the slope.", "1"), ("In the figure below, find x.", "4"),
         ("Using the diagram shown, find y.", "2"), ("See https://example.com/p.png and find z.", "1"),
         ("![graph](g.png) Find the intercept.", "3")],
        [("A figure skater spins 3 times. How many spins?", "3"), ("Figure out 2+2.", "4")],
    ),
    "prompt.too_long": ([("x" * 201, "1")], [("x" * 200, "1")]),
    "prompt.language": ([("这是一个很长的中文数学问题：二加二等于几？", "4"), ("Сколько будет два плюс два? Ответьте числом.", "4")],
                        [("What is two plus two?", "4"), ("¿Cuánto es dos más dos? Responda con un número.", "4"), ("2+2=", "4")]),
    "semantic.no_solution_leakage": (
        [("Compute 3*3. The answer is 9.", "9"), ("Find x. Answer: 42", "42"), ("Solve. \\boxed{7}", "7"),
         ("Solve it.\n#### 12", "12"), ("Which city is the capital of France? (Paris is the capital)", "Paris is the capital")],
        [("Compute 9*3.", "27"), ("She has 9 apples and eats none. How many?", "9"), ("What is 12?", "12"),
         ("The answer is not obvious: compute 2+5.", "7")],
    ),
}  # fmt: skip


def _frame(pairs) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "task_id": [f"t{i}" for i in range(len(pairs))],
            "prompt": [p for p, _ in pairs],
            "answer": [a for _, a in pairs],
            "domain": ["math"] * len(pairs),
            "tests": [None] * len(pairs),
        },
        schema={
            "task_id": pl.String,
            "prompt": pl.String,
            "answer": pl.String,
            "domain": pl.String,
            "tests": pl.String,
        },
    )


@pytest.mark.parametrize("rule", sorted(CASES))
def test_a_rule_trips_on_its_cases_and_on_nothing_else(rule):
    bad, good = CASES[rule]
    check = RULES[rule].check
    hits = check(_frame(bad), CFG)
    assert sorted(hits["task_id"]) == sorted(f"t{i}" for i in range(len(bad))), hits
    assert all(isinstance(json.loads(d), dict) for d in hits["detail"])
    assert check(_frame(good), CFG).height == 0


def test_a_code_task_with_tests_and_no_answer_is_not_a_sentinel():
    df = _frame([("Write f.", None)]).with_columns(pl.lit('{"hidden": []}').alias("tests"))
    assert RULES["answer.sentinel"].check(df, CFG).height == 0


def test_the_chance_pass_rate_is_in_the_detail():
    assert guess_chance("B", "Pick: (A) 1 (B) 2 (C) 3 (D) 4") == ("multiple_choice", 0.25, 4)
    assert guess_chance("no.", "Is 9 prime?") == ("yes_no", 0.5, 2)
    assert guess_chance("E", "no options here") is None
    detail = json.loads(RULES["answer.guessable"].check(_frame([("Is 4 even?", "yes")]), CFG)["detail"][0])
    assert detail == {"kind": "yes_no", "chance_pass_rate": 0.5, "options": 2}


def test_rules_are_picked_by_name_or_prefix_and_an_unknown_one_is_refused():
    assert [r.name for r in select_rules(("semantic",))] == [
        "semantic.no_solution_leakage", "semantic.oracle_max", "semantic.canary_floor",
        "semantic.verifier_determinism",
    ]  # fmt: skip
    assert [r.name for r in select_rules(("suspect_key", "answer.sentinel"))] == [
        "answer.sentinel",
        "suspect_key",
    ]
    with pytest.raises(ConfigError) as e:
        select_rules(("semantics",))
    assert e.value.field == "rules" and "unknown rule 'semantics'" in str(e.value)
    # the RFC 008 ids, where RFC 008 names the check
    assert {"semantic.oracle_max", "semantic.canary_floor", "semantic.verifier_determinism"} <= set(RULES)
    assert all(r.severity in ("error", "warning", "info") for r in RULES.values())
