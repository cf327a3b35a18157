"""Option letters when the gold is a choice letter (rldata.verify.choice through extract_choices)."""

from __future__ import annotations

import pytest

from rldata.verify.extract import extract_choices


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is (C).", ["C"]),
        ("The answer is C.", ["C"]),
        ("Answer: B) 24", ["B"]),
        ("the correct option is D", ["D"]),
        ("So the answer is option E.", ["E"]),
        ("I choose option A.", ["A"]),
        ("Option C is correct.", ["C"]),
        ("(B) is the answer", ["B"]),
        ("\\boxed{C}", ["C"]),
        ("\\boxed{(D)}", ["D"]),
        ("\\boxed{\\text{(A)}}", ["A"]),
        ("**B**", ["B"]),
        ("C) 42", ["C"]),
        ("(E)", ["E"]),
        ("The answer is B, since 7 > 5.", ["B"]),
        ("The answer is (B). Wait, I misread: it is (A).", ["A"]),  # a revision
        ("The answer is (A) or (B).", ["A", "B"]),  # a hedge
        ("\\boxed{A} or \\boxed{C}", ["C", "A"]),
    ],
)
def test_stated_choices(text, expected):
    assert extract_choices(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A total of 7 apples remain.",  # the article
        "A better approach gives 12. So the answer is 12.",
        "The water boils at 100°C.",  # a unit
        "Option A: 5. Option B: 6.",  # option labels
        "A) 12\nB) 24\nC) 36",  # the options themselves
        "The answer is a prime number.",
        "\\boxed{A+B}",
    ],
)
def test_no_choice_stated(text):
    assert extract_choices(text) == []
