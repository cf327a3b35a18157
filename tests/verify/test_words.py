"""Number words as digits (rldata.verify.words), and the words that are not counts."""

from __future__ import annotations

import pytest

from rldata.verify.words import words_to_digits


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She is left with six.", "She is left with 6."),
        ("Seventeen students", "17 students"),
        ("twenty-one", "21"),
        ("twenty one", "21"),
        ("forty", "40"),
        ("ninety-nine", "99"),
        ("three hundred and twelve", "312"),
        ("two thousand five hundred", "2500"),
        ("zero", "0"),
        ("three or four", "3 or 4"),
        ("between two and three", "between 2 and 3"),  # two numbers, not "two and three" as one
        ("two thirds of the pie", "2/3 of the pie"),
        ("one-half", "1/2"),
        ("two and a half miles", "2 1/2 miles"),
        ("7 and a half", "7 1/2"),
        ("3 million", "3000000"),
        ("1.5 billion", "1500000000"),
        ("2,500 thousand", "2500000"),
    ],
)
def test_number_words_become_digits(text, expected):
    assert words_to_digits(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the second one",
        "each one of them",
        "no one came",
        "one of the following",
        "a six-sided die",
        "one-to-one",
        "someone, often, anyone, tone",
        "a million reasons",  # no digit or number word before the scale
    ],
)
def test_words_that_are_not_counts_stay(text):
    assert words_to_digits(text) == text
