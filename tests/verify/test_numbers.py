"""The math verifier's rewrites of numbers as models write them (rldata.verify.numbers)."""

from __future__ import annotations

import pytest

from rldata.verify.numbers import normalize, read_number


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5½", "11/2"),  # not NFKC's "51/2"
        ("3 1/4 cups", "13/4 cups"),
        ("-2 1/2", "-5/2"),
        ("\\boxed{2\\frac{3}{4}}", "\\boxed{11/4}"),
        ("2 \\tfrac12", "5/2"),
        ("2 3/2", "2 3/2"),  # improper: not a mixed number
        ("1 1/2 + 1/2 = 2", "3/2 + 1/2 = 2"),
        ("0.\\overline{3}", "1/3"),
        ("0.1\\overline{6}", "1/6"),
        ("0.\\overline{09}", "1/11"),
        ("0.\\bar{3}", "1/3"),
        ("0.\\overline{9}", "1"),
        ("0.777...", "7/9..."),
        ("0.1666...", "1/6..."),
        ("0.142857142857...", "1/7..."),
        ("3.14159...", "3.14159..."),  # not repeating: as written
        ("–3", "-3"),  # en dash
        ("= —12", "= -12"),  # em dash
        ("‒0.5", "-0.5"),  # figure dash
        ("5 – 3 = 2", "5 - 3 = 2"),
        ("pages 3–5", "pages 3 to 5"),  # a range
        ("20 — the chairs", "20 — the chairs"),  # a dash in prose
        ("1 ≤ x ≤ 6", "1  \\le  x  \\le  6"),
        ("4.800 €", "4800 €"),
        ("€12.000.", "€12000."),
        ("12,50 €", "12.50 €"),
        ("15.000 euros", "15000 euros"),
        ("1.234,56", "1234.56"),
        ("1.000", "1.000"),  # ambiguous without a currency: as written
        ("2,5", "2,5"),
        ("4 dollars and 25 cents", "4.25 dollars"),
        ("nine apples", "9 apples"),
    ],
)
def test_math_normalize(text, expected):
    assert normalize(text, math=True) == expected


def test_text_answers_are_not_rewritten():
    assert normalize("nine – 3½ ≤ 4.800 €") == "nine – 31/2 ≤ 4.800 €"  # exact/regex: as before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("40%", "40%"),
        ("\\boxed{40\\%}", None),
        ("40\\%", "40%"),
        ("40 percent", "40%"),
        ("$1,000.00", "1000.00"),
    ],
)
def test_read_number_keeps_percent(text, expected):
    assert read_number(text) == expected
