"""Answer extraction: the formats models emit, and bounded work on hostile input."""

from __future__ import annotations

import time

import pytest

from rldata.verify.extract import TAIL_CHARS, clean_number, extract_answer, extract_answers


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
        ("the total is -12.", "-12"),
        ("it costs $1,234,567.89 in total.", "1234567.89"),
        ("the ratio is 3/4.", "3/4"),
        ("about 3.5 km.", "3.5"),
        ("\u22126 degrees.", "-6"),  # unicode minus
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
    assert extract_answer("The answer is St. Louis.", numeric=False) == "St. Louis"


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


# ---- issue 12: numbers read whole, NFKC, LaTeX fallbacks, hedges ---------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (".5 is the answer", ["0.5"]),
        ("The answer is .5", ["0.5"]),
        ("The answer is 1.5e3", ["1.5*10^(3)"]),
        ("The answer is 2.5E-4.", ["2.5*10^(-4)"]),
        ("The answer is 6.02 x 10^23", ["6.02*10^(23)"]),
        ("\\boxed{6.02 \\times 10^{23}}", ["6.02*10^(23)"]),
        ("about 6.02×10²³ molecules.", ["6.02*10^(23)"]),  # superscripts: not glued into 1023 by NFKC
        ("Answer: 10 000", ["10000"]),
        ("Answer: 10\u202f000", ["10000"]),  # narrow no-break space
        ("Answer: 10\\,000", ["10000"]),
        ("The answer is 1'000", ["1000"]),
        ("The answer is 1.000.000", ["1000000"]),
        ("The answer is 1,00,000", ["100000"]),
        ("The answer is 1.000", ["1.000"]),  # one dot group is a decimal
        ("The answer is 1,5", ["1,5"]),  # ambiguous: kept as written, never a plain number
        ("The answer is not 5, it's 7", ["7"]),
        ("The answer isn't 5; see below", []),
        ("Answer: ４２", ["42"]),
        ("\\boxed{４２}", ["42"]),
        ("so we get $10{,}000$", ["10000"]),
        ("so the result is $\\dfrac{3}{4}$", ["\\dfrac{3}{4}"]),
        ("so the result is \\frac{3}{4}", ["\\frac{3}{4}"]),
        ("\\boxed{50\\%}", ["50"]),
        ("That is 50%.", ["50"]),
        ("The answer is 2\\pi", ["2\\pi"]),  # not "2"
        ("The answer is 5x", ["5x"]),
    ],
)
def test_numbers_are_read_whole(text, expected):
    assert extract_answers(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{41} or maybe \\boxed{42}", ["42", "41"]),
        ("Answer: 20 degrees or 30 degrees", ["20", "30"]),
        ("\\boxed{41 \\text{ or } 42}", ["41", "42"]),
        ("The answer is either 3 or 4.", ["3", "4"]),
        ("The answer is 5. Wait, the answer is 7.", ["7", "5"]),
        ("It is 41 or maybe 42.", ["41", "42"]),
        ("The answer is 5. Check: \\boxed{6}", ["6", "5"]),
        ("Final answer: \\boxed{5}", ["5"]),  # the marker points at the box: one answer
        ("#### 18\nThe answer is 18.", ["18"]),
    ],
)
def test_every_stated_answer_is_returned(text, expected):
    assert extract_answers(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "so 3 + 4 =",
        "Is it 42? Let me think about it",
        "we compute 2^{10",
        "the value is not 5",
        "Let me think. First, the triangle has 3",
        "The target is 100 points. First we count the points",
        "We need 42. " + "Then we think about many other things at length and never conclude. " * 3,
    ],
)
def test_final_number_only_when_it_plainly_ends_the_text(text):
    assert extract_answers(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("27", "27"),
        ("think\n27", "27"),
        ("so 3 + 4 = 7", "7"),
        ("That makes 12 in total.", "12"),
        ("$\\frac{1}{2}$", "\\frac{1}{2}"),
    ],
)
def test_final_number_that_ends_the_text(text, expected):
    assert extract_answer(text) == expected
