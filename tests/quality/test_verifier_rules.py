"""The verifier rules of ``rldata lint``: the real verifiers run on the gold written as a model
writes it, on no-op answers, and twice; broken verifiers (by path) and broken keys are caught."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata.quality.verifier_rules import CANARIES, oracle_forms, verifier_findings

RULES = (
    "semantic.oracle_max",
    "semantic.canary_floor",
    "semantic.verifier_determinism",
    "answer.unparseable",
)
HERE = "tests.quality.verifiers_for_tests"


def _tasks(rows) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"task_id": f"t{i}", "prompt": p, "answer": a, "domain": d, "tests": None, "metadata": None}
            for i, (p, a, d) in enumerate(rows)
        ],
        schema={k: pl.String for k in ("task_id", "prompt", "answer", "domain", "tests", "metadata")},
    )


def _found(df: pl.DataFrame) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for tid, rule in df.select("task_id", "rule").iter_rows():
        out.setdefault(rule, set()).add(tid)
    return out


@pytest.fixture(scope="module")
def math_findings():
    rows = [
        ("What is 9*3?", "27", "math"),  # clean
        ("What is 1/2 + 1/4?", "\\frac{3}{4}", "math"),  # clean, LaTeX gold
        ("A shop sells 1,200 pens. How many?", "1,200", "math"),  # clean, grouped digits
        ("Compute 3*3. The answer is 9.", "9", "math"),  # the question repeated passes: canary
        ("Simplify.", "\\frac{1}{", "math"),  # a key math-verify cannot parse
        ("Is 7 prime? Answer yes or no.", "yes", "math"),  # math-verify cannot read "yes" stated plainly
        # exact match reads "The final answer is $\\boxed{Paris}$." as a hedge between "paris" and
        # "\\boxed{paris}" (a false negative of the exact verifier this rule found): a finding
        ("Name the capital of France.", "Paris", "text"),
        ("Write add(a, b).", None, "code"),  # code: skipped
    ]
    df, skipped = verifier_findings(_tasks(rows), RULES, verifier=None, timeout_s=10)
    return _found(df), df, skipped


def test_real_verifiers_pass_their_golds_and_fail_the_noops(math_findings):
    found, _, skipped = math_findings
    clean = {"t0", "t1", "t2"}
    assert not clean & set().union(*found.values())
    assert found["semantic.canary_floor"] == {"t3"}
    assert found["answer.unparseable"] == {"t4"}
    assert found["semantic.oracle_max"] == {"t4", "t5", "t6"}
    assert "semantic.verifier_determinism" not in found  # math-verify is deterministic
    assert set(skipped.values()) == {1}  # the code task


def test_a_finding_says_which_answer_did_what(math_findings):
    _, df, _ = math_findings
    detail = json.loads(
        df.filter((pl.col("task_id") == "t3") & (pl.col("rule") == "semantic.canary_floor"))["detail"][0]
    )
    assert detail["canary"] == "question" and detail["passed"] is True and detail["extracted"] == "9"
    oracle = json.loads(
        df.filter((pl.col("task_id") == "t5") & (pl.col("rule") == "semantic.oracle_max"))["detail"][0]
    )
    assert oracle["form"] == "stated" and oracle["passed"] is False
    exact = json.loads(
        df.filter((pl.col("task_id") == "t6") & (pl.col("rule") == "semantic.oracle_max"))["detail"][0]
    )
    assert exact["form"] == "boxed" and exact["detail"]["reason"] == "hedged"


@pytest.mark.parametrize(
    ("verifier", "rule"),
    [
        ("Flip", "semantic.verifier_determinism"),
        ("Anything", "semantic.canary_floor"),
        ("Nothing", "semantic.oracle_max"),
    ],
)
def test_a_broken_verifier_is_caught_on_every_task(verifier, rule):
    tasks = _tasks([(f"What is {i}+{i}?", str(2 * i), "math") for i in range(12)])
    df, _ = verifier_findings(tasks, RULES, verifier=f"{HERE}:{verifier}", timeout_s=10)
    hit = _found(df).get(rule, set())
    assert hit == set(tasks["task_id"])


def test_a_coin_verifier_is_caught_on_nearly_every_task():
    """A fair coin scored on 6 answers (2 oracle forms, 4 canaries) twice per task agrees with itself
    on all 6 with probability 2^-6, so a task escapes 1 time in 64: 4 or more of 12 escape with
    probability < 1e-4."""
    tasks = _tasks([(f"What is {i}+{i}?", str(2 * i), "math") for i in range(12)])
    df, _ = verifier_findings(tasks, RULES, verifier=f"{HERE}:Coin", timeout_s=10)
    assert len(_found(df).get("semantic.verifier_determinism", set())) >= 9


def test_the_forms_and_canaries_are_what_a_model_writes():
    forms = dict(oracle_forms("42"))
    assert forms["boxed"].endswith("$\\boxed{42}$.") and forms["stated"].endswith("The answer is 42.")
    assert [f for f, _ in oracle_forms("\\frac{1}{2}")] == ["boxed"]  # LaTeX is not stated as prose
    assert [c for c, _ in CANARIES] == ["empty", "question", "refusal", "empty_box"]
