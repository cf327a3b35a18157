"""Answer extraction: the formats models emit, and bounded work on hostile input."""

from __future__ import annotations

import time

import pytest

from rldata.verify.extract import TAIL_CHARS, clean_number, extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # \boxed{}: last one wins, nested braces kept, nested boxes unwrapped
        ("so the result is \\boxed{42}.", "42"),
        ("first \\boxed{1} then corrected: \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\boxed{3}}", "3"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed{ 1,234 }", "1234"),
        ("\\fbox{7}", "7"),
        ("\\boxed {8}", "8"),
        # #### (GSM8K)
        ("She makes 9 * 2 = $18.\n#### 18", "18"),
        ("#### 1,234", "1234"),
        ("#### -5", "-5"),
        # "The answer is"
        ("The answer is 42", "42"),
        ("the answer is: $1,234.", "1234"),
        ("Therefore, the final answer is $\\frac{3}{4}$.", "\\frac{3}{4}"),
        ("So the answer is \\frac{1}{2}.", "\\frac{1}{2}"),
        ("THE ANSWER IS 7 apples", "7"),
        ("The answer is $5$.", "5"),
        # A: / Answer:
        ("Q: 2+2?\nA: 4", "4"),
        ("Answer: 3/4", "3/4"),
        ("answer: -0.25", "-0.25"),
        # final number
        ("we get 10-3 = 7", "7"),
        ("the total is -12", "-12"),
        ("it costs $1,234,567.89 in total", "1234567.89"),
        ("ratio 3/4", "3/4"),
        ("about 3.5 km.", "3.5"),
        ("\u22126 degrees", "-6"),  # unicode minus
    ],
)
def test_formats(text, expected):
    assert extract_answer(text) == expected


def test_priority_boxed_over_markers_over_final_number():
    assert extract_answer("The answer is 5. Check: \\boxed{6}. Then 7") == "6"
    assert extract_answer("#### 3\nThe answer is 4. And 9") == "3"
    assert extract_answer("The answer is 4. Answer: 8. And 9") == "4"
    assert extract_answer("Answer: 8, and 9 more") == "8"


@pytest.mark.parametrize("text", [None, "", "   ", "no digits at all", "\\boxed{}", "\\boxed{ }"])
def test_no_answer(text):
    assert extract_answer(text) is None


def test_unclosed_box_falls_through_to_other_rules():
    assert extract_answer("\\boxed{12 and then the model stopped. The answer is 5") == "5"


def test_text_mode_returns_rest_of_line_and_no_final_number():
    assert extract_answer("The answer is Paris.", numeric=False) == "Paris"
    assert extract_answer("Answer: New York\nbye", numeric=False) == "New York"
    assert extract_answer("I think 42", numeric=False) is None


def test_clean_number():
    assert clean_number("$1,234.") == "1234"
    assert clean_number("-3/4") == "-3/4"
    assert clean_number("50%") == "50"
    assert clean_number("x+1") is None
    assert clean_number("1,2") is None  # not a thousands group


def _timed(text, **kw):
    t0 = time.perf_counter()
    out = extract_answer(text, **kw)
    return out, time.perf_counter() - t0


def test_huge_completion_scans_only_the_tail():
    huge = "x" * 10_000_000 + " so the answer is 17."
    out, secs = _timed(huge)
    assert out == "17"
    assert secs < 0.5
    # An answer before the scanned tail is out of reach, by design.
    assert extract_answer("The answer is 3. " + "y" * (TAIL_CHARS + 10)) is None


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 10000,
        "{" * 1_000_000,
        "}" * 1_000_000,
        "\\boxed{" * 3000 + "5" + "}" * 3000,
        "A:" * 2_000_000,
        "The answer is " * 500_000,
        "1," * 3_000_000,
        "#### " * 500_000,
        "$" * 1_000_000,
        "answer is $" + "a" * 100_000,
        "-" * 1_000_000 + "1",
        "9" * 1_000_000,
    ],
)
def test_adversarial_inputs_are_fast(text):
    out, secs = _timed(text)
    assert secs < 0.5, f"took {secs:.2f}s"
    out_text, secs = _timed(text, numeric=False)
    assert secs < 0.5
    assert out is None or len(out) <= TAIL_CHARS
    assert out_text is None or len(out_text) <= TAIL_CHARS


def test_deeply_nested_box_returns_some_content_quickly():
    out, secs = _timed("\\boxed{" * 3000 + "5" + "}" * 3000)
    assert secs < 0.5
    assert out is not None and "5" in out
