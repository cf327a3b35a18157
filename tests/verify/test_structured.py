"""Inequality chains as intervals, systems as tuples, and the kinds of gold (rldata.verify.structured)."""

from __future__ import annotations

import pytest

from rldata.verify.structured import as_interval, choice_letter, gold_kind, system_answers


@pytest.mark.parametrize(
    ("chain", "interval"),
    [
        ("-2 \\le x \\le 3", "[-2, 3]"),
        ("2 < x \\leq 5", "(2, 5]"),
        ("$-1 < t < 4$", "(-1, 4)"),
        ("x \\geq 0", "[0, \\infty)"),
        ("x < 3", "(-\\infty, 3)"),
        ("3 > x", "(-\\infty, 3)"),
        ("7 \\ge x \\ge 2", "[2, 7]"),
        ("0 \\le y < \\frac{1}{2}", "[0, \\frac{1}{2})"),
    ],
)
def test_inequality_chains_are_intervals(chain, interval):
    assert as_interval(chain) == interval


@pytest.mark.parametrize("text", ["1 < x > 3", "x = 3", "2 < 3", "x < y", "\\infty < x", "3"])
def test_what_is_not_a_chain(text):
    assert as_interval(text) is None


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("Solving gives x = 3, y = -1", ["(3, -1)"]),
        ("so $x = 3$ and $y = -1$.", ["(3, -1)"]),
        ("We find y = 5 and x = 2.", ["(2, 5)"]),  # ordered by variable name
        ("\\boxed{a = 1, b = \\frac{1}{2}, c = 0}", ["(1, \\frac{1}{2}, 0)"]),
        ("x = 1, y = 2 or x = 2, y = 1", ["(2, 1)", "(1, 2)"]),  # a hedge
        ("First x = 1, y = 2. Wait, actually x = 2, y = 1.", ["(2, 1)"]),  # a revision
        ("x = 1, x = 2", []),  # one variable twice: not a system
        ("x = 3, y = -1. Then we check 3 + (-1) = 2 and continue with the next part", []),
    ],
)
def test_systems_are_tuples(tail, expected):
    assert system_answers(tail) == expected


@pytest.mark.parametrize(
    ("gold", "kind"),
    [
        ("C", "choice"),
        ("(C)", "choice"),
        ("\\text{(B)}", "choice"),
        ("$E$", "choice"),
        ("(3, -1)", "tuple"),
        ("\\left(1, 2, 3\\right)", "tuple"),
        ("[2, 5)", "value"),
        ("42", "value"),
        ("x", "value"),
        ("K", "value"),  # past J: not an option letter
        (None, "value"),
    ],
)
def test_gold_kinds(gold, kind):
    assert gold_kind(gold) == kind
    assert (choice_letter(gold) is not None) == (kind == "choice")
