"""MathVerifier with the real math-verify: equivalences, wrong and missing answers, hostile input."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rldata.verify import for_domain, get_verifier
from rldata.verify.isolate import kill_after_s
from rldata.verify.math import MathVerifier
from rldata.verify.run import run_verifier, verify_many

HANGS_SYMPY = "\\boxed{9^{9^{9^{9}}}}"  # sympy runs far past any budget on it
START_BUDGET_S = 30.0  # a fresh verifier process after a kill (imports), on a loaded 2-core machine


@pytest.fixture(scope="module")
def mv():
    return MathVerifier()


def _one(mv, completion, gold, timeout_s=10.0):
    verdicts = run_verifier(mv, completion, {"answer": gold}, timeout_s=timeout_s)
    assert len(verdicts) == 1 and verdicts[0].layer == "answer"
    return verdicts[0]


def test_registry_and_version(mv):
    import importlib.metadata as md

    assert get_verifier("math").name == "math"
    assert for_domain("math").name == "math" and for_domain("arith").name == "math"
    assert md.version("math-verify") in mv.version


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("The answer is 0.5", "\\frac{1}{2}"),
        ("\\boxed{\\frac{1}{2}}", "0.5"),
        ("\\boxed{1/2}", "\\frac{1}{2}"),
        ("So she has 1,234 apples.", "1234"),
        ("#### 1234", "1,234"),
        ("The answer is -7.", "-7"),
        ("\\boxed{\\dfrac{6}{8}}", "3/4"),
        ("The answer is $\\sqrt{4}$", "2"),
        ("#### 18", "Janet sells 9 eggs.\nShe makes 9 * 2 = $18.\n#### 18"),  # full GSM8K solution as gold
        ("\\boxed{x^2 + 2x + 1}", "(x+1)^2"),
    ],
)
def test_equivalent_forms_pass(mv, completion, gold):
    v = _one(mv, completion, gold)
    assert v.passed is True and v.score == 1.0 and v.error is None


@pytest.mark.parametrize(
    ("completion", "gold"),
    [("The answer is 5", "6"), ("\\boxed{-7}", "7"), ("#### 1235", "1,234"), ("The answer is 0.51", "1/2")],
)
def test_wrong_answers_fail(mv, completion, gold):
    v = _one(mv, completion, gold)
    assert v.passed is False and v.score == 0.0 and v.error is None


@pytest.mark.parametrize("completion", ["", None, "   ", "I don't know.", "\\boxed{}"])
def test_no_answer_is_a_wrong_answer_not_an_error(mv, completion):
    v = _one(mv, completion, "3")
    assert v.passed is False and v.error is None
    assert v.detail == {"reason": "no_answer"}


@pytest.mark.parametrize("gold", [None, "", "  "])
def test_missing_gold_is_an_error(mv, gold):
    v = _one(mv, "The answer is 3", gold)
    assert v.passed is None and "gold" in v.error


def test_huge_completion(mv):
    v = _one(mv, "blah " * 2_000_000 + "The answer is 42.", "42")
    assert v.passed is True


@pytest.mark.parametrize(
    "completion",
    [
        "\\boxed{" * 10000,
        "{" * 100_000,
        "\\frac{" * 5000,
        "9" * 100_000,
        "\\boxed{" + "(" * 3000 + "}",
        "\x00\x01\ufffd \\boxed{\x00}",
        "\\boxed{\\left(\\right.}",
    ],
)
def test_adversarial_completions_give_a_verdict(mv, completion):
    t0 = time.monotonic()
    v = _one(mv, completion, "42", timeout_s=3.0)
    assert time.monotonic() - t0 < 6.0
    assert v.passed is not True  # never a pass; a fail, or an error verdict with a reason
    assert v.passed is False or v.error


def _many(completions, gold, timeout_s):
    t0 = time.monotonic()
    out = verify_many([("math", c, {"answer": gold}) for c in completions], timeout_s=timeout_s)
    return [vs[0] for vs in out], time.monotonic() - t0


def test_sympy_hanging_expression_times_out_into_error_verdict():
    """9^{9^{9^{9}}} ends in a CPython big-int power that no signal interrupts: the child is killed."""
    _many(["The answer is 1"], "1", 5.0)  # start the verifier process outside the timed part
    (hung, ok), elapsed = _many([HANGS_SYMPY, "The answer is 0.5"], "1/2", 1.0)
    assert hung.passed is None and hung.error.startswith("timeout")
    assert hung.extracted == "9^{9^{9^{9}}}"
    assert ok.passed is True  # the next unit still runs (in a fresh process if the old one was killed)
    assert elapsed < 1.0 + kill_after_s(1.0) + START_BUDGET_S


def test_timeout_works_outside_the_main_thread():
    """math-verify's own signal timeouts fail in threads; verify_many's limit does not."""

    def job(completions):
        assert threading.current_thread() is not threading.main_thread()
        return _many(completions, "5", 1.0)

    with ThreadPoolExecutor(1) as ex:
        (hung, ok), elapsed = ex.submit(job, [HANGS_SYMPY, "The answer is 5"]).result()
    assert hung.passed is None and hung.error.startswith("timeout")
    assert ok.passed is True
    assert elapsed < 1.0 + kill_after_s(1.0) + START_BUDGET_S


# ---- issue 12: extraction never cuts a number short, hedges fail, percent is consistent ---------
@pytest.mark.parametrize(
    ("completion", "wrong_gold", "right_gold"),
    [
        (".5", "5", "1/2"),
        ("The answer is 1.5e3", "1.5", "1500"),
        ("The answer is 6.02 x 10^23", "6.02", "6.02 \\times 10^{23}"),
        ("Answer: 10 000", "10", "10000"),
        ("The answer is not 5, it's 7", "5", "7"),
        ("so we get $10{,}000$", "000", "10000"),
        ("so the result is $\\dfrac{3}{4}$", "4", "0.75"),
        ("Answer: ４２", "4", "42"),
    ],
)
def test_numbers_are_not_cut_short(mv, completion, wrong_gold, right_gold):
    assert _one(mv, completion, wrong_gold).passed is False
    assert _one(mv, completion, right_gold).passed is True


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("\\boxed{41} or maybe \\boxed{42}", "42"),
        ("Answer: 20 degrees or 30 degrees", "20"),
        ("\\boxed{41 \\text{ or } 42}", "41"),
        ("The answer is 5. Wait, it could also be 7.", "7"),
        ("It is either 41 or 42.", "42"),
    ],
)
def test_hedged_answers_fail_with_reason(mv, completion, gold):
    v = _one(mv, completion, gold)
    assert v.passed is False and v.error is None
    assert v.detail["reason"] == "hedged" and len(v.detail["answers"]) == 2


def test_restating_one_answer_is_not_a_hedge(mv):
    assert _one(mv, "\\boxed{0.5}, that is \\boxed{\\frac{1}{2}}", "1/2").passed is True
    assert _one(mv, "The answer is 18.\n#### 18", "18").passed is True


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("That is 50%.", "50"),
        ("\\boxed{50\\%}", "50"),
        ("That is 50%.", "50\\%"),
        ("\\boxed{50\\%}", "50%"),
        ("The answer is 50 percent", "50"),
    ],
)
def test_percent_is_consistent(mv, completion, gold):
    assert _one(mv, completion, gold).passed is True


def test_version_moved_past_rldata2(mv):
    # +rldata3: revisions, markdown bold and quoted boxes; +rldata4: "\$27" alone on its line;
    # +rldata5: answers as models write them (issue 44): percents against fractions, words, ...
    assert mv.version.endswith("+rldata5")


def test_the_prompt_reaches_the_verifier_and_its_boxes_are_quotes():
    """Through verify_on_ray's items (as sample, verify and the trainer send them): a box quoted from
    the prompt is no competing answer; without the prompt it is one (a hedge)."""
    from rldata.verify.parallel import verify_on_ray

    prompt = "In the puzzle $\\boxed{A} + \\boxed{B} = 10$ and $A - B = 4$. What is $A$?"
    completion = "\\boxed{7}: from $\\boxed{A} + \\boxed{B} = 10$ and $A - B = 4$ we get $2A = 14$."
    items = [
        {"key": k, "verifier": "math", "completion": completion, "answer": "7", "prompt": p}
        for k, p in (("with", prompt), ("without", None))
    ]
    out = verify_on_ray(items, where="driver")
    assert out["with"][0].passed is True
    assert out["without"][0].passed is False and out["without"][0].detail["reason"] == "hedged"


# ---- issue 44: answers as models write them -------------------------------------------------------
# Per class: a right answer in the form models write (passes) and a wrong or hedged one (fails).
FORMS = {
    "money": (("The bill comes to $2,340.00 in total.", "2340"), ("The bill comes to $2,340.50.", "2340")),
    "money_cents": (("He pays 7 dollars and 5 cents.", "7.05"), ("He pays 7 dollars and 5 cents.", "7")),
    "number_words": (
        ("So the farmer keeps thirteen cows.", "13"),
        ("So the farmer keeps thirteen cows.", "30"),
    ),
    "number_tens": (("The answer is sixty-two.", "62"), ("The answer is sixty-two.", "60")),
    "number_scale": (
        ("The prize is 4 million dollars.", "4000000"),
        ("The prize is 4 million dollars.", "4"),
    ),
    "number_fraction": (("Three fifths of them passed.", "3/5"), ("Three fifths of them passed.", "3")),
    "percent_fraction": (("The chance of rain is 35%.", "0.35"), ("The chance of rain is 0.35%.", "0.35")),
    "percent_whole": (("The price rose by 15%.", "15"), ("The price rose by 1.5%.", "15")),
    "mixed_number": (("The rope is 4 3/4 m long.", "19/4"), ("The rope is 4 3/4 m long.", "3/4")),
    "mixed_vulgar": (("Answer: 7¾", "31/4"), ("Answer: 7¾", "73/4")),
    "interval": (("So $-4 \\le x < 1$.", "[-4, 1)"), ("So $-4 \\le x < 1$.", "[-4, 1]")),
    "interval_one_sided": (("\\boxed{x \\ge 7}", "[7, \\infty)"), ("\\boxed{x \\ge 7}", "7")),
    "system": (("Therefore y = 2 and x = -5.", "(-5, 2)"), ("Therefore y = 2 and x = -5.", "(2, -5)")),
    "repeating": (("That is $0.\\overline{27}$.", "3/11"), ("That is $0.27$.", "3/11")),
    "repeating_dots": (("So it equals 0.4166...", "5/12"), ("So it equals 0.41.", "5/12")),
    "european": (("The sofa costs 1.850 €.", "1850"), ("The sofa costs 1.850 €.", "1.85")),
    "european_decimal": (("Total: 3.105,75 €", "3105.75"), ("The answer is 3.105", "3105")),
    "dash_minus": (("The lowest point is –40 m.", "-40"), ("The lowest point is –40 m.", "40")),
    "dash_range": (("We compute 9 – 4 = 5.", "5"), ("The answer is 2–4.", "-2")),
    "leading_dot": (("The ratio is .35.", "0.35"), ("The ratio is .35.", "35")),
    "choice": (("The best option is (D).", "D"), ("The best option is (D).", "B")),
    "choice_article": (("Answer: (A) 16", "A"), ("A farmer has 16 cows, so the answer is 16.", "A")),
    "choice_hedge": (("So the answer is option E.", "E"), ("The answer is (C) or (E).", "E")),
    "final_box": (
        ("The side is \\boxed{4}, so the perimeter is 4 \\times 4 = \\boxed{16}.", "16"),
        ("The side is \\boxed{4}, so the perimeter is 4 \\times 4 = \\boxed{16}.", "4"),
    ),
    "box_hedge": (("Final answer: \\boxed{16}", "16"), ("It is \\boxed{12} or perhaps \\boxed{16}.", "16")),
    "parenthetical": (
        ("He walks 18 km. (That is 6 km a day for 3 days.)", "18"),
        ("He walks 18 km. (That is 6 km a day for 3 days.)", "3"),
    ),
    "parenthetical_hedge": (
        ("So n = 9 (because 9 > 8).", "9"),
        ("\\boxed{9} (or maybe 10 if we start at 0)", "9"),
    ),
    "rate_units": (
        ("The jet flies 1800 km in 2 hours at 900 km/h.", "1800"),
        ("It flies 1800 km in 2 hours.", "2"),
    ),
    "list_set": (
        ("Exactly three values work: 2, 4 and 8.", "2, 4, 8"),
        ("Exactly three values work: 2, 4 and 8.", "8"),
    ),
    "list_doubt": (("So x = 5 or x = -5.", "\\{-5, 5\\}"), ("Maybe x = 5 or x = -5.", "\\{-5, 5\\}")),
    "total_line": (("Total: $15 + $25 = $40", "40"), ("Total: $15 + $25 =", "40")),
    "conditional_hedge": (
        ("If the die is fair, the probability is 1/6.", "1/6"),
        ("There are 6 ways if order matters and 3 if it does not.", "3"),
    ),
    "however_would_be": (
        ("The count is 4.", "4"),
        ("The count is 4. However, with zero it would be 5.", "4"),
    ),
    "otherwise": (
        ("She needs 5 boxes.", "5"),
        ("She needs 5 boxes, if each holds 6; otherwise 6 boxes.", "6"),
    ),
    "cutoff_retraction": (
        ("The sum is 30. Wait, I dropped a term: the sum is 30 + 5 = 35.", "35"),
        ("The sum is 30. Wait, I dropped a term, so the sum is 30 +", "30"),
    ),
    "retraction_says_wrong": (
        ("The answer is 9. Let me double-check: 3 × 3 = 9.", "9"),
        ("The answer is 9. I made a mistake.", "9"),
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_answers_as_models_write_them(mv, form):
    (right, gold_right), (wrong, gold_wrong) = FORMS[form]
    assert _one(mv, right, gold_right).passed is True, (right, gold_right)
    v = _one(mv, wrong, gold_wrong)
    assert v.passed is False and v.error is None, (wrong, gold_wrong, v)


@pytest.mark.parametrize(
    ("completion", "gold", "passed"),
    [
        ("\\boxed{50\\%}", "0.5", True),  # a fraction gold in [0, 1]: 50% is 1/2
        ("That is 50%.", "1/2", True),
        ("The answer is 0.5.", "50\\%", True),
        ("The answer is 0.5%.", "1/2", False),  # never the bare number against a fraction
        ("The answer is 0.5.", "0.5\\%", False),
        ("The answer is 50%.", "50", True),  # a whole-number gold: the percent as written
        ("The answer is 5%.", "50", False),
        ("The answer is 1%.", "1", True),  # 1 is whole: read as the number
        ("The answer is 100%.", "1", False),
    ],
)
def test_percent_against_fractions_and_whole_numbers(mv, completion, gold, passed):
    assert _one(mv, completion, gold).passed is passed


def test_choice_gold_reads_letters_only(mv):
    assert _one(mv, "The answer is (C).", "(C)").passed is True
    assert _one(mv, "\\boxed{\\text{(B)}}", "B").passed is True
    assert _one(mv, "The answer is (B). Wait, I misread: it is (C).", "C").passed is True  # a revision
    v = _one(mv, "The answer is 42.", "C")
    assert v.passed is False and v.detail == {"reason": "no_answer"}
    assert _one(mv, "A) 12\nB) 24\nC) 36", "C").passed is False  # an option list states no choice


def test_a_list_is_a_set_against_a_set_gold_and_a_hedge_otherwise(mv):
    assert _one(mv, "The roots are 1 and 6.", "\\{1, 6\\}").passed is True
    assert _one(mv, "The roots are 6 and 1.", "1, 6").passed is True
    v = _one(mv, "The roots are 1 and 6.", "6")
    assert v.passed is False and v.detail["reason"] == "hedged"


def test_char_level_garbage_is_a_plain_fail_never_an_error():
    """issue 45 §5: what the bundled char-level model writes for GSM8K prompts (real samples, plus
    seeded garbage of its alphabet) is a wrong answer: passed False, no error verdict."""
    import random

    real = [
        "2<calc>24<calc><calc>24444<calc><calc><calc>25",
        "<calc><calc><calc><calc>244432<calc> 24<calc>2",
        "242)<calc>22242<calc><calc>24<calc>",
        "1444",
        "14414+4444)44444",
        "244<calc>244<calc>24<calc><calc>254*",
        "2144<calc>2<calc>244</calc>",
        "4<tool>44<calc>44344433444",
        "<calc>2)12)<calc><calc><calc>2)<calc>1<calc><calc>",
        "44 424444</calc>",
        "1<calc>12)<calc>2<calc>12+44<calc>2<calc>",
        "4444)4)444</calc>",
    ]
    rng = random.Random(45)
    pieces = [
        *"0123456789+-*/=() <>.,$%",
        "<calc>",
        "</calc>",
        "<tool>",
        "\\boxed{",
        "}",
        "\n",
        "1/2",
        "a",
        "x",
    ]
    fuzz = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 60))) for _ in range(600)]
    golds = ["18", "3", "0.5", "1,234", "\\frac{7}{2}"]
    items = [("math", c, {"answer": golds[i % len(golds)]}) for i, c in enumerate(real + fuzz)]
    out = [vs[0] for vs in verify_many(items, timeout_s=10.0)]
    errors = [(c, v.error) for (_, c, _), v in zip(items, out) if v.passed is None or v.error]
    assert errors == []
    assert all(v.passed is False for v in out[: len(real)])
