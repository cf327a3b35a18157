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


def test_percent_is_not_a_fraction(mv):
    assert _one(mv, "\\boxed{50\\%}", "0.5").passed is False
    assert _one(mv, "That is 50%.", "0.5").passed is False


def test_version_moved_past_rldata2(mv):
    # +rldata3: revisions, markdown bold and quoted boxes; +rldata4: "\$27" alone on its line
    assert mv.version.endswith("+rldata4")


def test_the_prompt_reaches_the_verifier_and_its_boxes_are_quotes():
    """Through verify_on_ray's items (as sample, verify and the trainer send them): a box quoted from
    the prompt is no competing answer; without the prompt it is one (a hedge)."""
    from rldata.verify.parallel import verify_on_ray

    prompt = "In the puzzle $\\boxed{A} + \\boxed{B} = 10$ and $A - B = 4$. What is $A$?"
    completion = "From $\\boxed{A} + \\boxed{B} = 10$ and $A - B = 4$: $2A = 14$, so \\boxed{7}."
    items = [
        {"key": k, "verifier": "math", "completion": completion, "answer": "7", "prompt": p}
        for k, p in (("with", prompt), ("without", None))
    ]
    out = verify_on_ray(items, where="driver")
    assert out["with"][0].passed is True
    assert out["without"][0].passed is False and out["without"][0].detail["reason"] == "hedged"
